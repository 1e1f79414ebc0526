/* ckrt_ops.h — the kernel entry points generated code calls, one family per op kernel column
 * of ckptc's ops.def (binary, unary, gemm, conv, ...). Included by ckrt.h.
 *
 * Conventions: the context comes first, then outputs, then inputs, then sizes. Shapes are
 * resolved at compile time into the few numbers a kernel needs (outer/axis/inner splits, stride
 * arrays with 0 for broadcast axes), so kernels do no shape logic. All pointers are into the
 * arena. Every entry returns CKRT_OK or an error code with c->msg set; kernels that cannot fail
 * still return CKRT_OK so every call site looks the same.
 */
#ifndef CKRT_OPS_H
#define CKRT_OPS_H

#include "ckrt_kernels_ops.h" /* the op codes: CKRT_ADD..., CKRT_SQRT..., CKRT_REDUCE_*, CKRT_POOL_* */
#include "ckrt_kernels_fused.h" /* ck_fprog, ck_fptrs: a fused chain's program and arrays */

/* ---------------------------------------------------------------- elementwise (ckrt_kernels.h) */

/* op: a code of CKRT_BINARY_OPS or CKRT_COMPARE_OPS (the compare ops write bool (uint8)).
 * y[i] = a[off_a(i)] OP b[off_b(i)] over an output of `rank` dims; a_strides/b_strides are the
 * inputs' element strides aligned to the output's dims, 0 on broadcast axes.
 * dt: the inputs' dtype (f32, f64, i64, i32; bool for EQUAL). */
int ckrt_binary(ckrt_ctx *c, int op, ckrt_dtype dt, void *y, const void *a, const void *b, int rank,
                const int64_t *dims, const int64_t *a_strides, const int64_t *b_strides);

/* y = op(x) over n elements, op a code of CKRT_UNARY_OPS (or CKRT_NOT); alpha, beta: the op's
 * attributes (LeakyRelu's slope, HardSigmoid's alpha and beta; 0 for the others).
 * dt: f32 (all), i64/i32 (CKRT_UNARY_INT_OPS), bool (NOT). */
int ckrt_unary(ckrt_ctx *c, int op, ckrt_dtype dt, void *y, const void *x, int64_t n, float alpha, float beta);

/* A fused elementwise chain (ckptc.Fused) over n elements: the ops of program p (format:
 * ckrt_kernels_fused.h) on the arrays q (float32; bool conditions), each op with the expression of
 * its unfused kernel, so the bits are those of running the ops one by one. */
int ckrt_fused(ckrt_ctx *c, const ck_fprog *p, const ck_fptrs *q, int64_t n);

/* y = min(max(x, lo), hi) over n elements as numpy.clip (NaN stays NaN; lo > hi gives hi); lo/hi
 * point at one element of dt or are NULL (no bound). dt: f32, f64, i64, i32, i16, i8, u8. */
int ckrt_clip(ckrt_ctx *c, ckrt_dtype dt, void *y, const void *x, int64_t n, const void *lo, const void *hi);

/* y[i] = cond[.] ? a[.] : b[.] with broadcasting as ckrt_binary; esz: element size of a/b/y
 * (1, 2, 4 or 8: any dtype). */
int ckrt_where(ckrt_ctx *c, size_t esz, void *y, const uint8_t *cond, const void *a, const void *b, int rank,
               const int64_t *dims, const int64_t *cond_strides, const int64_t *a_strides, const int64_t *b_strides);

/* y = (to) x over n elements; to, from: f32, f64, i64, i32, i16, i8, u8, bool. Floats -> integers
 * truncate toward zero (saturating at int64's range, NaN -> 0) and integers -> narrower integers
 * wrap, as numpy does on x86; -> bool is x != 0. */
int ckrt_cast(ckrt_ctx *c, ckrt_dtype to, ckrt_dtype from, void *y, const void *x, int64_t n);

/* ---------------------------------------------------------------- over an axis (ckrt_kernels.h) */

/* x, y: (outer, len, inner); softmax (or log-softmax) along len, max-subtracted; log-softmax is
 * x - max - log(sum(exp(x - max))). */
int ckrt_softmax(ckrt_ctx *c, int log, float *y, const float *x, int64_t outer, int64_t len, int64_t inner);

