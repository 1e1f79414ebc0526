/* cpu_elementwise.c — the CPU backend's elementwise entry points: loops over the bodies in
 * ckrt_kernels.h, one output element per iteration, dispatching on dtype once per call.
 */
#include "ckrt.h"
#include "ckrt_kernels.h"

int ckrt_binary(ckrt_ctx *c, int op, ckrt_dtype dt, void *y, const void *a, const void *b, int rank,
                const int64_t *dims, const int64_t *a_strides, const int64_t *b_strides) {
    int64_t n = 1;
    for (int k = 0; k < rank; k++) n *= dims[k];
    bool cmp = op >= CKRT_EQUAL;
    for (int64_t i = 0; i < n; i++) {
        int64_t ia = ck_k_offset(i, rank, dims, a_strides), ib = ck_k_offset(i, rank, dims, b_strides);
        switch (dt) {
        case CKRT_F32: {
            float x = ((const float *)a)[ia], z = ((const float *)b)[ib];
            if (cmp) ((uint8_t *)y)[i] = ck_k_compare(op, x, z);
            else ((float *)y)[i] = ck_k_binary_f32(op, x, z);
            break;
        }
        case CKRT_F64: {
            double x = ((const double *)a)[ia], z = ((const double *)b)[ib];
            if (cmp) ((uint8_t *)y)[i] = ck_k_compare(op, x, z);
            else ((double *)y)[i] = ck_k_binary_f64(op, x, z);
            break;
        }
        case CKRT_I64: case CKRT_I32: {
            int64_t x = dt == CKRT_I64 ? ((const int64_t *)a)[ia] : ((const int32_t *)a)[ia];
            int64_t z = dt == CKRT_I64 ? ((const int64_t *)b)[ib] : ((const int32_t *)b)[ib];
            if (op == CKRT_DIV && z == 0) return ckrt_fail(c, CKRT_ERR_DATA, "integer division by zero at element %lld", (long long)i);
            if (cmp) ((uint8_t *)y)[i] = ck_k_compare_i64(op, x, z);
            else if (dt == CKRT_I64) ((int64_t *)y)[i] = ck_k_binary_i64(op, x, z);
            else ((int32_t *)y)[i] = (int32_t)ck_k_binary_i64(op, x, z);
            break;
        }
        case CKRT_BOOL:
            if (!cmp) return ckrt_fail(c, CKRT_ERR_INTERNAL, "binary op %d on bool", op);
            ((uint8_t *)y)[i] = ck_k_compare_i64(op, ((const uint8_t *)a)[ia], ((const uint8_t *)b)[ib]);
            break;
        default: return ckrt_fail(c, CKRT_ERR_INTERNAL, "binary op on %s", ckrt_dtype_name(dt));
        }
    }
    return CKRT_OK;
}

int ckrt_unary(ckrt_ctx *c, int op, ckrt_dtype dt, void *y, const void *x, int64_t n, float alpha) {
    switch (dt) {
    case CKRT_F32:
        for (int64_t i = 0; i < n; i++) ((float *)y)[i] = ck_k_unary_f32(op, ((const float *)x)[i], alpha);
        return CKRT_OK;
    case CKRT_I64:
        for (int64_t i = 0; i < n; i++) ((int64_t *)y)[i] = ck_k_unary_i64(op, ((const int64_t *)x)[i]);
        return CKRT_OK;
    case CKRT_I32:
        for (int64_t i = 0; i < n; i++) ((int32_t *)y)[i] = (int32_t)ck_k_unary_i64(op, ((const int32_t *)x)[i]);
        return CKRT_OK;
    case CKRT_BOOL:
        if (op != CKRT_NOT) break;
        for (int64_t i = 0; i < n; i++) ((uint8_t *)y)[i] = !((const uint8_t *)x)[i];
        return CKRT_OK;
    default: break;
    }
    return ckrt_fail(c, CKRT_ERR_INTERNAL, "unary op %d on %s", op, ckrt_dtype_name(dt));
}
