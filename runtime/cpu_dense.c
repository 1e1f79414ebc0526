/* cpu_dense.c — GEMM-backed and windowed kernels on the CPU: Gemm, MatMul (one GEMM per batch
 * entry, or one for the whole batch when the right operand is shared), Conv (im2col into the
 * planned workspace, then one GEMM per image and group) and the pools (the bodies of
 * ckrt_kernels_move.h, one output element per iteration).
 *
 * Threads and determinism: every GEMM goes through ckrt_dnnl.h (oneDNN's sgemm where the build
 * and CPU have it, else OpenBLAS's, either pinned to one thread), a product cut into pieces chosen
 * from its shape alone and spread over the pool (ckrt_sgemm_cut), so its bits are the same for
 * every thread count; batched MatMuls spread their batch entries over the pool instead, each
 * entry one whole GEMM. K is never split.
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

int ckrt_gemm(ckrt_ctx *c, float *y, const float *a, const float *b, const float *cm, int64_t M, int64_t N, int64_t K,
              int trans_a, int trans_b, float alpha, float beta, int64_t cm_rows, int64_t cm_cols) {
    (void)c;
    bool bias = cm && beta != 0.0f;
    if (K == 0) { /* no product: y = beta broadcast(cm), or 0 */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                y[i * N + j] = bias ? cm[(cm_rows == 1 ? 0 : i) * cm_cols + (cm_cols == 1 ? 0 : j)] * beta : 0.0f;
        return CKRT_OK;
    }
    if (bias) /* y = broadcast(cm), then y = alpha op(a) op(b) + beta y, piece by piece */
        ckrt_sgemm_cut_bias(trans_a, trans_b, M, N, K, alpha, a, trans_a ? M : K, b, trans_b ? K : N, beta, y, cm, cm_rows,
                            cm_cols);
    else
        ckrt_sgemm_cut(trans_a, trans_b, M, N, K, alpha, a, trans_a ? M : K, b, trans_b ? K : N, 0.0f, y, N);
    return CKRT_OK;
}

/* ---------------------------------------------------------------- matmul */

typedef struct {
    float *y;
    const float *a, *b;
    int64_t M, N, K;
    int brank;
    const int64_t *bdims, *a_bstrides, *b_bstrides, *y_bstrides;
    int ta, tb;
    int64_t lda, ldb, ldc;
} matmul_job;

/* batch entries [b0, b1), each one uncut GEMM (a call from a pool thread runs inline) */
static void matmul_entries(void *arg, int64_t b0, int64_t b1) {
    const matmul_job *j = arg;
    for (int64_t bi = b0; bi < b1; bi++) {
        ckrt_sgemm(j->ta, j->tb, j->M, j->N, j->K, 1.0f, j->a + ck_k_offset(bi, j->brank, j->bdims, j->a_bstrides), j->lda,
                   j->b + ck_k_offset(bi, j->brank, j->bdims, j->b_bstrides), j->ldb, 0.0f,
                   j->y + ck_k_offset(bi, j->brank, j->bdims, j->y_bstrides), j->ldc);
    }
}

int ckrt_matmul(ckrt_ctx *c, float *y, const float *a, const float *b, int64_t M, int64_t N, int64_t K, int brank,
                const int64_t *bdims, const int64_t *a_bstrides, const int64_t *b_bstrides, const int64_t *y_bstrides,
                int ta, int64_t lda, int tb, int64_t ldb, int64_t ldc) {
    (void)c;
    int64_t batch = 1;
    for (int k = 0; k < brank; k++) batch *= bdims[k];
    if (batch == 0 || M == 0 || N == 0) return CKRT_OK;
    if (K == 0) {
        for (int64_t bi = 0; bi < batch; bi++)
            for (int64_t i = 0; i < M; i++)
                memset(y + ck_k_offset(bi, brank, bdims, y_bstrides) + i * ldc, 0, sizeof(float) * (size_t)N);
        return CKRT_OK;
    }
    /* b shared by the whole batch, and a's and y's rows evenly spaced across it (x @ W): one GEMM
     * of batch*M rows */
    bool rows = !ta;
    int64_t s = M;
    for (int k = brank - 1; k >= 0; k--) {
        if (bdims[k] == 1) continue;
        rows = rows && b_bstrides[k] == 0 && a_bstrides[k] == s * lda && y_bstrides[k] == s * ldc;
        s *= bdims[k];
    }
    if (batch == 1 || rows) {
        ckrt_sgemm_cut(ta, tb, M * batch, N, K, 1.0f, a, lda, b, ldb, 0.0f, y, ldc);
        return CKRT_OK;
    }
    matmul_job j = {y, a, b, M, N, K, brank, bdims, a_bstrides, b_bstrides, y_bstrides, ta, tb, lda, ldb, ldc};
    ckrt_parallel_for(batch, 1, matmul_entries, &j);
    return CKRT_OK;
}

