/* cuda_ops.c — the CUDA backend's op layer: for each ckrt_* kernel entry point (ckrt_ops.h), the
 * launches that compute it on the GPU. Every elementwise, row, channel and window computation is
 * one of the ck_g_* wrappers in the program's kernels.cu (codegen/emit_cuda.c), which call the
 * same bodies (runtime/ckrt_kernels*.h) as the CPU backend; products go to cuBLAS (row-major
 * operands handed to column-major cuBLAS as their transposes); a convolution is cuDNN's where the
 * device layer has it (try_cudnn), else im2col + cuBLAS per image and group, as on the CPU.
 *
 * Determinism: every output element is computed by one thread in a fixed order (no atomics);
 * the loss is summed by one thread in row order; cuBLAS runs on one stream with TF32 off unless
 * --tf32. Checks the CPU backend makes on data (labels, Gather indices) read the indices back to
 * the host first, so errors name the node and the value exactly as on the CPU. One exception:
 * integer division by zero gives 0 here where the CPU reports an error.
 *
 * Every launch goes through a g_NAME launcher generated from the wrapper's one declaration in
 * ckrt_cuda_kernels.h (the one emit_cuda.c writes the wrapper from): arguments that do not match
 * its parameters in number, order or type fail to compile.
 */
#include "cuda_impl.h"
#include "ckrt_kernels_gpu.h"
#include "ckrt_kernels_move.h"
#include "cuda_launch.h"
#include "ckrt_conv_batch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define P(x) ckrt_cu_ptr(c, (x))


static int dims_of(ckrt_ctx *c, int rank, const int64_t *v, ck_dims *out) {
    memset(out, 0, sizeof *out);
    if (rank < 0 || rank > 8) return ckrt_fail(c, CKRT_ERR_INTERNAL, "rank %d exceeds the CUDA kernels' 8", rank);
    for (int k = 0; k < rank; k++) out->v[k] = v[k];
    return CKRT_OK;
}

static int64_t prod(int n, const int64_t *v) {
    int64_t p = 1;
    for (int k = 0; k < n; k++) p *= v[k];
    return p;
}

/* Row-major y (M, N) = alpha op(a) op(b) + beta y, rows lda/ldb/ldc apart, batch entries
 * `s*` elements apart: cuBLAS (column-major) computes y^T = op(b)^T op(a)^T. */
static int row_gemm_ld(ckrt_ctx *c, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, ckrt_dptr a, int64_t lda,
                       int64_t sa, ckrt_dptr b, int64_t ldb, int64_t sb, float beta, ckrt_dptr y, int64_t ldc, int64_t sy,
                       int64_t batch) {
    return ckrt_cu_gemm(c, tb, ta, N, M, K, alpha, b, ldb, sb, a, lda, sa, beta, y, ldc, sy, batch);
}

/* row_gemm_ld on contiguous matrices */
static int row_gemm(ckrt_ctx *c, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, ckrt_dptr a, int64_t sa,
                    ckrt_dptr b, int64_t sb, float beta, ckrt_dptr y, int64_t sy, int64_t batch) {
    return row_gemm_ld(c, ta, tb, M, N, K, alpha, a, ta ? M : K, sa, b, tb ? K : N, sb, beta, y, N, sy, batch);
}

/* ---------------------------------------------------------------- elementwise */

static int cu_binary(ckrt_ctx *c, int op, ckrt_dtype dt, void *y, const void *a, const void *b, int rank, const int64_t *dims,
                     const int64_t *a_strides, const int64_t *b_strides) {
    ck_dims D, SA, SB;
    CKRT_TRY(dims_of(c, rank, dims, &D));
    CKRT_TRY(dims_of(c, rank, a_strides, &SA));
    CKRT_TRY(dims_of(c, rank, b_strides, &SB));
    ckrt_dptr Y = P(y), A = P(a), B = P(b);
    int64_t n = prod(rank, dims);
    int k = (int)dt;
    switch (dt) {
    case CKRT_F32: return g_binary_f32(c, n, &op, &Y, &A, &B, &rank, &D, &SA, &SB);
    case CKRT_F64: return g_binary_f64(c, n, &op, &Y, &A, &B, &rank, &D, &SA, &SB);
    case CKRT_I64: case CKRT_I32: return g_binary_int(c, n, &op, &k, &Y, &A, &B, &rank, &D, &SA, &SB);
    case CKRT_BOOL:
        if (op < CKRT_EQUAL) return ckrt_fail(c, CKRT_ERR_INTERNAL, "binary op %d on bool", op);
        k = CKRT_U8;
        return g_binary_int(c, n, &op, &k, &Y, &A, &B, &rank, &D, &SA, &SB);
    default: return ckrt_fail(c, CKRT_ERR_INTERNAL, "binary op on %s", ckrt_dtype_name(dt));
    }
}

static int cu_unary(ckrt_ctx *c, int op, ckrt_dtype dt, void *y, const void *x, int64_t n, float alpha, float beta) {
    ckrt_dptr Y = P(y), X = P(x);
    int k = (int)dt;
    switch (dt) {
    case CKRT_F32: return g_unary_f32(c, n, &op, &Y, &X, &alpha, &beta);
    case CKRT_I64: case CKRT_I32: return g_unary_int(c, n, &op, &k, &Y, &X);
    case CKRT_BOOL:
        if (op == CKRT_NOT) return g_not(c, n, &Y, &X);
        break;
    default: break;
    }
    return ckrt_fail(c, CKRT_ERR_INTERNAL, "unary op %d on %s", op, ckrt_dtype_name(dt));
}

/* A fused chain: the program by value, its arrays as device addresses (P checks each is in the arena). */
static int cu_fused(ckrt_ctx *c, const ck_fprog *p, const ck_fptrs *q, int64_t n) {
    if (p->n_in < 1 || p->n_in > CK_F_MAX_IN || p->n_ops < 1 || p->n_ops > CK_F_MAX_OPS || p->n_out < 1 ||
        p->n_out > CK_F_MAX_OUT)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "fused program with %d inputs, %d ops, %d outputs", p->n_in, p->n_ops, p->n_out);
    if (n <= 0) return CKRT_OK;
    ck_fprog prog = *p;
    ck_fptrs d = {{0}, {0}};
    for (int k = 0; k < p->n_in; k++) d.in[k] = (const void *)(uintptr_t)P(q->in[k]);
    for (int k = 0; k < p->n_out; k++) d.out[k] = (void *)(uintptr_t)P(q->out[k]);
    return g_fused(c, n, &prog, &d);
}

