/* cpu_norm.c — the CPU backend's kernels over an axis: softmax / log-softmax, layer norm, batch
 * norm, dropout, the random ops (ckrt_random: Dropout's RNG), reductions and global average
 * pooling. Each is a loop over the row-, channel-, block- or element-wise bodies in
 * ckrt_kernels.h; every output is computed by one sequential loop in a fixed order, so the bits
 * never depend on how the loop would be split over threads.
 * The normalization backward kernels (LayerNormalization, training-mode BatchNormalization) and
 * BatchNormalization's recompute follow at the end, loops over the bodies of ckrt_kernels_train.h.
 * The row-, channel- and block-wise loops are spread over the thread pool (ckrt_pool.h) in
 * blocks whose size never depends on the thread count; a reduction axis is never split.
 */
#include "ckrt.h"
#include "ckrt_kernels.h"
#include "ckrt_kernels_train.h"
#include "ckrt_pool.h"
#include "cpu_iter.h"

/* The arguments of one row-wise kernel, for its block function (fields used as each names). */
typedef struct {
    int log;
    float *y, *mean, *inv_std, *dscale, *dbias, *run_mean, *run_var;
    const float *x, *dy, *scale, *bias, *m, *var;
    int64_t len, inner, rows, cols, N, C, S;
    float eps, momentum, ratio, fscale;
    int unbiased;
    uint8_t *mask;
    uint64_t seed, step, key, base;
} row_job;

CK_VEC static void softmax_rows(void *arg, int64_t r0, int64_t r1) {
    const row_job *j = arg;
    if (j->inner == 1) /* the last axis: the same body with contiguous rows, which vectorizes */
        for (int64_t r = r0; r < r1; r++) ck_k_softmax_row(r, j->log, j->y, j->x, j->len, 1);
    else
        for (int64_t r = r0; r < r1; r++) ck_k_softmax_row(r, j->log, j->y, j->x, j->len, j->inner);
}
CK_VEC static void layer_norm_rows(void *arg, int64_t r0, int64_t r1) {
    const row_job *j = arg;
    for (int64_t r = r0; r < r1; r++) ck_k_layer_norm_row(r, j->y, j->mean, j->inv_std, j->x, j->scale, j->bias, j->cols, j->eps);
}
CK_VEC static void batch_norm_channels(void *arg, int64_t c0, int64_t c1) {
    const row_job *j = arg;
    for (int64_t ch = c0; ch < c1; ch++)
        ck_k_batch_norm_train_channel(ch, j->y, j->run_mean, j->run_var, j->mean, j->inv_std, j->x, j->scale, j->bias, j->m,
                                      j->var, j->N, j->C, j->S, j->eps, j->momentum, j->unbiased);
}
/* planes [p0, p1) of (N C) planes of S elements: ck_k_batch_norm_infer's expressions with the
 * channel and its 1 / sqrt(var + eps) found once per plane, so that the plane's loop vectorizes */
CK_VEC static void batch_norm_infer_planes(void *arg, int64_t p0, int64_t p1) {
    const row_job *j = arg;
    for (int64_t p = p0; p < p1; p++) {
        int64_t c = p % j->C;
        float m = j->m[c], is = ck_k_batch_norm_infer_is(j->var, c, j->eps), sc = j->scale[c], b = j->bias[c];
        const float *x = j->x + p * j->S;
        float *y = j->y + p * j->S;
        for (int64_t s = 0; s < j->S; s++) y[s] = ck_k_batch_norm_infer1(x[s], m, is, sc, b);
    }
}
static void dropout_blocks(void *arg, int64_t b0, int64_t b1) {
    const row_job *j = arg;
    for (int64_t b = b0; b < b1; b++)
        ck_k_dropout_block(b, j->y, j->mask, j->x, j->len, j->ratio, j->fscale, j->seed, j->step, j->key, j->base);
}

int ckrt_softmax(ckrt_ctx *c, int log, float *y, const float *x, int64_t outer, int64_t len, int64_t inner) {
    (void)c;
    row_job j = {.log = log, .y = y, .x = x, .len = len, .inner = inner};
    ckrt_parallel_for(outer * inner, ck_par_rows(len), softmax_rows, &j);
    return CKRT_OK;
}

int ckrt_layer_norm(ckrt_ctx *c, float *y, float *mean, float *inv_std, const float *x, const float *scale,
                    const float *bias, int64_t rows, int64_t cols, float eps) {
    (void)c;
    row_job j = {.y = y, .mean = mean, .inv_std = inv_std, .x = x, .scale = scale, .bias = bias, .cols = cols, .eps = eps};
    ckrt_parallel_for(rows, ck_par_rows(cols), layer_norm_rows, &j);
    return CKRT_OK;
}

int ckrt_batch_norm(ckrt_ctx *c, float *y, float *run_mean, float *run_var, float *saved_mean, float *saved_inv_std,
                    const float *x, const float *scale, const float *bias, const float *mean, const float *var,
                    int64_t N, int64_t C, int64_t S, float eps, float momentum, int training, int unbiased) {
    row_job j = {.y = y, .run_mean = run_mean, .run_var = run_var, .mean = saved_mean, .inv_std = saved_inv_std, .x = x,
                 .scale = scale, .bias = bias, .m = mean, .var = var, .N = N, .C = C, .S = S, .eps = eps,
                 .momentum = momentum, .unbiased = unbiased};
    if (training && !c->eval) { /* eval: as PyTorch's eval(), the running statistics, none updated */
        ckrt_parallel_for(C, ck_par_rows(N * S), batch_norm_channels, &j);
        return CKRT_OK;
    }
    ckrt_parallel_for(N * C, ck_par_rows(S), batch_norm_infer_planes, &j);
    return CKRT_OK;
}

