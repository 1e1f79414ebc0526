/* ckrt_pool.h — libckrt's thread pool: how the CPU kernels use more than one core and still give
 * the same bits for every thread count.
 *
 * One process-wide pool of persistent pthreads (no OpenMP), sized once by ckrt_main (--threads,
 * CKRT_NUM_THREADS, OMP_NUM_THREADS, else every core the process may run on). A kernel hands it
 * a range [0, n) cut into blocks of a fixed size `grain` that the kernel chooses WITHOUT looking
 * at the thread count; the threads take whole blocks, and each block is computed by one call of
 * the kernel's function, so the code that produces any output element, and the order of every
 * sum in it, are the same for 1 thread and for 64. Kernels split over OUTPUT elements only,
 * never over a reduction axis.
 *
 *     static void rows(void *arg, int64_t begin, int64_t end) { ... rows [begin, end) ... }
 *     ckrt_parallel_for(n_rows, 64, rows, &args);
 *
 * A call from inside a block (a kernel calling another) runs inline on the calling thread. The
 * pool is meant to be driven from one thread (the one running the step).
 */
#ifndef CKRT_POOL_H
#define CKRT_POOL_H

#include <stdint.h>

#define CKRT_MAX_THREADS 256

/* CK_VEC before a block function with vectorizable loops: GCC compiles it three times, for
 * x86-64-v4 (AVX-512), AVX2 and the baseline x86-64 (SSE2), and the loader picks one for the CPU
 * (ifunc). All round every operation alike (the kernel files are built without contraction into
 * FMA and vectorize no float reduction), so the choice never changes a bit (golden_bits passes
 * with each); the wider ones only do 16 or 8 floats at a time (GELU's forward 1.45 -> 0.80 ns an
 * element from AVX2 to AVX-512 on one Zen 5 host). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CK_VEC __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define CK_VEC
#endif

/* Computes the elements [begin, end) of the caller's range; arg is the caller's. */
typedef void (*ckrt_pool_fn)(void *arg, int64_t begin, int64_t end);

/* Runs fn over [0, n) in blocks [b grain, min(n, (b + 1) grain)), spread over the pool's threads
 * (the calling thread works too). Returns when every block is done. grain >= 1. */
void ckrt_parallel_for(int64_t n, int64_t grain, ckrt_pool_fn fn, void *arg);

/* The pool's thread count (>= 1), counting the calling thread: what other kernels (oneDNN...)
 * should be told to use. */
int ckrt_threads(void);

/* Sizes the pool to n threads (1: none started), stopping the old ones first. Returns 0, or -1
 * when a thread could not be started (the pool then runs on the threads it has). */
int ckrt_threads_set(int n);

/* The default thread count and where it came from: CKRT_NUM_THREADS, else OMP_NUM_THREADS (its
 * first entry), else the cores in the process's affinity mask (sched_getaffinity). Returns the
 * count, or 0 when a variable is set but not an integer in [1, CKRT_MAX_THREADS]; *source names
 * the variable or "affinity". */
int ckrt_threads_default(const char **source);

#endif