/* x, y: (rows, cols) normalized over cols; scale, bias: (cols) (bias may be NULL);
 * mean, inv_std: (rows) or NULL. Statistics in double, two passes (mean, then the biased
 * variance); inv_std = 1 / sqrt(var + eps). */
int ckrt_layer_norm(ckrt_ctx *c, float *y, float *mean, float *inv_std, const float *x, const float *scale,
                    const float *bias, int64_t rows, int64_t cols, float eps);

/* x, y: (N, C, S); scale, bias, mean, var and the four outputs: (C).
 * Inference (training 0): y = (x - mean) / sqrt(var + eps) * scale + bias; the four outputs are
 * ignored (pass NULL).
 * Training: the batch mean and biased batch variance over (N, S) (double, two passes), rounded to
 * float: mean_f and inv_std_f = 1 / sqrt(var + eps); y = (x - mean_f) * inv_std_f * scale + bias
 * (ck_k_batch_norm_apply1, exactly as ckrt_batch_norm_apply recomputes it). Write, each when
 * non-NULL, run_mean = momentum * mean + (1 - momentum) * batch_mean and
 * run_var = momentum * var + (1 - momentum) * batch_var * (unbiased ? n / (n - 1) : 1), n = N * S
 * (the ONNX spec and its node tests use the biased variance, unbiased 0; PyTorch the unbiased
 * one, unbiased 1), saved_mean = mean_f, saved_inv_std = inv_std_f. */
int ckrt_batch_norm(ckrt_ctx *c, float *y, float *run_mean, float *run_var, float *saved_mean, float *saved_inv_std,
                    const float *x, const float *scale, const float *bias, const float *mean, const float *var,
                    int64_t N, int64_t C, int64_t S, float eps, float momentum, int training, int unbiased);

/* x, y, mask: (n). Dropout with the counter-based RNG (ckrt_kernels.h): element i draws word
 * i % 4 of Philox4x32-10 with key (seed lo32, seed hi32) and counter (lo32(i / 4), hi32(i / 4),
 * lo32(c->step), lo32(key)), seed = c->seed; it is kept iff (word >> 8) * 2^-24 >= ratio, kept
 * values scaled by 1 / (1 - ratio), dropped ones 0. key: the node's id (any backend regenerates
 * the same mask, no state). ratio 0 (inference): y = x, mask all true. mask (bool) may be NULL. */
int ckrt_dropout(ckrt_ctx *c, float *y, uint8_t *mask, const float *x, int64_t n, float ratio, uint64_t key);

/* y: (n) of dtype dt. The random ops on Dropout's counter RNG (ck_k_random_block in
 * ckrt_kernels.h): kind CKRT_RAND_UNIFORM (a = low, b = high), CKRT_RAND_NORMAL (a = mean,
 * b = scale) or CKRT_RAND_BERNOULLI (p: (n) probabilities of dtype pdt, F32 or F64; a, b unused).
 * The Philox key is c->seed ^ salt (salt: from the node's `seed` attribute, 0 without one); the
 * counter is keyed by lo32(c->step) and lo32(key) (the node's id) like Dropout's, data-parallel
 * ranks starting at rank x n. expect, or c->eval: no draw, y = the expectation ((a + b) / 2, a,
 * p). dt: F32, F64 (BERNOULLI also BOOL, I64, I32). */
int ckrt_random(ckrt_ctx *c, int kind, ckrt_dtype dt, void *y, const void *p, ckrt_dtype pdt, int64_t n, double a, double b,
                uint64_t salt, int expect, uint64_t key);

/* x viewed as kept axes (nk of them: kdims, kstrides) and reduced axes (nr: rdims, rstrides),
 * strides in elements of x; y: (kdims...) row-major. Each output sums its prod(rdims) inputs in
 * row-major order of rdims (f32 in double; ints in int64, wrapping); MEAN divides by the count.
 * nr 0: a copy. dt: f32 (SUM also i64, i32). */
int ckrt_reduce(ckrt_ctx *c, int op, ckrt_dtype dt, void *y, const void *x, int nk, const int64_t *kdims,
                const int64_t *kstrides, int nr, const int64_t *rdims, const int64_t *rstrides);

