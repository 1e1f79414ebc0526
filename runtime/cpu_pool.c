/* cpu_pool.c — 2-D MaxPool / AveragePool and their gradients on the CPU (ckrt_pool in cpu_dense.c
 * and ckrt_pool_grad in cpu_train_conv.c call these for nsp == 2; other ranks keep the generic
 * per-element bodies).
 *
 * Why: the generic bodies (ck_k_pool, ck_k_pool_grad_window) decode every output element's
 * coordinates and every tap's with divisions, and test every tap against the input; ResNet-18's
 * 3x3/s2 MaxPool and its gradient took ~8% of its CPU step that way (issue 19). Here each window's
 * row and column ranges are found once, and the taps inside are walked in the same order (rows,
 * then columns, ascending: tap order), so every result is bit for bit the generic one: max keeps
 * the first maximum (v > best, NaN never replaces), average sums in tap order and divides by the
 * same count (product of the per-axis counts, as ck_k_pool_divisor), and the gradient adds onto
 * dx in ascending window order. In the forward, max windows inside the input along the last axis
 * go up to 64 output columns at a time (row_max: the same fold per column, the columns in vector
 * lanes). The gradient folds those windows one at a time without bounds checks and adds at once:
 * on ResNet-18's 3x3/s2 pool (1024 planes of 32x32) that is 2.1x faster than folding them in
 * lanes and then finding each maximum's tap again by its value (2.7 vs 5.6 ms, one thread).
 * Image planes (n, c) are independent: they are spread over the pool in fixed blocks, which
 * changes no sum.
 */
#include "ckrt.h"
#include "ckrt_pool.h"
#include "cpu_iter.h"
#include "cpu_pool.h"

#include <string.h>

typedef struct {
    int kind, count_include_pad;
    float *y, *dx;
    int64_t *indices;
    const float *x, *dy;
    const int64_t *in_sp, *out_sp, *k, *st, *pb, *pe, *dl;
} pool2d_job;

/* Of k taps at base + t * dl (dl >= 1), those with a coordinate in [lo, hi): [*t0, *t1), one range. */
static inline void taps_in(int64_t base, int64_t dl, int64_t k, int64_t lo, int64_t hi, int64_t *t0, int64_t *t1) {
    int64_t a, b;
    if (dl == 1) /* the common case, without divisions */
        a = base >= lo ? 0 : lo - base, b = base >= hi ? 0 : hi - base;
    else
        a = base >= lo ? 0 : (lo - base + dl - 1) / dl, b = base >= hi ? 0 : (hi - 1 - base) / dl + 1;
    a = a < k ? a : k;
    *t0 = a, *t1 = b < a ? a : b < k ? b : k;
}

/* One axis of a window at output position o: taps [t0, t1) inside the input, first coordinate
 * base; pad: taps inside [-pb, in + pe) (count_include_pad's count). */
typedef struct {
    int64_t t0, t1, base, pad;
} axis_win;

static inline axis_win axis_window(int64_t o, int64_t k, int64_t st, int64_t pb, int64_t pe, int64_t dl, int64_t in) {
    axis_win w;
    int64_t p0, p1;
    w.base = o * st - pb;
    taps_in(w.base, dl, k, 0, in, &w.t0, &w.t1);
    taps_in(w.base, dl, k, -pb, in + pe, &p0, &p1);
    w.pad = p1 - p0;
    return w;
}

/* The taps' flat index in the plane of the window (h, w) (rows then columns ascending: tap order)
 * holding its first maximum (v > best: a NaN never replaces, a NaN first stays), -1 when none is
 * inside; *best its value (-FLT_MAX when none). */
static inline int64_t window_max(const float *img, int64_t W, axis_win h, axis_win w, int64_t dh, int64_t dw, float *best) {
    float b = -3.402823466e+38f;
    int64_t at = -1;
    for (int64_t th = h.t0; th < h.t1; th++) {
        int64_t r = (h.base + th * dh) * W + w.base;
        for (int64_t tw = w.t0; tw < w.t1; tw++) {
            float v = img[r + tw * dw];
            if (at < 0 || v > b) b = v, at = r + tw * dw;
        }
    }
    *best = b;
    return at;
}

enum { POOL_LANES = 64 }; /* output columns whose windows one row_max folds side by side */

/* The first maxima of the windows of n consecutive output columns from ow0, whose taps along the
 * last axis all lie inside the input and whose row range h holds at least one row: window_max's
 * fold (the first tap, then v > best in tap order) per column, with the taps outer and the
 * columns inner, so that the columns' folds run in vector lanes. at: the maxima's flat indices in
 * the plane, or NULL when not wanted. sw is a constant where the callers below can make it one. */