static int cu_where(ckrt_ctx *c, size_t esz, void *y, const uint8_t *cond, const void *a, const void *b, int rank,
                    const int64_t *dims, const int64_t *cond_strides, const int64_t *a_strides, const int64_t *b_strides) {
    if (esz != 1 && esz != 2 && esz != 4 && esz != 8) return ckrt_fail(c, CKRT_ERR_INTERNAL, "where on %zu-byte elements", esz);
    ck_dims D, SC, SA, SB;
    CKRT_TRY(dims_of(c, rank, dims, &D));
    CKRT_TRY(dims_of(c, rank, cond_strides, &SC));
    CKRT_TRY(dims_of(c, rank, a_strides, &SA));
    CKRT_TRY(dims_of(c, rank, b_strides, &SB));
    ckrt_dptr Y = P(y), C = P(cond), A = P(a), B = P(b);
    int e = (int)esz;
    return g_where(c, prod(rank, dims), &e, &Y, &C, &A, &B, &rank, &D, &SC, &SA, &SB);
}

static int cu_clip(ckrt_ctx *c, ckrt_dtype dt, void *y, const void *x, int64_t n, const void *lo, const void *hi) {
    ckrt_dptr Y = P(y), X = P(x), L = P(lo), H = P(hi);
    int k = (int)dt;
    switch (dt) {
    case CKRT_F32: return g_clip_f32(c, n, &Y, &X, &L, &H);
    case CKRT_F64: return g_clip_f64(c, n, &Y, &X, &L, &H);
    case CKRT_I64: case CKRT_I32: case CKRT_I16: case CKRT_I8: case CKRT_U8: return g_clip_int(c, n, &k, &Y, &X, &L, &H);
    default: return ckrt_fail(c, CKRT_ERR_INTERNAL, "clip on %s", ckrt_dtype_name(dt));
    }
}

static int cu_cast(ckrt_ctx *c, ckrt_dtype to, ckrt_dtype from, void *y, const void *x, int64_t n) {
    for (int k = 0; k < 2; k++) {
        ckrt_dtype t = k ? from : to;
        if (t != CKRT_F32 && t != CKRT_F64 && t != CKRT_I64 && t != CKRT_I32 && t != CKRT_I16 && t != CKRT_I8 &&
            t != CKRT_U8 && t != CKRT_BOOL)
            return ckrt_fail(c, CKRT_ERR_INTERNAL, "cast from %s to %s", ckrt_dtype_name(from), ckrt_dtype_name(to));
    }
    ckrt_dptr Y = P(y), X = P(x);
    int t = (int)to, f = (int)from;
    return g_cast(c, n, &t, &f, &Y, &X);
}

/* ---------------------------------------------------------------- over an axis */

static int cu_softmax(ckrt_ctx *c, int log, float *y, const float *x, int64_t outer, int64_t len, int64_t inner) {
    ckrt_dptr Y = P(y), X = P(x);
    return g_softmax(c, outer * inner, &log, &Y, &X, &len, &inner);
}

/* The split of a long reduction (ckrt_kernels_gpu.h): nout outputs of cnt elements each, `width`
 * doubles per part in the scratch after `extra` doubles of other use. Returns the number of
 * parts (1: no split; run the one-thread-per-output kernel) and their length in *chunk. It
 * depends on the shape and the scratch's size only, so a shape always sums in one order. */
enum { SPLIT_MIN_CHUNK = 64, SPLIT_MAX_PARTS = 4096 };
static int64_t split_parts(ckrt_ctx *c, int64_t nout, int64_t cnt, int width, int64_t extra, int64_t *chunk) {
    int64_t bytes = 0;
    (void)ckrt_cu_scratch(c, &bytes);
    int64_t avail = bytes / 8 - extra, parts = cnt / SPLIT_MIN_CHUNK;
    if (nout < 1 || avail < 1) return 1;
    if (parts > avail / (nout * width)) parts = avail / (nout * width);
    if (parts > SPLIT_MAX_PARTS) parts = SPLIT_MAX_PARTS;
    if (parts < 2) return 1;
    *chunk = (cnt + parts - 1) / parts;
    return (cnt + *chunk - 1) / *chunk;
}

static int cu_layer_norm(ckrt_ctx *c, float *y, float *mean, float *inv_std, const float *x, const float *scale,
                         const float *bias, int64_t rows, int64_t cols, float eps) {
    ckrt_dptr Y = P(y), M = P(mean), I = P(inv_std), X = P(x), S = P(scale), B = P(bias);
    return g_layer_norm(c, rows, &Y, &M, &I, &X, &S, &B, &cols, &eps);
}

static int cu_batch_norm(ckrt_ctx *c, float *y, float *run_mean, float *run_var, float *saved_mean, float *saved_inv_std,
                         const float *x, const float *scale, const float *bias, const float *mean, const float *var, int64_t N,
                         int64_t C, int64_t S, float eps, float momentum, int training, int unbiased) {
    ckrt_dptr Y = P(y), RM = P(run_mean), RV = P(run_var), SM = P(saved_mean), SI = P(saved_inv_std), X = P(x),
              SC = P(scale), B = P(bias), M = P(mean), V = P(var);
    int64_t cnt = N * S, chunk = 0, parts = split_parts(c, C, cnt, 1, 2 * C, &chunk);
    if (training && !c->eval && parts > 1) { /* scratch: the parts, then mu (C doubles), then the float stats (2 C) */
        int64_t bytes = 0;
        ckrt_dptr part = ckrt_cu_scratch(c, &bytes), mu = part + (ckrt_dptr)(8 * C * parts), stat = mu + (ckrt_dptr)(8 * C),
                  none = 0;
        CKRT_TRY(g_bn_part(c, C * parts, &part, &C, &S, &cnt, &chunk, &X, &none));
        CKRT_TRY(g_bn_mean(c, C, &mu, &part, &parts, &cnt));
        CKRT_TRY(g_bn_part(c, C * parts, &part, &C, &S, &cnt, &chunk, &X, &mu));
        CKRT_TRY(g_bn_stats(c, C, &stat, &RM, &RV, &SM, &SI, &mu, &part, &parts, &M, &V, &cnt, &eps, &momentum, &unbiased));
        return g_bn_apply_stat(c, N * C * S, &Y, &X, &SC, &B, &stat, &C, &S);
    }
    if (training && !c->eval) /* eval: as PyTorch's eval(), the running statistics, none updated */
        return g_batch_norm_train(c, C, &Y, &RM, &RV, &SM, &SI, &X, &SC, &B, &M, &V, &N, &C, &S, &eps, &momentum, &unbiased);
    return g_batch_norm_infer(c, N * C * S, &Y, &X, &SC, &B, &M, &V, &C, &S, &eps);
}

static int dropout_launch(ckrt_ctx *c, float *y, uint8_t *mask, const float *x, int64_t n, float ratio, float scale,
                          uint64_t key) {
    ckrt_dptr Y = P(y), M = P(mask), X = P(x);
    uint64_t seed = c->seed, step = ckrt_rng_step(c), first = c->rng_rank * (uint64_t)n;
    return g_dropout(c, (n + 3) / 4, &Y, &M, &X, &n, &ratio, &scale, &seed, &step, &key, &first);
}

