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
 * the device bodies' divisions per element. The columns of a row that fall inside the input along
 * the last axis are one range for all its runs (ck_conv_valid), so the runs copy or add without a
 * test per element; 2-D convolutions (the common case) skip the generic leading-axis walk.
 */
#ifndef CKRT_CPU_CONV_H
#define CKRT_CPU_CONV_H

#include "ckrt.h"
#include "ckrt_conv_batch.h"
#include "ckrt_kernels_move.h"
#include "ckrt_pool.h"

#include <string.h>

typedef struct {
    int nsp, last;
    int64_t in_n, out_n, taps, run, n_runs; /* run: the last axis's length; n_runs: runs per row */
    int64_t instr[CKRT_MAX_RANK];           /* the input's element strides */
    int64_t col_rs, col_cs;                 /* the column matrix's row and column strides (im2col: col_cs 1) */
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
    g->col_rs = g->out_n, g->col_cs = 1; /* row-major; batched images widen the rows, and
                                          * ckrt_conv_grad_input may hand col2im the transpose */
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

/* The columns j of a run whose last-axis input coordinate p0 + j * st lies in [0, in): [*j0, *j1).
 * The same for every run of a row (it depends on the tap only), so the runs' inner loops carry no
 * test and vectorize. */
static inline void ck_conv_valid(const ck_conv_geom *g, int64_t p0, int64_t *j0, int64_t *j1) {
    int64_t st = g->st[g->last], in = g->in_sp[g->last], run = g->run;
    int64_t a = p0 >= 0 ? 0 : (-p0 + st - 1) / st;    /* first j with p >= 0 */
    int64_t b = p0 >= in ? 0 : (in - 1 - p0) / st + 1; /* first j with p >= in */
    *j0 = a < run ? a : run;
    *j1 = b < *j0 ? *j0 : b < run ? b : run;
}

/* One run of im2col: dst[0, run) from the input line s (column j0's element), zeros outside [j0, j1). */
static inline void ck_im2col_run(float *dst, const float *s, int64_t j0, int64_t j1, int64_t st, int64_t run) {
    for (int64_t j = 0; j < j0; j++) dst[j] = 0.0f;
    if (st == 1) memcpy(dst + j0, s, sizeof(float) * (size_t)(j1 - j0));
    else
        for (int64_t j = 0; j < j1 - j0; j++) dst[j0 + j] = s[j * st];
    for (int64_t j = j1; j < run; j++) dst[j] = 0.0f;
}

/* im2col of a 2-D convolution: the leading axis's validity is one comparison per run. */
static inline void ck_cpu_im2col_2d(float *col, const float *img, int64_t r0, int64_t r1, const ck_conv_geom *g) {
    int64_t k1 = g->k[1], H = g->in_sp[0], W = g->in_sp[1], OH = g->out_sp[0], run = g->run;
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = r % g->taps, kh = t / k1, kw = t % k1, j0, j1;
        const float *src = img + (r / g->taps) * g->in_n;
        float *dst = col + r * g->col_rs;
        int64_t p0 = ck_k_tap(0, kw, g->st[1], g->pb[1], g->dl[1]);
        ck_conv_valid(g, p0, &j0, &j1);
        for (int64_t oh = 0; oh < OH; oh++, dst += run) {
            int64_t ih = ck_k_tap(oh, kh, g->st[0], g->pb[0], g->dl[0]);
            if (ih < 0 || ih >= H || j0 == j1) memset(dst, 0, sizeof(float) * (size_t)run);
            else ck_im2col_run(dst, src + ih * W + p0 + j0 * g->st[1], j0, j1, g->st[1], run);
        }
    }
}

/* Rows [r0, r1) of col (Cg * taps, out_n) from img (Cg, in_sp...). */
static inline void ck_cpu_im2col_rows(float *col, const float *img, int64_t r0, int64_t r1, const ck_conv_geom *g) {
    if (g->nsp == 2) {
        ck_cpu_im2col_2d(col, img, r0, r1, g);
        return;
    }
    int last = g->last;
    int64_t st = g->st[last], run = g->run;
    for (int64_t r = r0; r < r1; r++) {
        int64_t kk[CKRT_MAX_RANK], o[CKRT_MAX_RANK] = {0}, off, j0, j1;
        ck_conv_tap(g, r % g->taps, kk);
        const float *src = img + (r / g->taps) * g->in_n;
        float *dst = col + r * g->col_rs;
        int64_t p0 = ck_k_tap(0, kk[last], st, g->pb[last], g->dl[last]);
        ck_conv_valid(g, p0, &j0, &j1);
        for (int64_t q = 0; q < g->n_runs; q++, dst += run) {
            if (!ck_conv_run(g, o, kk, &off) || j0 == j1) memset(dst, 0, sizeof(float) * (size_t)run);
            else ck_im2col_run(dst, src + off + p0 + j0 * st, j0, j1, st, run);
        }
    }
}

typedef float ck_v4f __attribute__((vector_size(16))); /* GCC/Clang vectors: 4 adds at once, same bits */

/* One run of col2im: d (column j0's input element) += c[j0, j1). Elementwise: vector or scalar,
 * each element gets the same one addition. */