static inline __attribute__((always_inline)) void row_max(const float *restrict img, int64_t W, axis_win h, int64_t dh,
                                                          int64_t kw, int64_t dw, int64_t sw, int64_t pbw, int64_t ow0,
                                                          int64_t n, float *restrict best, int64_t *restrict at) {
    int64_t r0 = (h.base + h.t0 * dh) * W - pbw + ow0 * sw;
    for (int64_t c = 0; c < n; c++) best[c] = img[r0 + c * sw];
    for (int64_t c = 0; at && c < n; c++) at[c] = r0 + c * sw;
    for (int64_t th = h.t0; th < h.t1; th++)
        for (int64_t tw = th == h.t0 ? 1 : 0; tw < kw; tw++) {
            int64_t r = (h.base + th * dh) * W - pbw + ow0 * sw + tw * dw;
            if (!at) { /* the values alone (no indices wanted): the same fold */
                for (int64_t c = 0; c < n; c++) {
                    float v = img[r + c * sw], b = best[c];
                    best[c] = v > b ? v : b;
                }
                continue;
            }
            for (int64_t c = 0; c < n; c++) { /* selects, not branches: the loop vectorizes */
                float v = img[r + c * sw], b = best[c];
                int64_t a = at[c];
                bool gt = v > b;
                best[c] = gt ? v : b;
                at[c] = gt ? r + c * sw : a;
            }
        }
}

/* row_max with the stride a constant for the common strides (the loads then need no gather);
 * at NULL: the values only. */
CK_VEC static void row_max_any(const float *img, int64_t W, axis_win h, int64_t dh, int64_t kw, int64_t dw, int64_t sw, int64_t pbw,
                               int64_t ow0, int64_t n, float *best, int64_t *at) {
    if (!at && sw == 2) row_max(img, W, h, dh, kw, dw, 2, pbw, ow0, n, best, NULL);
    else if (!at) row_max(img, W, h, dh, kw, dw, sw, pbw, ow0, n, best, NULL);
    else if (sw == 1) row_max(img, W, h, dh, kw, dw, 1, pbw, ow0, n, best, at);
    else if (sw == 2) row_max(img, W, h, dh, kw, dw, 2, pbw, ow0, n, best, at);
    else row_max(img, W, h, dh, kw, dw, sw, pbw, ow0, n, best, at);
}

/* The output columns [*lo, *hi) whose windows lie inside the input along the last axis. */
static void inner_columns(const pool2d_job *j, int64_t *lo, int64_t *hi) {
    int64_t W = j->in_sp[1], OW = j->out_sp[1], kw = j->k[1], sw = j->st[1], pb = j->pb[1], dw = j->dl[1];
    int64_t last = W - 1 - (kw - 1) * dw + pb; /* base + (kw - 1) dw <= W - 1 <=> ow sw <= last */
    int64_t a = (pb + sw - 1) / sw, b = last < 0 ? 0 : last / sw + 1;
    *lo = a < OW ? a : OW;
    *hi = b < *lo ? *lo : b < OW ? b : OW;
}

static inline int64_t divisor(const pool2d_job *j, axis_win h, axis_win w) {
    return j->count_include_pad ? h.pad * w.pad : (h.t1 - h.t0) * (w.t1 - w.t0);
}

CK_VEC static void pool_planes(void *arg, int64_t p0, int64_t p1) {
    const pool2d_job *j = arg;
    int64_t W = j->in_sp[1], in_n = j->in_sp[0] * W, OH = j->out_sp[0], OW = j->out_sp[1], dh = j->dl[0], dw = j->dl[1];
    float *y = j->y;
    int64_t *ind = j->indices, lo, hi, run_at[POOL_LANES];
    inner_columns(j, &lo, &hi);
    for (int64_t p = p0; p < p1; p++) {
        const float *img = j->x + p * in_n;
        for (int64_t oh = 0; oh < OH; oh++) {
            axis_win h = axis_window(oh, j->k[0], j->st[0], j->pb[0], j->pe[0], dh, j->in_sp[0]);
            bool fast = j->kind == CKRT_POOL_MAX && h.t1 > h.t0;
            for (int64_t ow = 0; ow < OW; ow++) {
                if (fast && ow >= lo && ow < hi) { /* a run of inner columns at once */
                    int64_t n = hi - ow < POOL_LANES ? hi - ow : POOL_LANES, i = (p * OH + oh) * OW + ow;
                    row_max_any(img, W, h, dh, j->k[1], dw, j->st[1], j->pb[1], ow, n, y + i, ind ? run_at : NULL);
                    for (int64_t c = 0; ind && c < n; c++) ind[i + c] = p * in_n + run_at[c];
                    ow += n - 1;
                    continue;
                }
                axis_win w = axis_window(ow, j->k[1], j->st[1], j->pb[1], j->pe[1], dw, W);
                int64_t i = (p * OH + oh) * OW + ow;
                if (j->kind == CKRT_POOL_MAX) {
                    int64_t at = window_max(img, W, h, w, dh, dw, &y[i]);
                    if (ind) ind[i] = at < 0 ? -1 : p * in_n + at;
                    continue;
                }
                float sum = 0.0f;
                for (int64_t th = h.t0; th < h.t1; th++)
                    for (int64_t tw = w.t0; tw < w.t1; tw++) sum += img[(h.base + th * dh) * W + w.base + tw * dw];
                int64_t div = divisor(j, h, w);
                y[i] = div > 0 ? sum / (float)div : 0.0f;
                if (ind) ind[i] = -1;
            }
        }
    }
}