static int cu_dropout(ckrt_ctx *c, float *y, uint8_t *mask, const float *x, int64_t n, float ratio, uint64_t key) {
    if (!(ratio >= 0.0f && ratio < 1.0f)) return ckrt_fail(c, CKRT_ERR_DATA, "dropout ratio %g is not in [0, 1)", ratio);
    if (c->eval) ratio = 0.0f; /* eval: the identity */
    return dropout_launch(c, y, mask, x, n, ratio, 1.0f / (1.0f - ratio), key);
}

static int cu_dropout_grad(ckrt_ctx *c, float *dx, const float *dy, int64_t n, float ratio, uint64_t key) {
    return dropout_launch(c, dx, NULL, dy, n, ratio, ratio > 0.0f ? 1.0f / (1.0f - ratio) : 1.0f, key);
}

static int cu_random(ckrt_ctx *c, int kind, ckrt_dtype dt, void *y, const void *p, ckrt_dtype pdt, int64_t n, double a,
                     double b, uint64_t salt, int expect, uint64_t key) {
    if (kind < CKRT_RAND_UNIFORM || kind > CKRT_RAND_BERNOULLI || (kind == CKRT_RAND_BERNOULLI && !p))
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "random op kind %d", kind);
    ckrt_dptr Y = P(y), PP = P(p);
    int to = (int)dt, pd = (int)pdt, ex = expect || c->eval;
    uint64_t seed = c->seed ^ salt, step = ckrt_rng_step(c), first = c->rng_rank * (uint64_t)n;
    return g_random(c, (n + 3) / 4, &kind, &to, &Y, &PP, &pd, &n, &a, &b, &ex, &seed, &step, &key, &first);
}

static int cu_reduce(ckrt_ctx *c, int op, ckrt_dtype dt, void *y, const void *x, int nk, const int64_t *kdims,
                     const int64_t *kstrides, int nr, const int64_t *rdims, const int64_t *rstrides) {
    ck_dims KD, KS, RD, RS;
    CKRT_TRY(dims_of(c, nk, kdims, &KD));
    CKRT_TRY(dims_of(c, nk, kstrides, &KS));
    CKRT_TRY(dims_of(c, nr, rdims, &RD));
    CKRT_TRY(dims_of(c, nr, rstrides, &RS));
    ckrt_dptr Y = P(y), X = P(x);
    int64_t n = prod(nk, kdims);
    int mean = op == CKRT_REDUCE_MEAN, is64 = dt == CKRT_I64;
    int64_t cnt = prod(nr, rdims), chunk = 0, parts = dt == CKRT_F32 ? split_parts(c, n, cnt, 1, 0, &chunk) : 1;
    if (parts > 1) {
        int64_t bytes = 0;
        ckrt_dptr part = ckrt_cu_scratch(c, &bytes);
        CKRT_TRY(g_reduce_part(c, n * parts, &part, &n, &chunk, &X, &nk, &KD, &KS, &nr, &RD, &RS));
        return g_reduce_fin(c, n, &mean, &Y, &part, &parts, &cnt);
    }
    if (dt == CKRT_F32) return g_reduce_f32(c, n, &mean, &Y, &X, &nk, &KD, &KS, &nr, &RD, &RS);
    if ((dt == CKRT_I64 || dt == CKRT_I32) && op == CKRT_REDUCE_SUM)
        return g_reduce_int(c, n, &is64, &Y, &X, &nk, &KD, &KS, &nr, &RD, &RS);
    return ckrt_fail(c, CKRT_ERR_INTERNAL, "reduce op %d on %s", op, ckrt_dtype_name(dt));
}

static int cu_global_avg_pool(ckrt_ctx *c, float *y, const float *x, int64_t nc, int64_t s) {
    ckrt_dptr Y = P(y), X = P(x);
    return g_global_avg_pool(c, nc, &Y, &X, &s);
}

/* ---------------------------------------------------------------- dense */

static int cu_gemm(ckrt_ctx *c, float *y, const float *a, const float *b, const float *cm, int64_t M, int64_t N, int64_t K,
                   int trans_a, int trans_b, float alpha, float beta, int64_t cm_rows, int64_t cm_cols) {
    ckrt_dptr Y = P(y), CM = P(cm);
    float bt = 0.0f;
    if (M * N == 0) return CKRT_OK;
    if (cm && beta != 0.0f) {
        CKRT_TRY(g_gemm_cm(c, M * N, &Y, &CM, &N, &cm_rows, &cm_cols));
        bt = beta;
    }
    if (K == 0) {
        if (bt == 0.0f) return ckrt_cu_memset0(c, Y, M * N * 4);
        return g_scale(c, M * N, &Y, &bt);
    }
    return row_gemm(c, trans_a, trans_b, M, N, K, alpha, P(a), 0, P(b), 0, bt, Y, 0, 1);
}

/* The element stride s with offset(bi) == bi * s for every batch entry, when there is one. */
static int flat_stride(int brank, const int64_t *bdims, const int64_t *st, int64_t *s) {
    int64_t inner = 1, unit = -1;
    for (int k = brank - 1; k >= 0; k--) {
        if (bdims[k] > 1) {
            if (unit < 0) unit = st[k] / inner, *s = unit;
            if (st[k] != unit * inner || (unit == 0 && st[k] != 0)) return 0;
        }
        inner *= bdims[k];
    }
    if (unit < 0) *s = 0;
    return 1;
}

static int cu_matmul(ckrt_ctx *c, float *y, const float *a, const float *b, int64_t M, int64_t N, int64_t K, int brank,
                     const int64_t *bdims, const int64_t *a_bstrides, const int64_t *b_bstrides, const int64_t *y_bstrides,
                     int ta, int64_t lda, int tb, int64_t ldb, int64_t ldc) {
    int64_t batch = prod(brank, bdims);
    if (batch == 0 || M == 0 || N == 0) return CKRT_OK;
    ckrt_dptr Y = P(y), A = P(a), B = P(b);
    int64_t sa = 0, sb = 0, sy = 0;
    bool flat_y = flat_stride(brank, bdims, y_bstrides, &sy);
    if (K == 0) { /* an empty sum: y's rows are zeros */
        if (flat_y && ldc == N && (sy == M * N || batch == 1)) return ckrt_cu_memset0(c, Y, batch * M * N * 4);
        for (int64_t bi = 0; bi < batch; bi++)
            for (int64_t i = 0; i < M; i++)
                CKRT_TRY(ckrt_cu_memset0(c, Y + 4 * (ckrt_dptr)(ck_k_offset(bi, brank, bdims, y_bstrides) + i * ldc), N * 4));
        return CKRT_OK;
    }
    if (flat_y && flat_stride(brank, bdims, a_bstrides, &sa) && flat_stride(brank, bdims, b_bstrides, &sb)) {
        if (!ta && sb == 0 && ((sa == M * lda && sy == M * ldc) || batch == 1)) /* x @ W: one product of batch*M rows */
            return row_gemm_ld(c, ta, tb, batch * M, N, K, 1.0f, A, lda, 0, B, ldb, 0, 0.0f, Y, ldc, 0, 1);
        return row_gemm_ld(c, ta, tb, M, N, K, 1.0f, A, lda, sa, B, ldb, sb, 0.0f, Y, ldc, sy, batch);
    }
    for (int64_t bi = 0; bi < batch; bi++)
        CKRT_TRY(row_gemm_ld(c, ta, tb, M, N, K, 1.0f, A + 4 * (ckrt_dptr)ck_k_offset(bi, brank, bdims, a_bstrides), lda, 0,
                             B + 4 * (ckrt_dptr)ck_k_offset(bi, brank, bdims, b_bstrides), ldb, 0, 0.0f,
                             Y + 4 * (ckrt_dptr)ck_k_offset(bi, brank, bdims, y_bstrides), ldc, 0, 1));
    return CKRT_OK;
}

