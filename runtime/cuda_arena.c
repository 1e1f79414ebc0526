/* cuda_arena.c — the CUDA backend's arena hooks that both device layers share (cuda_driver.c on a
 * GPU, tests/cuda_emu.c in the emulation): the arena's address range, which holds no memory on
 * the host, and the high-water search on the device.
 *
 * c->arena on CUDA is a range of addresses reserved with mmap(PROT_NONE): pointers the generated
 * code forms into it are mapped to device addresses (ckrt_cu_ptr) and never dereferenced on the
 * host; a host access by mistake faults at once instead of reading stale bytes. The range costs
 * address space, not memory.
 */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "cuda_impl.h"
#include "ckrt_kernels_gpu.h"
#include "cuda_launch.h"

#include <sys/mman.h>

unsigned char *ckrt_cu_reserve(int64_t bytes) {
    void *p = mmap(NULL, (size_t)(bytes > 0 ? bytes : 1), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ckrt_cu_unreserve(unsigned char *p, int64_t bytes) {
    if (p) munmap(p, (size_t)(bytes > 0 ? bytes : 1));
}

/* ck_g_arena_top over [from, to), one work item per CK_K_TOP_CHUNK bytes, each differing chunk
 * raising one word of the backend's scratch (atomicMax) to its top; then 8 bytes read back. */
int ckrt_cu_arena_top(ckrt_ctx *c, int64_t from, int64_t to, int byte, int64_t *top) {
    int64_t scratch_bytes, bytes = to - from, n = (bytes + CK_K_TOP_CHUNK - 1) / CK_K_TOP_CHUNK;
    ckrt_dptr slot = ckrt_cu_scratch(c, &scratch_bytes), x = ckrt_cu_ptr(c, c->arena + from);
    unsigned long long t = 0;
    *top = from;
    if (n == 0) return CKRT_OK;
    CKRT_TRY(ckrt_cu_memset0(c, slot, (int64_t)sizeof t));
    CKRT_TRY(g_arena_top(c, n, &x, &bytes, &byte, &slot));
    CKRT_TRY(ckrt_cu_read(c, &t, slot, (int64_t)sizeof t));
    *top = from + (int64_t)t;
    return CKRT_OK;
}