/* ---------------------------------------------------------------- conv */

/* The fused forward: when ckrt_sgemm_cut would cut each image's product y_n (M, out_n) =
 * w (M, R) @ col_n (R, out_n) along its output positions, one block takes one such piece of
 * positions [a, a + len) for every image in turn: it writes its own columns of the column matrix
 * (ck_cpu_im2col_2d_cols; direct: the image is the column matrix), multiplies them, and adds the
 * bias. The products, pieces and sums are ckrt_sgemm_cut's and the loop's below, so are the bits;
 * but one fork-join serves the whole batch instead of two per image, and each thread multiplies
 * the columns it just wrote, in its own cache, instead of half written by the other thread
 * (on a 2-core host that traffic ate the second thread's gain: ResNet-18's 16x16 stage ran as
 * fast on 2 threads as on 1). */
typedef struct {
    float *y, *col;
    const float *x, *w, *b;
    int64_t C, M, R, N, in_n, out_n, piece;
    bool direct;
    const ck_conv_geom *g;
} conv_cols_job;

static void conv_cols_block(void *arg, int64_t p0, int64_t p1) {
    const conv_cols_job *j = arg;
    for (int64_t p = p0; p < p1; p++) {
        int64_t a = p * j->piece, len = j->out_n - a < j->piece ? j->out_n - a : j->piece;
        /* the piece's own (R, len) block of the workspace, its positions' columns */
        ck_conv_geom g = *j->g;
        g.col_rs = len;
        for (int64_t n = 0; n < j->N; n++) {
            const float *img = j->x + n * j->C * j->in_n, *col = img + a;
            int64_t ldb = j->out_n;
            float *yn = j->y + n * j->M * j->out_n;
            if (!j->direct) {
                ck_cpu_im2col_2d_cols(j->col + j->R * a - a, img, j->R, a, a + len, &g);
                col = j->col + j->R * a, ldb = len;
            }
            ckrt_sgemm(false, false, j->M, len, j->R, 1.0f, j->w, j->R, col, ldb, 0.0f, yn + a, j->out_n);
            if (j->b)
                for (int64_t m = 0; m < j->M; m++) {
                    float bm = j->b[m], *ym = yn + m * j->out_n;
                    for (int64_t s = a; s < a + len; s++) ym[s] += bm;
                }
        }
    }
}

/* One lane's batch of images (ck_conv_units): B images side by side, or one by one. */
typedef struct {
    float *y;
    const float *x, *w, *b;
    int64_t C, M, group, Cg, Mg, R, in_n, out_n, B;
    bool direct;
    const ck_conv_geom *g;
} conv_args;

