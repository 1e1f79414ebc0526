/* emit_norm.c — emitters for the families that work over an axis or a set of axes: softmax
 * (Softmax, LogSoftmax), layer_norm, batch_norm, dropout, random (RandomUniform[Like],
 * RandomNormal[Like], Bernoulli: Dropout's RNG), reduce (ReduceMean, ReduceSum) and global_pool
 * (GlobalAveragePool).
 *
 * All shape logic happens here: an axis becomes an (outer, len, inner) split, a set of reduced
 * axes becomes kept/reduced dims with their element strides, so the kernels (runtime/ckrt_ops.h,
 * bodies in runtime/ckrt_kernels.h) only loop. Attributes the runtime cannot honour are refused
 * with a message naming the node, in check mode already.
 *
 * The normalization training ops follow at the end, beside their forwards: ckptc.LayerNormGrad,
 * ckptc.BatchNormGrad and ckptc.BatchNormApply (BatchNormalization's recompute), kernels in
 * runtime/cpu_norm.c. The backward reads the statistics the forward saved (LayerNormalization's
 * outputs 1 and 2, BatchNormalization's internal outputs 3 and 4) rather than recomputing them, so
 * the shape logic is the forward's: an axis split into (rows, cols) for LayerNorm, (N, C, S) for
 * BatchNorm. An output nobody asked for (a NULL slot) is passed as NULL and not computed.
 */
#include "emit.h"

#include <string.h>

static const ck_dtype f32_only[] = {CK_F32, CK_UNDEF};

/* An axis attribute normalized into [0, rank); false when out of range. */
static bool get_axis(const ck_node *n, int64_t dflt, int rank, int64_t *axis) {
    int64_t a = ck_attr_int(n, "axis", dflt);
    if (a < 0) a += rank;
    *axis = a;
    return a >= 0 && a < rank;
}

static bool has(const ck_node *n, int i, bool out) {
    return out ? i < n->n_out && n->out[i] : i < n->n_in && n->in[i];
}

static void ptr_or_null(ck_emit *e, const ck_value *v, bool is_const) {
    if (v) ck_emit_ptr(e, v, is_const);
    else ck_emit_printf(e, "NULL");
}

/* Does any node, or the graph's output list, read v? */
static bool is_read(const ck_graph *g, const ck_value *v) {
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return true;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            if (g->nodes[i]->in[k] == v) return true;
    return false;
}

/* The refusal of an input that must be a constant (the wording shape inference uses). */
static ck_status not_const(ck_emit *e, const ck_node *n, int i, const char *why) {
    char sh[CK_SHAPE_STR_MAX];
    const ck_value *v = n->in[i];
    return ck_emit_unsupported(e, n, "input %d '%s' %s %s must be a constant known at compile time%s, but it is computed "
                               "at run time", i, v->name, ck_dtype_name(v->dtype), ck_shape_str(v, sh, sizeof sh), why);
}

static ck_status want_f32_inputs(ck_emit *e, const ck_node *n) {
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] && ck_emit_want_dtype(e, n, n->in[i], "input", f32_only)) return CK_ERR_UNSUPPORTED;
    return CK_OK;
}

/* float32 inputs and the "axis" attribute (default -1) in range for the first input's rank. */
static ck_status f32_axis(ck_emit *e, const ck_node *n, int64_t *axis) {
    if (want_f32_inputs(e, n)) return CK_ERR_UNSUPPORTED;
    if (!get_axis(n, -1, n->in[0]->rank, axis))
        return ck_emit_unsupported(e, n, "axis %lld is out of range for rank %d", (long long)ck_attr_int(n, "axis", -1),
                                   n->in[0]->rank);
    return CK_OK;
}

/* ---------------------------------------------------------------- softmax */

