/* cuda_driver.c — the CUDA backend's device layer: the driver API, NVRTC, cuBLAS.
 *
 * Start-up (ckrt_cuda_open): the driver library (libcuda.so.1), NVRTC and cuBLAS are opened with dlopen,
 * so that a program built where the toolkit is installed still starts, and runs on the CPU, on a
 * machine without a driver (and never loads cuBLAS there); cuInit, the device's primary context (shared with cuBLAS), a compute stream
 * and a copy stream. DIR/kernels.cu is compiled by NVRTC for the device's own architecture
 * (sm_XY from its compute capability) and cached on disk: the key is the source's hash, the
 * architecture and the NVRTC version, the file carries a magic, a version, the key and a
 * checksum, and is written to a temporary name then renamed (a second start skips NVRTC; a
 * corrupt or foreign file is ignored and rewritten). cuModuleLoadData loads the cubin, and
 * cuModuleGetFunction finds each ck_g_* wrapper on its first launch.
 *
 * Memory: one cuMemAlloc holds the planned arena (plus its guard zone and a 1 MiB scratch for
 * the loss's partial sums); the offload pool is one pinned cuMemHostAlloc slab. ckrt_main keeps
 * reading and writing ckrt_ctx.arena, which here is a host mirror of the device arena: uploaded
 * whole before the first kernel after the host wrote it (weights, inputs, the canary), and
 * refreshed by to_host() where ckrt_main reads it: the loss (4 bytes a step), and the whole arena
 * after the first step (the high-water mark), before dumping gradients and at the end.
 *
 * Offload and reload copies run on the copy stream: it waits for an event recorded on the
 * compute stream (the tensor is produced, or its destination free), then copies. After an
 * offload the compute stream waits for the copy at once (the plan may reuse the source's bytes
 * next; it does not say when). A reload is a prefetch: the compute stream waits for it only
 * before the first kernel or GEMM that gets a pointer into its bytes (every pointer passes
 * through ckrt_cu_ptr), so the copy overlaps the compute issued in between. The waits are timed
 * with events: the exposed copy time. Every driver, NVRTC
 * and cuBLAS call is checked; an error names the call, its result and the node being run.
 */
#include "cuda_impl.h"
#include "ckrt_kernels_gpu.h"

#include <cublas_v2.h>
#include <cuda.h>
#include <nvrtc.h>

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- the driver, opened at run time */

#define CK_CU_FNS(X)                                                                                                   \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuDeviceGetName)     \
    X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuMemAlloc)    \
    X(cuMemFree) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyHtoDAsync)              \
    X(cuMemcpyDtoHAsync) X(cuMemsetD8Async) X(cuMemGetInfo) X(cuStreamCreate) X(cuStreamDestroy)                     \
    X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                  \
    X(cuEventElapsedTime) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel)             \
    X(cuGetErrorName) X(cuGetErrorString)

#define CK_STR_(x) #x
#define CK_XSTR_(x) CK_STR_(x) /* the versioned name cuda.h maps a call to: cuMemAlloc -> "cuMemAlloc_v2" */

enum { N_EVENT_PAIRS = 256, N_USER_EVENTS = 16, MAX_KERNELS = 128, SCRATCH_BYTES = 1 << 20 };

static struct {
    void *lib;
#define CK_CU_MEMBER_(f) __typeof__(f) *f;
    CK_CU_FNS(CK_CU_MEMBER_)
#undef CK_CU_MEMBER_
    int ready;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream[3]; /* CKRT_STREAM_*: 0 compute, 1 copies, 2 the data-parallel exchange */
    int cur;            /* the stream kernels, GEMMs and memsets go to (set_stream) */
    CUmodule mod;
    cublasHandle_t blas;
    struct { char name[64]; CUfunction f; } kernels[MAX_KERNELS];
    int n_kernels;
    CUdeviceptr arena;
    unsigned char *mirror;
    int64_t arena_bytes;
    int dirty;            /* the mirror holds bytes the device has not seen */
    const void *bad_ptr;  /* a pointer outside the arena reached a kernel */
    void *pool;
    CUevent user[N_USER_EVENTS];
    CUevent copy_ev[N_EVENT_PAIRS][4]; /* compute ready, copy start, copy end, compute waits */
    int n_copy_ev;
    /* reloads the compute stream has not waited for yet: it waits before the first kernel that
     * gets a pointer into one (prefetches overlap the compute in between) */
    struct { CUdeviceptr at; int64_t bytes; CUevent *ev; } pending[N_EVENT_PAIRS];
    int n_pending;
    CUresult pending_err;
    int sm;
    char desc[256];
    ckrt_device_stats st;
} G;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + 1e-6 * (double)t.tv_nsec;
}

