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
 * test per element; 2-D convolutions (the common case) skip the generic leading-axis walk, find
 * their taps' geometry once per block of rows (ck_taps2d), and the "flat" ones among them (unit
 * strides, output as wide as the input) copy or add a tap's whole row at once (ck_conv_flat):
 * col2im then zeroes the column matrix's edge entries, which only the caller's scratch holds.
 * On ResNet-18 (64x64, batch 16, one thread) this took the step from 140 to 125 ms.
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
    g->col_rs = ck_conv_col_ld(g->out_n), g->col_cs = 1; /* row-major (ckrt_conv_batch.h's stride);
                                                          * batched images widen the rows, and
                                                          * ckrt_conv_grad_input may hand col2im
                                                          * the transpose */
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
static inline void ck_im2col_run(float *restrict dst, const float *restrict s, int64_t j0, int64_t j1, int64_t st,
                                 int64_t run) {
    int64_t n = j1 - j0;
    for (int64_t j = 0; j < j0; j++) dst[j] = 0.0f;
    dst += j0;
    if (st == 1) /* loops, not library calls: the runs are short (ResNet: 2 to 32 positions) */
        for (int64_t j = 0; j < n; j++) dst[j] = s[j];
    else if (st == 2)
        for (int64_t j = 0; j < n; j++) dst[j] = s[2 * j];
    else
        for (int64_t j = 0; j < n; j++) dst[j] = s[j * st];
    for (int64_t j = n; j < run - j0; j++) dst[j] = 0.0f;
}

/* A 2-D tap's geometry, found once per block of rows instead of once per row (the divisions
 * cost more than a row's copy where the rows are short: 4 positions in ResNet-18's last stage). */
typedef struct {
    int64_t sh;       /* the input row of output row oh: oh * st[0] + sh */
    int64_t p0;       /* the input column of output column 0 */
    int64_t j0, j1;   /* the output columns whose input column is inside the input (ck_conv_valid) */
    int64_t oh0, oh1; /* flat (below) only: the output rows whose input row is inside it */
    int64_t off;      /* flat only: output position q reads input element q + off */
    int64_t qa, qb;   /* flat only: the positions of rows [oh0, oh1) whose q + off is in the input */
} ck_tap2d;

/* The "flat" 2-D convolutions: unit strides and output rows as wide as the input's (3x3 with
 * padding 1, 5x5 with 2, ...: most of a ResNet). A tap's row of the column matrix is then the
 * image shifted by one constant offset: output position q (flat, oh * W + j) reads input element
 * q + off. So a row is one long copy (im2col) or one long sum (col2im) over the flat positions,
 * and only the taps' edge columns, where the shifted read wraps into the neighbouring input row,
 * need fixing: zeros in im2col, and in col2im zeros written into the column matrix before the
 * sum (adding +0.0 leaves every sum unchanged: a sum that starts at +0.0 is never -0.0). */
static inline bool ck_conv_flat(const ck_conv_geom *g) {
    return g->nsp == 2 && g->st[0] == 1 && g->st[1] == 1 && g->out_sp[1] == g->in_sp[1];
}

static inline void ck_tap2d_init(const ck_conv_geom *g, int64_t t, ck_tap2d *f) {
    int64_t kh = t / g->k[1], kw = t % g->k[1], H = g->in_sp[0], W = g->in_sp[1], OH = g->out_sp[0];
    f->sh = ck_k_tap(0, kh, g->st[0], g->pb[0], g->dl[0]);
    f->p0 = ck_k_tap(0, kw, g->st[1], g->pb[1], g->dl[1]);
    ck_conv_valid(g, f->p0, &f->j0, &f->j1);
    f->oh0 = f->oh1 = f->off = f->qa = f->qb = 0;
    if (!ck_conv_flat(g)) return;
    f->oh0 = -f->sh < 0 ? 0 : -f->sh < OH ? -f->sh : OH;
    f->oh1 = H - f->sh < f->oh0 ? f->oh0 : H - f->sh < OH ? H - f->sh : OH;
    f->off = f->sh * W + f->p0;
    f->qa = f->oh0 * W > -f->off ? f->oh0 * W : -f->off;
    f->qb = f->oh1 * W < H * W - f->off ? f->oh1 * W : H * W - f->off;
    if (f->qb < f->qa) f->qb = f->qa;
}

#define CK_TAP_TABLE 128 /* taps whose geometry a block finds up front; more: per row */

