/* ckrt_dnnl.h — the oneDNN convolutions ckptc (the compiler) and libckrt (the runtime) agree on.
 *
 * On the CPU, Conv's forward and its input gradient (ckptc.ConvGradInput) run through oneDNN 2.x
 * (Debian's libdnnl-dev) where it takes the convolution; its scratchpad is user-managed and lives
 * in the node's planned workspace. Where that size comes from: the compiler asks oneDNN itself
 * (ckptc links oneDNN: a build dependency anyway), through the same descriptor the runtime
 * builds (runtime/dnnl_desc.c, compiled into both, like util.c), and plans
 * max(im2col's column matrix, oneDNN's scratchpad): the CUDA backend runs the same plan with
 * im2col, and the CPU falls back to im2col wherever oneDNN does not take a convolution.
 * For both sides to see the same primitive, oneDNN is pinned the same way in both processes
 * (ckrt_dnnl_setup): at most AVX2 (so the implementation, its scratchpad and its bits are those
 * of any AVX2-or-better CPU) and one thread. A CPU whose effective ISA is not AVX2 uses im2col
 * everywhere, at run time and at compile time alike.
 *
 * The weight gradient stays im2col + OpenBLAS (runtime/cpu_train_conv.c): measured on ResNet-18's
 * shapes oneDNN's is no faster there, and its scratchpad holds per-image partial weight
 * gradients (37.8 MB for one 512x512 3x3 conv, where the column matrix is 74 KB).
 *
 * Without oneDNN (cmake -DCKPTC_DNNL=OFF) none of this is compiled: ckrt_dnnl_conv_scratch
 * answers -1 and every convolution is im2col + OpenBLAS.
 */
#ifndef CKRT_DNNL_H
#define CKRT_DNNL_H

#include <stdbool.h>
#include <stdint.h>

enum { CKRT_DNNL_CONV_FWD = 1, CKRT_DNNL_CONV_BWD_DATA = 2 };
#define CKRT_DNNL_MAX_SP 3 /* oneDNN's convolutions have 1 to 3 spatial axes */

/* One convolution as both sides describe it: x (N, C, in_sp...), w (M, C/group, k...),
 * y (N, M, out_sp...); pads_begin per axis, the end pads follow from out_sp. Zero-filled before
 * use (it is compared with memcmp). */
typedef struct {
    int32_t kind, nsp, has_bias, pad_;
    int64_t N, C, M, group;
    int64_t in_sp[CKRT_DNNL_MAX_SP], out_sp[CKRT_DNNL_MAX_SP], k[CKRT_DNNL_MAX_SP];
    int64_t strides[CKRT_DNNL_MAX_SP], pads_begin[CKRT_DNNL_MAX_SP], dilations[CKRT_DNNL_MAX_SP];
} ckrt_dnnl_conv_key;

/* Fills *key; false when oneDNN is not asked at all (more than 3 spatial axes, an empty tensor). */
bool ckrt_dnnl_conv_key_init(ckrt_dnnl_conv_key *key, int kind, int has_bias, int nsp, int64_t N, int64_t C, int64_t M,
                             int64_t group, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                             const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations);

/* Pins oneDNN (once per process); true when this build has oneDNN and the CPU runs it as AVX2. */
bool ckrt_dnnl_setup(void);

/* The scratchpad bytes oneDNN needs for key (0: none), or -1 where im2col runs instead (no
 * oneDNN, or only its reference implementation takes the convolution). */
int64_t ckrt_dnnl_conv_scratch(const ckrt_dnnl_conv_key *key);

/* The CPU engine the descriptors are built on (one per process), NULL if it cannot be made. */
struct dnnl_engine;
struct dnnl_engine *ckrt_dnnl_engine(void);

/* The primitive descriptor of key (the caller destroys it); 0 on success, -1 where
 * ckrt_dnnl_conv_scratch answers -1. */
struct dnnl_primitive_desc;
int ckrt_dnnl_conv_pd(const ckrt_dnnl_conv_key *key, struct dnnl_primitive_desc **pd);

/* The runtime's side (cpu_dnnl.c): runs key on out = y (forward: in = x, b the bias or NULL) or
 * out = dx (input gradient: in = dy), its scratchpad at ws; *done false (and CKRT_OK) where
 * im2col should run instead. */
struct ckrt_ctx;
int ckrt_dnnl_conv(struct ckrt_ctx *c, const ckrt_dnnl_conv_key *key, float *out, const float *in, const float *w,
                   const float *b, float *ws, bool *done);

#endif
