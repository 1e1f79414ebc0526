/* ck_ir.h — ckptc's own intermediate representation, shared by every layer.
 *
 * The frontend builds a ck_graph from an ONNX file; the passes rewrite it; codegen reads it.
 * Nothing here knows about protobuf. Everything a graph owns (nodes, values, attributes, names,
 * constant data) lives in one arena: ck_graph_free releases all of it at once. The one exception
 * is weight data the loader did not copy (external data mapped read-only, raw_data left in the
 * parsed protobuf): values point into it, and the graph holds it (ck_graph_hold) until freed.
 *
 *   ck_graph *g = ck_graph_new();
 *   ck_value *x = ck_graph_add_value(g, "x", CK_F32, 2, (int64_t[]){4, 8}, CK_ROLE_INPUT);
 *   ck_node  *n = ck_graph_add_node(g, CK_OP_RELU, "/relu", 1, &x, 1);
 *   ck_infer_node(n, &diag);        // fills n->out[0]'s dtype and shape
 *   ck_graph_verify(g, &diag);      // every invariant, callable after any pass
 *   ck_graph_free(g);
 *
 * Every op is declared once, in ops.def (name, arity, flags, shape-inference function). Errors a
 * user can cause go into a ck_diag as one line each and come back as a ck_status; broken
 * invariants go through CK_ASSERT.
 */
#ifndef CK_IR_H
#define CK_IR_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define CK_VERSION "0.1.0"
#define CK_MAX_RANK 8

/* ---------------------------------------------------------------- status and diagnostics */

typedef enum {
    CK_OK = 0,
    CK_ERR_IO,          /* file missing, unreadable, too large */
    CK_ERR_PARSE,       /* not a valid ONNX protobuf */
    CK_ERR_MODEL,       /* valid protobuf, invalid model (missing graph, bad opset, bad data) */
    CK_ERR_UNSUPPORTED, /* op, dtype or attribute ckptc does not handle */
    CK_ERR_SHAPE,       /* inconsistent shapes */
    CK_ERR_USAGE,       /* bad flag or value */
    CK_ERR_NOMEM,
} ck_status;

/* A list of user-facing messages, one line each. Owned by the caller; malloc-backed so it
 * survives the graph it describes. */
typedef struct ck_diag {
    char **msg;
    int n, cap;
} ck_diag;

