/* cuda_emu.c — a CPU emulation of the CUDA backend's device layer (runtime/cuda_impl.h), linked
 * instead of runtime/cuda_driver.c into libckrt_emu for tests/cuda_emu_test.py.
 *
 * It runs the real op layer (runtime/cuda_ops.c) against the program's real kernels.cu, compiled
 * by g++ with tests/cuda_emu_shim.h into DIR/kernels_emu.so: every launch calls the wrapper once
 * per thread of the grid the CUDA backend would launch (CK_G_GRID blocks of CK_G_BLOCK threads),
 * with blockIdx/threadIdx/gridDim set, and checks that each of the n work items was visited
 * exactly once (the launch geometry and the grid-stride loop). cuBLAS's column-major GEMM is
 * OpenBLAS's column-major GEMM; device memory is a separate host allocation and ckrt_ctx.arena
 * the backend's reserved address range (runtime/cuda_arena.c), so the pointer translation and the
 * host's access through the write/read/fill/top hooks are exercised too (a host access that
 * bypasses them faults). CKRT_EMU_MAX_GRID=K caps the grid at K blocks, to exercise the stride loop.
 */
#include "cuda_impl.h"
#include "ckrt_kernels_gpu.h"
#include "ckrt_dnnl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { unsigned x, y, z; } emu_dim3;
typedef void (*emu_thunk)(void **args);

static struct {
    void *so;
    emu_dim3 *block_idx, *thread_idx, *block_dim, *grid_dim;
    int64_t **counts, *count_n;
    unsigned char *space, *dev;
    int64_t arena_bytes;
    int ready;
    const void *bad_ptr;
    int64_t launches, max_grid;
    ckrt_device_stats st;
} E;

enum { SCRATCH_BYTES = 1 << 20 };

static int check_ptrs(ckrt_ctx *c) {
    if (E.bad_ptr) {
        const void *p = E.bad_ptr;
        E.bad_ptr = NULL;
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "pointer %p is not in the arena: the CUDA backend cannot pass it to a kernel", p);
    }
    return CKRT_OK;
}

ckrt_dptr ckrt_cu_ptr(ckrt_ctx *c, const void *p) {
    (void)c;
    if (!p) return 0;
    const unsigned char *b = p;
    if (E.space && b >= E.space && b <= E.space + E.arena_bytes) return (ckrt_dptr)(uintptr_t)(E.dev + (b - E.space));
    E.bad_ptr = p;
    return 0;
}

int ckrt_cu_launch(ckrt_ctx *c, const char *kernel, int64_t n, void **args) {
    CKRT_TRY(check_ptrs(c));
    char name[96];
    snprintf(name, sizeof name, "ck_emu_%s", kernel);
    emu_thunk f;
    *(void **)&f = dlsym(E.so, name);
    if (!f) return ckrt_fail(c, CKRT_ERR_INTERNAL, "kernel ck_g_%s is not in kernels.cu", kernel);
    if (*(int64_t *)args[0] != n) return ckrt_fail(c, CKRT_ERR_INTERNAL, "launch of ck_g_%s: args[0] is not n", kernel);
    int64_t grid = CK_G_GRID(n);
    if (E.max_grid > 0 && grid > E.max_grid) grid = E.max_grid;
    int64_t *counts = calloc((size_t)n, sizeof *counts);
    if (!counts) return ckrt_fail(c, CKRT_ERR_NOMEM, "emulation: %lld counters", (long long)n);
    *E.counts = counts, *E.count_n = n;
    *E.block_dim = (emu_dim3){CK_G_BLOCK, 1, 1};
    *E.grid_dim = (emu_dim3){(unsigned)grid, 1, 1};
    for (int64_t b = 0; b < grid; b++)
        for (unsigned t = 0; t < CK_G_BLOCK; t++) {
            *E.block_idx = (emu_dim3){(unsigned)b, 0, 0};
            *E.thread_idx = (emu_dim3){t, 0, 0};
            f(args);
        }
    *E.counts = NULL;
    int rc = CKRT_OK;
    for (int64_t i = 0; i < n && !rc; i++)
        if (counts[i] != 1)
            rc = ckrt_fail(c, CKRT_ERR_INTERNAL, "launch geometry: ck_g_%s over %lld items (%lld blocks of %d): item %lld visited %lld times",
                           kernel, (long long)n, (long long)grid, CK_G_BLOCK, (long long)i, (long long)counts[i]);
    free(counts);
    E.launches++;
    return rc;
}

