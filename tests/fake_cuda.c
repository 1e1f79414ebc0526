/* fake_cuda.c — a stand-in for the CUDA driver (libcuda.so.1), cuBLAS and NVRTC on the CPU, so
 * that the real CUDA backend (runtime/cuda_driver.c and cuda_ops.c, unchanged, in the real
 * libckrt) runs end to end on a machine without a GPU, and an ordering mistake in it fails a test.
 *
 * One library, libfakecuda.so, is installed in a directory under three names (libcuda.so.1,
 * libcublas.so.N, libnvrtc.so.N; the trainer finds them through CKRT_CUDA_DRIVER and
 * CKRT_CUDA_LIBDIR) and implements what the backend calls, with the toolkit's own prototypes
 * (cuda.h, cublas_v2.h, nvrtc.h: a signature mismatch fails to compile). Device memory is host
 * memory; "NVRTC" compiles kernels.cu with g++ and tests/cuda_emu_shim.h into a shared object,
 * which is the "cubin" (or "PTX") that cuModuleLoadData loads; a launch runs every thread of its
 * grid and checks that the grid-stride loop visited each work item exactly once; cuBLAS is
 * OpenBLAS's column-major sgemm.
 *
 * What makes it a test: nothing runs when it is enqueued. Each stream is a queue; work runs only
 * when something demands it (a stream synchronize, a synchronous copy, an event another stream
 * waits for) and then only what that needs, so a missing event or a copy on the wrong stream
 * lets a kernel read bytes that have not arrived (or that were already overwritten). The copies
 * follow the driver API's documented behaviour: a synchronous cuMemcpyHtoD from pageable memory
 * returns once the bytes are staged, and its transfer is NULL-stream work, which non-blocking
 * streams never wait for; kernel arguments and pageable sources are captured when enqueued.
 * CKRT_FAKE_CUDA_SEED=K (K > 0) also runs, before each op, other streams' runnable work at
 * random (seeded, so a failure reproduces): legal orders the program did not intend. 0 (the
 * default) is the laziest order, NULL-stream work last.
 *
 * Other knobs (environment): CKRT_FAKE_CUDA_SM (compute capability, default 90),
 * CKRT_FAKE_CUDA_MEM (device bytes, default 80 GiB), CKRT_FAKE_NVRTC_ARCHS (the architectures
 * "NVRTC" supports, default 75,80,86,89,90,100,120), CKRT_FAKE_CUDA_STATS (a file for the peaks of
 * device and pinned memory, written at exit). Rules it enforces besides ordering: a GEMM
 * needs a workspace set with cublasSetWorkspace inside device memory (else cuBLAS would allocate
 * memory outside the plan); compiling needs libnvrtc-builtins.so.M.99 already loaded or on the
 * loader path (as the real NVRTC, which opens it by name; this NVRTC says it is version M.99, so
 * that a real toolkit's builtins in the loader's cache cannot stand in); a cubin loads only on its own
 * architecture's major version, PTX (compute_XY) on any device of XY or newer. Errors print one
 * line on stderr prefixed "fake cuda:" and are returned as the real libraries would.
 */
#define _GNU_SOURCE
#include <cublas_v2.h>
#include <cuda.h>
#include <nvrtc.h>
#ifdef FAKE_CUDNN
#include <cudnn.h>
#endif

#include <cblas.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FAKE_CXX
#define FAKE_CXX "g++"
#endif
#ifndef FAKE_NVRTC_MINOR
#define FAKE_NVRTC_MINOR 99
#endif
#ifndef FAKE_SHIM_DIR
#define FAKE_SHIM_DIR "."
#endif

enum { MAX_ARGS = 40, MAX_ALLOCS = 64, CONTEXT_BYTES = 300 << 20 };

static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fake cuda: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---------------------------------------------------------------- memory */

typedef struct { unsigned char *p; size_t bytes; int pinned; } alloc;
static struct {
    int inited, sm, sticky;
    uint64_t seed;
    size_t total, used;
    size_t device_peak, pinned, pinned_peak; /* CKRT_FAKE_CUDA_STATS */
    alloc a[MAX_ALLOCS];
    struct CUstream_st *streams[16];
    int n_streams;
    uint64_t clock;
} F;

static alloc *find_alloc(const void *p, size_t bytes, int pinned) {
    const unsigned char *b = p;
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (F.a[i].p && F.a[i].pinned == pinned && b >= F.a[i].p && b + bytes <= F.a[i].p + F.a[i].bytes) return &F.a[i];
    return NULL;
}
static int is_device(CUdeviceptr d, size_t bytes) { return find_alloc((const void *)(uintptr_t)d, bytes, 0) != NULL; }
static int is_pinned(const void *p, size_t bytes) { return find_alloc(p, bytes, 1) != NULL; }

static void init_once(void) {
    if (F.inited) return;
    F.inited = 1;
    const char *e = getenv("CKRT_FAKE_CUDA_SM");
    F.sm = e ? atoi(e) : 90;
    e = getenv("CKRT_FAKE_CUDA_MEM");
    F.total = e ? (size_t)strtoull(e, NULL, 10) : (size_t)80 << 30;
    F.used = CONTEXT_BYTES;
    e = getenv("CKRT_FAKE_CUDA_SEED");
    F.seed = e ? strtoull(e, NULL, 10) : 0;
}

/* CKRT_FAKE_CUDA_STATS=FILE: at exit, the peaks of device and pinned host memory the program
 * allocated, as JSON (the context's own CONTEXT_BYTES not counted). */
__attribute__((destructor)) static void write_stats(void) {
    const char *path = getenv("CKRT_FAKE_CUDA_STATS");
    FILE *f = path && F.inited ? fopen(path, "w") : NULL;
    if (!f) return;
    fprintf(f, "{\"device_peak_bytes\": %zu, \"pinned_peak_bytes\": %zu}\n", F.device_peak, F.pinned_peak);
    fclose(f);
}

/* ---------------------------------------------------------------- streams, ops, events */

typedef void (*thunk_fn)(void **a);
typedef int (*sizes_fn)(size_t *s);
struct CUmod_st {
    void *so;
    struct { unsigned x, y, z; } *bidx, *tidx, *bdim, *gdim;
    int64_t **counts, *count_n;
};
struct CUfunc_st {
    struct CUmod_st *mod;
    char name[80];
    thunk_fn thunk;
    int nargs;
    size_t sizes[MAX_ARGS];
};

