/* cuda_driver.c — the CUDA backend's device layer: the driver API, NVRTC, cuBLAS.
 *
 * Start-up (ckrt_cuda_open): the driver library (libcuda.so.1, or $CKRT_CUDA_DRIVER), NVRTC and
 * cuBLAS (from $CKRT_CUDA_LIBDIR, else the toolkit libckrt was built with, else the loader path)
 * are opened with dlopen, so that a program built where the toolkit is installed still starts,
 * and runs on the CPU, on a machine without a driver (and never loads cuBLAS there); NVRTC's
 * builtins library is loaded from NVRTC's own directory first (NVRTC opens it by name). cuInit,
 * the device's primary context (shared with cuBLAS), a compute stream, a copy stream and a
 * communication stream. DIR/kernels.cu is compiled by NVRTC for the device's own architecture
 * (sm_XY), or, for a GPU newer than every architecture this NVRTC knows, as PTX for the newest
 * one (the driver compiles it at load time); it is cached on disk: the key is the source's hash,
 * the target, the options and the NVRTC version, the file carries a magic, a version, the key and
 * a checksum, and is written to a temporary name then renamed (a second start skips NVRTC; a
 * corrupt or foreign file is ignored and rewritten). cuModuleLoadData loads it, and
 * cuModuleGetFunction finds each ck_g_* wrapper on its first launch.
 *
 * Memory: one cuMemAlloc holds the planned arena (plus its guard zone), a 1 MiB scratch for the
 * loss's partial sums and cuBLAS's workspace (cublasSetWorkspace: cuBLAS allocates nothing of its
 * own), after cuMemGetInfo says it fits with a margin for the context; the offload pool is one
 * pinned cuMemHostAlloc slab. The host holds no copy of the arena: ckrt_ctx.arena is a reserved
 * range of addresses (cuda_arena.c) that pointers are formed in and mapped from, and the host
 * reaches the device's bytes through the backend's write/read/fill/top hooks (arena_io.c): writes
 * (weights, inputs) go through two pinned staging buffers of STAGE_BYTES on the compute stream,
 * one filled while the other's copy runs; reads (the loss, dumps, checksums) wait for every stream
 * and come back through the same buffers; the canary is a memset and the high-water mark a
 * reduction kernel (ck_g_arena_top) with 8 bytes read back. After a write or fill the other
 * streams wait for the compute stream. No transfer runs on the legacy NULL stream: the
 * non-blocking streams would not be ordered with it. The host memory this backend allocates is
 * the staging (st.host_staging_bytes) and the offload pool the plan sized; nothing scales with
 * the arena.
 *
 * Offload and reload copies run on the copy stream: it waits for an event recorded on the
 * compute stream (the tensor is produced, or its destination free), then copies. After an
 * offload the compute stream waits for the copy at once (the plan may reuse the source's bytes
 * next; it does not say when). A reload is a prefetch: the stream kernels run on waits for it
 * only before the first kernel or GEMM that gets a pointer into its bytes (every pointer passes
 * through ckrt_cu_ptr; the compute and the communication stream each wait), so the copy overlaps
 * the compute issued in between. The waits are timed with events: the exposed copy time. Every
 * driver, NVRTC and cuBLAS call is checked; an error names the call, its result and the node.
 *
 * tests/fake_cuda.c stands in for the driver, cuBLAS and NVRTC on a machine without a GPU and
 * runs each stream's work only when the program's synchronization demands it (ctest cuda_fake).
 */
#define _GNU_SOURCE /* dlinfo */
#include "cuda_impl.h"
#include "ckrt_conv_batch.h" /* CK_CONV_FWD, _DGRAD, _WGRAD */
#include "ckrt_kernels_gpu.h"
#include "ckrt_util.h"

#include <cublas_v2.h>
#include <cuda.h>
#include <nvrtc.h>

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
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
    X(cuMemFree) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemcpyHtoDAsync)              \
    X(cuMemcpyDtoHAsync) X(cuMemsetD8Async) X(cuMemGetInfo) X(cuStreamCreate) X(cuStreamDestroy)                     \
    X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                  \
    X(cuEventSynchronize) X(cuEventElapsedTime) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel)             \
    X(cuGetErrorName) X(cuGetErrorString)

#define CK_STR_(x) #x
#define CK_XSTR_(x) CK_STR_(x) /* the versioned name cuda.h maps a call to: cuMemAlloc -> "cuMemAlloc_v2" */

enum { N_EVENT_PAIRS = 256, N_USER_EVENTS = 16, MAX_KERNELS = 128, SCRATCH_BYTES = 1 << 20 };
#define STAGE_BYTES ((int64_t)4 << 20) /* each of the two pinned staging buffers */
/* Device memory besides the arena and its scratch: cuBLAS's workspace, handed to it
 * (cublasSetWorkspace) so that it never allocates on its own (32 MiB is what NVIDIA recommends
 * for Hopper and newer, 4 MiB before), and a margin for what the context allocates behind the
 * program's back (the module, kernels' stacks, the driver's own buffers), checked against
 * cuMemGetInfo before the arena is allocated. */
#define CUBLAS_WS_BYTES(sm) ((sm) >= 90 ? (int64_t)32 << 20 : (int64_t)4 << 20)
#define DEVICE_MARGIN_BYTES ((int64_t)256 << 20)

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
    unsigned char *space; /* ckrt_ctx.arena: the arena's addresses on the host, no memory behind them */
    int64_t arena_bytes;
    unsigned char *stage[2]; /* pinned staging for the host's writes and reads */
    CUevent stage_ev[2];     /* recorded after the copy that last used each */
    int stage_busy[2], stage_next;
    const void *bad_ptr;  /* a pointer outside the arena reached a kernel */
    void *pool;
    CUevent user[N_USER_EVENTS];
    CUevent *prof_ev; /* --profile's time marks (be_clock_mark), created as the marks need them */
    int n_prof_ev;
    CUevent uploaded; /* recorded after the host's writes on the compute stream */
    CUevent copy_ev[N_EVENT_PAIRS][4]; /* compute ready, copy start, copy end, compute waits */
    int n_copy_ev;
    /* reloads since the last settle_copies: each stream waits for one before its first kernel
     * that gets a pointer into it (prefetches overlap the compute in between) */
    struct { CUdeviceptr at; int64_t bytes; CUevent *ev; unsigned waited; /* bit per stream */ } pending[N_EVENT_PAIRS];
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
    if (G.cuGetErrorName && G.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (G.cuGetErrorString && G.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
    if (!name) /* a code this driver cannot name: the number is what a user can look up */
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "%s failed: CUresult %d (%s)", call, (int)r, text ? text : "the driver has no name for it");
    return ckrt_fail(c, CKRT_ERR_INTERNAL, "%s failed: %s (%s)", call, name, text ? text : "no description");
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
    X(cublasGetStatusString) X(cublasSetWorkspace)
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
    X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcDestroyProgram) X(nvrtcGetErrorString) \
    X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)
