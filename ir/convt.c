/* convt.c — ONNX ConvTranspose: its geometry (strides, dilations, the pads output_shape and
 * auto_pad imply, output_padding) and output shape, for shape inference here and the lowering in
 * passes/lower.c, which runs it as the Conv it equals: the input with stride - 1 zeros between
 * its elements (Reshape, Pad, Reshape), padded by dilation (k - 1) - pad on each side (a
 * negative amount crops; output_padding adds to the end), convolved at stride 1 with the weights
 * flipped along every spatial axis and their two channel axes swapped per group. Per spatial axis
 * the output length is
 *   stride (in - 1) + output_padding + dilation (k - 1) + 1 - pad_begin - pad_end.
 */
#include "ck_ir.h"

#include <string.h>

static int ints_or(const ck_node *n, const char *name, int64_t *out, int cnt, int64_t dflt) {
    const ck_attr *a = ck_attr_find(n, name);
    for (int i = 0; i < cnt; i++) out[i] = dflt;
    if (!a) return cnt;
    if (a->kind != CK_ATTR_INTS) return -1;
    for (int i = 0; i < a->n && i < cnt; i++) out[i] = a->ints[i]; /* a longer list is refused by the caller */
    return a->n;
}

ck_status ck_convt_geometry(ck_node *n, ck_convt *g, ck_diag *d) {
    const ck_value *x = n->in[0], *w = n->in[1];
    memset(g, 0, sizeof *g);
    if (x->rank < 3 || w->rank != x->rank)
        return ck_node_err(d, n, CK_ERR_SHAPE, "input '%s' and weight '%s' must have the same rank >= 3", x->name, w->name);
    if (x->dtype != CK_F32 || w->dtype != CK_F32)
        return ck_node_err(d, n, CK_ERR_UNSUPPORTED, "ckptc runs ConvTranspose in float32 ('%s' is %s)", x->name, ck_dtype_name(x->dtype));
    int ns = g->ns = x->rank - 2;
    if (ns > 3) /* the zero-dilated view has 2 + 2 ns axes (passes/lower.c), at most CK_MAX_RANK */
        return ck_node_err(d, n, CK_ERR_UNSUPPORTED, "ConvTranspose with %d spatial axes: ckptc supports 1 to 3", ns);
    g->group = ck_attr_int(n, "group", 1);
    if (g->group < 1 || x->dims[1] % g->group || w->dims[0] != x->dims[1])
        return ck_node_err(d, n, CK_ERR_SHAPE, "weight '%s' must have %lld input channels in %lld groups", w->name, (long long)x->dims[1],
                           (long long)g->group);
    g->out_ch = w->dims[1] * g->group;
    if (n->n_in > 2 && n->in[2] && (n->in[2]->rank != 1 || n->in[2]->dims[0] != g->out_ch))
        return ck_node_err(d, n, CK_ERR_SHAPE, "bias '%s' must have shape (%lld)", n->in[2]->name, (long long)g->out_ch);
    int64_t pads[2 * CK_MAX_RANK], outs[CK_MAX_RANK];
    if (ints_or(n, "strides", g->stride, ns, 1) != ns || ints_or(n, "dilations", g->dil, ns, 1) != ns ||
        ints_or(n, "output_padding", g->out_pad, ns, 0) != ns || ints_or(n, "pads", pads, 2 * ns, 0) != 2 * ns)
        return ck_node_err(d, n, CK_ERR_MODEL, "strides, dilations, output_padding and pads must have one value per spatial axis");
    int n_out = ck_attr_find(n, "output_shape") ? ints_or(n, "output_shape", outs, ns, 0) : 0;
    if (n_out && n_out != ns) return ck_node_err(d, n, CK_ERR_MODEL, "output_shape must have one value per spatial axis");
    const char *ap = ck_attr_str(n, "auto_pad", "NOTSET");
    bool upper = strcmp(ap, "SAME_UPPER") == 0, lower = strcmp(ap, "SAME_LOWER") == 0, valid = strcmp(ap, "VALID") == 0;
    if (!upper && !lower && !valid && strcmp(ap, "NOTSET") != 0) return ck_node_err(d, n, CK_ERR_MODEL, "auto_pad '%s' is not known", ap);
    for (int i = 0; i < ns; i++) {
        int64_t k = w->dims[2 + i], in = x->dims[2 + i], s = g->stride[i], dl = g->dil[i];
        if (s < 1 || dl < 1 || g->out_pad[i] < 0)
            return ck_node_err(d, n, CK_ERR_SHAPE, "axis %d: stride, dilation and output_padding must be positive", i);
        const int64_t big = (int64_t)1 << 31; /* bounds that keep the arithmetic below (and the dilated view) in int64 */
        if (s > big || dl > big || g->out_pad[i] > big || k > big || in > big || pads[i] < -big || pads[i] > big ||
            pads[ns + i] < -big || pads[ns + i] > big || (n_out && (outs[i] < 0 || outs[i] > big)))
            return ck_node_err(d, n, CK_ERR_SHAPE, "axis %d: a stride, dilation, pad, output_padding or output_shape above 2^31", i);
        g->k[i] = k;
        int64_t full = s * (in - 1) + g->out_pad[i] + dl * (k - 1) + 1; /* the output without pads */
        if (n_out || upper || lower) { /* the pads that give output_shape, or in * stride for SAME_* */
            int64_t want = n_out ? outs[i] : in * s, total = full - want;
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); /* floor(total / 2), as the spec's reference */
            g->pad_b[i] = upper ? half : total - half;
            g->pad_e[i] = total - g->pad_b[i];
        } else if (!valid)
            g->pad_b[i] = pads[i], g->pad_e[i] = pads[ns + i];
        g->out[i] = full - g->pad_b[i] - g->pad_e[i];
        if (g->out[i] < 0) return ck_node_err(d, n, CK_ERR_SHAPE, "axis %d: the pads leave a negative output length", i);
    }
    return CK_OK;
}

ck_status ck_infer_conv_transpose(ck_node *n, ck_diag *d) {
    ck_convt g;
    ck_status st = ck_convt_geometry(n, &g, d);
    if (st) return st;
    int64_t dims[CK_MAX_RANK] = {n->in[0]->dims[0], g.out_ch};
    memcpy(dims + 2, g.out, sizeof(int64_t) * (size_t)g.ns);
    ck_node_set_out(n, 0, n->in[0]->dtype, n->in[0]->rank, dims);
    return CK_OK;
}