static int cu_fail(ckrt_ctx *c, CUresult r, const char *call) {
    const char *name = NULL, *text = NULL;
    if (G.cuGetErrorName) G.cuGetErrorName(r, &name);
    if (G.cuGetErrorString) G.cuGetErrorString(r, &text);
    return ckrt_fail(c, CKRT_ERR_INTERNAL, "%s failed: %s (%s)", call, name ? name : "?", text ? text : "unknown error");
}
/* Checks a driver call; the message names it. */
#define CU(call)                                                        \
    do {                                                                \
        CUresult ck_r_ = G.call;                                        \
        if (ck_r_ != CUDA_SUCCESS) return cu_fail(c, ck_r_, #call);     \
    } while (0)
/* cuBLAS is opened at run time too (a program on the CPU never loads it: it is large, and its
 * loader-time code trips memory checkers); BLAS(f, (args)) calls and checks it. */
#define CK_BLAS_FNS(X) \
    X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasSetMathMode) X(cublasSgemm) X(cublasSgemmStridedBatched) \
    X(cublasGetStatusString)
static struct {
    void *lib;
#define CK_BLAS_MEMBER_(f) __typeof__(f) *f;
    CK_BLAS_FNS(CK_BLAS_MEMBER_)
#undef CK_BLAS_MEMBER_
} B;
#define BLAS(f, args)                                                                                     \
    do {                                                                                                  \
        cublasStatus_t ck_s_ = B.f args;                                                                  \
        if (ck_s_ != CUBLAS_STATUS_SUCCESS)                                                               \
            return ckrt_fail(c, CKRT_ERR_INTERNAL, "%s failed: %s", #f, B.cublasGetStatusString(ck_s_));  \
    } while (0)
/* NVRTC is opened at run time as well: linked, it made every program (most run on the CPU) map
 * and relocate it at start-up (~30 MiB of resident memory). N.f(args) calls it. */
#define CK_NVRTC_FNS(X)                                                                                    \
    X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) \
    X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcDestroyProgram) X(nvrtcGetErrorString)