int ckrt_dropout(ckrt_ctx *c, float *y, uint8_t *mask, const float *x, int64_t n, float ratio, uint64_t key) {
    if (!(ratio >= 0.0f && ratio < 1.0f)) return ckrt_fail(c, CKRT_ERR_DATA, "dropout ratio %g is not in [0, 1)", ratio);
    if (c->eval) ratio = 0.0f; /* eval: the identity */
    row_job j = {.y = y, .mask = mask, .x = x, .len = n, .ratio = ratio, .fscale = 1.0f / (1.0f - ratio), .seed = c->seed,
                 .step = ckrt_rng_step(c), .key = key, .base = c->rng_rank * (uint64_t)n};
    ckrt_parallel_for((n + 3) / 4, CK_PAR_ELEMS / 4, dropout_blocks, &j);
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

/* (in a row_job, m and var carry the saved mean and inverse standard deviation) */
CK_VEC static void layer_norm_grad_rows(void *arg, int64_t r0, int64_t r1) {
    const row_job *j = arg;
    for (int64_t r = r0; r < r1; r++) ck_k_layer_norm_grad_row(r, j->y, j->dy, j->x, j->scale, j->m, j->var, j->cols);
}
/* columns [c0, c1): their sums a row at a time (rows read contiguously, not one column down all
 * rows), each column's still in row order: the bits of ck_k_layer_norm_grad_col */
#define LN_COLS 64 /* the grain of layer_norm_grad_cols' parallel_for */
CK_VEC static void layer_norm_grad_cols(void *arg, int64_t c0, int64_t c1) {
    const row_job *j = arg;
    double ss[LN_COLS], sb[LN_COLS];
    for (int64_t c = c0; c < c1; c++) ss[c - c0] = sb[c - c0] = 0.0;
    for (int64_t r = 0; r < j->rows; r++)
        for (int64_t c = c0; c < c1; c++) ck_k_layer_norm_grad_acc(r, c, &ss[c - c0], &sb[c - c0], j->dy, j->x, j->m, j->var, j->cols);
    for (int64_t c = c0; c < c1; c++) {
        if (j->dscale) j->dscale[c] = (float)ss[c - c0];
        if (j->dbias) j->dbias[c] = (float)sb[c - c0];
    }
}
CK_VEC static void batch_norm_grad_channels(void *arg, int64_t c0, int64_t c1) {
    const row_job *j = arg;
    for (int64_t ch = c0; ch < c1; ch++)
        ck_k_batch_norm_grad_channel(ch, j->y, j->dscale, j->dbias, j->dy, j->x, j->scale, j->m, j->var, j->N, j->C, j->S);
}
/* planes [p0, p1) of (N C) planes of S elements: ck_k_batch_norm_apply's expression
 * (ck_k_batch_norm_apply1) with the channel found once per plane instead of by a division per
 * element, so that the plane's loop vectorizes */
CK_VEC static void batch_norm_apply_planes(void *arg, int64_t p0, int64_t p1) {
    const row_job *j = arg;
    for (int64_t p = p0; p < p1; p++) {
        int64_t c = p % j->C;
        float m = j->m[c], is = j->var[c], sc = j->scale[c], b = j->bias[c];
        const float *x = j->x + p * j->S;
        float *y = j->y + p * j->S;
        for (int64_t s = 0; s < j->S; s++) y[s] = ck_k_batch_norm_apply1(x[s], m, is, sc, b);
    }
}

int ckrt_layer_norm_grad(ckrt_ctx *c, float *dx, float *dscale, float *dbias, const float *dy, const float *x,
                         const float *scale, const float *mean, const float *inv_std, int64_t rows, int64_t cols) {
    (void)c;
    row_job j = {.y = dx, .dscale = dscale, .dbias = dbias, .dy = dy, .x = x, .scale = scale, .m = mean, .var = inv_std,
                 .rows = rows, .cols = cols};
    if (dx) ckrt_parallel_for(rows, ck_par_rows(cols), layer_norm_grad_rows, &j);
    if (dscale || dbias) ckrt_parallel_for(cols, LN_COLS, layer_norm_grad_cols, &j);
    return CKRT_OK;
}

int ckrt_batch_norm_grad(ckrt_ctx *c, float *dx, float *dscale, float *dbias, const float *dy, const float *x,
                         const float *scale, const float *mean, const float *inv_std, int64_t N, int64_t C, int64_t S) {
    (void)c;
    row_job j = {.y = dx, .dscale = dscale, .dbias = dbias, .dy = dy, .x = x, .scale = scale, .m = mean, .var = inv_std,
                 .N = N, .C = C, .S = S};
    ckrt_parallel_for(C, ck_par_rows(N * S), batch_norm_grad_channels, &j);
    return CKRT_OK;
}

int ckrt_batch_norm_apply(ckrt_ctx *c, float *y, const float *x, const float *scale, const float *bias, const float *mean,
                          const float *inv_std, int64_t N, int64_t C, int64_t S) {
    (void)c;
    row_job j = {.y = y, .x = x, .scale = scale, .bias = bias, .m = mean, .var = inv_std, .C = C, .S = S};
    ckrt_parallel_for(N * C, ck_par_rows(S), batch_norm_apply_planes, &j);
    return CKRT_OK;
}
