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
 * dx in ascending window order. Image planes (n, c) are independent: they are spread over the
 * pool in fixed blocks, which changes no sum.
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

static inline int64_t divisor(const pool2d_job *j, axis_win h, axis_win w) {
    return j->count_include_pad ? h.pad * w.pad : (h.t1 - h.t0) * (w.t1 - w.t0);
}

CK_VEC static void pool_planes(void *arg, int64_t p0, int64_t p1) {
    const pool2d_job *j = arg;
    int64_t W = j->in_sp[1], in_n = j->in_sp[0] * W, OH = j->out_sp[0], OW = j->out_sp[1], dh = j->dl[0], dw = j->dl[1];
    float *y = j->y;
    int64_t *ind = j->indices;
    for (int64_t p = p0; p < p1; p++) {
        const float *img = j->x + p * in_n;
        for (int64_t oh = 0; oh < OH; oh++) {
            axis_win h = axis_window(oh, j->k[0], j->st[0], j->pb[0], j->pe[0], dh, j->in_sp[0]);
            for (int64_t ow = 0; ow < OW; ow++) {
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
    for (int64_t p = p0; p < p1; p++) {
        const float *img = j->x + p * in_n, *dy = j->dy + p * OH * OW;
        float *d = j->dx + p * in_n;
        memset(d, 0, sizeof(float) * (size_t)in_n);
        for (int64_t oh = 0; oh < OH; oh++) {
            axis_win h = axis_window(oh, j->k[0], j->st[0], j->pb[0], j->pe[0], dh, j->in_sp[0]);
            for (int64_t ow = 0; ow < OW; ow++) {
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