typedef struct conv_geom {
    ck_dims in_sp, out_sp, k, st, pb, pe, dl;
    int64_t in_n, out_n, taps;
    int direct; /* 1x1, no begin padding, output as large as the input: x is its own column matrix */
} conv_geom;

static int geom(ckrt_ctx *c, int nsp, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k, const int64_t *strides,
                const int64_t *pads_begin, const int64_t *pads_end, const int64_t *dilations, conv_geom *g) {
    CKRT_TRY(dims_of(c, nsp, in_sp, &g->in_sp));
    CKRT_TRY(dims_of(c, nsp, out_sp, &g->out_sp));
    CKRT_TRY(dims_of(c, nsp, k, &g->k));
    CKRT_TRY(dims_of(c, nsp, strides, &g->st));
    CKRT_TRY(dims_of(c, nsp, pads_begin, &g->pb));
    if (pads_end) CKRT_TRY(dims_of(c, nsp, pads_end, &g->pe));
    CKRT_TRY(dims_of(c, nsp, dilations, &g->dl));
    g->in_n = prod(nsp, in_sp), g->out_n = prod(nsp, out_sp), g->taps = prod(nsp, k);
    g->direct = 1;
    for (int d = 0; d < nsp; d++) g->direct = g->direct && k[d] == 1 && pads_begin[d] == 0 && in_sp[d] == out_sp[d];
    return CKRT_OK;
}

static int im2col(ckrt_ctx *c, ckrt_dptr col, ckrt_dptr img, int64_t Cg, int nsp, conv_geom *g) {
    return g_im2col(c, Cg * g->taps * g->out_n, &col, &img, &nsp, &g->in_sp, &g->out_sp, &g->k, &g->st, &g->pb, &g->dl);
}

/* The planned workspace holds B images' columns and a staging matrix where the CPU batches
 * images, `lanes` times over where the CPU runs lanes (ckrt_conv_batch.h); the GPU runs one
 * image at a time in its first R out_n floats and clears the rest, so that the measured peak
 * (the highest byte written) is the planned one. */
static int ws_tail(ckrt_ctx *c, int kind, ckrt_dptr ws, int64_t lanes, int64_t N, int64_t group, int64_t Mg, int64_t R, int64_t out_n) {
    int64_t floats = ck_conv_ws_floats(lanes, ck_conv_batch(kind, N, group, Mg, R, out_n), Mg, R, out_n);
    if (floats == R * out_n) return CKRT_OK;
    return ckrt_cu_memset0(c, ws + 4 * (ckrt_dptr)(R * out_n), (floats - R * out_n) * 4);
}

/* The whole convolution through cuDNN when the device layer has it (ckrt_cu_conv): its algorithm
 * may use at most one image's column matrix (R out_n floats, what every plan gives a convolution
 * that is not direct; 0 for a direct one), a bound from the geometry alone so that a convolution
 * gets the same algorithm, hence the same bits, in every program. The planned workspace's last
 * float is then written, so that the measured peak is the planned one whatever cuDNN used. */
static int try_cudnn(ckrt_ctx *c, int kind, const conv_geom *g, int nsp, int64_t N, int64_t C, int64_t M, int64_t group,
                     const int64_t *in_sp, const int64_t *out_sp, const int64_t *k, const int64_t *strides, const int64_t *pads_begin,
                     const int64_t *dilations, ckrt_dptr out, ckrt_dptr a, ckrt_dptr b, ckrt_dptr ws, int64_t lanes, int *done) {
    ckrt_cu_conv_geom cg = {nsp, N, C, M, group, in_sp, out_sp, k, strides, pads_begin, dilations};
    int64_t Mg = M / group, R = C / group * g->taps;
    CKRT_TRY(ckrt_cu_conv(c, kind, &cg, out, a, b, ws, g->direct ? 0 : 4 * R * g->out_n, done));
    if (!*done || g->direct || !ws) return CKRT_OK;
    int64_t floats = ck_conv_ws_floats(lanes, ck_conv_batch(kind, N, group, Mg, R, g->out_n), Mg, R, g->out_n);
    return ckrt_cu_memset0(c, ws + 4 * (ckrt_dptr)(floats - 1), 4);
}

static int cu_conv(ckrt_ctx *c, float *y, const float *x, const float *w, const float *b, float *ws, int64_t lanes, int nsp, int64_t N,
                   int64_t C, int64_t M, int64_t group, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                   const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations) {
    conv_geom g;
    CKRT_TRY(geom(c, nsp, in_sp, out_sp, k, strides, pads_begin, NULL, dilations, &g));
    if (N * M * g.out_n == 0) return CKRT_OK; /* an empty output: no GEMM (cuBLAS refuses a leading dimension of 0) */
    /* ckrt_conv's direct case also needs unit strides; with in == out and k == 1 they are */
    if (!g.direct && !ws) return ckrt_fail(c, CKRT_ERR_INTERNAL, "conv needs a workspace but none was planned");
    int64_t Cg = C / group, Mg = M / group, R = Cg * g.taps;
    ckrt_dptr X = P(x), Y = P(y), W = P(w), B = P(b), WS = P(ws);
    int done = 0;
    CKRT_TRY(try_cudnn(c, CK_CONV_FWD, &g, nsp, N, C, M, group, in_sp, out_sp, k, strides, pads_begin, dilations, Y, X, W, WS, lanes,
                       &done));
    if (done) {
        for (int64_t n = 0; b && n < N; n++) {
            ckrt_dptr yn = Y + 4 * (ckrt_dptr)(n * M * g.out_n);
            CKRT_TRY(g_bias_add(c, M * g.out_n, &yn, &B, &g.out_n));
        }
        return CKRT_OK;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < group; gi++) {
            ckrt_dptr img = X + 4 * (ckrt_dptr)((n * C + gi * Cg) * g.in_n), yg = Y + 4 * (ckrt_dptr)((n * M + gi * Mg) * g.out_n);
            ckrt_dptr col = img;
            if (!g.direct) {
                CKRT_TRY(im2col(c, WS, img, Cg, nsp, &g));
                col = WS;
            }
            if (R == 0) CKRT_TRY(ckrt_cu_memset0(c, yg, Mg * g.out_n * 4));
            else CKRT_TRY(row_gemm(c, 0, 0, Mg, g.out_n, R, 1.0f, W + 4 * (ckrt_dptr)(gi * Mg * R), 0, col, 0, 0.0f, yg, 0, 1));
            if (b) {
                ckrt_dptr bg = B + 4 * (ckrt_dptr)(gi * Mg);
                CKRT_TRY(g_bias_add(c, Mg * g.out_n, &yg, &bg, &g.out_n));
            }
        }
    return g.direct ? CKRT_OK : ws_tail(c, CK_CONV_FWD, WS, lanes, N, group, Mg, R, g.out_n);
}

