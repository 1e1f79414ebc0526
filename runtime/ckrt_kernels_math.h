/* ckrt_kernels_math.h — expf, erff and tanhf written out in plain float arithmetic, for the kernel bodies.
 *
 * Why our own: libm's erff/expf/tanhf are scalar calls, so a loop over them cannot vectorize;
 * in a GPT step the GELU (erf and exp per element, forward and backward) took 16% of the time at
 * 1 thread, more than the attention's GEMMs. These versions are straight-line code (both
 * branches computed, then selected) over +, -, *, / and integer bit operations, so the compiler
 * vectorizes the loops that call them, and, since IEEE arithmetic without contraction rounds the
 * same everywhere, the CPU (any vector width), the CUDA emulation and NVRTC (--fmad=false)
 * compute the same bits. The CPU kernel files are compiled with -ffp-contract=off for that
 * reason (CMakeLists.txt).
 *
 * Accuracy against the float64 functions, measured by tests/test_math.c over dense sweeps:
 * ck_expf within 1.2 ulp on its normal range (subnormal results within one subnormal step),
 * ck_erff within 1.8 ulp, ck_tanhf within 1.3 ulp; NaN in, NaN out; +-inf to the limits.
 *
 * How (coefficients fitted here, by weighted least squares on Chebyshev nodes, then rounded
 * to float):
 *   exp:  n = round(x log2 e); r = x - n ln2 (ln2 in two parts, the high one with 9 bits so
 *         n ln2_hi is exact); e^r by its Taylor series to r^7 (|r| <= 0.347: truncation 5e-9
 *         relative); times 2^n as two factors 2^(n/2), 2^(n - n/2), so that subnormal results
 *         round once and overflow reaches inf. x is clamped to [-104, 89] first (both ends
 *         already round to 0 and inf), which comparisons do without touching a NaN.
 *   erf:  |x| < 1: x + x S(x^2) (S = erf(x)/x - 1 as a polynomial of degree 6 in x^2);
 *         1 <= |x| < 3.92: 1 - e^(-x^2) Q(|x|), Q of degree 10 fitted to erfc(x) e^(x^2);
 *         beyond, 1 (erfc(3.92) < half an ulp of 1).
 *   tanh: |x| < 0.625: x + x T(x^2) (degree 6); beyond, 1 - 2 / (e^(2|x|) + 1), signed.
 *
 * Same rules as ckrt_kernels.h (it includes this file): C that also compiles as CUDA, no
 * static data, no libc calls.
 */
#ifndef CKRT_KERNELS_MATH_H
#define CKRT_KERNELS_MATH_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CK_MATH_DEV static __device__ __forceinline__
CK_MATH_DEV int32_t ck_f2i(float f) { return __float_as_int(f); }
CK_MATH_DEV float ck_i2f(int32_t i) { return __int_as_float(i); }
#else
#include <stdint.h>
#define CK_MATH_DEV static inline
CK_MATH_DEV int32_t ck_f2i(float f) {
    union { float f; int32_t i; } u;
    u.f = f;
    return u.i;
}
CK_MATH_DEV float ck_i2f(int32_t i) {
    union { float f; int32_t i; } u;
    u.i = i;
    return u.f;
}
#endif

CK_MATH_DEV float ck_expf(float x) {
    const float magic = 0x1.8p23f; /* 1.5 * 2^23: adding it rounds to an integer, kept in the low bits */
    x = x > 89.0f ? 89.0f : x;
    x = x < -104.0f ? -104.0f : x;
    float t = x * 0x1.715476p+0f + magic; /* log2(e) */
    int32_t n = ck_f2i(t) - ck_f2i(magic);
    float nf = t - magic;
    float r = x - nf * 0x1.63p-1f; /* ln2_hi = 0.693359375 */
    r = r - nf * -0x1.bd0106p-13f; /* ln2_lo */
    float p = 0x1.a01a02p-13f; /* 1/7! ... 1/0! */
    p = p * r + 0x1.6c16c2p-10f;
    p = p * r + 0x1.111112p-7f;
    p = p * r + 0x1.555556p-5f;
    p = p * r + 0x1.555556p-3f;
    p = p * r + 0x1p-1f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* n in [-150, 129], so each biased exponent is in [52, 191]; the mask only matters for a NaN
     * x, whose n is garbage (p is NaN then), keeping the shift defined */
    int32_t n1 = n >> 1, n2 = n - n1;
    return p * ck_i2f(((n1 + 127) & 0xff) << 23) * ck_i2f(((n2 + 127) & 0xff) << 23);
}

CK_MATH_DEV float ck_erff(float x) {
    float a = x < 0.0f ? -x : x, z = x * x;
    float s = 0x1.496bf8p-14f; /* |x| < 1: erf(x) = x + x S(x^2) */
    s = s * z + -0x1.a3f7bap-11f;
    s = s * z + 0x1.5405d0p-8f;
    s = s * z + -0x1.b7f912p-6f;
    s = s * z + 0x1.ce2cf8p-4f;
    s = s * z + -0x1.81273ep-2f;
    s = s * z + 0x1.06eba8p-3f;
    float small = x + x * s;
    float q = 0x1.cb4772p-20f; /* 1 <= |x| < 3.92: erf(|x|) = 1 - e^(-x^2) Q(|x|) */
    q = q * a + -0x1.9b41e6p-15f;
    q = q * a + 0x1.4d80d2p-11f;
    q = q * a + -0x1.44a2d8p-8f;
    q = q * a + 0x1.a8399ep-6f;
    q = q * a + -0x1.8abfd4p-4f;
    q = q * a + 0x1.0f3690p-2f;
    q = q * a + -0x1.1a01f0p-1f;
    q = q * a + 0x1.c2fad4p-1f;
    q = q * a + -0x1.15da26p+0f;
    q = q * a + 0x1.fc5ea2p-1f;
    float big = a >= 3.92f ? 1.0f : 1.0f - ck_expf(-z) * q;
    big = x < 0.0f ? -big : big;
    return a < 1.0f ? small : big; /* NaN: a < 1 is false, big is NaN */
}

CK_MATH_DEV float ck_tanhf(float x) {
    float a = x < 0.0f ? -x : x, z = x * x;
    float t = 0x1.16feacp-9f; /* |x| < 0.625: tanh(x) = x + x T(x^2) */
    t = t * z + -0x1.0b5c2ep-7f;
    t = t * z + 0x1.63663cp-6f;
    t = t * z + -0x1.b9ea40p-5f;
    t = t * z + 0x1.111048p-3f;
    t = t * z + -0x1.555552p-2f;
    t = t * z + -0x1.3ba680p-33f;
    float big = 1.0f - 2.0f / (ck_expf(2.0f * a) + 1.0f);
    big = x < 0.0f ? -big : big;
    float small = a < 0x1p-12f ? x : x + x * t; /* tanh(x) rounds to x there; and -0 stays -0 */
    return a < 0.625f ? small : big;
}

#endif