enum { OP_KERNEL, OP_GEMM, OP_COPY, OP_MEMSET, OP_RECORD, OP_WAIT, OP_CONV };
typedef struct op {
    int kind;
    struct CUfunc_st *f;
    unsigned grid;
    unsigned char *args; /* the arguments' bytes, captured at enqueue time */
    void *dst;
    const void *src;
    unsigned char *staged; /* a pageable source, captured at enqueue time */
    size_t bytes;
    unsigned char value; /* OP_MEMSET */
    struct CUevent_st *ev;
    struct CUstream_st *dep; /* OP_WAIT: runnable once dep has run dep_pos ops */
    uint64_t dep_pos;
    struct { int ta, tb, m, n, k, lda, ldb, ldc, batch; float alpha, beta; long long sa, sb, sc; const float *a, *b; float *c; } g;
    struct fake_conv *cv; /* OP_CONV */
} op;

struct CUstream_st {
    op *q;
    uint64_t n, done, cap; /* ops enqueued, ops run */
    unsigned flags;
};
struct CUevent_st {
    struct CUstream_st *s; /* the last record: complete once s has run pos ops */
    uint64_t pos, tick;
    int recorded;
};

static struct CUstream_st null_stream;

static struct CUstream_st *S(CUstream s) { return s ? s : &null_stream; }

/* A ring of the ops not yet run, indexed by their position in the stream. */
static void push(struct CUstream_st *s, op o) {
    if (s->n - s->done == s->cap) {
        uint64_t cap = s->cap * 2 + 64;
        op *q = malloc(sizeof *q * cap);
        if (!q) abort();
        for (uint64_t i = s->done; i < s->n; i++) q[i % cap] = s->q[i % s->cap];
        free(s->q);
        s->q = q, s->cap = cap;
    }
    s->q[s->n % s->cap] = o;
    s->n++;
}

static void run_one(struct CUstream_st *s);
static void advance(struct CUstream_st *s, uint64_t pos);

static uint64_t rnd(void) {
    F.seed ^= F.seed << 13, F.seed ^= F.seed >> 7, F.seed ^= F.seed << 17;
    return F.seed;
}

static int head_ready(struct CUstream_st *s) {
    if (s->done == s->n) return 0;
    op *o = &s->q[s->done % s->cap];
    return o->kind != OP_WAIT || o->dep->done >= o->dep_pos;
}

/* Seeded: before an op runs, perhaps run the head of another stream that may legally run now. */
static void perturb(struct CUstream_st *self) {
    if (!F.seed || rnd() % 3) return;
    int k = (int)(rnd() % (uint64_t)(F.n_streams + 1));
    struct CUstream_st *o = k == F.n_streams ? &null_stream : F.streams[k];
    if (o && o != self && head_ready(o)) run_one(o);
}

/* Runs s's ops until it has run pos of them (each waits for what it depends on). */
static void advance(struct CUstream_st *s, uint64_t pos) {
    while (s->done < pos) {
        op *o = &s->q[s->done % s->cap];
        if (o->kind == OP_WAIT && o->dep->done < o->dep_pos) advance(o->dep, o->dep_pos);
        perturb(s);
        if (s->done < pos) run_one(s);
    }
}

static void launch(op *o);
#ifdef FAKE_CUDNN
static void conv_exec(const struct fake_conv *o);
#endif

static void run_one(struct CUstream_st *s) {
    op o = s->q[s->done % s->cap];
    if (o.kind == OP_WAIT && o.dep->done < o.dep_pos) return;
    s->done++; /* first: a recursive perturb must not run it twice */
    switch (o.kind) {
    case OP_KERNEL: launch(&o); free(o.args); break;
    case OP_GEMM:
        for (int i = 0; i < o.g.batch; i++)
            cblas_sgemm(CblasColMajor, o.g.ta ? CblasTrans : CblasNoTrans, o.g.tb ? CblasTrans : CblasNoTrans, o.g.m, o.g.n, o.g.k,
                        o.g.alpha, o.g.a + i * o.g.sa, o.g.lda, o.g.b + i * o.g.sb, o.g.ldb, o.g.beta, o.g.c + i * o.g.sc, o.g.ldc);
        break;
    case OP_COPY: memcpy(o.dst, o.staged ? o.staged : o.src, o.bytes); free(o.staged); break;
    case OP_MEMSET: memset(o.dst, o.value, o.bytes); break;
    case OP_RECORD: o.ev->tick = ++F.clock; break;
    case OP_WAIT: break;
    case OP_CONV:
#ifdef FAKE_CUDNN
        conv_exec(o.cv);
#endif
        free(o.cv);
        break;
    }
    F.clock++;
}

/* Enqueues o on s; a blocking stream and the legacy NULL stream wait for each other's earlier work. */
static void enqueue(CUstream hs, op o) {
    init_once();
    struct CUstream_st *s = S(hs);
    if (s == &null_stream) {
        for (int i = 0; i < F.n_streams; i++)
            if (F.streams[i] && !(F.streams[i]->flags & CU_STREAM_NON_BLOCKING) && F.streams[i]->n > F.streams[i]->done)
                push(s, (op){.kind = OP_WAIT, .dep = F.streams[i], .dep_pos = F.streams[i]->n});
    } else if (!(s->flags & CU_STREAM_NON_BLOCKING) && null_stream.n > null_stream.done) {
        push(s, (op){.kind = OP_WAIT, .dep = &null_stream, .dep_pos = null_stream.n});
    }
    push(s, o);
}

static void sync_stream(struct CUstream_st *s) { advance(s, s->n); }

/* ---------------------------------------------------------------- the driver API */

#define STICKY() \
    do { if (F.sticky) return (CUresult)F.sticky; } while (0)