ck_status ck_emit_softmax(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0];
    int64_t axis;
    if (f32_axis(e, n, &axis)) return CK_ERR_UNSUPPORTED;
    ck_emit_call(e, "softmax");
    ck_emit_printf(e, ", %d, ", n->op == CK_OP_LOG_SOFTMAX);
    ck_emit_ptr(e, n->out[0], false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %lld, %lld, %lld));\n", (long long)ck_emit_prod(x->dims, 0, (int)axis), (long long)x->dims[axis],
                   (long long)ck_emit_prod(x->dims, (int)axis + 1, x->rank));
    return CK_OK;
}

/* ---------------------------------------------------------------- layer norm */

ck_status ck_emit_layer_norm(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0];
    int64_t axis;
    if (f32_axis(e, n, &axis)) return CK_ERR_UNSUPPORTED;
    int64_t stash = ck_attr_int(n, "stash_type", 1);
    if (stash != 1)
        return ck_emit_unsupported(e, n, "stash_type %lld is not supported (ckptc computes in double and stashes "
                                   "float32: stash_type 1)", (long long)stash);
    int64_t rows = ck_emit_prod(x->dims, 0, (int)axis), cols = ck_emit_prod(x->dims, (int)axis, x->rank);
    static const char *what[] = {"", "Scale", "B"};
    for (int i = 1; i < 3; i++)
        if (has(n, i, false) && ck_value_numel(n->in[i]) != cols)
            return ck_emit_unsupported(e, n, "%s '%s' broadcasts within the normalized shape (%lld elements for %lld); "
                                       "ckptc supports a %s of the full normalized shape", what[i], n->in[i]->name,
                                       (long long)ck_value_numel(n->in[i]), (long long)cols, what[i]);
    for (int k = 1; k < 3; k++)
        if (has(n, k, true) && ck_emit_want_dtype(e, n, n->out[k], "output", f32_only)) return CK_ERR_UNSUPPORTED;
    ck_emit_call(e, "layer_norm");
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->out[0], false);
    ck_emit_printf(e, ", ");
    ptr_or_null(e, has(n, 1, true) ? n->out[1] : NULL, false);
    ck_emit_printf(e, ", ");
    ptr_or_null(e, has(n, 2, true) ? n->out[2] : NULL, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->in[1], true);
    ck_emit_printf(e, ", ");
    ptr_or_null(e, has(n, 2, false) ? n->in[2] : NULL, true);
    ck_emit_printf(e, ", %lld, %lld, %a));\n", (long long)rows, (long long)cols,
                   (double)ck_attr_float(n, "epsilon", 1e-5f));
    return CK_OK;
}

/* ---------------------------------------------------------------- batch norm */

/* Whether BatchNormalization writes its output k: not the running statistics' outputs (1, 2) of a
 * training program whose running stats are model state, updated in place in their buffers. */
bool ck_emit_batch_norm_writes(const ck_emit *e, const ck_node *n, int k) {
    bool state = ck_attr_int(n, "training_mode", 0) != 0 && e->o && !e->o->infer;
    return !(state && (k == 1 || k == 2) && n->in[k + 2]->role == CK_ROLE_BUFFER);
}