/* x: (NC, S) -> y: (NC) mean over S (summed in double, in order). */
int ckrt_global_avg_pool(ckrt_ctx *c, float *y, const float *x, int64_t nc, int64_t s);

/* ---------------------------------------------------------------- dense (cpu_dense.c) */

/* y (M,N) = alpha * op(a) op(b) + beta * cm, cm broadcast from (cm_rows, cm_cols) in
 * {(1,1),(1,N),(M,1),(M,N)}; cm may be NULL. op(a): (M,K), a stored (K,M) when trans_a. */
int ckrt_gemm(ckrt_ctx *c, float *y, const float *a, const float *b, const float *cm, int64_t M, int64_t N, int64_t K,
              int trans_a, int trans_b, float alpha, float beta, int64_t cm_rows, int64_t cm_cols);

/* Batched y[bi] (M,N) = op(a[bi]) (M,K) @ op(b[bi]) (K,N) over the batch dims `bdims` (brank of
 * them); a_bstrides/b_bstrides/y_bstrides: element strides of each batch axis in a/b/y, 0 where
 * broadcast (never in y). op(a) is a, rows lda apart, or (ta) a stored (K,M) with rows lda apart;
 * likewise b with tb and ldb; y's rows are ldc apart. A plain MatMul is ta = tb = 0, lda = K,
 * ldb = N, ldc = N and contiguous batches; a transposed operand or result read or written in
 * place (ck_ir.h's CK_PERM_*) has other strides. */
int ckrt_matmul(ckrt_ctx *c, float *y, const float *a, const float *b, int64_t M, int64_t N, int64_t K, int brank,
                const int64_t *bdims, const int64_t *a_bstrides, const int64_t *b_bstrides, const int64_t *y_bstrides,
                int ta, int64_t lda, int tb, int64_t ldb, int64_t ldc);

/* x: (N, C, in_sp...), w: (M, C/group, k...), b: (M) or NULL, y: (N, M, out_sp...); nsp spatial
 * axes; pads_begin per axis (the end pads follow from out_sp). Lowered per image and group to
 * im2col + GEMM: ws holds one column matrix, (C/group * prod(k)) x prod(out_sp) floats (ck_ws_conv),
 * or B images' columns side by side and a staging matrix where images have few output positions
 * (ckrt_conv_batch.h), `lanes` times over (lanes batches at once on the CPU, ckrt_conv_batch.h;
 * 1 without);
 * NULL only for 1x1 convolutions with unit strides and no padding, which read x directly. */
int ckrt_conv(ckrt_ctx *c, float *y, const float *x, const float *w, const float *b, float *ws, int64_t lanes, int nsp, int64_t N,
              int64_t C, int64_t M, int64_t group, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
              const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations);

/* x: (N, C, in_sp...) -> y: (N, C, out_sp...). Windows start at o*stride - pads_begin; taps outside
 * the input are skipped (MaxPool) or, for AveragePool with count_include_pad, counted in the
 * divisor while inside [-pads_begin, in + pads_end). indices (MaxPool, int64, may be NULL): the
 * maximum's flat row-major index into x, over all of (N, C, in_sp...) as ONNX defines it (first
 * maximum on ties). */
int ckrt_pool(ckrt_ctx *c, int kind, float *y, int64_t *indices, const float *x, int nsp, int64_t N, int64_t C,
              const int64_t *in_sp, const int64_t *out_sp, const int64_t *k, const int64_t *strides,
              const int64_t *pads_begin, const int64_t *pads_end, const int64_t *dilations, int count_include_pad);

/* ---------------------------------------------------------------- data movement (ckrt_kernels_move.h, cpu_move.c) */

/* y[i] = x[base + sum_k idx_k(i) * in_strides[k]] over an output of `rank` dims: Transpose
 * (permuted strides), Slice (start offset, strides times steps, negative allowed) and Expand
 * (0 strides) are all this. esz: element size in bytes. */
int ckrt_strided_copy(ckrt_ctx *c, size_t esz, void *y, const void *x, int rank, const int64_t *out_dims,
                      const int64_t *in_strides, int64_t base);

/* y: (outer, sum(lens), inner) from n inputs xs[k]: (outer, lens[k], inner). */
int ckrt_concat(ckrt_ctx *c, size_t esz, void *y, int n, const void *const *xs, const int64_t *lens, int64_t outer,
                int64_t inner);
