/* cpu_norm.c — the CPU backend's kernels over an axis: softmax / log-softmax, layer norm, batch
 * norm, dropout, the random ops (ckrt_random: Dropout's RNG), reductions and global average
 * pooling. Each is a loop over the row-, channel-, block- or element-wise bodies in
 * ckrt_kernels.h; every output is computed by one sequential loop in a fixed order, so the bits
 * never depend on how the loop would be split over threads.
 * The normalization backward kernels (LayerNormalization, training-mode BatchNormalization) and
 * BatchNormalization's recompute follow at the end, loops over the bodies of ckrt_kernels_train.h.
 */
#include "ckrt.h"
#include "ckrt_kernels.h"
#include "ckrt_kernels_train.h"
#include "cpu_iter.h"

int ckrt_softmax(ckrt_ctx *c, int log, float *y, const float *x, int64_t outer, int64_t len, int64_t inner) {
    (void)c;
    for (int64_t r = 0; r < outer * inner; r++) ck_k_softmax_row(r, log, y, x, len, inner);
    return CKRT_OK;
}

int ckrt_layer_norm(ckrt_ctx *c, float *y, float *mean, float *inv_std, const float *x, const float *scale,
                    const float *bias, int64_t rows, int64_t cols, float eps) {
    (void)c;
    for (int64_t r = 0; r < rows; r++) ck_k_layer_norm_row(r, y, mean, inv_std, x, scale, bias, cols, eps);
    return CKRT_OK;
}

int ckrt_batch_norm(ckrt_ctx *c, float *y, float *run_mean, float *run_var, float *saved_mean, float *saved_inv_std,
                    const float *x, const float *scale, const float *bias, const float *mean, const float *var,
                    int64_t N, int64_t C, int64_t S, float eps, float momentum, int training, int unbiased) {
    if (training && !c->eval) { /* eval: as PyTorch's eval(), the running statistics, none updated */
        for (int64_t ch = 0; ch < C; ch++)
            ck_k_batch_norm_train_channel(ch, y, run_mean, run_var, saved_mean, saved_inv_std, x, scale, bias, mean, var,
                                          N, C, S, eps, momentum, unbiased);
        return CKRT_OK;
    }
    for (int64_t i = 0; i < N * C * S; i++) y[i] = ck_k_batch_norm_infer(i, x, scale, bias, mean, var, C, S, eps);
    return CKRT_OK;
}

int ckrt_dropout(ckrt_ctx *c, float *y, uint8_t *mask, const float *x, int64_t n, float ratio, uint64_t key) {
    if (!(ratio >= 0.0f && ratio < 1.0f)) return ckrt_fail(c, CKRT_ERR_DATA, "dropout ratio %g is not in [0, 1)", ratio);
    if (c->eval) ratio = 0.0f; /* eval: the identity */
    float scale = 1.0f / (1.0f - ratio);
    for (int64_t b = 0; b < (n + 3) / 4; b++)
        ck_k_dropout_block(b, y, mask, x, n, ratio, scale, c->seed, ckrt_rng_step(c), key, c->rng_rank * (uint64_t)n);
    return CKRT_OK;
}

int ckrt_random(ckrt_ctx *c, int kind, ckrt_dtype dt, void *y, const void *p, ckrt_dtype pdt, int64_t n, double a, double b,
                uint64_t salt, int expect, uint64_t key) {
    if (kind < CKRT_RAND_UNIFORM || kind > CKRT_RAND_BERNOULLI || (kind == CKRT_RAND_BERNOULLI && !p))
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "random op kind %d", kind);
    for (int64_t blk = 0; blk < (n + 3) / 4; blk++)
        ck_k_random_block(blk, kind, (int)dt, y, p, (int)pdt, n, a, b, expect || c->eval, c->seed ^ salt, ckrt_rng_step(c),
                          key, c->rng_rank * (uint64_t)n);
    return CKRT_OK;
}

/* Float reductions, walked with cpu_iter.h instead of a ck_k_offset per element. Every output
 * still sums its elements in double in row-major order of the reduced dims, as ck_k_reduce_f32
 * does, so the bits are the same. When the kept elements are contiguous and the reduced ones are
 * not (a bias gradient: sum over the rows of (rows, cols)), a chunk of outputs is accumulated side
 * by side so x is read in memory order. */
