/* cpu_dense.c — GEMM-backed and windowed kernels on the CPU: Gemm, MatMul (one cblas_sgemm per
 * batch entry, or one for the whole batch when the right operand is shared), Conv (im2col into
 * the planned workspace, then one GEMM per image and group, oneDNN's sgemm where the build has
 * it: ckrt_dnnl.h) and the pools (the bodies of ckrt_kernels_move.h, one output element per
 * iteration).
 *
 * Threads and determinism. OpenBLAS runs single-threaded: its own threading cuts the output
 * into pieces that depend on the thread count, and a piece's edge changes which micro-kernel
 * computes an element (measured here, OpenBLAS 0.3.21 on Zen: a 256x64x256 product cut at row
 * 128 differs from the uncut one in 1759 of 16384 elements, even with K = 8). What does not
 * change the bits is a cut at a multiple of the kernel's row unroll (24 rows on Zen): the cut
 * pieces are then tiled exactly as the uncut product. So a GEMM is split over the pool by rows
 * of y only, at multiples of GEMM_ROW_UNIT (48, a multiple of the x86 kernels' 24 and 16), one
 * single-threaded cblas_sgemm per piece; K is never split. ckrt_cpu_init checks that property on
 * this machine's OpenBLAS (probe products cut at every multiple of the unit, compared bit for
 * bit with the uncut ones, including sizes where a piece falls under OpenBLAS's small-matrix
 * threshold) and keeps every GEMM in one piece when it does not hold. Batched MatMuls spread
 * their batch entries over the pool instead, each entry the same GEMM as on one thread.
 */
#include "ckrt.h"
#include "ckrt_kernels_move.h"
#include "ckrt_dnnl.h"
#include "ckrt_pool.h"
#include "cpu_conv.h"
#include "cpu_pool.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#define GEMM_ROW_UNIT 48
#define GEMM_SPLIT_MIN_MNK (1 << 18) /* below: one call (waking threads costs more than it saves) */

static bool gemm_split_ok; /* ckrt_cpu_init's probe: cuts at GEMM_ROW_UNIT give the uncut bits */

typedef struct {
    float *y;
    const float *a, *b;
    int64_t M, N, K;
    int trans_a, trans_b;
    float alpha, beta;
} gemm_job;

static void sgemm(const gemm_job *g, int64_t r0, int64_t r1) {
    int64_t K = g->K, M = g->M, N = g->N;
    cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans, g->trans_b ? CblasTrans : CblasNoTrans, (int)(r1 - r0),
                (int)N, (int)K, g->alpha, g->trans_a ? g->a + r0 : g->a + r0 * K, g->trans_a ? (int)M : (int)K, g->b,
                g->trans_b ? (int)K : (int)N, g->beta, g->y + r0 * N, (int)N);
}

/* units [u0, u1) of GEMM_ROW_UNIT rows */
static void gemm_units(void *arg, int64_t u0, int64_t u1) {
    const gemm_job *g = arg;
    int64_t r1 = u1 * GEMM_ROW_UNIT;
    sgemm(g, u0 * GEMM_ROW_UNIT, r1 < g->M ? r1 : g->M);
}

/* y = alpha op(a) op(b) + beta y, the rows of y cut at multiples of GEMM_ROW_UNIT over the pool. */
static void gemm_rows(const gemm_job *g) {
    int64_t units = (g->M + GEMM_ROW_UNIT - 1) / GEMM_ROW_UNIT, t = ckrt_threads();
    if (!gemm_split_ok || t == 1 || units < 2 || g->M * g->N * g->K < GEMM_SPLIT_MIN_MNK) {
        sgemm(g, 0, g->M);
        return;
    }
    ckrt_parallel_for(units, (units + t - 1) / t, gemm_units, (void *)g);
}

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
    gemm_job g = {y, a, b, M, N, K, trans_a, trans_b, alpha, bt};
    gemm_rows(&g);
    return CKRT_OK;
}

/* ---------------------------------------------------------------- matmul */

typedef struct {
    float *y;
    const float *a, *b;
    int64_t M, N, K;
    int brank;
    const int64_t *bdims, *a_bstrides, *b_bstrides;
} matmul_job;