CK_VEC static void pool_grad_planes(void *arg, int64_t p0, int64_t p1) {
    const pool2d_job *j = arg;
    int64_t W = j->in_sp[1], in_n = j->in_sp[0] * W, OH = j->out_sp[0], OW = j->out_sp[1], dh = j->dl[0], dw = j->dl[1];
    int64_t kw = j->k[1], sw = j->st[1], lo, hi;
    inner_columns(j, &lo, &hi);
    for (int64_t p = p0; p < p1; p++) {
        const float *img = j->x + p * in_n, *dy = j->dy + p * OH * OW;
        float *d = j->dx + p * in_n;
        memset(d, 0, sizeof(float) * (size_t)in_n);
        for (int64_t oh = 0; oh < OH; oh++) {
            axis_win h = axis_window(oh, j->k[0], j->st[0], j->pb[0], j->pe[0], dh, j->in_sp[0]);
            bool fast = j->kind == CKRT_POOL_MAX && h.t1 > h.t0;
            for (int64_t ow = 0; ow < OW; ow++) {
                if (fast && ow >= lo && ow < hi) { /* inner columns: window_max's fold without the bounds */
                    for (; ow < hi; ow++) {
                        int64_t col = ow * sw - j->pb[1], at = (h.base + h.t0 * dh) * W + col;
                        float b = img[at];
                        for (int64_t th = h.t0; th < h.t1; th++) {
                            int64_t r = (h.base + th * dh) * W + col;
                            for (int64_t tw = th == h.t0 ? 1 : 0; tw < kw; tw++)
                                if (img[r + tw * dw] > b) b = img[r + tw * dw], at = r + tw * dw;
                        }
                        d[at] += dy[oh * OW + ow];
                    }
                    ow = hi - 1;
                    continue;
                }
                axis_win w = axis_window(ow, j->k[1], j->st[1], j->pb[1], j->pe[1], dw, W);
                float g = dy[oh * OW + ow], best;
                if (j->kind == CKRT_POOL_MAX) {
                    int64_t at = window_max(img, W, h, w, dh, dw, &best);
                    if (at >= 0) d[at] += g;
                    continue;
                }
                int64_t div = divisor(j, h, w);
                if (div <= 0) continue;
                g = g / (float)div;
                for (int64_t th = h.t0; th < h.t1; th++)
                    for (int64_t tw = w.t0; tw < w.t1; tw++) d[(h.base + th * dh) * W + w.base + tw * dw] += g;
            }
        }
    }
}

void ck_cpu_pool_2d(int kind, float *y, int64_t *indices, const float *x, int64_t planes, const int64_t *in_sp,
                    const int64_t *out_sp, const int64_t *k, const int64_t *strides, const int64_t *pads_begin,
                    const int64_t *pads_end, const int64_t *dilations, int count_include_pad) {
    pool2d_job j = {kind, count_include_pad, y, NULL, indices, x, NULL, in_sp, out_sp, k, strides, pads_begin, pads_end,
                    dilations};
    ckrt_parallel_for(planes, ck_par_rows(out_sp[0] * out_sp[1] * k[0] * k[1]), pool_planes, &j);
}

void ck_cpu_pool_grad_2d(int kind, float *dx, const float *dy, const float *x, int64_t planes, const int64_t *in_sp,
                         const int64_t *out_sp, const int64_t *k, const int64_t *strides, const int64_t *pads_begin,
                         const int64_t *pads_end, const int64_t *dilations, int count_include_pad) {
    pool2d_job j = {kind, count_include_pad, NULL, dx, NULL, x, dy, in_sp, out_sp, k, strides, pads_begin, pads_end,
                    dilations};
    ckrt_parallel_for(planes, ck_par_rows(out_sp[0] * out_sp[1] * k[0] * k[1]), pool_grad_planes, &j);
}