void ck_diag_add(ck_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ck_diag_clear(ck_diag *d);
const char *ck_status_name(ck_status s);

void ck_assert_fail(const char *file, int line, const char *expr);
#define CK_ASSERT(e) ((e) ? (void)0 : ck_assert_fail(__FILE__, __LINE__, #e))

/* ---------------------------------------------------------------- arena */

typedef struct ck_arena ck_arena;
ck_arena *ck_arena_new(void);
void *ck_arena_alloc(ck_arena *a, size_t size);            /* zeroed, 16-byte aligned; NULL on OOM */
char *ck_arena_strdup(ck_arena *a, const char *s);
char *ck_arena_strndup(ck_arena *a, const char *s, size_t n);
size_t ck_arena_used(const ck_arena *a);
void ck_arena_free(ck_arena *a);

/* ---------------------------------------------------------------- dtypes */

/*  enum      name       bytes  onnx code */
#define CK_DTYPES(X)              \
    X(UNDEF, "undefined", 0, 0)   \
    X(F32,   "float32",   4, 1)   \
    X(U8,    "uint8",     1, 2)   \
    X(I8,    "int8",      1, 3)   \
    X(I16,   "int16",     2, 5)   \
    X(I32,   "int32",     4, 6)   \
    X(I64,   "int64",     8, 7)   \
    X(BOOL,  "bool",      1, 9)   \
    X(F16,   "float16",   2, 10)  \
    X(F64,   "float64",   8, 11)

typedef enum {
#define X(e, name, bytes, onnx) CK_##e,
    CK_DTYPES(X)
#undef X
    CK_DTYPE_COUNT
} ck_dtype;

const char *ck_dtype_name(ck_dtype t);
size_t ck_dtype_size(ck_dtype t);
ck_dtype ck_dtype_from_onnx(int32_t code);   /* CK_UNDEF when unsupported */
const char *ck_onnx_dtype_name(int32_t code); /* for messages about unsupported types */
bool ck_dtype_is_float(ck_dtype t);
bool ck_dtype_is_int(ck_dtype t);            /* signed/unsigned integers, not bool */

/* ---------------------------------------------------------------- values */

typedef enum {
    CK_ROLE_INPUT,       /* fed by the user each step */
    CK_ROLE_PARAM,       /* float initializer to train: all of them, or those ckptc.trainable lists
                          * (autodiff drops those --freeze matches or that never reach the loss) */
    CK_ROLE_BUFFER,      /* state updated by the step, not by the optimizer (BN running stats) */
    CK_ROLE_CONST,       /* constant data: non-float initializers, Constant nodes, folded values */
    CK_ROLE_ACTIVATION,  /* produced by a node */
    CK_ROLE_GRAD,
    CK_ROLE_OPT_STATE,
} ck_role;
const char *ck_role_name(ck_role r);

typedef struct ck_node ck_node;

typedef struct ck_value {
    int id;
    const char *name;           /* ONNX name; unique within the graph */
    ck_dtype dtype;
    int rank;
    int64_t dims[CK_MAX_RANK];
    ck_role role;
    ck_node *producer;          /* NULL for inputs, params, buffers, consts */
    void *data;                 /* host bytes (row-major) when known at compile time, else NULL; a
                                 * loaded initializer's may be a read-only file mapping or the
                                 * parsed protobuf (ck_graph_hold): only new values are written */
    /* set by the memory planner */
    int64_t offset;             /* byte offset in the arena */
    struct ck_value *alias;     /* a view: shares the bytes of this value (same offset) */
    bool host;                  /* lives in the host pool (offloaded), not the device arena */
    int live_first, live_last;  /* steps (node indices) it occupies its bytes; -1: the whole run */
    bool initializer;           /* an initializer of the ONNX graph (set by the loader) */
} ck_value;

int64_t ck_value_numel(const ck_value *v);
size_t ck_value_bytes(const ck_value *v);
/* Every value's shape satisfies ck_shape_ok: dims >= 0 and the product of the nonzero dims at
 * most CK_MAX_NUMEL, so element counts, byte sizes (even of float64) and every partial product of
 * dims fit in int64. The loader checks it on what it reads, ck_infer_node on what it infers. */
#define CK_MAX_NUMEL (INT64_MAX / 4096)
bool ck_shape_ok(int rank, const int64_t *dims);
/* Element access on constant data, converting from the value's dtype. */
int64_t ck_value_get_i(const ck_value *v, int64_t i);
double ck_value_get_f(const ck_value *v, int64_t i);
void ck_value_set_i(ck_value *v, int64_t i, int64_t x);
void ck_value_set_f(ck_value *v, int64_t i, double x);
/* "(2,3,4)" into buf; returns buf. */
char *ck_shape_str(const ck_value *v, char *buf, size_t n);
#define CK_SHAPE_STR_MAX 200

/* ---------------------------------------------------------------- ops (declared in ops.def) */

enum {
    CK_OPF_RECOMPUTABLE = 1 << 1,/* may be run again in a checkpointed backward */
    CK_OPF_STATEFUL = 1 << 2,    /* updates state: never run twice */
    CK_OPF_RANDOM = 1 << 3,      /* draws from the counter-based RNG */
};

typedef enum {
#define CK_OP(e, onnx, in_min, in_max, out_min, out_max, flags, diff, infer, grad, kernel, ws, flops, fold, view, in_place) CK_OP_##e,
#include "ops.def"
#undef CK_OP
    CK_OP_COUNT
} ck_op;

typedef ck_status (*ck_infer_fn)(ck_node *n, ck_diag *d);
typedef int64_t (*ck_ws_fn)(const ck_node *n);

typedef struct ck_op_info {
    const char *onnx_name;
    int in_min, in_max, out_min, out_max;
    unsigned flags;
    uint64_t diff_inputs; /* bit i: input i is differentiable */
    ck_infer_fn infer;
    ck_ws_fn workspace;   /* scratch bytes the kernel needs, NULL: none */
} ck_op_info;

int64_t ck_ws_conv(const ck_node *n);
int64_t ck_ws_conv_grad(const ck_node *n);
/* ckptc.GradAllReduce: the communication staging, 2 x attribute staging_floats floats */
int64_t ck_ws_grad_allreduce(const ck_node *n);
#define CK_MAX_GRADS (1 << 24)
/* Einsum's equation (einsum.c): the operands' letters and the output's; what the lowering
 * (passes/lower.c) supports: <= 2 operands, no ellipsis, no letter twice in a term. */
typedef struct ck_einsum {
    int n_terms, n[2], n_out;
    char term[2][CK_MAX_RANK], out[CK_MAX_RANK];
    bool explicit_out;
} ck_einsum;
bool ck_einsum_parse(const char *eq, int n_terms, ck_einsum *e, char *err, size_t errlen);
int64_t ck_einsum_dim(const ck_einsum *e, const ck_value *const *in, char c);

/* Sets output k of n (when present) to dtype dt and shape dims[0..rank): what shape inference
 * writes (infer.c, and the ops with files of their own: einsum.c, resize.c, convt.c). */
void ck_node_set_out(ck_node *n, int k, ck_dtype dt, int rank, const int64_t *dims);

/* Resize (ir/resize.c): the geometry of a Resize node that ckptc accepts, and per output position
 * of an axis the input indices it reads; passes/lower.c turns it into Gathers. */
typedef struct ck_resize {
    int rank;
    int64_t out[CK_MAX_RANK]; /* the output's dims */
    float scale[CK_MAX_RANK]; /* per axis: the given scale, or out / in for sizes */
    int linear, coord, nearest;
} ck_resize;
ck_status ck_resize_geometry(ck_node *n, ck_resize *r, ck_diag *d);
/* Output position i of axis a (input length in) reads input index i0, or with linear mode
 * (1 - w1) x[i0] + w1 x[i1]; returns whether it needs the second tap. */
bool ck_resize_taps(const ck_resize *r, int a, int64_t in, int64_t i, int64_t *i0, int64_t *i1, float *w1);

/* ConvTranspose (ir/convt.c): its geometry per spatial axis, pads resolved (output_shape,
 * auto_pad); passes/lower.c runs it as a Conv of the zero-dilated input with flipped weights. */
typedef struct ck_convt {
    int ns; /* spatial axes */
    int64_t group, out_ch;
    int64_t k[CK_MAX_RANK], stride[CK_MAX_RANK], dil[CK_MAX_RANK], pad_b[CK_MAX_RANK], pad_e[CK_MAX_RANK], out_pad[CK_MAX_RANK];
    int64_t out[CK_MAX_RANK]; /* the output's spatial dims */
} ck_convt;
ck_status ck_convt_geometry(ck_node *n, ck_convt *g, ck_diag *d);
/* Floating-point operations one run of the node costs (flops.c). */
int64_t ck_node_flops(const ck_node *n);

extern const ck_op_info ck_ops[CK_OP_COUNT];
bool ck_op_from_name(const char *onnx_name, ck_op *op);

/* ---------------------------------------------------------------- attributes */

typedef enum { CK_ATTR_INT, CK_ATTR_FLOAT, CK_ATTR_STRING, CK_ATTR_INTS, CK_ATTR_FLOATS, CK_ATTR_TENSOR, CK_ATTR_STRINGS } ck_attr_kind;

typedef struct ck_attr {
    const char *name;
    ck_attr_kind kind;
    int64_t i;
    float f;
    const char *s;
    int n;                 /* element count of ints / floats */
    int64_t *ints;
    float *floats;
    const char **strs;     /* the n strings of a STRINGS attribute (LSTM's activations) */
    ck_value *t;           /* a detached constant value (not in the graph's value list) */
} ck_attr;

/* ---------------------------------------------------------------- nodes and graph */

typedef enum { CK_PHASE_FORWARD, CK_PHASE_BACKWARD, CK_PHASE_UPDATE } ck_phase;

struct ck_node {
    int id;
    ck_op op;
    const char *name;      /* ONNX node name: its scope path, e.g. "/layers.3/fc1/Gemm" */
    int n_in, n_out;
    ck_value **in;         /* an absent optional input is NULL */
    ck_value **out;        /* an absent optional output is NULL */
    int n_attr, cap_attr;  /* cap_attr: room in attr (ck_node_add_attr grows it geometrically) */
    ck_attr *attr;
    int64_t ws_offset, ws_bytes; /* workspace, set by the memory planner */
    const struct ck_node *ws_until; /* the workspace stays live until this later node has run (a
                                     * gradient bucket's staging: until its wait); NULL: this node only */
    int ws_last;           /* the last step the workspace is live (the planner's, from ws_until) */
    ck_phase phase;        /* which part of the training step runs it */
    int recompute_of;      /* a recompute clone: the forward node's id + 1; 0 otherwise */
    struct ck_node **fused; /* ckptc.Fused: its member nodes in program order (out of the schedule;
                             * their outputs that nothing else reads are in no value list) */
    int n_fused;
};

/* Memory categories of the plan; every byte of the arena belongs to one. */
typedef enum {
    CK_MEM_PARAMS, CK_MEM_INPUTS, CK_MEM_ACTIVATIONS, CK_MEM_WORKSPACE, CK_MEM_GRADS, CK_MEM_OPT_STATE, CK_MEM_COUNT
} ck_mem_cat;
const char *ck_mem_cat_name(ck_mem_cat c);

typedef struct ck_mem_plan {
    bool done;
    int64_t static_bytes;            /* params, buffers, constants, optimizer state, inputs */
    int64_t weights_bytes;           /* [0, weights_bytes): the data weights.bin holds */
    int64_t arena_bytes;             /* the planned peak: static + the dynamic region's peak */
    int64_t bytes[CK_MEM_COUNT];     /* per category: static sizes; dynamic ones at the step of the peak */
    int64_t dynamic_lower_bound;     /* max over time of live dynamic bytes: no plan can beat it */
    int n_buffers;                   /* dynamic buffers placed (views excluded) */
    int64_t host_bytes;              /* the host pool for offloaded tensors */
    int64_t offload_bytes;           /* copied to the host per step */
    /* where the peak is and what holds it */
    int peak_step;                   /* the node index with the most live dynamic bytes */
    int64_t saved_bytes;             /* at the peak: forward activations kept for the backward */
    int64_t transient_bytes;         /* at the peak: other activations (recomputed, backward temporaries) */
    int64_t *timeline;               /* device bytes in use at each step 0..n_nodes (static included) */
    int n_timeline;
} ck_mem_plan;

/* A recomputed segment, for reports. */
typedef struct ck_segment {
    const char *name;                /* the block's scope ("/layers.3") or "segment N" */
    const char *first_node, *last_node;
    int64_t saved_bytes;             /* its checkpoints: the kept inputs its recompute reads */
    const char *why;                 /* which unit it is and why it ends where it ends (--explain) */
} ck_segment;

/* Memory outside the arena that values' data point into, held by the graph: a read-only file
 * mapping of external data, the parsed protobuf holding raw_data. */
typedef struct ck_hold {
    const char *base;      /* [base, base + len): what values may point into; NULL: no one range */
    size_t len;
    void (*drop)(void *ctx, const void *p, size_t n); /* lets go of pages a reader is done with; NULL: none */
    void (*release)(void *ctx);            /* called by ck_graph_free */
    void *ctx;
    struct ck_hold *next;
} ck_hold;

/* Where the source model's initializer payloads lie, recorded by the loader (frontend/
 * onnx_offsets.c) for the trainer's --export-onnx, which copies the file(s) and overwrites those
 * byte ranges with the trained values. files[0] is the model, the others its external data files. */
typedef struct ck_source_file {
    const char *path;        /* files[0]: the model's absolute path; else the external data's path as opened */
    const char *location;    /* external data: its location, relative to the model's directory; NULL for the model */
    uint64_t size;
} ck_source_file;

typedef struct ck_payload {
    const char *name;        /* the initializer */
    int file;                /* index in ck_source.files; -1: its bytes are not one range (float_data unpacked or split) */
    uint64_t offset, length; /* the raw little-endian payload's bytes in that file */
} ck_payload;

typedef struct ck_source {
    int n_files, n_payloads;
    ck_source_file *files;
    ck_payload *payloads;    /* one per graph initializer, in the file's order */
} ck_source;

typedef struct ck_graph {
    ck_arena *arena;
    ck_hold *holds;        /* released by ck_graph_free, the last added first */
    ck_node **nodes;       /* in execution (topological) order */
    int n_nodes, cap_nodes;
    ck_value **values;     /* every value the graph uses, in creation order */
    int n_values, cap_values;
    ck_value **inputs;     /* user-fed inputs */
    int n_inputs;
    ck_value **outputs;
    int n_outputs;
    int next_node_id, next_value_id;
    /* provenance */
    const char *name, *producer_name, *producer_version;
    int64_t ir_version, opset;
    int onnx_nodes;        /* nodes in the file, Constants included, before folding */
    bool trainable_declared; /* the model's metadata_props CK_TRAINABLE_KEY said which float
                              * initializers are PARAMs; false: all of them are (the default rule) */
    const ck_source *source; /* the model file's initializer payloads (--export-onnx); NULL: loaded from memory */
    ck_mem_plan plan;      /* filled by the memory planner */
    /* training: set by the loss and autodiff passes */
    ck_value *loss;
    int n_train;
    ck_value **train_params, **train_grads;
    int n_segments;        /* segments recomputed by the checkpoint pass */
    ck_segment *segments;
    int n_selective;       /* activations chosen for op-level recompute (selective.c) */
    int64_t recompute_flops; /* FLOPs of every recompute clone in the schedule (checkpoint pass) */
    const struct ck_graph *borrowed; /* a clone: the graph whose names, constant data and holds it
                                      * shares (it must outlive the clone); NULL: owns its own */
    struct ck_graph *owned;          /* freed by ck_graph_free after this graph: set on the clone that
                                      * the plan search keeps, so that it takes its original along */
} ck_graph;

/* The metadata_props key whose value, a JSON array of initializer names, lists the parameters to
 * train (python/ckptc_export.py writes it from PyTorch's named_parameters()). */
#define CK_TRAINABLE_KEY "ckptc.trainable"

ck_graph *ck_graph_new(void);
void ck_graph_free(ck_graph *g);
/* A copy passes can rewrite (same ids, names and order, so a pass decides the same on it) that
 * shares the original's names, attribute payloads and constant data (clone.c): the original must
 * not be freed before the clone. */
ck_graph *ck_graph_clone(const ck_graph *g);
/* The graph keeps [base, base + len) alive until ck_graph_free, which then calls release(ctx);
 * drop, when set, is called with ctx on ranges of it a reader no longer needs (ck_graph_data_done). */
void ck_graph_hold(ck_graph *g, const void *base, size_t len, void (*drop)(void *ctx, const void *p, size_t n),
                   void (*release)(void *ctx), void *ctx);
/* A reader streaming data (codegen writing weights.bin) is done with [p, p + n): where that lies
 * in a held file mapping (the graph's or, for a clone, its original's), its pages leave this process (the file's page cache stays and a later
 * read maps them again), so streaming every weight keeps the resident set bounded. */
void ck_graph_data_done(const ck_graph *g, const void *p, size_t n);

/* Debug counters of the bytes of initializer and constant data (weights) the compiler touches, for
 * tests and benchmarks (ckptc prints them when CKPTC_STATS is set). One process-wide instance;
 * ckptc is single-threaded. */
typedef struct ck_io_stats {
    bool enabled;            /* set by the user of the counters: resident_bytes costs a pagemap read */
    int64_t mapped_files;    /* external-data files mapped (each once per load) */
    int64_t mapped_bytes;    /* their sizes */
    int64_t copied_bytes;    /* weight bytes the loader copied or converted into the arena */
    int64_t resident_bytes;  /* bytes of the mappings resident in this process when released
                              * (pages a reader touched and did not drop; -1: unknown) */
    int64_t streamed_bytes;  /* weights.bin payload bytes written by codegen */
    int64_t stream_buffer;   /* the largest buffer codegen used to write them */
} ck_io_stats;
extern ck_io_stats ck_stats;
ck_value *ck_graph_add_value(ck_graph *g, const char *name, ck_dtype dt, int rank,
                             const int64_t *dims, ck_role role);
/* Creates n_out fresh ACTIVATION outputs (dtype/shape filled by ck_infer_node) and appends the
 * node to the schedule. ck_graph_new_node does the same without scheduling it: for passes that
 * build a new order and hand it to ck_graph_set_nodes. */
ck_node *ck_graph_add_node(ck_graph *g, ck_op op, const char *name, int n_in, ck_value **in, int n_out);
ck_node *ck_graph_new_node(ck_graph *g, ck_op op, const char *name, int n_in, ck_value **in, int n_out);
void ck_node_add_attr(ck_graph *g, ck_node *n, ck_attr a);
void ck_graph_set_outputs(ck_graph *g, int n, ck_value **outs);
/* Replaces the node list (a pass's new schedule), growing the array as needed. */
void ck_graph_set_nodes(ck_graph *g, int n, ck_node **nodes);
void ck_graph_set_inputs(ck_graph *g, int n, ck_value **ins);
/* Drops nodes whose outputs reach no graph output, and values nothing uses. */
void ck_graph_remove_dead(ck_graph *g);

const ck_attr *ck_attr_find(const ck_node *n, const char *name);
int64_t ck_attr_int(const ck_node *n, const char *name, int64_t dflt);
/* Convolution lanes (runtime/ckrt_conv_batch.h): on a Conv or ConvGradInput node, how many
 * batches of images its CPU kernel runs at once, each in its own workspace (the workspace
 * functions multiply by it). Only passes/lanes.c sets it; the loader drops ckptc.* attributes. */
#define CK_LANES_ATTR "ckptc.lanes"
float ck_attr_float(const ck_node *n, const char *name, float dflt);
const char *ck_attr_str(const ck_node *n, const char *name, const char *dflt);

/* MatMul reading or writing a transposed tensor in place (passes/fold_transpose.c folds a
 * Transpose into the MatMul next to it): with attribute CK_PERM_A (CK_PERM_B) the node's operand
 * is Transpose(in[0] (in[1]), perm); with CK_PERM_Y its result, transposed by perm, is out[0].
 * Only the fold sets them (the loader drops ckptc.* attributes); operands of rank >= 2 only. */
#define CK_PERM_A "ckptc.perm_a"
#define CK_PERM_B "ckptc.perm_b"
#define CK_PERM_Y "ckptc.perm_y"
/* A MatMul node's GEMMs, row-major: for each batch entry (bdims, brank of them; a/b/y element
 * strides per batch axis, 0 where broadcast) y (M,N) = op(a) (M,K) @ op(b) (K,N), op(a) = a
 * (lda apart rows) or, ta, a stored (K,M) with lda apart rows; likewise b; y's rows ldc apart.
 * a is in[0] and b in[1]; with swap, a is in[1] and b in[0]: a result written transposed whose
 * rows, not columns, are contiguous is computed as y^T = op(in[1])^T op(in[0])^T. */
typedef struct ck_matmul_layout {
    int64_t M, N, K;
    int brank;
    int64_t bdims[CK_MAX_RANK], sa[CK_MAX_RANK], sb[CK_MAX_RANK], sy[CK_MAX_RANK];
    int ta, tb, swap;
    int64_t lda, ldb, ldc;
} ck_matmul_layout;
/* n's layout; false when a permutation leaves an operand or the result without a unit stride on
 * either matrix axis, or with rows closer than a GEMM allows (the fold never makes such a node). */
bool ck_matmul_layout_of(const ck_node *n, ck_matmul_layout *L);

/* ---------------------------------------------------------------- inference and checks */

/* Slice's per-axis start, step and count after clamping (every axis of the input). */
ck_status ck_slice_params(const ck_node *n, int64_t *start, int64_t *step, int64_t *count, ck_diag *d);
/* Pad's modes, and its per-axis begin and end pads (every axis of the input; negative crops). */
enum { CK_PAD_CONSTANT, CK_PAD_REFLECT, CK_PAD_EDGE };
ck_status ck_pad_params(const ck_node *n, int64_t *begin, int64_t *end, int *mode, ck_diag *d);
/* LSTM, GRU, RNN (infer_rnn.c): what the node computes, checked; passes/lower_rnn.c unrolls it. */
typedef enum { CK_RNN_LSTM, CK_RNN_GRU, CK_RNN_PLAIN } ck_rnn_kind;
typedef enum { CK_RNN_TANH, CK_RNN_RELU, CK_RNN_SIGMOID } ck_rnn_act;
typedef struct ck_rnn_info {
    ck_rnn_kind kind;
    int gates;                 /* 4 (LSTM: iofc), 3 (GRU: zrh), 1 (RNN) */
    int layout;                /* 0: X (T,B,I); 1: X (B,T,I) */
    int dirs;                  /* 1, or 2 for bidirectional */
    bool reverse;              /* direction=reverse (dirs == 1) */
    bool linear_before_reset;  /* GRU */
    ck_rnn_act act[2];         /* RNN: the activation of each direction */
    int64_t seq, batch, input, hidden;
} ck_rnn_info;
ck_status ck_rnn_params(const ck_node *n, ck_rnn_info *r, ck_diag *d);
/* A Transpose's permutation: its perm attribute, or the reversal of the axes when absent. */
void ck_transpose_perm(const ck_node *n, int64_t *perm);
/* Shape's [lo, hi) dims range after clamping its start/end attributes. */
void ck_shape_range(const ck_node *n, int64_t *lo, int64_t *hi);

/* Validates arity, then calls the op's shape-inference function. Messages name the node, its
 * op and the offending inputs with their shapes. */
ck_status ck_infer_node(ck_node *n, ck_diag *d);
/* Adds "node 'NAME' (OP): MESSAGE" to d and returns s: the shape-inference error form (infer.c). */
ck_status ck_node_err(ck_diag *d, const ck_node *n, ck_status s, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Every value produced once, inputs defined before use, shapes consistent with inference. */
ck_status ck_graph_verify(const ck_graph *g, ck_diag *d);

/* ---------------------------------------------------------------- string map */

typedef struct ck_map ck_map;
ck_map *ck_map_new(ck_arena *a, int expected);
void *ck_map_get(const ck_map *m, const char *key);
void ck_map_put(ck_map *m, const char *key, void *val); /* key must outlive the map */

#endif