/* batch entries [b0, b1), each one uncut GEMM (a call from a pool thread runs inline) */
static void matmul_entries(void *arg, int64_t b0, int64_t b1) {
    const matmul_job *j = arg;
    for (int64_t bi = b0; bi < b1; bi++) {
        gemm_job g = {j->y + bi * j->M * j->N, j->a + ck_k_offset(bi, j->brank, j->bdims, j->a_bstrides),
                      j->b + ck_k_offset(bi, j->brank, j->bdims, j->b_bstrides), j->M, j->N, j->K, 0, 0, 1.0f, 0.0f};
        sgemm(&g, 0, g.M);
    }
}

int ckrt_matmul(ckrt_ctx *c, float *y, const float *a, const float *b, int64_t M, int64_t N, int64_t K, int brank,
                const int64_t *bdims, const int64_t *a_bstrides, const int64_t *b_bstrides) {
    int64_t batch = 1;
    for (int k = 0; k < brank; k++) batch *= bdims[k];
    if (batch == 0 || M == 0 || N == 0) return CKRT_OK;
    /* b shared by the whole batch and a contiguous over it (x @ W): one GEMM of batch*M rows */
    bool b_shared = true, a_packed = true;
    int64_t s = M * K;
    for (int k = brank - 1; k >= 0; k--) {
        b_shared = b_shared && (b_bstrides[k] == 0 || bdims[k] == 1);
        a_packed = a_packed && (a_bstrides[k] == s || bdims[k] == 1);
        s *= bdims[k];
    }
    if (b_shared && a_packed && batch > 1) {
        M *= batch;
        batch = 1;
    }
    if (batch == 1) return ckrt_gemm(c, y, a, b, NULL, M, N, K, 0, 0, 1.0f, 0.0f, 0, 0);
    if (K == 0) {
        memset(y, 0, sizeof(float) * (size_t)(batch * M * N));
        return CKRT_OK;
    }
    matmul_job j = {y, a, b, M, N, K, brank, bdims, a_bstrides, b_bstrides};
    ckrt_parallel_for(batch, 1, matmul_entries, &j);
    return CKRT_OK;
}

/* ---------------------------------------------------------------- conv */

int ckrt_conv(ckrt_ctx *c, float *y, const float *x, const float *w, const float *b, float *ws, int nsp, int64_t N,
              int64_t C, int64_t M, int64_t group, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
              const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations) {
    int64_t in_n = 1, out_n = 1, taps = 1;
    bool direct = true; /* 1x1, unit stride, no padding: x is already the column matrix */
    for (int d = 0; d < nsp; d++) {
        in_n *= in_sp[d];
        out_n *= out_sp[d];
        taps *= k[d];
        direct = direct && k[d] == 1 && pads_begin[d] == 0 && in_sp[d] == out_sp[d];
    }
    if (!direct && !ws) return ckrt_fail(c, CKRT_ERR_INTERNAL, "conv needs a workspace but none was planned");
    int64_t Cg = C / group, Mg = M / group, R = Cg * taps;
    ck_conv_geom geom;
    ck_conv_geom_init(&geom, nsp, in_sp, out_sp, k, strides, pads_begin, dilations);
    int64_t B = direct ? 1 : ck_conv_batch(N, group, Mg, R, out_n);
    if (B > 1) { /* B images side by side (group 1): col (R, nb out_n), then y from the staging matrix */
        float *stage = ws + R * B * out_n;
        for (int64_t n0 = 0; n0 < N; n0 += B) {
            int64_t nb = N - n0 < B ? N - n0 : B, cols = nb * out_n;
            geom.col_rs = cols;
            for (int64_t i = 0; i < nb; i++) ck_cpu_im2col(ws + i * out_n, x + (n0 + i) * C * in_n, C, &geom);
            /* stage (M, nb out_n) = w (M, R) @ col (R, nb out_n) */
            ckrt_conv_sgemm_2(false, false, M, cols, R, 1.0f, w, R, ws, cols, 0.0f, stage, cols);
            for (int64_t i = 0; i < nb; i++)
                for (int64_t m = 0; m < M; m++) {
                    float *ym = y + ((n0 + i) * M + m) * out_n, bm = b ? b[m] : 0.0f;
                    const float *sm = stage + m * cols + i * out_n;
                    if (b)
                        for (int64_t s = 0; s < out_n; s++) ym[s] = sm[s] + bm;
                    else
                        memcpy(ym, sm, sizeof(float) * (size_t)out_n);
                }
        }
        return CKRT_OK;
    }
    for (int64_t n = 0; n < N; n++) {
        for (int64_t g = 0; g < group; g++) {
            const float *img = x + (n * C + g * Cg) * in_n;
            float *yg = y + (n * M + g * Mg) * out_n;
            const float *col = img;
            if (!direct) {
                ck_cpu_im2col(ws, img, Cg, &geom);
                col = ws;
            }
            /* yg (Mg, out_n) = w_g (Mg, R) @ col (R, out_n) */
            ckrt_conv_sgemm_2(false, false, Mg, out_n, R, 1.0f, w + g * Mg * R, R, col, out_n, 0.0f, yg, out_n);
            if (b)
                for (int64_t m = 0; m < Mg; m++) {
                    float bm = b[g * Mg + m];
                    for (int64_t s = 0; s < out_n; s++) yg[m * out_n + s] += bm;
                }
        }
    }
    return CKRT_OK;
}