#define CK_REDUCE_CHUNK 256
static void reduce_f32(int mean, float *y, const float *x, int nk, const int64_t *kdims, const int64_t *kstrides, int nr,
                       const int64_t *rdims, const int64_t *rstrides) {
    ck_iter kit, rit0;
    int64_t nout = ck_iter_init(&kit, nk, kdims, 1, &kstrides);
    int64_t cnt = ck_iter_init(&rit0, nr, rdims, 1, &rstrides);
    if (nout == 0) return;
    int64_t krow = ck_iter_row(&kit), ks = ck_iter_step(&kit, 0);
    int64_t rrow = ck_iter_row(&rit0), rs = ck_iter_step(&rit0, 0);
    bool side_by_side = ks == 1 && rs != 1 && krow > 1 && cnt > 0;
    for (int64_t o0 = 0; o0 < nout; o0 += krow, ck_iter_next_row(&kit)) {
        const float *xb = x + kit.off[0];
        if (side_by_side) {
            for (int64_t t0 = 0; t0 < krow; t0 += CK_REDUCE_CHUNK) {
                int64_t m = krow - t0 < CK_REDUCE_CHUNK ? krow - t0 : CK_REDUCE_CHUNK;
                double acc[CK_REDUCE_CHUNK];
                for (int64_t t = 0; t < m; t++) acc[t] = 0.0;
                ck_iter rit = rit0;
                for (int64_t j0 = 0; j0 < cnt; j0 += rrow, ck_iter_next_row(&rit))
                    for (int64_t j = 0; j < rrow; j++) {
                        const float *xr = xb + t0 + rit.off[0] + j * rs;
                        for (int64_t t = 0; t < m; t++) acc[t] += xr[t];
                    }
                for (int64_t t = 0; t < m; t++)
                    y[o0 + t0 + t] = (float)(mean ? acc[t] / (double)cnt : acc[t]);
            }
            continue;
        }
        for (int64_t t = 0; t < krow; t++) {
            double s = 0.0;
            ck_iter rit = rit0;
            for (int64_t j0 = 0; j0 < cnt; j0 += rrow, ck_iter_next_row(&rit)) {
                const float *xr = xb + t * ks + rit.off[0];
                for (int64_t j = 0; j < rrow; j++) s += xr[j * rs];
            }
            y[o0 + t] = (float)(mean ? s / (double)cnt : s);
        }
    }
}

int ckrt_reduce(ckrt_ctx *c, int op, ckrt_dtype dt, void *y, const void *x, int nk, const int64_t *kdims,
                const int64_t *kstrides, int nr, const int64_t *rdims, const int64_t *rstrides) {
    int64_t n = 1;
    for (int k = 0; k < nk; k++) n *= kdims[k];
    switch (dt) {
    case CKRT_F32:
        reduce_f32(op == CKRT_REDUCE_MEAN, y, x, nk, kdims, kstrides, nr, rdims, rstrides);
        return CKRT_OK;
    case CKRT_I64: case CKRT_I32:
        if (op != CKRT_REDUCE_SUM) break;
        for (int64_t o = 0; o < n; o++) {
            int64_t s = ck_k_reduce_sum_int(o, dt == CKRT_I64, x, nk, kdims, kstrides, nr, rdims, rstrides);
            if (dt == CKRT_I64) ((int64_t *)y)[o] = s;
            else ((int32_t *)y)[o] = (int32_t)(uint32_t)(uint64_t)s;
        }
        return CKRT_OK;
    default: break;
    }
    return ckrt_fail(c, CKRT_ERR_INTERNAL, "reduce op %d on %s", op, ckrt_dtype_name(dt));
}

int ckrt_global_avg_pool(ckrt_ctx *c, float *y, const float *x, int64_t nc, int64_t s) {
    (void)c;
    for (int64_t r = 0; r < nc; r++) y[r] = ck_k_global_avg_pool(r, x, s);
    return CKRT_OK;
}

/* ---------------------------------------------------------------- normalization backward (was cpu_train_norm.c) */

int ckrt_layer_norm_grad(ckrt_ctx *c, float *dx, float *dscale, float *dbias, const float *dy, const float *x,
                         const float *scale, const float *mean, const float *inv_std, int64_t rows, int64_t cols) {
    (void)c;
    if (dx)
        for (int64_t r = 0; r < rows; r++) ck_k_layer_norm_grad_row(r, dx, dy, x, scale, mean, inv_std, cols);
    if (dscale || dbias)
        for (int64_t j = 0; j < cols; j++) ck_k_layer_norm_grad_col(j, dscale, dbias, dy, x, mean, inv_std, rows, cols);
    return CKRT_OK;
}

int ckrt_batch_norm_grad(ckrt_ctx *c, float *dx, float *dscale, float *dbias, const float *dy, const float *x,
                         const float *scale, const float *mean, const float *inv_std, int64_t N, int64_t C, int64_t S) {
    (void)c;
    for (int64_t ch = 0; ch < C; ch++)
        ck_k_batch_norm_grad_channel(ch, dx, dscale, dbias, dy, x, scale, mean, inv_std, N, C, S);
    return CKRT_OK;
}

int ckrt_batch_norm_apply(ckrt_ctx *c, float *y, const float *x, const float *scale, const float *bias, const float *mean,
                          const float *inv_std, int64_t N, int64_t C, int64_t S) {
    (void)c;
    for (int64_t i = 0; i < N * C * S; i++) y[i] = ck_k_batch_norm_apply(i, x, scale, bias, mean, inv_std, C, S);
    return CKRT_OK;
}