ck_status ck_emit_batch_norm(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0];
    if (want_f32_inputs(e, n)) return CK_ERR_UNSUPPORTED;
    if (x->rank < 2) return ck_emit_unsupported(e, n, "input '%s' must have rank >= 2 (N,C,...)", x->name);
    int training = ck_attr_int(n, "training_mode", 0) != 0;
    if (!training && (has(n, 1, true) || has(n, 2, true)))
        return ck_emit_unsupported(e, n, "running_mean/running_var outputs require training_mode=1");
    int64_t N = x->dims[0], C = x->dims[1], S = ck_emit_prod(x->dims, 2, x->rank);
    /* outputs 1, 2: the updated running statistics. In a training program whose running stats are
     * the model's state (BUFFER values), the update goes straight into them, in place (the kernel
     * reads a channel's old value before writing it), so the next step and --dump-params see it;
     * an output value something reads gets a copy. */
    const ck_value *run[3] = {NULL, NULL, NULL};
    for (int k = 1; k < 3; k++)
        run[k] = !ck_emit_batch_norm_writes(e, n, k) ? n->in[k + 2] : has(n, k, true) ? n->out[k] : NULL;
    ck_emit_call(e, "batch_norm");
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->out[0], false);
    for (int k = 1; k < 3; k++) {
        ck_emit_printf(e, ", ");
        ptr_or_null(e, run[k], false);
    }
    /* outputs 3, 4: the saved batch mean / inverse std the backward (and a recompute) read */
    for (int k = 3; k < 5; k++) {
        ck_emit_printf(e, ", ");
        ptr_or_null(e, has(n, k, true) ? n->out[k] : NULL, false);
    }
    for (int i = 0; i < 5; i++) {
        ck_emit_printf(e, ", ");
        ck_emit_ptr(e, n->in[i], true);
    }
    /* the running variance's convention (ck_options.bn_unbiased_var): -1 decides by the producer */
    int unbiased = e->o ? e->o->bn_unbiased_var : -1;
    if (unbiased < 0) {
        const char *p = e->g->producer_name;
        unbiased = p && strncmp(p, "pytorch", 7) == 0;
    }
    ck_emit_printf(e, ", %lld, %lld, %lld, %a, %a, %d, %d));\n", (long long)N, (long long)C, (long long)S,
                   (double)ck_attr_float(n, "epsilon", 1e-5f), (double)ck_attr_float(n, "momentum", 0.9f), training,
                   training && unbiased);
    for (int k = 1; k < 3; k++) {
        const ck_value *o = has(n, k, true) ? n->out[k] : NULL;
        if (!o || run[k] == o || o->offset == run[k]->offset || !is_read(e->g, o)) continue;
        ck_emit_call(e, "strided_copy");
        ck_emit_printf(e, ", 4, ");
        ck_emit_ptr(e, o, false);
        ck_emit_printf(e, ", ");
        ck_emit_ptr(e, run[k], true);
        ck_emit_printf(e, ", 1, (const int64_t[]){%lld}, (const int64_t[]){1}, 0));\n", (long long)C);
    }
    return CK_OK;
}

/* ---------------------------------------------------------------- dropout */

/* Reached only when the node is not a view: training_mode is not a constant false, or the mask
 * is wanted. ratio and training_mode must then be constants; the node's id keys the RNG. */
ck_status ck_emit_dropout(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0];
    if (ck_emit_want_dtype(e, n, x, "input", f32_only)) return CK_ERR_UNSUPPORTED;
    double ratio = ck_dropout_ratio(n, e->o); /* 0: y = x, mask all true */
    if (ratio < 0) /* training_mode computed at run time, or ratio when training */
        return n->in[2]->data ? not_const(e, n, 1, " in training mode") : not_const(e, n, 2, "");
    if (has(n, 1, false) && n->in[1]->dtype != CK_F32 && n->in[1]->dtype != CK_F64)
        return ck_emit_unsupported(e, n, "ratio '%s' has dtype %s; expected a float", n->in[1]->name, ck_dtype_name(n->in[1]->dtype));
    if (!(ratio >= 0.0 && ratio < 1.0)) return ck_emit_unsupported(e, n, "ratio %g is not in [0, 1)", ratio);
    ck_emit_call(e, "dropout");
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->out[0], false);
    ck_emit_printf(e, ", ");
    ptr_or_null(e, has(n, 1, true) ? n->out[1] : NULL, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    /* the RNG key: the node's id, or the forward's for a recompute clone (attribute "key") */
    ck_emit_printf(e, ", %lld, %a, %lld));\n", (long long)ck_value_numel(x), (double)(float)ratio,
                   (long long)ck_attr_int(n, "key", n->id));
    return CK_OK;
}

/* ---------------------------------------------------------------- random ops */