static struct {
    void *lib;
#define CK_NVRTC_MEMBER_(f) __typeof__(f) *f;
    CK_NVRTC_FNS(CK_NVRTC_MEMBER_)
#undef CK_NVRTC_MEMBER_
} N;
#define NVRTC(call)                                                                                     \
    do {                                                                                                \
        nvrtcResult ck_n_ = N.call;                                                                     \
        if (ck_n_ != NVRTC_SUCCESS)                                                                     \
            return ckrt_fail(c, CKRT_ERR_INTERNAL, "%s failed: %s", #call, N.nvrtcGetErrorString(ck_n_)); \
    } while (0)

static int load_driver(ckrt_ctx *c) {
    if (G.lib) return CKRT_OK;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return ckrt_fail(c, CKRT_ERR_USAGE, "no CUDA driver: cannot load libcuda.so.1 (%s)", dlerror());
#define CK_CU_LOAD_(f)                                                                                        \
    if (!(*(void **)&G.f = dlsym(h, CK_XSTR_(f)))) {                                                          \
        dlclose(h);                                                                                           \
        return ckrt_fail(c, CKRT_ERR_USAGE, "the CUDA driver lacks %s: it is older than this CUDA toolkit", CK_XSTR_(f)); \
    }
    CK_CU_FNS(CK_CU_LOAD_)
#undef CK_CU_LOAD_
    G.lib = h;
    return CKRT_OK;
}

#ifndef CKRT_CUDA_LIBDIR
#define CKRT_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

static int load_cublas(ckrt_ctx *c) {
    if (B.lib) return CKRT_OK;
    const char *names[] = {CKRT_CUDA_LIBDIR "/libcublas.so." CK_XSTR_(CUBLAS_VER_MAJOR), "libcublas.so." CK_XSTR_(CUBLAS_VER_MAJOR)};
    void *h = NULL;
    for (int i = 0; i < 2 && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) return ckrt_fail(c, CKRT_ERR_USAGE, "cannot load cuBLAS (%s): %s", names[1], dlerror());
#define CK_BLAS_LOAD_(f)                                                                                     \
    if (!(*(void **)&B.f = dlsym(h, CK_XSTR_(f)))) {                                                         \
        dlclose(h);                                                                                          \
        return ckrt_fail(c, CKRT_ERR_USAGE, "cuBLAS (%s) lacks %s", names[1], CK_XSTR_(f));                  \
    }
    CK_BLAS_FNS(CK_BLAS_LOAD_)
#undef CK_BLAS_LOAD_
    B.lib = h;
    return CKRT_OK;
}

static int load_nvrtc(ckrt_ctx *c) {
    if (N.lib) return CKRT_OK;
    char names[4][256];
    int major = CUDA_VERSION / 1000; /* libnvrtc.so.13 for CUDA 13.x, .12 for 12.x */
    snprintf(names[0], sizeof names[0], "%s/libnvrtc.so.%d", CKRT_CUDA_LIBDIR, major);
    snprintf(names[1], sizeof names[1], "libnvrtc.so.%d", major);
    snprintf(names[2], sizeof names[2], "%s/libnvrtc.so", CKRT_CUDA_LIBDIR);
    snprintf(names[3], sizeof names[3], "libnvrtc.so");
    void *h = NULL;
    for (int i = 0; i < 4 && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) return ckrt_fail(c, CKRT_ERR_USAGE, "cannot load NVRTC (%s): %s", names[1], dlerror());
#define CK_NVRTC_LOAD_(f)                                                                                    \
    if (!(*(void **)&N.f = dlsym(h, CK_XSTR_(f)))) {                                                         \
        dlclose(h);                                                                                          \
        return ckrt_fail(c, CKRT_ERR_USAGE, "NVRTC (%s) lacks %s", names[1], CK_XSTR_(f));                   \
    }
    CK_NVRTC_FNS(CK_NVRTC_LOAD_)
#undef CK_NVRTC_LOAD_
    N.lib = h;
    return CKRT_OK;
}

/* ---------------------------------------------------------------- NVRTC and the kernel cache */

static uint64_t fnv1a(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int ckrt_cuda_compile(ckrt_ctx *c, const char *src, const char *name, int sm, char **log, void **cubin, size_t *cubin_bytes) {
    nvrtcProgram prog;
    char arch[32];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d", sm);
    /* no FMA contraction: the bodies round as written, as they do on the CPU */
    const char *opts[] = {arch, "--std=c++17", "--fmad=false", "--device-as-default-execution-space"};
    *log = NULL, *cubin = NULL, *cubin_bytes = 0;
    if (load_nvrtc(c)) return c->code;
    NVRTC(nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL));
    nvrtcResult r = N.nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
    size_t ln = 0;
    if (N.nvrtcGetProgramLogSize(prog, &ln) == NVRTC_SUCCESS && ln > 1 && (*log = malloc(ln))) {
        if (N.nvrtcGetProgramLog(prog, *log) != NVRTC_SUCCESS) (*log)[0] = 0;
    }
    int rc = CKRT_OK;
    if (r != NVRTC_SUCCESS) {
        rc = ckrt_fail(c, CKRT_ERR_INTERNAL, "nvrtcCompileProgram(%s, sm_%d) failed: %s\n%s", name, sm, N.nvrtcGetErrorString(r),
                       *log ? *log : "(no log)");
    } else if (N.nvrtcGetCUBINSize(prog, cubin_bytes) != NVRTC_SUCCESS || !(*cubin = malloc(*cubin_bytes ? *cubin_bytes : 1)) ||
               N.nvrtcGetCUBIN(prog, *cubin) != NVRTC_SUCCESS) {
        rc = ckrt_fail(c, CKRT_ERR_INTERNAL, "nvrtcGetCUBIN(%s, sm_%d) failed", name, sm);
    }
    N.nvrtcDestroyProgram(&prog);
    if (rc) {
        free(*cubin);
        *cubin = NULL;
    }
    return rc;
}

#define CACHE_MAGIC "CKPTCKRN"
#define CACHE_VERSION 1u
typedef struct cache_header {
    char magic[8];
    uint32_t version, arch;
    uint64_t source_hash;
    uint32_t nvrtc_major, nvrtc_minor;
    uint64_t payload_bytes, payload_checksum;
} cache_header;

static void cache_path(char *out, size_t n, const char *dir, uint64_t hash, int sm, int maj, int min) {
    snprintf(out, n, "%s/kernels-%016llx-sm_%d-nvrtc%d.%d.cubin", dir, (unsigned long long)hash, sm, maj, min);
}

/* The cached cubin for the key, or NULL (missing, foreign or corrupt: recompiled and rewritten). */
static void *cache_read(const char *path, const cache_header *key, size_t *bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    cache_header h;
    void *buf = NULL;
    if (fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, key->magic, 8) == 0 && h.version == key->version &&
        h.arch == key->arch && h.source_hash == key->source_hash && h.nvrtc_major == key->nvrtc_major &&
        h.nvrtc_minor == key->nvrtc_minor && h.payload_bytes > 0 && h.payload_bytes < ((uint64_t)1 << 31) &&
        (buf = malloc((size_t)h.payload_bytes)) && fread(buf, 1, (size_t)h.payload_bytes, f) == h.payload_bytes &&
        fnv1a(buf, (size_t)h.payload_bytes) == h.payload_checksum) {
        *bytes = (size_t)h.payload_bytes;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* Best effort: a cache that cannot be written only costs a compile next time. */
static void cache_write(const char *dir, const char *path, cache_header h, const void *cubin, size_t bytes) {
    char tmp[4500];
    snprintf(tmp, sizeof tmp, "%s", dir); /* mkdir -p */
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') *p = 0, mkdir(tmp, 0777), *p = '/';
    mkdir(tmp, 0777);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    h.payload_bytes = bytes;
    h.payload_checksum = fnv1a(cubin, bytes);
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    int ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(cubin, 1, bytes, f) == bytes;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) remove(tmp);
}

static char *read_text(ckrt_ctx *c, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        ckrt_fail(c, CKRT_ERR_IO, "cannot open the program's CUDA kernels '%s': %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0, k;
    char chunk[65536];
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + k + 1 > cap) {
            cap = (len + k + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        memcpy(buf + len, chunk, k);
        len += k;
    }
    fclose(f);
    if (!buf) buf = calloc(1, 1);
    else buf[len] = 0;
    return buf;
}

static int load_kernels(ckrt_ctx *c, const ckrt_cuda_options *o) {
    char path[4200], dir[4096], cpath[4400];
    if (o->kernels_cu) {
        snprintf(path, sizeof path, "%s", o->kernels_cu);
    } else { /* next to this program, like weights.bin */
        ssize_t k = readlink("/proc/self/exe", path, sizeof path - 32);
        if (k <= 0) return ckrt_fail(c, CKRT_ERR_IO, "cannot locate this program to find kernels.cu");
        path[k] = 0;
        char *slash = strrchr(path, '/');
        snprintf(slash ? slash + 1 : path, 32, "kernels.cu");
    }
    char *src = read_text(c, path);
    if (!src) return c->code;
    int maj = 0, min = 0;
    if (load_nvrtc(c)) {
        free(src);
        return c->code;
    }
    nvrtcResult nv = N.nvrtcVersion(&maj, &min);
    if (nv != NVRTC_SUCCESS) {
        free(src);
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "nvrtcVersion failed: %s", N.nvrtcGetErrorString(nv));
    }
    const char *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME");
    if (o->cache_dir) snprintf(dir, sizeof dir, "%s", o->cache_dir);
    else if (xdg && *xdg) snprintf(dir, sizeof dir, "%s/ckptc", xdg);
    else snprintf(dir, sizeof dir, "%s/.cache/ckptc", home && *home ? home : "/tmp");
    cache_header key;
    memset(&key, 0, sizeof key);
    memcpy(key.magic, CACHE_MAGIC, 8);
    key.version = CACHE_VERSION, key.arch = (uint32_t)G.sm, key.source_hash = fnv1a(src, strlen(src));
    key.nvrtc_major = (uint32_t)maj, key.nvrtc_minor = (uint32_t)min;
    cache_path(cpath, sizeof cpath, dir, key.source_hash, G.sm, maj, min);
    size_t bytes = 0;
    void *cubin = cache_read(cpath, &key, &bytes);
    G.st.cache_hit = cubin != NULL;
    if (!cubin) {
        char *log = NULL;
        double t0 = now_ms();
        int rc = ckrt_cuda_compile(c, src, path, G.sm, &log, &cubin, &bytes);
        G.st.compile_ms = now_ms() - t0;
        free(log);
        if (rc) {
            free(src);
            return rc;
        }
        cache_write(dir, cpath, key, cubin, bytes);
    }
    free(src);
    CUresult r = G.cuModuleLoadData(&G.mod, cubin);
    free(cubin);
    if (r != CUDA_SUCCESS) return cu_fail(c, r, "cuModuleLoadData(kernels.cu)");
    return CKRT_OK;
}

/* ---------------------------------------------------------------- the device layer (cuda_impl.h) */

static int upload_if_dirty(ckrt_ctx *c) {
    if (!G.dirty) return CKRT_OK;
    G.dirty = 0;
    CU(cuMemcpyHtoD(G.arena, G.mirror, (size_t)G.arena_bytes));
    return CKRT_OK;
}

/* The compute stream waits for pending reload k (its data is about to be used) from here on. */
static void wait_pending(int k) {
    CUevent *ev = G.pending[k].ev;
    CUresult r = G.cuEventRecord(ev[3], G.stream[0]);
    if (r == CUDA_SUCCESS) r = G.cuStreamWaitEvent(G.stream[0], ev[2], 0);
    if (r != CUDA_SUCCESS && G.pending_err == CUDA_SUCCESS) G.pending_err = r;
    G.pending[k] = G.pending[--G.n_pending];
}

ckrt_dptr ckrt_cu_ptr(ckrt_ctx *c, const void *p) {
    (void)c;
    if (!p) return 0;
    const unsigned char *b = p;
    if (G.mirror && b >= G.mirror && b <= G.mirror + G.arena_bytes) {
        CUdeviceptr d = G.arena + (CUdeviceptr)(b - G.mirror);
        for (int k = G.n_pending - 1; k >= 0; k--)
            if (d >= G.pending[k].at && d < G.pending[k].at + (CUdeviceptr)G.pending[k].bytes) wait_pending(k);
        return (ckrt_dptr)d;
    }
    G.bad_ptr = p;
    return 0;
}

static int check_ptrs(ckrt_ctx *c) {
    if (G.pending_err != CUDA_SUCCESS) {
        CUresult r = G.pending_err;
        G.pending_err = CUDA_SUCCESS;
        return cu_fail(c, r, "cuStreamWaitEvent(reload)");
    }
    if (G.bad_ptr) {
        const void *p = G.bad_ptr;
        G.bad_ptr = NULL;
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "pointer %p is not in the arena: the CUDA backend cannot pass it to a kernel", p);
    }
    return upload_if_dirty(c);
}