/* The inverse: ys[k]: (outer, lens[k], inner) from x: (outer, sum(lens), inner). */
int ckrt_split(ckrt_ctx *c, size_t esz, int n, void *const *ys, const int64_t *lens, const void *x, int64_t outer,
               int64_t inner);

/* x: (outer, len, inner), idx: n_idx indices (int64 or int32, negative counts from the end;
 * out of range is an error naming the node) -> y: (outer, n_idx, inner). */
int ckrt_gather(ckrt_ctx *c, size_t esz, void *y, const void *x, const void *idx, ckrt_dtype idx_dt, int64_t outer,
                int64_t len, int64_t inner, int64_t n_idx);
/* Gather's and its gradient's index check (host memory): fails naming the first index outside
 * [-len, len) and its position. */
int ckrt_gather_check(ckrt_ctx *c, const void *idx, ckrt_dtype idx_dt, int64_t len, int64_t n_idx);

/* ScatterND (cpu_move.c): y = data: (dims[0..k), inner) (data_n elements of esz bytes), then
 * for each index tuple j of idx: (n_upd, k) in order, row ck_k_nd_row of y is replaced by (none),
 * or for float32 added to or multiplied by (CKRT_SCATTER_ADD, _MUL), row j of upd: (n_upd,
 * inner). An index out of range is an error naming it. GatherND: y: (n_idx, inner) = the rows
 * of x the index tuples address. dims: (k) */
int ckrt_scatter_nd(ckrt_ctx *c, size_t esz, int reduction, void *y, const void *data, const int64_t *idx, const void *upd,
                    int k, const int64_t *dims, int64_t n_upd, int64_t inner, int64_t data_n);
int ckrt_gather_nd(ckrt_ctx *c, size_t esz, void *y, const void *x, const int64_t *idx, int k, const int64_t *dims,
                   int64_t n_idx, int64_t inner);
/* Their index check (host memory): fails naming the first index tuple out of range. */
int ckrt_nd_check(ckrt_ctx *c, const int64_t *idx, int k, const int64_t *dims, int64_t n);

/* x, y: (batch, rows, cols); keeps the upper (j - i >= k) or lower (j - i <= k) triangle. */
int ckrt_trilu(ckrt_ctx *c, size_t esz, void *y, const void *x, int64_t batch, int64_t rows, int64_t cols, int64_t k,
               int upper);

/* Pad: y: (out_dims) from x: (in_dims), out_dims[k] = in_dims[k] + begin[k] + end[k]; element i
 * copies x at ck_k_pad_src (reflect or edge), or *value (esz bytes, host memory) where constant
 * mode falls outside x. in_dims, out_dims, begin: (rank) */
int ckrt_pad(ckrt_ctx *c, size_t esz, void *y, const void *x, int rank, const int64_t *in_dims, const int64_t *out_dims,
             const int64_t *begin, int mode, const void *value);

/* y[0..n) = *value (esz bytes). */
int ckrt_fill(ckrt_ctx *c, size_t esz, void *y, const void *value, int64_t n);

/* y[i] = start + i * delta for i < n; start, delta: one element of dt (f32, f64, i64, i32),
 * floats computed in double and rounded once. */
int ckrt_range(ckrt_ctx *c, ckrt_dtype dt, void *y, const void *start, const void *delta, int64_t n);

/* ---------------------------------------------------------------- training (cpu_train.c) */

/* logits: (rows, classes), labels: (rows) int64/int32 -> *loss = mean over rows of
 * -log_softmax(logits[r])[labels[r]]; a label outside [0, classes) is an error naming it. */
int ckrt_cross_entropy(ckrt_ctx *c, float *loss, const float *logits, const void *labels, ckrt_dtype label_dt, int64_t rows,
                       int64_t classes);
/* dx: (rows, classes) = dloss[0] * (softmax(logits) - onehot(labels)) / rows */
int ckrt_cross_entropy_grad(ckrt_ctx *c, float *dx, const float *dloss, const float *logits, const void *labels,
                            ckrt_dtype label_dt, int64_t rows, int64_t classes);

/* dx = dy * f'(x) over n elements; op: the forward's ckrt_unary code (or CKRT_CLIP_GRAD with
 * bounds lo, hi); alpha, beta: the forward's. */
