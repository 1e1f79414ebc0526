/* cpu_train_norm.c — the CPU backend's normalization backward kernels (LayerNormalization,
 * training-mode BatchNormalization) and BatchNormalization's recompute: loops over the row-,
 * column-, channel- and element-wise bodies of ckrt_kernels_train.h. Each output element is
 * computed by one sequential loop in a fixed order, so the bits do not depend on how the loops
 * would be split over threads.
 */
#include "ckrt.h"
#include "ckrt_kernels_train.h"

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
