/* ckrt_kernels_move.h — device-agnostic bodies of the data-movement, pooling and im2col kernels,
 * under the rules of ckrt_kernels.h (included for CK_DEV): C that also compiles as CUDA, one
 * output element per call, no libc but math, no static data, int64_t indices.
 *
 * Data movement is index arithmetic: each body here answers "which input element does output
 * element i come from" (or "is it kept"), and the backend does the copy of esz bytes. The CUDA
 * backend calls these per thread; the CPU backend (cpu_move.c) calls them once per output row
 * and walks the row itself, which gives the same bytes because a copy has no rounding. Pooling
 * and im2col compute their element here in full, so every backend shares one summation order.
 */
#ifndef CKRT_KERNELS_MOVE_H
#define CKRT_KERNELS_MOVE_H

#include "ckrt_kernels.h"

#define CK_K_MAX_RANK 8 /* = CKRT_MAX_RANK */

/* ---------------------------------------------------------------- strided copy */

/* Input element read by output element i: base + sum_k idx_k(i) * in_strides[k], idx_k(i) the
 * row-major coordinates of i in out_dims. Transpose, Slice (negative strides allowed) and Expand
 * (0 strides). out_dims, in_strides: (rank) */
CK_DEV int64_t ck_k_strided_src(int64_t i, int rank, const int64_t *out_dims, const int64_t *in_strides, int64_t base) {
    return base + ck_k_offset(i, rank, out_dims, in_strides);
}

/* ---------------------------------------------------------------- concat / split */

/* Output element i of y: (outer, total, inner) comes from input *which, element returned;
 * lens: (n) the inputs' lengths along the axis, summing to total. */
CK_DEV int64_t ck_k_concat_src(int64_t i, int n, const int64_t *lens, int64_t total, int64_t inner, int *which) {
    int64_t r = i % inner, t = (i / inner) % total, o = i / inner / total;
    int k = 0;
    while (k < n - 1 && t >= lens[k]) t -= lens[k++];
    *which = k;
    return (o * lens[k] + t) * inner + r;
}

/* Element i of split output ys[k]: (outer, len, inner), taken from x: (outer, total, inner) at
 * axis offset `start` (the sum of the lengths before k). */
CK_DEV int64_t ck_k_split_src(int64_t i, int64_t len, int64_t start, int64_t total, int64_t inner) {
    int64_t r = i % inner, t = (i / inner) % len, o = i / inner / len;
    return (o * total + start + t) * inner + r;
}

/* ---------------------------------------------------------------- gather */

/* Index j of idx (int64 when idx_i64, else int32), negative counting from the end; -1 when out
 * of [-len, len). idx: (n_idx) */
CK_DEV int64_t ck_k_gather_index(const void *idx, int idx_i64, int64_t j, int64_t len) {
    int64_t v = idx_i64 ? ((const int64_t *)idx)[j] : (int64_t)((const int32_t *)idx)[j];
    if (v < -len || v >= len) return -1;
    return v < 0 ? v + len : v;
}

/* Output element i of y: (outer, n_idx, inner) reads x: (outer, len, inner) at the returned
 * element, or -1 when its index is out of range (the backend reports it). */
CK_DEV int64_t ck_k_gather_src(int64_t i, const void *idx, int idx_i64, int64_t len, int64_t inner, int64_t n_idx) {
    int64_t r = i % inner, j = (i / inner) % n_idx, o = i / inner / n_idx;
    int64_t v = ck_k_gather_index(idx, idx_i64, j, len);
    return v < 0 ? -1 : (o * len + v) * inner + r;
}

/* ---------------------------------------------------------------- pad */

/* Pad's source along one axis: the input index that output index o (begin pads before the
 * input's len elements) copies, or -1 in constant mode outside the input. Reflect mirrors about
 * the first and last elements (period 2 (len - 1), so pads longer than the axis keep
 * mirroring), edge repeats them. mode: CKRT_PAD_CONSTANT, _REFLECT or _EDGE. */
CK_DEV int64_t ck_k_pad_axis_src(int64_t o, int64_t len, int64_t begin, int mode) {
    int64_t t = o - begin;
    if (t >= 0 && t < len) return t;
    if (mode == CKRT_PAD_CONSTANT) return -1;
    if (mode == CKRT_PAD_EDGE || len == 1) return t < 0 ? 0 : len - 1;
    int64_t p = 2 * (len - 1);
    t %= p;
    if (t < 0) t += p;
    return t < len ? t : p - t;
}

/* Output element i of y: (out_dims) copies the returned element of x: (in_dims), or the
 * constant when -1. in_dims, out_dims, begin: (rank) */
CK_DEV int64_t ck_k_pad_src(int64_t i, int rank, const int64_t *in_dims, const int64_t *out_dims, const int64_t *begin,
                            int mode) {
    int64_t src = 0, stride = 1;
    for (int k = rank - 1; k >= 0; k--) {
        int64_t s = ck_k_pad_axis_src(i % out_dims[k], in_dims[k], begin[k], mode);
        if (s < 0) return -1;
        i /= out_dims[k];
        src += s * stride;
        stride *= in_dims[k];
    }
    return src;
}

/* ---------------------------------------------------------------- scatter_nd, gather_nd */

/* The row of data: (dims[0] .. dims[k-1], inner) that index tuple j of idx: (n, k) addresses,
 * negative indices counting from the end; -1 when out of range (the backend reports it first).
 * dims: (k) */
CK_DEV int64_t ck_k_nd_row(const int64_t *idx, int64_t j, int k, const int64_t *dims) {
    int64_t row = 0;
    for (int t = 0; t < k; t++) {
        int64_t v = idx[j * k + t];
        if (v < -dims[t] || v >= dims[t]) return -1;
        row = row * dims[t] + (v < 0 ? v + dims[t] : v);
    }
    return row;
}