/* ---------------------------------------------------------------- pooling */

int ckrt_pool(ckrt_ctx *c, int kind, float *y, int64_t *indices, const float *x, int nsp, int64_t N, int64_t C,
              const int64_t *in_sp, const int64_t *out_sp, const int64_t *k, const int64_t *strides,
              const int64_t *pads_begin, const int64_t *pads_end, const int64_t *dilations, int count_include_pad) {
    if (kind != CKRT_POOL_MAX && kind != CKRT_POOL_AVG) return ckrt_fail(c, CKRT_ERR_INTERNAL, "pool kind %d", kind);
    if (nsp == 2) { /* cpu_pool.c: the same bits, faster */
        ck_cpu_pool_2d(kind, y, indices, x, N * C, in_sp, out_sp, k, strides, pads_begin, pads_end, dilations,
                       count_include_pad);
        return CKRT_OK;
    }
    int64_t n = N * C;
    for (int d = 0; d < nsp; d++) n *= out_sp[d];
    for (int64_t i = 0; i < n; i++) {
        int64_t at = -1;
        y[i] = ck_k_pool(i, kind, x, nsp, in_sp, out_sp, k, strides, pads_begin, pads_end, dilations, count_include_pad,
                         &at);
        if (indices) indices[i] = at;
    }
    return CKRT_OK;
}

/* One probe for ckrt_cpu_init: op(a) op(b) for an M x N x K product, uncut and cut at every
 * multiple of GEMM_ROW_UNIT; true when the two are the same bits. */
static bool probe_cut(int64_t M, int64_t N, int64_t K, int ta, int tb) {
    float *a = malloc(sizeof(float) * (size_t)(M * K)), *b = malloc(sizeof(float) * (size_t)(K * N));
    float *y0 = malloc(sizeof(float) * (size_t)(M * N)), *y1 = malloc(sizeof(float) * (size_t)(M * N));
    bool same = false;
    if (a && b && y0 && y1) {
        uint32_t s = 12345u;
        for (int64_t i = 0; i < M * K; i++) a[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
        for (int64_t i = 0; i < K * N; i++) b[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
        gemm_job g0 = {y0, a, b, M, N, K, ta, tb, 1.0f, 0.0f}, g1 = g0;
        g1.y = y1;
        sgemm(&g0, 0, M);
        for (int64_t r = 0; r < M; r += GEMM_ROW_UNIT) sgemm(&g1, r, r + GEMM_ROW_UNIT < M ? r + GEMM_ROW_UNIT : M);
        same = memcmp(y0, y1, sizeof(float) * (size_t)(M * N)) == 0;
    }
    free(a), free(b), free(y0), free(y1);
    return same;
}

/* OpenBLAS's own threads stay off (see the top of this file); ckrt_gemm cuts products over the
 * pool only where the probes show that cutting keeps the bits: a tall product past OpenBLAS's
 * P block, transposed operands, and one whose pieces fall under the small-matrix threshold
 * (M N K = 1e6 on the cores that have one) while the whole does not. The convolutions' GEMMs
 * (oneDNN's sgemm where the build has it) run single-threaded: ckrt_dnnl_setup. */
void ckrt_cpu_init(void) {
    openblas_set_num_threads(1);
    (void)ckrt_dnnl_setup();
    gemm_split_ok = probe_cut(5 * GEMM_ROW_UNIT + 7, 37, 300, 0, 0) && probe_cut(1000, 8, 40, 0, 0) &&
                    probe_cut(200, 64, 64, 1, 1) && probe_cut(480, 64, 64, 0, 1) && probe_cut(250, 100, 100, 1, 0);
}

bool ckrt_gemm_cuts(void) { return gemm_split_ok; }
