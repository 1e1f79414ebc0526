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

/* Along one axis, for output position o: taps [*t0, *t1) inside [0, in); returns the taps inside
 * [-pb, in + pe) (count_include_pad's count). Taps inside form one range (dilation >= 1). */
static int64_t axis_range(int64_t o, int64_t k, int64_t st, int64_t pb, int64_t pe, int64_t dl, int64_t in, int64_t *t0,
                          int64_t *t1) {
    int64_t a = k, b = k, padded = 0;
    for (int64_t t = 0; t < k; t++) {
        int64_t p = o * st - pb + t * dl;
        if (p >= 0 && p < in) {
            if (a == k) a = t;
            b = t + 1;
        }
        padded += p >= -pb && p < in + pe;
    }
    *t0 = a, *t1 = a == k ? a : b;
    return padded;
}

/* One window of plane img (H, W) at (oh, ow): its max and the max's flat index in the plane (-1
 * when no tap is inside), or its average; *div: the divisor (average). */
static float window(const pool2d_job *j, const float *img, int64_t oh, int64_t ow, int64_t *at, int64_t *div) {
    int64_t h0, h1, w0, w1, W = j->in_sp[1];
    int64_t ph = axis_range(oh, j->k[0], j->st[0], j->pb[0], j->pe[0], j->dl[0], j->in_sp[0], &h0, &h1);
    int64_t pw = axis_range(ow, j->k[1], j->st[1], j->pb[1], j->pe[1], j->dl[1], W, &w0, &w1);
    int64_t ih0 = oh * j->st[0] - j->pb[0], iw0 = ow * j->st[1] - j->pb[1];
    float best = -3.402823466e+38f, sum = 0.0f;
    int64_t best_at = -1;
    for (int64_t th = h0; th < h1; th++) {
        const float *row = img + (ih0 + th * j->dl[0]) * W;
        for (int64_t tw = w0; tw < w1; tw++) {
            int64_t iw = iw0 + tw * j->dl[1];
            float v = row[iw];
            if (j->kind == CKRT_POOL_MAX) {
                if (best_at < 0 || v > best) best = v, best_at = (row - img) + iw;
            } else {
                sum += v;
            }
        }
    }
    *at = best_at;
    *div = j->count_include_pad ? ph * pw : (h1 - h0) * (w1 - w0);
    if (j->kind == CKRT_POOL_MAX) return best;
    return *div > 0 ? sum / (float)*div : 0.0f;
}

static void pool_planes(void *arg, int64_t p0, int64_t p1) {
    const pool2d_job *j = arg;
    int64_t in_n = j->in_sp[0] * j->in_sp[1], OH = j->out_sp[0], OW = j->out_sp[1];
    for (int64_t p = p0; p < p1; p++) {
        const float *img = j->x + p * in_n;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t i = (p * OH + oh) * OW + ow, at, div;
                j->y[i] = window(j, img, oh, ow, &at, &div);
                if (j->indices) j->indices[i] = at < 0 ? -1 : p * in_n + at;
            }
    }
}

static void pool_grad_planes(void *arg, int64_t p0, int64_t p1) {
    const pool2d_job *j = arg;
    int64_t in_n = j->in_sp[0] * j->in_sp[1], OH = j->out_sp[0], OW = j->out_sp[1], W = j->in_sp[1];
    for (int64_t p = p0; p < p1; p++) {
        const float *img = j->x + p * in_n;
        float *d = j->dx + p * in_n;
        memset(d, 0, sizeof(float) * (size_t)in_n);
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                float g = j->dy[(p * OH + oh) * OW + ow];
                if (j->kind == CKRT_POOL_MAX) {
                    int64_t at, div;
                    (void)window(j, img, oh, ow, &at, &div);
                    if (at >= 0) d[at] += g;
                    continue;
                }
                int64_t h0, h1, w0, w1;
                int64_t ph = axis_range(oh, j->k[0], j->st[0], j->pb[0], j->pe[0], j->dl[0], j->in_sp[0], &h0, &h1);
                int64_t pw = axis_range(ow, j->k[1], j->st[1], j->pb[1], j->pe[1], j->dl[1], W, &w0, &w1);
                int64_t div = j->count_include_pad ? ph * pw : (h1 - h0) * (w1 - w0);
                if (div <= 0) continue;
                g = g / (float)div;
                int64_t ih0 = oh * j->st[0] - j->pb[0], iw0 = ow * j->st[1] - j->pb[1];
                for (int64_t th = h0; th < h1; th++)
                    for (int64_t tw = w0; tw < w1; tw++) d[(ih0 + th * j->dl[0]) * W + iw0 + tw * j->dl[1]] += g;
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
