/* ckrt_conv_batch.h — how many images one convolution GEMM takes side by side, and the
 * workspace that needs: read by ckptc's planner (ck_ws_conv, ck_ws_conv_grad) and by the
 * backends' convolution kernels, so that the two agree to the byte.
 *
 * A convolution lowers to one GEMM per image: w (Mg, R) times the image's column matrix (R, P),
 * P its output positions. With few positions (ResNet-18 at 64x64: 4x4 and 2x2 in its last two
 * stages) each image's GEMM re-reads the whole weight matrix for a handful of columns and runs
 * far below the machine's rate. There B images go side by side: their column matrices form one
 * (R, B P) matrix, so one GEMM with B P >= 64 columns does B images' work, through a staging
 * matrix (Mg, B P) for the output (forward) or dy (gradients). B depends on the shape alone (never on the thread
 * count), so the bits are fixed by the shape, and every policy's recompute gets them too.
 */
#ifndef CKRT_CONV_BATCH_H
#define CKRT_CONV_BATCH_H

#include <stdint.h>

#define CK_CONV_BATCH_MAX_POSITIONS 16 /* at most this many output positions: batch the images */
#define CK_CONV_BATCH_MIN_MNK (1 << 18) /* and the per-image product is this large (Mg R P) */
#define CK_CONV_BATCH_COLUMNS 64        /* B P reaches this */

/* Images per GEMM for N images, `group` groups, w_g (Mg, R), P output positions (1: one by one).
 * Only for convolutions that need a column matrix (the caller's test). */
static inline int64_t ck_conv_batch(int64_t N, int64_t group, int64_t Mg, int64_t R, int64_t P) {
    if (group != 1 || N < 2 || P <= 0 || P > CK_CONV_BATCH_MAX_POSITIONS || Mg * R * P < CK_CONV_BATCH_MIN_MNK) return 1;
    int64_t b = (CK_CONV_BATCH_COLUMNS + P - 1) / P;
    return b < N ? b : N;
}

/* Workspace floats for B images per GEMM: the column matrix (R, B P), then (B > 1) the staging
 * matrix (Mg, B P). */
static inline int64_t ck_conv_ws_floats(int64_t B, int64_t Mg, int64_t R, int64_t P) {
    return R * B * P + (B > 1 ? Mg * B * P : 0);
}

#endif
