/* test_pool.c — unit tests of libckrt's thread pool (runtime/pool.c, ckrt_pool.h): every index
 * visited exactly once in blocks at fixed boundaries whatever the thread count (the grain grows,
 * with n only, past 65535 blocks), nested calls
 * inline, resizing, many short jobs back to back (the pattern of a training step), and the
 * default count's order of precedence (CKRT_NUM_THREADS, OMP_NUM_THREADS, affinity).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ckrt_pool.h"

#define N 100003

typedef struct {
    atomic_int hits[N];
    int64_t grain;
    atomic_int bad_block; /* a block that did not start at a multiple of grain or was too long */
    atomic_int nested;
} visit;

static void count_nested(void *arg, int64_t lo, int64_t hi) { atomic_fetch_add((atomic_int *)arg, (int)(hi - lo)); }

static void mark(void *arg, int64_t lo, int64_t hi) {
    visit *v = arg;
    if (lo % v->grain != 0 || hi - lo > v->grain || (hi - lo < v->grain && hi != N)) atomic_store(&v->bad_block, 1);
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&v->hits[i], 1);
    if (lo == 0) ckrt_parallel_for(10, 1, count_nested, &v->nested); /* runs inline */
}

START_TEST(each_index_once) {
    static visit v;
    int counts[] = {1, 2, 3, 5, 1};
    for (int t = 0; t < 5; t++) {
        ck_assert_int_eq(ckrt_threads_set(counts[t]), 0);
        ck_assert_int_eq(ckrt_threads(), counts[t]);
        for (int64_t g = 1; g <= 4096; g *= 8) {
            for (int i = 0; i < N; i++) atomic_store(&v.hits[i], 0);
            v.grain = (N + g - 1) / g > 0xffff ? (N + 0xffff - 1) / 0xffff : g; /* past 65535 blocks the grain grows */
            atomic_store(&v.bad_block, 0);
            atomic_store(&v.nested, 0);
            ckrt_parallel_for(N, g, mark, &v);
            for (int i = 0; i < N; i++) ck_assert_msg(atomic_load(&v.hits[i]) == 1, "threads %d grain %lld: index %d visited %d times",
                                                      counts[t], (long long)g, i, atomic_load(&v.hits[i]));
            ck_assert_int_eq(atomic_load(&v.bad_block), 0);
            ck_assert_int_eq(atomic_load(&v.nested), 10);
        }
    }
    ckrt_threads_set(1);
}
END_TEST

static void add_one(void *arg, int64_t lo, int64_t hi) {
    int64_t *x = arg;
    for (int64_t i = lo; i < hi; i++) x[i] += 1;
}

START_TEST(many_short_jobs) {
    ck_assert_int_eq(ckrt_threads_set(3), 0);
    static int64_t x[64];
    for (int rep = 0; rep < 5000; rep++) ckrt_parallel_for(64, 4, add_one, x);
    for (int i = 0; i < 64; i++) ck_assert_int_eq(x[i], 5000);
    ckrt_threads_set(1);
}
END_TEST

START_TEST(default_precedence) {
    const char *src = NULL;
    setenv("CKRT_NUM_THREADS", "3", 1);
    setenv("OMP_NUM_THREADS", "5", 1);
    ck_assert_int_eq(ckrt_threads_default(&src), 3);
    ck_assert_str_eq(src, "CKRT_NUM_THREADS");
    unsetenv("CKRT_NUM_THREADS");
    setenv("OMP_NUM_THREADS", "4,2", 1);
    ck_assert_int_eq(ckrt_threads_default(&src), 4);
    ck_assert_str_eq(src, "OMP_NUM_THREADS");
    setenv("OMP_NUM_THREADS", "0", 1);
    ck_assert_int_eq(ckrt_threads_default(&src), 0);
    setenv("OMP_NUM_THREADS", "2x", 1);
    ck_assert_int_eq(ckrt_threads_default(&src), 0);
    unsetenv("OMP_NUM_THREADS");
    ck_assert_int_ge(ckrt_threads_default(&src), 1);
    ck_assert_str_eq(src, "affinity");
}
END_TEST

int main(void) {
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, each_index_once);
    tcase_add_test(tc, many_short_jobs);
    tcase_add_test(tc, default_precedence);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
