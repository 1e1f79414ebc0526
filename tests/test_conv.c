/* test_conv.c — the CPU backend's convolutions (libckrt: ckrt_conv, ckrt_conv_grad_input,
 * ckrt_conv_grad_weight) against a direct double-precision reference written here from the ONNX
 * definition, on geometries the samples do not cover (groups, dilations, strides, asymmetric
 * pads, 1-D and 3-D, depthwise, bias or none), whichever GEMM runs them (oneDNN's or OpenBLAS's).
 * Also: no kernel writes past the planned column matrix (guard bytes after it), two runs give
 * the same bits, and a build with oneDNN does use it on an AVX2 CPU. The CPU's column matrix
 * (cpu_conv.h's im2col and col2im) and its 2-D pooling (cpu_pool.c) are checked bit for bit
 * against the per-element bodies a GPU runs (ck_k_im2col, ck_k_col2im, ck_k_pool, ck_k_pool_grad).
 */
#define CKRT_NO_DISPATCH /* the CPU entry points themselves, no backend table */
#include "ckrt.h"
#include "ckrt_dnnl.h"
#include "ckrt_kernels_train.h"
#include "ckrt_pool.h"
#include "cpu_conv.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int nsp;
    int64_t N, C, M, group, in[3], k[3], st[3], pb[3], pe[3], dl[3];
    int bias;
} geo;

static int64_t out_of(const geo *g, int d) {
    return (g->in[d] + g->pb[d] + g->pe[d] - ((g->k[d] - 1) * g->dl[d] + 1)) / g->st[d] + 1;
}

static int64_t prod(int n, const int64_t *v) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= v[i];
    return p;
}

/* ONNX Conv, directly: y[n, m, o] = b[m] + sum over (c in m's group, taps) x[n, c, o*s - pb + t*dl] w[m, c, t] */
static void reference(const geo *g, const int64_t *out, double *y, const float *x, const float *w, const float *b) {
    int64_t Cg = g->C / g->group, Mg = g->M / g->group, on = prod(g->nsp, out), taps = prod(g->nsp, g->k), in_n = prod(g->nsp, g->in);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t m = 0; m < g->M; m++)
            for (int64_t o = 0; o < on; o++) {
                double acc = b ? b[m] : 0.0;
                for (int64_t c = 0; c < Cg; c++)
                    for (int64_t t = 0; t < taps; t++) {
                        int64_t oo = o, tt = t, off = 0, stride = 1;
                        bool inside = true;
                        for (int d = g->nsp - 1; d >= 0; d--) {
                            int64_t od = oo % out[d], td = tt % g->k[d];
                            oo /= out[d], tt /= g->k[d];
                            int64_t p = od * g->st[d] - g->pb[d] + td * g->dl[d];
                            inside = inside && p >= 0 && p < g->in[d];
                            off += p * stride;
                            stride *= g->in[d];
                        }
                        if (inside)
                            acc += (double)x[(n * g->C + (m / Mg) * Cg + c) * in_n + off] * w[(m * Cg + c) * taps + t];
                    }
                y[(n * g->M + m) * on + o] = acc;
            }
}

static void fill(float *v, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static void expect_close(const char *what, const float *got, const double *want, int64_t n) {
    double scale = 0, err = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < n; i++) err = fmax(err, fabs(got[i] - want[i]));
    ck_assert_msg(err <= 1e-5 * fmax(1.0, scale), "%s: max error %g (scale %g)", what, err, scale);
}

/* The planned workspace (ck_ws_conv, ck_ws_conv_grad): the column matrix, for every kernel, of
 * one image or of B side by side with the staging matrix (ckrt_conv_batch.h). */
enum { FWD = 1, BWD_DATA = 2 }; /* and 0: the weight gradient */

static int64_t images_per_gemm(const geo *g, const int64_t *out, int kind) {
    int ck = kind == FWD ? CK_CONV_FWD : kind == BWD_DATA ? CK_CONV_DGRAD : CK_CONV_WGRAD;
    return ck_conv_batch(ck, g->N, g->group, g->M / g->group, (g->C / g->group) * prod(g->nsp, g->k), prod(g->nsp, out));
}
static int64_t planned_ws(const geo *g, const int64_t *out, int kind, int64_t lanes) {
    int64_t R = (g->C / g->group) * prod(g->nsp, g->k);
    return ck_conv_ws_floats(lanes, images_per_gemm(g, out, kind), g->M / g->group, R, prod(g->nsp, out)) * 4;
}

