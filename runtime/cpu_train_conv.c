/* cpu_train_conv.c — the CPU backend's convolution and pooling gradients.
 *
 * Conv's gradients go through GEMM like the forward (cpu_dense.c; oneDNN's sgemm where the build
 * has it, ckrt_dnnl.h), one image and group at a time, with the column matrix
 * col: (Cg * prod(k), prod(out_sp)) in the planned workspace (ck_ws_conv_grad):
 *   input:  col = w_g^T dy_g, then dx_g = col2im(col) (cpu_conv.h: the bits of ck_k_col2im, each
 *           dx element the sum of the column entries that read it, in a fixed order); with fewer
 *           than 16 output positions, col^T = dy_g^T w_g instead (the GEMM runs ~2x faster with
 *           its long side R as rows), read by col2im through strides;
 *           with few positions and a large product, B images at once (ckrt_conv_batch.h): dy's
 *           images gathered side by side into a staging matrix, one col^T for all of them;
 *   weight: col = im2col(x_g) (cpu_conv.h), then dw_g += dy_g col^T, image after image (the first image
 *           writes, the others accumulate), so dw is summed in image order; batched as the
 *           input gradient is, B images' columns side by side, batch after batch.
 * A 1x1 convolution with no begin padding and an output as large as its input needs no column
 * matrix (x, or dx, is its own), as in the forward; the planner then reserves no workspace, so
 * direct_conv below must agree exactly with ck_ws_conv_grad (ir/infer_train.c).
 *
 * Pooling's gradient runs the windows one after another (ck_k_pool_grad_window), which gives the
 * bits of the per-element body ck_k_pool_grad (what a GPU runs) at a fraction of its work.
 * Determinism: col2im and the pool bodies are one sequential sum per element in a fixed order;
 * the GEMMs are as reproducible as the GEMM library is, pinned to one thread (the forward's).
 */
#include "ckrt.h"
#include "ckrt_kernels_train.h"
#include "ckrt_dnnl.h"
#include "cpu_conv.h"
#include "cpu_pool.h"

#include <string.h>

#define CK_DGRAD_T_MAX_POSITIONS 16
#define CK_DGRAD_T_MIN_MNK (1 << 18)

/* No column matrix needed: 1x1 kernel, no begin padding, output as large as the input. */
static int direct_conv(int nsp, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k, const int64_t *pads_begin) {
    for (int d = 0; d < nsp; d++)
        if (k[d] != 1 || pads_begin[d] != 0 || in_sp[d] != out_sp[d]) return 0;
    return 1;
}

/* The window geometry both gradients walk; direct: a 1x1-like conv whose columns are the image. */
static int grad_geometry(ckrt_ctx *c, const float *ws, int nsp, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                         const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations, ck_conv_geom *geom, int *direct) {
    *direct = direct_conv(nsp, in_sp, out_sp, k, pads_begin);
    if (!*direct && !ws) return ckrt_fail(c, CKRT_ERR_INTERNAL, "conv gradient needs a workspace but none was planned");
    ck_conv_geom_init(geom, nsp, in_sp, out_sp, k, strides, pads_begin, dilations);
    return CKRT_OK;
}

/* stage (M, nb out_n) = images n0 .. n0 + nb - 1 of dy (N, M, out_n), side by side */
static void gather_dy(float *stage, const float *dy, int64_t n0, int64_t nb, int64_t M, int64_t out_n) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t i = 0; i < nb; i++)
            memcpy(stage + (m * nb + i) * out_n, dy + ((n0 + i) * M + m) * out_n, sizeof(float) * (size_t)out_n);
}

/* One lane's batch of images for the input gradient (ck_conv_units). */
typedef struct {
    float *dx;
    const float *dy, *w;
    int64_t C, M, group, Cg, Mg, R, in_n, out_n, B;
    bool direct, transposed;
    const ck_conv_geom *g;
} dgrad_args;