/* The Philox-key salt of a node's `seed` attribute (0 without one): the splitmix64 finalizer of
 * the float's bits, so a seed changes every draw of the node and equal seeds give equal salts. */
static uint64_t seed_salt(const ck_node *n) {
    const ck_attr *a = ck_attr_find(n, "seed");
    if (!a || a->kind != CK_ATTR_FLOAT) return 0;
    uint32_t bits;
    memcpy(&bits, &a->f, sizeof bits);
    uint64_t z = (uint64_t)bits + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* RandomUniform[Like], RandomNormal[Like], Bernoulli: ckrt_random, keyed by the node's id (or the
 * forward's, for a recompute clone: attribute "key"); with --disable-dropout the expectation. */
ck_status ck_emit_random(ck_emit *e, const ck_node *n) {
    static const ck_dtype floats[] = {CK_F32, CK_F64, CK_UNDEF};
    static const ck_dtype bern_out[] = {CK_F32, CK_F64, CK_BOOL, CK_I64, CK_I32, CK_UNDEF};
    const ck_value *y = n->out[0];
    bool bern = n->op == CK_OP_BERNOULLI, normal = n->op == CK_OP_RANDOM_NORMAL || n->op == CK_OP_RANDOM_NORMAL_LIKE;
    if (ck_emit_want_dtype(e, n, y, "output", bern ? bern_out : floats)) return CK_ERR_UNSUPPORTED;
    if (bern && ck_emit_want_dtype(e, n, n->in[0], "input", floats)) return CK_ERR_UNSUPPORTED;
    double a = normal ? ck_attr_float(n, "mean", 0.0f) : ck_attr_float(n, "low", 0.0f);
    double b = normal ? ck_attr_float(n, "scale", 1.0f) : ck_attr_float(n, "high", 1.0f);
    ck_emit_call(e, "random");
    ck_emit_printf(e, ", %s, %s, ", bern ? "CKRT_RAND_BERNOULLI" : normal ? "CKRT_RAND_NORMAL" : "CKRT_RAND_UNIFORM",
                   ck_emit_dtype(y->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ptr_or_null(e, bern ? n->in[0] : NULL, true);
    ck_emit_printf(e, ", %s, %lld, %a, %a, 0x%llxull, %d, %lld));\n", ck_emit_dtype(bern ? n->in[0]->dtype : CK_UNDEF),
                   (long long)ck_value_numel(y), a, b, (unsigned long long)seed_salt(n), e->o && e->o->disable_dropout,
                   (long long)ck_attr_int(n, "key", n->id));
    return CK_OK;
}

/* ---------------------------------------------------------------- reductions */

ck_status ck_emit_reduce(ck_emit *e, const ck_node *n) {
    static const ck_dtype sum_ok[] = {CK_F32, CK_I64, CK_I32, CK_UNDEF};
    const ck_value *x = n->in[0];
    bool mean = n->op == CK_OP_REDUCE_MEAN;
    if (ck_emit_want_dtype(e, n, x, "input", mean ? f32_only : sum_ok)) return CK_ERR_UNSUPPORTED;
    /* the reduced axes, as shape inference decided them */
    int64_t axes[CK_MAX_RANK];
    int na = -1;
    if (has(n, 1, false)) {
        const ck_value *a = n->in[1];
        if (ck_value_numel(a) == 0) na = 0; /* an empty list is known from its shape alone */
        else if (!a->data) return not_const(e, n, 1, "");
        else if (ck_value_numel(a) > CK_MAX_RANK) return ck_emit_unsupported(e, n, "too many axes");
        else na = (int)ck_value_numel(a);
        for (int i = 0; i < na; i++) axes[i] = ck_value_get_i(a, i);
    } else {
        const ck_attr *at = ck_attr_find(n, "axes");
        if (at && at->kind == CK_ATTR_INTS) {
            if (at->n > CK_MAX_RANK) return ck_emit_unsupported(e, n, "too many axes");
            na = at->n;
            for (int i = 0; i < na; i++) axes[i] = at->ints[i];
        }
    }
    bool red[CK_MAX_RANK] = {0};
    if (na <= 0 && !ck_attr_int(n, "noop_with_empty_axes", 0))
        for (int i = 0; i < x->rank; i++) red[i] = true;
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + x->rank : axes[i];
        if (a < 0 || a >= x->rank) return ck_emit_unsupported(e, n, "axis %lld is out of range", (long long)axes[i]);
        red[a] = true;
    }
    int64_t kd[CK_MAX_RANK], ks[CK_MAX_RANK], rd[CK_MAX_RANK], rs[CK_MAX_RANK];
    int nk = 0, nr = 0;
    for (int i = 0; i < x->rank; i++) {
        int64_t stride = ck_emit_prod(x->dims, i + 1, x->rank);
        if (red[i]) rd[nr] = x->dims[i], rs[nr++] = stride;
        else kd[nk] = x->dims[i], ks[nk++] = stride;
    }
    ck_emit_call(e, "reduce");
    ck_emit_printf(e, ", %s, %s, ", mean ? "CKRT_REDUCE_MEAN" : "CKRT_REDUCE_SUM",
                   ck_emit_dtype(x->dtype));
    ck_emit_ptr(e, n->out[0], false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %d, ", nk);
    ck_emit_i64s(e, nk, kd);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, nk, ks);
    ck_emit_printf(e, ", %d, ", nr);
    ck_emit_i64s(e, nr, rd);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, nr, rs);
    ck_emit_printf(e, "));\n");
    return CK_OK;
}

/* ---------------------------------------------------------------- global pooling */

ck_status ck_emit_global_pool(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0];
    if (ck_emit_want_dtype(e, n, x, "input", f32_only)) return CK_ERR_UNSUPPORTED;
    if (x->rank < 3) return ck_emit_unsupported(e, n, "input '%s' must have rank >= 3 (N,C,spatial...)", x->name);
    ck_emit_call(e, "global_avg_pool");
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->out[0], false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %lld, %lld));\n", (long long)(x->dims[0] * x->dims[1]), (long long)ck_emit_prod(x->dims, 2, x->rank));
    return CK_OK;
}