int ckrt_cu_launch(ckrt_ctx *c, const char *kernel, int64_t n, void **args) {
    CKRT_TRY(check_ptrs(c));
    CUfunction f = NULL;
    for (int i = 0; i < G.n_kernels && !f; i++)
        if (strcmp(G.kernels[i].name, kernel) == 0) f = G.kernels[i].f;
    if (!f) {
        char full[80];
        snprintf(full, sizeof full, "ck_g_%s", kernel);
        CUresult r = G.cuModuleGetFunction(&f, G.mod, full);
        if (r != CUDA_SUCCESS) {
            cu_fail(c, r, "cuModuleGetFunction");
            return ckrt_fail(c, CKRT_ERR_INTERNAL, "kernel %s is not in kernels.cu (%s); regenerate the program with this ckptc", full,
                             c->msg);
        }
        if (G.n_kernels < MAX_KERNELS) {
            snprintf(G.kernels[G.n_kernels].name, sizeof G.kernels[0].name, "%s", kernel);
            G.kernels[G.n_kernels++].f = f;
        }
    }
    unsigned grid = (unsigned)CK_G_GRID(n);
    CUresult r = G.cuLaunchKernel(f, grid, 1, 1, CK_G_BLOCK, 1, 1, 0, G.stream[G.cur], args, NULL);
    if (r != CUDA_SUCCESS) {
        char what[120];
        snprintf(what, sizeof what, "cuLaunchKernel(ck_g_%s, %u blocks)", kernel, grid);
        return cu_fail(c, r, what);
    }
    return CKRT_OK;
}