static void dgrad_unit(const void *arg, float *ws, int64_t n0, int64_t nb) {
    const dgrad_args *a = arg;
    int64_t C = a->C, M = a->M, R = a->R, in_n = a->in_n, out_n = a->out_n;
    ck_conv_geom geom = *a->g;
    if (a->B > 1) { /* B images at once (group 1): dy gathered as (M, nb out_n), col^T (nb out_n, R) */
        float *stage = ws + R * a->B * out_n;
        int64_t cols = nb * out_n;
        geom.col_rs = 1, geom.col_cs = R;
        gather_dy(stage, a->dy, n0, nb, M, out_n);
        ckrt_sgemm_cut(true, false, cols, R, M, 1.0f, stage, cols, a->w, R, 0.0f, ws, R);
        for (int64_t i = 0; i < nb; i++) ck_cpu_col2im(a->dx + (n0 + i) * C * in_n, ws + i * out_n * R, C, &geom);
        return;
    }
    for (int64_t n = n0; n < n0 + nb; n++) {
        for (int64_t g = 0; g < a->group; g++) {
            float *dxg = a->dx + (n * C + g * a->Cg) * in_n;
            const float *dyg = a->dy + (n * M + g * a->Mg) * out_n, *wg = a->w + g * a->Mg * R;
            if (a->transposed) { /* col^T (out_n, R) = dy_g^T (out_n, Mg) @ w_g (Mg, R) */
                ckrt_sgemm_cut(true, false, out_n, R, a->Mg, 1.0f, dyg, out_n, wg, R, 0.0f, ws, R);
                ck_cpu_col2im(dxg, ws, a->Cg, &geom);
                continue;
            }
            /* col (R, out_n) = w_g^T (R, Mg) @ dy_g (Mg, out_n); direct: col is dx_g itself */
            float *col = a->direct ? dxg : ws;
            ckrt_sgemm_cut(true, false, R, out_n, a->Mg, 1.0f, wg, R, dyg, out_n, 0.0f, col, a->direct ? out_n : geom.col_rs);
            if (!a->direct) ck_cpu_col2im(dxg, col, a->Cg, &geom);
        }
    }
}

int ckrt_conv_grad_input(ckrt_ctx *c, float *dx, const float *dy, const float *w, float *ws, int64_t lanes, int nsp, int64_t N,
                         int64_t C, int64_t M, int64_t group, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                         const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations) {
    int64_t in_n = ckrt_numel(nsp, in_sp), out_n = ckrt_numel(nsp, out_sp), taps = ckrt_numel(nsp, k);
    int64_t Cg = C / group, Mg = M / group, R = Cg * taps;
    if (N * C * in_n == 0) return CKRT_OK;
    if (out_n == 0 || Mg == 0 || taps == 0) { /* no window reads x, or nothing flows back */
        memset(dx, 0, sizeof(float) * (size_t)(N * C * in_n));
        return CKRT_OK;
    }
    int direct;
    ck_conv_geom geom;
    CKRT_TRY(grad_geometry(c, ws, nsp, in_sp, out_sp, k, strides, pads_begin, dilations, &geom, &direct));
    if (lanes < 1 || (lanes > 1 && direct)) return ckrt_fail(c, CKRT_ERR_INTERNAL, "conv gradient: %lld lanes", (long long)lanes);
    /* few output positions (ResNet's last stage: 2x2): the product as col^T, whose long side R is
     * the GEMM's vectorized one (2x the speed there); col2im reads it through its strides */
    bool transposed = !direct && out_n < CK_DGRAD_T_MAX_POSITIONS && R * out_n * Mg >= CK_DGRAD_T_MIN_MNK;
    if (transposed) geom.col_rs = 1, geom.col_cs = R;
    int64_t B = direct ? 1 : ck_conv_batch(CK_CONV_DGRAD, N, group, Mg, R, out_n);
    dgrad_args a = {dx, dy, w, C, M, group, Cg, Mg, R, in_n, out_n, B, direct != 0, transposed, &geom};
    ck_conv_units(dgrad_unit, &a, ws, lanes, direct ? 0 : ck_conv_ws_floats(1, B, Mg, R, out_n), N, B);
    return CKRT_OK;
}