int ckrt_cu_gemm(ckrt_ctx *c, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, ckrt_dptr a, int64_t lda,
                 int64_t stride_a, ckrt_dptr b, int64_t ldb, int64_t stride_b, float beta, ckrt_dptr y, int64_t ldy,
                 int64_t stride_y, int64_t batch) {
    CKRT_TRY(check_ptrs(c));
    /* column-major y = op(a) op(b) is row-major y^T = op(b)^T op(a)^T: the CPU backend's GEMM
     * (ckrt_dnnl.h) with the operands swapped back, so that the comparison with the CPU backend
     * sees the CUDA path's own differences, not two GEMM libraries' summation orders */
    for (int64_t i = 0; i < batch; i++)
        ckrt_sgemm_cut(trans_b, trans_a, n, m, k, alpha, (const float *)(uintptr_t)b + i * stride_b, ldb,
                       (const float *)(uintptr_t)a + i * stride_a, lda, beta, (float *)(uintptr_t)y + i * stride_y, ldy);
    return CKRT_OK;
}

/* No cuDNN in the emulation: the op layer's own im2col + GEMM path is what it checks (the cuDNN
 * path is checked against tests/fake_cuda.c's stand-in, ctest cuda_fake). */
int ckrt_cu_conv(ckrt_ctx *c, int kind, const ckrt_cu_conv_geom *g, ckrt_dptr out, ckrt_dptr a, ckrt_dptr b, ckrt_dptr ws,
                 int64_t ws_bound, int *done) {
    (void)kind, (void)g, (void)out, (void)a, (void)b, (void)ws, (void)ws_bound;
    *done = 0;
    return check_ptrs(c);
}

int ckrt_cu_memset(ckrt_ctx *c, ckrt_dptr p, int value, int64_t bytes) {
    CKRT_TRY(check_ptrs(c));
    if (bytes > 0) memset((void *)(uintptr_t)p, value, (size_t)bytes);
    return CKRT_OK;
}

int ckrt_cu_read(ckrt_ctx *c, void *dst, ckrt_dptr src, int64_t bytes) {
    CKRT_TRY(check_ptrs(c));
    if (bytes > 0) memcpy(dst, (const void *)(uintptr_t)src, (size_t)bytes);
    return CKRT_OK;
}

ckrt_dptr ckrt_cu_scratch(ckrt_ctx *c, int64_t *bytes) {
    (void)c;
    *bytes = SCRATCH_BYTES;
    return (ckrt_dptr)(uintptr_t)(E.dev + (E.arena_bytes + 255) / 256 * 256);
}

/* ---------------------------------------------------------------- backend hooks */

static int be_arena_alloc(ckrt_ctx *c, int64_t bytes, unsigned char **out) {
    size_t n = (size_t)(bytes ? bytes : CKRT_ALIGN);
    void *d = NULL;
    unsigned char *space = ckrt_cu_reserve((int64_t)n);
    if (!space || posix_memalign(&d, 256, (n + 255) / 256 * 256 + SCRATCH_BYTES) != 0) {
        ckrt_cu_unreserve(space, (int64_t)n);
        return ckrt_fail(c, CKRT_ERR_NOMEM, "emulation: cannot allocate the arena (%lld bytes)", (long long)bytes);
    }
    memset(d, 0x5A, (n + 255) / 256 * 256 + SCRATCH_BYTES); /* "device" garbage: nothing may rely on it */
    E.space = space, E.dev = d, E.arena_bytes = (int64_t)n;
    *out = space;
    return CKRT_OK;
}
static void be_arena_free(ckrt_ctx *c, unsigned char *p) {
    (void)c;
    if (p != E.space) return;
    ckrt_cu_unreserve(E.space, E.arena_bytes);
    free(E.dev);
    E.space = E.dev = NULL;
}
static int be_host_alloc(ckrt_ctx *c, int64_t bytes, void **out) {
    *out = malloc((size_t)(bytes ? bytes : 1));
    return *out ? CKRT_OK : ckrt_fail(c, CKRT_ERR_NOMEM, "emulation: cannot allocate the host pool");
}
static void be_host_free(ckrt_ctx *c, void *p) { (void)c, free(p); }
static int be_copy_to_device(ckrt_ctx *c, void *dst, const void *src, int64_t bytes, int stream) {
    (void)stream;
    ckrt_dptr d = ckrt_cu_ptr(c, dst);
    CKRT_TRY(check_ptrs(c));
    memcpy((void *)(uintptr_t)d, src, (size_t)bytes);
    E.st.copy_bytes += bytes;
    return CKRT_OK;
}
static int be_copy_to_host(ckrt_ctx *c, void *dst, const void *src, int64_t bytes, int stream) {
    (void)stream;
    ckrt_dptr s = ckrt_cu_ptr(c, src);
    CKRT_TRY(check_ptrs(c));
    memcpy(dst, (const void *)(uintptr_t)s, (size_t)bytes);
    E.st.copy_bytes += bytes;
    return CKRT_OK;
}
static int be_noop2(ckrt_ctx *c, int a, int b) { (void)c, (void)a, (void)b; return CKRT_OK; }
static int be_synchronize(ckrt_ctx *c) { return check_ptrs(c); }
static int be_write(ckrt_ctx *c, int64_t offset, const void *src, int64_t bytes) {
    CKRT_TRY(check_ptrs(c));
    memcpy(E.dev + offset, src, (size_t)bytes);
    return CKRT_OK;
}
static int be_read(ckrt_ctx *c, int64_t offset, void *dst, int64_t bytes) {
    CKRT_TRY(check_ptrs(c));
    memcpy(dst, E.dev + offset, (size_t)bytes);
    return CKRT_OK;
}
static int be_fill(ckrt_ctx *c, int64_t offset, int64_t bytes, int byte) {
    CKRT_TRY(check_ptrs(c));
    memset(E.dev + offset, byte, (size_t)bytes);
    return CKRT_OK;
}