/* ScatterND with reduction add or mul on float32, column r of y: (rows, inner) (already data):
 * the n updates: (n, inner) combined in index order, so repeated indices give the same bits on
 * every backend. */
CK_DEV void ck_k_scatter_nd_col(int64_t r, int red, float *y, const float *upd, const int64_t *idx, int64_t n, int k,
                                const int64_t *dims, int64_t inner) {
    for (int64_t j = 0; j < n; j++) {
        int64_t row = ck_k_nd_row(idx, j, k, dims);
        if (row < 0) continue;
        if (red == CKRT_SCATTER_MUL) y[row * inner + r] *= upd[j * inner + r];
        else y[row * inner + r] += upd[j * inner + r];
    }
}

/* ---------------------------------------------------------------- trilu */

/* Is element i of (batch, rows, cols) kept? upper: j - i >= k; lower: j - i <= k. */
CK_DEV int ck_k_trilu_keep(int64_t i, int64_t rows, int64_t cols, int64_t k, int upper) {
    int64_t col = i % cols, row = (i / cols) % rows;
    return upper ? col - row >= k : col - row <= k;
}

/* ---------------------------------------------------------------- range */

CK_DEV double ck_k_range_f(int64_t i, double start, double delta) { return start + (double)i * delta; }
CK_DEV int64_t ck_k_range_i(int64_t i, int64_t start, int64_t delta) {
    return (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)delta);
}

/* ---------------------------------------------------------------- windows (pooling, im2col) */

/* Coordinate of tap kk along one spatial axis for output position o; may fall outside [0, in). */
CK_DEV int64_t ck_k_tap(int64_t o, int64_t kk, int64_t stride, int64_t pad_begin, int64_t dilation) {
    return o * stride - pad_begin + kk * dilation;
}

/* One pooled element. y: (N*C, out_sp...) element i; x: (N*C, in_sp...). kind 0: max (the
 * first maximum; its flat index into all of x goes to *index, -1 when the window holds no input
 * element), 1: average (sum in window order over the taps inside x, divided by their count, or
 * with count_include_pad by the taps inside [-pads_begin, in + pads_end)).
 * in_sp, out_sp, k, strides, pads_begin, pads_end, dilations: (nsp) */
CK_DEV float ck_k_pool(int64_t i, int kind, const float *x, int nsp, const int64_t *in_sp, const int64_t *out_sp,
                       const int64_t *k, const int64_t *strides, const int64_t *pads_begin, const int64_t *pads_end,
                       const int64_t *dilations, int count_include_pad, int64_t *index) {
    int64_t o[CK_K_MAX_RANK], in_n = 1, out_n = 1, taps = 1;
    for (int d = nsp - 1; d >= 0; d--) {
        o[d] = (i / out_n) % out_sp[d];
        out_n *= out_sp[d];
        in_n *= in_sp[d];
        taps *= k[d];
    }
    const float *img = x + (i / out_n) * in_n;
    int64_t img_base = (i / out_n) * in_n;
    float best = -3.402823466e+38f, sum = 0.0f;
    int64_t best_at = -1, count = 0, padded = 0;
    for (int64_t t = 0; t < taps; t++) {
        int64_t rem = t, flat = 0, step = 1;
        int inside = 1, in_pad = 1;
        for (int d = nsp - 1; d >= 0; d--) {
            int64_t kk = rem % k[d];
            rem /= k[d];
            int64_t p = ck_k_tap(o[d], kk, strides[d], pads_begin[d], dilations[d]);
            if (p < 0 || p >= in_sp[d]) inside = 0;
            if (p < -pads_begin[d] || p >= in_sp[d] + pads_end[d]) in_pad = 0;
            flat += p * step;
            step *= in_sp[d];
        }
        padded += in_pad;
        if (!inside) continue;
        float v = img[flat];
        count++;
        if (kind == CKRT_POOL_MAX) {
            if (best_at < 0 || v > best) best = v, best_at = flat;
        } else {
            sum += v;
        }
    }
    if (kind == CKRT_POOL_MAX) {
        *index = best_at < 0 ? -1 : img_base + best_at;
        return best;
    }
    int64_t div = count_include_pad ? padded : count;
    return div > 0 ? sum / (float)div : 0.0f;
}

/* Element i of the column matrix (Cg * prod(k), prod(out_sp)) of one image group for
 * im2col convolution: row (c, tap), column an output position; 0 for taps in the padding.
 * img: (Cg, in_sp...); in_sp, out_sp, k, strides, pads_begin, dilations: (nsp) */
CK_DEV float ck_k_im2col(int64_t i, const float *img, int nsp, const int64_t *in_sp, const int64_t *out_sp,
                         const int64_t *k, const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations) {
    int64_t out_n = 1, taps = 1, in_n = 1;
    for (int d = 0; d < nsp; d++) out_n *= out_sp[d], taps *= k[d], in_n *= in_sp[d];
    int64_t s = i % out_n, r = i / out_n, t = r % taps, ch = r / taps;
    int64_t flat = 0, step = 1;
    for (int d = nsp - 1; d >= 0; d--) {
        int64_t od = s % out_sp[d], kk = t % k[d];
        s /= out_sp[d];
        t /= k[d];
        int64_t p = ck_k_tap(od, kk, strides[d], pads_begin[d], dilations[d]);
        if (p < 0 || p >= in_sp[d]) return 0.0f;
        flat += p * step;
        step *= in_sp[d];
    }
    return img[ch * in_n + flat];
}

#endif
