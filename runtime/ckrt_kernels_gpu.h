/* ckrt_kernels_gpu.h — what the GPU's thin __global__ wrappers need besides the kernel bodies of
 * ckrt_kernels*.h: the launch geometry (one grid-stride loop, shared by every wrapper, and the
 * grid the host computes for it), the by-value array type for dims and strides (kernel arguments
 * cannot point into host memory), and a few element bodies the CPU backend spells inline with
 * BLAS or memcpy (GEMM's broadcast C, a bias add, byte-sized element copies, integer loads).
 * Under the rules of ckrt_kernels.h: C that also compiles as CUDA, no state, int64_t indices.
 */
#ifndef CKRT_KERNELS_GPU_H
#define CKRT_KERNELS_GPU_H

#include "ckrt_kernels.h"

/* Threads per block and the most blocks one launch uses; work beyond grid * block is picked up
 * by the grid-stride loop. */
#define CK_G_BLOCK 256
#define CK_G_MAX_GRID 65535

/* The grid for n work items (n >= 1): ceil(n / CK_G_BLOCK) blocks, at most CK_G_MAX_GRID. */
#define CK_G_BLOCKS(n) (((n) + CK_G_BLOCK - 1) / CK_G_BLOCK)
#define CK_G_GRID(n) (CK_G_BLOCKS(n) > CK_G_MAX_GRID ? CK_G_MAX_GRID : CK_G_BLOCKS(n))

/* The loop every wrapper runs: work item i of n, each visited by exactly one thread.
 * CK_G_VISIT is a hook for the CPU emulation (tests/cuda_emu.c), which counts the visits. */
#ifndef CK_G_VISIT
#define CK_G_VISIT(i, n) 1
#endif
#define CK_G_LOOP(i, n)                                                                               \
    for (int64_t i = (int64_t)blockIdx.x * (int64_t)blockDim.x + (int64_t)threadIdx.x; i < (n) && CK_G_VISIT(i, n); \
         i += (int64_t)gridDim.x * (int64_t)blockDim.x)

/* dims, strides: up to CK_K_MAX_RANK (8) entries, passed to kernels by value */
typedef struct ck_dims {
    int64_t v[8];
} ck_dims;

/* A fill value of up to 16 bytes, by value. */
typedef struct ck_value16 {
    uint64_t w[2];
} ck_value16;

/* Copies element j of x to element i of y, esz bytes each (1, 2, 4, 8 or any other size). */
CK_DEV void ck_k_copy_elem(void *y, int64_t i, const void *x, int64_t j, int esz) {
    if (esz == 1) ((uint8_t *)y)[i] = ((const uint8_t *)x)[j];
    else if (esz == 2) ((uint16_t *)y)[i] = ((const uint16_t *)x)[j];
    else if (esz == 4) ((uint32_t *)y)[i] = ((const uint32_t *)x)[j];
    else if (esz == 8) ((uint64_t *)y)[i] = ((const uint64_t *)x)[j];
    else
        for (int b = 0; b < esz; b++) ((uint8_t *)y)[i * esz + b] = ((const uint8_t *)x)[j * esz + b];
}

/* Element i of an integer array of dtype dt (CK_K_I64, I32, I16, I8, U8), as int64; and back
 * (the value is representable: it is an element or a bound of that dtype). */
