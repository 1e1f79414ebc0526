/* emit_train_move.c — emitters of the windowed and data-movement gradients: ConvGradInput,
 * ConvGradWeight, PoolGrad (runtime/cpu_train_conv.c), GatherGrad, SliceGrad and PadGrad
 * (runtime/cpu_train_move.c).
 *
 * The rules copy the forward node's attributes onto these nodes, so the window geometry (strides,
 * dilations, pads with auto_pad resolved) comes from the forward's own helper, ck_emit_window,
 * evaluated on the forward's shapes: it reads the input from in[0] and the output from out[0],
 * which for a gradient node are other tensors, so it is handed a stand-in node whose in[0] is
 * shaped like the forward's input and out[0] like its output (dy).
 */
#include "emit.h"

#include <string.h>

/* in emit_dense.c: strides, dilations and resolved pads of a Conv/pool node */
void ck_emit_window(const ck_node *n, int ns, const int64_t *k, int64_t *strides, int64_t *dilations,
                    int64_t *pads_begin, int64_t *pads_end);

static const ck_dtype f32_only[] = {CK_F32, CK_UNDEF};

/* The forward's window for gradient node n: x the forward's input (its shape), y its output. */
static void window(const ck_node *n, const ck_value *x, const ck_value *y, int ns, const int64_t *k, int64_t *st, int64_t *dl,
                   int64_t *pb, int64_t *pe) {
    ck_node fwd = *n;
    ck_value *in[1] = {(ck_value *)x}, *out[1] = {(ck_value *)y};
    fwd.in = in;
    fwd.out = out;
    fwd.n_in = fwd.n_out = 1;
    ck_emit_window(&fwd, ns, k, st, dl, pb, pe);
}

static void emit_arrays(ck_emit *e, int ns, int n, const int64_t *const *arrays) {
    for (int i = 0; i < n; i++) {
        ck_emit_printf(e, ", ");
        ck_emit_i64s(e, ns, arrays[i]);
    }
}

/* ---------------------------------------------------------------- convolution */

/* ConvGradInput (dy, w) -> dx and ConvGradWeight (dy, x) -> dw share one call shape. */
static ck_status emit_conv_grad(ck_emit *e, const ck_node *n, bool weight) {
    for (int i = 0; i < 2; i++)
        if (ck_emit_want_dtype(e, n, n->in[i], "input", f32_only)) return CK_ERR_UNSUPPORTED;
    const ck_value *dy = n->in[0], *out = n->out[0];
    const ck_value *x = weight ? n->in[1] : out, *w = weight ? out : n->in[1];
    int ns = x->rank - 2;
    int64_t group = ck_attr_int(n, "group", 1);
    if (ns < 1 || w->rank != x->rank || dy->rank != x->rank)
        return ck_emit_unsupported(e, n, "input, weight and gradient ranks differ (%d, %d, %d)", x->rank, w->rank, dy->rank);
    if (group < 1 || x->dims[1] % group || w->dims[0] % group || w->dims[1] * group != x->dims[1])
        return ck_emit_unsupported(e, n, "group %lld does not divide the channels", (long long)group);
    int64_t k[CK_MAX_RANK], st[CK_MAX_RANK], dl[CK_MAX_RANK], pb[CK_MAX_RANK], pe[CK_MAX_RANK];
    for (int i = 0; i < ns; i++) k[i] = w->dims[2 + i];
    window(n, x, dy, ns, k, st, dl, pb, pe);
    ck_emit_call(e, weight ? "conv_grad_weight" : "conv_grad_input");
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, out, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, dy, true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->in[1], true);
    if (n->ws_bytes > 0) ck_emit_printf(e, ", (float *)(A + %lld)", (long long)n->ws_offset);
    else ck_emit_printf(e, ", NULL");
    if (!weight) ck_emit_printf(e, ", %lld", (long long)ck_attr_int(n, CK_LANES_ATTR, 1));
    ck_emit_printf(e, ", %d, %lld, %lld, %lld, %lld", ns, (long long)x->dims[0], (long long)x->dims[1], (long long)w->dims[0],
                   (long long)group);
    emit_arrays(e, ns, 6, (const int64_t *const[]){x->dims + 2, dy->dims + 2, k, st, pb, dl});
    ck_emit_printf(e, "));\n");
    return CK_OK;
}

