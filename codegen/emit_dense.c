/* emit_dense.c — emitters for the GEMM-backed families: gemm, matmul, conv (and the window
 * geometry conv shares with the pools). Shapes are reduced at compile time to the sizes and
 * stride arrays the kernels take (runtime/ckrt_ops.h documents each call).
 */
#include "emit.h"

#include <string.h>

static const ck_dtype f32_only[] = {CK_F32, CK_UNDEF};

ck_status ck_emit_gemm(ck_emit *e, const ck_node *n) {
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] && ck_emit_want_dtype(e, n, n->in[i], "input", f32_only)) return CK_ERR_UNSUPPORTED;
    const ck_value *a = n->in[0], *y = n->out[0];
    int ta = ck_attr_int(n, "transA", 0) != 0, tb = ck_attr_int(n, "transB", 0) != 0;
    int64_t M = y->dims[0], N = y->dims[1], K = ta ? a->dims[0] : a->dims[1];
    int64_t cr = 0, cc = 0;
    const ck_value *cm = n->n_in > 2 ? n->in[2] : NULL;
    if (cm) { /* (M,N), (1,N), (N), (M,1), (1,1), (1), () */
        cr = cm->rank == 2 ? cm->dims[0] : 1;
        cc = cm->rank >= 1 ? cm->dims[cm->rank - 1] : 1;
    }
    ck_emit_call(e, "gemm");
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, a, true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->in[1], true);
    ck_emit_printf(e, ", ");
    if (cm) ck_emit_ptr(e, cm, true);
    else ck_emit_printf(e, "NULL");
    ck_emit_printf(e, ", %lld, %lld, %lld, %d, %d, %a, %a, %lld, %lld));\n", (long long)M, (long long)N, (long long)K, ta,
                   tb, (double)ck_attr_float(n, "alpha", 1.0f), (double)ck_attr_float(n, "beta", 1.0f), (long long)cr,
                   (long long)cc);
    return CK_OK;
}

/* MatMul: 1-D operands are promoted as numpy does ((K) -> (1,K) on the left, (K,1) on the right);
 * the batch dims broadcast, each operand's batch strides being 0 on its broadcast axes. An
 * operand the fold reads through a permutation (ck_ir.h, CK_PERM_A/B) is passed as it lies, with
 * its rows' stride and whether it is stored transposed; a result written transposed (CK_PERM_Y)
 * with its rows' and batch strides in out[0] (as y^T = b^T a^T, operands swapped, when its rows
 * are the contiguous axis there). ck_matmul_layout_of works all of it out. */
ck_status ck_emit_matmul(ck_emit *e, const ck_node *n) {
    const ck_value *a = n->in[0], *b = n->in[1], *y = n->out[0];
    if (ck_emit_want_dtype(e, n, a, "input", f32_only) || ck_emit_want_dtype(e, n, b, "input", f32_only))
        return CK_ERR_UNSUPPORTED;
    ck_matmul_layout L;
    if (!ck_matmul_layout_of(n, &L)) return ck_emit_unsupported(e, n, "no GEMM layout for its operands' permutations");
    ck_emit_call(e, "matmul");
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, L.swap ? b : a, true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, L.swap ? a : b, true);
    ck_emit_printf(e, ", %lld, %lld, %lld, %d, ", (long long)L.M, (long long)L.N, (long long)L.K, L.brank);
    ck_emit_i64s(e, L.brank, L.bdims);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, L.brank, L.sa);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, L.brank, L.sb);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, L.brank, L.sy);
    ck_emit_printf(e, ", %d, %lld, %d, %lld, %lld));\n", L.ta, (long long)L.lda, L.tb, (long long)L.ldb, (long long)L.ldc);
    return CK_OK;
}

/* Strides, dilations and begin/end pads of a Conv or pool node over its ns spatial axes, with
 * auto_pad resolved against the inferred output sizes (SAME_UPPER puts the odd pad at the end,
 * SAME_LOWER at the beginning). k: the kernel. Shared with emit_move.c (pools). */
void ck_emit_window(const ck_node *n, int ns, const int64_t *k, int64_t *strides, int64_t *dilations,
                    int64_t *pads_begin, int64_t *pads_end);
void ck_emit_window(const ck_node *n, int ns, const int64_t *k, int64_t *strides, int64_t *dilations,
                    int64_t *pads_begin, int64_t *pads_end) {
    const ck_value *x = n->in[0], *y = n->out[0];
    const ck_attr *s = ck_attr_find(n, "strides"), *dl = ck_attr_find(n, "dilations"), *p = ck_attr_find(n, "pads");
    const char *ap = ck_attr_str(n, "auto_pad", "NOTSET");
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    for (int i = 0; i < ns; i++) {
        strides[i] = s && s->n == ns ? s->ints[i] : 1;
        dilations[i] = dl && dl->n == ns ? dl->ints[i] : 1;
        pads_begin[i] = pads_end[i] = 0;
        if (same) {
            int64_t ek = (k[i] - 1) * dilations[i] + 1;
            int64_t total = (y->dims[2 + i] - 1) * strides[i] + ek - x->dims[2 + i];
            if (total < 0) total = 0;
            pads_begin[i] = strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
            pads_end[i] = total - pads_begin[i];
        } else if (strcmp(ap, "NOTSET") == 0 && p && p->n == 2 * ns) {
            pads_begin[i] = p->ints[i];
            pads_end[i] = p->ints[ns + i];
        }
    }
}

ck_status ck_emit_conv(ck_emit *e, const ck_node *n) {
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] && ck_emit_want_dtype(e, n, n->in[i], "input", f32_only)) return CK_ERR_UNSUPPORTED;
    const ck_value *x = n->in[0], *w = n->in[1], *y = n->out[0];
    const ck_value *bias = n->n_in > 2 ? n->in[2] : NULL;
    int ns = x->rank - 2;
    int64_t k[CK_MAX_RANK], st[CK_MAX_RANK], dl[CK_MAX_RANK], pb[CK_MAX_RANK], pe[CK_MAX_RANK];
    for (int i = 0; i < ns; i++) k[i] = w->dims[2 + i];
    ck_emit_window(n, ns, k, st, dl, pb, pe);
    ck_emit_call(e, "conv");
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, w, true);
    ck_emit_printf(e, ", ");
    if (bias) ck_emit_ptr(e, bias, true);
    else ck_emit_printf(e, "NULL");
    if (n->ws_bytes > 0) ck_emit_printf(e, ", (float *)(A + %lld)", (long long)n->ws_offset);
    else ck_emit_printf(e, ", NULL");
    ck_emit_printf(e, ", %lld", (long long)ck_attr_int(n, CK_LANES_ATTR, 1));
    ck_emit_printf(e, ", %d, %lld, %lld, %lld, %lld, ", ns, (long long)x->dims[0], (long long)x->dims[1],
                   (long long)w->dims[0], (long long)ck_attr_int(n, "group", 1));
    ck_emit_i64s(e, ns, x->dims + 2);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, ns, y->dims + 2);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, ns, k);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, ns, st);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, ns, pb);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, ns, dl);
    ck_emit_printf(e, "));\n");
    return CK_OK;
}