CUresult cuInit(unsigned flags) {
    (void)flags;
    init_once();
    return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int *v) { *v = CUDA_VERSION; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    (void)d;
    init_once();
    if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) *v = F.sm / 10;
    else if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) *v = F.sm % 10;
    else *v = 0;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    (void)d;
    snprintf(name, (size_t)len, "fake GPU (CPU emulation, sm_%d)", F.sm);
    return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem(size_t *b, CUdevice d) {
    (void)d;
    init_once();
    *b = F.total;
    return CUDA_SUCCESS;
}
static struct CUctx_st { int x; } the_ctx;
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    (void)d;
    *c = &the_ctx;
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice d) { (void)d; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext c) { (void)c; return CUDA_SUCCESS; }

static CUresult add_alloc(void **p, size_t bytes, int pinned) {
    init_once();
    if (!pinned && F.used + bytes > F.total) return CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (!F.a[i].p) {
            void *m = NULL;
            if (posix_memalign(&m, 256, bytes ? bytes : 1) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
            memset(m, pinned ? 0 : 0x5A, bytes); /* device garbage: nothing may rely on it */
            F.a[i] = (alloc){m, bytes, pinned};
            if (!pinned) F.used += bytes;
            else F.pinned += bytes;
            if (F.used - CONTEXT_BYTES > F.device_peak) F.device_peak = F.used - CONTEXT_BYTES;
            if (F.pinned > F.pinned_peak) F.pinned_peak = F.pinned;
            *p = m;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult drop_alloc(void *p, int pinned) {
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (F.a[i].p == p && F.a[i].pinned == pinned) {
            /* freeing waits for the work that may use it, as cuMemFree does */
            sync_stream(&null_stream);
            for (int k = 0; k < F.n_streams; k++)
                if (F.streams[k]) sync_stream(F.streams[k]);
            if (!pinned) F.used -= F.a[i].bytes;
            else F.pinned -= F.a[i].bytes;
            free(p);
            F.a[i] = (alloc){0};
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}
CUresult cuMemAlloc(CUdeviceptr *d, size_t bytes) {
    void *p = NULL;
    CUresult r = add_alloc(&p, bytes, 0);
    *d = (CUdeviceptr)(uintptr_t)p;
    return r;
}
CUresult cuMemFree(CUdeviceptr d) { return drop_alloc((void *)(uintptr_t)d, 0); }
CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
    (void)flags;
    return add_alloc(p, bytes, 1);
}
CUresult cuMemFreeHost(void *p) { return drop_alloc(p, 1); }
CUresult cuMemGetInfo(size_t *free_b, size_t *total) {
    init_once();
    *free_b = F.total - F.used, *total = F.total;
    return CUDA_SUCCESS;
}

static unsigned char *stage(const void *src, size_t bytes) {
    unsigned char *b = malloc(bytes ? bytes : 1);
    if (!b) abort();
    memcpy(b, src, bytes);
    return b;
}

CUresult cuMemcpyHtoD(CUdeviceptr d, const void *src, size_t bytes) {
    STICKY();
    if (!is_device(d, bytes)) return say("cuMemcpyHtoD to %p (%zu bytes): not device memory", (void *)(uintptr_t)d, bytes), CUDA_ERROR_INVALID_VALUE;
    sync_stream(&null_stream); /* "a stream sync is performed before the copy is initiated" */
    if (is_pinned(src, bytes)) { /* synchronous with respect to the host */
        memcpy((void *)(uintptr_t)d, src, bytes);
        return CUDA_SUCCESS;
    }
    /* pageable: returns once staged; the DMA to the device is NULL-stream work */
    enqueue(NULL, (op){.kind = OP_COPY, .dst = (void *)(uintptr_t)d, .staged = stage(src, bytes), .bytes = bytes});
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void *dst, CUdeviceptr s, size_t bytes) {
    STICKY();
    if (!is_device(s, bytes)) return say("cuMemcpyDtoH from %p: not device memory", (void *)(uintptr_t)s), CUDA_ERROR_INVALID_VALUE;
    enqueue(NULL, (op){.kind = OP_COPY, .dst = dst, .src = (const void *)(uintptr_t)s, .bytes = bytes});
    sync_stream(&null_stream); /* returns once the copy has completed */
    return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void *src, size_t bytes, CUstream s) {
    STICKY();
    if (!is_device(d, bytes)) return say("cuMemcpyHtoDAsync to %p: not device memory", (void *)(uintptr_t)d), CUDA_ERROR_INVALID_VALUE;
    op o = {.kind = OP_COPY, .dst = (void *)(uintptr_t)d, .src = src, .bytes = bytes};
    if (!is_pinned(src, bytes)) o.staged = stage(src, bytes), o.src = NULL; /* pageable: staged now */
    enqueue(s, o);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
    STICKY();
    if (!is_device(src, bytes)) return say("cuMemcpyDtoHAsync from %p: not device memory", (void *)(uintptr_t)src), CUDA_ERROR_INVALID_VALUE;
    enqueue(s, (op){.kind = OP_COPY, .dst = dst, .src = (const void *)(uintptr_t)src, .bytes = bytes});
    if (!is_pinned(dst, bytes)) sync_stream(S(s)); /* to pageable memory: returns once copied */
    return CUDA_SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t bytes, CUstream s) {
    STICKY();
    if (!is_device(d, bytes)) return say("cuMemsetD8Async at %p: not device memory", (void *)(uintptr_t)d), CUDA_ERROR_INVALID_VALUE;
    enqueue(s, (op){.kind = OP_MEMSET, .dst = (void *)(uintptr_t)d, .bytes = bytes, .value = v});
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *out, unsigned flags) {
    init_once();
    if (F.n_streams == 16) return CUDA_ERROR_OUT_OF_MEMORY;
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    s->flags = flags;
    F.streams[F.n_streams++] = s;
    *out = s;
    return CUDA_SUCCESS;
}
CUresult cuStreamDestroy(CUstream hs) {
    for (int i = 0; i < F.n_streams; i++)
        if (F.streams[i] == hs) {
            sync_stream(hs);
            free(hs->q);
            free(hs);
            F.streams[i] = NULL;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuStreamSynchronize(CUstream s) {
    sync_stream(S(s));
    return F.sticky ? (CUresult)F.sticky : CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent *e, unsigned flags) {
    (void)flags;
    *e = calloc(1, sizeof **e);
    return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuEventDestroy(CUevent e) {
    free(e);
    return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent e, CUstream hs) {
    STICKY();
    struct CUstream_st *s = S(hs);
    enqueue(hs, (op){.kind = OP_RECORD, .ev = e});
    e->s = s, e->pos = s->n, e->recorded = 1;
    return CUDA_SUCCESS;
}
CUresult cuStreamWaitEvent(CUstream hs, CUevent e, unsigned flags) {
    (void)flags;
    STICKY();
    if (!e->recorded) return CUDA_SUCCESS; /* waiting for a never-recorded event waits for nothing */
    enqueue(hs, (op){.kind = OP_WAIT, .dep = e->s, .dep_pos = e->pos});
    return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(CUevent e) {
    STICKY();
    if (e->recorded) advance(e->s, e->pos);
    return F.sticky ? (CUresult)F.sticky : CUDA_SUCCESS;
}
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
    if (!a->recorded || !b->recorded || a->s->done < a->pos || b->s->done < b->pos) return CUDA_ERROR_NOT_READY;
    *ms = (float)((double)b->tick - (double)a->tick) * 1e-3f;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- modules and launches */

typedef struct { char magic[8]; uint32_t arch, ptx; uint64_t bytes; } image_header;
#define IMAGE_MAGIC "FAKEKERN"

CUresult cuModuleLoadData(CUmodule *out, const void *image) {
    image_header h;
    memcpy(&h, image, sizeof h);
    if (memcmp(h.magic, IMAGE_MAGIC, 8) != 0) return say("cuModuleLoadData: not an image of this fake NVRTC"), CUDA_ERROR_INVALID_IMAGE;
    init_once();
    if (h.ptx ? (int)h.arch > F.sm : (int)h.arch / 10 != F.sm / 10 || (int)h.arch > F.sm) {
        say("cuModuleLoadData: %s_%u cannot run on sm_%d", h.ptx ? "compute" : "sm", h.arch, F.sm);
        return h.ptx ? CUDA_ERROR_UNSUPPORTED_PTX_VERSION : CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    char path[] = "/tmp/fake-cuda-module-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
    int ok = write(fd, (const char *)image + sizeof h, h.bytes) == (ssize_t)h.bytes;
    close(fd);
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (ok && m) m->so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    unlink(path);
    if (!m || !m->so) {
        say("cuModuleLoadData: %s", dlerror());
        free(m);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    m->bidx = dlsym(m->so, "ck_emu_blockIdx"), m->tidx = dlsym(m->so, "ck_emu_threadIdx");
    m->bdim = dlsym(m->so, "ck_emu_blockDim"), m->gdim = dlsym(m->so, "ck_emu_gridDim");
    m->counts = dlsym(m->so, "ck_emu_counts"), m->count_n = dlsym(m->so, "ck_emu_n");
    if (!m->bidx || !m->tidx || !m->bdim || !m->gdim || !m->counts || !m->count_n) {
        dlclose(m->so);
        free(m);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    *out = m;
    return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule m) {
    sync_stream(&null_stream);
    for (int k = 0; k < F.n_streams; k++)
        if (F.streams[k]) sync_stream(F.streams[k]);
    if (m) dlclose(m->so);
    free(m);
    return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction *out, CUmodule m, const char *name) {
    if (strncmp(name, "ck_g_", 5) != 0) return CUDA_ERROR_NOT_FOUND;
    char sym[96];
    struct CUfunc_st *f = calloc(1, sizeof *f);
    if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
    snprintf(sym, sizeof sym, "ck_emu_%s", name + 5);
    *(void **)&f->thunk = dlsym(m->so, sym);
    snprintf(sym, sizeof sym, "ck_emu_%s_sizes", name + 5);
    sizes_fn sz;
    *(void **)&sz = dlsym(m->so, sym);
    if (!f->thunk || !sz) {
        free(f);
        return CUDA_ERROR_NOT_FOUND;
    }
    f->nargs = sz(f->sizes);
    f->mod = m;
    snprintf(f->name, sizeof f->name, "%s", name);
    *out = f; /* kept until exit: the backend caches its functions */
    return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                        CUstream s, void **params, void **extra) {
    STICKY();
    if (gy != 1 || gz != 1 || by != 1 || bz != 1 || shmem || extra || gx == 0 || bx != 256 || !params)
        return say("cuLaunchKernel(%s): unexpected geometry", f->name), CUDA_ERROR_INVALID_VALUE;
    size_t total = 0;
    for (int i = 0; i < f->nargs; i++) total += (f->sizes[i] + 15) / 16 * 16;
    op o = {.kind = OP_KERNEL, .f = f, .grid = gx, .args = malloc(total ? total : 1)};
    if (!o.args) return CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0, at = 0; i < f->nargs; at += (int)((f->sizes[i] + 15) / 16 * 16), i++) memcpy(o.args + at, params[i], f->sizes[i]);
    enqueue(s, o);
    return CUDA_SUCCESS;
}

static void launch(op *o) {
    struct CUfunc_st *f = o->f;
    struct CUmod_st *m = f->mod;
    void *a[MAX_ARGS];
    for (int i = 0, at = 0; i < f->nargs; at += (int)((f->sizes[i] + 15) / 16 * 16), i++) a[i] = o->args + at;
    int64_t n = *(int64_t *)a[0];
    int64_t *counts = calloc((size_t)(n > 0 ? n : 1), sizeof *counts);
    if (!counts) abort();
    *m->counts = counts, *m->count_n = n;
    m->bdim->x = 256, m->bdim->y = m->bdim->z = 1;
    m->gdim->x = o->grid, m->gdim->y = m->gdim->z = 1;
    for (unsigned b = 0; b < o->grid; b++)
        for (unsigned t = 0; t < 256; t++) {
            m->bidx->x = b, m->bidx->y = m->bidx->z = 0;
            m->tidx->x = t, m->tidx->y = m->tidx->z = 0;
            f->thunk(a);
        }
    *m->counts = NULL;
    for (int64_t i = 0; i < n; i++)
        if (counts[i] != 1) {
            say("%s over %lld items (%u blocks): item %lld visited %lld times", f->name, (long long)n, o->grid, (long long)i,
                (long long)counts[i]);
            F.sticky = CUDA_ERROR_LAUNCH_FAILED;
            break;
        }
    free(counts);
}

CUresult cuGetErrorName(CUresult r, const char **s) {
    switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case CUDA_ERROR_NOT_READY: *s = "CUDA_ERROR_NOT_READY"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; break;
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: *s = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"; break;
    default: *s = NULL; return CUDA_ERROR_INVALID_VALUE; /* as the real one does for a code it does not know */
    }
    return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
    const char *name = NULL;
    CUresult k = cuGetErrorName(r, &name);
    *s = k == CUDA_SUCCESS ? "(fake driver)" : NULL;
    return k;
}

/* ---------------------------------------------------------------- cuBLAS */

struct cublasContext {
    CUstream stream;
    void *ws;
    size_t ws_bytes;
};
cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = calloc(1, sizeof **h);
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    h->stream = (CUstream)s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
    (void)h, (void)m;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes) {
    if (bytes && !is_device((CUdeviceptr)(uintptr_t)ws, bytes)) {
        say("cublasSetWorkspace(%p, %zu): not device memory", ws, bytes);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    h->ws = ws, h->ws_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}
const char *cublasGetStatusString(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "a fake cuBLAS error"; }

static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
                           const float *a, int lda, long long sa, const float *b, int ldb, long long sb, const float *beta, float *c,
                           int ldc, long long sc, int batch) {
    if (!h->ws || h->ws_bytes < (4u << 20)) {
        say("a GEMM without a workspace of at least 4 MiB (cublasSetWorkspace): cuBLAS would allocate one outside the plan");
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (!is_device((CUdeviceptr)(uintptr_t)a, 4) || !is_device((CUdeviceptr)(uintptr_t)b, 4) || !is_device((CUdeviceptr)(uintptr_t)c, 4)) {
        say("GEMM operands %p %p %p: not all in device memory", (const void *)a, (const void *)b, (void *)c);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (m < 0 || n < 0 || k < 0 || lda < 1 || ldb < 1 || ldc < 1 || batch < 1) { /* lda >= max(1, rows) */
        say("GEMM m=%d n=%d k=%d lda=%d ldb=%d ldc=%d: invalid", m, n, k, lda, ldb, ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    op o = {.kind = OP_GEMM};
    o.g.ta = ta != CUBLAS_OP_N, o.g.tb = tb != CUBLAS_OP_N, o.g.m = m, o.g.n = n, o.g.k = k, o.g.lda = lda, o.g.ldb = ldb;
    o.g.ldc = ldc, o.g.batch = batch, o.g.alpha = *alpha, o.g.beta = *beta, o.g.sa = sa, o.g.sb = sb, o.g.sc = sc;
    o.g.a = a, o.g.b = b, o.g.c = c;
    if (F.sticky) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (m && n) enqueue(h->stream, o);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
                           const float *a, int lda, const float *b, int ldb, const float *beta, float *c, int ldc) {
    return gemm(h, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *a, int lda, long long sa, const float *b, int ldb,
                                         long long sb, const float *beta, float *c, int ldc, long long sc, int batch) {
    return gemm(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}

/* ---------------------------------------------------------------- cuDNN (convolutions)
 *
 * The backend's legacy convolution calls, with cudnn.h's prototypes. A convolution is a direct
 * loop summed in double (so it agrees with the CPU within the test's tolerance), enqueued on the
 * handle's stream like a GEMM. The heuristics offer, fastest first, algorithms the backend must
 * pass over: 0 non-deterministic; 1 deterministic on tensor cores (TF32: the one to take under
 * --tf32); 2 deterministic wanting more workspace than any plan; 3 deterministic wanting 4 bytes
 * more than one image's column matrix (the backend's bound: a plan may well have that much, but
 * taking it would make the choice depend on the plan); then 4, deterministic with FMA math,
 * wanting half a column matrix (none for a 1x1 convolution): the one to take. A run checks the
 * descriptors against each other, that the algorithm is 4 (1 with tensor-op math), that the
 * workspace is device memory of at least the algorithm's size, and scribbles over all of it. */
#ifdef FAKE_CUDNN
struct cudnnContext { CUstream stream; };
struct cudnnTensorStruct { int nd, dims[5], strides[5]; };
struct cudnnFilterStruct { int nd, dims[5]; };
struct cudnnConvolutionStruct { int nsp, pad[3], st[3], dl[3], group, math; };
typedef struct fake_conv {
    int kind, N, C, M, group, nsp, in[3], out[3], k[3], pad[3], st[3], dl[3];
    float alpha, beta;
    const float *a, *b;
    float *out_p;
} fake_conv;

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }
const char *cudnnGetErrorString(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS" : "a fake cuDNN error"; }
cudnnStatus_t cudnnCreate(cudnnHandle_t *h) {
    init_once();
    *h = calloc(1, sizeof **h);
    return *h ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) { free(h); return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) { h->stream = (CUstream)s; return CUDNN_STATUS_SUCCESS; }
#define FAKE_DESC_(T, create, destroy)                                                                     \
    cudnnStatus_t create(T *d) { *d = calloc(1, sizeof **d); return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED; } \
    cudnnStatus_t destroy(T d) { free(d); return CUDNN_STATUS_SUCCESS; }
FAKE_DESC_(cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor)
FAKE_DESC_(cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor)
FAKE_DESC_(cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor)

cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t t, int nd, const int dims[], const int strides[]) {
    if (t != CUDNN_DATA_FLOAT || nd < 4 || nd > 5) return CUDNN_STATUS_BAD_PARAM;
    d->nd = nd;
    for (int i = 0; i < nd; i++) d->dims[i] = dims[i], d->strides[i] = strides[i];
    for (int i = nd - 1, s = 1; i >= 0; s *= dims[i], i--)
        if (strides[i] != s) {
            say("cudnnSetTensorNdDescriptor: strides are not packed NCHW (axis %d: %d, expected %d)", i, strides[i], s);
            return CUDNN_STATUS_NOT_SUPPORTED;
        }
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int nd, const int dims[]) {
    if (t != CUDNN_DATA_FLOAT || f != CUDNN_TENSOR_NCHW || nd < 4 || nd > 5) return CUDNN_STATUS_BAD_PARAM;
    d->nd = nd;
    for (int i = 0; i < nd; i++) d->dims[i] = dims[i];
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t d, int n, const int pad[], const int st[], const int dl[],
                                              cudnnConvolutionMode_t mode, cudnnDataType_t t) {
    if (n < 2 || n > 3 || mode != CUDNN_CROSS_CORRELATION || t != CUDNN_DATA_FLOAT) return CUDNN_STATUS_BAD_PARAM;
    d->nsp = n, d->group = 1;
    for (int i = 0; i < n; i++) {
        if (pad[i] < 0 || st[i] < 1 || dl[i] < 1) return CUDNN_STATUS_BAD_PARAM;
        d->pad[i] = pad[i], d->st[i] = st[i], d->dl[i] = dl[i];
    }
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g) { d->group = g; return g >= 1 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM; }
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m) { d->math = (int)m; return CUDNN_STATUS_SUCCESS; }

/* The descriptors as one convolution: 0 when they do not agree (said on stderr). */
static int conv_of(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t cv, cudnnTensorDescriptor_t y,
                   fake_conv *o) {
    memset(o, 0, sizeof *o);
    if (x->nd != y->nd || x->nd != w->nd || cv->nsp != x->nd - 2 || x->dims[0] != y->dims[0] || w->dims[0] != y->dims[1] ||
        x->dims[1] % cv->group || y->dims[1] % cv->group || w->dims[1] * cv->group != x->dims[1]) {
        say("convolution descriptors disagree (x %dD C=%d, w %d/%d, y %dD M=%d, group %d)", x->nd, x->dims[1], w->dims[0], w->dims[1],
            y->nd, y->dims[1], cv->group);
        return 0;
    }
    o->N = x->dims[0], o->C = x->dims[1], o->M = y->dims[1], o->group = cv->group, o->nsp = cv->nsp;
    for (int d = 0; d < cv->nsp; d++) {
        o->in[d] = x->dims[2 + d], o->out[d] = y->dims[2 + d], o->k[d] = w->dims[2 + d];
        o->pad[d] = cv->pad[d], o->st[d] = cv->st[d], o->dl[d] = cv->dl[d];
        int want = (o->in[d] + 2 * o->pad[d] - o->dl[d] * (o->k[d] - 1) - 1) / o->st[d] + 1;
        if (want != o->out[d]) {
            say("convolution output axis %d is %d; the descriptors give %d", d, o->out[d], want);
            return 0;
        }
    }
    return 1;
}
cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t cv, const cudnnTensorDescriptor_t x,
                                                    const cudnnFilterDescriptor_t w, int nd, int out[]) {
    if (nd != x->nd || nd != w->nd || cv->nsp != nd - 2 || w->dims[1] * cv->group != x->dims[1]) return CUDNN_STATUS_BAD_PARAM;
    out[0] = x->dims[0], out[1] = w->dims[0];
    for (int d = 0; d < cv->nsp; d++)
        out[2 + d] = (x->dims[2 + d] + 2 * cv->pad[d] - cv->dl[d] * (w->dims[2 + d] - 1) - 1) / cv->st[d] + 1;
    return CUDNN_STATUS_SUCCESS;
}
enum { FAKE_ALGOS = 5, FAKE_ALGO_FMA = 4, FAKE_ALGO_TF32 = 1 };
/* What algorithm a of the list above wants, in bytes. */
static size_t algo_bytes(const fake_conv *o, int a) {
    size_t taps = 1, out = 1;
    for (int d = 0; d < o->nsp; d++) taps *= (size_t)o->k[d], out *= (size_t)o->out[d];
    size_t column = (size_t)(o->C / o->group) * taps * out * 4;
    return a == 2 ? (size_t)1 << 40 : a == 3 ? column + 4 : a == 4 && taps > 1 ? column / 2 : 0;
}
#define FAKE_PERF_(perf, o)                                                                                  \
    do {                                                                                                     \
        int n = requested < FAKE_ALGOS ? requested : FAKE_ALGOS;                                             \
        for (int i = 0; i < n; i++) {                                                                        \
            memset(&perf[i], 0, sizeof perf[i]);                                                             \
            perf[i].algo = i, perf[i].status = CUDNN_STATUS_SUCCESS, perf[i].memory = algo_bytes(&o, i);     \
            perf[i].determinism = i == 0 ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC;                     \
            perf[i].mathType = i == FAKE_ALGO_TF32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;                   \
        }                                                                                                    \
        *returned = n;                                                                                       \
    } while (0)
/* Get*WorkspaceSize, with the descriptors as x, w, convolution, y whatever the direction. */
static cudnnStatus_t ws_of(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t cv, cudnnTensorDescriptor_t y,
                           int algo, size_t *bytes) {
    fake_conv o;
    if (!conv_of(x, w, cv, y, &o) || algo < 0 || algo >= FAKE_ALGOS) return CUDNN_STATUS_BAD_PARAM;
    *bytes = algo_bytes(&o, algo);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t cv, const cudnnTensorDescriptor_t y,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t *bytes) {
    (void)h;
    return ws_of(x, w, cv, y, (int)algo, bytes);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
                                                           const cudnnConvolutionDescriptor_t cv, const cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes) {
    (void)h;
    return ws_of(dx, w, cv, dy, (int)algo, bytes);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
                                                             const cudnnConvolutionDescriptor_t cv, const cudnnFilterDescriptor_t dw,
                                                             cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes) {
    (void)h;
    return ws_of(x, dw, cv, dy, (int)algo, bytes);
}
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t cv, const cudnnTensorDescriptor_t y,
                                                     const int requested, int *returned, cudnnConvolutionFwdAlgoPerf_t *perf) {
    fake_conv o;
    (void)h;
    if (!conv_of(x, w, cv, y, &o)) return CUDNN_STATUS_BAD_PARAM;
    FAKE_PERF_(perf, o);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t cv, const cudnnTensorDescriptor_t dx,
                                                          const int requested, int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf) {
    fake_conv o;
    (void)h;
    if (!conv_of(dx, w, cv, dy, &o)) return CUDNN_STATUS_BAD_PARAM;
    FAKE_PERF_(perf, o);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                            const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t cv,
                                                            const cudnnFilterDescriptor_t dw, const int requested, int *returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
    fake_conv o;
    (void)h;
    if (!conv_of(x, dw, cv, dy, &o)) return CUDNN_STATUS_BAD_PARAM;
    FAKE_PERF_(perf, o);
    return CUDNN_STATUS_SUCCESS;
}

/* Checks a run and enqueues it; kind 0 forward, 1 data gradient, 2 weight gradient. */
static cudnnStatus_t conv_run(cudnnHandle_t h, int kind, fake_conv *o, int algo, void *ws, size_t ws_bytes, int math, const void *alpha,
                              const void *beta, const float *a, const float *b, float *out) {
    int want = math == CUDNN_TENSOR_OP_MATH ? FAKE_ALGO_TF32 : FAKE_ALGO_FMA;
    if (algo != want || (math != CUDNN_FMA_MATH && math != CUDNN_TENSOR_OP_MATH)) {
        say("a convolution with algorithm %d, math %d: the backend should have taken %d", algo, math, want);
        return CUDNN_STATUS_BAD_PARAM;
    }
    size_t need = algo_bytes(o, algo);
    if (ws_bytes < need || (need && (!ws || !is_device((CUdeviceptr)(uintptr_t)ws, ws_bytes)))) {
        say("a convolution's workspace %p of %zu bytes: algorithm %d needs %zu of device memory", ws, ws_bytes, algo, need);
        return CUDNN_STATUS_BAD_PARAM;
    }
    if (!is_device((CUdeviceptr)(uintptr_t)a, 4) || !is_device((CUdeviceptr)(uintptr_t)b, 4) || !is_device((CUdeviceptr)(uintptr_t)out, 4)) {
        say("convolution operands %p %p %p: not all in device memory", (const void *)a, (const void *)b, (void *)out);
        return CUDNN_STATUS_BAD_PARAM;
    }
    o->kind = kind, o->alpha = *(const float *)alpha, o->beta = *(const float *)beta, o->a = a, o->b = b, o->out_p = out;
    fake_conv *keep = malloc(sizeof *keep);
    if (!keep) return CUDNN_STATUS_ALLOC_FAILED;
    *keep = *o;
    op q = {.kind = OP_CONV, .cv = keep};
    if (need) enqueue(h->stream, (op){.kind = OP_MEMSET, .dst = ws, .bytes = need, .value = 0x5c}); /* it uses its workspace */
    enqueue(h->stream, q);
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
                                      const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cv,
                                      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
                                      const cudnnTensorDescriptor_t yd, void *y) {
    fake_conv o;
    if (!conv_of(xd, wd, cv, yd, &o)) return CUDNN_STATUS_BAD_PARAM;
    return conv_run(h, 0, &o, (int)algo, ws, ws_bytes, cv->math, alpha, beta, x, w, y);
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha, const cudnnFilterDescriptor_t wd, const void *w,
                                           const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cv,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxd, void *dx) {
    fake_conv o;
    if (!conv_of(dxd, wd, cv, dyd, &o)) return CUDNN_STATUS_BAD_PARAM;
    return conv_run(h, 1, &o, (int)algo, ws, ws_bytes, cv->math, alpha, beta, dy, w, dx);
}
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
                                             const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cv,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t ws_bytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwd, void *dw) {
    fake_conv o;
    if (!conv_of(xd, dwd, cv, dyd, &o)) return CUDNN_STATUS_BAD_PARAM;
    return conv_run(h, 2, &o, (int)algo, ws, ws_bytes, cv->math, alpha, beta, dy, x, dw);
}

/* The convolution itself: every (image, output channel, output position, input channel, tap)
 * product, added into the output, the input gradient or the weight gradient. */
static void conv_exec(const fake_conv *o) {
    int in_n = 1, out_n = 1, taps = 1, Cg = o->C / o->group, Mg = o->M / o->group;
    for (int d = 0; d < o->nsp; d++) in_n *= o->in[d], out_n *= o->out[d], taps *= o->k[d];
    size_t n_out = o->kind == 0 ? (size_t)o->N * o->M * out_n : o->kind == 1 ? (size_t)o->N * o->C * in_n : (size_t)o->M * Cg * taps;
    double *acc = calloc(n_out, sizeof *acc);
    if (!acc) abort();
    for (int n = 0; n < o->N; n++)
        for (int m = 0; m < o->M; m++) {
            int gi = m / Mg;
            for (int p = 0; p < out_n; p++)
                for (int t = 0; t < taps; t++) {
                    int at = 0, inside = 1;
                    for (int d = 0, pr = p, tr = t, pstride = out_n, tstride = taps; d < o->nsp; d++) {
                        pstride /= o->out[d], tstride /= o->k[d];
                        int pd = pr / pstride, td = tr / tstride;
                        pr %= pstride, tr %= tstride;
                        int i = pd * o->st[d] - o->pad[d] + td * o->dl[d];
                        inside = inside && i >= 0 && i < o->in[d];
                        at = at * o->in[d] + i;
                    }
                    if (!inside) continue;
                    for (int cc = 0; cc < Cg; cc++) {
                        int ch = gi * Cg + cc;
                        size_t yi = ((size_t)n * o->M + m) * out_n + p, xi = ((size_t)n * o->C + ch) * in_n + at,
                               wi = ((size_t)m * Cg + cc) * taps + t;
                        if (o->kind == 0) acc[yi] += (double)o->a[xi] * o->b[wi];         /* a x, b w */
                        else if (o->kind == 1) acc[xi] += (double)o->a[yi] * o->b[wi];    /* a dy, b w */
                        else acc[wi] += (double)o->a[yi] * o->b[xi];                      /* a dy, b x */
                    }
                }
        }
    for (size_t i = 0; i < n_out; i++)
        o->out_p[i] = (float)(o->alpha * acc[i]) + (o->beta != 0.0f ? o->beta * o->out_p[i] : 0.0f);
    free(acc);
}
#endif

/* ---------------------------------------------------------------- NVRTC */

struct _nvrtcProgram {
    char *src, *log;
    unsigned char *image; /* image_header + the shared object */
    size_t image_bytes;
    int ptx;
};

nvrtcResult nvrtcVersion(int *major, int *minor) {
    *major = CUDA_VERSION / 1000, *minor = FAKE_NVRTC_MINOR;
    return NVRTC_SUCCESS;
}
const char *nvrtcGetErrorString(nvrtcResult r) {
    return r == NVRTC_SUCCESS ? "NVRTC_SUCCESS" : r == NVRTC_ERROR_INVALID_OPTION ? "NVRTC_ERROR_INVALID_OPTION"
                               : r == NVRTC_ERROR_BUILTIN_OPERATION_FAILURE     ? "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE"
                               : r == NVRTC_ERROR_COMPILATION                   ? "NVRTC_ERROR_COMPILATION"
                                                                                 : "NVRTC_ERROR (fake)";
}
static int archs(int *out) {
    const char *e = getenv("CKRT_FAKE_NVRTC_ARCHS");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", e ? e : "75,80,86,89,90,100,120");
    int n = 0;
    for (char *t = strtok(buf, ","); t && n < 32; t = strtok(NULL, ",")) out[n++] = atoi(t);
    return n;
}
nvrtcResult nvrtcGetNumSupportedArchs(int *n) {
    int a[32];
    *n = archs(a);
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcGetSupportedArchs(int *out) {
    archs(out);
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcCreateProgram(nvrtcProgram *p, const char *src, const char *name, int nh, const char *const *h, const char *const *inc) {
    (void)name, (void)nh, (void)h, (void)inc;
    *p = calloc(1, sizeof **p);
    if (!*p || !((*p)->src = strdup(src))) return NVRTC_ERROR_OUT_OF_MEMORY;
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcDestroyProgram(nvrtcProgram *p) {
    if (*p) free((*p)->src), free((*p)->log), free((*p)->image), free(*p);
    *p = NULL;
    return NVRTC_SUCCESS;
}
static nvrtcResult fail_log(nvrtcProgram p, nvrtcResult r, const char *msg) {
    free(p->log);
    p->log = strdup(msg);
    return r;
}
nvrtcResult nvrtcCompileProgram(nvrtcProgram p, int n, const char *const *opts) {
    int arch = 0, ptx = 0, a[32], na = archs(a);
    for (int i = 0; i < n; i++) {
        const char *v = strncmp(opts[i], "--gpu-architecture=", 19) == 0 ? opts[i] + 19 : strncmp(opts[i], "-arch=", 6) == 0 ? opts[i] + 6 : NULL;
        if (!v) continue;
        if (strncmp(v, "sm_", 3) == 0) arch = atoi(v + 3), ptx = 0;
        else if (strncmp(v, "compute_", 8) == 0) arch = atoi(v + 8), ptx = 1;
    }
    int known = 0;
    for (int i = 0; i < na; i++) known |= a[i] == arch;
    if (!known) return fail_log(p, NVRTC_ERROR_INVALID_OPTION, "nvrtc: error: invalid value for --gpu-architecture (-arch)\n");
    /* the real NVRTC opens its builtins library by name when it compiles */
    char builtins[64];
    snprintf(builtins, sizeof builtins, "libnvrtc-builtins.so.%d.%d", CUDA_VERSION / 1000, FAKE_NVRTC_MINOR);
    void *bh = dlopen(builtins, RTLD_NOW | RTLD_LOCAL);
    if (!bh) return fail_log(p, NVRTC_ERROR_BUILTIN_OPERATION_FAILURE, "nvrtc: cannot load the builtins library\n");
    dlclose(bh);
    char dir[] = "/tmp/fake-nvrtc-XXXXXX", cu[64], so[64], cmd[512];
    if (!mkdtemp(dir)) return fail_log(p, NVRTC_ERROR_INTERNAL_ERROR, "mkdtemp failed\n");
    snprintf(cu, sizeof cu, "%s/k.cu", dir), snprintf(so, sizeof so, "%s/k.so", dir);
    FILE *f = fopen(cu, "w");
    int ok = f && fputs(p->src, f) >= 0;
    if (f) ok = fclose(f) == 0 && ok;
    snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -w -shared -fPIC -DCK_EMULATE -I '%s' -x c++ %s -o %s 2>%s/log", FAKE_CXX, FAKE_SHIM_DIR, cu,
             so, dir);
    ok = ok && system(cmd) == 0;
    nvrtcResult r = NVRTC_SUCCESS;
    FILE *s = ok ? fopen(so, "rb") : NULL;
    if (s) {
        fseek(s, 0, SEEK_END);
        long len = ftell(s);
        fseek(s, 0, SEEK_SET);
        image_header h = {.arch = (uint32_t)arch, .ptx = (uint32_t)ptx, .bytes = (uint64_t)len};
        memcpy(h.magic, IMAGE_MAGIC, 8);
        p->image_bytes = sizeof h + (size_t)len;
        p->image = malloc(p->image_bytes);
        if (!p->image || fread(p->image + sizeof h, 1, (size_t)len, s) != (size_t)len) r = NVRTC_ERROR_INTERNAL_ERROR;
        else memcpy(p->image, &h, sizeof h), p->ptx = ptx;
        fclose(s);
    } else {
        r = fail_log(p, NVRTC_ERROR_COMPILATION, "fake nvrtc: the host compiler failed (see its log in the temporary directory)\n");
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (r == NVRTC_SUCCESS && system(cmd) != 0) r = NVRTC_ERROR_INTERNAL_ERROR;
    return r;
}
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram p, size_t *n) {
    *n = p->log ? strlen(p->log) + 1 : 1;
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcGetProgramLog(nvrtcProgram p, char *out) {
    strcpy(out, p->log ? p->log : "");
    return NVRTC_SUCCESS;
}
/* A cubin exists only for a real architecture (sm_XY), PTX for either (a real one carries both). */
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram p, size_t *n) {
    *n = p->image && !p->ptx ? p->image_bytes : 0;
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcGetCUBIN(nvrtcProgram p, char *out) {
    if (!p->image || p->ptx) return NVRTC_ERROR_INVALID_INPUT;
    memcpy(out, p->image, p->image_bytes);
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcGetPTXSize(nvrtcProgram p, size_t *n) {
    *n = p->image ? p->image_bytes : 0;
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcGetPTX(nvrtcProgram p, char *out) {
    if (!p->image) return NVRTC_ERROR_INVALID_INPUT;
    memcpy(out, p->image, p->image_bytes);
    ((image_header *)(void *)out)->ptx = 1;
    return NVRTC_SUCCESS;
}