static int cu_pool(ckrt_ctx *c, int kind, float *y, int64_t *indices, const float *x, int nsp, int64_t N, int64_t C,
                   const int64_t *in_sp, const int64_t *out_sp, const int64_t *k, const int64_t *strides,
                   const int64_t *pads_begin, const int64_t *pads_end, const int64_t *dilations, int count_include_pad) {
    if (kind != CKRT_POOL_MAX && kind != CKRT_POOL_AVG) return ckrt_fail(c, CKRT_ERR_INTERNAL, "pool kind %d", kind);
    conv_geom g;
    CKRT_TRY(geom(c, nsp, in_sp, out_sp, k, strides, pads_begin, pads_end, dilations, &g));
    ckrt_dptr Y = P(y), I = P(indices), X = P(x);
    return g_pool(c, N * C * g.out_n, &kind, &Y, &I, &X, &nsp, &g.in_sp, &g.out_sp, &g.k, &g.st, &g.pb, &g.pe, &g.dl,
                  &count_include_pad);
}

/* ---------------------------------------------------------------- data movement */

static int cu_strided_copy(ckrt_ctx *c, size_t esz, void *y, const void *x, int rank, const int64_t *out_dims,
                           const int64_t *in_strides, int64_t base) {
    ck_dims D, S;
    CKRT_TRY(dims_of(c, rank, out_dims, &D));
    CKRT_TRY(dims_of(c, rank, in_strides, &S));
    ckrt_dptr Y = P(y), X = P(x);
    int e = (int)esz;
    return g_strided_copy(c, prod(rank, out_dims), &e, &Y, &X, &rank, &D, &S, &base);
}

static int split_copy(ckrt_ctx *c, size_t esz, int to_whole, ckrt_dptr whole, ckrt_dptr part, int64_t len, int64_t start,
                      int64_t total, int64_t outer, int64_t inner) {
    int e = (int)esz;
    return g_split_copy(c, outer * len * inner, &e, &to_whole, &whole, &part, &len, &start, &total, &inner);
}

static int cu_concat(ckrt_ctx *c, size_t esz, void *y, int n, const void *const *xs, const int64_t *lens, int64_t outer,
                     int64_t inner) {
    int64_t total = 0, start = 0;
    for (int k = 0; k < n; k++) total += lens[k];
    for (int k = 0; k < n; start += lens[k], k++)
        CKRT_TRY(split_copy(c, esz, 1, P(y), P(xs[k]), lens[k], start, total, outer, inner));
    return CKRT_OK;
}

static int cu_split(ckrt_ctx *c, size_t esz, int n, void *const *ys, const int64_t *lens, const void *x, int64_t outer,
                    int64_t inner) {
    int64_t total = 0, start = 0;
    for (int k = 0; k < n; k++) total += lens[k];
    for (int k = 0; k < n; start += lens[k], k++)
        if (ys[k]) CKRT_TRY(split_copy(c, esz, 0, P(x), P(ys[k]), lens[k], start, total, outer, inner));
    return CKRT_OK;
}

/* Reads the indices back and fails on the first one out of [-len, len), as the CPU does. */
static int check_indices(ckrt_ctx *c, const void *idx, ckrt_dtype idx_dt, int64_t n_idx, int64_t len) {
    if (idx_dt != CKRT_I64 && idx_dt != CKRT_I32)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "Gather indices of dtype %s", ckrt_dtype_name(idx_dt));
    if (n_idx <= 0) return CKRT_OK;
    size_t esz = ckrt_dtype_size(idx_dt);
    void *h = malloc(esz * (size_t)n_idx);
    if (!h) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate %lld indices", (long long)n_idx);
    int rc = ckrt_cu_read(c, h, P(idx), (int64_t)esz * n_idx);
    int i64 = idx_dt == CKRT_I64;
    for (int64_t j = 0; !rc && j < n_idx; j++)
        if (ck_k_gather_index(h, i64, j, len) < 0) {
            long long v = i64 ? (long long)((const int64_t *)h)[j] : (long long)((const int32_t *)h)[j];
            rc = ckrt_fail(c, CKRT_ERR_DATA, "Gather index %lld (position %lld of the indices) is out of range [%lld, %lld)", v,
                           (long long)j, -(long long)len, (long long)len);
        }
    free(h);
    return rc;
}

static int cu_gather(ckrt_ctx *c, size_t esz, void *y, const void *x, const void *idx, ckrt_dtype idx_dt, int64_t outer,
                     int64_t len, int64_t inner, int64_t n_idx) {
    CKRT_TRY(check_indices(c, idx, idx_dt, n_idx, len));
    ckrt_dptr Y = P(y), X = P(x), I = P(idx);
    int e = (int)esz, i64 = idx_dt == CKRT_I64;
    return g_gather(c, outer * n_idx * inner, &e, &Y, &X, &I, &i64, &len, &inner, &n_idx);
}

static int cu_trilu(ckrt_ctx *c, size_t esz, void *y, const void *x, int64_t batch, int64_t rows, int64_t cols, int64_t k,
                    int upper) {
    ckrt_dptr Y = P(y), X = P(x);
    int e = (int)esz;
    return g_trilu(c, batch * rows * cols, &e, &Y, &X, &rows, &cols, &k, &upper);
}

static int cu_fill(ckrt_ctx *c, size_t esz, void *y, const void *value, int64_t n) {
    ck_value16 v;
    if (esz > sizeof v) return ckrt_fail(c, CKRT_ERR_INTERNAL, "fill with %zu-byte elements", esz);
    memset(&v, 0, sizeof v);
    memcpy(&v, value, esz); /* the value is a host literal in the generated code */
    ckrt_dptr Y = P(y);
    int e = (int)esz;
    return g_fill(c, n, &e, &Y, &v);
}

static int cu_range(ckrt_ctx *c, ckrt_dtype dt, void *y, const void *start, const void *delta, int64_t n) {
    if (dt != CKRT_F32 && dt != CKRT_F64 && dt != CKRT_I64 && dt != CKRT_I32)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "Range of dtype %s", ckrt_dtype_name(dt));
    ckrt_dptr Y = P(y), S = P(start), D = P(delta);
    int k = (int)dt;
    return g_range(c, n, &k, &Y, &S, &D);
}