static void conv_unit(const void *arg, float *ws, int64_t n0, int64_t nb) {
    const conv_args *a = arg;
    const float *x = a->x, *w = a->w, *b = a->b;
    float *y = a->y;
    int64_t C = a->C, M = a->M, R = a->R, in_n = a->in_n, out_n = a->out_n;
    ck_conv_geom geom = *a->g;
    if (a->B > 1) { /* B images side by side (group 1): col (R, nb out_n), then y from the staging matrix */
        float *stage = ws + R * a->B * out_n;
        int64_t cols = nb * out_n;
        geom.col_rs = cols;
        for (int64_t i = 0; i < nb; i++) ck_cpu_im2col(ws + i * out_n, x + (n0 + i) * C * in_n, C, &geom);
        /* stage (M, nb out_n) = w (M, R) @ col (R, nb out_n) */
        ckrt_sgemm_cut(false, false, M, cols, R, 1.0f, w, R, ws, cols, 0.0f, stage, cols);
        for (int64_t i = 0; i < nb; i++)
            for (int64_t m = 0; m < M; m++) {
                float *ym = y + ((n0 + i) * M + m) * out_n, bm = b ? b[m] : 0.0f;
                const float *sm = stage + m * cols + i * out_n;
                if (b)
                    for (int64_t s = 0; s < out_n; s++) ym[s] = sm[s] + bm;
                else
                    memcpy(ym, sm, sizeof(float) * (size_t)out_n);
            }
        return;
    }
    for (int64_t n = n0; n < n0 + nb; n++) {
        for (int64_t g = 0; g < a->group; g++) {
            const float *img = x + (n * C + g * a->Cg) * in_n;
            float *yg = y + (n * M + g * a->Mg) * out_n;
            const float *col = img;
            if (!a->direct) {
                ck_cpu_im2col(ws, img, a->Cg, &geom);
                col = ws;
            }
            /* yg (Mg, out_n) = w_g (Mg, R) @ col (R, out_n) */
            ckrt_sgemm_cut(false, false, a->Mg, out_n, R, 1.0f, w + g * a->Mg * R, R, col, a->direct ? out_n : geom.col_rs, 0.0f,
                           yg, out_n);
            if (b)
                for (int64_t m = 0; m < a->Mg; m++) {
                    float bm = b[g * a->Mg + m];
                    for (int64_t s = 0; s < out_n; s++) yg[m * out_n + s] += bm;
                }
        }
    }
}

int ckrt_conv(ckrt_ctx *c, float *y, const float *x, const float *w, const float *b, float *ws, int64_t lanes, int nsp, int64_t N,
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
    if (lanes < 1 || (lanes > 1 && direct)) return ckrt_fail(c, CKRT_ERR_INTERNAL, "conv: %lld lanes", (long long)lanes);
    int64_t Cg = C / group, Mg = M / group, R = Cg * taps;
    ck_conv_geom geom;
    ck_conv_geom_init(&geom, nsp, in_sp, out_sp, k, strides, pads_begin, dilations);
    int64_t B = direct ? 1 : ck_conv_batch(CK_CONV_FWD, N, group, Mg, R, out_n);
    int64_t piece = ck_conv_position_piece(direct, nsp, group, B, Mg, R, out_n);
    /* fused (conv_cols_block) on more than one thread; on one it gains nothing (the per-image path
     * below was 10% faster on ResNet-18's 16x16 stage), and the bits are the same either way */
    if (lanes == 1 && ckrt_threads() > 1 && piece) {
        /* the pieces' blocks fill R out_n floats: at the workspace's end, which the row padding of
         * ck_conv_col_floats makes longer, so that its last byte is written (measured == planned) */
        float *blocks = direct ? ws : ws + (ck_conv_col_floats(R, out_n) - R * out_n);
        conv_cols_job j = {y, blocks, x, w, b, C, M, R, N, in_n, out_n, piece, direct, &geom};
        ckrt_parallel_for((out_n + piece - 1) / piece, 1, conv_cols_block, &j);
        return CKRT_OK;
    }
    conv_args a = {y, x, w, b, C, M, group, Cg, Mg, R, in_n, out_n, B, direct, &geom};
    ck_conv_units(conv_unit, &a, ws, lanes, direct ? 0 : ck_conv_ws_floats(1, B, Mg, R, out_n), N, B);
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

/* OpenBLAS's own threads stay off: its threading cuts products by the thread count, which changes
 * the bits; the pool runs fixed pieces instead (ckrt_sgemm_cut). oneDNN is pinned likewise. */
void ckrt_cpu_init(void) {
    openblas_set_num_threads(1);
    (void)ckrt_dnnl_setup();
}
