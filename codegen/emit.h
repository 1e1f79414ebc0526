/* emit.h — what every per-family emitter (emit_*.c) shares. Private to codegen/.
 *
 * An emitter is `ck_status ck_emit_FAMILY(ck_emit *e, const ck_node *n)`, FAMILY being the
 * kernel column of ops.def. It checks the node's dtypes/attributes (returning
 * ck_emit_unsupported(...) for anything the runtime cannot run) and, when e->f is not NULL,
 * prints one or more `    CKRT_TRY(ckrt_...(c, ...));` lines. With e->f == NULL it only checks
 * (ck_codegen_check). Pointers are printed with ck_emit_ptr, int64 arrays with ck_emit_i64s.
 */
#ifndef CK_EMIT_H
#define CK_EMIT_H

#include "ck_codegen.h"
#include "ckrt_util.h"

#include <stdio.h>

/* The ckrt_* entry points a program's C calls, in the order first emitted. */
typedef struct ck_emit_calls {
    int n;
    const char *entry[64];
} ck_emit_calls;

typedef struct ck_emit {
    FILE *f;               /* NULL: check only */
    const ck_graph *g;
    const ck_options *o;
    ck_diag *d;
    ck_emit_calls *calls;  /* where ck_emit_call records the entries; NULL: not recorded */
} ck_emit;

typedef ck_status (*ck_emit_fn)(ck_emit *e, const ck_node *n);

/* "(float *)(A + 4096)" — A is the arena base inside the step function; const for inputs. */
void ck_emit_ptr(ck_emit *e, const ck_value *v, bool is_const);
/* "(const int64_t[]){2, 3}" ("NULL" when n == 0) */
void ck_emit_i64s(ck_emit *e, int n, const int64_t *xs);
/* dims[lo] * ... * dims[hi - 1] (1 for an empty range): the rows/columns a kernel sees */
static inline int64_t ck_emit_prod(const int64_t *dims, int lo, int hi) { return ckrt_numel(hi - lo, dims + lo); }
/* "CKRT_F32" */
const char *ck_emit_dtype(ck_dtype t);
/* The C type of an element: "float", "int64_t", ... */
const char *ck_emit_ctype(ck_dtype t);
/* Element strides of `v` aligned to an output of out_rank dims, 0 on broadcast axes. */
void ck_emit_bcast_strides(const ck_value *v, int out_rank, const int64_t *out_dims, int64_t *strides);
/* Records "node 'X' (Op): <message>" and returns CK_ERR_UNSUPPORTED. */
/* BatchNormalization's outputs 1, 2 (running statistics) updated in place are not written (emit_norm.c) */
bool ck_emit_batch_norm_writes(const ck_emit *e, const ck_node *n, int k);
ck_status ck_emit_unsupported(ck_emit *e, const ck_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fails unless v's dtype is one of the listed ones (CK_UNDEF-terminated). */
ck_status ck_emit_want_dtype(ck_emit *e, const ck_node *n, const ck_value *v, const char *what, const ck_dtype *ok);
/* Starts a kernel call, "    CKRT_TRY(ckrt_ENTRY(c" (the emitter prints the rest), and records
 * ENTRY in e->calls. */
void ck_emit_call(ck_emit *e, const char *entry);
/* fprintf to e->f when emitting; nothing when checking. */
void ck_emit_printf(ck_emit *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* DIR/kernels.cu (emit_cuda.c): the CUDA wrappers for the ckrt_* entry points the program calls
 * (calls: what the emitters recorded), after the embedded kernel body headers. */
ck_status ck_codegen_kernels_cu(FILE *f, const char *program, const ck_emit_calls *calls);

#define CK_OP(e, onnx, in_min, in_max, out_min, out_max, flags, diff, infer, grad, kernel, ws, flops, fold, view, in_place) \
    ck_status ck_emit_##kernel(ck_emit *e, const ck_node *n);
#include "ops.def"
#undef CK_OP

/* The runtime's code for a unary IR op (a row of CKRT_UNARY_OPS in runtime/ckrt_kernels_ops.h):
 * the enum name the generated C spells and the defaults of the alpha and beta attributes. The
 * row is chosen by op and, for Gelu, node n's approximate attribute; NULL: no row (Not, Clip). */
typedef struct ck_unary_code {
    ck_op op;
    const char *name;
    float alpha, beta;
} ck_unary_code;
const ck_unary_code *ck_emit_unary_code(const ck_node *n, ck_op op);

#endif
