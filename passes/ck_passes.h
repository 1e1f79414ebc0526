/* ck_passes.h — the passes that turn a loaded graph into a scheduled, planned one.
 *
 * Each pass is `ck_status ck_pass_NAME(ck_graph *g, const ck_options *o, ck_diag *d)`, runs
 * after the previous one, and leaves a graph the verifier accepts. The pipeline is ck_compile()
 * in cli/compile.c: one straight-line function a reader sees whole, which hands the trained graph
 * to ck_plan_search (search.c) for the passes whose choices need whole plans to decide.
 *
 * Passes: lower -> loss -> autodiff -> optimizer, then per try of the search: checkpoint
 * (recompute, offload) -> data_parallel -> early_update (training) -> plan (liveness over the
 * scheduled order + static offsets in one arena).
 */
#ifndef CK_PASSES_H
#define CK_PASSES_H

#include "ck_ir.h"

#define CK_ALIGN 64

typedef enum { CK_LOSS_CROSS_ENTROPY, CK_LOSS_MSE, CK_LOSS_OUTPUT } ck_loss_kind;
typedef enum { CK_OPT_SGD, CK_OPT_MOMENTUM, CK_OPT_ADAMW } ck_opt_kind;
typedef enum { CK_CKPT_NONE, CK_CKPT_BLOCKS, CK_CKPT_EVERY, CK_CKPT_SQRT, CK_CKPT_NODES, CK_CKPT_BUDGET } ck_ckpt_kind;

typedef struct ck_options {
    bool infer;             /* --infer: forward only */
    bool disable_dropout;   /* --disable-dropout: Dropout is the identity */
    /* training */
    ck_loss_kind loss;      /* --loss */
    const char *output;     /* --output: the model output the loss reads (default: the first) */
    const char *label_name; /* --label-name (default "labels"; "target" for mse) */
    const char *freeze;     /* --freeze REGEX: parameters not to train */
    ck_opt_kind optimizer;  /* --optimizer */
    double lr, momentum, weight_decay, beta1, beta2, eps;
    /* checkpointing */
    ck_ckpt_kind checkpoint;      /* --checkpoint */
    int checkpoint_k;             /* every:K */
    const char *checkpoint_regex; /* nodes:REGEX */
    const char *block_regex;      /* --block-regex */
    bool blocks_by_structure;     /* blocks: repeated units of the graph itself, not scope names
                                   * (the search plans both and keeps the lower peak, search.c) */
    bool blocks_grouped;          /* with blocks_by_structure: the cut-point chunks grouped into about
                                   * sqrt(n) segments (single-layer units: VGG's features.N) */
    bool offload;                 /* --offload: checkpoints go to the host pool */
    const char *policy_name;      /* as the user wrote it, for reports ("blocks", "every:2") */
    int64_t budget;               /* budget:SIZE, bytes */
    double max_recompute;         /* --max-recompute: recompute at most this fraction of the
                                   * forward's FLOPs (search.c); 0: no cap */
    const bool *recompute_set;    /* when set: only these candidate segments are recomputed (the
                                   * budget search's tries, trim_blocks, --max-recompute: search.c) */
    int n_recompute_set;
    bool selective;               /* --checkpoint=selective, or POLICY,selective: op-level recompute
                                   * (selective.c), alone or with a segment policy */
    const bool *selective_set;    /* when set: only these op-level candidates (the budget search's) */
    int n_selective_set;
    /* BatchNormalization's running variance: the ONNX spec updates it with the biased batch
     * variance, PyTorch with the unbiased one, and PyTorch's exporter does not say which the model
     * meant. -1 (default): unbiased when the model's producer is PyTorch, else biased; 0/1 force. */
    int bn_unbiased_var;
    /* --data-parallel: gradients averaged over the ranks before the update (data_parallel.c) */
    bool data_parallel;
    int64_t dp_bucket_bytes;      /* --dp-bucket SIZE; 0: 25 MiB */
    int dp_overlap;               /* buckets start as soon as their gradients are final (1), or all
                                   * after the backward (0); -1 (--dp-overlap=auto): 1, unless the
                                   * search (search.c) finds that 0 plans a lower peak */
    bool update_at_end;           /* --update-at-end: every update after the whole backward (no early updates) */
    /* --grad-accum: a gradient accumulator per parameter in the static region, so that the trainer's
     * --grad-accum K sums K micro-batches' gradients before one update (optimizer.c) */
    bool grad_accum;
    /* --clip-grad-norm X (> 0): the trainer's default max norm; implies update_at_end, since the
     * global norm needs every gradient before the first update */
    double clip_grad_norm;
    /* --no-fuse: no elementwise fusion (fuse.c); every node runs its own kernel */
    bool no_fuse;
    /* --no-fold-transposes: every Transpose a copy (fold_transpose.c does nothing) */
    bool no_fold;
} ck_options;

/* PyTorch's defaults (torch.optim.SGD / AdamW) */
#define CK_OPTIONS_DEFAULT                                                                             \
    {.loss = CK_LOSS_CROSS_ENTROPY, .optimizer = CK_OPT_ADAMW, .lr = 1e-3, .momentum = 0.9,            \
     .weight_decay = -1 /* per optimizer: 0 for SGD, 1e-2 for AdamW */, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, \
     .bn_unbiased_var = -1}