int ckrt_unary_grad(ckrt_ctx *c, int op, float *dx, const float *dy, const float *x, int64_t n, float alpha, float beta,
                    float lo, float hi);
/* y: the forward's output, (outer, len, inner); log: y is log-softmax. */
int ckrt_softmax_grad(ckrt_ctx *c, int log, float *dx, const float *dy, const float *y, int64_t outer, int64_t len,
                      int64_t inner);
/* LayerNormalization's backward (ckptc.LayerNormGrad). dy, x, dx: (rows, cols), normalized over
 * cols; scale, dscale, dbias: (cols); mean, inv_std: (rows), the forward's saved statistics
 * (ckrt_layer_norm). With xhat = (x - mean) inv_std: dbias = sum over rows of dy,
 * dscale = sum over rows of dy xhat, dx = inv_std (dy scale - mean_cols(dy scale)
 * - xhat mean_cols(dy scale xhat)); sums in double: over rows in index order, over cols in the
 * 8-lane order of ckrt_kernels.h. dx, dscale, dbias may each be
 * NULL (not wanted). */
int ckrt_layer_norm_grad(ckrt_ctx *c, float *dx, float *dscale, float *dbias, const float *dy, const float *x,
                         const float *scale, const float *mean, const float *inv_std, int64_t rows, int64_t cols);
/* Training-mode BatchNormalization's backward (ckptc.BatchNormGrad). dy, x, dx: (N, C, S); scale,
 * mean, inv_std, dscale, dbias: (C), mean / inv_std as ckrt_batch_norm saved them. Per channel,
 * over its n = N S elements (double, in (N, S) order), xhat = (x - mean) inv_std:
 * dbias = sum dy, dscale = sum dy xhat, dx = scale inv_std (dy - dbias / n - xhat dscale / n).
 * dx, dscale, dbias may each be NULL. */
int ckrt_batch_norm_grad(ckrt_ctx *c, float *dx, float *dscale, float *dbias, const float *dy, const float *x,
                         const float *scale, const float *mean, const float *inv_std, int64_t N, int64_t C, int64_t S);
/* The recompute of a training-mode BatchNormalization (ckptc.BatchNormApply): x, y: (N, C, S);
 * scale, bias, mean, inv_std: (C), the statistics the forward saved. y is bit-identical to the
 * forward's (the same expression, ck_k_batch_norm_apply1); running statistics are not touched. */
int ckrt_batch_norm_apply(ckrt_ctx *c, float *y, const float *x, const float *scale, const float *bias, const float *mean,
                          const float *inv_std, int64_t N, int64_t C, int64_t S);
/* dx = dy * mask / (1 - ratio), the mask regenerated from (c->seed, c->step, key) exactly as
 * ckrt_dropout drew it. */
int ckrt_dropout_grad(ckrt_ctx *c, float *dx, const float *dy, int64_t n, float ratio, uint64_t key);
/* In-place updates of n elements (torch.optim semantics); buf NULL: plain SGD. AdamW reads the
 * step count (1-based) from c->step. acc: the parameter's gradient accumulator (ckptc
 * --grad-accum) or NULL. With c->accum = K > 1, on micro-batches c->micro < K - 1 of a step the
 * update only accumulates g into acc (ck_k_grad_accum); on the last it updates with
 * ck_k_grad_eff(acc + g, c->grad_scale). c->grad_scale (1/K times the clip coefficient) applies
 * to every update; 1 leaves the bits as they were. */
int ckrt_sgd(ckrt_ctx *c, float *p, const float *g, float *buf, float *acc, int64_t n, float lr, float momentum, float wd);
int ckrt_adamw(ckrt_ctx *c, float *p, const float *g, float *m, float *v, float *acc, int64_t n, float lr, float b1, float b2,
               float eps, float wd);
/* Data parallel (runtime/dp.c): out[i] = ck_k_rank_mean(i, recv, count, ranks) for i < count;
 * and a plain copy of n floats (packing gradients into the communication staging and back). */
