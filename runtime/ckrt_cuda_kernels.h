/* ckrt_cuda_kernels.h — every ck_g_* CUDA wrapper declared once, typed: the launch contract
 * between the CUDA backend (runtime/cuda_ops.c) and the kernels.cu that ckptc writes
 * (codegen/emit_cuda.c).
 *
 * CK_G_PARAMS_<NAME>(V, P) lists the parameters of wrapper ck_g_<NAME> after its first one
 * (int64_t n, the work items), in order: V(type, name) a value, P(type, name) a device pointer.
 * CKRT_CUDA_KERNELS(K, REUSE) lists the wrappers: K(ENTRY, NAME, body...) is wrapper NAME, run by
 * the CUDA implementation of ckrt_<ENTRY>, whose body runs once per work item i (the body is C
 * and CUDA both, over the bodies of ckrt_kernels*.h); REUSE(ENTRY, NAME) says ckrt_<ENTRY> runs an
 * already listed wrapper.
 *
 * From these: emit_cuda.c writes each wrapper's signature and body (stringified), and
 * cuda_ops.c gets one launcher per wrapper, g_<NAME>(c, n, &arg...), taking a pointer to each
 * argument typed as the parameter (ckrt_dptr for device pointers), so a launch whose arguments
 * do not match the wrapper's parameters in number, order or type does not compile. The file holds
 * macros only; it is not part of kernels.cu.
 */
#ifndef CKRT_CUDA_KERNELS_H
#define CKRT_CUDA_KERNELS_H

#define CK_G_PARAMS_binary_f32(V, P) V(int, op) P(void *, y) P(const float *, a) P(const float *, b) V(int, rank) \
    V(ck_dims, dims) V(ck_dims, sa) V(ck_dims, sb)
#define CK_G_PARAMS_binary_f64(V, P) V(int, op) P(void *, y) P(const double *, a) P(const double *, b) \
    V(int, rank) V(ck_dims, dims) V(ck_dims, sa) V(ck_dims, sb)
#define CK_G_PARAMS_binary_int(V, P) V(int, op) V(int, dt) P(void *, y) P(const void *, a) P(const void *, b) \
    V(int, rank) V(ck_dims, dims) V(ck_dims, sa) V(ck_dims, sb)
#define CK_G_PARAMS_unary_f32(V, P) V(int, op) P(float *, y) P(const float *, x) V(float, alpha) V(float, beta)
#define CK_G_PARAMS_unary_int(V, P) V(int, op) V(int, dt) P(void *, y) P(const void *, x)
#define CK_G_PARAMS_not(V, P) P(uint8_t *, y) P(const uint8_t *, x)
#define CK_G_PARAMS_where(V, P) V(int, esz) P(void *, y) P(const uint8_t *, cond) P(const void *, a) \
    P(const void *, b) V(int, rank) V(ck_dims, dims) V(ck_dims, sc) V(ck_dims, sa) V(ck_dims, sb)
#define CK_G_PARAMS_fused(V, P) V(ck_fprog, prog) V(ck_fptrs, ptrs)
#define CK_G_PARAMS_clip_f32(V, P) P(float *, y) P(const float *, x) P(const float *, lo) P(const float *, hi)
#define CK_G_PARAMS_clip_f64(V, P) P(double *, y) P(const double *, x) P(const double *, lo) P(const double *, hi)
#define CK_G_PARAMS_clip_int(V, P) V(int, dt) P(void *, y) P(const void *, x) P(const void *, lo) P(const void *, hi)
#define CK_G_PARAMS_cast(V, P) V(int, to) V(int, from) P(void *, y) P(const void *, x)
#define CK_G_PARAMS_softmax(V, P) V(int, log_) P(float *, y) P(const float *, x) V(int64_t, len) V(int64_t, inner)
#define CK_G_PARAMS_layer_norm(V, P) P(float *, y) P(float *, mean) P(float *, inv_std) P(const float *, x) \
    P(const float *, scale) P(const float *, bias) V(int64_t, cols) V(float, eps)
#define CK_G_PARAMS_batch_norm_train(V, P) P(float *, y) P(float *, run_mean) P(float *, run_var) \
    P(float *, saved_mean) P(float *, saved_inv_std) P(const float *, x) P(const float *, scale) \
    P(const float *, bias) P(const float *, mean) P(const float *, var) V(int64_t, N) V(int64_t, C) V(int64_t, S) \
    V(float, eps) V(float, momentum) V(int, unbiased)