/* Rewrites the forward graph for speed and memory before training is built (lower.c): MatMul
 * with a 2-D right operand -> Gemm on flattened rows (a transposed weight becomes transB), the
 * exporters' five-node erf GELU -> Gelu. */
ck_status ck_pass_lower(ck_graph *g, const ck_options *o, ck_diag *d);

/* Adds the loss: cross_entropy (an int64 labels input shaped like the logits minus the class
 * axis, mean over positions), mse (a float target input shaped like the output, mean), or output
 * (the model's output is the loss). The graph's only output becomes the scalar loss. */
ck_status ck_pass_loss(ck_graph *g, const ck_options *o, ck_diag *d);

/* Reverse-mode autodiff: backward nodes for every value that reaches the loss and depends on a
 * trainable parameter; fills g->train_params / g->train_grads. */
ck_status ck_pass_autodiff(ck_graph *g, const ck_options *o, ck_diag *d);
/* After autodiff, for a model without the CK_TRAINABLE_KEY entry: the one-line warning (how many
 * initializers are trained, which look like buffers) into buf; false, buf untouched, when the
 * model has the entry or nothing is trained (trainable.c). */
bool ck_trainable_warning(const ck_graph *g, char *buf, size_t n);

/* One update node per trainable parameter, in place, after the whole backward; optimizer
 * state (momentum, Adam moments) are zero-initialized OPT_STATE values. */
ck_status ck_pass_optimizer(ck_graph *g, const ck_options *o, ck_diag *d);

/* Moves each update node to the earliest legal step: after its gradient's producer, after every
 * reader of the parameter's and its state's old bytes (views included), after the forward. Its
 * gradient is then freed there (with --data-parallel the gradient's producer is its bucket's
 * GradAllReduceWait). Not with --update-at-end. */
ck_status ck_pass_early_update(ck_graph *g, const ck_options *o, ck_diag *d);

/* --data-parallel: the gradients in buckets (--dp-bucket, in the order they become final), each
 * averaged over the ranks in place by a ckptc.GradAllReduce node (its workspace is the
 * communication staging) started right after the bucket's last gradient (o->dp_overlap) or after
 * the backward, and a ckptc.GradAllReduceWait before the updates that read the bucket. */
ck_status ck_pass_data_parallel(ck_graph *g, const ck_options *o, ck_diag *d);

/* Transposes next to a MatMul become its operands' or result's strides (fold_transpose.c): on
 * the trained graph (after ck_pass_optimizer; after ck_pass_lower with --infer), before the plan
 * search, so that every policy runs the same GEMMs; never raises the live bytes at any step of
 * that graph. Nothing with o->no_fold. */
ck_status ck_pass_fold_transposes(ck_graph *g, const ck_options *o, ck_diag *d);

/* Elementwise fusion (fuse.c): chains of float elementwise nodes on the final graph become
 * ckptc.Fused nodes, and the intermediates only a chain reads leave the graph (no arena bytes).
 * Runs last, right before ck_pass_plan; nothing with o->no_fuse. */
ck_status ck_pass_fuse(ck_graph *g, const ck_options *o, ck_diag *d);

/* Memory plan: static region (params, buffers, constants, inputs) then a dynamic region where
 * activations and kernel workspace get offsets by liveness: greedy best-fit placement in four
 * orders (size, size x lifetime, lifetime, program order; program order alone on big graphs),
 * the lowest peak kept. Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, a Dropout that
 * drops nothing) share their input's bytes, and so do the outputs of ops that run in place.
 * Fills v->offset / v->alias for every value, n->ws_offset for nodes with workspace, and
 * g->plan. */
ck_status ck_pass_plan(ck_graph *g, const ck_options *o, ck_diag *d);
/* Convolution lanes (lanes.c): on a planned graph, CK_LANES_ATTR on the convolutions (forward,
 * input gradient) whose larger workspace leaves the planned peak as it is; plans g again. */
ck_status ck_pass_conv_lanes(ck_graph *g, const ck_options *o, ck_diag *d);
/* A note (nothing when no convolution could take lanes): how many of g's got them. */
void ck_conv_lanes_note(const ck_graph *g, ck_diag *notes);

/* Segments the forward (--checkpoint policy) and recomputes each segment's activations just
 * before its backward instead of keeping them (see checkpoint.c). */
ck_status ck_pass_checkpoint(ck_graph *g, const ck_options *o, ck_diag *d);

/* The segments ck_pass_checkpoint would form on g (a graph it has not run on), for the budget
 * search: per segment, its forward FLOPs (the cost of recomputing it) and activation bytes (what
 * recomputing it can free; 0 for the last segment, which is never recomputed); per node id of g
 * (n_ids of them), the segment of that forward node, or -1. */
