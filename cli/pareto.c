/* pareto.c — `ckptc pareto MODEL.onnx [compile flags] [--svg FILE]`: the memory/recompute
 * trade-off of a model, as budget:SIZE sees it.
 *
 * The budget search's walk (passes/search.c, ck_plan_curve) plans candidate sets from no
 * recompute to the smallest peak it reaches; each set is one point (planned peak, recompute FLOPs
 * per step). The table lists the points no other point beats on both (the Pareto front), from the
 * smallest peak to none's: what budget:SIZE with SIZE = that peak would plan. The named policies
 * (none, blocks, sqrt, selective, blocks,selective) are planned as the compiler plans them and
 * listed after it. --svg draws peak against recompute FLOPs: the front as a staircase, the
 * policies as labelled marks. Everything is planned, nothing is written but the SVG.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mark {
    const char *name;
    int64_t peak, flops;
    bool ok;
} mark;

static ck_graph *trained_graph(const char *path, const ck_load_options *lo, const ck_options *o, ck_diag *d) {
    ck_graph *g = NULL;
    ck_status st = ck_frontend_load(path, lo, &g, d);
    if (!st) st = ck_pass_lower(g, o, d);
    if (!st) st = ck_pass_loss(g, o, d);
    if (!st) st = ck_pass_autodiff(g, o, d);
    if (!st) st = ck_pass_optimizer(g, o, d);
    if (!st) st = ck_pass_fold_transposes(g, o, d);
    if (st) {
        ck_graph_free(g);
        return NULL;
    }
    return g;
}

/* One named policy, planned as `ckptc --plan-only --checkpoint=NAME` plans it. */
static mark plan_policy(const ck_graph *trained, const ck_options *base, const char *name) {
    ck_options o = *base;
    o.checkpoint = CK_CKPT_NONE, o.selective = false, o.policy_name = name, o.offload = false;
    if (!strncmp(name, "blocks", 6)) o.checkpoint = CK_CKPT_BLOCKS;
    if (!strcmp(name, "sqrt")) o.checkpoint = CK_CKPT_SQRT;
    if (strstr(name, "selective")) o.selective = true;
    ck_graph *g = ck_graph_clone(trained);
    ck_diag notes = {0}, d = {0};
    mark m = {.name = name};
    if (ck_plan_search(&g, &o, ck_codegen_check, &notes, &d) == CK_OK) m.ok = true, m.peak = g->plan.arena_bytes, m.flops = g->recompute_flops;
    ck_graph_free(g);
    ck_diag_clear(&notes), ck_diag_clear(&d);
    return m;
}

static int by_peak(const void *pa, const void *pb) {
    const ck_curve_point *a = pa, *b = pb;
    return a->peak < b->peak ? -1 : a->peak > b->peak ? 1 : a->flops < b->flops ? -1 : a->flops > b->flops;
}

/* The front in place: sorted by peak (then FLOPs), a point kept when it recomputes less than
 * every point with a peak as low. Returns the count. */
static int pareto_front(ck_curve_point *p, int n) {
    qsort(p, (size_t)n, sizeof *p, by_peak);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || p[i].flops < p[m - 1].flops) p[m++] = p[i];
    return m;
}

