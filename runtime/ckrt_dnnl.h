/* ckrt_dnnl.h — the CPU backend's convolution GEMMs: oneDNN's sgemm where the build has oneDNN
 * (Debian's libdnnl-dev; cmake -DCK_DNNL=OFF builds without it), OpenBLAS's otherwise.
 *
 * Why oneDNN's GEMM and not its convolution primitives: both were built and measured (issue 19;
 * the primitives are in this branch's history). On this AVX2 machine oneDNN runs plain-layout
 * convolutions as im2col + its own jit sgemm ("gemm:jit"), the algorithm of cpu_conv.h, and the
 * gain is its sgemm, 1.1x to 1.9x OpenBLAS's on the per-image products of ResNet-18 (most where
 * the spatial size is small). The primitives need a user scratchpad with 128 bytes of alignment
 * slack they never write, and one plan serves the CPU and the CUDA backend (whose im2col writes
 * the column matrix): a workspace at the arena's top then measured less than planned. With
 * oneDNN's sgemm inside our im2col and col2im, every backend writes exactly the planned column
 * matrix, the plan is unchanged, and the compiler does not need oneDNN at all.
 *
 * Determinism: oneDNN is pinned once per process (ckrt_dnnl_setup) to one thread, so a product is
 * summed in the same order on every run. Its kernels are the host's best ISA from AVX2 up
 * (avx512_core on an AVX-512 CPU: 1.35x faster on ResNet-18's step than AVX2 on one measured
 * host), and the ISA changes the order of the sums: the bits are those of the host's ISA, which
 * --report records (conv_gemm). ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN's own variable, read once) caps
 * it, for the bits of any AVX2 host. A CPU without AVX2 gets OpenBLAS
 * (its bits then differ again; the same run to run).
 *
 * Threads: oneDNN's sgemm is not cut-invariant (a product cut at row 48, 96, ... differs from the
 * uncut one in some elements for several ResNet shapes, unlike OpenBLAS's: cpu_dense.c), so its
 * own threads or row cuts chosen by the thread count would change the bits. ckrt_conv_sgemm_2
 * always cuts a product into the same two pieces, chosen from its shape alone (rows of C, or its
 * columns when it has fewer than 96 rows, at a multiple of 16 near the middle; small products not
 * at all), and runs them as two blocks of the pool: one thread runs both, two run one each, and the
 * bits are the same.
 */
#ifndef CKRT_DNNL_H
#define CKRT_DNNL_H

#include <stdbool.h>
#include <stdint.h>

/* Pins oneDNN (once per process); true when this build has oneDNN and the CPU runs it at AVX2 or
 * better (after ONEDNN_MAX_CPU_ISA's cap). */
bool ckrt_dnnl_setup(void);

/* What runs the convolution GEMMs: "oneDNN <isa>" (avx2, avx512_core, ...) or "OpenBLAS". */
const char *ckrt_conv_gemm_name(void);

/* Row-major C (M, N) = alpha op(A) op(B) + beta C, op(A) (M, K), op(B) (K, N), as cblas_sgemm
 * with CblasRowMajor; through oneDNN when ckrt_dnnl_setup says so, else OpenBLAS. */
void ckrt_conv_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* The same product cut in two fixed pieces (by shape only) run over the thread pool. */
void ckrt_conv_sgemm_2(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

#endif