int ckrt_rank_mean(ckrt_ctx *c, float *out, const float *recv, int64_t count, int ranks);
int ckrt_copy_f32(ckrt_ctx *c, float *dst, const float *src, int64_t n);
/* Data parallel (runtime/dp.c): out[i] = ck_k_rank_mean(i, recv, count, ranks) for i < count;
 * and a plain copy of n floats (packing gradients into the communication staging and back). */
int ckrt_rank_mean(ckrt_ctx *c, float *out, const float *recv, int64_t count, int ranks);
int ckrt_copy_f32(ckrt_ctx *c, float *dst, const float *src, int64_t n);

/* Conv gradients (cpu_train_conv.c), the geometry of ckrt_conv: x, dx: (N, C, in_sp...);
 * w, dw: (M, C/group, k...); dy: (N, M, out_sp...); pads resolved (auto_pad applied).
 * ws: (C/group * prod(k)) * prod(out_sp) floats, NULL (none needed) when the conv is 1x1 with
 * no begin padding and out_sp == in_sp.
 * grad_input: dx = the adjoint of conv in x (per image and group: col = w_g^T dy_g, then
 * col2im, each dx element summing its taps in a fixed order); ws `lanes` times over, as ckrt_conv's.
 * grad_weight: dw = sum over images, in image order, of dy_g im2col(x_g)^T. */
int ckrt_conv_grad_input(ckrt_ctx *c, float *dx, const float *dy, const float *w, float *ws, int64_t lanes, int nsp, int64_t N, int64_t C,
                         int64_t M, int64_t group, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                         const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations);
int ckrt_conv_grad_weight(ckrt_ctx *c, float *dw, const float *dy, const float *x, float *ws, int nsp, int64_t N, int64_t C,
                          int64_t M, int64_t group, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                          const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations);
/* Pool gradient, the geometry of ckrt_pool: x, dx: (N, C, in_sp...), dy: (N, C, out_sp...).
 * CKRT_POOL_MAX: each dy goes to its window's first maximum, recomputed from x;
 * CKRT_POOL_AVG: dy / divisor (ckrt_pool's, count_include_pad included) to every tap of its
 * window inside x. Each dx element sums its windows in ascending order. */
int ckrt_pool_grad(ckrt_ctx *c, int kind, float *dx, const float *dy, const float *x, int nsp, int64_t N, int64_t C,
                   const int64_t *in_sp, const int64_t *out_sp, const int64_t *k, const int64_t *strides,
                   const int64_t *pads_begin, const int64_t *pads_end, const int64_t *dilations, int count_include_pad);
/* Gather gradient (cpu_train_move.c): dx: (outer, len, inner) = 0, then dy: (outer, n_idx, inner)
 * row j added at row idx[j] (negative counts from the end), in index order; an index out of
 * [-len, len) is an error naming it (nothing written past dx). */
int ckrt_gather_grad(ckrt_ctx *c, float *dx, const float *dy, const void *idx, ckrt_dtype idx_dt, int64_t outer, int64_t len,
                     int64_t inner, int64_t n_idx);
/* Slice gradient, the inverse of ckrt_strided_copy: dx (dx_n elements of esz bytes) = 0, then
 * dx[base + sum_k idx_k(j) * dx_strides[k]] = dy[j] for each element j of dy: (dy_dims) (rank
 * dims; strides are dx's element strides times the steps, negative allowed). */
int ckrt_slice_grad(ckrt_ctx *c, size_t esz, void *dx, const void *dy, int rank, const int64_t *dy_dims,
                    const int64_t *dx_strides, int64_t base, int64_t dx_n);

/* Pad gradient (cpu_train_move.c): dx: (in_dims) element j = the sum of the dy: (out_dims)
 * elements the forward copied from x element j (ck_k_pad_grad: a fixed order, no atomics). */
int ckrt_pad_grad(ckrt_ctx *c, float *dx, const float *dy, int rank, const int64_t *in_dims, const int64_t *out_dims,
                  const int64_t *begin, int mode);

/* Offload: copy `bytes` from the arena to the host pool (ckrt_offload) or back (ckrt_reload)
 * through the backend's copy hooks (memcpy on the CPU; the copy stream on CUDA). */
int ckrt_offload(ckrt_ctx *c, void *host, const void *dev, int64_t bytes);
int ckrt_reload(ckrt_ctx *c, void *dev, const void *host, int64_t bytes);

#endif
