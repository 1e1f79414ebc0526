/* emit_dense.c — emitters for the GEMM-backed families: gemm, matmul, conv.
 * Shapes are reduced at compile time to the sizes and stride arrays the kernels take
 * (runtime/ckrt_ops.h documents each call).
 */
#include "emit.h"

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
    ck_emit_printf(e, "    CKRT_TRY(ckrt_gemm(c, ");
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
