/* pool.c — the thread pool behind ckrt_parallel_for (see ckrt_pool.h for the contract).
 *
 * Persistent pthreads wait for a job: a function, its argument, n and a grain, cut into blocks.
 * One 64-bit atomic ticket holds the job's generation, its block count and the next block to
 * take; a thread (the caller included) claims a block with a compare-and-swap that succeeds only
 * while the generation is the one it woke for and blocks are left, and reads the job's fields
 * only after a claim succeeded (the job cannot end, nor the next one be written, while one of
 * its blocks is unclaimed). The caller waits for blocks done, not for threads: a worker the OS
 * has not scheduled yet (other processes on the same cores) finds nothing left when it runs,
 * instead of holding up every kernel until it does. Block boundaries depend on n and grain only,
 * so which thread runs a block never changes what the block computes.
 *
 * Workers spin a little before sleeping on a condition variable: a training step is a long
 * chain of short kernels, and a wake-up through the kernel costs more than many of them. The
 * spin is short so that an oversubscribed machine loses little to it.
 */
#define _GNU_SOURCE
#include "ckrt_pool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define SPIN_ROUNDS 2000
#define MAX_BLOCKS 0xffff /* the ticket's block fields are 16 bits: more, and the grain grows */

/* ticket: generation (32 bits) | block count (16) | next block (16) */
#define T_GEN(t) ((uint32_t)((t) >> 32))
#define T_BLOCKS(t) ((int64_t)(((t) >> 16) & 0xffff))
#define T_NEXT(t) ((int64_t)((t)&0xffff))

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t tid[CKRT_MAX_THREADS];
    int workers;  /* started threads, not counting the caller */
    int sleepers; /* workers waiting on go (under mu) */
    bool stop;
    _Atomic uint64_t ticket;
    atomic_int_fast64_t finished; /* blocks done in the current job */
    /* the job: written before the ticket announces it, read after a claim */
    ckrt_pool_fn fn;
    void *arg;
    int64_t n, grain;
} ck_pool;

static ck_pool P = {.mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};
static _Thread_local bool in_job; /* nested calls run inline */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claims and runs blocks of generation gen until none is left. */
static void run_blocks(uint32_t gen) {
    in_job = true;
    uint64_t t = atomic_load_explicit(&P.ticket, memory_order_acquire);
    for (;;) {
        if (T_GEN(t) != gen || T_NEXT(t) >= T_BLOCKS(t)) break;
        if (!atomic_compare_exchange_weak_explicit(&P.ticket, &t, t + 1, memory_order_acq_rel, memory_order_acquire)) continue;
        int64_t b = T_NEXT(t), blocks = T_BLOCKS(t);
        int64_t lo = b * P.grain, hi = lo + P.grain < P.n ? lo + P.grain : P.n;
        P.fn(P.arg, lo, hi);
        if (atomic_fetch_add_explicit(&P.finished, 1, memory_order_acq_rel) == blocks - 1) {
            pthread_mutex_lock(&P.mu); /* the last block: wake the caller if it sleeps */
            pthread_cond_signal(&P.done);
            pthread_mutex_unlock(&P.mu);
        }
        t = atomic_load_explicit(&P.ticket, memory_order_acquire);
    }
    in_job = false;
}

/* arg: the generation when the thread was created (read here instead, a job published before the
 * thread first runs would be missed) */
static void *worker(void *arg) {
    uint32_t seen = (uint32_t)(uintptr_t)arg;
    for (;;) {
        for (int spins = 0; T_GEN(atomic_load_explicit(&P.ticket, memory_order_acquire)) == seen && spins < SPIN_ROUNDS; spins++)
            cpu_relax();
        pthread_mutex_lock(&P.mu);
        while (T_GEN(atomic_load_explicit(&P.ticket, memory_order_acquire)) == seen && !P.stop) {
            P.sleepers++;
            pthread_cond_wait(&P.go, &P.mu);
            P.sleepers--;
        }
        bool stop = P.stop;
        pthread_mutex_unlock(&P.mu);
        if (stop) return NULL;
        seen = T_GEN(atomic_load_explicit(&P.ticket, memory_order_acquire));
        run_blocks(seen);
    }
}

void ckrt_parallel_for(int64_t n, int64_t grain, ckrt_pool_fn fn, void *arg) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if ((n + grain - 1) / grain > MAX_BLOCKS) grain = (n + MAX_BLOCKS - 1) / MAX_BLOCKS;
    int64_t blocks = (n + grain - 1) / grain;
    if (P.workers == 0 || blocks == 1 || in_job) {
        for (int64_t lo = 0; lo < n; lo += grain) fn(arg, lo, lo + grain < n ? lo + grain : n);
        return;
    }
    /* every claim of the last job has finished (we waited for its blocks): the fields are free */
    P.fn = fn, P.arg = arg, P.n = n, P.grain = grain;
    atomic_store_explicit(&P.finished, 0, memory_order_relaxed);
    uint32_t gen = T_GEN(atomic_load_explicit(&P.ticket, memory_order_relaxed)) + 1;
    atomic_store_explicit(&P.ticket, (uint64_t)gen << 32 | (uint64_t)blocks << 16, memory_order_release);
    pthread_mutex_lock(&P.mu);
    if (P.sleepers) pthread_cond_broadcast(&P.go);
    pthread_mutex_unlock(&P.mu);
    run_blocks(gen);
    for (int spins = 0; atomic_load_explicit(&P.finished, memory_order_acquire) < blocks && spins < SPIN_ROUNDS; spins++)
        cpu_relax();
    pthread_mutex_lock(&P.mu);
    while (atomic_load_explicit(&P.finished, memory_order_acquire) < blocks) pthread_cond_wait(&P.done, &P.mu);
    pthread_mutex_unlock(&P.mu);
}

int ckrt_threads(void) { return P.workers + 1; }

static void stop_workers(void) {
    pthread_mutex_lock(&P.mu);
    P.stop = true;
    pthread_cond_broadcast(&P.go);
    pthread_mutex_unlock(&P.mu);
    for (int k = 0; k < P.workers; k++) pthread_join(P.tid[k], NULL);
    P.workers = 0;
    P.stop = false;
}

int ckrt_threads_set(int n) {
    if (n < 1) n = 1;
    if (n > CKRT_MAX_THREADS) n = CKRT_MAX_THREADS;
    if (n == P.workers + 1) return 0;
    stop_workers();
    for (int k = 0; k < n - 1; k++) {
        void *gen = (void *)(uintptr_t)T_GEN(atomic_load_explicit(&P.ticket, memory_order_relaxed));
        if (pthread_create(&P.tid[k], NULL, worker, gen) != 0) return -1;
        P.workers = k + 1;
    }
    return 0;
}

/* "8" or OMP_NUM_THREADS's "8,4" (nested levels: the first is ours): the count, or 0. */
static int parse_threads(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || (*end && *end != ',') || v < 1 || v > CKRT_MAX_THREADS) return 0;
    return (int)v;
}

int ckrt_threads_default(const char **source) {
    static const char *const vars[] = {"CKRT_NUM_THREADS", "OMP_NUM_THREADS"};
    for (int k = 0; k < 2; k++) {
        const char *s = getenv(vars[k]);
        if (s && *s) {
            *source = vars[k];
            return parse_threads(s);
        }
    }
    *source = "affinity";
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int n = CPU_COUNT(&set);
    return n < 1 ? 1 : n > CKRT_MAX_THREADS ? CKRT_MAX_THREADS : n;
}
