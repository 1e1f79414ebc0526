/* cpu_dense.c — GEMM-backed kernels on the CPU: Gemm through OpenBLAS's cblas_sgemm.
 *
 * Determinism: OpenBLAS's level-3 threading splits the output over M and N, never over K, so
 * each output element is summed in the same order whatever the thread count.
 */
#include "ckrt.h"

#include <cblas.h>
#include <string.h>

int ckrt_gemm(ckrt_ctx *c, float *y, const float *a, const float *b, const float *cm, int64_t M, int64_t N, int64_t K,
              int trans_a, int trans_b, float alpha, float beta, int64_t cm_rows, int64_t cm_cols) {
    (void)c;
    float bt = 0.0f;
    if (cm && beta != 0.0f) {
        /* y = broadcast(cm), then y = alpha*op(a)op(b) + beta*y */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) y[i * N + j] = cm[(cm_rows == 1 ? 0 : i) * cm_cols + (cm_cols == 1 ? 0 : j)];
        bt = beta;
    }
    if (K == 0) {
        if (bt == 0.0f) memset(y, 0, sizeof(float) * (size_t)(M * N));
        else for (int64_t i = 0; i < M * N; i++) y[i] *= bt;
        return CKRT_OK;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, alpha, a, trans_a ? (int)M : (int)K, b, trans_b ? (int)K : (int)N, bt, y, (int)N);
    return CKRT_OK;
}
