/* cpu_dnnl.c — the GEMMs of the CPU backend (Gemm, MatMul and the convolutions: cpu_dense.c,
 * cpu_train_conv.c): oneDNN's sgemm, pinned to one thread, at the host's best ISA from AVX2 up,
 * where the build has oneDNN; see ckrt_dnnl.h for why, and for how a product is cut into pieces
 * chosen from its shape alone for the thread pool (ckrt_sgemm_cut). */
#include "ckrt_dnnl.h"
#include "ckrt_pool.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CKRT_HAVE_DNNL
#include <dnnl.h>

void omp_set_num_threads(int n); /* libgomp: oneDNN's threading runtime in Debian's build */

bool ckrt_dnnl_setup(void) {
    static int state; /* 0: not yet, 1: oneDNN, -1: OpenBLAS */
    if (!state) {
        omp_set_num_threads(1);
        /* AVX2 or better (the ISA values nest as bit sets); ONEDNN_MAX_CPU_ISA, read by oneDNN, caps it */
        dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
        state = ((unsigned)isa & (unsigned)dnnl_cpu_isa_avx2) == (unsigned)dnnl_cpu_isa_avx2 ? 1 : -1;
        const char *want = getenv("CKRT_GEMM"); /* "openblas": OpenBLAS even where oneDNN runs */
        if (want && strcmp(want, "openblas") == 0) state = -1;
        else if (want && *want && strcmp(want, "onednn") != 0)
            fprintf(stderr, "warning: CKRT_GEMM='%s' is neither 'onednn' nor 'openblas': ignored\n", want);
    }
    return state > 0;
}

const char *ckrt_gemm_name(void) {
    if (!ckrt_dnnl_setup()) return "OpenBLAS";
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx2: return "oneDNN avx2";
    case dnnl_cpu_isa_avx2_vnni: return "oneDNN avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "oneDNN avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "oneDNN avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "oneDNN avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "oneDNN avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "oneDNN avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "oneDNN avx512_core_amx";
    default: return "oneDNN avx2-or-better (an ISA this list does not name)";
    }
}
#else
bool ckrt_dnnl_setup(void) { return false; }
const char *ckrt_gemm_name(void) { return "OpenBLAS"; }
#endif

void ckrt_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) { /* an empty sum (lda or ldb 0, which the BLAS refuses): C = beta C */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return;
    }
#ifdef CKRT_HAVE_DNNL
    /* OpenMP's thread count is per thread: a pool thread must pin its own before oneDNN runs on it */
    static _Thread_local bool pinned;
    if (!pinned) omp_set_num_threads(1), pinned = true;
    if (ckrt_dnnl_setup() && dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C,
                                        ldc) == dnnl_success)
        return;
    /* refused (it checks its arguments only): OpenBLAS, the same product */
#endif
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* ---------------------------------------------------------------- pieces fixed by the shape */

typedef struct {
    bool ta, tb, by_cols;
    int64_t M, N, K, lda, ldb, ldc, piece, len;
    float alpha, beta;
    const float *A, *B, *cm; /* cm: C's broadcast first (ckrt_sgemm_cut_bias), else NULL */
    int64_t cm_rows, cm_cols;
    float *C;
} piece_job;

/* C's rows [r0, r1) by columns [c0, c1) = the broadcast of j->cm */
static void fill(const piece_job *j, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t i = r0; i < r1; i++) {
        const float *src = j->cm + (j->cm_rows == 1 ? 0 : i) * j->cm_cols;
        float *dst = j->C + i * j->ldc;
        if (j->cm_cols == 1)
            for (int64_t k = c0; k < c1; k++) dst[k] = src[0];
        else
            memcpy(dst + c0, src + c0, sizeof(float) * (size_t)(c1 - c0));
    }
}

/* Pieces [p0, p1): rows (columns) [p piece, min(len, (p + 1) piece)) of C. */
static void pieces(void *arg, int64_t p0, int64_t p1) {
    const piece_job *j = arg;
    for (int64_t p = p0; p < p1; p++) {
        int64_t a = p * j->piece, n = j->len - a < j->piece ? j->len - a : j->piece;
        if (j->cm) fill(j, j->by_cols ? 0 : a, j->by_cols ? j->M : a + n, j->by_cols ? a : 0, j->by_cols ? a + n : j->N);
        if (j->by_cols)
            ckrt_sgemm(j->ta, j->tb, j->M, n, j->K, j->alpha, j->A, j->lda, j->tb ? j->B + a * j->ldb : j->B + a, j->ldb,
                       j->beta, j->C + a, j->ldc);
        else
            ckrt_sgemm(j->ta, j->tb, n, j->N, j->K, j->alpha, j->ta ? j->A + a : j->A + a * j->lda, j->lda, j->B, j->ldb,
                       j->beta, j->C + a * j->ldc, j->ldc);
    }
}

static void cut(piece_job *j) {
    j->piece = ckrt_sgemm_piece(j->M, j->N, j->K, &j->by_cols);
    j->len = j->by_cols ? j->N : j->M;
    if (j->piece >= j->len) { /* one piece: here */
        j->piece = j->len;
        pieces(j, 0, 1);
        return;
    }
    ckrt_parallel_for((j->len + j->piece - 1) / j->piece, 1, pieces, j);
}

void ckrt_sgemm_cut(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    piece_job j = {.ta = trans_a, .tb = trans_b, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc, .alpha = alpha,
                   .beta = beta, .A = A, .B = B, .C = C};
    cut(&j);
}

void ckrt_sgemm_cut_bias(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                         int64_t lda, const float *B, int64_t ldb, float beta, float *C, const float *cm, int64_t cm_rows,
                         int64_t cm_cols) {
    piece_job j = {.ta = trans_a, .tb = trans_b, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = N, .alpha = alpha,
                   .beta = beta, .A = A, .B = B, .cm = cm, .cm_rows = cm_rows, .cm_cols = cm_cols, .C = C};
    cut(&j);
}