/* ---------------------------------------------------------------- training */

static int check_labels(ckrt_ctx *c, const void *labels, ckrt_dtype dt, int64_t rows, int64_t classes) {
    size_t esz = dt == CKRT_I64 ? 8 : 4;
    void *h = malloc(esz * (size_t)(rows ? rows : 1));
    if (!h) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate %lld labels", (long long)rows);
    int rc = ckrt_cu_read(c, h, P(labels), (int64_t)esz * rows);
    for (int64_t r = 0; !rc && r < rows; r++) {
        int64_t l = dt == CKRT_I64 ? ((const int64_t *)h)[r] : ((const int32_t *)h)[r];
        if (l < 0 || l >= classes)
            rc = ckrt_fail(c, CKRT_ERR_DATA, "label %lld at position %lld is out of range [0, %lld)", (long long)l, (long long)r,
                           (long long)classes);
    }
    free(h);
    return rc;
}

static int cu_cross_entropy(ckrt_ctx *c, float *loss, const float *logits, const void *labels, ckrt_dtype label_dt,
                            int64_t rows, int64_t classes) {
    CKRT_TRY(check_labels(c, labels, label_dt, rows, classes));
    int64_t bytes = 0;
    ckrt_dptr acc = ckrt_cu_scratch(c, &bytes), vals = acc + 8, L = P(loss), G = P(logits), Lb = P(labels), none = 0;
    int64_t chunk = bytes / 8 - 1;
    if (chunk < 1) return ckrt_fail(c, CKRT_ERR_INTERNAL, "no scratch for the loss");
    int i64 = label_dt == CKRT_I64;
    if (rows == 0) return ckrt_fail(c, CKRT_ERR_INTERNAL, "cross entropy over 0 rows");
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        int64_t cnt = rows - r0 < chunk ? rows - r0 : chunk;
        int first = r0 == 0;
        CKRT_TRY(g_xent_rows(c, cnt, &vals, &r0, &G, &Lb, &i64, &classes));
        CKRT_TRY(g_xent_accum(c, 1, &acc, &vals, &cnt, &first, r0 + cnt >= rows ? &L : &none, &rows));
    }
    return CKRT_OK;
}

static int cu_cross_entropy_grad(ckrt_ctx *c, float *dx, const float *dloss, const float *logits, const void *labels,
                                 ckrt_dtype label_dt, int64_t rows, int64_t classes) {
    CKRT_TRY(check_labels(c, labels, label_dt, rows, classes));
    ckrt_dptr DX = P(dx), DL = P(dloss), G = P(logits), Lb = P(labels);
    int i64 = label_dt == CKRT_I64;
    return g_xent_grad(c, rows, &DX, &DL, &G, &Lb, &i64, &rows, &classes);
}

static int cu_unary_grad(ckrt_ctx *c, int op, float *dx, const float *dy, const float *x, int64_t n, float alpha, float beta,
                         float lo, float hi) {
    ckrt_dptr DX = P(dx), DY = P(dy), X = P(x);
    return g_unary_grad(c, n, &op, &DX, &DY, &X, &alpha, &beta, &lo, &hi);
}

static int cu_softmax_grad(ckrt_ctx *c, int log_sm, float *dx, const float *dy, const float *y, int64_t outer, int64_t len,
                           int64_t inner) {
    ckrt_dptr DX = P(dx), DY = P(dy), Y = P(y);
    return g_softmax_grad(c, outer * inner, &log_sm, &DX, &DY, &Y, &len, &inner);
}

static int cu_layer_norm_grad(ckrt_ctx *c, float *dx, float *dscale, float *dbias, const float *dy, const float *x,
                              const float *scale, const float *mean, const float *inv_std, int64_t rows, int64_t cols) {
    ckrt_dptr DX = P(dx), DS = P(dscale), DB = P(dbias), DY = P(dy), X = P(x), S = P(scale), M = P(mean), I = P(inv_std);
    if (dx) CKRT_TRY(g_layer_norm_grad_row(c, rows, &DX, &DY, &X, &S, &M, &I, &cols));
    int64_t chunk = 0, parts = dscale || dbias ? split_parts(c, cols, rows, 2, 0, &chunk) : 1;
    if (parts > 1) {
        int64_t bytes = 0;
        ckrt_dptr part = ckrt_cu_scratch(c, &bytes);
        CKRT_TRY(g_lng_part(c, cols * parts, &part, &cols, &rows, &chunk, &DY, &X, &M, &I));
        CKRT_TRY(g_lng_fin(c, cols, &DS, &DB, &part, &parts));
    } else if (dscale || dbias) {
        CKRT_TRY(g_layer_norm_grad_col(c, cols, &DS, &DB, &DY, &X, &M, &I, &rows, &cols));
    }
    return CKRT_OK;
}

static int cu_batch_norm_grad(ckrt_ctx *c, float *dx, float *dscale, float *dbias, const float *dy, const float *x,
                              const float *scale, const float *mean, const float *inv_std, int64_t N, int64_t C, int64_t S) {
    ckrt_dptr DX = P(dx), DS = P(dscale), DB = P(dbias), DY = P(dy), X = P(x), SC = P(scale), M = P(mean), I = P(inv_std);
    int64_t cnt = N * S, chunk = 0, parts = split_parts(c, C, cnt, 2, 2 * C, &chunk);
    if (parts > 1) { /* scratch: the parts (2 doubles each), then the coefficients (2 C) */
        int64_t bytes = 0;
        ckrt_dptr part = ckrt_cu_scratch(c, &bytes), coef = part + (ckrt_dptr)(16 * C * parts);
        CKRT_TRY(g_bng_part(c, C * parts, &part, &C, &S, &cnt, &chunk, &DY, &X, &M, &I));
        CKRT_TRY(g_bng_fin(c, C, &DS, &DB, &coef, &part, &parts, &cnt));
        return dx ? g_bng_dx(c, N * C * S, &DX, &DY, &X, &SC, &M, &I, &coef, &C, &S) : CKRT_OK;
    }
    return g_batch_norm_grad(c, C, &DX, &DS, &DB, &DY, &X, &SC, &M, &I, &N, &C, &S);
}

static int cu_batch_norm_apply(ckrt_ctx *c, float *y, const float *x, const float *scale, const float *bias, const float *mean,
                               const float *inv_std, int64_t N, int64_t C, int64_t S) {
    ckrt_dptr Y = P(y), X = P(x), SC = P(scale), B = P(bias), M = P(mean), I = P(inv_std);
    return g_batch_norm_apply(c, N * C * S, &Y, &X, &SC, &B, &M, &I, &C, &S);
}