/* The taps' geometry for one block: tab[t], or (taps > CK_TAP_TABLE) *one, filled on each call. */
typedef struct {
    ck_tap2d tab[CK_TAP_TABLE], one;
    bool tabbed;
} ck_taps2d;

static inline void ck_taps2d_init(const ck_conv_geom *g, ck_taps2d *T) {
    T->tabbed = g->taps <= CK_TAP_TABLE;
    if (T->tabbed)
        for (int64_t t = 0; t < g->taps; t++) ck_tap2d_init(g, t, &T->tab[t]);
}

static inline const ck_tap2d *ck_taps2d_get(const ck_conv_geom *g, ck_taps2d *T, int64_t t) {
    if (T->tabbed) return &T->tab[t];
    ck_tap2d_init(g, t, &T->one);
    return &T->one;
}

/* Zeros at the edge columns of rows [oh0, oh1) of one flat column-matrix row (W positions a row). */
static inline void ck_flat_zero_edges(float *row, const ck_tap2d *f, int64_t W) {
    if (f->j0 == 0 && f->j1 == W) return;
    for (int64_t oh = f->oh0; oh < f->oh1; oh++) {
        for (int64_t j = 0; j < f->j0; j++) row[oh * W + j] = 0.0f;
        for (int64_t j = f->j1; j < W; j++) row[oh * W + j] = 0.0f;
    }
}

/* One row of a flat convolution's im2col. */
static inline void ck_im2col_flat_row(float *dst, const float *src, const ck_tap2d *f, int64_t W, int64_t OH) {
    if (f->oh0 == f->oh1 || f->j0 == f->j1) {
        memset(dst, 0, sizeof(float) * (size_t)(OH * W));
        return;
    }
    memset(dst, 0, sizeof(float) * (size_t)(f->oh0 * W));
    memset(dst + f->oh1 * W, 0, sizeof(float) * (size_t)((OH - f->oh1) * W));
    memcpy(dst + f->qa, src + f->qa + f->off, sizeof(float) * (size_t)(f->qb - f->qa));
    ck_flat_zero_edges(dst, f, W); /* also [oh0 W, qa) and [qb, oh1 W): edge columns only */
}

/* im2col of a 2-D convolution: the leading axis's validity is one comparison per run. */
static inline void ck_cpu_im2col_2d(float *col, const float *img, int64_t r0, int64_t r1, const ck_conv_geom *g) {
    int64_t H = g->in_sp[0], W = g->in_sp[1], OH = g->out_sp[0], run = g->run, st0 = g->st[0], st1 = g->st[1];
    bool flat = ck_conv_flat(g);
    ck_taps2d T;
    ck_taps2d_init(g, &T);
    int64_t c = r0 / g->taps, t = r0 % g->taps;
    for (int64_t r = r0; r < r1; r++) {
        const ck_tap2d *f = ck_taps2d_get(g, &T, t);
        const float *src = img + c * g->in_n;
        float *dst = col + r * g->col_rs;
        if (flat) ck_im2col_flat_row(dst, src, f, W, OH);
        else
            for (int64_t oh = 0; oh < OH; oh++, dst += run) {
                int64_t ih = oh * st0 + f->sh;
                if (ih < 0 || ih >= H || f->j0 == f->j1) memset(dst, 0, sizeof(float) * (size_t)run);
                else ck_im2col_run(dst, src + ih * W + f->p0 + f->j0 * st1, f->j0, f->j1, st1, run);
            }
        if (++t == g->taps) t = 0, c++;
    }
}

/* Rows [r0, r1) of col (Cg * taps, out_n) from img (Cg, in_sp...). CK_VEC (here and in
 * ck_cpu_col2im_chans): the copies and sums above in AVX-512 or AVX2 where the CPU has them. */
