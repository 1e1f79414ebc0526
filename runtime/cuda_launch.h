/* cuda_launch.h — the CUDA backend's typed launchers, one per wrapper of ckrt_cuda_kernels.h,
 * for the files that launch kernels (cuda_ops.c, cuda_arena.c). Include after cuda_impl.h and
 * the kernel headers that define the parameter types (ck_dims, ck_value16: ckrt_kernels_gpu.h).
 */
#ifndef CKRT_CUDA_LAUNCH_H
#define CKRT_CUDA_LAUNCH_H

#include "ckrt_cuda_kernels.h"

/* g_NAME(c, n, &arg...) launches ck_g_NAME over n items: one launcher per wrapper of
 * ckrt_cuda_kernels.h, each argument passed by address and typed as the wrapper's parameter
 * (ckrt_dptr for a device pointer), so a launch that does not match the wrapper does not compile
 * (incompatible pointer types are errors where this header is included). */
#pragma GCC diagnostic error "-Wincompatible-pointer-types"
#define CK_G_VALUE_(T, N) , const T *N
#define CK_G_DPTR_(T, N) , const ckrt_dptr *N
#define CK_G_ARG_(T, N) , (void *)N
#define CK_G_LAUNCHER_(ENTRY, NAME, ...)                                                                              \
    static inline int g_##NAME(ckrt_ctx *c, int64_t n CK_G_PARAMS_##NAME(CK_G_VALUE_, CK_G_DPTR_)) {                 \
        if (n <= 0) return CKRT_OK;                                                                                   \
        void *args[] = {&n CK_G_PARAMS_##NAME(CK_G_ARG_, CK_G_ARG_)};                                                 \
        return ckrt_cu_launch(c, #NAME, n, args);                                                                     \
    }
#define CK_G_REUSE_(ENTRY, NAME)
CKRT_CUDA_KERNELS(CK_G_LAUNCHER_, CK_G_REUSE_)
#undef CK_G_VALUE_
#undef CK_G_DPTR_
#undef CK_G_ARG_
#undef CK_G_LAUNCHER_
#undef CK_G_REUSE_

#endif