/* ckptc --grad-accum, --grad-accum K > 1: the first K - 1 micro-batches only accumulate (as the CPU) */
static bool cu_accumulating(ckrt_ctx *c, float *acc, const float *g, int64_t n, int *rc) {
    if (!acc || c->accum <= 1 || c->micro + 1 >= c->accum) return false;
    ckrt_dptr A = P(acc), G = P(g);
    int first = c->micro == 0;
    *rc = g_grad_accum(c, n, &A, &G, &first);
    return true;
}

static int cu_sgd(ckrt_ctx *c, float *p, const float *g, float *buf, float *acc, int64_t n, float lr, float momentum, float wd) {
    int rc = CKRT_OK;
    if (cu_accumulating(c, acc, g, n, &rc)) return rc;
    ckrt_dptr Pp = P(p), G = P(g), B = P(buf), A = P(c->accum > 1 ? acc : NULL);
    float gs = c->grad_scale;
    lr *= c->lr_scale;
    return g_sgd(c, n, &Pp, &G, &B, &A, &gs, &lr, &momentum, &wd);
}

static int cu_adamw(ckrt_ctx *c, float *p, const float *g, float *m, float *v, float *acc, int64_t n, float lr, float b1, float b2,
                    float eps, float wd) {
    int rc = CKRT_OK;
    if (cu_accumulating(c, acc, g, n, &rc)) return rc;
    /* the bias corrections exactly as the CPU computes them */
    float bc1 = (float)(1.0 - pow((double)b1, (double)c->step)), bc2 = (float)(1.0 - pow((double)b2, (double)c->step));
    ckrt_dptr Pp = P(p), G = P(g), M = P(m), V = P(v), A = P(c->accum > 1 ? acc : NULL);
    float gs = c->grad_scale;
    lr *= c->lr_scale;
    return g_adamw(c, n, &Pp, &G, &M, &V, &A, &gs, &lr, &b1, &b2, &eps, &wd, &bc1, &bc2);
}

static int cu_conv_grad_input(ckrt_ctx *c, float *dx, const float *dy, const float *w, float *ws, int64_t lanes, int nsp, int64_t N, int64_t C,
                              int64_t M, int64_t group, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                              const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations) {
    conv_geom g;
    CKRT_TRY(geom(c, nsp, in_sp, out_sp, k, strides, pads_begin, NULL, dilations, &g));
    int64_t Cg = C / group, Mg = M / group, R = Cg * g.taps;
    ckrt_dptr DX = P(dx), DY = P(dy), W = P(w), WS = P(ws);
    if (N * C * g.in_n == 0) return CKRT_OK;
    if (g.out_n == 0 || Mg == 0 || g.taps == 0) return ckrt_cu_memset0(c, DX, N * C * g.in_n * 4);
    if (!g.direct && !ws) return ckrt_fail(c, CKRT_ERR_INTERNAL, "conv gradient needs a workspace but none was planned");
    int done = 0;
    CKRT_TRY(try_cudnn(c, CK_CONV_DGRAD, &g, nsp, N, C, M, group, in_sp, out_sp, k, strides, pads_begin, dilations, DX, DY, W, WS,
                       lanes, &done));
    if (done) return CKRT_OK;
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < group; gi++) {
            ckrt_dptr dxg = DX + 4 * (ckrt_dptr)((n * C + gi * Cg) * g.in_n), dyg = DY + 4 * (ckrt_dptr)((n * M + gi * Mg) * g.out_n);
            ckrt_dptr col = g.direct ? dxg : WS;
            /* col (R, out_n) = w_g^T (R, Mg) @ dy_g (Mg, out_n) */
            CKRT_TRY(row_gemm(c, 1, 0, R, g.out_n, Mg, 1.0f, W + 4 * (ckrt_dptr)(gi * Mg * R), 0, dyg, 0, 0.0f, col, 0, 1));
            if (!g.direct)
                CKRT_TRY(g_col2im(c, Cg * g.in_n, &dxg, &col, &nsp, &g.in_sp, &g.out_sp, &g.k, &g.st, &g.pb, &g.dl));
        }
    return g.direct ? CKRT_OK : ws_tail(c, CK_CONV_DGRAD, WS, lanes, N, group, Mg, R, g.out_n);
}

static int cu_conv_grad_weight(ckrt_ctx *c, float *dw, const float *dy, const float *x, float *ws, int nsp, int64_t N, int64_t C,
                               int64_t M, int64_t group, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                               const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations) {
    conv_geom g;
    CKRT_TRY(geom(c, nsp, in_sp, out_sp, k, strides, pads_begin, NULL, dilations, &g));
    int64_t Cg = C / group, Mg = M / group, R = Cg * g.taps;
    ckrt_dptr DW = P(dw), DY = P(dy), X = P(x), WS = P(ws);
    if (M * R == 0) return CKRT_OK;
    if (N == 0 || g.out_n == 0) return ckrt_cu_memset0(c, DW, M * R * 4);
    if (!g.direct && !ws) return ckrt_fail(c, CKRT_ERR_INTERNAL, "conv gradient needs a workspace but none was planned");
    int done = 0;
    CKRT_TRY(try_cudnn(c, CK_CONV_WGRAD, &g, nsp, N, C, M, group, in_sp, out_sp, k, strides, pads_begin, dilations, DW, DY, X, WS, 1,
                       &done));
    if (done) return CKRT_OK;
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < group; gi++) {
            ckrt_dptr img = X + 4 * (ckrt_dptr)((n * C + gi * Cg) * g.in_n), dyg = DY + 4 * (ckrt_dptr)((n * M + gi * Mg) * g.out_n);
            ckrt_dptr col = img;
            if (!g.direct) {
                CKRT_TRY(im2col(c, WS, img, Cg, nsp, &g));
                col = WS;
            }
            /* dw_g (Mg, R) (+)= dy_g (Mg, out_n) @ col^T (out_n, R), images in order */
            CKRT_TRY(row_gemm(c, 0, 1, Mg, R, g.out_n, 1.0f, dyg, 0, col, 0, n == 0 ? 0.0f : 1.0f,
                              DW + 4 * (ckrt_dptr)(gi * Mg * R), 0, 1));
        }
    return g.direct ? CKRT_OK : ws_tail(c, CK_CONV_WGRAD, WS, 1, N, group, Mg, R, g.out_n);
}

static int cu_pool_grad(ckrt_ctx *c, int kind, float *dx, const float *dy, const float *x, int nsp, int64_t N, int64_t C,
                        const int64_t *in_sp, const int64_t *out_sp, const int64_t *k, const int64_t *strides,
                        const int64_t *pads_begin, const int64_t *pads_end, const int64_t *dilations, int count_include_pad) {
    if (kind != CKRT_POOL_MAX && kind != CKRT_POOL_AVG) return ckrt_fail(c, CKRT_ERR_INTERNAL, "pool gradient kind %d", kind);
    conv_geom g;
    CKRT_TRY(geom(c, nsp, in_sp, out_sp, k, strides, pads_begin, pads_end, dilations, &g));
    ckrt_dptr DX = P(dx), DY = P(dy), X = P(x);
    int kk = kind == CKRT_POOL_MAX ? 0 : 1;
    return g_pool_grad(c, N * C * g.in_n, &kk, &DX, &DY, &X, &nsp, &g.in_sp, &g.out_sp, &g.k, &g.st, &g.pb, &g.pe, &g.dl,
                  &count_include_pad);
}