#define CK_G_PARAMS_batch_norm_infer(V, P) P(float *, y) P(const float *, x) P(const float *, scale) \
    P(const float *, bias) P(const float *, mean) P(const float *, var) V(int64_t, C) V(int64_t, S) V(float, eps)
#define CK_G_PARAMS_dropout(V, P) P(float *, y) P(uint8_t *, mask) P(const float *, x) V(int64_t, cnt) \
    V(float, ratio) V(float, scale) V(uint64_t, seed) V(uint64_t, step) V(uint64_t, key) V(uint64_t, first)
#define CK_G_PARAMS_random(V, P) V(int, kind) V(int, to) P(void *, y) P(const void *, p) V(int, pdt) V(int64_t, cnt) \
    V(double, a) V(double, b) V(int, expect) V(uint64_t, seed) V(uint64_t, step) V(uint64_t, key) V(uint64_t, first)
#define CK_G_PARAMS_reduce_f32(V, P) V(int, mean) P(float *, y) P(const float *, x) V(int, nk) V(ck_dims, kd) \
    V(ck_dims, ks) V(int, nr) V(ck_dims, rd) V(ck_dims, rs)
#define CK_G_PARAMS_reduce_part(V, P) P(double *, part) V(int64_t, nout) V(int64_t, chunk) P(const float *, x) \
    V(int, nk) V(ck_dims, kd) V(ck_dims, ks) V(int, nr) V(ck_dims, rd) V(ck_dims, rs)
#define CK_G_PARAMS_reduce_fin(V, P) V(int, mean) P(float *, y) P(const double *, part) V(int64_t, parts) V(int64_t, cnt)
#define CK_G_PARAMS_bn_part(V, P) P(double *, part) V(int64_t, C) V(int64_t, S) V(int64_t, cnt) V(int64_t, chunk) \
    P(const float *, x) P(const double *, mu)
#define CK_G_PARAMS_bn_mean(V, P) P(double *, mu) P(const double *, part) V(int64_t, parts) V(int64_t, cnt)
#define CK_G_PARAMS_bn_stats(V, P) P(float *, stat) P(float *, run_mean) P(float *, run_var) P(float *, saved_mean) \
    P(float *, saved_inv_std) P(const double *, mu) P(const double *, part) V(int64_t, parts) \
    P(const float *, in_mean) P(const float *, in_var) V(int64_t, cnt) V(float, eps) V(float, momentum) V(int, unbiased)
#define CK_G_PARAMS_bn_apply_stat(V, P) P(float *, y) P(const float *, x) P(const float *, scale) P(const float *, bias) \
    P(const float *, stat) V(int64_t, C) V(int64_t, S)
#define CK_G_PARAMS_bng_part(V, P) P(double *, part) V(int64_t, C) V(int64_t, S) V(int64_t, cnt) V(int64_t, chunk) \
    P(const float *, dy) P(const float *, x) P(const float *, mean) P(const float *, inv_std)
#define CK_G_PARAMS_bng_fin(V, P) P(float *, dscale) P(float *, dbias) P(double *, coef) P(const double *, part) \
    V(int64_t, parts) V(int64_t, cnt)
#define CK_G_PARAMS_bng_dx(V, P) P(float *, dx) P(const float *, dy) P(const float *, x) P(const float *, scale) \
    P(const float *, mean) P(const float *, inv_std) P(const double *, coef) V(int64_t, C) V(int64_t, S)
#define CK_G_PARAMS_lng_part(V, P) P(double *, part) V(int64_t, cols) V(int64_t, rows) V(int64_t, chunk) \
    P(const float *, dy) P(const float *, x) P(const float *, mean) P(const float *, inv_std)
#define CK_G_PARAMS_lng_fin(V, P) P(float *, dscale) P(float *, dbias) P(const double *, part) V(int64_t, parts)
#define CK_G_PARAMS_reduce_int(V, P) V(int, is64) P(void *, y) P(const void *, x) V(int, nk) V(ck_dims, kd) \
    V(ck_dims, ks) V(int, nr) V(ck_dims, rd) V(ck_dims, rs)