int ckrt_cu_gemm(ckrt_ctx *c, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, ckrt_dptr a, int64_t lda,
                 int64_t stride_a, ckrt_dptr b, int64_t ldb, int64_t stride_b, float beta, ckrt_dptr y, int64_t ldy,
                 int64_t stride_y, int64_t batch) {
    CKRT_TRY(check_ptrs(c));
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldy > INT_MAX || batch > INT_MAX)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "GEMM %lldx%lldx%lld exceeds cuBLAS's 32-bit sizes", (long long)m, (long long)n,
                         (long long)k);
    cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (batch == 1)
        BLAS(cublasSgemm, (G.blas, ta, tb, (int)m, (int)n, (int)k, &alpha, (const float *)a, (int)lda, (const float *)b, (int)ldb,
                           &beta, (float *)y, (int)ldy));
    else
        BLAS(cublasSgemmStridedBatched, (G.blas, ta, tb, (int)m, (int)n, (int)k, &alpha, (const float *)a, (int)lda, stride_a,
                                       (const float *)b, (int)ldb, stride_b, &beta, (float *)y, (int)ldy, stride_y, (int)batch));
    return CKRT_OK;
}

int ckrt_cu_memset0(ckrt_ctx *c, ckrt_dptr p, int64_t bytes) {
    CKRT_TRY(check_ptrs(c));
    if (bytes <= 0) return CKRT_OK;
    CU(cuMemsetD8Async(p, 0, (size_t)bytes, G.stream[G.cur]));
    return CKRT_OK;
}

int ckrt_cu_read(ckrt_ctx *c, void *dst, ckrt_dptr src, int64_t bytes) {
    CKRT_TRY(check_ptrs(c));
    if (bytes <= 0) return CKRT_OK;
    CU(cuStreamSynchronize(G.stream[0]));
    CU(cuMemcpyDtoH(dst, src, (size_t)bytes));
    return CKRT_OK;
}