static void svg(const char *model, const ck_curve_point *p, int n, const mark *mk, int nm, FILE *f) {
    double W = 760, H = 480, L = 90, R = 170, T = 50, B = 60;
    int64_t pmin = INT64_MAX, pmax = 0, fmax = 1;
    for (int i = 0; i < n; i++) {
        if (p[i].peak < pmin) pmin = p[i].peak;
        if (p[i].peak > pmax) pmax = p[i].peak;
        if (p[i].flops > fmax) fmax = p[i].flops;
    }
    for (int i = 0; i < nm; i++)
        if (mk[i].ok) {
            if (mk[i].peak < pmin) pmin = mk[i].peak;
            if (mk[i].peak > pmax) pmax = mk[i].peak;
            if (mk[i].flops > fmax) fmax = mk[i].flops;
        }
    double y0 = (double)pmin * 0.95, y1 = (double)pmax * 1.02, x1 = (double)fmax * 1.05;
#define X(v) (L + (double)(v) / x1 * (W - L - R))
#define Y(v) (H - B - ((double)(v) - y0) / (y1 - y0) * (H - T - B))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"24\" font-size=\"15\">%s: planned peak vs recompute FLOPs per step</text>\n", L, model);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, T, L, H - B);
    for (int i = 0; i <= 5; i++) {
        double fv = x1 * i / 5, pv = y0 + (y1 - y0) * i / 5;
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.2f</text>\n", X(fv), H - B + 18, fv / 1e9);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/>\n", X(fv), T, X(fv), H - B);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n", L - 6, Y(pv) + 4, pv / 1048576.0);
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, Y(pv), W - R, Y(pv));
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">recompute GFLOPs per step</text>\n", (L + W - R) / 2, H - 18);
    fprintf(f, "<text transform=\"translate(22 %.0f) rotate(-90)\" text-anchor=\"middle\">planned peak (MiB)</text>\n", (T + H - B) / 2);
    /* the front: from the highest peak (least recompute) down, a staircase */
    fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"");
    for (int i = n - 1; i >= 0; i--) {
        if (i < n - 1) fprintf(f, "%.1f,%.1f ", X(p[i].flops), Y(p[i + 1].peak));
        fprintf(f, "%.1f,%.1f ", X(p[i].flops), Y(p[i].peak));
    }
    fprintf(f, "\"/>\n");
    for (int i = 0; i < n; i++) fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"#1f77b4\"/>\n", X(p[i].flops), Y(p[i].peak));
    static const char *colors[] = {"#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
    for (int i = 0; i < nm; i++) {
        if (!mk[i].ok) continue;
        double cx = X(mk[i].flops), cy = Y(mk[i].peak);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"9\" height=\"9\" fill=\"%s\"/>\n", cx - 4.5, cy - 4.5, colors[i % 5]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-dasharray=\"2,2\"/>\n", cx, cy, W - R + 12,
                T + 20.0 + 22 * i, colors[i % 5]);
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n", W - R + 16, T + 24.0 + 22 * i, colors[i % 5], mk[i].name);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#1f77b4\">budget:SIZE front</text>\n", W - R + 16, T + 24.0 + 22 * nm);
    fprintf(f, "</svg>\n");
#undef X
#undef Y
}

int ck_pareto(const char *path, const ck_load_options *lo, const ck_options *o, const char *svg_file, ck_diag *d) {
    ck_graph *trained = trained_graph(path, lo, o, d);
    if (!trained) return CK_ERR_USAGE;
    int64_t fwd = ck_forward_flops(trained);
    ck_curve c;
    ck_status st = ck_plan_curve(trained, o, &c, d);
    if (st || c.n == 0) {
        free(c.pt);
        ck_graph_free(trained);
        return st ? st : CK_ERR_USAGE;
    }
    int n = pareto_front(c.pt, c.n);
    static const char *names[] = {"none", "selective", "blocks", "blocks,selective", "sqrt"};
    mark mk[5];
    for (int i = 0; i < 5; i++) mk[i] = plan_policy(trained, o, names[i]);
    printf("%s: %d candidates (op-level and segments), %d plans on the budget's walk, %d on the front; forward %lld FLOPs\n",
           path, c.n_candidates, c.n, n, (long long)fwd);
    printf("%14s %16s %8s  %s\n", "planned peak", "recompute FLOPs", "of fwd", "budget:PEAK plans");
    for (int i = 0; i < n; i++)
        printf("%14lld %16lld %7.1f%%  %d segments, %d activations op-level\n", (long long)c.pt[i].peak, (long long)c.pt[i].flops,
               fwd ? 100.0 * (double)c.pt[i].flops / (double)fwd : 0.0, c.pt[i].segments, c.pt[i].selective);
    printf("policies:\n");
    for (int i = 0; i < 5; i++)
        if (mk[i].ok) printf("%14lld %16lld %7.1f%%  --checkpoint=%s\n", (long long)mk[i].peak, (long long)mk[i].flops,
                             fwd ? 100.0 * (double)mk[i].flops / (double)fwd : 0.0, mk[i].name);
        else printf("%14s %16s %8s  --checkpoint=%s (did not plan)\n", "-", "-", "-", mk[i].name);
    if (svg_file) {
        FILE *f = fopen(svg_file, "w");
        if (!f) {
            ck_diag_add(d, "--svg '%s': cannot write it", svg_file);
            st = CK_ERR_USAGE;
        } else {
            const char *base = strrchr(path, '/');
            svg(base ? base + 1 : path, c.pt, n, mk, 5, f);
            fclose(f);
            printf("wrote %s\n", svg_file);
        }
    }
    free(c.pt);
    ck_graph_free(trained);
    return st;
}