/* The fused weight gradient: when ckrt_sgemm_cut would cut dw (M, R) (+)= A (M, cols) @ col^T
 * along R, one block takes one such piece of rows [r0, r1) of the column matrix (channel and tap)
 * for every image of [n0, n1) in turn (batched: the one batch's images, A its staged dy): it
 * writes those rows of the column matrix (ck_cpu_im2col_rows) and multiplies them into its
 * columns of dw, image after image (batch after batch: the caller's). The same products, pieces
 * and order of sums as ckrt_sgemm_cut's below, so the same bits; but one fork-join per batch (the
 * whole batch when unbatched) instead of two per image, and each thread reads the rows it wrote
 * (see conv_cols_block in cpu_dense.c for why that matters). */
typedef struct {
    float *dw, *col;
    const float *dy, *x, *stage; /* stage: B > 1, the batch's dy side by side; else dy's images */
    int64_t n0, n1, nb, C, M, R, in_n, out_n, piece;
    const ck_conv_geom *g;
} wgrad_job;

static void wgrad_block(void *arg, int64_t p0, int64_t p1) {
    const wgrad_job *j = arg;
    int64_t cols = j->stage ? j->nb * j->out_n : j->out_n;
    for (int64_t p = p0; p < p1; p++) {
        int64_t r0 = p * j->piece, r1 = j->R - r0 < j->piece ? j->R : r0 + j->piece;
        if (j->stage) {
            for (int64_t i = 0; i < j->nb; i++)
                ck_cpu_im2col_rows(j->col + i * j->out_n, j->x + (j->n0 + i) * j->C * j->in_n, r0, r1, j->g);
            ckrt_sgemm(false, true, j->M, r1 - r0, cols, 1.0f, j->stage, cols, j->col + r0 * cols, cols, j->n0 == 0 ? 0.0f : 1.0f,
                       j->dw + r0, j->R);
            continue;
        }
        for (int64_t n = j->n0; n < j->n1; n++) {
            ck_cpu_im2col_rows(j->col, j->x + n * j->C * j->in_n, r0, r1, j->g);
            ckrt_sgemm(false, true, j->M, r1 - r0, cols, 1.0f, j->dy + n * j->M * j->out_n, cols, j->col + r0 * j->g->col_rs, j->g->col_rs,
                       n == 0 ? 0.0f : 1.0f, j->dw + r0, j->R);
        }
    }
}