#define CK_G_PARAMS_global_avg_pool(V, P) P(float *, y) P(const float *, x) V(int64_t, s)
#define CK_G_PARAMS_gemm_cm(V, P) P(float *, y) P(const float *, cm) V(int64_t, N) V(int64_t, cm_rows) \
    V(int64_t, cm_cols)
#define CK_G_PARAMS_scale(V, P) P(float *, y) V(float, s)
#define CK_G_PARAMS_im2col(V, P) P(float *, col) P(const float *, img) V(int, nsp) V(ck_dims, in_sp) \
    V(ck_dims, out_sp) V(ck_dims, k) V(ck_dims, st) V(ck_dims, pb) V(ck_dims, dl)
#define CK_G_PARAMS_bias_add(V, P) P(float *, y) P(const float *, b) V(int64_t, out_n)
#define CK_G_PARAMS_pool(V, P) V(int, kind) P(float *, y) P(int64_t *, indices) P(const float *, x) V(int, nsp) \
    V(ck_dims, in_sp) V(ck_dims, out_sp) V(ck_dims, k) V(ck_dims, st) V(ck_dims, pb) V(ck_dims, pe) \
    V(ck_dims, dl) V(int, cip)
#define CK_G_PARAMS_strided_copy(V, P) V(int, esz) P(void *, y) P(const void *, x) V(int, rank) V(ck_dims, dims) \
    V(ck_dims, strides) V(int64_t, base)
#define CK_G_PARAMS_split_copy(V, P) V(int, esz) V(int, to_whole) P(void *, whole) P(void *, part) \
    V(int64_t, len) V(int64_t, start) V(int64_t, total) V(int64_t, inner)
#define CK_G_PARAMS_gather(V, P) V(int, esz) P(void *, y) P(const void *, x) P(const void *, idx) V(int, idx_i64) \
    V(int64_t, len) V(int64_t, inner) V(int64_t, n_idx)
#define CK_G_PARAMS_trilu(V, P) V(int, esz) P(void *, y) P(const void *, x) V(int64_t, rows) V(int64_t, cols) \
    V(int64_t, k) V(int, upper)
#define CK_G_PARAMS_pad(V, P) V(int, esz) P(void *, y) P(const void *, x) V(int, rank) V(ck_dims, in_dims) \
    V(ck_dims, out_dims) V(ck_dims, begin) V(int, mode) V(ck_value16, v)
#define CK_G_PARAMS_scatter_nd(V, P) V(int, esz) V(int, red) P(void *, y) P(const void *, upd) \
    P(const int64_t *, idx) V(int64_t, n_upd) V(int, k) V(ck_dims, dims) V(int64_t, inner)
#define CK_G_PARAMS_gather_nd(V, P) V(int, esz) P(void *, y) P(const void *, x) P(const int64_t *, idx) V(int, k) \
    V(ck_dims, dims) V(int64_t, inner)
#define CK_G_PARAMS_fill(V, P) V(int, esz) P(void *, y) V(ck_value16, v)
#define CK_G_PARAMS_range(V, P) V(int, dt) P(void *, y) P(const void *, start) P(const void *, delta)
#define CK_G_PARAMS_xent_rows(V, P) P(double *, out) V(int64_t, r0) P(const float *, logits) \
    P(const void *, labels) V(int, lab_i64) V(int64_t, classes)
#define CK_G_PARAMS_xent_accum(V, P) P(double *, acc) P(const double *, vals) V(int64_t, cnt) V(int, first) \
    P(float *, loss) V(int64_t, rows)
#define CK_G_PARAMS_xent_grad(V, P) P(float *, dx) P(const float *, dloss) P(const float *, logits) \
    P(const void *, labels) V(int, lab_i64) V(int64_t, rows) V(int64_t, classes)
#define CK_G_PARAMS_arena_top(V, P) P(const uint8_t *, x) V(int64_t, bytes) V(int, fill) P(unsigned long long *, top)
#define CK_G_PARAMS_rank_mean(V, P) P(float *, out) P(const float *, recv) V(int64_t, count) V(int, ranks)
#define CK_G_PARAMS_copy_f32(V, P) P(float *, y) P(const float *, x)
#define CK_G_PARAMS_unary_grad(V, P) V(int, op) P(float *, dx) P(const float *, dy) P(const float *, x) \
    V(float, alpha) V(float, beta) V(float, lo) V(float, hi)
