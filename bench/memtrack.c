/* bench/memtrack.c — an LD_PRELOAD shim that counts the live heap bytes of a process and their
 * peak, so that the benchmark can give PyTorch's step the same kind of figure as ckptc's arena:
 * bytes actually allocated (tensors, autograd's saved tensors and graph, Python objects), not
 * resident pages (which glibc keeps or returns as it likes, and which fragmentation inflates).
 *
 *     cc -O2 -shared -fPIC bench/memtrack.c -o libmemtrack.so -ldl
 *     LD_PRELOAD=./libmemtrack.so python3 ...    # then, from Python:
 *     lib = ctypes.CDLL(None); lib.memtrack_reset(); ...; lib.memtrack_peak() - lib.memtrack_base()
 *
 * Every allocation counts malloc_usable_size() bytes (what glibc gave, alignment included);
 * memtrack_reset() sets base = peak = the current live bytes. Thread-safe (atomics). dlsym()
 * may call calloc before the real one is known: those few bytes come from a static buffer.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);

static _Atomic long live, peak, base;
static char boot[1 << 16];
static size_t boot_used;
static int initializing;

static void init(void) {
    if (real_malloc || initializing) return;
    initializing = 1;
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = dlsym(RTLD_NEXT, "memalign");
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    initializing = 0;
}

static int in_boot(const void *p) { return (const char *)p >= boot && (const char *)p < boot + sizeof boot; }

static void *count(void *p) {
    if (p) {
        long now = atomic_fetch_add(&live, (long)malloc_usable_size(p)) + (long)malloc_usable_size(p);
        long pk = atomic_load(&peak);
        while (now > pk && !atomic_compare_exchange_weak(&peak, &pk, now)) {
        }
    }
    return p;
}

static void uncount(void *p) {
    if (p) atomic_fetch_sub(&live, (long)malloc_usable_size(p));
}

void *malloc(size_t n) {
    init();
    return count(real_malloc(n));
}

void *calloc(size_t a, size_t b) {
    if (!real_calloc) {
        init();
        if (!real_calloc) { /* dlsym's own allocation, during init */
            size_t n = (a * b + 15) & ~(size_t)15;
            if (boot_used + n > sizeof boot) return NULL;
            void *p = boot + boot_used;
            boot_used += n;
            memset(p, 0, n);
            return p;
        }
    }
    return count(real_calloc(a, b));
}

void *realloc(void *p, size_t n) {
    init();
    if (in_boot(p)) {
        void *q = malloc(n);
        size_t avail = (size_t)(boot + sizeof boot - (char *)p);
        if (q) memcpy(q, p, n < avail ? n : avail);
        return q;
    }
    size_t old = p ? malloc_usable_size(p) : 0;
    void *q = real_realloc(p, n);
    if (q || n == 0) atomic_fetch_sub(&live, (long)old);
    return count(q);
}

void free(void *p) {
    if (!p || in_boot(p)) return;
    init();
    uncount(p);
    real_free(p);
}

int posix_memalign(void **out, size_t align, size_t n) {
    init();
    int rc = real_posix_memalign(out, align, n);
    if (!rc) count(*out);
    return rc;
}

void *aligned_alloc(size_t align, size_t n) {
    init();
    return count(real_aligned_alloc(align, n));
}

void *memalign(size_t align, size_t n) {
    init();
    return count(real_memalign(align, n));
}

long memtrack_live(void) { return atomic_load(&live); }
long memtrack_peak(void) { return atomic_load(&peak); }
long memtrack_base(void) { return atomic_load(&base); }
void memtrack_reset(void) {
    long now = atomic_load(&live);
    atomic_store(&base, now);
    atomic_store(&peak, now);
}