int ckrt_conv_grad_weight(ckrt_ctx *c, float *dw, const float *dy, const float *x, float *ws, int nsp, int64_t N, int64_t C,
                          int64_t M, int64_t group, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                          const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations) {
    int64_t in_n = ckrt_numel(nsp, in_sp), out_n = ckrt_numel(nsp, out_sp), taps = ckrt_numel(nsp, k);
    int64_t Cg = C / group, Mg = M / group, R = Cg * taps;
    if (M * R == 0) return CKRT_OK;
    if (N == 0 || out_n == 0) { /* no product at all: a zero gradient */
        memset(dw, 0, sizeof(float) * (size_t)(M * R));
        return CKRT_OK;
    }
    int direct;
    ck_conv_geom geom;
    CKRT_TRY(grad_geometry(c, ws, nsp, in_sp, out_sp, k, strides, pads_begin, dilations, &geom, &direct));
    int64_t B = direct ? 1 : ck_conv_batch(CK_CONV_WGRAD, N, group, Mg, R, out_n);
    wgrad_job j = {dw, ws, dy, x, NULL, 0, N, 1, C, M, R, in_n, out_n, 0, &geom};
    bool by_cols;
    if (B > 1) { /* B images at once (group 1): col (R, nb out_n), dy gathered as (M, nb out_n) */
        float *stage = ws + R * B * out_n;
        for (int64_t n0 = 0; n0 < N; n0 += B) {
            int64_t nb = N - n0 < B ? N - n0 : B, cols = nb * out_n;
            geom.col_rs = cols;
            gather_dy(stage, dy, n0, nb, M, out_n);
            j.piece = ckrt_sgemm_piece(M, R, cols, &by_cols);
            if (by_cols && j.piece < R) { /* fused: wgrad_block */
                j.stage = stage, j.n0 = n0, j.n1 = n0 + nb, j.nb = nb;
                ckrt_parallel_for((R + j.piece - 1) / j.piece, 1, wgrad_block, &j);
                continue;
            }
            for (int64_t i = 0; i < nb; i++) ck_cpu_im2col(ws + i * out_n, x + (n0 + i) * C * in_n, C, &geom);
            /* dw (M, R) (+)= dy (M, nb out_n) @ col^T (nb out_n, R), batches in order */
            ckrt_sgemm_cut(false, true, M, R, cols, 1.0f, stage, cols, ws, cols, n0 == 0 ? 0.0f : 1.0f, dw, R);
        }
        return CKRT_OK;
    }
    j.piece = ckrt_sgemm_piece(Mg, R, out_n, &by_cols);
    if (group == 1 && !direct && by_cols && j.piece < R) { /* fused: wgrad_block, every image in one job */
        ckrt_parallel_for((R + j.piece - 1) / j.piece, 1, wgrad_block, &j);
        return CKRT_OK;
    }
    for (int64_t n = 0; n < N; n++) {
        for (int64_t g = 0; g < group; g++) {
            const float *img = x + (n * C + g * Cg) * in_n, *dyg = dy + (n * M + g * Mg) * out_n, *col = img;
            if (!direct) {
                ck_cpu_im2col(ws, img, Cg, &geom);
                col = ws;
            }
            /* dw_g (Mg, R) (+)= dy_g (Mg, out_n) @ col^T (out_n, R) */
            ckrt_sgemm_cut(false, true, Mg, R, out_n, 1.0f, dyg, out_n, col, direct ? out_n : geom.col_rs, n == 0 ? 0.0f : 1.0f,
                           dw + g * Mg * R, R);
        }
    }
    return CKRT_OK;
}

int ckrt_pool_grad(ckrt_ctx *c, int kind, float *dx, const float *dy, const float *x, int nsp, int64_t N, int64_t C,
                   const int64_t *in_sp, const int64_t *out_sp, const int64_t *k, const int64_t *strides,
                   const int64_t *pads_begin, const int64_t *pads_end, const int64_t *dilations, int count_include_pad) {
    if (kind != CKRT_POOL_MAX && kind != CKRT_POOL_AVG) return ckrt_fail(c, CKRT_ERR_INTERNAL, "pool gradient kind %d", kind);
    if (nsp == 2) { /* cpu_pool.c: the same bits, faster */
        ck_cpu_pool_grad_2d(kind, dx, dy, x, N * C, in_sp, out_sp, k, strides, pads_begin, pads_end, dilations,
                            count_include_pad);
        return CKRT_OK;
    }
    /* the scatter form: windows in ascending order onto zeros, the bits of ck_k_pool_grad (which
     * recomputes each window's argmax once per element it covers: taps times the work) */
    int64_t n = N * C * ckrt_numel(nsp, out_sp);
    memset(dx, 0, sizeof(float) * (size_t)(N * C * ckrt_numel(nsp, in_sp)));
    for (int64_t o = 0; o < n; o++)
        ck_k_pool_grad_window(o, kind == CKRT_POOL_MAX ? 0 : 1, dx, dy, x, nsp, in_sp, out_sp, k, strides, pads_begin, pads_end,
                              dilations, count_include_pad);
    return CKRT_OK;
}