static struct {
    void *lib, *builtins;
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

/* $CKRT_CUDA_DRIVER names the driver library (default: libcuda.so.1 through the loader path). */
static int load_driver(ckrt_ctx *c) {
    if (G.lib) return CKRT_OK;
    const char *env = getenv("CKRT_CUDA_DRIVER"), *name = env && *env ? env : "libcuda.so.1";
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) return ckrt_fail(c, CKRT_ERR_USAGE, "no CUDA driver: cannot load %s (%s)", name, dlerror());
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

/* Where NVRTC and cuBLAS are looked for first: $CKRT_CUDA_LIBDIR, else the toolkit libckrt was
 * built with; then the loader path. */
static const char *cuda_libdir(void) {
    const char *e = getenv("CKRT_CUDA_LIBDIR");
    return e && *e ? e : CKRT_CUDA_LIBDIR;
}

static int load_cublas(ckrt_ctx *c) {
    if (B.lib) return CKRT_OK;
    char names[2][4200];
    snprintf(names[0], sizeof names[0], "%s/libcublas.so.%d", cuda_libdir(), CUBLAS_VER_MAJOR);
    snprintf(names[1], sizeof names[1], "libcublas.so.%d", CUBLAS_VER_MAJOR);
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

/* NVRTC loads its builtins library (libnvrtc-builtins.so.M.m) by name when it compiles, which
 * finds it only through the loader's cache or path: a toolkit outside them (a runfile install,
 * a copy beside the program) would fail every compile. Loading it first from NVRTC's own
 * directory makes that by-name lookup find the loaded copy. Best effort: without it, NVRTC
 * searches as before. */
static void preload_builtins(void *nvrtc) {
    char dir[4096], path[4200];
    int maj = 0, min = 0;
    if (dlinfo(nvrtc, RTLD_DI_ORIGIN, dir) != 0 || N.nvrtcVersion(&maj, &min) != NVRTC_SUCCESS) return;
    snprintf(path, sizeof path, "%s/libnvrtc-builtins.so.%d.%d", dir, maj, min);
    if (!N.builtins) N.builtins = dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static int load_nvrtc(ckrt_ctx *c) {
    if (N.lib) return CKRT_OK;
    char names[4][4200];
    int major = CUDA_VERSION / 1000; /* libnvrtc.so.13 for CUDA 13.x, .12 for 12.x */
    snprintf(names[0], sizeof names[0], "%s/libnvrtc.so.%d", cuda_libdir(), major);
    snprintf(names[1], sizeof names[1], "libnvrtc.so.%d", major);
    snprintf(names[2], sizeof names[2], "%s/libnvrtc.so", cuda_libdir());
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
    preload_builtins(h);
    return CKRT_OK;
}

/* ---------------------------------------------------------------- NVRTC and the kernel cache */

/* The compile options besides the architecture: part of the kernel cache's key. No FMA
 * contraction: the bodies round as written, as they do on the CPU. */
static const char *const nvrtc_options[] = {"--std=c++17", "--fmad=false", "--device-as-default-execution-space"};
enum { N_NVRTC_OPTIONS = sizeof nvrtc_options / sizeof nvrtc_options[0] };

/* Compiles src for sm_<arch> (a cubin) or, ptx set, compute_<arch> (PTX the driver JIT-compiles). */
static int compile_for(ckrt_ctx *c, const char *src, const char *name, int arch, int ptx, char **log, void **image, size_t *bytes) {
    nvrtcProgram prog;
    char target[24], opt[48];
    snprintf(target, sizeof target, "%s_%d", ptx ? "compute" : "sm", arch);
    snprintf(opt, sizeof opt, "--gpu-architecture=%s", target);
    const char *opts[N_NVRTC_OPTIONS + 1] = {opt};
    for (int i = 0; i < N_NVRTC_OPTIONS; i++) opts[i + 1] = nvrtc_options[i];
    *log = NULL, *image = NULL, *bytes = 0;
    if (load_nvrtc(c)) return c->code;
    NVRTC(nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL));
    nvrtcResult r = N.nvrtcCompileProgram(prog, N_NVRTC_OPTIONS + 1, opts);
    size_t ln = 0;
    if (N.nvrtcGetProgramLogSize(prog, &ln) == NVRTC_SUCCESS && ln > 1 && (*log = malloc(ln))) {
        if (N.nvrtcGetProgramLog(prog, *log) != NVRTC_SUCCESS) (*log)[0] = 0;
    }
    int rc = CKRT_OK;
    if (r != NVRTC_SUCCESS) {
        rc = ckrt_fail(c, CKRT_ERR_INTERNAL, "nvrtcCompileProgram(%s, %s) failed: %s\n%s", name, target, N.nvrtcGetErrorString(r),
                       *log ? *log : "(no log)");
    } else if ((ptx ? N.nvrtcGetPTXSize(prog, bytes) : N.nvrtcGetCUBINSize(prog, bytes)) != NVRTC_SUCCESS || *bytes == 0 ||
               !(*image = malloc(*bytes)) ||
               (ptx ? N.nvrtcGetPTX(prog, *image) : N.nvrtcGetCUBIN(prog, *image)) != NVRTC_SUCCESS) {
        rc = ckrt_fail(c, CKRT_ERR_INTERNAL, "nvrtcGet%s(%s, %s) failed", ptx ? "PTX" : "CUBIN", name, target);
    }
    N.nvrtcDestroyProgram(&prog);
    if (rc) {
        free(*image);
        *image = NULL;
    }
    return rc;
}

int ckrt_cuda_compile(ckrt_ctx *c, const char *src, const char *name, int sm, char **log, void **cubin, size_t *cubin_bytes) {
    return compile_for(c, src, name, sm, 0, log, cubin, cubin_bytes);
}

/* What to compile for a device of compute capability sm: a cubin for sm itself when NVRTC knows
 * it; else PTX for the newest architecture NVRTC supports below sm, which the driver compiles for
 * the device at load time (a GPU newer than this NVRTC); a GPU older than every architecture
 * NVRTC supports cannot run its code. */
static int pick_target(ckrt_ctx *c, int sm, int maj, int min, int *arch, int *ptx) {
    int n = 0, best = 0, lowest = INT_MAX;
    NVRTC(nvrtcGetNumSupportedArchs(&n));
    int *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
    if (!v) return ckrt_fail(c, CKRT_ERR_NOMEM, "out of memory");
    nvrtcResult r = n > 0 ? N.nvrtcGetSupportedArchs(v) : NVRTC_SUCCESS;
    for (int i = 0; i < n && r == NVRTC_SUCCESS; i++) {
        if (v[i] == sm) best = sm;
        if (v[i] < sm && v[i] > best && best != sm) best = v[i];
        if (v[i] < lowest) lowest = v[i];
    }
    free(v);
    if (r != NVRTC_SUCCESS) return ckrt_fail(c, CKRT_ERR_INTERNAL, "nvrtcGetSupportedArchs failed: %s", N.nvrtcGetErrorString(r));
    if (!best)
        return ckrt_fail(c, CKRT_ERR_USAGE, "the GPU is sm_%d, older than every architecture NVRTC %d.%d compiles for (the oldest is sm_%d); "
                         "use a CUDA toolkit that still supports it, or --device cpu", sm, maj, min, n ? lowest : 0);
    *arch = best, *ptx = best != sm;
    return CKRT_OK;
}

#define CACHE_MAGIC "CKPTCKRN"
#define CACHE_VERSION 3u /* 3: keys and payloads hashed by ckrt_checksum (8-byte words) */
typedef struct cache_header {
    char magic[8];
    uint32_t version, arch; /* arch: the target, sm_XY or (ptx set) compute_XY */
    uint64_t source_hash, options_hash;
    uint32_t nvrtc_major, nvrtc_minor, ptx, pad;
    uint64_t payload_bytes, payload_checksum;
} cache_header;

static void cache_path(char *out, size_t n, const char *dir, const cache_header *k) {
    snprintf(out, n, "%s/kernels-%016llx-%s_%u-%08llx-nvrtc%u.%u.bin", dir, (unsigned long long)k->source_hash,
             k->ptx ? "compute" : "sm", k->arch, (unsigned long long)(k->options_hash & 0xffffffffu), k->nvrtc_major, k->nvrtc_minor);
}

/* The kernel cache's directory: the program's own choice (ckrt_cuda_options.cache_dir), $XDG_CACHE_HOME/ckptc, then ~/.cache/ckptc
 * with the home directory from $HOME or the password database. Never a shared directory: with
 * no home, the cache is off (*dir empty) and every start compiles. */
static void cache_dir(char *dir, size_t n, const char *option) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (!home || !*home) {
        struct passwd *pw = getpwuid(getuid());
        home = pw && pw->pw_dir && *pw->pw_dir && strcmp(pw->pw_dir, "/") != 0 ? pw->pw_dir : NULL;
    }
    if (option) snprintf(dir, n, "%s", option);
    else if (xdg && *xdg) snprintf(dir, n, "%s/ckptc", xdg);
    else if (home) snprintf(dir, n, "%s/.cache/ckptc", home);
    else dir[0] = 0;
}

/* The cached cubin for the key, or NULL (missing, foreign or corrupt: recompiled and rewritten). */
static void *cache_read(const char *path, const cache_header *key, size_t *bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    cache_header h;
    void *buf = NULL;
    if (fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, key->magic, 8) == 0 && h.version == key->version &&
        h.arch == key->arch && h.source_hash == key->source_hash && h.options_hash == key->options_hash && h.ptx == key->ptx &&
        h.nvrtc_major == key->nvrtc_major &&
        h.nvrtc_minor == key->nvrtc_minor && h.payload_bytes > 0 && h.payload_bytes < ((uint64_t)1 << 31) &&
        (buf = malloc((size_t)h.payload_bytes)) && fread(buf, 1, (size_t)h.payload_bytes, f) == h.payload_bytes &&
        ckrt_checksum(buf, (size_t)h.payload_bytes) == h.payload_checksum) {
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
    h.payload_checksum = ckrt_checksum(cubin, bytes);
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
    int arch = 0, ptx = 0;
    if (pick_target(c, G.sm, maj, min, &arch, &ptx)) {
        free(src);
        return c->code;
    }
    if (ptx) { /* said where the device is described: the first line of output */
        size_t len = strlen(G.desc);
        snprintf(G.desc + len, sizeof G.desc - len, "; kernels as compute_%d PTX (NVRTC %d.%d has no sm_%d)", arch, maj, min, G.sm);
    }
    cache_dir(dir, sizeof dir, o->cache_dir);
    cache_header key;
    memset(&key, 0, sizeof key);
    memcpy(key.magic, CACHE_MAGIC, 8);
    key.version = CACHE_VERSION, key.arch = (uint32_t)arch, key.ptx = (uint32_t)ptx, key.source_hash = ckrt_checksum(src, strlen(src));
    for (int i = 0; i < N_NVRTC_OPTIONS; i++) key.options_hash = key.options_hash * 31 + ckrt_checksum(nvrtc_options[i], strlen(nvrtc_options[i]));
    key.nvrtc_major = (uint32_t)maj, key.nvrtc_minor = (uint32_t)min;
    cache_path(cpath, sizeof cpath, dir, &key);
    size_t bytes = 0;
    void *cubin = dir[0] ? cache_read(cpath, &key, &bytes) : NULL;
    G.st.cache_hit = cubin != NULL;
    if (!cubin) {
        char *log = NULL;
        double t0 = now_ms();
        int rc = compile_for(c, src, path, arch, ptx, &log, &cubin, &bytes);
        G.st.compile_ms = now_ms() - t0;
        free(log);
        if (rc) {
            free(src);
            return rc;
        }
        if (dir[0]) cache_write(dir, cpath, key, cubin, bytes);
    }
    free(src);
    CUresult r = G.cuModuleLoadData(&G.mod, cubin);
    free(cubin);
    if (r != CUDA_SUCCESS) return cu_fail(c, r, "cuModuleLoadData(kernels.cu)");
    return CKRT_OK;
}

/* ---------------------------------------------------------------- the device layer (cuda_impl.h) */

/* The host's writes (enqueued on the compute stream) ordered before everything after them on the
 * other streams. Not cuMemcpyHtoD: that runs on the legacy NULL stream, which the non-blocking
 * streams do not wait for, and may return before its transfer lands. */
static int order_after_host_io(ckrt_ctx *c) {
    CU(cuEventRecord(G.uploaded, G.stream[0]));
    for (int s = 1; s < 3; s++) CU(cuStreamWaitEvent(G.stream[s], G.uploaded, 0));
    return CKRT_OK;
}

/* Stream s waits for pending reload k, whose bytes it is about to use (the stream kernels go
 * to: the compute stream, or the communication stream during an exchange). The entry stays
 * until settle_copies, so that each stream that uses the bytes waits for them. */
static void wait_pending(int k, int s) {
    unsigned bit = 1u << s;
    if (G.pending[k].waited & bit) return;
    CUevent *ev = G.pending[k].ev;
    CUresult r = CUDA_SUCCESS;
    if (!G.pending[k].waited) r = G.cuEventRecord(ev[3], G.stream[s]); /* the exposed copy time starts at the first wait */
    if (r == CUDA_SUCCESS) r = G.cuStreamWaitEvent(G.stream[s], ev[2], 0);
    if (r != CUDA_SUCCESS && G.pending_err == CUDA_SUCCESS) G.pending_err = r;
    G.pending[k].waited |= bit;
}

ckrt_dptr ckrt_cu_ptr(ckrt_ctx *c, const void *p) {
    (void)c;
    if (!p) return 0;
    const unsigned char *b = p;
    if (G.space && b >= G.space && b <= G.space + G.arena_bytes) {
        CUdeviceptr d = G.arena + (CUdeviceptr)(b - G.space);
        for (int k = 0; k < G.n_pending; k++)
            if (d >= G.pending[k].at && d < G.pending[k].at + (CUdeviceptr)G.pending[k].bytes) wait_pending(k, G.cur);
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
    return CKRT_OK;
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

int ckrt_cu_memset(ckrt_ctx *c, ckrt_dptr p, int value, int64_t bytes) {
    CKRT_TRY(check_ptrs(c));
    if (bytes <= 0) return CKRT_OK;
    CU(cuMemsetD8Async(p, (unsigned char)value, (size_t)bytes, G.stream[G.cur]));
    return CKRT_OK;
}

/* On the stream that produced the bytes (G.cur), then waited for: the copy is complete on return. */
int ckrt_cu_read(ckrt_ctx *c, void *dst, ckrt_dptr src, int64_t bytes) {
    CKRT_TRY(check_ptrs(c));
    if (bytes <= 0) return CKRT_OK;
    CU(cuMemcpyDtoHAsync(dst, src, (size_t)bytes, G.stream[G.cur]));
    CU(cuStreamSynchronize(G.stream[G.cur]));
    return CKRT_OK;
}

ckrt_dptr ckrt_cu_scratch(ckrt_ctx *c, int64_t *bytes) {
    (void)c;
    *bytes = SCRATCH_BYTES;
    return (ckrt_dptr)G.arena + (ckrt_dptr)((G.arena_bytes + 255) / 256 * 256);
}

/* ---------------------------------------------------------------- cuDNN (convolutions)
 *
 * Opened at run time like cuBLAS, when present ($CKRT_CUDNN naming the library, else
 * libcudnn.so.N in $CKRT_CUDA_LIBDIR or the toolkit's directory, then the loader path): without
 * it, or with CKRT_CUDNN=0, every convolution stays im2col + cuBLAS, and the device line says so
 * (a library that loads but whose cudnnCreate fails, too: its descriptors are still set up, and
 * checked against the model's output sizes). It runs on the stream kernels go to, with FMA math only
 * (no TF32 unless --tf32). Each geometry (kind and shape) gets its descriptors and algorithm once,
 * the first time it runs, and keeps them: cuDNN's heuristics are asked (nothing is timed, nothing
 * runs), and the first algorithm that is deterministic and whose workspace fits the bound is
 * taken. A geometry with none, or one cuDNN cannot express (asymmetric padding, more than three
 * spatial axes, sizes past 32 bits), is remembered as such and stays with im2col. */
#ifdef CKRT_HAVE_CUDNN
#include <cudnn.h>

#define CK_DNN_FNS(X)                                                                                                  \
    X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)                        \
    X(cudnnCreateTensorDescriptor) X(cudnnSetTensorNdDescriptor) X(cudnnCreateFilterDescriptor)                       \
    X(cudnnSetFilterNdDescriptor) X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolutionNdDescriptor)              \
    X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType) X(cudnnGetConvolutionForwardAlgorithm_v7)         \
    X(cudnnGetConvolutionBackwardDataAlgorithm_v7) X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                   \
    X(cudnnConvolutionForward) X(cudnnConvolutionBackwardData) X(cudnnConvolutionBackwardFilter)                    \
    X(cudnnDestroyTensorDescriptor) X(cudnnDestroyFilterDescriptor) X(cudnnDestroyConvolutionDescriptor)            \
    X(cudnnGetConvolutionNdForwardOutputDim) X(cudnnGetConvolutionForwardWorkspaceSize)                              \
    X(cudnnGetConvolutionBackwardDataWorkspaceSize) X(cudnnGetConvolutionBackwardFilterWorkspaceSize)
