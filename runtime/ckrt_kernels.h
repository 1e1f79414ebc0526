/* ckrt_kernels.h — kernel bodies written once, in C that compiles both as plain C (the CPU
 * backend loops over them) and as CUDA under NVRTC (thin __global__ wrappers map one thread to
 * one index). Each body computes ONE output element (or one row for the row-wise kernels, one
 * channel for batch-norm statistics, one block of 4 elements for dropout and the random ops) from its index, reads
 * only its arguments, and holds no state: the result cannot depend on how indices are spread
 * over threads, which is what makes every backend and thread count bit-identical.
 *
 * Rules for code in this file: no libc calls other than the math functions both sides have
 * (logf, sqrtf, powf, fabsf...; the float exp, erf and tanh are ck_expf, ck_erff and ck_tanhf of
 * ckrt_kernels_math.h, which vectorize and round the same on every backend), no static data, no
 * allocation, int64_t indices, and a // shape comment on every kernel argument.
 */
#ifndef CKRT_KERNELS_H
#define CKRT_KERNELS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CK_DEV static __device__ __forceinline__
#else
#include <math.h>
#include <stdint.h>
#define CK_DEV static inline
#endif

#include "ckrt_kernels_ops.h"
#include "ckrt_kernels_math.h"

/* Offset of output element i in an input with `strides` aligned to the output's dims
 * (0 on broadcast axes). dims, strides: (rank) */
CK_DEV int64_t ck_k_offset(int64_t i, int rank, const int64_t *dims, const int64_t *strides) {
    int64_t off = 0;
    for (int k = rank - 1; k >= 0; k--) {
        int64_t d = dims[k];
        off += (i % d) * strides[k];
        i /= d;
    }
    return off;
}

/* Chunk p of [0, cnt) in chunks of `chunk`: [*lo, *hi) (the split reductions' parts). */
CK_DEV void ck_k_chunk(int64_t p, int64_t chunk, int64_t cnt, int64_t *lo, int64_t *hi) {
    *lo = p * chunk;
    *hi = *lo + chunk < cnt ? *lo + chunk : cnt;
}

/* ---------------------------------------------------------------- binary */

/* Mod's remainders (the helpers its CKRT_BINARY_OPS rows call). fmod=0: the sign of the divisor,
 * as Python's %; fmod=1: the sign of the dividend, as C's % and fmod. An integer divisor of 0
 * yields 0 (the CPU reports it as an error first). */