/* ---------------------------------------------------------------- normalization backward (was emit_train_norm.c) */

static ck_status want_f32(ck_emit *e, const ck_node *n) {
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] && ck_emit_want_dtype(e, n, n->in[i], "input", f32_only)) return CK_ERR_UNSUPPORTED;
    return CK_OK;
}

/* ", PTR" for each of the first n outputs (NULL when absent), then for each input. */
static void outs_ins(ck_emit *e, const ck_node *n, int n_out, int n_in) {
    for (int k = 0; k < n_out; k++) {
        ck_emit_printf(e, ", ");
        if (k < n->n_out && n->out[k]) ck_emit_ptr(e, n->out[k], false);
        else ck_emit_printf(e, "NULL");
    }
    for (int i = 0; i < n_in; i++) {
        ck_emit_printf(e, ", ");
        ck_emit_ptr(e, n->in[i], true);
    }
}

/* Inputs [from, to) must each hold `want` elements. */
static ck_status want_numel(ck_emit *e, const ck_node *n, int from, int to, int64_t want, const char *what) {
    for (int i = from; i < to; i++)
        if (ck_value_numel(n->in[i]) != want)
            return ck_emit_unsupported(e, n, "input %d '%s' has %lld elements; expected %lld (%s)", i, n->in[i]->name,
                                       (long long)ck_value_numel(n->in[i]), (long long)want, what);
    return CK_OK;
}