ck_status ck_emit_conv_grad_input(ck_emit *e, const ck_node *n) { return emit_conv_grad(e, n, false); }
ck_status ck_emit_conv_grad_weight(ck_emit *e, const ck_node *n) { return emit_conv_grad(e, n, true); }

/* ---------------------------------------------------------------- pooling */

/* PoolGrad (dy, x) -> dx; mode 0: MaxPool, 1: AveragePool. */
ck_status ck_emit_pool_grad(ck_emit *e, const ck_node *n) {
    for (int i = 0; i < 2; i++)
        if (ck_emit_want_dtype(e, n, n->in[i], "input", f32_only)) return CK_ERR_UNSUPPORTED;
    const ck_value *dy = n->in[0], *x = n->in[1], *dx = n->out[0];
    int ns = x->rank - 2;
    int64_t mode = ck_attr_int(n, "mode", -1);
    if (mode != 0 && mode != 1) return ck_emit_unsupported(e, n, "pooling mode %lld", (long long)mode);
    const ck_attr *ka = ck_attr_find(n, "kernel_shape");
    if (ns < 1 || !ka || ka->n != ns) return ck_emit_unsupported(e, n, "kernel_shape must have %d values", ns);
    if (dy->rank != x->rank) return ck_emit_unsupported(e, n, "gradient rank %d differs from the input's %d", dy->rank, x->rank);
    int64_t st[CK_MAX_RANK], dl[CK_MAX_RANK], pb[CK_MAX_RANK], pe[CK_MAX_RANK];
    window(n, x, dy, ns, ka->ints, st, dl, pb, pe);
    ck_emit_call(e, "pool_grad");
    ck_emit_printf(e, ", %s, ", mode == 0 ? "CKRT_POOL_MAX" : "CKRT_POOL_AVG");
    ck_emit_ptr(e, dx, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, dy, true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %d, %lld, %lld", ns, (long long)x->dims[0], (long long)x->dims[1]);
    emit_arrays(e, ns, 7, (const int64_t *const[]){x->dims + 2, dy->dims + 2, ka->ints, st, pb, pe, dl});
    ck_emit_printf(e, ", %d));\n", mode == 0 ? 0 : ck_attr_int(n, "count_include_pad", 0) != 0);
    return CK_OK;
}

/* ---------------------------------------------------------------- gather, slice */

/* GatherGrad (dy, indices) -> d(data) of attr data_shape along attr axis (normalized). */
ck_status ck_emit_gather_grad(ck_emit *e, const ck_node *n) {
    static const ck_dtype idx_ok[] = {CK_I64, CK_I32, CK_UNDEF};
    const ck_value *dy = n->in[0], *idx = n->in[1], *dx = n->out[0];
    if (ck_emit_want_dtype(e, n, dy, "input", f32_only) || ck_emit_want_dtype(e, n, idx, "indices", idx_ok))
        return CK_ERR_UNSUPPORTED;
    int64_t axis = ck_attr_int(n, "axis", 0);
    if (axis < 0) axis += dx->rank;
    if (axis < 0 || axis >= dx->rank) return ck_emit_unsupported(e, n, "axis %lld out of range", (long long)axis);
    int64_t outer = ck_emit_prod(dx->dims, 0, (int)axis), len = dx->dims[axis], inner = ck_emit_prod(dx->dims, (int)axis + 1, dx->rank);
    if (ck_value_numel(dy) != outer * ck_value_numel(idx) * inner)
        return ck_emit_unsupported(e, n, "gradient size does not match the data and indices");
    ck_emit_call(e, "gather_grad");
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, dx, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, dy, true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, idx, true);
    ck_emit_printf(e, ", %s, %lld, %lld, %lld, %lld));\n", ck_emit_dtype(idx->dtype), (long long)outer, (long long)len,
                   (long long)inner, (long long)ck_value_numel(idx));
    return CK_OK;
}

