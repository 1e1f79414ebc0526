/* cuda_impl.h — private to the CUDA backend: the seam between its op layer (cuda_ops.c: what each
 * ckrt_* entry point launches, as grid sizes, kernel arguments and cuBLAS calls) and its device
 * layer (cuda_driver.c: the driver API, NVRTC, cuBLAS, streams, the arena; or tests/cuda_emu.c,
 * which runs the same op layer and the same kernels.cu on the CPU to check it without a GPU; the
 * driver layer itself is checked against tests/fake_cuda.c, a stand-in driver).
 *
 * Pointers the generated code passes point into ckrt_ctx.arena, which on CUDA is a reserved range
 * of addresses the size of the device arena, with no memory behind it (cuda_arena.c); ckrt_cu_ptr
 * maps them to device addresses. The host reaches arena bytes only through the backend's
 * write/read/fill/top hooks (arena_io.c). The op layer never includes cuda.h.
 */
#ifndef CKRT_CUDA_IMPL_H
#define CKRT_CUDA_IMPL_H

#include "ckrt.h"

typedef unsigned long long ckrt_dptr; /* a device address (CUdeviceptr) */

/* The device address of p, a pointer into the arena's address range (NULL -> 0). */
ckrt_dptr ckrt_cu_ptr(ckrt_ctx *c, const void *p);
/* Launches ck_g_<kernel> over n >= 1 work items on the compute stream: grid CK_G_GRID(n) blocks
 * of CK_G_BLOCK threads; args as for cuLaunchKernel, args[0] pointing to n (int64_t). */
int ckrt_cu_launch(ckrt_ctx *c, const char *kernel, int64_t n, void **args);
/* Column-major, as cublasSgemmStridedBatched: y_i = alpha op(a_i) op(b_i) + beta y_i over
 * batch entries i, op(a_i): (m, k). Strides in elements. */
int ckrt_cu_gemm(ckrt_ctx *c, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, ckrt_dptr a, int64_t lda,
                 int64_t stride_a, ckrt_dptr b, int64_t ldb, int64_t stride_b, float beta, ckrt_dptr y, int64_t ldy,
                 int64_t stride_y, int64_t batch);
/* A convolution's geometry as the op layer has it: nsp spatial axes, N images, C input and M
 * output channels in `group` groups, ONNX's begin pads (the end pads are implied by out_sp). */
typedef struct ckrt_cu_conv_geom {
    int nsp;
    int64_t N, C, M, group;
    const int64_t *in_sp, *out_sp, *k, *strides, *pads_begin, *dilations;
} ckrt_cu_conv_geom;
/* Runs one whole convolution kernel through cuDNN where the device layer has it: kind
 * CK_CONV_FWD (out y, a x, b w), CK_CONV_DGRAD (out dx, a dy, b w) or CK_CONV_WGRAD (out dw,
 * a dy, b x), every image at once, output overwritten. The algorithm is the fastest
 * deterministic one cuDNN's heuristics offer whose workspace fits ws_bound bytes at ws: a bound
 * the caller derives from the geometry alone, so the same convolution gets the same algorithm
 * (and bits) in every program. *done = 0 when it did not run (no cuDNN, CKRT_CUDNN=0, a geometry
 * cuDNN cannot express, no such algorithm): the caller computes it itself. */
int ckrt_cu_conv(ckrt_ctx *c, int kind, const ckrt_cu_conv_geom *g, ckrt_dptr out, ckrt_dptr a, ckrt_dptr b, ckrt_dptr ws,
                 int64_t ws_bound, int *done);
/* Sets bytes at p to value (compute stream). */
int ckrt_cu_memset(ckrt_ctx *c, ckrt_dptr p, int value, int64_t bytes);
static inline int ckrt_cu_memset0(ckrt_ctx *c, ckrt_dptr p, int64_t bytes) { return ckrt_cu_memset(c, p, 0, bytes); }
/* Copies device bytes to host memory once the compute stream has produced them (synchronous). */
int ckrt_cu_read(ckrt_ctx *c, void *dst, ckrt_dptr src, int64_t bytes);
/* A device scratch area owned by the backend (partial sums of the loss), *bytes its size. */
ckrt_dptr ckrt_cu_scratch(ckrt_ctx *c, int64_t *bytes);

/* cuda_arena.c: the arena's address range (NULL when mmap refuses), and the backend's `top` hook
 * (ckrt_backend.top) as a reduction kernel over the device's bytes. */
unsigned char *ckrt_cu_reserve(int64_t bytes);
void ckrt_cu_unreserve(unsigned char *p, int64_t bytes);
int ckrt_cu_arena_top(ckrt_ctx *c, int64_t from, int64_t to, int byte, int64_t *top);

/* The op layer's table (cuda_ops.c). */
extern const ckrt_device_ops ckrt_cuda_ops;

#endif