/* 1x1, no begin padding, output as large as the input: no column matrix, and no workspace planned */
static bool is_direct(const geo *g, const int64_t *out) {
    bool direct = true;
    for (int d = 0; d < g->nsp; d++) direct = direct && g->k[d] == 1 && g->pb[d] == 0 && g->in[d] == out[d];
    return direct;
}

/* Whether the planner could grant kind lanes here (passes/lanes.c: a column matrix, and
 * ck_conv_lanes_fit). */
static bool lanes_fit(const geo *g, const int64_t *out, int kind) {
    return kind != 0 && !is_direct(g, out) &&
           ck_conv_lanes_fit(kind == BWD_DATA, g->nsp, g->N, g->group, g->M / g->group, (g->C / g->group) * prod(g->nsp, g->k),
                             prod(g->nsp, out));
}

#define GUARD 4096
/* Runs kind (1 forward, 2 input gradient, 0 weight gradient) into out (n floats) with a guarded
 * workspace on 1 thread, then again on 3 (the same bits: ckrt_dnnl.h's fixed pieces), and where
 * lanes fit with CK_CONV_LANES lanes on 1, 2 and 3 threads (the same bits again). */
static void run_kind(const geo *g, const int64_t *out_sp, int kind, float *res, int64_t n, const float *x, const float *w,
                     const float *b, const float *dy) {
    int64_t lanes_max = lanes_fit(g, out_sp, kind) ? CK_CONV_LANES : 1;
    bool direct = is_direct(g, out_sp);
    int64_t ws_max = planned_ws(g, out_sp, kind, lanes_max);
    unsigned char *ws = malloc((size_t)ws_max + GUARD);
    float *again = malloc(sizeof(float) * (size_t)n);
    static const struct { int threads, lanes; } reps[] = {{1, 1}, {3, 1}, {1, CK_CONV_LANES}, {2, CK_CONV_LANES}, {3, CK_CONV_LANES}};
    for (int rep = 0; rep < 5; rep++) {
        int64_t lanes = reps[rep].lanes, ws_bytes = planned_ws(g, out_sp, kind, lanes);
        if (lanes > lanes_max) break;
        ckrt_threads_set(reps[rep].threads);
        memset(ws, 0xA5, (size_t)ws_bytes + GUARD);
        ckrt_ctx c;
        memset(&c, 0, sizeof c);
        float *dst = rep ? again : res, *wsf = (float *)ws;
        int rc = kind == FWD ? ckrt_conv(&c, dst, x, w, b, wsf, lanes, g->nsp, g->N, g->C, g->M, g->group, g->in, out_sp,
                                                        g->k, g->st, g->pb, g->dl)
               : kind == BWD_DATA ? ckrt_conv_grad_input(&c, dst, dy, w, wsf, lanes, g->nsp, g->N, g->C, g->M, g->group,
                                                                        g->in, out_sp, g->k, g->st, g->pb, g->dl)
               : ckrt_conv_grad_weight(&c, dst, dy, x, wsf, g->nsp, g->N, g->C, g->M, g->group, g->in, out_sp, g->k, g->st,
                                       g->pb, g->dl);
        ck_assert_msg(rc == CKRT_OK, "kind %d: %s", kind, c.msg);
        for (int i = 0; i < GUARD; i++) ck_assert_msg(ws[ws_bytes + i] == 0xA5, "kind %d wrote past its workspace", kind);
        if (!direct) /* the workspace's last byte is written, whatever the path (measured == planned) */
            ck_assert_msg(memcmp(ws + ws_bytes - 4, "\xA5\xA5\xA5\xA5", 4) != 0, "kind %d, %lld lanes, %d threads: left its workspace's end unwritten",
                          kind, (long long)lanes, reps[rep].threads);
        if (rep)
            ck_assert_msg(memcmp(res, again, sizeof(float) * (size_t)n) == 0, "kind %d: %lld lanes on %d threads differ from 1 lane on 1",
                          kind, (long long)lanes, reps[rep].threads);
    }
    ckrt_threads_set(1);
    free(ws);
    free(again);
}

