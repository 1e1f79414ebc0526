/* cuda_emu_shim.h — what a DIR/kernels.cu needs to compile as plain C++ on the host
 * (g++ -DCK_EMULATE -include-path tests/): the CUDA keywords as nothing, the thread coordinates
 * as globals the emulator (tests/cuda_emu.c) sets before calling a wrapper once per thread, and
 * the CK_G_VISIT hook counting how often each work item is visited. The kernel bodies then
 * compile exactly as on the CPU backend (CK_DEV = static inline). */
#ifndef CUDA_EMU_SHIM_H
#define CUDA_EMU_SHIM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

struct ck_emu_dim3 {
    unsigned x, y, z;
};
extern "C" {
ck_emu_dim3 ck_emu_blockIdx, ck_emu_threadIdx, ck_emu_blockDim, ck_emu_gridDim;
int64_t *ck_emu_counts; /* visits per work item of the current launch */
int64_t ck_emu_n;
}
#define blockIdx ck_emu_blockIdx
#define threadIdx ck_emu_threadIdx
#define blockDim ck_emu_blockDim
#define gridDim ck_emu_gridDim
#define __global__
#define __launch_bounds__(x)

static inline int ck_emu_visit(int64_t i, int64_t n) {
    if (ck_emu_counts && n == ck_emu_n && i >= 0 && i < n) ck_emu_counts[i]++;
    return 1;
}
#define CK_G_VISIT(i, n) ck_emu_visit(i, n)

/* the emulation runs one thread at a time: an atomic is a plain read-modify-write */
static inline unsigned long long atomicMax(unsigned long long *a, unsigned long long v) {
    unsigned long long old = *a;
    if (v > old) *a = v;
    return old;
}

#endif