CK_DEV int64_t ck_k_fmod_i64(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
CK_DEV int64_t ck_k_mod_i64(int64_t a, int64_t b) {
    int64_t r = ck_k_fmod_i64(a, b);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
CK_DEV float ck_k_mod_f(float a, float b) {
    float r = fmodf(a, b);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
CK_DEV double ck_k_mod_d(double a, double b) {
    double r = fmod(a, b);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

/* One case per row of CKRT_BINARY_OPS / CKRT_COMPARE_OPS (ckrt_kernels_ops.h), the row's
 * expression of a and b; an unknown code gives 0. */
#define CK_K_CASE_F32_(CODE, IR, F32, F64, I64) case CKRT_##CODE: return F32;
#define CK_K_CASE_F64_(CODE, IR, F32, F64, I64) case CKRT_##CODE: return F64;
#define CK_K_CASE_I64_(CODE, IR, F32, F64, I64) case CKRT_##CODE: return I64;
#define CK_K_CASE_CMP_(CODE, IR, EXPR) case CKRT_##CODE: return EXPR;

CK_DEV float ck_k_binary_f32(int op, float a, float b) {
    switch (op) {
    CKRT_BINARY_OPS(CK_K_CASE_F32_)
    default: return 0.0f;
    }
}

CK_DEV double ck_k_binary_f64(int op, double a, double b) {
    switch (op) {
    CKRT_BINARY_OPS(CK_K_CASE_F64_)
    default: return 0.0;
    }
}

/* Integer division truncates toward zero as in C; division by zero yields 0 (checked by the
 * caller on the CPU, where it is reported as an error). */
CK_DEV int64_t ck_k_binary_i64(int op, int64_t a, int64_t b) {
    switch (op) {
    CKRT_BINARY_OPS(CK_K_CASE_I64_)
    default: return 0;
    }
}

/* the compare ops (CKRT_EQUAL...) */
CK_DEV uint8_t ck_k_compare(int op, double a, double b) {
    switch (op) {
    CKRT_COMPARE_OPS(CK_K_CASE_CMP_)
    default: return 0;
    }
}
CK_DEV uint8_t ck_k_compare_i64(int op, int64_t a, int64_t b) {
    switch (op) {
    CKRT_COMPARE_OPS(CK_K_CASE_CMP_)
    default: return 0;
    }
}
#undef CK_K_CASE_F32_
#undef CK_K_CASE_F64_
#undef CK_K_CASE_I64_
#undef CK_K_CASE_CMP_

/* ---------------------------------------------------------------- unary */

/* Forward helpers the CKRT_UNARY_OPS rows call. */
CK_DEV float ck_k_sigmoid(float x) { return x >= 0 ? 1.0f / (1.0f + ck_expf(-x)) : ck_expf(x) / (1.0f + ck_expf(x)); }
CK_DEV float ck_k_gelu_tanh(float x) {
    return 0.5f * x * (1.0f + ck_tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}
/* max(0, min(1, alpha x + beta)); NaN stays NaN */
CK_DEV float ck_k_hard_sigmoid(float x, float alpha, float beta) {
    float v = alpha * x + beta;
    return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

/* One case per row of CKRT_UNARY_OPS (its FWD of x, alpha, beta) and CKRT_UNARY_INT_OPS. */
#define CK_K_CASE_FWD_(CODE, IR, ALPHA, BETA, FWD, DERIV) case CKRT_##CODE: return FWD;
#define CK_K_CASE_INT_(CODE, EXPR) case CKRT_##CODE: return EXPR;

CK_DEV float ck_k_unary_f32(int op, float x, float alpha, float beta) {
    (void)alpha, (void)beta;
    switch (op) {
    CKRT_UNARY_OPS(CK_K_CASE_FWD_)
    default: return 0.0f;
    }
}

CK_DEV int64_t ck_k_unary_i64(int op, int64_t x) {
    switch (op) {
    CKRT_UNARY_INT_OPS(CK_K_CASE_INT_)
    default: return 0;
    }
}
#undef CK_K_CASE_FWD_
#undef CK_K_CASE_INT_

/* ---------------------------------------------------------------- dtype codes */

/* The same numbering as ckrt_dtype (ckrt.h), spelled here so this file needs no other header
 * under NVRTC; cpu_elementwise.c checks that the two agree. */
#define CK_K_F32 1
#define CK_K_U8 2
#define CK_K_I8 3
#define CK_K_I16 4
#define CK_K_I32 5
#define CK_K_I64 6
#define CK_K_BOOL 7
#define CK_K_F64 9

/* ---------------------------------------------------------------- where, clip, cast */

/* y[i] = cond ? a : b for element size esz (1, 2, 4 or 8 bytes); ca, ia, ib: the element offsets
 * of output element i in cond, a, b (ck_k_offset). y, a, b: esz-byte elements. */
CK_DEV void ck_k_where(int64_t i, int esz, void *y, const uint8_t *cond, const void *a, const void *b, int64_t ic,
                       int64_t ia, int64_t ib) {
    const void *src = cond[ic] ? a : b;
    int64_t is = cond[ic] ? ia : ib;
    if (esz == 1) ((uint8_t *)y)[i] = ((const uint8_t *)src)[is];
    else if (esz == 2) ((uint16_t *)y)[i] = ((const uint16_t *)src)[is];
    else if (esz == 4) ((uint32_t *)y)[i] = ((const uint32_t *)src)[is];
    else ((uint64_t *)y)[i] = ((const uint64_t *)src)[is];
}

/* min(max(x, lo), hi) as numpy.clip: NaN stays NaN, lo > hi gives hi; a missing bound (has_* 0)
 * is no bound. */
CK_DEV float ck_k_clip_f32(float x, int has_lo, float lo, int has_hi, float hi) {
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    return x;
}
CK_DEV double ck_k_clip_f64(double x, int has_lo, double lo, int has_hi, double hi) {
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    return x;
}
CK_DEV int64_t ck_k_clip_i64(int64_t x, int has_lo, int64_t lo, int has_hi, int64_t hi) {
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    return x;
}

/* y[i] = (to) x[i] for to/from in {F32, F64, I64, I32, I16, I8, U8, BOOL} (CK_K_* codes).
 * Integers convert exactly to int64 then wrap to a narrower integer (two's complement, as numpy
 * does on x86); floats truncate toward zero into int64, saturating at its range, NaN -> 0, then
 * wrap; anything -> bool is x != 0; bool -> anything is 0 or 1; int64 -> float rounds once. */
CK_DEV void ck_k_cast(int to, int from, void *y, const void *x, int64_t i) {
    double f = 0.0;
    int64_t v = 0;
    int isf = 0;
    switch (from) {
    case CK_K_F32: f = ((const float *)x)[i], isf = 1; break;
    case CK_K_F64: f = ((const double *)x)[i], isf = 1; break;
    case CK_K_I64: v = ((const int64_t *)x)[i]; break;
    case CK_K_I32: v = ((const int32_t *)x)[i]; break;
    case CK_K_I16: v = ((const int16_t *)x)[i]; break;
    case CK_K_I8: v = ((const int8_t *)x)[i]; break;
    case CK_K_U8: v = ((const uint8_t *)x)[i]; break;
    case CK_K_BOOL: v = ((const uint8_t *)x)[i] != 0; break;
    default: break;
    }
    if (to == CK_K_F32) {
        ((float *)y)[i] = isf ? (float)f : (float)v;
        return;
    }
    if (to == CK_K_F64) {
        ((double *)y)[i] = isf ? f : (double)v;
        return;
    }
    if (to == CK_K_BOOL) {
        ((uint8_t *)y)[i] = isf ? f != 0.0 : v != 0;
        return;
    }
    if (isf) {
        if (f != f) v = 0;
        else if (f >= 9223372036854775808.0) v = INT64_MAX;
        else if (f <= -9223372036854775808.0) v = INT64_MIN;
        else v = (int64_t)f;
    }
    uint64_t u = (uint64_t)v;
    switch (to) {
    case CK_K_I64: ((int64_t *)y)[i] = v; break;
    case CK_K_I32: ((int32_t *)y)[i] = (int32_t)(uint32_t)u; break;
    case CK_K_I16: ((int16_t *)y)[i] = (int16_t)(uint16_t)u; break;
    case CK_K_I8: ((int8_t *)y)[i] = (int8_t)(uint8_t)u; break;
    case CK_K_U8: ((uint8_t *)y)[i] = (uint8_t)u; break;
    default: break;
    }
}

/* ---------------------------------------------------------------- sums in a fixed order over 8 lanes */

/* The row kernels below sum a row of n terms in one fixed order that vectorizes: term j goes to
 * lane j % 8 while j < n - n % 8 (each lane in index order), the lanes are combined pairwise
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), then the last n % 8 terms are added in
 * index order. The order depends on n alone, never on threads or the backend. */
#define CK_LANES 8
#define CK_LANES_COMBINE(a) ((((a)[0] + (a)[1]) + ((a)[2] + (a)[3])) + (((a)[4] + (a)[5]) + ((a)[6] + (a)[7])))

/* ---------------------------------------------------------------- softmax (one row per call) */

/* Row r of x, y: (outer, len, inner), r in [0, outer * inner): the len elements at
 * (r / inner) * len * inner + r % inner, stride inner. Max-subtracted; the sum of exponentials
 * in float in the 8-lane order above. log: y = x - max - log(sum exp(x - max)); else
 * y = exp(x - max) * (1 / sum). y may be x. */
CK_DEV void ck_k_softmax_row(int64_t r, int log_, float *y, const float *x, int64_t len, int64_t inner) {
    int64_t base = (r / inner) * len * inner + r % inner, n8 = len - len % CK_LANES;
    if (len <= 0) return;
    const float *xr = x + base;
    float *yr = y + base;
    float m = xr[0];
    if (n8 > 0) { /* the max is exact in any order (a NaN makes every output NaN either way) */
        float mx[CK_LANES];
        for (int l = 0; l < CK_LANES; l++) mx[l] = xr[l * inner];
        for (int64_t j = CK_LANES; j < n8; j += CK_LANES)
            for (int l = 0; l < CK_LANES; l++) {
                float v = xr[(j + l) * inner];
                mx[l] = v > mx[l] ? v : mx[l];
            }
        for (int l = 0; l < CK_LANES; l++) m = mx[l] > m ? mx[l] : m;
    }
    for (int64_t j = n8; j < len; j++) m = xr[j * inner] > m ? xr[j * inner] : m;
    float acc[CK_LANES] = {0};
    for (int64_t j = 0; j < n8; j += CK_LANES)
        for (int l = 0; l < CK_LANES; l++) {
            float e = ck_expf(xr[(j + l) * inner] - m);
            if (!log_) yr[(j + l) * inner] = e;
            acc[l] += e;
        }
    float s = CK_LANES_COMBINE(acc);
    for (int64_t j = n8; j < len; j++) {
        float e = ck_expf(xr[j * inner] - m);
        if (!log_) yr[j * inner] = e;
        s += e;
    }
    if (log_) {
        float ls = logf(s);
        for (int64_t j = 0; j < len; j++) yr[j * inner] = (xr[j * inner] - m) - ls;
    } else {
        float inv = 1.0f / s;
        for (int64_t j = 0; j < len; j++) yr[j * inner] *= inv;
    }
}

/* ---------------------------------------------------------------- layer norm (one row per call) */

/* Row r of x, y: (rows, cols); scale, bias: (cols), bias may be NULL; mean, inv_std: (rows) or
 * NULL. Two passes in double, each summed in the 8-lane order above: mean, then the mean squared
 * deviation (biased); inv_std = 1 / sqrt(var + eps); y = (x - mean) * inv_std * scale + bias. */
CK_DEV void ck_k_layer_norm_row(int64_t r, float *y, float *mean, float *inv_std, const float *x, const float *scale,
                                const float *bias, int64_t cols, float eps) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    int64_t n8 = cols - cols % CK_LANES;
    double a[CK_LANES] = {0};
    for (int64_t j = 0; j < n8; j += CK_LANES)
        for (int l = 0; l < CK_LANES; l++) a[l] += (double)xr[j + l];
    double s = CK_LANES_COMBINE(a);
    for (int64_t j = n8; j < cols; j++) s += xr[j];
    double mu = cols > 0 ? s / (double)cols : 0.0;
    double b[CK_LANES] = {0};
    for (int64_t j = 0; j < n8; j += CK_LANES)
        for (int l = 0; l < CK_LANES; l++) {
            double d = xr[j + l] - mu;
            b[l] += d * d;
        }
    double q = CK_LANES_COMBINE(b);
    for (int64_t j = n8; j < cols; j++) {
        double d = xr[j] - mu;
        q += d * d;
    }
    double var = cols > 0 ? q / (double)cols : 0.0;
    double is = 1.0 / sqrt(var + (double)eps);
    for (int64_t j = 0; j < cols; j++) {
        float nv = (float)((xr[j] - mu) * is);
        yr[j] = bias ? nv * scale[j] + bias[j] : nv * scale[j];
    }
    if (mean) mean[r] = (float)mu;
    if (inv_std) inv_std[r] = (float)is;
}

/* ---------------------------------------------------------------- batch norm */

/* Inference: channel c's 1 / sqrt(var[c] + eps), and one element normalized with it. */
CK_DEV float ck_k_batch_norm_infer_is(const float *var, int64_t c, float eps) { return 1.0f / sqrtf(var[c] + eps); }
CK_DEV float ck_k_batch_norm_infer1(float x, float mean, float is, float scale, float bias) { return (x - mean) * is * scale + bias; }

/* Inference, element i of x, y: (N, C, S): y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c]
 * with c = (i / S) % C; scale, bias, mean, var: (C). */
CK_DEV float ck_k_batch_norm_infer(int64_t i, const float *x, const float *scale, const float *bias, const float *mean,
                                   const float *var, int64_t C, int64_t S, float eps) {
    int64_t c = (i / S) % C;
    return ck_k_batch_norm_infer1(x[i], mean[c], ck_k_batch_norm_infer_is(var, c, eps), scale[c], bias[c]);
}

/* One normalized element of a training-mode BatchNormalization from the float statistics the
 * forward saved: y = (x - mean) * inv_std (in double, rounded once) * scale + bias. The forward
 * (ck_k_batch_norm_train_channel) and its recompute (ckptc.BatchNormApply) both call this with
 * the same float arguments, so a recomputed y has the forward's bits. The float multiply-add is
 * spelled with round-to-nearest intrinsics under CUDA so that no FMA contraction can make the
 * two call sites (or the two backends) round differently. */
CK_DEV float ck_k_batch_norm_apply1(float x, float mean, float inv_std, float scale, float bias) {
    float nv = (float)(((double)x - (double)mean) * (double)inv_std);
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
    return __fadd_rn(__fmul_rn(nv, scale), bias);
#else
    return nv * scale + bias;
#endif
}

/* One element of BatchNorm's input gradient: k0 (dy - mb - xhat ms), xhat = (x - mu) is, k0 = scale
 * is, mb and ms the channel's mean of dy and of dy xhat (ck_k_batch_norm_grad_channel and the
 * GPU's split backward, ck_k_bng_dx). */
CK_DEV float ck_k_batch_norm_grad_dx1(float dy, float x, double mu, double is, double k0, double mb, double ms) {
    double xh = ((double)x - mu) * is;
    return (float)(k0 * ((double)dy - mb - xh * ms));
}

/* Channel ch's statistics from its double mean mu and sum of squared deviations q over cnt
 * elements: *mean_f, *inv_std_f, and the running and saved statistics as below (the part of
 * ck_k_batch_norm_train_channel after the sums; the GPU's split statistics, ck_k_bn_stats, end
 * with it too). */
CK_DEV void ck_k_batch_norm_finish(int64_t ch, double mu, double q, int64_t cnt, float *run_mean, float *run_var,
                                   float *saved_mean, float *saved_inv_std, const float *in_mean, const float *in_var,
                                   float eps, float momentum, int unbiased, float *mean_f, float *inv_std_f) {
    double var = cnt > 0 ? q / (double)cnt : 0.0;
    *mean_f = (float)mu, *inv_std_f = (float)(1.0 / sqrt(var + (double)eps));
    double rv = unbiased && cnt > 1 ? var * ((double)cnt / (double)(cnt - 1)) : var;
    if (run_mean) run_mean[ch] = (float)((double)momentum * in_mean[ch] + (1.0 - (double)momentum) * mu);
    if (run_var) run_var[ch] = (float)((double)momentum * in_var[ch] + (1.0 - (double)momentum) * rv);
    if (saved_mean) saved_mean[ch] = *mean_f;
    if (saved_inv_std) saved_inv_std[ch] = *inv_std_f;
}

/* Training, channel ch of x, y: (N, C, S): batch mean and biased variance over (N, S) in double
 * (two passes; each adds a plane's element k to lane k % 8, the last S % 8 of a plane to lanes
 * 0.. in order, and combines the lanes as CK_LANES_COMBINE: an order fixed by the shape, with
 * independent chains that vectorize), rounded to float (mean_f, inv_std_f = 1 / sqrt(var + eps)); every
 * element normalized by ck_k_batch_norm_apply1 with them. Then, each when non-NULL (all (C)):
 * run_mean = momentum * in_mean + (1 - momentum) * batch_mean and
 * run_var = momentum * in_var + (1 - momentum) * var * (unbiased ? cnt / (cnt - 1) : 1), cnt = N * S
 * (the ONNX spec and its node tests use the biased variance, PyTorch the unbiased one; cnt 1
 * keeps the biased one), both from the double statistics; saved_mean = mean_f,
 * saved_inv_std = inv_std_f. */
CK_DEV void ck_k_batch_norm_train_channel(int64_t ch, float *y, float *run_mean, float *run_var, float *saved_mean,
                                          float *saved_inv_std, const float *x, const float *scale, const float *bias,
                                          const float *in_mean, const float *in_var, int64_t N, int64_t C, int64_t S,
                                          float eps, float momentum, int unbiased) {
    int64_t cnt = N * S;
    int64_t s8 = S - S % CK_LANES;
    double acc[CK_LANES] = {0};
    for (int64_t n = 0; n < N; n++) {
        const float *p = x + (n * C + ch) * S;
        for (int64_t k = 0; k < s8; k += CK_LANES)
            for (int l = 0; l < CK_LANES; l++) acc[l] += p[k + l];
        for (int64_t k = s8; k < S; k++) acc[k - s8] += p[k];
    }
    double mu = cnt > 0 ? CK_LANES_COMBINE(acc) / (double)cnt : 0.0;
    for (int l = 0; l < CK_LANES; l++) acc[l] = 0.0;
    for (int64_t n = 0; n < N; n++) {
        const float *p = x + (n * C + ch) * S;
        for (int64_t k = 0; k < s8; k += CK_LANES)
            for (int l = 0; l < CK_LANES; l++) {
                double d = p[k + l] - mu;
                acc[l] += d * d;
            }
        for (int64_t k = s8; k < S; k++) {
            double d = p[k] - mu;
            acc[k - s8] += d * d;
        }
    }
    double q = CK_LANES_COMBINE(acc);
    float mean_f, inv_std_f;
    ck_k_batch_norm_finish(ch, mu, q, cnt, run_mean, run_var, saved_mean, saved_inv_std, in_mean, in_var, eps, momentum,
                           unbiased, &mean_f, &inv_std_f);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < S; k++) {
            int64_t i = (n * C + ch) * S + k;
            y[i] = ck_k_batch_norm_apply1(x[i], mean_f, inv_std_f, scale[ch], bias[ch]);
        }
}

/* ---------------------------------------------------------------- counter-based RNG, dropout */

/* Philox4x32-10 (Salmon et al., SC'11): x (4) is the counter on entry and the 4 random words on
 * exit; (k0, k1) the key. 10 rounds, the key bumped by the Weyl constants between rounds. */
CK_DEV void ck_k_philox4x32_10(uint32_t *x, uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * x[0], p1 = (uint64_t)0xCD9E8D57u * x[2];
        uint32_t y0 = (uint32_t)(p1 >> 32) ^ x[1] ^ k0, y1 = (uint32_t)p1;
        uint32_t y2 = (uint32_t)(p0 >> 32) ^ x[3] ^ k1, y3 = (uint32_t)p0;
        x[0] = y0, x[1] = y1, x[2] = y2, x[3] = y3;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
}

/* The 4 random words of block b for (seed, step, key): Philox4x32-10 with
 *   key     = (seed & 0xffffffff, seed >> 32)
 *   counter = (b & 0xffffffff, b >> 32, step & 0xffffffff, key & 0xffffffff)
 * Element i of a tensor uses word i % 4 of block i / 4. */
CK_DEV void ck_k_rng_block(uint32_t *w, uint64_t seed, uint64_t step, uint64_t key, uint64_t b) {
    w[0] = (uint32_t)b, w[1] = (uint32_t)(b >> 32), w[2] = (uint32_t)step, w[3] = (uint32_t)key;
    ck_k_philox4x32_10(w, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* A random word as a float uniform in [0, 1): its top 24 bits times 2^-24 (exact). */
CK_DEV float ck_k_uniform(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

/* Dropout on elements 4b .. 4b+3 (those < n) of x, y, mask: (n); mask may be NULL. Element i
 * draws counter first + i: word (first + i) % 4 of block (first + i) / 4. first is 0 except in
 * data parallel, where rank r passes r * n: each rank's counters are disjoint, and when the batch
 * is the tensor's outermost axis rank r's elements are exactly the global batch's elements
 * [r*n, (r+1)*n), so N ranks draw the masks one process with the whole batch draws.
 * Element i is kept iff ck_k_uniform(word) >= ratio; kept: y = x * scale (scale = 1 / (1 - ratio)),
 * else 0. ratio 0 keeps everything without drawing: y = x, mask all true. */
CK_DEV void ck_k_dropout_block(int64_t b, float *y, uint8_t *mask, const float *x, int64_t n, float ratio, float scale,
                               uint64_t seed, uint64_t step, uint64_t key, uint64_t first) {
    uint32_t w[4] = {0, 0, 0, 0};
    uint64_t have = ~(uint64_t)0; /* the block in w */
    for (int k = 0; k < 4; k++) {
        int64_t i = b * 4 + k;
        if (i >= n) break;
        uint64_t g = first + (uint64_t)i;
        if (ratio > 0.0f && g / 4 != have) ck_k_rng_block(w, seed, step, key, have = g / 4);
        int keep = ratio > 0.0f ? ck_k_uniform(w[g % 4]) >= ratio : 1;
        y[i] = keep ? (ratio > 0.0f ? x[i] * scale : x[i]) : 0.0f;
        if (mask) mask[i] = (uint8_t)keep;
    }
}

/* ---------------------------------------------------------------- random ops (ckrt_random) */

/* RandomUniform[Like], RandomNormal[Like] and Bernoulli on the counter RNG of Dropout (kinds
 * CKRT_RAND_*, ckrt_kernels_ops.h). */
/* Stores the double v as element i of y, of dtype `to` (CK_K_F32, F64, BOOL: v != 0, I64, I32). */
CK_DEV void ck_k_store_real(int to, void *y, int64_t i, double v) {
    switch (to) {
    case CK_K_F32: ((float *)y)[i] = (float)v; break;
    case CK_K_F64: ((double *)y)[i] = v; break;
    case CK_K_BOOL: ((uint8_t *)y)[i] = v != 0.0; break;
    case CK_K_I64: ((int64_t *)y)[i] = (int64_t)v; break;
    case CK_K_I32: ((int32_t *)y)[i] = (int32_t)v; break;
    default: break;
    }
}

/* Elements 4b .. 4b+3 (those < n) of a random op's output y: (n), of dtype `to`; p: (n) the
 * Bernoulli probabilities (dtype pdt, CK_K_F32 or F64), else unused. Element i has the counter
 * g = first + i (first as in ck_k_dropout_block) and, in double, rounded once to `to`:
 *   uniform:   a + (b - a) u, u = word g % 4 of block g / 4 as ck_k_uniform (24 bits, [0, 1));
 *              a = low, b = high
 *   bernoulli: 1 if u < p[i] else 0, u as for uniform (so p 0 never, p 1 always)
 *   normal:    a + b z, Box-Muller from words 2 (g % 2) and 2 (g % 2) + 1 of block g / 2:
 *              z = sqrt(-2 ln u1) cos(2 pi u2), u1 = (w + 1) 2^-32 in (0, 1], u2 = w' 2^-32;
 *              a = mean, b = scale
 * expect (eval, --disable-dropout): no draw; y = the expectation: (a + b) / 2, a, p[i]. */
CK_DEV void ck_k_random_block(int64_t b, int kind, int to, void *y, const void *p, int pdt, int64_t n, double a,
                              double bb, int expect, uint64_t seed, uint64_t step, uint64_t key, uint64_t first) {
    uint32_t w[4] = {0, 0, 0, 0};
    uint64_t have = ~(uint64_t)0; /* the block in w */
    for (int k = 0; k < 4; k++) {
        int64_t i = b * 4 + k;
        if (i >= n) break;
        uint64_t g = first + (uint64_t)i;
        double pv = 0.0, v;
        if (kind == CKRT_RAND_BERNOULLI) pv = pdt == CK_K_F64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
        if (expect) {
            v = kind == CKRT_RAND_UNIFORM ? 0.5 * (a + bb) : kind == CKRT_RAND_NORMAL ? a : pv;
        } else if (kind == CKRT_RAND_NORMAL) {
            if (g / 2 != have) ck_k_rng_block(w, seed, step, key, have = g / 2);
            int j = (int)(g % 2) * 2;
            double u1 = ((double)w[j] + 1.0) * 2.3283064365386962890625e-10, u2 = (double)w[j + 1] * 2.3283064365386962890625e-10;
            v = a + bb * (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        } else {
            if (g / 4 != have) ck_k_rng_block(w, seed, step, key, have = g / 4);
            double u = (double)ck_k_uniform(w[g % 4]);
            v = kind == CKRT_RAND_UNIFORM ? a + (bb - a) * u : (u < pv ? 1.0 : 0.0);
        }
        ck_k_store_real(to, y, i, v);
    }
}

/* ---------------------------------------------------------------- data parallel (runtime/dp.c) */

/* Element i of this rank's slice of a gradient bucket: recv holds the ranks' copies of the slice
 * (ranks blocks of count floats, rank q's at q * count); they are summed in rank order 0, 1, ...,
 * then divided by the number of ranks. The order is fixed, so every rank, every run and both
 * backends get the same bits. */
CK_DEV float ck_k_rank_mean(int64_t i, const float *recv, int64_t count, int ranks) {
    float s = recv[i];
    for (int q = 1; q < ranks; q++) s += recv[(int64_t)q * count + i];
    return s / (float)ranks;
}

/* ---------------------------------------------------------------- reductions (one output per call) */

/* Output element o of a reduction of x viewed as kept axes (nk: kdims, kstrides) and reduced axes
 * (nr: rdims, rstrides), strides in elements of x. The reduced elements are visited in row-major
 * order of rdims. f32 sums in double; mean divides by the count (prod rdims). */
CK_DEV int64_t ck_k_reduce_base(int64_t o, int nk, const int64_t *kdims, const int64_t *kstrides) {
    return ck_k_offset(o, nk, kdims, kstrides);
}
CK_DEV float ck_k_reduce_f32(int64_t o, int mean, const float *x, int nk, const int64_t *kdims, const int64_t *kstrides,
                             int nr, const int64_t *rdims, const int64_t *rstrides) {
    int64_t base = ck_k_reduce_base(o, nk, kdims, kstrides), cnt = 1;
    for (int k = 0; k < nr; k++) cnt *= rdims[k];
    double s = 0.0;
    for (int64_t j = 0; j < cnt; j++) s += x[base + ck_k_offset(j, nr, rdims, rstrides)];
    return (float)(mean ? s / (double)cnt : s);
}
/* int64/int32 sums: int64 accumulator, wrapping (two's complement). is64: x is int64, else int32. */
CK_DEV int64_t ck_k_reduce_sum_int(int64_t o, int is64, const void *x, int nk, const int64_t *kdims,
                                   const int64_t *kstrides, int nr, const int64_t *rdims, const int64_t *rstrides) {
    int64_t base = ck_k_reduce_base(o, nk, kdims, kstrides), cnt = 1;
    for (int k = 0; k < nr; k++) cnt *= rdims[k];
    uint64_t s = 0;
    for (int64_t j = 0; j < cnt; j++) {
        int64_t at = base + ck_k_offset(j, nr, rdims, rstrides);
        s += is64 ? (uint64_t)((const int64_t *)x)[at] : (uint64_t)(int64_t)((const int32_t *)x)[at];
    }
    return (int64_t)s;
}

/* GlobalAveragePool, output r of x: (NC, S): the mean of row r, summed in double in order. */
CK_DEV float ck_k_global_avg_pool(int64_t r, const float *x, int64_t s) {
    double acc = 0.0;
    for (int64_t k = 0; k < s; k++) acc += x[r * s + k];
    return (float)(acc / (double)s);
}

#endif