typedef struct ck_ckpt_candidates {
    int n, n_ids;
    int64_t *flops, *bytes;
    int *node_seg;
} ck_ckpt_candidates;
ck_status ck_checkpoint_candidates(const ck_graph *g, const ck_options *o, ck_ckpt_candidates *c, ck_diag *d);
void ck_checkpoint_candidates_free(ck_ckpt_candidates *c);
/* The FLOPs of g's forward nodes (recompute clones not counted): what --max-recompute and the
 * reports' percentages are fractions of. */
int64_t ck_forward_flops(const ck_graph *g);
/* The step's FLOPs by kind, the nodes that run (views cost nothing): forward, backward, recompute,
 * update (the trainer's report, and --plan-only's ratio of the step with and without recompute). */
enum { CK_STEP_FLOPS = 4 };
void ck_step_flops(const ck_graph *g, const ck_options *o, int64_t fl[CK_STEP_FLOPS]);
/* The clone of forward node n reading in[] (checkpoint.c): same attributes, Dropout's RNG key,
 * BatchNormalization as ckptc.BatchNormApply; phase backward, recompute_of set; not placed (the
 * caller lays it out). */
ck_node *ck_checkpoint_clone_node(ck_graph *g, const ck_node *n, ck_value **in);

/* Op-level recompute (selective.c): the activations the backward reads that are recomputed from
 * kept ones, in the order the greedy chose them; per candidate its value id, the FLOPs of its cone
 * (the nodes rerun for it when it was chosen) and the bytes it frees. Any subset is a valid rewrite (o->selective_set). */
typedef struct ck_sel_candidates {
    int n;
    int *value, *node; /* the activation's id, its producer's id */
    int64_t *flops, *bytes;
} ck_sel_candidates;
ck_status ck_selective_candidates(const ck_graph *g, const ck_options *o, ck_sel_candidates *c);
void ck_selective_candidates_free(ck_sel_candidates *c);
/* With o->selective: the rewrite (run by ck_pass_checkpoint before the segments' own). */
ck_status ck_pass_selective(ck_graph *g, const ck_options *o, ck_diag *d);

/* How many kinds of unit the forward of g repeats (blocks by structure, checkpoint.c). */
int ck_checkpoint_units(const ck_graph *g);

/* The plan search (search.c): *g is the trained graph (after ck_pass_optimizer, or after
 * ck_pass_lower with --infer); on return it is the planned graph the options ask for (on an
 * error, what the failing try left, to be freed all the same). The passes checkpoint ->
 * data_parallel -> early_update -> check -> plan run on the trained graph itself when one plan
 * settles it; budget:SIZE, --offload and --data-parallel plan several tries, each on a clone, and
 * keep the one they choose by its peak (which takes the trained graph along: ck_graph_free of the
 * result frees both). check, when set, runs on each try before it is planned (codegen's: reject
 * what cannot run before any planning). What the search chose is added to notes, one line each. */
typedef ck_status (*ck_check_fn)(const ck_graph *g, const ck_options *o, ck_diag *d);
ck_status ck_plan_search(ck_graph **g, const ck_options *o, ck_check_fn check, ck_diag *notes, ck_diag *d);

/* The trade-off the budget search walks (search.c): its candidates (op-level and segments) in its
 * order, most bytes per FLOP first, and per prefix of that order (every one up to 48 candidates,
 * 48 spread evenly beyond) the planned peak and the recompute FLOPs. trained as for
 * ck_plan_search; o's checkpoint policy is ignored (the budget's candidates are used). */
typedef struct ck_curve_point {
    int64_t peak, flops;
    int candidates, segments, selective; /* prefix length; segments and activations recomputed */
} ck_curve_point;
typedef struct ck_curve {
    int n, n_candidates;
    ck_curve_point *pt;
} ck_curve;
ck_status ck_plan_curve(const ck_graph *trained, const ck_options *o, ck_curve *c, ck_diag *d);
/* The exact optimum budget:SIZE approximates: every subset of the candidates (at most max, and
 * 20) planned; c->pt[mask] for the subset whose bits mask sets (peak -1: it did not plan).
 * More candidates: CK_ERR_USAGE, c->n_candidates says how many. */
ck_status ck_budget_subsets(const ck_graph *trained, const ck_options *o, int max, ck_curve *c, ck_diag *d);

/* Dropout's effective ratio: 0 when it drops nothing (training_mode absent or false, ratio 0,
 * or --disable-dropout); -1 when the ratio or the mode is not a compile-time constant. */
double ck_dropout_ratio(const ck_node *n, const ck_options *o);

/* Is this node a view of its first input (no kernel, same bytes)? */
bool ck_node_is_view(const ck_node *n, const ck_options *o);
/* The input whose bytes output k overwrites in place (optimizer updates, the gradient all-reduce,
 * elementwise nodes per CK_INPLACE_ATTR), or -1. */
int ck_node_inplace_input(const ck_node *n, int k);
/* The attribute (ints: per output, the input it overwrites, or -1) that passes/fuse.c puts on an
 * elementwise node whose output takes over a dying input's bytes; the loader drops ckptc.*
 * attributes from files, so only the passes set it. */
#define CK_INPLACE_ATTR "ckptc.inplace"

#endif