CK_VEC static void ck_cpu_im2col_rows(float *col, const float *img, int64_t r0, int64_t r1, const ck_conv_geom *g) {
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

/* Columns [q0, q1) (output positions) of every row of a 2-D convolution's column matrix
 * (rows Cg * taps) from img: what ck_cpu_im2col_2d writes there, element for element. For the
 * fused forward (cpu_dense.c), whose pieces of output positions each fill their own columns.
 * Flat convolutions copy the range at once and zero its edge columns; the others go by output
 * row, the part [ja, jb) of rows oh_a .. oh_b that the range covers. */
CK_VEC __attribute__((unused)) static void ck_cpu_im2col_2d_cols(float *col, const float *img, int64_t rows, int64_t q0,
                                                                int64_t q1, const ck_conv_geom *g) {
    int64_t H = g->in_sp[0], W = g->in_sp[1], OW = g->run, st0 = g->st[0], st1 = g->st[1];
    int64_t oh_a = q0 / OW, oh_b = (q1 - 1) / OW;
    bool flat = ck_conv_flat(g);
    ck_taps2d T;
    ck_taps2d_init(g, &T);
    for (int64_t r = 0, t = 0, c = 0; r < rows; r++) {
        const ck_tap2d *f = ck_taps2d_get(g, &T, t);
        const float *src = img + c * g->in_n;
        float *dst = col + r * g->col_rs;
        if (++t == g->taps) t = 0, c++;
        if (flat) { /* dst[q] = src[q + off] on [qa, qb) (empty when no column is inside), else 0 */
            int64_t qa = f->qa > q0 ? f->qa : q0, qb = f->qb < q1 ? f->qb : q1;
            if (f->j0 == f->j1 || qb < qa) qa = qb = q1;
            memset(dst + q0, 0, sizeof(float) * (size_t)(qa - q0));
            memcpy(dst + qa, src + qa + f->off, sizeof(float) * (size_t)(qb - qa));
            memset(dst + qb, 0, sizeof(float) * (size_t)(q1 - qb));
            if (f->j0 == 0 && f->j1 == W) continue;
            for (int64_t oh = oh_a; oh <= oh_b; oh++) { /* the edge columns, inside [q0, q1) */
                int64_t ja = oh == oh_a ? q0 - oh * W : 0, jb = oh == oh_b ? q1 - oh * W : W;
                for (int64_t j = ja; j < jb && j < f->j0; j++) dst[oh * W + j] = 0.0f;
                for (int64_t j = ja > f->j1 ? ja : f->j1; j < jb; j++) dst[oh * W + j] = 0.0f;
            }
            continue;
        }
        for (int64_t oh = oh_a; oh <= oh_b; oh++) {
            int64_t ja = oh == oh_a ? q0 - oh * OW : 0, jb = oh == oh_b ? q1 - oh * OW : OW, ih = oh * st0 + f->sh;
            float *d = dst + oh * OW;        /* d[j]: output position (oh, j) */
            int64_t lo = jb, hi = jb;        /* the copied columns [lo, hi): inside the input */
            if (ih >= 0 && ih < H) {
                lo = ja > f->j0 ? ja : f->j0;
                lo = lo < jb ? lo : jb;
                hi = jb < f->j1 ? jb : f->j1;
                hi = hi > lo ? hi : lo;
            }
            for (int64_t j = ja; j < lo; j++) d[j] = 0.0f;
            if (hi > lo) {
                const float *s = src + ih * W + f->p0 + lo * st1; /* column lo's input element */
                if (st1 == 1) memcpy(d + lo, s, sizeof(float) * (size_t)(hi - lo));
                else
                    for (int64_t j = lo; j < hi; j++) d[j] = s[(j - lo) * st1];
            }
            for (int64_t j = hi; j < jb; j++) d[j] = 0.0f;
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

/* col2im of a 2-D convolution, in the order of ck_cpu_col2im. A flat convolution's row-major
 * col: per tap one sum over the flat positions, its edge columns zeroed first (col is the
 * caller's scratch). */
static inline void ck_cpu_col2im_2d(float *img, float *col, int64_t c0, int64_t c1, const ck_conv_geom *g) {
    int64_t H = g->in_sp[0], W = g->in_sp[1], OH = g->out_sp[0], run = g->run, st0 = g->st[0], st1 = g->st[1];
    bool flat = ck_conv_flat(g) && g->col_cs == 1;
    ck_taps2d T;
    ck_taps2d_init(g, &T);
    memset(img + c0 * g->in_n, 0, sizeof(float) * (size_t)((c1 - c0) * g->in_n));
    for (int64_t ch = c0; ch < c1; ch++) {
        float *dst = img + ch * g->in_n;
        for (int64_t t = g->taps - 1; t >= 0; t--) {
            const ck_tap2d *f = ck_taps2d_get(g, &T, t);
            float *src = col + (ch * g->taps + t) * g->col_rs;
            if (f->j0 == f->j1) continue;
            if (flat) {
                ck_flat_zero_edges(src, f, W);
                float *restrict d = dst + f->off;
                const float *restrict s = src;
                for (int64_t q = f->qa; q < f->qb; q++) d[q] += s[q];
                continue;
            }
            for (int64_t oh = 0; oh < OH; oh++, src += run * g->col_cs) {
                int64_t ih = oh * st0 + f->sh;
                if (ih >= 0 && ih < H) ck_col2im_run(dst + ih * W + f->p0 + f->j0 * st1, src, f->j0, f->j1, st1, g->col_cs);
            }
        }
    }
}

/* Channels [c0, c1) of img (Cg, in_sp...) = col2im(col (Cg * taps, out_n)). Each element's
 * additions come in the order taps descending, runs ascending: per element the order of
 * ck_k_col2im. A flat convolution's col (row-major) is written to: its edge columns zeroed. */
CK_VEC static void ck_cpu_col2im_chans(float *img, float *col, int64_t c0, int64_t c1, const ck_conv_geom *g) {
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
    const float *in; /* im2col's image */
    float *col;      /* col2im's column matrix (its scratch: ck_cpu_col2im_chans writes to it) */
    const ck_conv_geom *g;
} ck_cols_job;

static inline void ck_im2col_block(void *arg, int64_t r0, int64_t r1) {
    const ck_cols_job *j = arg;
    ck_cpu_im2col_rows(j->out, j->in, r0, r1, j->g);
}

static inline void ck_col2im_block(void *arg, int64_t c0, int64_t c1) {
    const ck_cols_job *j = arg;
    ck_cpu_col2im_chans(j->out, j->col, c0, c1, j->g);
}

#define CK_COLS_GRAIN 16384 /* floats of col per block */

/* col (Cg * taps, out_n) from img (Cg, in_sp...). */
static inline void ck_cpu_im2col(float *col, const float *img, int64_t Cg, const ck_conv_geom *g) {
    ck_cols_job j = {col, img, NULL, g};
    int64_t rows = Cg * g->taps;
    ckrt_parallel_for(rows, g->out_n >= CK_COLS_GRAIN ? 1 : CK_COLS_GRAIN / (g->out_n > 0 ? g->out_n : 1), ck_im2col_block, &j);
}

/* img (Cg, in_sp...) = col2im(col (Cg * taps, out_n)); col is scratch (ck_cpu_col2im_chans). */
static inline void ck_cpu_col2im(float *img, float *col, int64_t Cg, const ck_conv_geom *g) {
    ck_cols_job j = {img, NULL, col, g};
    int64_t per = g->taps * g->out_n;
    ckrt_parallel_for(Cg, per >= CK_COLS_GRAIN ? 1 : CK_COLS_GRAIN / (per > 0 ? per : 1), ck_col2im_block, &j);
}

/* The batches of a convolution (forward or input gradient): fn(arg, ws, n0, nb) runs images
 * [n0, n0 + nb), nb <= B, through one lane's workspace ws. With lanes (ckrt_conv_batch.h) and at
 * most as many threads as lanes, lane l runs batches l, l + lanes, ... in its own workspace
 * ws + l lane_floats, all lanes in one fork-join (a lane's own calls into the pool run inline on
 * its thread), and at one thread the lanes run in turn, so every lane's workspace is written.
 * Otherwise (no lanes, or more threads than lanes: each batch's pieces spread over all of them)
 * the batches run in turn through lane 0, and the other lanes' workspace, planned and so
 * counted in the measured peak, is cleared. Either way each image is computed alike: the same bits. */
typedef void (*ck_conv_unit_fn)(const void *arg, float *ws, int64_t n0, int64_t nb);

typedef struct {
    ck_conv_unit_fn fn;
    const void *arg;
    float *ws;
    int64_t lanes, lane_floats, N, B;
} ck_lanes_job;

static inline void ck_lanes_block(void *arg, int64_t l0, int64_t l1) {
    const ck_lanes_job *j = arg;
    for (int64_t l = l0; l < l1; l++)
        for (int64_t n0 = l * j->B; n0 < j->N; n0 += j->lanes * j->B)
            j->fn(j->arg, j->ws + l * j->lane_floats, n0, j->N - n0 < j->B ? j->N - n0 : j->B);
}

static inline void ck_conv_units(ck_conv_unit_fn fn, const void *arg, float *ws, int64_t lanes, int64_t lane_floats,
                                 int64_t N, int64_t B) {
    if (lanes > 1 && ckrt_threads() <= lanes) {
        ck_lanes_job j = {fn, arg, ws, lanes, lane_floats, N, B};
        ckrt_parallel_for(lanes, 1, ck_lanes_block, &j);
        return;
    }
    for (int64_t n0 = 0; n0 < N; n0 += B) fn(arg, ws, n0, N - n0 < B ? N - n0 : B);
    if (lanes > 1) memset(ws + lane_floats, 0, sizeof(float) * (size_t)((lanes - 1) * lane_floats));
}

#endif