ckrt_dptr ckrt_cu_scratch(ckrt_ctx *c, int64_t *bytes) {
    (void)c;
    *bytes = SCRATCH_BYTES;
    return (ckrt_dptr)G.arena + (ckrt_dptr)((G.arena_bytes + 255) / 256 * 256);
}

/* ---------------------------------------------------------------- backend hooks */

static int be_arena_alloc(ckrt_ctx *c, int64_t bytes, unsigned char **out) {
    if (G.mirror) return ckrt_fail(c, CKRT_ERR_INTERNAL, "the CUDA arena is allocated once");
    size_t n = (size_t)(bytes ? bytes : CKRT_ALIGN);
    void *m = NULL;
    if (posix_memalign(&m, CKRT_ALIGN, (n + CKRT_ALIGN - 1) / CKRT_ALIGN * CKRT_ALIGN) != 0)
        return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the arena's host mirror: %lld bytes", (long long)bytes);
    size_t dev_bytes = (n + 255) / 256 * 256 + SCRATCH_BYTES;
    CUresult r = G.cuMemAlloc(&G.arena, dev_bytes);
    if (r != CUDA_SUCCESS) {
        free(m);
        cu_fail(c, r, "cuMemAlloc");
        return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the arena on the GPU: %lld bytes (%s)", (long long)dev_bytes, c->msg);
    }
    G.mirror = m, G.arena_bytes = (int64_t)n, G.dirty = 1;
    *out = m;
    return CKRT_OK;
}

static void be_arena_free(ckrt_ctx *c, unsigned char *p) {
    (void)c;
    if (p != G.mirror) return;
    if (G.arena) G.cuMemFree(G.arena);
    free(G.mirror);
    G.arena = 0, G.mirror = NULL, G.arena_bytes = 0;
}

static int be_host_alloc(ckrt_ctx *c, int64_t bytes, void **out) {
    CU(cuMemHostAlloc(out, (size_t)(bytes ? bytes : 1), 0));
    G.pool = *out;
    return CKRT_OK;
}

static void be_host_free(ckrt_ctx *c, void *p) {
    (void)c;
    if (p) G.cuMemFreeHost(p);
    if (p == G.pool) G.pool = NULL;
}

/* Takes the next (compute ready, copy start, copy end) event triple; when all are used, settles
 * the timings first. */
static int settle_copies(ckrt_ctx *c);
static int next_events(ckrt_ctx *c, CUevent **ev) {
    if (G.n_copy_ev == N_EVENT_PAIRS) CKRT_TRY(settle_copies(c));
    *ev = G.copy_ev[G.n_copy_ev++];
    return CKRT_OK;
}

/* An offload (to_host) or reload on the copy stream, ordered against the compute stream. */
static int copy_async(ckrt_ctx *c, void *dst, const void *src, int64_t bytes, int to_host) {
    CKRT_TRY(check_ptrs(c));
    if (bytes <= 0) return CKRT_OK;
    CUevent *ev;
    CKRT_TRY(next_events(c, &ev));
    CU(cuEventRecord(ev[0], G.stream[0]));
    CU(cuStreamWaitEvent(G.stream[1], ev[0], 0));
    CU(cuEventRecord(ev[1], G.stream[1]));
    if (to_host) {
        ckrt_dptr s = ckrt_cu_ptr(c, src);
        CKRT_TRY(check_ptrs(c));
        CU(cuMemcpyDtoHAsync(dst, s, (size_t)bytes, G.stream[1]));
    } else {
        ckrt_dptr d = ckrt_cu_ptr(c, dst);
        CKRT_TRY(check_ptrs(c));
        CU(cuMemcpyHtoDAsync(d, src, (size_t)bytes, G.stream[1]));
    }
    CU(cuEventRecord(ev[2], G.stream[1]));
    if (to_host) { /* the planner may reuse the source's bytes right after: wait now */
        CU(cuEventRecord(ev[3], G.stream[0]));
        CU(cuStreamWaitEvent(G.stream[0], ev[2], 0));
    } else { /* a prefetch: waited for where a kernel first gets a pointer into it (ckrt_cu_ptr) */
        G.pending[G.n_pending].at = ckrt_cu_ptr(c, dst);
        G.pending[G.n_pending].bytes = bytes;
        G.pending[G.n_pending++].ev = ev;
    }
    G.st.copy_bytes += bytes;
    return CKRT_OK;
}

static int be_copy_to_device(ckrt_ctx *c, void *dst, const void *src, int64_t bytes, int stream) {
    (void)stream;
    return copy_async(c, dst, src, bytes, 0);
}
static int be_copy_to_host(ckrt_ctx *c, void *dst, const void *src, int64_t bytes, int stream) {
    (void)stream;
    return copy_async(c, dst, src, bytes, 1);
}