static void check_geo(const geo *g) {
    int64_t out[3];
    for (int d = 0; d < g->nsp; d++) out[d] = out_of(g, d);
    int64_t Cg = g->C / g->group, taps = prod(g->nsp, g->k);
    int64_t nx = g->N * g->C * prod(g->nsp, g->in), nw = g->M * Cg * taps, ny = g->N * g->M * prod(g->nsp, out);
    float *x = calloc((size_t)nx, 4), *w = calloc((size_t)nw, 4), *b = calloc((size_t)g->M, 4), *dy = calloc((size_t)ny, 4);
    float *y = malloc(4 * (size_t)ny), *dx = malloc(4 * (size_t)nx), *dw = malloc(4 * (size_t)nw);
    double *want = malloc(8 * (size_t)(nx > ny ? (nx > nw ? nx : nw) : (ny > nw ? ny : nw)));
    fill(x, nx, 1), fill(w, nw, 2), fill(b, g->M, 3), fill(dy, ny, 4);
    run_kind(g, out, FWD, y, ny, x, w, g->bias ? b : NULL, dy);
    reference(g, out, want, x, w, g->bias ? b : NULL);
    expect_close("forward", y, want, ny);
    /* the gradients from the forward's linearity: dx[i] = sum_j dy[j] dy_j/dx_i, column by column
     * of the reference would be slow; instead <dy, conv(x', w)> = <dx, x'> for random x' checks
     * dx, and <dy, conv(x, w')> = <dw, w'> checks dw (exact identities of a linear map) */
    run_kind(g, out, BWD_DATA, dx, nx, x, w, NULL, dy);
    run_kind(g, out, 0, dw, nw, x, w, NULL, dy);
    for (int which = 0; which < 2; which++) {
        int64_t np = which ? nw : nx;
        float *probe = malloc(4 * (size_t)np);
        fill(probe, np, 7 + which);
        reference(g, out, want, which ? x : probe, which ? probe : w, NULL);
        double lhs = 0, rhs = 0, mag = 0;
        for (int64_t i = 0; i < ny; i++) lhs += dy[i] * want[i], mag += fabs(dy[i] * want[i]);
        for (int64_t i = 0; i < np; i++) rhs += (double)(which ? dw : dx)[i] * probe[i];
        ck_assert_msg(fabs(lhs - rhs) <= 1e-5 * fmax(1.0, mag), "%s: <dy, J probe> %g vs %g", which ? "weight gradient" : "input gradient",
                      lhs, rhs);
        free(probe);
    }
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(want);
}

