/* ckrt_dnnl.h — the CPU backend's GEMMs (Gemm, MatMul, and the convolutions' im2col products):
 * oneDNN's sgemm where the build has oneDNN (Debian's libdnnl-dev; cmake -DCK_DNNL=OFF builds
 * without it), OpenBLAS's otherwise.
 *
 * Why oneDNN's sgemm: it runs the host's best ISA from AVX2 up, AVX-512 where the CPU has it,
 * and on one Zen 5 host measured 1.9x-2.0x OpenBLAS 0.3.21's rate (~205 vs ~105 GFLOP/s, one
 * thread) on every GPT, MLP and ResNet product shape tried (this host's OpenBLAS runs its
 * Haswell kernels: OPENBLAS_CORETYPE). Why not oneDNN's convolution primitives: both were built
 * and measured (issue 19; the primitives are in this branch's history). On AVX2 oneDNN runs
 * plain-layout convolutions as im2col + its own sgemm, the algorithm of cpu_conv.h; the
 * primitives need a user scratchpad with 128 bytes of alignment slack they never write, and one
 * plan serves the CPU and the CUDA backend (whose im2col writes the column matrix): a workspace
 * at the arena's top then measured less than planned. With oneDNN's sgemm inside our im2col and
 * col2im, every backend writes exactly the planned column matrix, the plan is unchanged, and the
 * compiler does not need oneDNN at all.
 *
 * Determinism: oneDNN is pinned once per process (ckrt_dnnl_setup) to one thread, so a product is
 * summed in the same order on every run. The ISA changes the order of the sums: the bits are
 * those of the host's ISA, which --report records ("gemm"). ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN's own
 * variable, read once) caps it, for the bits of any AVX2 host. A CPU without AVX2 gets OpenBLAS
 * (its bits then differ again; the same run to run). CKRT_GEMM=openblas asks for OpenBLAS on any
 * CPU: for tools that cannot follow oneDNN's JIT code (under Valgrind, its AVX2 kernels read up to
 * 32 bytes past the end of their own packing buffers, which memcheck reports).
 *
 * Threads: oneDNN's sgemm is not cut-invariant (a product cut into row or column pieces differs
 * from the uncut one in some elements for many shapes, at cuts of 16, 48 or 64: 1024x65x512,
 * 147x1024x64, 128x64x1152, ...), so cuts chosen by the thread count would change the bits.
 * ckrt_sgemm_cut cuts a product into pieces chosen from its shape alone (ckrt_sgemm_piece:
 * along its longer side, into pieces of about CK_PIECE_GOOD, but at least 2 and at most
 * CK_PIECES_MAX of them, at multiples of 16; products under CK_PIECE_MIN_MNK multiply-adds or
 * shorter than 2 CK_PIECE_MIN stay whole) and runs them as blocks of the pool: one thread runs
 * them all, more share them, and the bits are the same. The price: each piece packs the uncut
 * operand again, so short pieces cost (at one thread, 256x512x512 NT in 8 pieces of 64 runs 20%
 * slower than whole, in 4 of 128 as fast; 1024x512x2048 NT 4% to 19% slower in 4 or 8 pieces),
 * and a product is spread over CK_PIECES_MAX threads at most, a 512-long one over 4.
 */
#ifndef CKRT_DNNL_H
#define CKRT_DNNL_H

#include <stdbool.h>
#include <stdint.h>

#define CK_PIECE_MIN 64            /* a piece's least length along the cut side */
#define CK_PIECE_GOOD 128          /* and its length where the product is long enough (64: 5-20% slower) */
#define CK_PIECES_MAX 8            /* the most pieces a product is cut into */
#define CK_PIECE_MIN_MNK (1 << 18) /* products smaller than this (M N K) are not cut */

/* Pins oneDNN (once per process); true when this build has oneDNN, the CPU runs it at AVX2 or
 * better (after ONEDNN_MAX_CPU_ISA's cap) and CKRT_GEMM is not "openblas". */
bool ckrt_dnnl_setup(void);

/* What runs the GEMMs: "oneDNN <isa>" (avx2, avx512_core, ...) or "OpenBLAS". */
const char *ckrt_gemm_name(void);

/* Row-major C (M, N) = alpha op(A) op(B) + beta C, op(A) (M, K), op(B) (K, N), as cblas_sgemm
 * with CblasRowMajor, in one call on the calling thread; through oneDNN when ckrt_dnnl_setup
 * says so, else OpenBLAS. */
void ckrt_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* The piece length ckrt_sgemm_cut cuts an (M, N, K) product into: along its columns (N) when
 * *by_cols, else its rows (M); the whole length when it is not cut. The convolutions' fused
 * kernels (cpu_dense.c, cpu_train_conv.c) run these same pieces themselves, so their bits are
 * ckrt_sgemm_cut's; the planner reads it too (ckrt_conv_batch.h's lanes). */
static inline int64_t ckrt_sgemm_piece(int64_t M, int64_t N, int64_t K, bool *by_cols) {
    *by_cols = N > M;
    int64_t len = *by_cols ? N : M;
    if (M * N * K < CK_PIECE_MIN_MNK || len < 2 * CK_PIECE_MIN) return len;
    int64_t p = len / CK_PIECE_GOOD < 2 ? 2 : len / CK_PIECE_GOOD < CK_PIECES_MAX ? len / CK_PIECE_GOOD : CK_PIECES_MAX;
    return (len + 16 * p - 1) / (16 * p) * 16; /* p pieces, at multiples of 16: the shape's alone */
}

/* The same product cut into pieces chosen by its shape alone, run over the thread pool. */
void ckrt_sgemm_cut(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* The same, with C (ldc N) first set to the broadcast of cm (cm_rows 1 or M, by cm_cols 1 or N)
 * piece by piece, each piece by the thread that multiplies into it: Gemm's bias, the bits of a
 * whole fill followed by ckrt_sgemm_cut (the fill is a copy), without one thread writing all of C
 * for the others to read. cm must not overlap C (a piece would read bias another had already
 * multiplied into); ckrt_gemm's never does: the planner gives a Gemm's output its own range. */
void ckrt_sgemm_cut_bias(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                         int64_t lda, const float *B, int64_t ldb, float beta, float *C, const float *cm, int64_t cm_rows,
                         int64_t cm_cols);

#endif
