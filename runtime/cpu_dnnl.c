/* cpu_dnnl.c — the convolution GEMMs of the CPU backend (cpu_dense.c, cpu_train_conv.c): oneDNN's
 * sgemm, pinned to one thread and AVX2, where the build has oneDNN; see ckrt_dnnl.h for why. */
#include "ckrt_dnnl.h"

#include <cblas.h>

#ifdef CKRT_HAVE_DNNL
#include <dnnl.h>

void omp_set_num_threads(int n); /* libgomp: oneDNN's threading runtime in Debian's build */

bool ckrt_dnnl_setup(void) {
    static int state; /* 0: not yet, 1: oneDNN, -1: OpenBLAS */
    if (!state) {
        /* before oneDNN generates any kernel: the cap is read once */
        dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
        omp_set_num_threads(1);
        state = dnnl_get_effective_cpu_isa() == dnnl_cpu_isa_avx2 ? 1 : -1;
    }
    return state > 0;
}
#else
bool ckrt_dnnl_setup(void) { return false; }
#endif

void ckrt_conv_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) { /* an empty sum (lda or ldb 0, which the BLAS refuses): C = beta C */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return;
    }
#ifdef CKRT_HAVE_DNNL
    if (ckrt_dnnl_setup() && dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C,
                                        ldc) == dnnl_success)
        return;
    /* refused (it checks its arguments only): OpenBLAS, the same product */
#endif
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}
