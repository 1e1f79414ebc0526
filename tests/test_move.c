/* test_move.c — unit tests of libckrt's strided copy (runtime/cpu_move.c), the kernel behind
 * Transpose, Slice and Expand: every permutation of ranks 1 to 4 over sizes that are and are not
 * multiples of the transpose tile (16), with a base offset and with a slice's strides, for 1-,
 * 2-, 4- and 8-byte elements, at 1, 2 and 3 threads, against a per-element reference. Every output
 * byte is compared, and a guard past the output must stay untouched.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckrt.h"
#include "ckrt_ops.h"
#include "ckrt_pool.h"

#define GUARD 64

/* element i of the output (row-major over dims) comes from in[base + sum idx_k strides_k] */
static void reference(size_t esz, unsigned char *y, const unsigned char *x, int rank, const int64_t *dims,
                      const int64_t *strides, int64_t base) {
    int64_t n = 1;
    for (int k = 0; k < rank; k++) n *= dims[k];
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i, src = base;
        for (int k = rank - 1; k >= 0; k--) {
            src += r % dims[k] * strides[k];
            r /= dims[k];
        }
        memcpy(y + i * (int64_t)esz, x + src * (int64_t)esz, esz);
    }
}

/* the permutations of rank axes, in lexicographic order, from perm (advanced in place) */
static int next_perm(int *p, int n) {
    int i = n - 2;
    while (i >= 0 && p[i] > p[i + 1]) i--;
    if (i < 0) return 0;
    int j = n - 1;
    while (p[j] < p[i]) j--;
    int t = p[i];
    p[i] = p[j], p[j] = t;
    for (int a = i + 1, b = n - 1; a < b; a++, b--) t = p[a], p[a] = p[b], p[b] = t;
    return 1;
}

/* one case: input dims in_dims (contiguous, plus `base` leading elements and, with slice,
 * every other element along each axis), output = the input's axes in the order perm */
static void check_case(size_t esz, int rank, const int64_t *in_dims, const int *perm, int64_t base, int slice, int threads) {
    int64_t in_str[4], out_dims[4], out_str[4], n = 1, span = 1;
    for (int k = rank - 1; k >= 0; k--) {
        in_str[k] = span * (slice ? 2 : 1);
        span *= in_dims[k] * (slice ? 2 : 1);
    }
    for (int k = 0; k < rank; k++) {
        out_dims[k] = in_dims[perm[k]];
        out_str[k] = in_str[perm[k]];
        n *= out_dims[k];
    }
    size_t in_bytes = (size_t)(base + span) * esz, out_bytes = (size_t)n * esz;
    unsigned char *x = malloc(in_bytes ? in_bytes : 1), *want = malloc(out_bytes + 1), *got = malloc(out_bytes + GUARD);
    for (size_t i = 0; i < in_bytes; i++) x[i] = (unsigned char)(i * 131u + i / 251u);
    reference(esz, want, x, rank, out_dims, out_str, base);
    memset(got, 0xA5, out_bytes + GUARD);
    ckrt_threads_set(threads);
    ckrt_ctx c; /* the CPU kernel itself, called past the backend dispatch (ckrt_device.h) */
    memset(&c, 0, sizeof c);
    ck_assert_int_eq((ckrt_strided_copy)(&c, esz, got, x, rank, out_dims, out_str, base), CKRT_OK);
    ck_assert_msg(memcmp(got, want, out_bytes) == 0, "esz %zu rank %d dims (%lld %lld %lld %lld) perm (%d %d %d %d) base %lld slice %d, %d threads: wrong bytes",
                  esz, rank, (long long)in_dims[0], (long long)(rank > 1 ? in_dims[1] : 0), (long long)(rank > 2 ? in_dims[2] : 0),
                  (long long)(rank > 3 ? in_dims[3] : 0), perm[0], rank > 1 ? perm[1] : -1, rank > 2 ? perm[2] : -1,
                  rank > 3 ? perm[3] : -1, (long long)base, slice, threads);
    for (int i = 0; i < GUARD; i++) ck_assert_msg(got[out_bytes + i] == 0xA5, "wrote past the output");
    free(x), free(want), free(got);
}

START_TEST(every_permutation) {
    static const int64_t shapes[][4] = {{16, 16, 16, 16}, {3, 37, 5, 33}, {2, 128, 4, 64}, {1, 17, 1, 40}, {8, 4, 64, 128}, {5, 0, 3, 2}};
    static const size_t eszs[] = {4, 1, 2, 8};
    int cases = 0;
    for (size_t e = 0; e < sizeof eszs / sizeof *eszs; e++)
        for (int rank = 1; rank <= 4; rank++)
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
                if (eszs[e] != 4 && s >= 2) continue; /* the other sizes take the row path: a few shapes suffice */
                int perm[4] = {0, 1, 2, 3};
                do
                    for (int threads = 1; threads <= 3; threads++) {
                        check_case(eszs[e], rank, shapes[s] + (4 - rank), perm, threads == 2 ? 7 : 0, threads == 3, threads);
                        cases++;
                    }
                while (next_perm(perm, rank));
            }
    ck_assert_int_gt(cases, 500);
    ckrt_threads_set(1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("move");
    TCase *tc = tcase_create("strided_copy");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_permutation);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
