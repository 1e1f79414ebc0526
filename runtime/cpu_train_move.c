/* cpu_train_move.c — the CPU backend's gradients of the data-movement ops Gather, Slice and Pad.
 *
 * Gather's gradient is a scatter-add; it runs as ck_k_gather_grad over whole (outer) blocks, so
 * every element of d(data) is summed over the indices in index order, with no atomics, the same
 * bits whatever the split. Slice's gradient is a zero fill, then the inverse of the forward's
 * strided copy (each dy element has its own destination: nothing is summed). Pad's gradient is
 * a gather per dx element (ck_k_pad_grad) over the dy elements copied from it, in a fixed order.
 */
#include "ckrt.h"
#include "ckrt_kernels_train.h"

#include <string.h>

int ckrt_gather_grad(ckrt_ctx *c, float *dx, const float *dy, const void *idx, ckrt_dtype idx_dt, int64_t outer, int64_t len,
                     int64_t inner, int64_t n_idx) {
    CKRT_TRY(ckrt_gather_check(c, idx, idx_dt, len, n_idx));
    int i64 = idx_dt == CKRT_I64;
    for (int64_t o = 0; o < outer; o++) ck_k_gather_grad(o, 0, inner, dx, dy, idx, i64, len, inner, n_idx);
    return CKRT_OK;
}

int ckrt_slice_grad(ckrt_ctx *c, size_t esz, void *dx, const void *dy, int rank, const int64_t *dy_dims,
                    const int64_t *dx_strides, int64_t base, int64_t dx_n) {
    (void)c;
    unsigned char *d = dx;
    const unsigned char *s = dy;
    memset(d, 0, esz * (size_t)dx_n);
    int64_t n = 1;
    for (int k = 0; k < rank; k++) n *= dy_dims[k];
    if (n == 0) return CKRT_OK;
    if (rank == 0) {
        memcpy(d + base * (int64_t)esz, s, esz);
        return CKRT_OK;
    }
    /* one row of the last axis at a time: its destination start from the body, then a stride */
    int64_t row = dy_dims[rank - 1], step = dx_strides[rank - 1] * (int64_t)esz;
    for (int64_t j = 0; j < n; j += row) {
        unsigned char *to = d + ck_k_strided_src(j, rank, dy_dims, dx_strides, base) * (int64_t)esz;
        const unsigned char *from = s + j * (int64_t)esz;
        for (int64_t r = 0; r < row; r++) memcpy(to + r * step, from + r * (int64_t)esz, esz);
    }
    return CKRT_OK;
}

int ckrt_pad_grad(ckrt_ctx *c, float *dx, const float *dy, int rank, const int64_t *in_dims, const int64_t *out_dims,
                  const int64_t *begin, int mode) {
    (void)c;
    int64_t n = 1;
    for (int k = 0; k < rank; k++) n *= in_dims[k];
    for (int64_t j = 0; j < n; j++) dx[j] = ck_k_pad_grad(j, dy, rank, in_dims, out_dims, begin, mode);
    return CKRT_OK;
}
