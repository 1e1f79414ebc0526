/* cpu_conv.h — the CPU's column matrix for convolution (im2col, the forward and the weight
 * gradient) and its adjoint (col2im, the input gradient), for cpu_dense.c and cpu_train_conv.c.
 *
 * The column matrix of one image group is (Cg * prod(k), prod(out_sp)): row r = (channel, tap),
 * column = output position. Both directions walk it the same way: per row, the output positions
 * in runs along the last spatial axis; the validity and offset of the leading axes are found once
 * per run (ck_conv_run), the run itself is linear. im2col gives element for element what
 * ck_k_im2col computes (a copy: no rounding); col2im adds each column entry onto the input element
 * its tap reads, taps in descending order onto zeros, which is the order ck_k_col2im sums them in
 * (a tap reaches a given input element from at most one window position): the same bits, without
 * the device bodies' divisions per element.
 */
#ifndef CKRT_CPU_CONV_H
#define CKRT_CPU_CONV_H

#include "ckrt.h"
#include "ckrt_kernels_move.h"

#include <string.h>

typedef struct {
    int nsp, last;
    int64_t in_n, out_n, taps, run, n_runs; /* run: the last axis's length; n_runs: runs per row */
    int64_t instr[CKRT_MAX_RANK];           /* the input's element strides */
    const int64_t *in_sp, *out_sp, *k, *st, *pb, *dl;
} ck_conv_geom;

static inline void ck_conv_geom_init(ck_conv_geom *g, int nsp, const int64_t *in_sp, const int64_t *out_sp,
                                     const int64_t *k, const int64_t *st, const int64_t *pb, const int64_t *dl) {
    g->nsp = nsp, g->last = nsp - 1;
    g->in_n = g->out_n = g->taps = 1;
    for (int d = nsp - 1; d >= 0; d--) {
        g->instr[d] = g->in_n;
        g->in_n *= in_sp[d];
        g->out_n *= out_sp[d];
        g->taps *= k[d];
    }
    g->run = out_sp[g->last];
    g->n_runs = g->out_n / g->run;
    g->in_sp = in_sp, g->out_sp = out_sp, g->k = k, g->st = st, g->pb = pb, g->dl = dl;
}

/* Tap t's offset along each axis. */
static inline void ck_conv_tap(const ck_conv_geom *g, int64_t t, int64_t *kk) {
    for (int d = g->last; d >= 0; d--) kk[d] = t % g->k[d], t /= g->k[d];
}

/* For the run at output coordinates o (leading axes) and tap kk: whether its leading-axis input
 * coordinates are inside the input (*off: their offset), then o moves to the next run. */
static inline bool ck_conv_run(const ck_conv_geom *g, int64_t *o, const int64_t *kk, int64_t *off) {
    bool inside = true;
    *off = 0;
    for (int d = 0; d < g->last; d++) {
        int64_t p = ck_k_tap(o[d], kk[d], g->st[d], g->pb[d], g->dl[d]);
        inside = inside && p >= 0 && p < g->in_sp[d];
        *off += p * g->instr[d];
    }
    for (int d = g->last - 1; d >= 0; d--) {
        if (++o[d] < g->out_sp[d]) break;
        o[d] = 0;
    }
    return inside;
}

/* col (Cg * taps, out_n) from img (Cg, in_sp...). */
static inline void ck_cpu_im2col(float *col, const float *img, int64_t Cg, const ck_conv_geom *g) {
    int last = g->last;
    for (int64_t r = 0; r < Cg * g->taps; r++) {
        int64_t kk[CKRT_MAX_RANK], o[CKRT_MAX_RANK] = {0}, off;
        ck_conv_tap(g, r % g->taps, kk);
        const float *src = img + (r / g->taps) * g->in_n;
        float *dst = col + r * g->out_n;
        int64_t p0 = ck_k_tap(0, kk[last], g->st[last], g->pb[last], g->dl[last]);
        for (int64_t q = 0; q < g->n_runs; q++, dst += g->run) {
            if (!ck_conv_run(g, o, kk, &off)) {
                memset(dst, 0, sizeof(float) * (size_t)g->run);
                continue;
            }
            for (int64_t j = 0; j < g->run; j++) {
                int64_t p = p0 + j * g->st[last];
                dst[j] = p >= 0 && p < g->in_sp[last] ? src[off + p] : 0.0f;
            }
        }
    }
}

/* img (Cg, in_sp...) = col2im(col (Cg * taps, out_n)). */
static inline void ck_cpu_col2im(float *img, const float *col, int64_t Cg, const ck_conv_geom *g) {
    int last = g->last;
    memset(img, 0, sizeof(float) * (size_t)(Cg * g->in_n));
    for (int64_t ch = 0; ch < Cg; ch++) {
        float *dst = img + ch * g->in_n;
        for (int64_t t = g->taps - 1; t >= 0; t--) {
            int64_t kk[CKRT_MAX_RANK], o[CKRT_MAX_RANK] = {0}, off;
            ck_conv_tap(g, t, kk);
            const float *src = col + (ch * g->taps + t) * g->out_n;
            int64_t p0 = ck_k_tap(0, kk[last], g->st[last], g->pb[last], g->dl[last]);
            for (int64_t q = 0; q < g->n_runs; q++, src += g->run) {
                if (!ck_conv_run(g, o, kk, &off)) continue;
                for (int64_t j = 0; j < g->run; j++) {
                    int64_t p = p0 + j * g->st[last];
                    if (p >= 0 && p < g->in_sp[last]) dst[off + p] += src[j];
                }
            }
        }
    }
}

#endif
