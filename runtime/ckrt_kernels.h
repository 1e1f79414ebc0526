/* ckrt_kernels.h — kernel bodies written once, in C that compiles both as plain C (the CPU
 * backend loops over them) and as CUDA under NVRTC (thin __global__ wrappers map one thread to
 * one index). Each body computes ONE output element (or one row, for row-wise kernels) from its
 * index, reads only its arguments, and holds no state: the result cannot depend on how indices
 * are spread over threads, which is what makes every backend and thread count bit-identical.
 *
 * Rules for code in this file: no libc calls other than the math functions both sides have
 * (expf, logf, sqrtf, tanhf, erff, powf, fabsf...), no static data, no allocation, int64_t
 * indices, and a // shape comment on every kernel argument.
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

/* ---------------------------------------------------------------- binary */

/* op codes as CKRT_ADD... in ckrt_ops.h */
CK_DEV float ck_k_binary_f32(int op, float a, float b) {
    switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: return powf(a, b);
    default: return 0.0f;
    }
}

CK_DEV double ck_k_binary_f64(int op, double a, double b) {
    switch (op) {
    case 0: return a + b;
    case 1: return a - b;
    case 2: return a * b;
    case 3: return a / b;
    case 4: return pow(a, b);
    default: return 0.0;
    }
}

/* Integer division truncates toward zero as in C; division by zero yields 0 (checked by the
 * caller on the CPU, where it is reported as an error). */
CK_DEV int64_t ck_k_binary_i64(int op, int64_t a, int64_t b) {
    switch (op) {
    case 0: return (int64_t)((uint64_t)a + (uint64_t)b);
    case 1: return (int64_t)((uint64_t)a - (uint64_t)b);
    case 2: return (int64_t)((uint64_t)a * (uint64_t)b);
    case 3: return b == 0 || (b == -1 && a == INT64_MIN) ? 0 : a / b;
    default: return 0;
    }
}

/* compare ops 5 (EQUAL), 6 (LESS), 7 (GREATER) */
CK_DEV uint8_t ck_k_compare(int op, double a, double b) {
    return op == 5 ? a == b : op == 6 ? a < b : a > b;
}
CK_DEV uint8_t ck_k_compare_i64(int op, int64_t a, int64_t b) {
    return op == 5 ? a == b : op == 6 ? a < b : a > b;
}

/* ---------------------------------------------------------------- unary */

/* op codes as CKRT_SQRT... in ckrt_ops.h */
CK_DEV float ck_k_unary_f32(int op, float x, float alpha) {
    switch (op) {
    case 0: return sqrtf(x);
    case 1: return 1.0f / x;
    case 2: return -x;
    case 3: return expf(x);
    case 4: return logf(x);
    case 5: return fabsf(x);
    case 6: return tanhf(x);
    case 7: return x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
    case 8: return x > 0 ? x : 0.0f;
    case 9: return x >= 0 ? x : alpha * x;
    case 10: return erff(x);
    case 11: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
    case 12: return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
    default: return 0.0f;
    }
}

CK_DEV int64_t ck_k_unary_i64(int op, int64_t x) {
    switch (op) {
    case 2: return (int64_t)(0 - (uint64_t)x);
    case 5: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case 8: return x > 0 ? x : 0;
    default: return 0;
    }
}

#endif