/* (dy, x, scale, mean, inv_std) -> dx, dscale, dbias; attributes copied from the forward */
ck_status ck_emit_layer_norm_grad(ck_emit *e, const ck_node *n) {
    if (want_f32(e, n)) return CK_ERR_UNSUPPORTED;
    const ck_value *x = n->in[1];
    int64_t axis = ck_attr_int(n, "axis", -1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank)
        return ck_emit_unsupported(e, n, "axis %lld is out of range for rank %d", (long long)ck_attr_int(n, "axis", -1), x->rank);
    if (ck_attr_int(n, "stash_type", 1) != 1)
        return ck_emit_unsupported(e, n, "stash_type %lld is not supported (float32 statistics only: stash_type 1)",
                                   (long long)ck_attr_int(n, "stash_type", 1));
    for (int k = 1; k < n->n_out; k++)
        if (n->out[k] && ck_emit_want_dtype(e, n, n->out[k], "output", f32_only)) return CK_ERR_UNSUPPORTED;
    int64_t rows = ck_emit_prod(x->dims, 0, (int)axis), cols = ck_emit_prod(x->dims, (int)axis, x->rank);
    if (ck_value_numel(n->in[0]) != rows * cols) return ck_emit_unsupported(e, n, "gradient and input differ in size");
    if (want_numel(e, n, 2, 3, cols, "the normalized shape") || want_numel(e, n, 3, 5, rows, "one statistic per row"))
        return CK_ERR_UNSUPPORTED;
    ck_emit_call(e, "layer_norm_grad");
    outs_ins(e, n, 3, 5);
    ck_emit_printf(e, ", %lld, %lld));\n", (long long)rows, (long long)cols);
    return CK_OK;
}

/* x: (N, C, spatial...) -> (N, C, S); false (after reporting) when x is not at least (N, C). */
static bool nchw(ck_emit *e, const ck_node *n, const ck_value *x, int64_t *N, int64_t *C, int64_t *S) {
    if (x->rank < 2) {
        ck_emit_unsupported(e, n, "input '%s' must have rank >= 2 (N,C,...)", x->name);
        return false;
    }
    *N = x->dims[0], *C = x->dims[1], *S = ck_emit_prod(x->dims, 2, x->rank);
    return true;
}

/* (dy, x, scale, saved_mean, saved_inv_std) -> dx, dscale, dbias, all per channel C */
ck_status ck_emit_batch_norm_grad(ck_emit *e, const ck_node *n) {
    if (want_f32(e, n)) return CK_ERR_UNSUPPORTED;
    int64_t N, C, S;
    if (!nchw(e, n, n->in[1], &N, &C, &S)) return CK_ERR_UNSUPPORTED;
    if (ck_value_numel(n->in[0]) != N * C * S) return ck_emit_unsupported(e, n, "gradient and input differ in size");
    if (want_numel(e, n, 2, 5, C, "one per channel")) return CK_ERR_UNSUPPORTED;
    for (int k = 1; k < n->n_out; k++)
        if (n->out[k] && ck_emit_want_dtype(e, n, n->out[k], "output", f32_only)) return CK_ERR_UNSUPPORTED;
    ck_emit_call(e, "batch_norm_grad");
    outs_ins(e, n, 3, 5);
    ck_emit_printf(e, ", %lld, %lld, %lld));\n", (long long)N, (long long)C, (long long)S);
    return CK_OK;
}

/* (x, scale, bias, saved_mean, saved_inv_std) -> y, the forward's bits (no running stats) */
ck_status ck_emit_batch_norm_apply(ck_emit *e, const ck_node *n) {
    if (want_f32(e, n)) return CK_ERR_UNSUPPORTED;
    int64_t N, C, S;
    if (!nchw(e, n, n->in[0], &N, &C, &S)) return CK_ERR_UNSUPPORTED;
    if (want_numel(e, n, 1, 5, C, "one per channel")) return CK_ERR_UNSUPPORTED;
    ck_emit_call(e, "batch_norm_apply");
    outs_ins(e, n, 1, 5);
    ck_emit_printf(e, ", %lld, %lld, %lld));\n", (long long)N, (long long)C, (long long)S);
    return CK_OK;
}