/* For the NCCL transport: the device address of an arena pointer. */
static unsigned long long be_device_address(ckrt_ctx *c, const void *p) {
    ckrt_dptr d = ckrt_cu_ptr(c, p);
    return check_ptrs(c) ? 0 : d;
}

static void *be_current_stream(ckrt_ctx *c) {
    (void)c;
    return NULL;
}

/* Streams are sequential here: the communication stream runs in program order like the rest. */
static int be_set_stream(ckrt_ctx *c, int s) {
    return s == CKRT_STREAM_COMPUTE || s == CKRT_STREAM_COMM ? CKRT_OK : ckrt_fail(c, CKRT_ERR_INTERNAL, "stream %d", s);
}

static const ckrt_backend emu_backend = {
    .name = "cuda",
    .arena_alloc = be_arena_alloc,
    .arena_free = be_arena_free,
    .host_alloc = be_host_alloc,
    .host_free = be_host_free,
    .copy_to_device = be_copy_to_device,
    .copy_to_host = be_copy_to_host,
    .event_record = be_noop2,
    .stream_wait = be_noop2,
    .synchronize = be_synchronize,
    .dev = &ckrt_cuda_ops,
    .write = be_write,
    .read = be_read,
    .fill = be_fill,
    .top = ckrt_cu_arena_top,
    .device_address = be_device_address,
    .current_stream = be_current_stream,
    .set_stream = be_set_stream,
};

int ckrt_cuda_open(ckrt_ctx *c, const ckrt_cuda_options *o, const ckrt_backend **out) {
    *out = NULL;
    char path[4200];
    const char *env = getenv("CKRT_EMU_KERNELS");
    if (env) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        ssize_t k = readlink("/proc/self/exe", path, sizeof path - 32);
        if (k <= 0) return ckrt_fail(c, CKRT_ERR_IO, "emulation: cannot locate this program");
        path[k] = 0;
        char *slash = strrchr(path, '/');
        snprintf(slash ? slash + 1 : path, 32, "kernels_emu.so");
    }
    if (o->quiet_probe) /* the default device stays the CPU: the emulation runs only when asked for */
        return ckrt_fail(c, CKRT_ERR_USAGE, "the CUDA emulation runs only with --device cuda");
    E.so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!E.so) return ckrt_fail(c, CKRT_ERR_USAGE, "emulation: cannot load '%s': %s", path, dlerror());
    E.block_idx = dlsym(E.so, "ck_emu_blockIdx"), E.thread_idx = dlsym(E.so, "ck_emu_threadIdx");
    E.block_dim = dlsym(E.so, "ck_emu_blockDim"), E.grid_dim = dlsym(E.so, "ck_emu_gridDim");
    E.counts = dlsym(E.so, "ck_emu_counts"), E.count_n = dlsym(E.so, "ck_emu_n");
    if (!E.block_idx || !E.thread_idx || !E.block_dim || !E.grid_dim || !E.counts || !E.count_n)
        return ckrt_fail(c, CKRT_ERR_USAGE, "emulation: '%s' was not built with -DCK_EMULATE", path);
    const char *mg = getenv("CKRT_EMU_MAX_GRID");
    E.max_grid = mg ? atoll(mg) : 0;
    E.ready = 1;
    *out = &emu_backend;
    return CKRT_OK;
}

void ckrt_cuda_close(ckrt_ctx *c) {
    (void)c;
    if (E.so) dlclose(E.so);
    memset(&E, 0, sizeof E);
}

const char *ckrt_cuda_describe(void) { return "CPU emulation of the CUDA backend: kernels.cu built by g++, OpenBLAS for cuBLAS"; }

int ckrt_cuda_stats(ckrt_ctx *c, ckrt_device_stats *out) {
    (void)c;
    *out = E.st;
    return CKRT_OK;
}