#define CK_G_PARAMS_softmax_grad(V, P) V(int, log_sm) P(float *, dx) P(const float *, dy) P(const float *, y) \
    V(int64_t, len) V(int64_t, inner)
#define CK_G_PARAMS_layer_norm_grad_row(V, P) P(float *, dx) P(const float *, dy) P(const float *, x) \
    P(const float *, scale) P(const float *, mean) P(const float *, inv_std) V(int64_t, cols)
#define CK_G_PARAMS_layer_norm_grad_col(V, P) P(float *, dscale) P(float *, dbias) P(const float *, dy) \
    P(const float *, x) P(const float *, mean) P(const float *, inv_std) V(int64_t, rows) V(int64_t, cols)
#define CK_G_PARAMS_batch_norm_grad(V, P) P(float *, dx) P(float *, dscale) P(float *, dbias) \
    P(const float *, dy) P(const float *, x) P(const float *, scale) P(const float *, mean) \
    P(const float *, inv_std) V(int64_t, N) V(int64_t, C) V(int64_t, S)
#define CK_G_PARAMS_batch_norm_apply(V, P) P(float *, y) P(const float *, x) P(const float *, scale) \
    P(const float *, bias) P(const float *, mean) P(const float *, inv_std) V(int64_t, C) V(int64_t, S)
#define CK_G_PARAMS_sgd(V, P) P(float *, p) P(const float *, g) P(float *, buf) P(const float *, acc) V(float, gs) \
    V(float, lr) V(float, mu) V(float, wd)
#define CK_G_PARAMS_grad_accum(V, P) P(float *, acc) P(const float *, g) V(int, first)
#define CK_G_PARAMS_adamw(V, P) P(float *, p) P(const float *, g) P(float *, m) P(float *, v) P(const float *, acc) \
    V(float, gs) V(float, lr) \
    V(float, b1) V(float, b2) V(float, eps) V(float, wd) V(float, bc1) V(float, bc2)
#define CK_G_PARAMS_col2im(V, P) P(float *, dx) P(const float *, col) V(int, nsp) V(ck_dims, in_sp) \
    V(ck_dims, out_sp) V(ck_dims, k) V(ck_dims, st) V(ck_dims, pb) V(ck_dims, dl)
#define CK_G_PARAMS_pool_grad(V, P) V(int, kind) P(float *, dx) P(const float *, dy) P(const float *, x) \
    V(int, nsp) V(ck_dims, in_sp) V(ck_dims, out_sp) V(ck_dims, k) V(ck_dims, st) V(ck_dims, pb) V(ck_dims, pe) \
    V(ck_dims, dl) V(int, cip)
#define CK_G_PARAMS_gather_grad(V, P) P(float *, dx) P(const float *, dy) P(const void *, idx) V(int, idx_i64) \
    V(int64_t, len) V(int64_t, inner) V(int64_t, n_idx)
#define CK_G_PARAMS_pad_grad(V, P) P(float *, dx) P(const float *, dy) V(int, rank) V(ck_dims, in_dims) \
    V(ck_dims, out_dims) V(ck_dims, begin) V(int, mode)
#define CK_G_PARAMS_slice_grad(V, P) V(int, esz) P(void *, dx) P(const void *, dy) V(int, rank) V(ck_dims, dims) \
    V(ck_dims, strides) V(int64_t, base)