static inline void ck_col2im_run(float *d, const float *c, int64_t j0, int64_t j1, int64_t st, int64_t cs) {
    int64_t n = j1 - j0, j = 0;
    c += j0 * cs;
    if (st == 1 && cs == 1)
        for (; j + 4 <= n; j += 4) {
            ck_v4f a, b;
            memcpy(&a, d + j, sizeof a), memcpy(&b, c + j, sizeof b);
            a += b;
            memcpy(d + j, &a, sizeof a);
        }
    for (; j < n; j++) d[j * st] += c[j * cs];
}

/* col2im of a 2-D convolution, in the order of ck_cpu_col2im. */
static inline void ck_cpu_col2im_2d(float *img, const float *col, int64_t c0, int64_t c1, const ck_conv_geom *g) {
    int64_t k1 = g->k[1], H = g->in_sp[0], W = g->in_sp[1], OH = g->out_sp[0], run = g->run;
    memset(img + c0 * g->in_n, 0, sizeof(float) * (size_t)((c1 - c0) * g->in_n));
    for (int64_t ch = c0; ch < c1; ch++) {
        float *dst = img + ch * g->in_n;
        for (int64_t t = g->taps - 1; t >= 0; t--) {
            int64_t kh = t / k1, kw = t % k1, j0, j1;
            const float *src = col + (ch * g->taps + t) * g->col_rs;
            int64_t p0 = ck_k_tap(0, kw, g->st[1], g->pb[1], g->dl[1]);
            ck_conv_valid(g, p0, &j0, &j1);
            if (j0 == j1) continue;
            for (int64_t oh = 0; oh < OH; oh++, src += run * g->col_cs) {
                int64_t ih = ck_k_tap(oh, kh, g->st[0], g->pb[0], g->dl[0]);
                if (ih >= 0 && ih < H) ck_col2im_run(dst + ih * W + p0 + j0 * g->st[1], src, j0, j1, g->st[1], g->col_cs);
            }
        }
    }
}

/* Channels [c0, c1) of img (Cg, in_sp...) = col2im(col (Cg * taps, out_n)). Each element's
 * additions come in the order taps descending, runs ascending: per element the order of
 * ck_k_col2im. */
static inline void ck_cpu_col2im_chans(float *img, const float *col, int64_t c0, int64_t c1, const ck_conv_geom *g) {
    if (g->nsp == 2) {
        ck_cpu_col2im_2d(img, col, c0, c1, g);
        return;
    }
    int last = g->last;
    int64_t st = g->st[last], run = g->run;
    memset(img + c0 * g->in_n, 0, sizeof(float) * (size_t)((c1 - c0) * g->in_n));
    for (int64_t ch = c0; ch < c1; ch++) {
        float *dst = img + ch * g->in_n;
        for (int64_t t = g->taps - 1; t >= 0; t--) {
            int64_t kk[CKRT_MAX_RANK], o[CKRT_MAX_RANK] = {0}, off, j0, j1;
            ck_conv_tap(g, t, kk);
            const float *src = col + (ch * g->taps + t) * g->col_rs;
            int64_t p0 = ck_k_tap(0, kk[last], st, g->pb[last], g->dl[last]);
            ck_conv_valid(g, p0, &j0, &j1);
            if (j0 == j1) continue;
            for (int64_t q = 0; q < g->n_runs; q++, src += run * g->col_cs)
                if (ck_conv_run(g, o, kk, &off)) ck_col2im_run(dst + off + p0 + j0 * st, src, j0, j1, st, g->col_cs);
        }
    }
}

/* The whole column matrix and its adjoint, spread over the pool in blocks of rows (channels) of a
 * fixed size: copies and per-element sums whose order does not depend on the cut. */
typedef struct {
    float *out;
    const float *in;
    const ck_conv_geom *g;
} ck_cols_job;

static inline void ck_im2col_block(void *arg, int64_t r0, int64_t r1) {
    const ck_cols_job *j = arg;
    ck_cpu_im2col_rows(j->out, j->in, r0, r1, j->g);
}

static inline void ck_col2im_block(void *arg, int64_t c0, int64_t c1) {
    const ck_cols_job *j = arg;
    ck_cpu_col2im_chans(j->out, j->in, c0, c1, j->g);
}

#define CK_COLS_GRAIN 16384 /* floats of col per block */

/* col (Cg * taps, out_n) from img (Cg, in_sp...). */
static inline void ck_cpu_im2col(float *col, const float *img, int64_t Cg, const ck_conv_geom *g) {
    ck_cols_job j = {col, img, g};
    int64_t rows = Cg * g->taps;
    ckrt_parallel_for(rows, g->out_n >= CK_COLS_GRAIN ? 1 : CK_COLS_GRAIN / (g->out_n > 0 ? g->out_n : 1), ck_im2col_block, &j);
}

/* img (Cg, in_sp...) = col2im(col (Cg * taps, out_n)). */
static inline void ck_cpu_col2im(float *img, const float *col, int64_t Cg, const ck_conv_geom *g) {
    ck_cols_job j = {img, col, g};
    int64_t per = g->taps * g->out_n;
    ckrt_parallel_for(Cg, per >= CK_COLS_GRAIN ? 1 : CK_COLS_GRAIN / (per > 0 ? per : 1), ck_col2im_block, &j);
}

#endif
