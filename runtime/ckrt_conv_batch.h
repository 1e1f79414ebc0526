/* ckrt_conv_batch.h — how many images one convolution GEMM takes side by side, and the
 * workspace that needs: read by ckptc's planner (ck_ws_conv, ck_ws_conv_grad) and by the
 * backends' convolution kernels, so that the two agree to the byte.
 *
 * A convolution lowers to one GEMM per image: w (Mg, R) times the image's column matrix (R, P),
 * P its output positions. With few positions (ResNet-18 at 64x64: 4x4 and 2x2 in its last two
 * stages) each image's GEMM re-reads the whole weight matrix for a handful of columns and runs
 * far below the machine's rate. There B images go side by side: their column matrices form one
 * (R, B P) matrix, so one GEMM with B P >= 32 or 64 columns does B images' work, through a staging
 * matrix (Mg, B P) for the output (forward) or dy (gradients). B depends on the shape alone (never on the thread
 * count), so the bits are fixed by the shape, and every policy's recompute gets them too.
 */
#ifndef CKRT_CONV_BATCH_H
#define CKRT_CONV_BATCH_H

#include "ckrt_dnnl.h"

#include <stdbool.h>
#include <stdint.h>

#define CK_CONV_BATCH_MAX_POSITIONS 16 /* at most this many output positions: batch the images */
#define CK_CONV_BATCH_MIN_MNK (1 << 18) /* and the per-image product is this large (Mg R P) */
/* The three kernels that batch, and the columns B P each reaches: the forward and the input
 * gradient 32, so that ResNet-18's last stage (2x2, 16 images) makes two batches of 8 that lanes
 * can run side by side (one batch of 16 had left one thread reading the other's columns: 2.1 ms
 * a convolution on 2 threads, 1.35 ms as two lanes, the same on 1 thread); the weight gradient
 * 64, since each batch's GEMM reads and writes all of dw (with 32 those two stages' gradients
 * ran 15-20% slower on 2 threads). */
enum { CK_CONV_FWD, CK_CONV_DGRAD, CK_CONV_WGRAD };

/* Images per GEMM of kernel `kind` for N images, `group` groups, w_g (Mg, R), P output positions
 * (1: one by one). Only for convolutions that need a column matrix (the caller's test). */
static inline int64_t ck_conv_batch(int kind, int64_t N, int64_t group, int64_t Mg, int64_t R, int64_t P) {
    if (group != 1 || N < 2 || P <= 0 || P > CK_CONV_BATCH_MAX_POSITIONS || Mg * R * P < CK_CONV_BATCH_MIN_MNK) return 1;
    int64_t b = ((kind == CK_CONV_WGRAD ? 64 : 32) + P - 1) / P;
    return b < N ? b : N;
}

/* Lanes (the CPU's): a convolution, or its input gradient, runs `lanes` of its batches (of B
 * images; B = 1: single images) at once, each lane in its own column matrix (and staging
 * matrix), so that each thread multiplies what it wrote itself. Without lanes the threads share
 * one image's column matrix, half written by the other core, and on a 2-core host that traffic
 * ate the second thread's gain (ResNet-18's 8x8 stage: 1.2x from 2 threads, 1.8x with lanes).
 * The workspace then holds `lanes` copies, so the planner grants lanes (the node attribute
 * CK_LANES_ATTR, passes/lanes.c) only where they leave the planned peak as it was. Each image is
 * computed as without lanes: the same bits. */
#define CK_CONV_LANES 2

/* The column matrix's row stride for `cols` columns: 16 more where cols is a multiple of 512
 * floats. oneDNN's sgemm ran up to 2.4x slower reading a matrix whose rows lie 4 KiB apart (the
 * rows share cache sets): ResNet's stem at 64x64 (32x32 outputs) had its weight-gradient products
 * (64, 80, 1024) at 65 GFLOP/s, 155 with the rows 1040 apart; its forward 176 -> 218. The bits
 * are the same (the stride changes no sum). */
static inline int64_t ck_conv_col_ld(int64_t cols) { return cols >= 512 && cols % 512 == 0 ? cols + 16 : cols; }

/* Floats of an (R, cols) column matrix at that stride, up to its last element: the last row has
 * no padding, so that the workspace's end is written (measured == planned). */
static inline int64_t ck_conv_col_floats(int64_t R, int64_t cols) { return R > 0 ? (R - 1) * ck_conv_col_ld(cols) + cols : 0; }

/* Workspace floats for `lanes` lanes of B images per GEMM: each the column matrix (R, B P),
 * then (B > 1) the staging matrix (Mg, B P). */
static inline int64_t ck_conv_ws_floats(int64_t lanes, int64_t B, int64_t Mg, int64_t R, int64_t P) {
    return lanes * (ck_conv_col_floats(R, B * P) + (B > 1 ? Mg * B * P : 0));
}

/* The forward's position pieces (cpu_dense.c's fused forward, on more than one thread): when
 * ckrt_sgemm_cut cuts an image's product (Mg, P) = w (Mg, R) @ col (R, P) along its output
 * positions, and each piece can fill its own columns (one group, one image per GEMM, a 1x1
 * direct convolution or a 2-D one), the piece length; else 0. */
static inline int64_t ck_conv_position_piece(bool direct, int nsp, int64_t group, int64_t B, int64_t Mg, int64_t R,
                                             int64_t P) {
    bool by_cols;
    int64_t piece = ckrt_sgemm_piece(Mg, P, R, &by_cols);
    return group == 1 && B == 1 && (direct || nsp == 2) && by_cols && piece < P ? piece : 0;
}

/* Whether lanes can serve a convolution (grad: its input gradient) that needs a column matrix:
 * every lane gets a whole batch (N / B >= CK_CONV_LANES, so that each lane writes all its
 * workspace: measured == planned), and the forward is not one whose position pieces already
 * keep each thread in its own columns without more workspace. */
static inline bool ck_conv_lanes_fit(bool grad, int nsp, int64_t N, int64_t group, int64_t Mg, int64_t R, int64_t P) {
    int64_t B = ck_conv_batch(grad ? CK_CONV_DGRAD : CK_CONV_FWD, N, group, Mg, R, P);
    return N / B >= CK_CONV_LANES && (grad || !ck_conv_position_piece(false, nsp, group, B, Mg, R, P));
}

#endif