static struct {
    void *lib;
#define CK_DNN_MEMBER_(f) __typeof__(f) *f;
    CK_DNN_FNS(CK_DNN_MEMBER_)
#undef CK_DNN_MEMBER_
    cudnnHandle_t h; /* NULL when the library loaded but cudnnCreate failed: descriptors only */
    int loaded;      /* this open uses the library: its version is the headers' */
    int tf32;
    char why[160]; /* why convolutions do not use it, for the device line */
} D;
#define DNN(f, args)                                                                                      \
    do {                                                                                                  \
        cudnnStatus_t ck_d_ = D.f args;                                                                   \
        if (ck_d_ != CUDNN_STATUS_SUCCESS)                                                                \
            return ckrt_fail(c, CKRT_ERR_INTERNAL, "%s failed: %s", #f, D.cudnnGetErrorString(ck_d_));    \
    } while (0)

typedef struct dnn_geom {
    int kind, nsp, usable, algo;
    int64_t N, C, M, group, bound, in_sp[3], out_sp[3], k[3], st[3], pb[3], dl[3];
    size_t ws_bytes;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} dnn_geom;
static dnn_geom *dnn_geoms;
static int n_dnn_geoms, cap_dnn_geoms, dnn_warned;

static int cudnn_set_stream(ckrt_ctx *c);

/* Opens cuDNN if it is there; its absence is not an error (convolutions fall back). */
static int open_cudnn(ckrt_ctx *c, const ckrt_cuda_options *o) {
    const char *off = getenv("CKRT_CUDNN");
    D.tf32 = o->tf32, D.loaded = 0;
    if (off && !strcmp(off, "0")) {
        snprintf(D.why, sizeof D.why, "cuDNN off (CKRT_CUDNN=0)");
        return CKRT_OK;
    }
    if (!D.lib) { /* $CKRT_CUDNN names the library (PyTorch's wheels keep one outside the loader path) */
        char names[2][4200];
        int n = 0;
        if (off && *off) snprintf(names[n++], sizeof names[0], "%s", off);
        else {
            snprintf(names[n++], sizeof names[0], "%s/libcudnn.so.%d", cuda_libdir(), CUDNN_MAJOR);
            snprintf(names[n++], sizeof names[0], "libcudnn.so.%d", CUDNN_MAJOR);
        }
        void *h = NULL;
        for (int i = 0; i < n && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h && off && *off) return ckrt_fail(c, CKRT_ERR_USAGE, "CKRT_CUDNN=%s: cannot load it (%s)", off, dlerror());
        if (!h) {
            snprintf(D.why, sizeof D.why, "no cuDNN (libcudnn.so.%d not found)", CUDNN_MAJOR);
            return CKRT_OK;
        }
#define CK_DNN_LOAD_(f)                                                                                         \
        if (!(*(void **)&D.f = dlsym(h, #f))) {                                                                 \
            dlclose(h);                                                                                         \
            snprintf(D.why, sizeof D.why, "no cuDNN (libcudnn.so.%d lacks %s)", CUDNN_MAJOR, #f);               \
            return CKRT_OK;                                                                                     \
        }
        CK_DNN_FNS(CK_DNN_LOAD_)
#undef CK_DNN_LOAD_
        D.lib = h;
    }
    size_t v = D.cudnnGetVersion();
    if (v / 10000 != CUDNN_MAJOR) {
        snprintf(D.why, sizeof D.why, "no cuDNN (libcudnn is version %zu, libckrt was built for %d)", v, CUDNN_MAJOR);
        return CKRT_OK;
    }
    D.loaded = 1;
    cudnnStatus_t s = D.cudnnCreate(&D.h);
    if (s != CUDNN_STATUS_SUCCESS) { /* a library that does not work with this driver: convolutions as before */
        D.h = NULL;
        snprintf(D.why, sizeof D.why, "no cuDNN (cudnnCreate failed: %s)", D.cudnnGetErrorString(s));
        return CKRT_OK;
    }
    CKRT_TRY(cudnn_set_stream(c));
    snprintf(D.why, sizeof D.why, "cuDNN %zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
    return CKRT_OK;
}

static void close_cudnn(void) {
    for (int i = 0; i < n_dnn_geoms; i++) {
        dnn_geom *e = &dnn_geoms[i];
        if (e->x) D.cudnnDestroyTensorDescriptor(e->x);
        if (e->y) D.cudnnDestroyTensorDescriptor(e->y);
        if (e->w) D.cudnnDestroyFilterDescriptor(e->w);
        if (e->conv) D.cudnnDestroyConvolutionDescriptor(e->conv);
    }
    free(dnn_geoms);
    dnn_geoms = NULL, n_dnn_geoms = cap_dnn_geoms = dnn_warned = 0;
    if (D.h) D.cudnnDestroy(D.h);
    D.h = NULL, D.loaded = 0, D.why[0] = 0;
}

static int cudnn_set_stream(ckrt_ctx *c) {
    if (D.h) DNN(cudnnSetStream, (D.h, (cudaStream_t)G.stream[G.cur]));
    return CKRT_OK;
}
static const char *cudnn_says(void) { return D.why; }

static int nd_desc(ckrt_ctx *c, dnn_geom *e) {
    /* cuDNN takes 4 or 5 dimensions: one spatial axis becomes (1, L) */
    int nd = e->nsp == 1 ? 2 : e->nsp, xd[5], yd[5], xs[5], ys[5], wd[5], pad[3], st[3], dl[3];
    int64_t in[3], out[3], k[3];
    for (int d = 0; d < nd; d++) {
        int one = e->nsp == 1 && d == 0;
        int s = e->nsp == 1 ? 0 : d;
        in[d] = one ? 1 : e->in_sp[s], out[d] = one ? 1 : e->out_sp[s], k[d] = one ? 1 : e->k[s];
        pad[d] = one ? 0 : (int)e->pb[s], st[d] = one ? 1 : (int)e->st[s], dl[d] = one ? 1 : (int)e->dl[s];
    }
    xd[0] = (int)e->N, xd[1] = (int)e->C, yd[0] = (int)e->N, yd[1] = (int)e->M, wd[0] = (int)e->M, wd[1] = (int)(e->C / e->group);
    for (int d = 0; d < nd; d++) xd[2 + d] = (int)in[d], yd[2 + d] = (int)out[d], wd[2 + d] = (int)k[d];
    xs[nd + 1] = ys[nd + 1] = 1;
    for (int d = nd; d >= 0; d--) xs[d] = xs[d + 1] * xd[d + 1], ys[d] = ys[d + 1] * yd[d + 1];
    DNN(cudnnCreateTensorDescriptor, (&e->x));
    DNN(cudnnCreateTensorDescriptor, (&e->y));
    DNN(cudnnCreateFilterDescriptor, (&e->w));
    DNN(cudnnCreateConvolutionDescriptor, (&e->conv));
    DNN(cudnnSetTensorNdDescriptor, (e->x, CUDNN_DATA_FLOAT, nd + 2, xd, xs));
    DNN(cudnnSetTensorNdDescriptor, (e->y, CUDNN_DATA_FLOAT, nd + 2, yd, ys));
    DNN(cudnnSetFilterNdDescriptor, (e->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nd + 2, wd));
    DNN(cudnnSetConvolutionNdDescriptor, (e->conv, nd, pad, st, dl, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DNN(cudnnSetConvolutionGroupCount, (e->conv, (int)e->group));
    DNN(cudnnSetConvolutionMathType, (e->conv, D.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    /* cuDNN's own reading of the descriptors must give ONNX's output: a mismatch is a bug here */
    int got[5];
    DNN(cudnnGetConvolutionNdForwardOutputDim, (e->conv, e->x, e->w, nd + 2, got));
    for (int i = 0; i < nd + 2; i++)
        if (got[i] != yd[i])
            return ckrt_fail(c, CKRT_ERR_INTERNAL, "cuDNN reads this convolution's descriptors as giving %d on output axis %d, where "
                             "the model has %d", got[i], i, yd[i]);
    return CKRT_OK;
}

/* cuDNN pads both ends alike: the geometry fits when that gives ONNX's output size (and no axis
 * is empty: those the op layer handles itself). */
static int expressible(const ckrt_cu_conv_geom *g) {
    if (g->nsp < 1 || g->nsp > 3 || g->group < 1 || g->N < 1 || g->C < g->group || g->M < g->group) return 0;
    int64_t in_n = 1, out_n = 1;
    int64_t taps = 1;
    for (int d = 0; d < g->nsp; d++) {
        if (g->in_sp[d] < 1 || g->out_sp[d] < 1 || g->k[d] < 1 || g->dilations[d] < 1 || g->strides[d] < 1) return 0;
        if (g->in_sp[d] > INT_MAX / 4 || g->pads_begin[d] > INT_MAX / 4 || g->k[d] > INT_MAX / 4 || g->strides[d] > INT_MAX ||
            g->dilations[d] > INT_MAX / 4 / g->k[d])
            return 0; /* each size, and in + 2 pad, dl (k - 1): within cuDNN's int */
        int64_t span = g->dilations[d] * (g->k[d] - 1) + 1, padded = g->in_sp[d] + 2 * g->pads_begin[d];
        if (padded < span || (padded - span) / g->strides[d] + 1 != g->out_sp[d]) return 0;
        in_n *= g->in_sp[d], out_n *= g->out_sp[d], taps *= g->k[d];
        if (in_n > INT_MAX || taps > INT_MAX) return 0;
    }
    int64_t big = g->C > g->M ? g->C : g->M;
    return g->N * big * (in_n > out_n ? in_n : out_n) < INT_MAX && g->M * (g->C / g->group) * taps < INT_MAX;
}

/* The first of the heuristics' candidates (fastest first) that is deterministic, runs without
 * tensor cores unless --tf32 (FMA or default math: the descriptor's FMA setting then holds), and
 * whose workspace, asked of cuDNN for that algorithm with the descriptor it will run with, fits
 * the bound. */
#define CK_PICK_ALGO_(fn, ws_fn, perf_t, a1, a2, a3, a4)                                                            \
    do {                                                                                                               \
        perf_t perf[16];                                                                                               \
        int n = 0;                                                                                                     \
        DNN(fn, (D.h, a1, a2, a3, a4, 16, &n, perf));                                                                  \
        for (int i = 0; i < n && !e->usable; i++) {                                                                    \
            int fma = perf[i].mathType == CUDNN_FMA_MATH || perf[i].mathType == CUDNN_DEFAULT_MATH;                    \
            if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].determinism != CUDNN_DETERMINISTIC || (!fma && !D.tf32)) \
                continue;                                                                                              \
            if (D.tf32) DNN(cudnnSetConvolutionMathType, (e->conv, perf[i].mathType));                                 \
            size_t ws = 0;                                                                                             \
            if (D.ws_fn(D.h, a1, a2, a3, a4, perf[i].algo, &ws) == CUDNN_STATUS_SUCCESS && (int64_t)ws <= e->bound)   \
                e->usable = 1, e->algo = (int)perf[i].algo, e->ws_bytes = ws;                                          \
        }                                                                                                              \
    } while (0)

static int find_geom(ckrt_ctx *c, int kind, const ckrt_cu_conv_geom *g, int64_t bound, dnn_geom **out) {
    *out = NULL;
    if (g->nsp < 1 || g->nsp > 3) return CKRT_OK; /* cuDNN takes at most 3 spatial axes */
    for (int i = 0; i < n_dnn_geoms; i++) {
        dnn_geom *e = &dnn_geoms[i];
        int same = e->kind == kind && e->nsp == g->nsp && e->N == g->N && e->C == g->C && e->M == g->M && e->group == g->group &&
                   e->bound == bound;
        for (int d = 0; same && d < g->nsp; d++)
            same = e->in_sp[d] == g->in_sp[d] && e->out_sp[d] == g->out_sp[d] && e->k[d] == g->k[d] && e->st[d] == g->strides[d] &&
                   e->pb[d] == g->pads_begin[d] && e->dl[d] == g->dilations[d];
        if (same) {
            *out = e;
            return CKRT_OK;
        }
    }
    if (n_dnn_geoms == cap_dnn_geoms) {
        int cap = cap_dnn_geoms ? 2 * cap_dnn_geoms : 64;
        dnn_geom *t = realloc(dnn_geoms, sizeof *t * (size_t)cap);
        if (!t) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot grow cuDNN's geometry table to %d entries", cap);
        dnn_geoms = t, cap_dnn_geoms = cap;
    }
    dnn_geom *e = &dnn_geoms[n_dnn_geoms++];
    memset(e, 0, sizeof *e);
    e->kind = kind, e->nsp = g->nsp, e->N = g->N, e->C = g->C, e->M = g->M, e->group = g->group, e->bound = bound;
    *out = e;
    for (int d = 0; d < g->nsp; d++)
        e->in_sp[d] = g->in_sp[d], e->out_sp[d] = g->out_sp[d], e->k[d] = g->k[d], e->st[d] = g->strides[d],
        e->pb[d] = g->pads_begin[d], e->dl[d] = g->dilations[d];
    if (!expressible(g)) return CKRT_OK;
    int rc = nd_desc(c, e);
    if (rc && !D.h) { /* only checking (no handle, nothing runs on cuDNN): say it once, go on */
        if (!dnn_warned++) fprintf(stderr, "trainer: warning: cuDNN refused a convolution's descriptors: %s\n", c->msg);
        c->code = CKRT_OK, c->msg[0] = 0;
        return CKRT_OK;
    }
    CKRT_TRY(rc);
    if (!D.h) return CKRT_OK; /* descriptors checked, no algorithm: the library loaded but cudnnCreate failed */
    if (kind == CK_CONV_FWD)
        CK_PICK_ALGO_(cudnnGetConvolutionForwardAlgorithm_v7, cudnnGetConvolutionForwardWorkspaceSize, cudnnConvolutionFwdAlgoPerf_t,
                      e->x, e->w, e->conv, e->y);
    else if (kind == CK_CONV_DGRAD)
        CK_PICK_ALGO_(cudnnGetConvolutionBackwardDataAlgorithm_v7, cudnnGetConvolutionBackwardDataWorkspaceSize,
                      cudnnConvolutionBwdDataAlgoPerf_t, e->w, e->y, e->conv, e->x);
    else
        CK_PICK_ALGO_(cudnnGetConvolutionBackwardFilterAlgorithm_v7, cudnnGetConvolutionBackwardFilterWorkspaceSize,
                      cudnnConvolutionBwdFilterAlgoPerf_t, e->x, e->y, e->conv, e->w);
    return CKRT_OK;
}

int ckrt_cu_conv(ckrt_ctx *c, int kind, const ckrt_cu_conv_geom *g, ckrt_dptr out, ckrt_dptr a, ckrt_dptr b, ckrt_dptr ws,
                 int64_t ws_bound, int *done) {
    *done = 0;
    CKRT_TRY(check_ptrs(c));
    dnn_geom *e = NULL;
    if (D.loaded) CKRT_TRY(find_geom(c, kind, g, ws ? ws_bound : 0, &e));
    if (!e || !e->usable) {
        G.st.conv_im2col++;
        return CKRT_OK;
    }
    const float one = 1.0f, zero = 0.0f;
    void *W = e->ws_bytes ? (void *)(uintptr_t)ws : NULL;
    if (kind == CK_CONV_FWD)
        DNN(cudnnConvolutionForward, (D.h, &one, e->x, (const void *)(uintptr_t)a, e->w, (const void *)(uintptr_t)b, e->conv,
                                      (cudnnConvolutionFwdAlgo_t)e->algo, W, e->ws_bytes, &zero, e->y, (void *)(uintptr_t)out));
    else if (kind == CK_CONV_DGRAD)
        DNN(cudnnConvolutionBackwardData, (D.h, &one, e->w, (const void *)(uintptr_t)b, e->y, (const void *)(uintptr_t)a, e->conv,
                                           (cudnnConvolutionBwdDataAlgo_t)e->algo, W, e->ws_bytes, &zero, e->x, (void *)(uintptr_t)out));
    else
        DNN(cudnnConvolutionBackwardFilter, (D.h, &one, e->x, (const void *)(uintptr_t)b, e->y, (const void *)(uintptr_t)a, e->conv,
                                             (cudnnConvolutionBwdFilterAlgo_t)e->algo, W, e->ws_bytes, &zero, e->w,
                                             (void *)(uintptr_t)out));
    G.st.conv_cudnn++;
    *done = 1;
    return CKRT_OK;
}
#else
static int open_cudnn(ckrt_ctx *c, const ckrt_cuda_options *o) {
    (void)c, (void)o;
    return CKRT_OK;
}
static void close_cudnn(void) {}
static int cudnn_set_stream(ckrt_ctx *c) {
    (void)c;
    return CKRT_OK;
}
static const char *cudnn_says(void) { return "no cuDNN (libckrt was built without cudnn.h)"; }
int ckrt_cu_conv(ckrt_ctx *c, int kind, const ckrt_cu_conv_geom *g, ckrt_dptr out, ckrt_dptr a, ckrt_dptr b, ckrt_dptr ws,
                 int64_t ws_bound, int *done) {
    (void)kind, (void)g, (void)out, (void)a, (void)b, (void)ws, (void)ws_bound;
    *done = 0;
    G.st.conv_im2col++;
    return check_ptrs(c);
}
#endif

/* ---------------------------------------------------------------- backend hooks */

/* One device allocation: the arena (with the guard zone ckrt_main asks for), the loss scratch,
 * cuBLAS's workspace. It must fit with DEVICE_MARGIN_BYTES to spare: a plan near the device's
 * size is refused here, in one line, rather than failing later inside cuBLAS or a launch. On the
 * host: the arena's address range (no memory) and the two staging buffers. */
static int be_arena_alloc(ckrt_ctx *c, int64_t bytes, unsigned char **out) {
    if (G.space) return ckrt_fail(c, CKRT_ERR_INTERNAL, "the CUDA arena is allocated once");
    size_t n = (size_t)(bytes ? bytes : CKRT_ALIGN);
    int64_t ws = CUBLAS_WS_BYTES(G.sm), at_ws = ((int64_t)n + 255) / 256 * 256 + SCRATCH_BYTES;
    size_t dev_bytes = (size_t)(at_ws + ws), free_b = 0, total = 0;
    CU(cuMemGetInfo(&free_b, &total));
    if ((int64_t)dev_bytes + DEVICE_MARGIN_BYTES > (int64_t)free_b)
        return ckrt_fail(c, CKRT_ERR_NOMEM, "the GPU has %.1f MiB free of %.1f MiB; this program needs %.1f MiB there: the arena "
                         "%lld bytes + %d MiB for cuBLAS and the loss + a margin of %lld MiB for the CUDA context",
                         (double)free_b / 1048576, (double)total / 1048576, (double)(dev_bytes + DEVICE_MARGIN_BYTES) / 1048576,
                         (long long)n, (int)((ws + SCRATCH_BYTES) >> 20), (long long)(DEVICE_MARGIN_BYTES >> 20));
    unsigned char *space = ckrt_cu_reserve((int64_t)n);
    if (!space) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot reserve %lld bytes of address space for the arena", (long long)n);
    CUresult r = G.cuMemAlloc(&G.arena, dev_bytes);
    if (r != CUDA_SUCCESS) {
        ckrt_cu_unreserve(space, (int64_t)n);
        G.arena = 0;
        cu_fail(c, r, "cuMemAlloc");
        return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate %lld bytes on the GPU (%s)", (long long)dev_bytes, c->msg);
    }
    G.space = space, G.arena_bytes = (int64_t)n;
    for (int h = 0; h < 2; h++) {
        void *p = NULL;
        CU(cuMemHostAlloc(&p, (size_t)STAGE_BYTES, 0));
        G.stage[h] = p, G.stage_busy[h] = 0;
        G.st.host_staging_bytes += STAGE_BYTES;
    }
    BLAS(cublasSetWorkspace, (G.blas, (void *)(uintptr_t)(G.arena + (CUdeviceptr)at_ws), (size_t)ws));
    *out = space;
    return CKRT_OK;
}

static void be_arena_free(ckrt_ctx *c, unsigned char *p) {
    (void)c;
    if (p != G.space) return;
    if (G.arena) G.cuMemFree(G.arena);
    for (int h = 0; h < 2; h++)
        if (G.stage[h]) G.cuMemFreeHost(G.stage[h]);
    ckrt_cu_unreserve(G.space, G.arena_bytes);
    G.arena = 0, G.space = NULL, G.arena_bytes = 0, G.stage[0] = G.stage[1] = NULL;
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
        G.pending[G.n_pending].waited = 0;
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
static int be_clock_mark(ckrt_ctx *c, int i) {
    if (i >= G.n_prof_ev) {
        int n = i + 1 > 2 * G.n_prof_ev ? i + 1 : 2 * G.n_prof_ev;
        CUevent *ev = realloc(G.prof_ev, (size_t)n * sizeof *ev);
        if (!ev) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate %d profile events", n);
        G.prof_ev = ev;
        for (; G.n_prof_ev < n; G.n_prof_ev++) CU(cuEventCreate(&G.prof_ev[G.n_prof_ev], CU_EVENT_DEFAULT));
    }
    CU(cuEventRecord(G.prof_ev[i], G.stream[0]));
    return CKRT_OK;
}
static int be_clock_read(ckrt_ctx *c, int n, double *ms) {
    for (int j = 0; j < n && j < G.n_prof_ev; j++) {
        float t = 0;
        if (j) CU(cuEventElapsedTime(&t, G.prof_ev[0], G.prof_ev[j]));
        ms[j] = t;
    }
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
    return cudnn_set_stream(c);
}

/* Adds up the copies' timings: the copy itself (start -> end) and what the compute stream waited
 * (from where it starts waiting to the copy's end, when the copy ends later). */
static int settle_copies(ckrt_ctx *c) {
    for (int k = 0; k < G.n_pending; k++)
        if (!G.pending[k].waited) wait_pending(k, 0); /* waited for by nobody: the wait point is now */
    G.n_pending = 0;
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

/* Host bytes to the arena at offset: each chunk is copied into a staging buffer whose previous
 * copy has finished, then sent on the compute stream (so the next chunk's copy overlaps this
 * transfer); src may be reused on return. */
static int be_write(ckrt_ctx *c, int64_t offset, const void *src, int64_t bytes) {
    CKRT_TRY(check_ptrs(c));
    double t0 = now_ms();
    for (int64_t at = 0; at < bytes; at += STAGE_BYTES) {
        int64_t n = bytes - at < STAGE_BYTES ? bytes - at : STAGE_BYTES;
        int h = G.stage_next;
        G.stage_next ^= 1;
        if (G.stage_busy[h]) CU(cuEventSynchronize(G.stage_ev[h]));
        memcpy(G.stage[h], (const unsigned char *)src + at, (size_t)n);
        CU(cuMemcpyHtoDAsync(G.arena + (CUdeviceptr)(offset + at), G.stage[h], (size_t)n, G.stream[0]));
        CU(cuEventRecord(G.stage_ev[h], G.stream[0]));
        G.stage_busy[h] = 1;
    }
    G.st.host_io_ms += now_ms() - t0;
    return order_after_host_io(c);
}

/* Arena bytes to the host once every stream is done, through the staging buffers: chunk k is
 * copied out on the host while chunk k + 1 comes from the device. */
static int be_read(ckrt_ctx *c, int64_t offset, void *dst, int64_t bytes) {
    CKRT_TRY(settle_copies(c));
    double t0 = now_ms();
    G.stage_busy[0] = G.stage_busy[1] = 0;
    int64_t prev_at = -1, prev_n = 0;
    for (int64_t at = 0;; at += STAGE_BYTES) {
        int64_t n = bytes - at < STAGE_BYTES ? bytes - at : STAGE_BYTES;
        int h = (int)((at / STAGE_BYTES) & 1);
        if (n > 0) {
            CU(cuMemcpyDtoHAsync(G.stage[h], G.arena + (CUdeviceptr)(offset + at), (size_t)n, G.stream[0]));
            CU(cuEventRecord(G.stage_ev[h], G.stream[0]));
        }
        if (prev_at >= 0) {
            CU(cuEventSynchronize(G.stage_ev[h ^ 1]));
            memcpy((unsigned char *)dst + prev_at, G.stage[h ^ 1], (size_t)prev_n);
        }
        if (n <= 0) break;
        prev_at = at, prev_n = n;
    }
    G.st.host_io_ms += now_ms() - t0;
    return CKRT_OK;
}

static int be_fill(ckrt_ctx *c, int64_t offset, int64_t bytes, int byte) {
    CKRT_TRY(check_ptrs(c));
    CU(cuMemsetD8Async(G.arena + (CUdeviceptr)offset, (unsigned char)byte, (size_t)bytes, G.stream[0]));
    return order_after_host_io(c);
}

/* For the NCCL transport: the device address of an arena pointer. */
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
    .write = be_write,
    .read = be_read,
    .fill = be_fill,
    .top = ckrt_cu_arena_top,
    .device_address = be_device_address,
    .current_stream = be_current_stream,
    .set_stream = be_set_stream,
    .clock_mark = be_clock_mark,
    .clock_read = be_clock_read,
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
    CU(cuEventCreate(&G.uploaded, CU_EVENT_DISABLE_TIMING));
    for (int h = 0; h < 2; h++) CU(cuEventCreate(&G.stage_ev[h], CU_EVENT_DISABLE_TIMING));
    for (int i = 0; i < N_EVENT_PAIRS; i++)
        for (int k = 0; k < 4; k++) CU(cuEventCreate(&G.copy_ev[i][k], CU_EVENT_DEFAULT));
    CKRT_TRY(load_kernels(c, o));
    CKRT_TRY(load_cublas(c));
    BLAS(cublasCreate, (&G.blas));
    BLAS(cublasSetStream, (G.blas, (cudaStream_t)G.stream[0]));
    /* FP32 products stay FP32 unless --tf32: TF32 rounds the operands to 10 mantissa bits */
    BLAS(cublasSetMathMode, (G.blas, o->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    CKRT_TRY(open_cudnn(c, o));
    size_t len = strlen(G.desc);
    snprintf(G.desc + len, sizeof G.desc - len, "; convolutions: %s", cudnn_says());
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
    close_cudnn();
    if (G.blas) B.cublasDestroy(G.blas);
    if (G.mod) G.cuModuleUnload(G.mod);
    for (int i = 0; i < N_USER_EVENTS; i++)
        if (G.user[i]) G.cuEventDestroy(G.user[i]);
    if (G.uploaded) G.cuEventDestroy(G.uploaded);
    for (int i = 0; i < G.n_prof_ev; i++) G.cuEventDestroy(G.prof_ev[i]);
    free(G.prof_ev);
    for (int h = 0; h < 2; h++)
        if (G.stage_ev[h]) G.cuEventDestroy(G.stage_ev[h]);
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
