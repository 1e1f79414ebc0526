/* test_budget.c — budget:SIZE against the exact optimum, and monotone in SIZE.
 *
 * On graphs small enough to enumerate (at most 14 candidates, op-level and segments), every
 * subset of the candidates is planned (ck_budget_subsets); for budgets spread from the smallest
 * peak any subset reaches to none's, the search's choice (ck_plan_search with budget:SIZE) must
 * plan within the budget whenever some subset does, with recompute FLOPs within 10% of the least
 * any fitting subset needs; and a larger budget never gets more recompute FLOPs.
 */
#include "ck_frontend.h"
#include "ck_passes.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

static ck_graph *trained_graph(const char *path, const ck_load_options *lo, const ck_options *o) {
    ck_diag d = {0};
    ck_graph *g = NULL;
    ck_assert_int_eq(ck_frontend_load(path, lo, &g, &d), CK_OK);
    ck_assert_int_eq(ck_pass_lower(g, o, &d), CK_OK);
    ck_assert_int_eq(ck_pass_loss(g, o, &d), CK_OK);
    ck_assert_int_eq(ck_pass_autodiff(g, o, &d), CK_OK);
    ck_assert_int_eq(ck_pass_optimizer(g, o, &d), CK_OK);
    ck_assert_int_eq(ck_pass_fold_transposes(g, o, &d), CK_OK);
    ck_diag_clear(&d);
    return g;
}

/* The search's answer for budget b: its recompute FLOPs, or -1 when it refused. */
static int64_t search_flops(const char *path, const ck_load_options *lo, const ck_options *o, int64_t b, int64_t *peak) {
    ck_options t = *o;
    t.checkpoint = CK_CKPT_BUDGET, t.budget = b;
    ck_graph *g = trained_graph(path, lo, &t);
    ck_diag notes = {0}, d = {0};
    ck_status st = ck_plan_search(&g, &t, NULL, &notes, &d);
    int64_t f = st == CK_OK ? g->recompute_flops : -1;
    *peak = st == CK_OK ? g->plan.arena_bytes : -1;
    ck_graph_free(g);
    ck_diag_clear(&notes), ck_diag_clear(&d);
    return f;
}

typedef struct model {
    const char *file;
    int batch; /* --dim batch=N; 0: none */
} model;

START_TEST(budget_near_the_optimum) {
    static const model models[] = {{CK_SAMPLES "/mlp.onnx", 8}, {CK_TEST_DATA "/budget_attn.onnx", 0},
                                   {CK_TEST_DATA "/budget_cnn.onnx", 0}, {CK_TEST_DATA "/budget_ffn.onnx", 0},
                                   {CK_SAMPLES "/padnet.onnx", 0}, {CK_SAMPLES "/hardmlp.onnx", 0}};
    int tested = 0;
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s", models[i].file);
        ck_dim_binding bind = {"batch", models[i].batch};
        ck_load_options lo = {.dims = &bind, .n_dims = models[i].batch > 0};
        ck_options o = CK_OPTIONS_DEFAULT;
        o.weight_decay = 1e-2;
        ck_graph *g = trained_graph(path, &lo, &o);
        ck_curve all;
        ck_diag d = {0};
        ck_status st = ck_budget_subsets(g, &o, 14, &all, &d);
        ck_diag_clear(&d);
        if (st != CK_OK || all.n_candidates > 14) {
            printf("  %-12s %d candidates: not enumerated\n", models[i].file, all.n_candidates);
            free(all.pt);
            ck_graph_free(g);
            continue;
        }
        int64_t none = all.pt[0].peak, lo_peak = none;
        for (int m = 0; m < all.n; m++)
            if (all.pt[m].peak >= 0 && all.pt[m].peak < lo_peak) lo_peak = all.pt[m].peak;
        if (lo_peak == none) { /* nothing to choose: no subset lowers the peak */
            printf("  %-12s %d candidates: no subset lowers the peak\n", models[i].file, all.n_candidates);
            free(all.pt);
            ck_graph_free(g);
            continue;
        }
        int64_t prev = -1;
        for (int step = 0; step <= 8; step++) {
            int64_t b = lo_peak + (none - lo_peak) * step / 8;
            int64_t opt = -1; /* the least FLOPs of a subset within b */
            for (int m = 0; m < all.n; m++)
                if (all.pt[m].peak >= 0 && all.pt[m].peak <= b && (opt < 0 || all.pt[m].flops < opt)) opt = all.pt[m].flops;
            int64_t peak, got = search_flops(path, &lo, &o, b, &peak);
            printf("  %-40s %2d candidates, budget %9lld: search %12lld FLOPs (peak %lld), optimum %12lld\n", models[i].file,
                   all.n_candidates, (long long)b, (long long)got, (long long)peak, (long long)opt);
            ck_assert_msg(opt >= 0, "%s: the subset reaching %lld fits %lld", models[i].file, (long long)lo_peak, (long long)b);
            ck_assert_msg(got >= 0 && peak <= b, "%s: budget %lld: the search found no plan within it; a subset does (%lld FLOPs)",
                          models[i].file, (long long)b, (long long)opt);
            ck_assert_msg(got * 10 <= opt * 11, "%s: budget %lld: %lld FLOPs, over 1.1x the optimum %lld", models[i].file,
                          (long long)b, (long long)got, (long long)opt);
            ck_assert_msg(prev < 0 || got <= prev, "%s: budget %lld recomputes more (%lld) than a smaller one (%lld)",
                          models[i].file, (long long)b, (long long)got, (long long)prev);
            prev = got;
        }
        tested++;
        free(all.pt);
        ck_graph_free(g);
    }
    ck_assert_int_ge(tested, 4); /* mlp and the three budget_*.onnx at least */
}
END_TEST

int main(void) {
    Suite *s = suite_create("budget");
    TCase *tc = tcase_create("budget");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, budget_near_the_optimum);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
