/* emit_train_norm.c — emitters of the normalization training ops: ckptc.LayerNormGrad,
 * ckptc.BatchNormGrad and ckptc.BatchNormApply (BatchNormalization's recompute), kernels in
 * runtime/cpu_train_norm.c.
 *
 * The backward reads the statistics the forward saved (LayerNormalization's outputs 1 and 2,
 * BatchNormalization's internal outputs 3 and 4) rather than recomputing them, so the shape logic
 * here is the forward's: an axis split into (rows, cols) for LayerNorm, (N, C, S) for BatchNorm.
 * An output nobody asked for (a NULL slot) is passed as NULL and not computed.
 */
#include "emit.h"

static const ck_dtype f32_only[] = {CK_F32, CK_UNDEF};

static int64_t prod(const int64_t *d, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= d[i];
    return p;
}

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
    int64_t rows = prod(x->dims, 0, (int)axis), cols = prod(x->dims, (int)axis, x->rank);
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
    *N = x->dims[0], *C = x->dims[1], *S = prod(x->dims, 2, x->rank);
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