/* SliceGrad (dy) -> dx of attr input_shape; attrs starts and steps per axis (resolved, clamped). */
ck_status ck_emit_slice_grad(ck_emit *e, const ck_node *n) {
    static const ck_dtype float_types[] = {CK_F32, CK_F64, CK_F16, CK_UNDEF};
    const ck_value *dy = n->in[0], *dx = n->out[0];
    if (ck_emit_want_dtype(e, n, dy, "input", float_types)) return CK_ERR_UNSUPPORTED;
    const ck_attr *sa = ck_attr_find(n, "starts"), *pa = ck_attr_find(n, "steps");
    if (!sa || !pa || sa->n != dx->rank || pa->n != dx->rank || dy->rank != dx->rank)
        return ck_emit_unsupported(e, n, "starts and steps must give one value per axis");
    int64_t xs[CK_MAX_RANK], s[CK_MAX_RANK], acc = 1, base = 0;
    bool empty = ck_value_numel(dy) == 0;
    for (int i = dx->rank - 1; i >= 0; i--) {
        xs[i] = acc;
        acc *= dx->dims[i];
    }
    for (int i = 0; i < dx->rank; i++) {
        int64_t last = sa->ints[i] + (dy->dims[i] - 1) * pa->ints[i];
        if (pa->ints[i] == 0) return ck_emit_unsupported(e, n, "slice step 0 on axis %d", i);
        if (!empty && (sa->ints[i] < 0 || sa->ints[i] >= dx->dims[i] || last < 0 || last >= dx->dims[i]))
            return ck_emit_unsupported(e, n, "slice on axis %d leaves the input", i);
        s[i] = xs[i] * pa->ints[i];
        base += sa->ints[i] * xs[i];
    }
    ck_emit_call(e, "slice_grad");
    ck_emit_printf(e, ", %zu, ", ck_dtype_size(dy->dtype));
    ck_emit_ptr(e, dx, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, dy, true);
    ck_emit_printf(e, ", %d, ", dy->rank);
    ck_emit_i64s(e, dy->rank, dy->dims);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, dy->rank, s);
    ck_emit_printf(e, ", %lld, %lld));\n", (long long)(empty ? 0 : base), (long long)ck_value_numel(dx));
    return CK_OK;
}

/* PadGrad (dy) -> dx of attr input_shape; attrs pads_begin (per axis) and mode (CK_PAD_*). */
ck_status ck_emit_pad_grad(ck_emit *e, const ck_node *n) {
    static const char *const modes[] = {"CKRT_PAD_CONSTANT", "CKRT_PAD_REFLECT", "CKRT_PAD_EDGE"};
    const ck_value *dy = n->in[0], *dx = n->out[0];
    if (ck_emit_want_dtype(e, n, dy, "input", f32_only)) return CK_ERR_UNSUPPORTED;
    const ck_attr *ba = ck_attr_find(n, "pads_begin");
    int64_t mode = ck_attr_int(n, "mode", -1);
    if (!ba || ba->n != dx->rank || dy->rank != dx->rank || mode < CK_PAD_CONSTANT || mode > CK_PAD_EDGE)
        return ck_emit_unsupported(e, n, "pads_begin must give one value per axis, mode one of the three");
    ck_emit_call(e, "pad_grad");
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, dx, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, dy, true);
    ck_emit_printf(e, ", %d, ", dx->rank);
    ck_emit_i64s(e, dx->rank, dx->dims);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, dy->rank, dy->dims);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, dx->rank, ba->ints);
    ck_emit_printf(e, ", %s));\n", modes[mode]);
    return CK_OK;
}