static int be_event_record(ckrt_ctx *c, int event, int stream) {
    if (event < 0 || event >= N_USER_EVENTS || stream < 0 || stream > 2)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "event %d / stream %d out of range", event, stream);
    CU(cuEventRecord(G.user[event], G.stream[stream]));
    return CKRT_OK;
}
static int be_stream_wait(ckrt_ctx *c, int stream, int event) {
    if (event < 0 || event >= N_USER_EVENTS || stream < 0 || stream > 2)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "event %d / stream %d out of range", event, stream);
    CU(cuStreamWaitEvent(G.stream[stream], G.user[event], 0));
    return CKRT_OK;
}
static int be_set_stream(ckrt_ctx *c, int stream) {
    if (stream != CKRT_STREAM_COMPUTE && stream != CKRT_STREAM_COMM)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "kernels cannot run on stream %d", stream);
    if (G.cur == stream) return CKRT_OK;
    G.cur = stream;
    BLAS(cublasSetStream, (G.blas, (cudaStream_t)G.stream[stream]));
    return CKRT_OK;
}

/* Adds up the copies' timings: the copy itself (start -> end) and what the compute stream waited
 * (from where it starts waiting to the copy's end, when the copy ends later). */
static int settle_copies(ckrt_ctx *c) {
    while (G.n_pending) wait_pending(G.n_pending - 1); /* waited for by nobody: the wait point is now */
    CKRT_TRY(check_ptrs(c));
    CU(cuStreamSynchronize(G.stream[2]));
    CU(cuStreamSynchronize(G.stream[1]));
    CU(cuStreamSynchronize(G.stream[0]));
    for (int i = 0; i < G.n_copy_ev; i++) {
        float copy = 0, wait = 0;
        CU(cuEventElapsedTime(&copy, G.copy_ev[i][1], G.copy_ev[i][2]));
        CU(cuEventElapsedTime(&wait, G.copy_ev[i][3], G.copy_ev[i][2]));
        G.st.copy_ms += copy, G.st.copy_exposed_ms += wait > 0 ? wait : 0;
    }
    G.n_copy_ev = 0;
    return CKRT_OK;
}

static int be_synchronize(ckrt_ctx *c) {
    CKRT_TRY(check_ptrs(c));
    return settle_copies(c);
}

/* The host mirror's bytes [offset, offset + bytes) from the device (after synchronize). */
static int be_to_host(ckrt_ctx *c, int64_t offset, int64_t bytes) {
    CKRT_TRY(check_ptrs(c));
    if (bytes < 0) offset = 0, bytes = G.arena_bytes;
    if (offset < 0 || offset + bytes > G.arena_bytes)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "host view of bytes [%lld, %lld) outside the arena", (long long)offset,
                         (long long)(offset + bytes));
    double t0 = now_ms();
    CU(cuMemcpyDtoH(G.mirror + offset, G.arena + (CUdeviceptr)offset, (size_t)bytes));
    G.st.mirror_ms += now_ms() - t0;
    return CKRT_OK;
}

/* For the NCCL transport: the device address of an arena pointer, the mirror uploaded first. */
static unsigned long long be_device_address(ckrt_ctx *c, const void *p) {
    ckrt_dptr d = ckrt_cu_ptr(c, p);
    return check_ptrs(c) ? 0 : d;
}

static void *be_current_stream(ckrt_ctx *c) {
    (void)c;
    return (void *)G.stream[G.cur];
}

static const ckrt_backend cuda_backend = {
    .name = "cuda",
    .arena_alloc = be_arena_alloc,
    .arena_free = be_arena_free,
    .host_alloc = be_host_alloc,
    .host_free = be_host_free,
    .copy_to_device = be_copy_to_device,
    .copy_to_host = be_copy_to_host,
    .event_record = be_event_record,
    .stream_wait = be_stream_wait,
    .synchronize = be_synchronize,
    .dev = &ckrt_cuda_ops,
    .to_host = be_to_host,
    .device_address = be_device_address,
    .current_stream = be_current_stream,
    .set_stream = be_set_stream,
};

/* ---------------------------------------------------------------- open / close */

