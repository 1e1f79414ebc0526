/* cpu_pool.h — the CPU's 2-D pooling fast paths (cpu_pool.c), for ckrt_pool (cpu_dense.c) and
 * ckrt_pool_grad (cpu_train_conv.c): the bits of the generic bodies, planes spread over the pool.
 * planes = N * C; the geometry arrays have 2 entries. */
#ifndef CKRT_CPU_POOL_H
#define CKRT_CPU_POOL_H

#include <stdint.h>

void ck_cpu_pool_2d(int kind, float *y, int64_t *indices, const float *x, int64_t planes, const int64_t *in_sp,
                    const int64_t *out_sp, const int64_t *k, const int64_t *strides, const int64_t *pads_begin,
                    const int64_t *pads_end, const int64_t *dilations, int count_include_pad);
void ck_cpu_pool_grad_2d(int kind, float *dx, const float *dy, const float *x, int64_t planes, const int64_t *in_sp,
                         const int64_t *out_sp, const int64_t *k, const int64_t *strides, const int64_t *pads_begin,
                         const int64_t *pads_end, const int64_t *dilations, int count_include_pad);

#endif