#define CKRT_CUDA_KERNELS(K, REUSE) \
    /* elementwise */ \
    K(binary, binary_f32, float x = a[ck_k_offset(i, rank, dims.v, sa.v)], z = b[ck_k_offset(i, rank, dims.v, \
      sb.v)]; if (op >= CKRT_EQUAL) ((uint8_t *)y)[i] = ck_k_compare(op, x, z); \
      else ((float *)y)[i] = ck_k_binary_f32(op, x, z);) \
    K(binary, binary_f64, double x = a[ck_k_offset(i, rank, dims.v, sa.v)], z = b[ck_k_offset(i, rank, dims.v, \
      sb.v)]; if (op >= CKRT_EQUAL) ((uint8_t *)y)[i] = ck_k_compare(op, x, z); \
      else ((double *)y)[i] = ck_k_binary_f64(op, x, z);) \
    K(binary, binary_int, int64_t x = ck_k_load_int(dt, a, ck_k_offset(i, rank, dims.v, sa.v)), \
      z = ck_k_load_int(dt, b, ck_k_offset(i, rank, dims.v, sb.v)); \
      if (op >= CKRT_EQUAL) ((uint8_t *)y)[i] = ck_k_compare_i64(op, x, z); else ck_k_store_int(dt, y, i, \
      ck_k_binary_i64(op, x, z));) \
    K(unary, unary_f32, y[i] = ck_k_unary_f32(op, x[i], alpha, beta);) \
    K(unary, unary_int, ck_k_store_int(dt, y, i, ck_k_unary_i64(op, ck_k_load_int(dt, x, i)));) \
    K(unary, not, y[i] = !x[i];) \
    K(fused, fused, ck_k_fused_elem(i, &prog, &ptrs);) \
    K(where, where, ck_k_where(i, esz, y, cond, a, b, ck_k_offset(i, rank, dims.v, sc.v), ck_k_offset(i, rank, \
      dims.v, sa.v), ck_k_offset(i, rank, dims.v, sb.v));) \
    K(clip, clip_f32, y[i] = ck_k_clip_f32(x[i], lo != NULL, lo ? *lo : 0.0f, hi != NULL, hi ? *hi : 0.0f);) \
    K(clip, clip_f64, y[i] = ck_k_clip_f64(x[i], lo != NULL, lo ? *lo : 0.0, hi != NULL, hi ? *hi : 0.0);) \
    K(clip, clip_int, ck_k_store_int(dt, y, i, ck_k_clip_i64(ck_k_load_int(dt, x, i), lo != NULL, \
      lo ? ck_k_load_int(dt, lo, 0) : 0, hi != NULL, hi ? ck_k_load_int(dt, hi, 0) : 0));) \
    K(cast, cast, ck_k_cast(to, from, y, x, i);) \
    /* over an axis */ \
    K(softmax, softmax, ck_k_softmax_row(i, log_, y, x, len, inner);) \
    K(layer_norm, layer_norm, ck_k_layer_norm_row(i, y, mean, inv_std, x, scale, bias, cols, eps);) \
    K(batch_norm, batch_norm_train, ck_k_batch_norm_train_channel(i, y, run_mean, run_var, saved_mean, \
      saved_inv_std, x, scale, bias, mean, var, N, C, S, eps, momentum, unbiased);) \
    /* the same, split over many threads (ckrt_kernels_gpu.h; cuda_ops.c picks the split) */ \
    K(batch_norm, bn_part, part[i] = ck_k_bn_part(i, C, S, cnt, chunk, x, mu);) \
    K(batch_norm, bn_mean, mu[i] = cnt > 0 ? ck_k_parts_sum(i, n, part, parts, 1, 0) / (double)cnt : 0.0;) \
    K(batch_norm, bn_stats, ck_k_bn_stats(i, n, stat, run_mean, run_var, saved_mean, saved_inv_std, mu, \
      ck_k_parts_sum(i, n, part, parts, 1, 0), in_mean, in_var, cnt, eps, momentum, unbiased);) \
    K(batch_norm, bn_apply_stat, y[i] = ck_k_batch_norm_apply(i, x, scale, bias, stat, stat + C, C, S);) \
    K(batch_norm, batch_norm_infer, y[i] = ck_k_batch_norm_infer(i, x, scale, bias, mean, var, C, S, eps);) \
    K(dropout, dropout, ck_k_dropout_block(i, y, mask, x, cnt, ratio, scale, seed, step, key, first);) \
    REUSE(dropout_grad, dropout) \
    K(random, random, ck_k_random_block(i, kind, to, y, p, pdt, cnt, a, b, expect, seed, step, key, first);) \
    K(reduce, reduce_f32, y[i] = ck_k_reduce_f32(i, mean, x, nk, kd.v, ks.v, nr, rd.v, rs.v);) \
    K(reduce, reduce_part, part[i] = ck_k_reduce_part(i, nout, chunk, x, nk, kd.v, ks.v, nr, rd.v, rs.v);) \
    K(reduce, reduce_fin, double s = ck_k_parts_sum(i, n, part, parts, 1, 0); \
      y[i] = (float)(mean ? s / (double)cnt : s);) \
    K(reduce, reduce_int, int64_t s = ck_k_reduce_sum_int(i, is64, x, nk, kd.v, ks.v, nr, rd.v, rs.v); \
      if (is64) ((int64_t *)y)[i] = s; else ((int32_t *)y)[i] = (int32_t)(uint32_t)(uint64_t)s;) \
    K(global_avg_pool, global_avg_pool, y[i] = ck_k_global_avg_pool(i, x, s);) \
    /* dense: cuBLAS does the products */ \
    K(gemm, gemm_cm, y[i] = ck_k_gemm_cm(i, cm, N, cm_rows, cm_cols);) \
    K(gemm, scale, y[i] *= s;) \
    K(conv, im2col, col[i] = ck_k_im2col(i, img, nsp, in_sp.v, out_sp.v, k.v, st.v, pb.v, dl.v);) \
    K(conv, bias_add, y[i] += ck_k_bias_of(i, b, out_n);) \
    K(pool, pool, int64_t at = -1; y[i] = ck_k_pool(i, kind, x, nsp, in_sp.v, out_sp.v, k.v, st.v, pb.v, pe.v, \
      dl.v, cip, &at); if (indices) indices[i] = at;) \
    /* data movement */ \
    K(strided_copy, strided_copy, ck_k_copy_elem(y, i, x, ck_k_strided_src(i, rank, dims.v, strides.v, base), esz);) \
    K(concat, split_copy, int64_t j = ck_k_split_src(i, len, start, total, inner); \
      if (to_whole) ck_k_copy_elem(whole, j, part, i, esz); else ck_k_copy_elem(part, i, whole, j, esz);) \
    REUSE(split, split_copy) \
    K(gather, gather, int64_t src = ck_k_gather_src(i, idx, idx_i64, len, inner, n_idx); \
      if (src >= 0) ck_k_copy_elem(y, i, x, src, esz);) \
    K(trilu, trilu, if (ck_k_trilu_keep(i, rows, cols, k, upper)) ck_k_copy_elem(y, i, x, i, esz); \
      else for (int b = 0; b < esz; b++) ((uint8_t *)y)[i * esz + b] = 0;) \
    K(pad, pad, int64_t src = ck_k_pad_src(i, rank, in_dims.v, out_dims.v, begin.v, mode); \
      if (src >= 0) ck_k_copy_elem(y, i, x, src, esz); else ck_k_copy_elem(y, i, v.w, 0, esz);) \
    K(scatter_nd, scatter_nd, if (red != CKRT_SCATTER_NONE) ck_k_scatter_nd_col(i, red, (float *)y, \
      (const float *)upd, idx, n_upd, k, dims.v, inner); else for (int64_t j = 0; j < n_upd; j++) { \
      int64_t row = ck_k_nd_row(idx, j, k, dims.v); if (row >= 0) ck_k_copy_elem(y, row * inner + i, upd, \
      j * inner + i, esz); }) \
    K(gather_nd, gather_nd, int64_t row = ck_k_nd_row(idx, i / inner, k, dims.v); \
      if (row >= 0) ck_k_copy_elem(y, i, x, row * inner + i % inner, esz);) \
    K(fill, fill, ck_k_copy_elem(y, i, v.w, 0, esz);) \
    K(range, range, switch (dt) { case CK_K_F32: ((float *)y)[i] = (float)ck_k_range_f(i, *(const float *)start, \
      *(const float *)delta); break; case CK_K_F64: ((double *)y)[i] = ck_k_range_f(i, *(const double *)start, \
      *(const double *)delta); break; case CK_K_I64: ((int64_t *)y)[i] = ck_k_range_i(i, *(const int64_t *)start, \
      *(const int64_t *)delta); break; default: ((int32_t *)y)[i] = (int32_t)ck_k_range_i(i, \
      *(const int32_t *)start, *(const int32_t *)delta); break; }) \
    /* training */ \
    K(cross_entropy, xent_rows, int64_t r = r0 + i, \
      l = lab_i64 ? ((const int64_t *)labels)[r] : ((const int32_t *)labels)[r]; out[i] = ck_k_xent_row(r, \
      logits, l, classes);) \
    K(cross_entropy, xent_accum, double s = first ? 0.0 : acc[0]; for (int64_t j = 0; j < cnt; j++) s += vals[j]; \
      acc[0] = s; if (loss) loss[0] = (float)(s / (double)rows);) \
    K(cross_entropy_grad, xent_grad, \
      int64_t l = lab_i64 ? ((const int64_t *)labels)[i] : ((const int32_t *)labels)[i]; ck_k_xent_grad_row(i, \
      dx, logits, l, classes, (float)((double)dloss[0] / (double)rows));) \
    /* every program: ckrt_main's high-water mark, found on the device (ckrt_arena_top; cuda_arena.c) */ \
    K(main, arena_top, int64_t t = ck_k_top_chunk(i, x, bytes, (uint8_t)fill); \
      if (t) atomicMax(top, (unsigned long long)t);) \
    /* data parallel: dp.c's reduction of the gradients (ckrt_grad_allreduce) on device memory */ \
    K(grad_allreduce, rank_mean, out[i] = ck_k_rank_mean(i, recv, count, ranks);) \
    K(grad_allreduce, copy_f32, y[i] = x[i];) \
    K(unary_grad, unary_grad, dx[i] = ck_k_unary_grad(op, dy[i], x[i], alpha, beta, lo, hi);) \
    K(softmax_grad, softmax_grad, ck_k_softmax_grad_line(i, log_sm, dx, dy, y, len, inner);) \
    K(layer_norm_grad, layer_norm_grad_row, ck_k_layer_norm_grad_row(i, dx, dy, x, scale, mean, inv_std, cols);) \
    K(layer_norm_grad, layer_norm_grad_col, ck_k_layer_norm_grad_col(i, dscale, dbias, dy, x, mean, inv_std, \
      rows, cols);) \
    K(layer_norm_grad, lng_part, ck_k_lng_part(i, part, cols, rows, chunk, dy, x, mean, inv_std);) \
    K(layer_norm_grad, lng_fin, if (dscale) dscale[i] = (float)ck_k_parts_sum(i, n, part, parts, 2, 0); \
      if (dbias) dbias[i] = (float)ck_k_parts_sum(i, n, part, parts, 2, 1);) \
    K(batch_norm_grad, batch_norm_grad, ck_k_batch_norm_grad_channel(i, dx, dscale, dbias, dy, x, scale, mean, \
      inv_std, N, C, S);) \
    K(batch_norm_grad, bng_part, ck_k_bng_part(i, part, C, S, cnt, chunk, dy, x, mean, inv_std);) \
    K(batch_norm_grad, bng_fin, ck_k_bng_fin(i, n, dscale, dbias, coef, part, parts, cnt);) \
    K(batch_norm_grad, bng_dx, dx[i] = ck_k_bng_dx(i, dy, x, scale, mean, inv_std, coef, C, S);) \
    K(batch_norm_apply, batch_norm_apply, y[i] = ck_k_batch_norm_apply(i, x, scale, bias, mean, inv_std, C, S);) \
    K(sgd, sgd, ck_k_sgd(i, p, g, buf, acc, gs, lr, mu, wd);) \
    K(sgd, grad_accum, ck_k_grad_accum(i, acc, g, first);) \
    K(adamw, adamw, ck_k_adamw(i, p, g, m, v, acc, gs, lr, b1, b2, eps, wd, bc1, bc2);) \
    REUSE(adamw, grad_accum) \
    K(conv_grad_input, col2im, dx[i] = ck_k_col2im(i, col, nsp, in_sp.v, out_sp.v, k.v, st.v, pb.v, dl.v);) \
    REUSE(conv_grad_weight, im2col) \
    K(pool_grad, pool_grad, dx[i] = ck_k_pool_grad(i, kind, dy, x, nsp, in_sp.v, out_sp.v, k.v, st.v, pb.v, pe.v, \
      dl.v, cip);) \
    K(gather_grad, gather_grad, ck_k_gather_grad(i / inner, i % inner, i % inner + 1, dx, dy, idx, idx_i64, len, \
      inner, n_idx);) \
    K(slice_grad, slice_grad, ck_k_copy_elem(dx, ck_k_strided_src(i, rank, dims.v, strides.v, base), dy, i, esz);) \
    K(pad_grad, pad_grad, dx[i] = ck_k_pad_grad(i, dy, rank, in_dims.v, out_dims.v, begin.v, mode);)

#endif
