/* ckrt_device.h — how every ckrt_* kernel entry point reaches a device backend (CUDA).
 *
 * The kernel entry points (ckrt_ops.h) are the CPU implementations. A backend that runs kernels
 * elsewhere provides a ckrt_device_ops table (ckrt_backend.dev): one pointer per entry point,
 * typed from the entry point's own prototype, so no argument list is written twice. Code that
 * includes ckrt.h (the generated programs) calls ckrt_binary(c, ...) as usual; the macros below
 * turn each call into "c->be->dev ? c->be->dev->binary(c, ...) : ckrt_binary(c, ...)". The
 * library's own sources are compiled with CKRT_NO_DISPATCH (they define the CPU functions and
 * call each other directly).
 *
 * Adding a kernel entry point: declare it in ckrt_ops.h, add it to CKRT_DEVICE_OPS and to the
 * dispatch macros below, and implement it in runtime/cuda_ops.c (the table there is
 * type-checked against the prototype), launching wrappers declared in ckrt_cuda_kernels.h.
 */
#ifndef CKRT_DEVICE_H
#define CKRT_DEVICE_H

#define CKRT_DEVICE_OPS(X)                                                                                          \
    X(binary) X(unary) X(where) X(clip) X(cast) X(softmax) X(layer_norm) X(batch_norm) X(dropout) X(reduce)        \
    X(global_avg_pool) X(gemm) X(matmul) X(conv) X(pool) X(strided_copy) X(concat) X(split) X(gather) X(trilu)      \
    X(fill) X(range) X(cross_entropy) X(cross_entropy_grad) X(unary_grad) X(softmax_grad) X(layer_norm_grad)        \
    X(batch_norm_grad) X(batch_norm_apply) X(dropout_grad) X(sgd) X(adamw) X(conv_grad_input) X(conv_grad_weight)   \
    X(pool_grad) X(gather_grad) X(slice_grad) X(check_finite) X(rank_mean) X(copy_f32) X(pad) X(pad_grad) \
    X(scatter_nd) X(gather_nd) X(random) X(fused)

typedef struct ckrt_device_ops {
#define CKRT_DEVICE_MEMBER_(name) __typeof__(ckrt_##name) *name;
    CKRT_DEVICE_OPS(CKRT_DEVICE_MEMBER_)
#undef CKRT_DEVICE_MEMBER_
} ckrt_device_ops;

#ifndef CKRT_NO_DISPATCH
#define CKRT_DISPATCH_(name, c, ...) ((c)->be->dev ? (c)->be->dev->name((c), __VA_ARGS__) : (ckrt_##name)((c), __VA_ARGS__))
#define ckrt_binary(c, ...) CKRT_DISPATCH_(binary, c, __VA_ARGS__)
#define ckrt_unary(c, ...) CKRT_DISPATCH_(unary, c, __VA_ARGS__)
#define ckrt_where(c, ...) CKRT_DISPATCH_(where, c, __VA_ARGS__)
#define ckrt_fused(c, ...) CKRT_DISPATCH_(fused, c, __VA_ARGS__)
#define ckrt_clip(c, ...) CKRT_DISPATCH_(clip, c, __VA_ARGS__)
#define ckrt_cast(c, ...) CKRT_DISPATCH_(cast, c, __VA_ARGS__)
#define ckrt_softmax(c, ...) CKRT_DISPATCH_(softmax, c, __VA_ARGS__)
#define ckrt_layer_norm(c, ...) CKRT_DISPATCH_(layer_norm, c, __VA_ARGS__)
#define ckrt_batch_norm(c, ...) CKRT_DISPATCH_(batch_norm, c, __VA_ARGS__)
#define ckrt_dropout(c, ...) CKRT_DISPATCH_(dropout, c, __VA_ARGS__)
#define ckrt_reduce(c, ...) CKRT_DISPATCH_(reduce, c, __VA_ARGS__)
#define ckrt_global_avg_pool(c, ...) CKRT_DISPATCH_(global_avg_pool, c, __VA_ARGS__)
#define ckrt_gemm(c, ...) CKRT_DISPATCH_(gemm, c, __VA_ARGS__)
#define ckrt_matmul(c, ...) CKRT_DISPATCH_(matmul, c, __VA_ARGS__)
#define ckrt_conv(c, ...) CKRT_DISPATCH_(conv, c, __VA_ARGS__)
#define ckrt_pool(c, ...) CKRT_DISPATCH_(pool, c, __VA_ARGS__)
#define ckrt_strided_copy(c, ...) CKRT_DISPATCH_(strided_copy, c, __VA_ARGS__)
#define ckrt_concat(c, ...) CKRT_DISPATCH_(concat, c, __VA_ARGS__)
#define ckrt_split(c, ...) CKRT_DISPATCH_(split, c, __VA_ARGS__)
#define ckrt_gather(c, ...) CKRT_DISPATCH_(gather, c, __VA_ARGS__)
#define ckrt_trilu(c, ...) CKRT_DISPATCH_(trilu, c, __VA_ARGS__)
#define ckrt_fill(c, ...) CKRT_DISPATCH_(fill, c, __VA_ARGS__)
#define ckrt_range(c, ...) CKRT_DISPATCH_(range, c, __VA_ARGS__)
#define ckrt_cross_entropy(c, ...) CKRT_DISPATCH_(cross_entropy, c, __VA_ARGS__)
#define ckrt_cross_entropy_grad(c, ...) CKRT_DISPATCH_(cross_entropy_grad, c, __VA_ARGS__)
#define ckrt_unary_grad(c, ...) CKRT_DISPATCH_(unary_grad, c, __VA_ARGS__)
#define ckrt_softmax_grad(c, ...) CKRT_DISPATCH_(softmax_grad, c, __VA_ARGS__)
#define ckrt_layer_norm_grad(c, ...) CKRT_DISPATCH_(layer_norm_grad, c, __VA_ARGS__)
#define ckrt_batch_norm_grad(c, ...) CKRT_DISPATCH_(batch_norm_grad, c, __VA_ARGS__)
#define ckrt_batch_norm_apply(c, ...) CKRT_DISPATCH_(batch_norm_apply, c, __VA_ARGS__)
#define ckrt_dropout_grad(c, ...) CKRT_DISPATCH_(dropout_grad, c, __VA_ARGS__)
#define ckrt_sgd(c, ...) CKRT_DISPATCH_(sgd, c, __VA_ARGS__)
#define ckrt_adamw(c, ...) CKRT_DISPATCH_(adamw, c, __VA_ARGS__)
#define ckrt_conv_grad_input(c, ...) CKRT_DISPATCH_(conv_grad_input, c, __VA_ARGS__)
#define ckrt_conv_grad_weight(c, ...) CKRT_DISPATCH_(conv_grad_weight, c, __VA_ARGS__)
#define ckrt_pool_grad(c, ...) CKRT_DISPATCH_(pool_grad, c, __VA_ARGS__)
#define ckrt_gather_grad(c, ...) CKRT_DISPATCH_(gather_grad, c, __VA_ARGS__)
#define ckrt_slice_grad(c, ...) CKRT_DISPATCH_(slice_grad, c, __VA_ARGS__)
#define ckrt_check_finite(c, ...) CKRT_DISPATCH_(check_finite, c, __VA_ARGS__)
#define ckrt_rank_mean(c, ...) CKRT_DISPATCH_(rank_mean, c, __VA_ARGS__)
#define ckrt_copy_f32(c, ...) CKRT_DISPATCH_(copy_f32, c, __VA_ARGS__)
#define ckrt_pad(c, ...) CKRT_DISPATCH_(pad, c, __VA_ARGS__)
#define ckrt_pad_grad(c, ...) CKRT_DISPATCH_(pad_grad, c, __VA_ARGS__)
#define ckrt_scatter_nd(c, ...) CKRT_DISPATCH_(scatter_nd, c, __VA_ARGS__)
#define ckrt_gather_nd(c, ...) CKRT_DISPATCH_(gather_nd, c, __VA_ARGS__)
#define ckrt_random(c, ...) CKRT_DISPATCH_(random, c, __VA_ARGS__)
#endif