static int cu_gather_grad(ckrt_ctx *c, float *dx, const float *dy, const void *idx, ckrt_dtype idx_dt, int64_t outer, int64_t len,
                          int64_t inner, int64_t n_idx) {
    CKRT_TRY(check_indices(c, idx, idx_dt, n_idx, len));
    ckrt_dptr DX = P(dx), DY = P(dy), I = P(idx);
    int i64 = idx_dt == CKRT_I64;
    return g_gather_grad(c, outer * inner, &DX, &DY, &I, &i64, &len, &inner, &n_idx);
}

static int cu_slice_grad(ckrt_ctx *c, size_t esz, void *dx, const void *dy, int rank, const int64_t *dy_dims,
                         const int64_t *dx_strides, int64_t base, int64_t dx_n) {
    ck_dims D, S;
    CKRT_TRY(dims_of(c, rank, dy_dims, &D));
    CKRT_TRY(dims_of(c, rank, dx_strides, &S));
    ckrt_dptr DX = P(dx), DY = P(dy);
    int e = (int)esz;
    CKRT_TRY(ckrt_cu_memset0(c, DX, (int64_t)esz * dx_n));
    return g_slice_grad(c, prod(rank, dy_dims), &e, &DX, &DY, &rank, &D, &S, &base);
}

static int cu_pad(ckrt_ctx *c, size_t esz, void *y, const void *x, int rank, const int64_t *in_dims, const int64_t *out_dims,
                  const int64_t *begin, int mode, const void *value) {
    ck_dims I, O, B;
    ck_value16 v;
    if (esz > sizeof v) return ckrt_fail(c, CKRT_ERR_INTERNAL, "pad with %zu-byte elements", esz);
    memset(&v, 0, sizeof v);
    memcpy(&v, value, esz); /* a host literal in the generated code */
    CKRT_TRY(dims_of(c, rank, in_dims, &I));
    CKRT_TRY(dims_of(c, rank, out_dims, &O));
    CKRT_TRY(dims_of(c, rank, begin, &B));
    ckrt_dptr Y = P(y), X = P(x);
    int e = (int)esz;
    return g_pad(c, prod(rank, out_dims), &e, &Y, &X, &rank, &I, &O, &B, &mode, &v);
}

static int cu_pad_grad(ckrt_ctx *c, float *dx, const float *dy, int rank, const int64_t *in_dims, const int64_t *out_dims,
                       const int64_t *begin, int mode) {
    ck_dims I, O, B;
    CKRT_TRY(dims_of(c, rank, in_dims, &I));
    CKRT_TRY(dims_of(c, rank, out_dims, &O));
    CKRT_TRY(dims_of(c, rank, begin, &B));
    ckrt_dptr DX = P(dx), DY = P(dy);
    return g_pad_grad(c, prod(rank, in_dims), &DX, &DY, &rank, &I, &O, &B, &mode);
}

/* ScatterND, GatherND: the indices are read back and checked as on the CPU first. */
static int cu_nd_check(ckrt_ctx *c, const int64_t *idx, int k, const int64_t *dims, int64_t n) {
    if (n <= 0 || k <= 0) return CKRT_OK;
    int64_t *h = malloc(sizeof(int64_t) * (size_t)(n * k));
    if (!h) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate %lld indices", (long long)(n * k));
    int rc = ckrt_cu_read(c, h, P(idx), (int64_t)sizeof(int64_t) * n * k);
    if (!rc) rc = ckrt_nd_check(c, h, k, dims, n);
    free(h);
    return rc;
}

static int cu_scatter_nd(ckrt_ctx *c, size_t esz, int reduction, void *y, const void *data, const int64_t *idx, const void *upd,
                         int k, const int64_t *dims, int64_t n_upd, int64_t inner, int64_t data_n) {
    CKRT_TRY(cu_nd_check(c, idx, k, dims, n_upd));
    if (reduction != CKRT_SCATTER_NONE && esz != sizeof(float))
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "ScatterND reduction %d on %zu-byte elements", reduction, esz);
    int64_t one = 1;
    if (y != data) CKRT_TRY(cu_strided_copy(c, esz, y, data, 1, &data_n, &one, 0));
    ck_dims D;
    CKRT_TRY(dims_of(c, k, dims, &D));
    ckrt_dptr Y = P(y), U = P(upd), I = P(idx);
    int e = (int)esz;
    return g_scatter_nd(c, n_upd ? inner : 0, &e, &reduction, &Y, &U, &I, &n_upd, &k, &D, &inner);
}

static int cu_gather_nd(ckrt_ctx *c, size_t esz, void *y, const void *x, const int64_t *idx, int k, const int64_t *dims,
                        int64_t n_idx, int64_t inner) {
    CKRT_TRY(cu_nd_check(c, idx, k, dims, n_idx));
    ck_dims D;
    CKRT_TRY(dims_of(c, k, dims, &D));
    ckrt_dptr Y = P(y), X = P(x), I = P(idx);
    int e = (int)esz;
    return g_gather_nd(c, n_idx * inner, &e, &Y, &X, &I, &k, &D, &inner);
}

/* Only on the rerun after a non-finite loss: the values are read back and checked here. */
static int cu_check_finite(ckrt_ctx *c, const float *x, int64_t n) {
    float *h = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!h) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate %lld floats", (long long)n);
    int rc = ckrt_cu_read(c, h, P(x), 4 * n);
    for (int64_t i = 0; !rc && i < n; i++)
        if (!isfinite(h[i]))
            rc = ckrt_fail(c, CKRT_ERR_DATA, "produced a non-finite value (%g at element %lld)", (double)h[i], (long long)i);
    free(h);
    return rc;
}

static int cu_rank_mean(ckrt_ctx *c, float *out, const float *recv, int64_t count, int ranks) {
    if (count <= 0) return CKRT_OK;
    ckrt_dptr O = P(out), R = P(recv);
    return g_rank_mean(c, count, &O, &R, &count, &ranks);
}

static int cu_copy_f32(ckrt_ctx *c, float *dst, const float *src, int64_t n) {
    if (n <= 0) return CKRT_OK;
    ckrt_dptr Y = P(dst), X = P(src);
    return g_copy_f32(c, n, &Y, &X);
}

const ckrt_device_ops ckrt_cuda_ops = {
#define CKRT_CUDA_OP_(name) .name = cu_##name,
    CKRT_DEVICE_OPS(CKRT_CUDA_OP_)
#undef CKRT_CUDA_OP_
};