static int open_device(ckrt_ctx *c, const ckrt_cuda_options *o) {
    /* the default device is probed on every start: without a loaded NVIDIA driver (its /proc
     * entry, or WSL's /dev/dxg) the CPU is chosen without dlopen; --device cuda always tries */
    if (o->quiet_probe && access("/proc/driver/nvidia/version", R_OK) != 0 && access("/dev/dxg", F_OK) != 0)
        return ckrt_fail(c, CKRT_ERR_USAGE, "no NVIDIA driver loaded (no /proc/driver/nvidia/version)");
    CKRT_TRY(load_driver(c));
    CUresult r = G.cuInit(0);
    if (r != CUDA_SUCCESS) {
        cu_fail(c, r, "cuInit");
        return ckrt_fail(c, CKRT_ERR_USAGE, "no usable CUDA device: %s", c->msg);
    }
    int count = 0;
    CU(cuDeviceGetCount(&count));
    if (count == 0) return ckrt_fail(c, CKRT_ERR_USAGE, "no CUDA device: the driver reports none");
    int ordinal = o->wrap_ordinal && o->ordinal >= 0 ? o->ordinal % count : o->ordinal;
    if (ordinal < 0 || ordinal >= count)
        return ckrt_fail(c, CKRT_ERR_USAGE, "CUDA device %d does not exist (%d present)", ordinal, count);
    CU(cuDeviceGet(&G.dev, ordinal));
    int maj = 0, min = 0;
    CU(cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, G.dev));
    CU(cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, G.dev));
    G.sm = maj * 10 + min;
    char name[200] = "";
    size_t total = 0;
    CU(cuDeviceGetName(name, (int)sizeof name, G.dev));
    CU(cuDeviceTotalMem(&total, G.dev));
    snprintf(G.desc, sizeof G.desc, "%s, sm_%d, %.1f GiB", name, G.sm, (double)total / (1 << 30));
    CU(cuDevicePrimaryCtxRetain(&G.ctx, G.dev));
    CU(cuCtxSetCurrent(G.ctx));
    for (int s = 0; s < 3; s++) CU(cuStreamCreate(&G.stream[s], CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < N_USER_EVENTS; i++) CU(cuEventCreate(&G.user[i], CU_EVENT_DISABLE_TIMING));
    for (int i = 0; i < N_EVENT_PAIRS; i++)
        for (int k = 0; k < 4; k++) CU(cuEventCreate(&G.copy_ev[i][k], CU_EVENT_DEFAULT));
    CKRT_TRY(load_kernels(c, o));
    CKRT_TRY(load_cublas(c));
    BLAS(cublasCreate, (&G.blas));
    BLAS(cublasSetStream, (G.blas, (cudaStream_t)G.stream[0]));
    /* FP32 products stay FP32 unless --tf32: TF32 rounds the operands to 10 mantissa bits */
    BLAS(cublasSetMathMode, (G.blas, o->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    G.ready = 1;
    return CKRT_OK;
}

int ckrt_cuda_open(ckrt_ctx *c, const ckrt_cuda_options *o, const ckrt_backend **out) {
    *out = NULL;
    if (G.ready) return ckrt_fail(c, CKRT_ERR_INTERNAL, "the CUDA backend is already open");
    int rc = open_device(c, o);
    if (rc) {
        ckrt_cuda_close(c);
        return rc;
    }
    *out = &cuda_backend;
    return CKRT_OK;
}

void ckrt_cuda_close(ckrt_ctx *c) {
    (void)c;
    if (!G.lib) return;
    if (G.blas) B.cublasDestroy(G.blas);
    if (G.mod) G.cuModuleUnload(G.mod);
    for (int i = 0; i < N_USER_EVENTS; i++)
        if (G.user[i]) G.cuEventDestroy(G.user[i]);
    for (int i = 0; i < N_EVENT_PAIRS; i++)
        for (int k = 0; k < 4; k++)
            if (G.copy_ev[i][k]) G.cuEventDestroy(G.copy_ev[i][k]);
    for (int s = 0; s < 3; s++)
        if (G.stream[s]) G.cuStreamDestroy(G.stream[s]);
    if (G.ctx) G.cuDevicePrimaryCtxRelease(G.dev);
    static __typeof__(G) keep; /* the driver stays loaded: its symbols are resolved once */
    keep = G;
    memset(&G, 0, sizeof G);
    G.lib = keep.lib;
#define CK_CU_KEEP_(f) G.f = keep.f;
    CK_CU_FNS(CK_CU_KEEP_)
#undef CK_CU_KEEP_
}

const char *ckrt_cuda_describe(void) { return G.desc; }

int ckrt_cuda_stats(ckrt_ctx *c, ckrt_device_stats *out) {
    memset(out, 0, sizeof *out);
    if (!G.ready) return CKRT_OK;
    *out = G.st;
    size_t free_b = 0, total = 0;
    CU(cuMemGetInfo(&free_b, &total));
    out->mem_used_bytes = (int64_t)(total - free_b), out->mem_total_bytes = (int64_t)total;
    return CKRT_OK;
}