CK_DEV int64_t ck_k_load_int(int dt, const void *p, int64_t i) {
    switch (dt) {
    case CK_K_I64: return ((const int64_t *)p)[i];
    case CK_K_I32: return ((const int32_t *)p)[i];
    case CK_K_I16: return ((const int16_t *)p)[i];
    case CK_K_I8: return ((const int8_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}
CK_DEV void ck_k_store_int(int dt, void *p, int64_t i, int64_t v) {
    switch (dt) {
    case CK_K_I64: ((int64_t *)p)[i] = v; break;
    case CK_K_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case CK_K_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case CK_K_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    default: ((uint8_t *)p)[i] = (uint8_t)v; break;
    }
}

/* Gemm's C operand broadcast to element i of y: (M, N) from cm: (cm_rows, cm_cols), each 1 or
 * the full extent (what the CPU's ckrt_gemm writes before its sgemm with beta). */
CK_DEV float ck_k_gemm_cm(int64_t i, const float *cm, int64_t N, int64_t cm_rows, int64_t cm_cols) {
    int64_t r = i / N, col = i % N;
    return cm[(cm_rows == 1 ? 0 : r) * cm_cols + (cm_cols == 1 ? 0 : col)];
}

/* The arena's high-water search (ckrt_arena_top; one work item per chunk of CK_K_TOP_CHUNK bytes):
 * one past the last byte of chunk i of x (n bytes, x 8-byte aligned) that does not hold `fill`,
 * counted from x; 0 when the whole chunk still holds it. Words first, then the bytes of the last
 * word that differs. */
#define CK_K_TOP_CHUNK 4096
CK_DEV int64_t ck_k_top_chunk(int64_t i, const uint8_t *x, int64_t n, uint8_t fill) {
    int64_t lo = i * CK_K_TOP_CHUNK, e = lo + CK_K_TOP_CHUNK < n ? lo + CK_K_TOP_CHUNK : n;
    uint64_t pattern = 0x0101010101010101ull * fill;
    for (; e > lo && (e & 7); e--) /* a tail shorter than a word */
        if (x[e - 1] != fill) return e;
    for (; e > lo; e -= 8)
        if (*(const uint64_t *)(x + e - 8) != pattern) {
            while (x[e - 1] == fill) e--;
            return e;
        }
    return 0;
}

/* Convolution's bias on element i of one image group's output (Mg, out_n): b[i / out_n]. */
CK_DEV float ck_k_bias_of(int64_t i, const float *b, int64_t out_n) { return b[i / out_n]; }

/* ---------------------------------------------------------------- split reductions
 * The GPU's long reductions (a bias gradient over B x T rows, a BatchNorm channel over N x H x W,
 * LayerNorm's parameter gradients) run as many threads, not one per output: the reduced range
 * of each output is cut into `parts` chunks of `chunk` elements (the host picks both from the
 * shape alone), one work item sums one chunk in double, in order, into the scratch; then one
 * item per output adds its parts in order. The same shape always sums in the same order: the
 * bits do not depend on the run, the policy or the launch geometry (they differ from the CPU's
 * single pass by rounding, within the CUDA-vs-CPU tolerance). Item i of a part kernel is chunk
 * p = i / nout of output o = i % nout, so that neighbouring threads read neighbouring outputs. */

/* ck_k_reduce_f32's chunk: reduced elements [p chunk, (p + 1) chunk) of output o */
CK_DEV double ck_k_reduce_part(int64_t i, int64_t nout, int64_t chunk, const float *x, int nk, const int64_t *kdims,
                               const int64_t *kstrides, int nr, const int64_t *rdims, const int64_t *rstrides) {
    int64_t o = i % nout, p = i / nout, cnt = 1;
    for (int k = 0; k < nr; k++) cnt *= rdims[k];
    int64_t base = ck_k_reduce_base(o, nk, kdims, kstrides), lo, hi;
    ck_k_chunk(p, chunk, cnt, &lo, &hi);
    double s = 0.0;
    for (int64_t j = lo; j < hi; j++) s += x[base + ck_k_offset(j, nr, rdims, rstrides)];
    return s;
}
/* output o's parts (part[p nout + o], p < parts) added in order */
CK_DEV double ck_k_parts_sum(int64_t o, int64_t nout, const double *part, int64_t parts, int width, int w) {
    double s = 0.0;
    for (int64_t p = 0; p < parts; p++) s += part[(p * nout + o) * width + w];
    return s;
}

/* A BatchNorm channel's chunk: elements [p chunk, (p + 1) chunk) of channel ch of x: (N, C, S),
 * counted in (N, S) order; the plain sum, or with mu the sum of (x - mu[ch])^2. */
CK_DEV double ck_k_bn_part(int64_t i, int64_t C, int64_t S, int64_t cnt, int64_t chunk, const float *x, const double *mu) {
    int64_t ch = i % C, p = i / C, lo, hi;
    ck_k_chunk(p, chunk, cnt, &lo, &hi);
    double s = 0.0, m = mu ? mu[ch] : 0.0;
    for (int64_t j = lo; j < hi; j++) {
        double v = x[((j / S) * C + ch) * S + j % S];
        if (mu) {
            double d = v - m;
            s += d * d;
        } else {
            s += v;
        }
    }
    return s;
}
/* The statistics of channel ch from its parts (ck_k_batch_norm_train_channel's, the same
 * expressions): q = the sum of squared deviations; stat[ch] = mean_f, stat[C + ch] = inv_std_f. */
CK_DEV void ck_k_bn_stats(int64_t ch, int64_t C, float *stat, float *run_mean, float *run_var, float *saved_mean,
                          float *saved_inv_std, const double *mu, double q, const float *in_mean, const float *in_var,
                          int64_t cnt, float eps, float momentum, int unbiased) {
    float mean_f, inv_std_f;
    ck_k_batch_norm_finish(ch, mu[ch], q, cnt, run_mean, run_var, saved_mean, saved_inv_std, in_mean, in_var, eps, momentum,
                           unbiased, &mean_f, &inv_std_f);
    stat[ch] = mean_f;
    stat[C + ch] = inv_std_f;
}

/* BatchNorm backward, a channel's chunk: part[2 i] += dy, part[2 i + 1] += dy xhat over it */
CK_DEV void ck_k_bng_part(int64_t i, double *part, int64_t C, int64_t S, int64_t cnt, int64_t chunk, const float *dy,
                          const float *x, const float *mean, const float *inv_std) {
    int64_t ch = i % C, p = i / C, lo, hi;
    ck_k_chunk(p, chunk, cnt, &lo, &hi);
    double mu = mean[ch], is = inv_std[ch], sb = 0.0, ss = 0.0;
    for (int64_t j = lo; j < hi; j++) {
        int64_t at = ((j / S) * C + ch) * S + j % S;
        double d = dy[at];
        sb += d;
        ss += d * (((double)x[at] - mu) * is);
    }
    part[2 * i] = sb;
    part[2 * i + 1] = ss;
}
/* ... channel ch's sums: dscale, dbias (either may be NULL) and coef[2 ch] = dbias / n,
 * coef[2 ch + 1] = dscale / n (ck_k_batch_norm_grad_channel's mb, ms) */
CK_DEV void ck_k_bng_fin(int64_t ch, int64_t C, float *dscale, float *dbias, double *coef, const double *part,
                         int64_t parts, int64_t cnt) {
    double sb = ck_k_parts_sum(ch, C, part, parts, 2, 0), ss = ck_k_parts_sum(ch, C, part, parts, 2, 1);
    if (dscale) dscale[ch] = (float)ss;
    if (dbias) dbias[ch] = (float)sb;
    coef[2 * ch] = cnt > 0 ? sb / (double)cnt : 0.0;
    coef[2 * ch + 1] = cnt > 0 ? ss / (double)cnt : 0.0;
}
/* ... element i of dx (ck_k_batch_norm_grad_channel's expression) */
CK_DEV float ck_k_bng_dx(int64_t i, const float *dy, const float *x, const float *scale, const float *mean,
                         const float *inv_std, const double *coef, int64_t C, int64_t S) {
    int64_t ch = (i / S) % C;
    double is = inv_std[ch];
    return ck_k_batch_norm_grad_dx1(dy[i], x[i], mean[ch], is, (double)scale[ch] * is, coef[2 * ch], coef[2 * ch + 1]);
}

#endif
