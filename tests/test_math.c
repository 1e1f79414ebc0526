/* test_math.c — runtime/ckrt_kernels_math.h's ck_expf, ck_erff and ck_tanhf against libm's double
 * functions (exp, erf, tanh), which are accurate to far below a float ulp: the largest error in
 * float ulps over dense sweeps (4 million evenly spaced points, plus logarithmic sweeps down to
 * the subnormals), the special values (NaN, +-inf, +-0, the overflow and
 * underflow edges) and the odd symmetry of erf and tanh. The bounds asserted are the ones
 * ckrt_kernels_math.h documents.
 */
#include "ckrt_kernels_math.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* |got - ref| in units of the float spacing at ref (the spacing of the float nearest ref) */
static double ulps(float got, double ref) {
    float r = (float)ref;
    double spacing = (double)nextafterf(fabsf(r), INFINITY) - (double)fabsf(r);
    if (fabsf(r) < FLT_MIN) spacing = (double)FLT_TRUE_MIN;
    return fabs((double)got - ref) / spacing;
}

typedef struct {
    double worst;
    float at;
} err;

static void track(err *e, float x, float got, double ref) {
    double u = ulps(got, ref);
    if (!(u <= e->worst)) e->worst = u, e->at = x; /* NaN counts as worst */
}

/* 4 million evenly spaced points from lo to hi, then logarithmic down to 1e-38 (both signs) */
static void sweep(float lo, float hi, float (*f)(float), double (*ref)(double), err *e) {
    for (int64_t i = 0; i <= 4000000; i++) {
        float x = (float)(lo + (hi - lo) * ((double)i / 4000000.0));
        track(e, x, f(x), ref((double)x));
    }
    for (double m = 1e-38; m < 1.0; m *= 1.0007) {
        float x = (float)m;
        track(e, x, f(x), ref((double)x));
        track(e, -x, f(-x), ref(-(double)x));
    }
}

START_TEST(expf_accuracy) {
    err e = {0, 0};
    sweep(-87.3f, 88.7f, ck_expf, exp, &e);
    ck_assert_msg(e.worst <= 1.25, "ck_expf: %.3f ulp at %a", e.worst, (double)e.at);
    /* subnormal results: within one subnormal step of exp */
    for (float x = -103.9f; x < -87.4f; x += 0.001f)
        ck_assert_msg(fabs((double)ck_expf(x) - exp((double)x)) <= (double)FLT_TRUE_MIN, "ck_expf(%a) = %a", (double)x,
                      (double)ck_expf(x));
}
END_TEST

START_TEST(expf_special) {
    ck_assert(isnan(ck_expf(NAN)));
    ck_assert(ck_expf(INFINITY) == INFINITY);
    ck_assert(ck_expf(-INFINITY) == 0.0f);
    ck_assert(ck_expf(0.0f) == 1.0f && ck_expf(-0.0f) == 1.0f);
    ck_assert(ck_expf(88.8f) == INFINITY && ck_expf(1e30f) == INFINITY);
    ck_assert(isfinite(ck_expf(88.72f)) && ck_expf(88.72f) > 3.3e38f);
    ck_assert(ck_expf(-104.0f) == 0.0f && ck_expf(-1e30f) == 0.0f);
    ck_assert(ck_expf(-103.0f) > 0.0f);
    ck_assert(ulps(ck_expf(1.0f), exp(1.0)) <= 1.0);
}
END_TEST

START_TEST(erff_accuracy) {
    err e = {0, 0};
    sweep(-8.0f, 8.0f, ck_erff, erf, &e);
    ck_assert_msg(e.worst <= 1.8, "ck_erff: %.3f ulp at %a", e.worst, (double)e.at);
    for (float x = 0.0f; x < 6.0f; x += 0.01f) ck_assert(ck_erff(-x) == -ck_erff(x));
    ck_assert(isnan(ck_erff(NAN)));
    ck_assert(ck_erff(INFINITY) == 1.0f && ck_erff(-INFINITY) == -1.0f);
    ck_assert(ck_erff(0.0f) == 0.0f && signbit(ck_erff(-0.0f)));
    ck_assert(ulps(ck_erff(1e-30f), erf((double)1e-30f)) <= 1.0);
}
END_TEST

START_TEST(tanhf_accuracy) {
    err e = {0, 0};
    sweep(-12.0f, 12.0f, ck_tanhf, tanh, &e);
    ck_assert_msg(e.worst <= 1.5, "ck_tanhf: %.3f ulp at %a", e.worst, (double)e.at);
    for (float x = 0.0f; x < 12.0f; x += 0.01f) ck_assert(ck_tanhf(-x) == -ck_tanhf(x));
    ck_assert(isnan(ck_tanhf(NAN)));
    ck_assert(ck_tanhf(INFINITY) == 1.0f && ck_tanhf(-INFINITY) == -1.0f);
    ck_assert(ck_tanhf(100.0f) == 1.0f);
    ck_assert(ck_tanhf(0.0f) == 0.0f && signbit(ck_tanhf(-0.0f)));
}
END_TEST

int main(void) {
    Suite *s = suite_create("math");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, expf_accuracy);
    tcase_add_test(tc, expf_special);
    tcase_add_test(tc, erff_accuracy);
    tcase_add_test(tc, tanhf_accuracy);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