static const geo geos[] = {
    {2, 2, 3, 8, 1, {9, 9}, {7, 7}, {2, 2}, {3, 3}, {3, 3}, {1, 1}, 1},      /* a ResNet stem, small */
    {2, 2, 8, 8, 1, {6, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 0},      /* 3x3 same */
    {2, 1, 8, 12, 4, {7, 5}, {3, 2}, {2, 1}, {1, 0}, {2, 1}, {2, 1}, 1},     /* groups, dilation, asymmetric */
    {2, 3, 4, 6, 1, {8, 8}, {1, 1}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, 1},      /* 1x1 stride 2 */
    {2, 2, 4, 6, 1, {5, 5}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 0},      /* 1x1: no column matrix */
    {1, 2, 5, 7, 1, {11}, {3}, {2}, {1}, {2}, {2}, 1},                       /* 1-D */
    {3, 1, 2, 4, 2, {4, 5, 3}, {2, 3, 1}, {1, 2, 1}, {1, 0, 0}, {0, 1, 0}, {1, 1, 1}, 1}, /* 3-D, groups */
    {2, 2, 6, 6, 6, {6, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},      /* depthwise */
    {2, 2, 16, 128, 1, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 0},   /* GEMMs cut in two by rows */
    {2, 2, 8, 32, 1, {16, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},   /* ... by columns */
    {2, 1, 64, 128, 1, {4, 4}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 0},   /* 2x2 output: input gradient as col^T */
    {2, 2, 64, 128, 1, {4, 4}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 0},   /* ... and 2 images per GEMM */
    {2, 10, 32, 128, 1, {6, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1},  /* 3x3 output: 8 images, then 2 */
    {2, 3, 32, 128, 1, {8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 0},   /* 4x4 output: 3 images in one GEMM */
    /* "flat" ones (cpu_conv.h: unit strides, output rows as wide as the input's) */
    {2, 2, 3, 5, 1, {5, 9}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 1},      /* dilated, not square */
    {2, 1, 4, 4, 1, {6, 7}, {3, 3}, {1, 1}, {0, 0}, {2, 2}, {1, 1}, 0},      /* all padding at the end */
    {2, 1, 4, 4, 1, {6, 7}, {3, 3}, {1, 1}, {2, 2}, {0, 0}, {1, 1}, 0},      /* ... at the start */
    {2, 2, 2, 3, 1, {2, 3}, {5, 5}, {1, 1}, {2, 2}, {3, 2}, {1, 1}, 1},      /* taps wholly outside */
    {2, 1, 2, 3, 1, {12, 13}, {12, 12}, {1, 1}, {5, 6}, {6, 5}, {1, 1}, 1},  /* 144 taps: no tap table */
    {2, 2, 2, 4, 2, {1, 6}, {1, 3}, {1, 1}, {0, 1}, {0, 1}, {1, 1}, 0},      /* one row, groups */
    /* the fused kernels (cpu_dense.c conv_cols_block, cpu_train_conv.c wgrad_block): pieces of
     * output positions (forward, more than one thread) or of column-matrix rows (weight gradient)
     * over every image; the 3-thread run above must give the 1-thread bits */
    {2, 2, 8, 16, 1, {32, 33}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1},  /* stride 2: pieces of 80 across rows of 17 */
    {2, 2, 8, 32, 1, {15, 17}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 0},  /* flat, pieces of 96 across rows of 17 */
    {2, 2, 128, 32, 1, {16, 16}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1}, /* 1x1: the image is the column matrix */
    /* lanes (ckrt_conv_batch.h): 4x4 output, batches of 4 images, 4 + 4 + 2: a lane with a short batch */
    {2, 10, 32, 128, 1, {8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1},
    /* 32x32 outputs: column-matrix rows 1040 floats apart (ck_conv_col_ld), lanes whose last row
     * ends the workspace, and the fused forward's blocks at its end */
    {2, 2, 3, 8, 1, {64, 64}, {7, 7}, {2, 2}, {3, 3}, {3, 3}, {1, 1}, 1}, /* ResNet's stem at 64x64 */
    {2, 2, 4, 8, 1, {32, 32}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 0}, /* flat */
};

START_TEST(conv_matches_reference) { check_geo(&geos[_i]); }
END_TEST

/* cpu_conv.h's im2col and col2im against the device bodies, bit for bit, one image group. */
START_TEST(columns_match_bodies) {
    const geo *g = &geos[_i];
    int64_t out[3], Cg = g->C / g->group;
    for (int d = 0; d < g->nsp; d++) out[d] = out_of(g, d);
    int64_t in_n = prod(g->nsp, g->in), rows = Cg * prod(g->nsp, g->k), on = prod(g->nsp, out);
    float *img = malloc(sizeof(float) * (size_t)(Cg * in_n)), *col = malloc(sizeof(float) * (size_t)(rows * on));
    float *img2 = malloc(sizeof(float) * (size_t)(Cg * in_n));
    fill(img, Cg * in_n, 7u + (unsigned)_i);
    ck_conv_geom geom;
    ck_conv_geom_init(&geom, g->nsp, g->in, out, g->k, g->st, g->pb, g->dl);
    geom.col_rs = on; /* dense rows, as the bodies index them (the kernels' padded rows: check_geo) */
    ck_cpu_im2col(col, img, Cg, &geom);
    for (int64_t i = 0; i < rows * on; i++) {
        float want = ck_k_im2col(i, img, g->nsp, g->in, out, g->k, g->st, g->pb, g->dl);
        ck_assert_msg(memcmp(&want, &col[i], sizeof want) == 0, "im2col element %lld: %a vs %a", (long long)i, col[i], want);
    }
    if (g->nsp == 2) /* the fused forward's column ranges (pieces of 7, 1 and all positions) */
        for (int64_t step = 7; step > 0; step = step == 7 ? 1 : step == 1 ? -1 : 0) {
            int64_t step_len = step < 0 ? on : step;
            for (int64_t q = 0; q < on; q += step_len) {
                int64_t q1 = q + step_len < on ? q + step_len : on, len = q1 - q;
                geom.col_rs = len;
                float *piece = col + rows * q; /* the piece's own (rows, len) block, as conv_cols_block */
                for (int64_t i = 0; i < rows * len; i++) piece[i] = NAN;
                ck_cpu_im2col_2d_cols(piece - q, img, rows, q, q1, &geom);
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t j = q; j < q1; j++) {
                        float want = ck_k_im2col(r * on + j, img, g->nsp, g->in, out, g->k, g->st, g->pb, g->dl);
                        ck_assert_msg(memcmp(&want, &piece[r * len + j - q], sizeof want) == 0,
                                      "im2col columns [%lld, %lld) row %lld column %lld: %a vs %a", (long long)q, (long long)q1,
                                      (long long)r, (long long)j, piece[r * len + j - q], want);
                    }
            }
            geom.col_rs = on;
        }
    fill(col, rows * on, 11u + (unsigned)_i);
    for (int64_t i = 0; i < rows * on; i++) col[i] *= 1.0f + 0.001f * (float)(i % 97); /* full mantissas: order shows */
    ck_cpu_col2im(img2, col, Cg, &geom);
    for (int64_t i = 0; i < Cg * in_n; i++) {
        float want = ck_k_col2im(i, col, g->nsp, g->in, out, g->k, g->st, g->pb, g->dl);
        ck_assert_msg(memcmp(&want, &img2[i], sizeof want) == 0, "col2im element %lld: %a vs %a", (long long)i, img2[i], want);
    }
    free(img), free(col), free(img2);
}
END_TEST

/* 2-D pooling (cpu_pool.c) against ck_k_pool / ck_k_pool_grad, bit for bit, indices included, at 1
 * and 3 threads: ties, a NaN, windows half or wholly in the padding, dilation, count_include_pad. */
typedef struct {
    int64_t in[2], k[2], st[2], pb[2], pe[2], dl[2];
} pool_geo;
static const pool_geo pool_geos[] = {
    {{9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},  /* ResNet's 3x3/s2 */
    {{7, 6}, {2, 3}, {2, 1}, {0, 1}, {1, 2}, {1, 2}},  /* asymmetric pads, dilation */
    {{5, 5}, {2, 2}, {3, 3}, {0, 0}, {2, 2}, {1, 1}},  /* ceil mode: last windows partly outside */
    {{4, 4}, {1, 1}, {2, 2}, {0, 0}, {0, 0}, {1, 1}},  /* 1x1 strided */
    {{3, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},  /* every edge window padded */
    {{7, 150}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}}, /* 3x3/s2 rows of 73 inner windows: 64 at once, then 9 */
    {{5, 70}, {3, 2}, {1, 1}, {1, 0}, {1, 1}, {1, 2}},  /* stride 1, dilated columns */
    {{6, 40}, {2, 2}, {3, 3}, {0, 0}, {2, 2}, {1, 1}},  /* stride 3 (no constant-stride copy of the row fold) */
};

static void pool_case(const pool_geo *g, int kind, int cip) {
    int64_t N = 2, C = 3, out[2];
    for (int d = 0; d < 2; d++) out[d] = (g->in[d] + g->pb[d] + g->pe[d] - ((g->k[d] - 1) * g->dl[d] + 1)) / g->st[d] + 1;
    int64_t nx = N * C * g->in[0] * g->in[1], ny = N * C * out[0] * out[1];
    float *x = malloc(sizeof(float) * (size_t)nx), *y = malloc(sizeof(float) * (size_t)ny);
    float *dy = malloc(sizeof(float) * (size_t)ny), *dx = malloc(sizeof(float) * (size_t)nx);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)ny);
    fill(x, nx, 3u), fill(dy, ny, 5u);
    for (int64_t i = 0; i < nx; i += 5) x[i] = 0.25f; /* ties */
    x[nx / 2] = x[nx / 3] = x[7] = NAN; /* a NaN first in a window stays, a later one never replaces */
    ckrt_ctx c;
    memset(&c, 0, sizeof c);
    for (int threads = 1; threads <= 3; threads += 2) {
        ckrt_threads_set(threads);
        ck_assert_int_eq(ckrt_pool(&c, kind, y, NULL, x, 2, N, C, g->in, out, g->k, g->st, g->pb, g->pe, g->dl, cip), CKRT_OK);
        for (int64_t i = 0; i < ny; i++) { /* without indices (a path of its own) */
            float want = ck_k_pool(i, kind, x, 2, g->in, out, g->k, g->st, g->pb, g->pe, g->dl, cip, &(int64_t){0});
            ck_assert_msg(memcmp(&want, &y[i], sizeof want) == 0, "pool %d y[%lld] (no indices): %a vs %a", kind, (long long)i, y[i], want);
        }
        ck_assert_int_eq(ckrt_pool(&c, kind, y, idx, x, 2, N, C, g->in, out, g->k, g->st, g->pb, g->pe, g->dl, cip), CKRT_OK);
        ck_assert_int_eq(ckrt_pool_grad(&c, kind, dx, dy, x, 2, N, C, g->in, out, g->k, g->st, g->pb, g->pe, g->dl, cip), CKRT_OK);
        for (int64_t i = 0; i < ny; i++) {
            int64_t at = -1;
            float want = ck_k_pool(i, kind, x, 2, g->in, out, g->k, g->st, g->pb, g->pe, g->dl, cip, &at);
            ck_assert_msg(memcmp(&want, &y[i], sizeof want) == 0, "pool %d y[%lld]: %a vs %a", kind, (long long)i, y[i], want);
            ck_assert_int_eq(idx[i], at);
        }
        for (int64_t i = 0; i < nx; i++) {
            float want = ck_k_pool_grad(i, kind, dy, x, 2, g->in, out, g->k, g->st, g->pb, g->pe, g->dl, cip);
            ck_assert_msg(memcmp(&want, &dx[i], sizeof want) == 0, "pool %d dx[%lld]: %a vs %a", kind, (long long)i, dx[i], want);
        }
    }
    ckrt_threads_set(1);
    free(x), free(y), free(dy), free(dx), free(idx);
}

START_TEST(pool_matches_bodies) {
    const pool_geo *g = &pool_geos[_i];
    pool_case(g, CKRT_POOL_MAX, 0);
    pool_case(g, CKRT_POOL_AVG, 0);
    pool_case(g, CKRT_POOL_AVG, 1);
}
END_TEST

/* A build with oneDNN runs the GEMMs through it on an AVX2-or-better CPU (a build whose
 * oneDNN silently never ran would pass the test above on OpenBLAS alone). */
START_TEST(dnnl_in_use) {
#ifdef CKRT_HAVE_DNNL
    __builtin_cpu_init();
    ck_assert_msg(ckrt_dnnl_setup() == (__builtin_cpu_supports("avx2") != 0), "oneDNN built in, AVX2 %s, but setup says %d",
                  __builtin_cpu_supports("avx2") ? "present" : "absent", ckrt_dnnl_setup());
    const char *name = ckrt_gemm_name();
    ck_assert_msg(ckrt_dnnl_setup() ? strncmp(name, "oneDNN avx", 10) == 0 : strcmp(name, "OpenBLAS") == 0, "gemm '%s'", name);
    /* no cap of ours: an AVX-512 CPU gets oneDNN's AVX-512 kernels unless its own variable caps them */
    if (__builtin_cpu_supports("avx512f") && !getenv("ONEDNN_MAX_CPU_ISA") && !getenv("DNNL_MAX_CPU_ISA"))
        ck_assert_msg(strstr(name, "avx512") != NULL, "AVX-512 CPU, but gemm '%s'", name);
#else
    ck_assert(!ckrt_dnnl_setup());
    ck_assert_str_eq(ckrt_gemm_name(), "OpenBLAS");
#endif
}
END_TEST

int main(void) {
    Suite *s = suite_create("conv");
    TCase *tc = tcase_create("conv");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, conv_matches_reference, 0, (int)(sizeof geos / sizeof geos[0]));
    tcase_add_loop_test(tc, columns_match_bodies, 0, (int)(sizeof geos / sizeof geos[0]));
    tcase_add_loop_test(tc, pool_matches_bodies, 0, (int)(sizeof pool_geos / sizeof pool_geos[0]));
    tcase_add_test(tc, dnnl_in_use);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