/* Opens the CUDA backend on device `ordinal` (runtime/cuda_driver.c; cuda_none.c when libckrt
 * was built without the toolkit): the driver, NVRTC-compiled kernels from `kernels_cu` (cached
 * under cache_dir), cuBLAS (TF32 only when tf32), the copy stream. Fails with a message in
 * c->msg (no CUDA built in, no driver, no device, a compile error with its log). */
typedef struct ckrt_cuda_options {
    int ordinal;
    int wrap_ordinal;         /* ordinal modulo the devices present (data parallel: the local rank) */
    int tf32;
    const char *kernels_cu;   /* path of the program's kernels.cu */
    const char *cache_dir;    /* NULL: $XDG_CACHE_HOME/ckptc or ~/.cache/ckptc */
    int quiet_probe;          /* probing for the default device: no driver is loaded -> fail without dlopen */
} ckrt_cuda_options;
int ckrt_cuda_open(ckrt_ctx *c, const ckrt_cuda_options *o, const ckrt_backend **out);
void ckrt_cuda_close(ckrt_ctx *c);
/* Compiles CUDA source with NVRTC for sm_<sm>, with the options the trainer uses (cuda_driver.c;
 * needs no GPU): *cubin (malloc'ed) on success; *log (malloc'ed, may be NULL) holds NVRTC's
 * messages either way. Only in a libckrt built with the CUDA toolkit. */
int ckrt_cuda_compile(ckrt_ctx *c, const char *src, const char *name, int sm, char **log, void **cubin, size_t *cubin_bytes);
/* One line describing the device ("NVIDIA H200, sm_90, 139.8 GiB"), after a successful open. */
const char *ckrt_cuda_describe(void);

/* Device statistics for the report (zeros on the CPU). */
typedef struct ckrt_device_stats {
    int64_t mem_used_bytes;        /* cuMemGetInfo total - free: the whole device, context included */
    int64_t mem_total_bytes;
    double copy_exposed_ms;        /* time the compute stream waited for offload/reload copies */
    double copy_ms;                /* time the copies took on the copy stream */
    int64_t copy_bytes;
    double compile_ms;             /* NVRTC (0 when the cache hit) */
    int cache_hit;
    double host_io_ms;             /* the host's writes and reads of arena bytes (weights, inputs, loss, dumps) */
    int64_t host_staging_bytes;    /* pinned host memory the backend holds for them */
    int64_t conv_cudnn;            /* convolution calls (forward, data and weight gradient) cuDNN ran */
    int64_t conv_im2col;           /* those im2col + cuBLAS ran (no cuDNN, or a geometry it cannot take) */
} ckrt_device_stats;
int ckrt_cuda_stats(ckrt_ctx *c, ckrt_device_stats *out);

#endif
