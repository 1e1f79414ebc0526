/* search.c — the plan search: the choices that only whole memory plans can decide.
 *
 * Whether a recompute set meets budget:SIZE, whether --offload lowers the device peak, which
 * gradient bucket and which bucket schedule plan the lowest peak: estimates cannot say, because
 * placement (fragmentation) moves the peak. So each candidate is planned for real: a try is a
 * clone of the trained graph (after loss, autodiff and optimizer, which none of these choices
 * changes) taken through checkpoint -> data_parallel -> early_update -> check -> fuse -> plan, and the
 * search keeps the try whose planned peak wins. No try loads the model again. When there is
 * nothing to choose (no budget, no --offload, data parallel with its bucket and schedule given),
 * the one plan is made on the trained graph itself, without a clone.
 *
 *   budget:SIZE      candidates are op-level ones (selective.c, one per producer node) and the
 *                    blocks policy's segments (cut points when names carry no blocks), ranked by
 *                    activation bytes per FLOP, op-level first. A walk (walk(), shared with the
 *                    trade-off curve of `ckptc pareto`) plans candidate sets from none towards
 *                    the smallest peak: greedy on real plans up to 24 candidates (the one lowering
 *                    the peak most per FLOP among the next 8, swaps when none does), prefixes of
 *                    the ranking beyond (at most 48 plans). The first set within SIZE (or one of
 *                    the next 8 with fewer FLOPs) is then pruned: each candidate dropped, then
 *                    one-for-one swaps (small sets), while the plan still fits with fewer FLOPs.
 *                    tests/test_budget.c holds it within 10% of the exact optimum (every subset
 *                    planned) on small graphs.
 *   selective        must never raise the planned peak either: the plan without op-level
 *                    recompute is made too and kept when lower (a note says so).
 *   --offload        must never raise the device peak: when the plan without it is lower (the
 *                    placement can lose to fragmentation what the shorter lifetimes win), the
 *                    checkpoints stay on the device.
 *   --data-parallel  without --dp-bucket, the bucket is halved while a staging holds the peak and
 *                    halving lowers it; with --dp-overlap=auto, the overlapped schedule is kept
 *                    unless all buckets after the backward plan a lower peak.
 *   blocks           the module scopes of node names and the units the graph itself repeats are
 *                    both planned, the lower peak kept (the names on a tie); with no repeated unit
 *                    the structural try is the sqrt segmentation; when the graph repeats units, a
 *                    third try groups its cut-point chunks into about sqrt(n) runs (single-layer
 *                    units such as VGG's), kept when lower. Last (after selective and --offload
 *                    settled), trim_blocks keeps each segment whose recompute does not lower the peak.
 *   --max-recompute  when the plan the choices above settled recomputes more than X of the
 *                    forward's FLOPs, each plan the policy could take (blocks' three
 *                    segmentations, with and without selective) is fitted to the cap by keeping
 *                    segments (fit_cap, cap_trim), and the lowest peak within it wins.
 *   --clip-grad-norm  its updates run after the whole backward; a second plan with early updates
 *                    says what that costs (a note, nothing chosen).
 *   lanes            every try's plan ends with them (plan_passes): convolutions get CPU lanes
 *                    where their larger workspace leaves that try's peak as it is (lanes.c), so
 *                    the peaks the search compares, the pareto front's included, are the ones
 *                    the chosen program runs with; a note counts the chosen graph's.
 * What the search chose goes to the caller's notes, one line each (the CLI prints them).
 */
#include "ck_passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct search {
    const ck_graph *trained; /* every try starts from a clone of it, so it stays as it was */
    ck_check_fn check;
    ck_diag *notes;
    bool capped;       /* --max-recompute given (a search without it, zeroed, has no cap) */
    int64_t cap;       /* --max-recompute in FLOPs a step */
    int64_t fwd_flops; /* the forward's FLOPs (the trained graph's forward nodes) */
} search;

/* g's recompute as a percentage of the forward's FLOPs */
static double cap_percent(const search *s, const ck_graph *g) {
    return s->fwd_flops ? 100.0 * (double)g->recompute_flops / (double)s->fwd_flops : 0.0;
}

/* Is g's recompute within --max-recompute? */
static bool within_cap(const search *s, const ck_graph *g) { return !s->capped || g->recompute_flops <= s->cap; }

/* Fusion (fuse.c: chains, unless --no-fuse, and single elementwise nodes in place) never raises
 * the live bytes at any step, but placement is greedy and can lose a few bytes to fragmentation
 * that the unfused graph did not: so a fused plan is kept only when its peak is at most the
 * unfused one's. A probe (a clone) is fused and planned first; when it changes nothing, or plans
 * higher, g is planned unfused; else g is fused and planned like the probe. */
static ck_status fuse_and_plan(ck_graph *g, const ck_options *o, ck_diag *d) {
    ck_graph *probe = ck_graph_clone(g);
    ck_status st = ck_pass_fuse(probe, o, d);
    bool fused = false; /* chains, or single nodes in place */
    for (int i = 0; i < probe->n_nodes; i++) fused |= probe->nodes[i]->op == CK_OP_FUSED || ck_attr_find(probe->nodes[i], CK_INPLACE_ATTR);
    if (!st && fused) st = ck_pass_plan(probe, o, d);
    if (!st) st = ck_pass_plan(g, o, d);
    if (!st && fused && probe->plan.arena_bytes <= g->plan.arena_bytes) {
        st = ck_pass_fuse(g, o, d);
        if (!st) st = ck_pass_plan(g, o, d);
    }
    ck_graph_free(probe);
    return st;
}

/* The passes the search's choices change, on g (the trained graph or a clone of it). */
static ck_status plan_passes(const search *s, ck_graph *g, const ck_options *o, ck_diag *d) {
    ck_status st = CK_OK;
    if (!o->infer) st = ck_pass_checkpoint(g, o, d);
    if (!st && !o->infer) st = ck_pass_data_parallel(g, o, d);
    if (!st && !o->infer) st = ck_pass_early_update(g, o, d);
    if (!st) st = ck_graph_verify(g, d);
    if (!st && s->check) st = s->check(g, o, d); /* reject what cannot run before any planning */
    if (!st) st = fuse_and_plan(g, o, d);
    if (!st) st = ck_pass_conv_lanes(g, o, d); /* part of every plan, so that tries compare alike */
    if (!st) st = ck_graph_verify(g, d);
    return st;
}

/* One try: a clone of the trained graph through those passes. */
static ck_status plan_try(const search *s, const ck_options *o, ck_graph **out, ck_diag *d) {
    *out = ck_graph_clone(s->trained);
    return plan_passes(s, *out, o, d);
}

/* Does the search choose blocks' segmentation (names, structure, grouped runs)? Not with
 * --block-regex, which names the blocks itself. */
static bool blocks_searched(const ck_options *o) { return o->checkpoint == CK_CKPT_BLOCKS && !(o->block_regex && *o->block_regex); }

/* Is there nothing to choose, so that one plan of the trained graph itself settles it? */
static bool one_try(const ck_options *o) {
    if (o->checkpoint == CK_CKPT_BUDGET || o->offload || o->clip_grad_norm > 0 || o->selective || o->max_recompute > 0) return false;
    if (blocks_searched(o)) return false; /* names or structure */
    return !o->data_parallel || (o->dp_bucket_bytes > 0 && o->dp_overlap >= 0);
}

/* A try whose messages are dropped: a candidate that fails is just not chosen. Returns whether
 * it planned; *out is the graph either way (the caller frees it). */
static bool plan_quietly(const search *s, const ck_options *o, ck_graph **out) {
    ck_diag d = {0};
    bool ok = plan_try(s, o, out, &d) == CK_OK;
    ck_diag_clear(&d);
    return ok;
}

/* ---------------------------------------------------------------- budget:SIZE */

static void plan_blocks(const search *s, ck_options *o, ck_graph **g);

/* budget:SIZE and pareto weigh blocks' segments: by module scopes, by the units the graph
 * repeats, or those units grouped into runs, whichever the blocks policy chooses (its plan with
 * every segment recomputed has the lowest peak); sets o->blocks_by_structure and
 * o->blocks_grouped. When the graph repeats no unit, blocks' sqrt fallback is not taken: the
 * module scopes, else one segment per pair of cut points, are finer candidates, which the budget
 * combines better (tests/test_budget.c's CNN: sqrt's 2 segments miss its optimum by 18x).
 * --block-regex keeps the names. The tries' messages are dropped. */
static void budget_segments(const search *s, ck_options *o) {
    if ((o->block_regex && *o->block_regex) || ck_checkpoint_units(s->trained) == 0) return;
    ck_options t = *o;
    t.checkpoint = CK_CKPT_BLOCKS, t.selective = false, t.blocks_by_structure = false, t.blocks_grouped = false;
    search quiet = *s;
    quiet.notes = NULL;
    ck_graph *g = NULL;
    if (plan_quietly(&quiet, &t, &g)) {
        plan_blocks(&quiet, &t, &g);
        o->blocks_by_structure = t.blocks_by_structure, o->blocks_grouped = t.blocks_grouped;
    }
    ck_graph_free(g);
}

/* The budget's candidates: op-level ones (selective.c) first, then segments (the blocks policy's
 * as budget_segments chose them); their FLOPs and bytes; order: most bytes per FLOP first
 * (ties in that numbering). A set of them is a try: segments in recompute_set, the op-level ones
 * in selective_set. */
typedef struct bcands {
    int n, n_op;            /* candidates; [0, n_op) op-level: one per producer node (the outputs of
                             * one node share its clone: a LayerNorm's y, mean and rstd) */
    int64_t *flops, *bytes;
    int *order;
    int n_act, *unit;       /* per op-level activation of ck_selective_candidates: its candidate */
    bool *segbits, *opbits;
} bcands;

static void bcands_free(bcands *b) {
    free(b->flops), free(b->bytes), free(b->order), free(b->segbits), free(b->opbits), free(b->unit);
    memset(b, 0, sizeof *b);
}

typedef struct ranked {
    double score; /* activation bytes per FLOP */
    int k;        /* the candidate */
} ranked;

static int by_score(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    return a->score > b->score ? -1 : a->score < b->score ? 1 : a->k - b->k;
}

/* The op-level candidates come first: a segment's bytes count every activation in it, also
 * those the op-level ones free already, so its own score overstates what it adds to them. */
#define CK_SEGMENT_RANK (-1e30)

static ck_status bcands_init(const ck_graph *trained, const ck_options *o, bcands *b, ck_diag *d) {
    memset(b, 0, sizeof *b);
    ck_options t = *o;
    t.checkpoint = CK_CKPT_BUDGET, t.selective = true, t.selective_set = NULL, t.recompute_set = NULL;
    ck_sel_candidates sc;
    ck_ckpt_candidates cc;
    ck_selective_candidates(trained, &t, &sc);
    ck_status st = ck_checkpoint_candidates(trained, &t, &cc, d);
    if (!st) {
        size_t n = (size_t)sc.n + (size_t)cc.n + 1;
        b->flops = calloc(n, sizeof *b->flops), b->bytes = calloc(n, sizeof *b->bytes), b->order = malloc(n * sizeof(int));
        b->segbits = calloc((size_t)cc.n + 1, 1), b->opbits = calloc((size_t)sc.n + 1, 1);
        b->unit = malloc(((size_t)sc.n + 1) * sizeof(int)), b->n_act = sc.n;
        ranked *r = malloc(n * sizeof *r);
        CK_ASSERT(b->flops && b->bytes && b->order && b->segbits && b->opbits && b->unit && r);
        for (int a = 0; a < sc.n; a++) { /* one candidate per producer node */
            b->unit[a] = -1;
            for (int q = 0; q < a && b->unit[a] < 0; q++)
                if (sc.node[q] == sc.node[a]) b->unit[a] = b->unit[q];
            if (b->unit[a] < 0) b->unit[a] = b->n_op++;
            b->bytes[b->unit[a]] += sc.bytes[a];
            if (sc.flops[a] > b->flops[b->unit[a]]) b->flops[b->unit[a]] = sc.flops[a];
        }
        b->n = b->n_op + cc.n;
        for (int k = 0; k < b->n; k++) {
            if (k >= b->n_op) b->flops[k] = cc.flops[k - b->n_op], b->bytes[k] = cc.bytes[k - b->n_op];
            r[k] = (ranked){(double)b->bytes[k] / (double)(b->flops[k] + 1), k};
            if (k >= b->n_op) r[k].score += CK_SEGMENT_RANK;
        }
        qsort(r, (size_t)b->n, sizeof *r, by_score);
        for (int k = 0; k < b->n; k++) b->order[k] = r[k].k;
        free(r);
    }
    ck_selective_candidates_free(&sc);
    ck_checkpoint_candidates_free(&cc);
    return st;
}

/* The options of the try recomputing the candidates on[] (by candidate number). */
static ck_options bcands_try(bcands *b, const ck_options *o, const bool *on) {
    ck_options t = *o;
    for (int a = 0; a < b->n_act; a++) b->opbits[a] = on[b->unit[a]];
    for (int k = b->n_op; k < b->n; k++) b->segbits[k - b->n_op] = on[k];
    t.checkpoint = CK_CKPT_BUDGET;
    t.recompute_set = b->segbits, t.n_recompute_set = b->n - b->n_op;
    t.selective = b->n_act > 0, t.selective_set = b->opbits, t.n_selective_set = b->n_act;
    return t;
}

/* The prefixes of the order the search plans: every length when there are at most CK_CURVE_MAX
 * candidates, else CK_CURVE_MAX lengths spread evenly (and all of them). Returns the count. */
#define CK_CURVE_MAX 48
static int prefix_lengths(int n, int *len) {
    int m = 0;
    if (n <= CK_CURVE_MAX) {
        for (int k = 0; k <= n; k++) len[m++] = k;
    } else {
        for (int i = 0; i <= CK_CURVE_MAX; i++) len[m++] = (int)((int64_t)n * i / CK_CURVE_MAX);
    }
    return m;
}

/* The walk the budget search and the trade-off curve share: a sequence of candidate sets, each
 * planned, from none to as much recompute as helps. Up to CK_GREEDY_MAX candidates it is greedy
 * on real plans: at each step the next CK_WINDOW candidates of the order not taken yet are tried
 * one at a time; the one lowering the peak most per FLOP is taken, or, when none lowers it, the
 * first that does not raise it (a step on which later ones may build); the walk ends when each
 * raises it. When no single candidate lowers the peak, one taken is first tried swapped for one
 * of the window (swap). Beyond CK_GREEDY_MAX (big graphs, where each plan costs) the sets are prefixes of
 * the order (prefix_lengths). Each set reached is handed to visit, which says whether to stop.
 * The sequence does not depend on the budget, so a larger budget stops no later. */
#define CK_GREEDY_MAX 24
#define CK_WINDOW 8
typedef struct walker {
    int64_t budget;      /* stop at the first set within it (-1: walk to the end) */
    ck_graph *hit;       /* that set's plan */
    int after_hit;       /* sets visited since the first within the budget */
    bool stopped;        /* visit said stop */
    bool *hit_on;        /* that set */
    ck_graph *smallest;  /* the lowest peak seen when nothing fits */
    ck_curve *curve;     /* every set's point, when set */
} walker;

/* One set reached; true: stop. Takes g. */
static bool visit(walker *w, ck_graph *g, const bool *on, int n, int taken) {
    if (w->curve)
        w->curve->pt[w->curve->n++] = (ck_curve_point){.peak = g->plan.arena_bytes, .flops = g->recompute_flops,
                                                       .candidates = taken, .segments = g->n_segments, .selective = g->n_selective};
    if (w->budget >= 0 && g->plan.arena_bytes <= w->budget) {
        /* the first set within the budget, or one of the next CK_WINDOW that fits with fewer FLOPs
         * (clones shared between candidates make FLOPs not additive) */
        if (!w->hit || g->recompute_flops < w->hit->recompute_flops) {
            ck_graph_free(w->hit);
            w->hit = g;
            memcpy(w->hit_on, on, (size_t)n);
        } else {
            ck_graph_free(g);
        }
        return ++w->after_hit > CK_WINDOW;
    }
    if (w->hit) {
        ck_graph_free(g);
        return true;
    }
    if (!w->smallest || g->plan.arena_bytes < w->smallest->plan.arena_bytes) {
        ck_graph_free(w->smallest);
        w->smallest = g;
    } else {
        ck_graph_free(g);
    }
    return false;
}

static bool plan_set(const search *s, const ck_options *o, bcands *b, const bool *on, ck_graph **g) {
    ck_options t = bcands_try(b, o, on);
    return plan_quietly(s, &t, g);
}

/* When no single candidate lowers the peak: one taken candidate out and one of the next
 * CK_WINDOW in: the swap lowering the peak most is made (visited); false when none does. */
static bool swap(const search *s, const ck_options *o, bcands *b, bool *on, int64_t *cur, walker *w, int taken) {
    int best_out = -1, best_in = -1, tried_out = 0;
    ck_graph *best_g = NULL;
    for (int t = 0; t < b->n && tried_out < 2 * CK_WINDOW; t++) {
        if (!on[t]) continue;
        tried_out++;
        on[t] = false;
        for (int j = 0, tried = 0; j < b->n && tried < CK_WINDOW; j++) {
            int k = b->order[j];
            if (on[k] || k == t) continue;
            tried++;
            on[k] = true;
            ck_graph *g = NULL;
            bool ok = plan_set(s, o, b, on, &g);
            on[k] = false;
            if (ok && g->plan.arena_bytes < *cur && (!best_g || g->plan.arena_bytes < best_g->plan.arena_bytes)) {
                ck_graph_free(best_g);
                best_g = g, best_out = t, best_in = k;
            } else {
                ck_graph_free(g);
            }
        }
        on[t] = true;
    }
    if (!best_g) return false;
    on[best_out] = false, on[best_in] = true;
    *cur = best_g->plan.arena_bytes;
    w->stopped = visit(w, best_g, on, b->n, taken);
    return true;
}

static void walk_greedy(const search *s, const ck_options *o, bcands *b, int64_t none_peak, walker *w, bool *on) {
    int64_t cur = none_peak;
    for (int taken = 1; taken <= b->n; taken++) {
        int pick = -1, tried = 0;
        double pick_score = 0;
        ck_graph *pick_g = NULL;
        for (int j = 0; j < b->n && tried < CK_WINDOW; j++) {
            int k = b->order[j];
            if (on[k]) continue;
            tried++;
            on[k] = true;
            ck_graph *g = NULL;
            bool ok = plan_set(s, o, b, on, &g);
            on[k] = false;
            int64_t p = ok ? g->plan.arena_bytes : INT64_MAX;
            double score = p < cur ? (double)(cur - p) / (double)(g->recompute_flops + 1) : p == cur ? 0 : -1;
            if (score > pick_score || (pick < 0 && score == 0)) {
                ck_graph_free(pick_g);
                pick = k, pick_score = score, pick_g = g;
            } else {
                ck_graph_free(g);
            }
        }
        if (pick_score <= 0 && swap(s, o, b, on, &cur, w, taken)) { /* nothing lowers the peak: a swap may */
            ck_graph_free(pick_g);
            if (w->stopped) return;
            continue;
        }
        if (pick < 0) break;
        on[pick] = true;
        cur = pick_g->plan.arena_bytes;
        if (visit(w, pick_g, on, b->n, taken)) return;
    }
}

static void walk_prefixes(const search *s, const ck_options *o, bcands *b, walker *w, bool *on) {
    int *len = malloc(sizeof(int) * (CK_CURVE_MAX + 2)), m = prefix_lengths(b->n, len);
    CK_ASSERT(len);
    for (int i = 1; i < m; i++) {
        for (int j = 0; j < b->n; j++) on[b->order[j]] = j < len[i];
        ck_graph *g = NULL;
        if (!plan_set(s, o, b, on, &g)) {
            ck_graph_free(g);
            continue;
        }
        if (visit(w, g, on, b->n, len[i])) break;
    }
    free(len);
}

/* The walk, then, when nothing on it fit the budget (or for the curve), every segment and no
 * op-level candidate: the plan an order ranking op-level candidates first may never reach. */
static void walk(const search *s, const ck_options *o, bcands *b, int64_t none_peak, walker *w) {
    bool *on = calloc((size_t)b->n + 1, 1);
    CK_ASSERT(on);
    if (b->n <= CK_GREEDY_MAX) walk_greedy(s, o, b, none_peak, w, on);
    else walk_prefixes(s, o, b, w, on);
    if (!w->hit && b->n > b->n_op) {
        for (int k = 0; k < b->n; k++) on[k] = k >= b->n_op;
        ck_graph *g = NULL;
        if (plan_set(s, o, b, on, &g)) visit(w, g, on, b->n, b->n - b->n_op);
        else ck_graph_free(g);
    }
    free(on);
}

/* Reverse delete: the set on[] fits; each of its candidates, the costliest first (at most
 * CK_PRUNE_TRIES), is dropped when the plan without it still fits with fewer FLOPs; then, with at
 * most CK_GREEDY_MAX candidates, one-for-one swaps while one fits with fewer FLOPs. *best: the
 * last plan that fitted. */
#define CK_PRUNE_TRIES 24
static void prune(const search *s, const ck_options *o, bcands *b, bool *on, ck_graph **best) {
    ranked *r = malloc(sizeof *r * ((size_t)b->n + 1));
    CK_ASSERT(r);
    int k = 0;
    for (int j = 0; j < b->n; j++)
        if (on[j]) r[k++] = (ranked){(double)b->flops[j], j};
    qsort(r, (size_t)k, sizeof *r, by_score);
    for (int j = 0; j < k && j < CK_PRUNE_TRIES; j++) {
        on[r[j].k] = false;
        ck_graph *g = NULL;
        if (plan_set(s, o, b, on, &g) && g->plan.arena_bytes <= o->budget && g->recompute_flops < (*best)->recompute_flops) {
            ck_graph_free(*best);
            *best = g;
        } else {
            on[r[j].k] = true;
            ck_graph_free(g);
        }
    }
    free(r);
    if (b->n > CK_GREEDY_MAX) return;
    /* then swaps, one out and one in, while one fits with fewer FLOPs (small candidate sets) */
    for (bool better = true; better;) {
        better = false;
        for (int t = 0; t < b->n && !better; t++) {
            if (!on[t]) continue;
            for (int u = 0; u < b->n && !better; u++) {
                if (on[u]) continue;
                on[t] = false, on[u] = true;
                ck_graph *g = NULL;
                if (plan_set(s, o, b, on, &g) && g->plan.arena_bytes <= o->budget && g->recompute_flops < (*best)->recompute_flops) {
                    ck_graph_free(*best);
                    *best = g, better = true;
                } else {
                    on[t] = true, on[u] = false;
                    ck_graph_free(g);
                }
            }
        }
    }
}

/* budget:SIZE cannot be met: the smallest peak reached (m), and what holds it. */
static void budget_missed(const ck_options *o, const ck_graph *m, int64_t none_peak, ck_diag *d) {
    ck_diag_add(d, "budget:%lld cannot be met: the smallest planned peak ckptc reaches is %lld bytes (no recompute: %lld)%s",
                (long long)o->budget, (long long)m->plan.arena_bytes, (long long)none_peak, o->offload ? "" : "; --offload may lower it");
    const ck_mem_plan *p = &m->plan;
    ck_diag_add(d, "at that peak (step %d, '%s'): params %lld, grads %lld, optimizer state %lld, activations %lld, workspace %lld bytes",
                p->peak_step, m->n_nodes ? m->nodes[p->peak_step]->name : "", (long long)p->bytes[CK_MEM_PARAMS],
                (long long)p->bytes[CK_MEM_GRADS], (long long)p->bytes[CK_MEM_OPT_STATE], (long long)p->bytes[CK_MEM_ACTIVATIONS],
                (long long)p->bytes[CK_MEM_WORKSPACE]);
    for (int i = 0, shown = 0; i < m->n_values && shown < 5; i++) {
        const ck_value *v = m->values[i];
        if (!v->producer || v->alias || v->host || v->live_first > p->peak_step || v->live_last < p->peak_step) continue;
        if ((int64_t)ck_value_bytes(v) * 20 < p->bytes[CK_MEM_ACTIVATIONS]) continue; /* the big ones */
        ck_diag_add(d, "  live at the peak: '%s' (%lld bytes) from '%s'", v->name, (long long)ck_value_bytes(v), v->producer->name);
        shown++;
    }
}

static ck_status plan_budget(const search *s, ck_options *o, ck_graph **out, ck_diag *d) {
    ck_options t = *o;
    t.checkpoint = CK_CKPT_NONE, t.selective = false;
    ck_graph *best = NULL;
    ck_status st = plan_try(s, &t, &best, d);
    *out = best;
    if (st || best->plan.arena_bytes <= o->budget) {
        if (!st) ck_diag_add(s->notes, "ckptc: budget %lld bytes: met without recompute (peak %lld)", (long long)o->budget,
                             (long long)best->plan.arena_bytes);
        return st;
    }
    int64_t none_peak = best->plan.arena_bytes;
    budget_segments(s, o);
    bcands b;
    st = bcands_init(s->trained, o, &b, d);
    walker w = {.budget = o->budget, .hit_on = calloc((size_t)b.n + 1, 1)};
    CK_ASSERT(w.hit_on);
    if (!st) walk(s, o, &b, none_peak, &w);
    if (w.hit) {
        ck_graph_free(best);
        best = w.hit;
        prune(s, o, &b, w.hit_on, &best);
    }
    if (!st && !w.hit) {
        budget_missed(o, w.smallest && w.smallest->plan.arena_bytes < best->plan.arena_bytes ? w.smallest : best, none_peak, d);
        st = CK_ERR_USAGE;
    } else if (!st) {
        ck_diag_add(s->notes, "ckptc: budget %lld bytes: recomputing %d segments and %d activations op-level (of %d candidates), "
                    "%lld FLOPs; planned peak %lld (no recompute: %lld)", (long long)o->budget, best->n_segments,
                    best->n_selective, b.n, (long long)best->recompute_flops, (long long)best->plan.arena_bytes, (long long)none_peak);
    }
    ck_graph_free(w.smallest);
    free(w.hit_on);
    bcands_free(&b);
    *out = best;
    return st;
}

/* ---------------------------------------------------------------- the trade-off curve */

ck_status ck_plan_curve(const ck_graph *trained, const ck_options *o, ck_curve *c, ck_diag *d) {
    memset(c, 0, sizeof *c);
    search s = {.trained = trained};
    ck_options seg = *o;
    budget_segments(&s, &seg);
    o = &seg;
    bcands b;
    ck_status st = bcands_init(trained, o, &b, d);
    if (st) return st;
    ck_options t = *o;
    t.checkpoint = CK_CKPT_NONE, t.selective = false;
    ck_graph *g = NULL;
    c->pt = calloc((size_t)b.n + CK_CURVE_MAX + 2, sizeof *c->pt);
    CK_ASSERT(c->pt);
    c->n_candidates = b.n;
    walker w = {.budget = -1, .curve = c};
    if (plan_quietly(&s, &t, &g)) {
        int64_t none_peak = g->plan.arena_bytes;
        visit(&w, g, NULL, 0, 0);
        walk(&s, o, &b, none_peak, &w);
    } else {
        ck_graph_free(g);
    }
    ck_graph_free(w.smallest);
    bcands_free(&b);
    return CK_OK;
}

/* Every subset of the candidates planned (at most max, and 20): c->pt[mask] is the plan of the
 * subset whose bits mask sets (candidates numbered as the search numbers them). For the tests
 * that hold the search against the optimum. */
ck_status ck_budget_subsets(const ck_graph *trained, const ck_options *o, int max, ck_curve *c, ck_diag *d) {
    memset(c, 0, sizeof *c);
    search s = {.trained = trained};
    ck_options seg = *o;
    budget_segments(&s, &seg);
    o = &seg;
    bcands b;
    ck_status st = bcands_init(trained, o, &b, d);
    if (st) return st;
    c->n_candidates = b.n;
    if (b.n > max || b.n > 20) {
        bcands_free(&b);
        ck_diag_add(d, "ck_budget_subsets: %d candidates, at most %d", c->n_candidates, max < 20 ? max : 20);
        return CK_ERR_USAGE;
    }
    bool *on = calloc((size_t)b.n + 1, 1);
    c->pt = calloc((size_t)1 << b.n, sizeof *c->pt);
    CK_ASSERT(on && c->pt);
    for (uint32_t mask = 0; mask < (1u << b.n); mask++) {
        for (int k = 0; k < b.n; k++) on[k] = mask >> k & 1;
        ck_options t = bcands_try(&b, o, on);
        ck_graph *g = NULL;
        ck_curve_point *p = &c->pt[c->n++];
        *p = (ck_curve_point){.peak = -1, .candidates = __builtin_popcount(mask)};
        if (plan_quietly(&s, &t, &g))
            p->peak = g->plan.arena_bytes, p->flops = g->recompute_flops, p->segments = g->n_segments, p->selective = g->n_selective;
        ck_graph_free(g);
    }
    free(on);
    bcands_free(&b);
    return CK_OK;
}

/* ---------------------------------------------------------------- --offload */

/* --offload must never raise the device peak: the placement heuristic can lose a few bytes to
 * fragmentation that the shorter lifetimes do not win back; then keep the checkpoints on the
 * device. */
static void plan_offload(const search *s, ck_options *o, ck_graph **g) {
    ck_options keep = *o;
    keep.offload = false;
    ck_graph *g2 = NULL;
    if (plan_quietly(s, &keep, &g2) && g2->plan.arena_bytes < (*g)->plan.arena_bytes) {
        ck_diag_add(s->notes, "ckptc: --offload would raise the planned device peak (%lld > %lld bytes); the checkpoints stay on "
                    "the device", (long long)(*g)->plan.arena_bytes, (long long)g2->plan.arena_bytes);
        ck_graph_free(*g);
        *g = g2;
        g2 = NULL;
        o->offload = false; /* the later tries (trim_blocks, data parallel) plan what was chosen */
    }
    ck_graph_free(g2);
}

/* ---------------------------------------------------------------- --data-parallel */

/* --data-parallel without --dp-bucket: when a communication staging is live at the peak (they
 * live while gradients pile up, so after checkpointing they often are), halve the bucket while
 * that lowers the planned peak: more, smaller messages instead of more memory. The largest bucket
 * reaching the lowest peak is kept (not below 64 KiB). Each try is a full plan, so fragmentation
 * is counted. Writes the line saying so into msg ("" when the bucket stayed). */
static void fit_dp_bucket(const search *s, const ck_options *o, ck_graph **g, char *msg, size_t n) {
    msg[0] = 0;
    if (!o->data_parallel || o->dp_bucket_bytes || o->checkpoint == CK_CKPT_BUDGET || !(*g)->loss) return;
    const ck_node *ar = NULL;
    int64_t bucket = 0;
    for (int i = 0; i < (*g)->n_nodes; i++) {
        const ck_node *nd = (*g)->nodes[i];
        if (nd->op != CK_OP_GRAD_ALLREDUCE) continue;
        if (4 * ck_attr_int(nd, "staging_floats", 0) > bucket) bucket = 4 * ck_attr_int(nd, "staging_floats", 0);
        if (i <= (*g)->plan.peak_step && (*g)->plan.peak_step <= nd->ws_last) ar = nd;
    }
    if (!ar) return;
    ck_options t = *o;
    t.offload = o->offload && (*g)->plan.host_bytes > 0; /* as plan_offload settled it */
    int64_t first_peak = (*g)->plan.arena_bytes, first_bucket = bucket;
    while (bucket / 2 >= (64 << 10)) {
        t.dp_bucket_bytes = bucket / 2;
        ck_graph *g2 = NULL;
        if (!plan_quietly(s, &t, &g2) || g2->plan.arena_bytes >= (*g)->plan.arena_bytes) {
            ck_graph_free(g2);
            break;
        }
        ck_graph_free(*g);
        *g = g2;
        bucket /= 2;
    }
    if (bucket != first_bucket)
        snprintf(msg, n, "ckptc: --data-parallel: the all-reduce staging held the peak; bucket %lld bytes instead of %lld: planned "
                 "peak %lld bytes instead of %lld (--dp-bucket SIZE to choose)", (long long)bucket, (long long)first_bucket,
                 (long long)(*g)->plan.arena_bytes, (long long)first_peak);
}

/* --data-parallel: the bucket size (fit_dp_bucket), then with --dp-overlap=auto the overlapped
 * schedule (each bucket averaged as soon as its gradients are final) unless all buckets after the
 * backward plan a lower peak (their stagings then meet no activations). Each variant is full
 * plans with its own bucket fit; what was chosen is noted. */
static void plan_data_parallel(const search *s, const ck_options *o, ck_graph **g) {
    char fit[300], fit2[300];
    fit_dp_bucket(s, o, g, fit, sizeof fit);
    if (o->data_parallel && o->dp_overlap < 0 && o->checkpoint != CK_CKPT_BUDGET && (*g)->loss) {
        ck_options t = *o;
        t.offload = o->offload && (*g)->plan.host_bytes > 0; /* as plan_offload settled it */
        t.dp_overlap = 0;
        ck_graph *g2 = NULL;
        if (plan_quietly(s, &t, &g2)) {
            fit_dp_bucket(s, &t, &g2, fit2, sizeof fit2);
            if (g2->plan.arena_bytes < (*g)->plan.arena_bytes) {
                if (fit2[0]) ck_diag_add(s->notes, "%s", fit2);
                ck_diag_add(s->notes, "ckptc: --data-parallel: averaging each bucket during the backward would raise the planned "
                            "peak (%lld > %lld bytes); the buckets are averaged after the backward (--dp-overlap=on to overlap "
                            "anyway)", (long long)(*g)->plan.arena_bytes, (long long)g2->plan.arena_bytes);
                fit[0] = 0;
                ck_graph_free(*g);
                *g = g2;
                g2 = NULL;
            }
        }
        ck_graph_free(g2);
    }
    if (fit[0]) ck_diag_add(s->notes, "%s", fit);
}

/* --clip-grad-norm: the plan with early updates, for the note on what clipping costs. */
static void note_clip_cost(const search *s, const ck_options *o, const ck_graph *g) {
    ck_options t = *o;
    t.update_at_end = false, t.clip_grad_norm = 0;
    t.offload = o->offload && g->plan.host_bytes > 0;
    ck_graph *g2 = NULL;
    if (plan_quietly(s, &t, &g2))
        ck_diag_add(s->notes, "ckptc: --clip-grad-norm: the global norm needs every gradient before the first update, so every "
                    "update runs after the backward: planned peak %lld bytes, %lld more than with each update as soon as its "
                    "gradient is final (%lld)", (long long)g->plan.arena_bytes, (long long)(g->plan.arena_bytes - g2->plan.arena_bytes),
                    (long long)g2->plan.arena_bytes);
    ck_graph_free(g2);
}

/* ---------------------------------------------------------------- the search */

/* blocks without --block-regex: the units the scope names give and the units the graph repeats
 * (checkpoint.c) are both planned; the lower peak wins (ties: the names). Sets
 * o->blocks_by_structure to the choice, for the tries after it. */
static void plan_blocks(const search *s, ck_options *o, ck_graph **g) {
    ck_options t = *o;
    t.blocks_by_structure = true;
    ck_graph *g2 = NULL;
    int units = ck_checkpoint_units(s->trained);
    if (plan_quietly(s, &t, &g2) && g2->plan.arena_bytes < (*g)->plan.arena_bytes) {
        if (units)
            ck_diag_add(s->notes, "ckptc: --checkpoint=blocks: the units the graph repeats (%d kind%s; %d segments recomputed) plan a lower peak "
                        "than the module scopes in node names (%lld < %lld bytes): segmented by structure", units, units == 1 ? "" : "s", g2->n_segments,
                        (long long)g2->plan.arena_bytes, (long long)(*g)->plan.arena_bytes);
        else
            ck_diag_add(s->notes, "ckptc: --checkpoint=blocks: the graph repeats no unit and its node names carry no useful blocks: "
                        "the sqrt segmentation (%d segments recomputed, %lld < %lld bytes)", g2->n_segments, (long long)g2->plan.arena_bytes,
                        (long long)(*g)->plan.arena_bytes);
        ck_graph_free(*g);
        *g = g2;
        g2 = NULL;
        o->blocks_by_structure = true;
    }
    ck_graph_free(g2);
    g2 = NULL;
    /* units of one or two layers (VGG's features.N, a stack of convolutions) make segments too
     * short to pay: the cut-point chunks grouped into about sqrt(n) runs, kept when lower */
    t = *o;
    t.blocks_by_structure = true, t.blocks_grouped = true;
    if (units && plan_quietly(s, &t, &g2) && g2->plan.arena_bytes < (*g)->plan.arena_bytes) {
        /* grouped runs recompute more: what the other plan recomputes (before trim_blocks, which only
         * lowers it) is said, and the flag that trades the peak for it */
        char other[160] = "";
        if (!s->capped && g2->recompute_flops > (*g)->recompute_flops)
            snprintf(other, sizeof other, "; that plan recomputes up to %.1f%% of the forward's FLOPs: --max-recompute trades "
                     "peak for less recompute", cap_percent(s, *g));
        ck_diag_add(s->notes, "ckptc: --checkpoint=blocks: its layers grouped into about sqrt(n) runs between cut points (%d segments "
                    "recomputed) plan a lower peak than one segment per unit the graph repeats (%d kind%s) or per module scope "
                    "(%lld < %lld bytes%s)", g2->n_segments, units, units == 1 ? "" : "s", (long long)g2->plan.arena_bytes,
                    (long long)(*g)->plan.arena_bytes, other);
        ck_graph_free(*g);
        *g = g2;
        g2 = NULL;
        o->blocks_by_structure = true, o->blocks_grouped = true;
    } else if ((*g)->n_segments == 0) {
        ck_diag_add(s->notes, "ckptc: --checkpoint=blocks: no segmentation lowers the planned peak (module scopes, %d repeated "
                    "units, sqrt): nothing is recomputed", units);
    }
    ck_graph_free(g2);
}

/* Whether segment s's recompute starts after g's peak step (its first clone; op-level clones of
 * its nodes count too, which only makes this say no more often). Kept instead, its activations
 * would be live from the forward across that step, which raises the peak whenever the placement
 * has less slack than they need: so such a segment is not tried (a large graph's plan takes
 * seconds, and its peak usually comes early in the backward). */
static bool recomputed_after_peak(const ck_graph *g, const ck_ckpt_candidates *cc, int s) {
    for (int i = 0; i < g->n_nodes; i++) {
        int f = g->nodes[i]->recompute_of - 1;
        if (f >= 0 && f < cc->n_ids && cc->node_seg[f] == s) return i > g->plan.peak_step;
    }
    return false;
}

/* The segments of o's segmentation (into *cc, which the caller frees) that trim_blocks and
 * cap_trim may keep instead of recomputing: *on (malloc'd) starts as start (NULL: every segment
 * recomputed); *r (malloc'd) lists the recomputed ones with recompute FLOPs (bytes 0: the last
 * segment, never recomputed), the most FLOPs (per_byte: per byte freed) first. Returns how many,
 * or -1 (nothing allocated) when there are fewer than min_n segments. */
static int rank_segments(const search *s, const ck_options *o, int min_n, const bool *start, bool per_byte,
                         ck_ckpt_candidates *cc, bool **on, ranked **r) {
    ck_diag quiet = {0};
    bool bad = ck_checkpoint_candidates(s->trained, o, cc, &quiet) || cc->n < min_n;
    ck_diag_clear(&quiet);
    if (bad) {
        ck_checkpoint_candidates_free(cc);
        return -1;
    }
    *on = malloc((size_t)cc->n);
    *r = malloc(sizeof **r * (size_t)cc->n);
    CK_ASSERT(*on && *r);
    int k = 0;
    for (int j = 0; j < cc->n; j++) {
        (*on)[j] = start && j < o->n_recompute_set ? start[j] : true;
        if ((*on)[j] && cc->bytes[j] > 0 && cc->flops[j] > 0)
            (*r)[k++] = (ranked){(double)cc->flops[j] / (per_byte ? (double)cc->bytes[j] : 1.0), j};
    }
    qsort(*r, (size_t)k, sizeof **r, by_score);
    return k;
}

/* blocks recomputes only what lowers the peak. With the segmentation chosen, each recomputed
 * segment, the most recompute FLOPs first, is left out (its activations kept, as the last
 * segment's are) when the plan without it is no higher than the plan recomputing every segment:
 * late segments of a convnet (few, small activations, as many FLOPs as the early ones) and
 * segments whose backward comes before the peak cost time and free nothing that matters. At
 * most CK_TRIM_TRIES plans, none for a segment recomputed after the peak step.
 * *set (the caller frees it) becomes o->recompute_set. */
#define CK_TRIM_TRIES 32
static void trim_blocks(const search *s, ck_options *o, ck_graph **g, bool **set) {
    ck_ckpt_candidates cc;
    bool *on;
    ranked *r;
    int k = (*g)->n_segments == 0 ? -1 : rank_segments(s, o, 2, NULL, false, &cc, &on, &r);
    if (k < 0) return;
    int64_t peak = (*g)->plan.arena_bytes, before = (*g)->recompute_flops;
    int segs = (*g)->n_segments, left = 0;
    ck_options t = *o;
    t.recompute_set = on, t.n_recompute_set = cc.n;
    for (int j = 0, tries = 0; j < k && tries < CK_TRIM_TRIES; j++) {
        if (recomputed_after_peak(*g, &cc, r[j].k)) continue;
        tries++;
        on[r[j].k] = false;
        ck_graph *g2 = NULL;
        if (plan_quietly(s, &t, &g2) && g2->plan.arena_bytes <= peak && g2->recompute_flops < (*g)->recompute_flops) {
            ck_graph_free(*g);
            *g = g2;
            left++;
        } else {
            on[r[j].k] = true;
            ck_graph_free(g2);
        }
    }
    free(r);
    ck_checkpoint_candidates_free(&cc);
    if (!left) {
        free(on);
        return;
    }
    *set = on;
    o->recompute_set = on, o->n_recompute_set = t.n_recompute_set;
    ck_diag_add(s->notes, "ckptc: --checkpoint=blocks: %d of %d segments kept instead of recomputed: recomputing them does not lower the "
                "planned peak (%lld bytes); recompute %.3g -> %.3g GFLOP a step", left, segs, (long long)(*g)->plan.arena_bytes,
                (double)before * 1e-9, (double)(*g)->recompute_flops * 1e-9);
}

/* --max-recompute, on one segmentation: segments are kept instead of recomputed (their
 * activations live from the forward to their backward) until the plan is within the cap, the most
 * recompute FLOPs per byte they free first: as many as their FLOPs say are needed in one plan,
 * then more while the plan still says over (at most CK_CAP_TRIES plans). Starts from *set
 * (trim_blocks' choice) when there is one; *set (the caller frees it) becomes o->recompute_set. */
#define CK_CAP_TRIES 16
static void cap_trim(const search *s, ck_options *o, ck_graph **g, bool **set) {
    if (within_cap(s, *g) || (*g)->n_segments == 0) return;
    ck_ckpt_candidates cc;
    bool *on;
    ranked *r;
    int k = rank_segments(s, o, 1, *set, true, &cc, &on, &r);
    if (k < 0) return;
    ck_options t = *o;
    t.recompute_set = on, t.n_recompute_set = cc.n;
    int next = 0;
    for (int tries = 0; !within_cap(s, *g) && next < k && tries < CK_CAP_TRIES; tries++) {
        int from = next;
        int64_t excess = (*g)->recompute_flops - s->cap, freed = 0;
        do {
            freed += cc.flops[r[next].k];
            on[r[next++].k] = false;
        } while (next < k && freed < excess);
        ck_graph *g2 = NULL;
        if (!plan_quietly(s, &t, &g2)) {
            ck_graph_free(g2);
            while (next > from) on[r[--next].k] = true;
            break;
        }
        ck_graph_free(*g);
        *g = g2;
    }
    free(r);
    ck_checkpoint_candidates_free(&cc);
    if (!next) {
        free(on);
        return;
    }
    free(*set);
    *set = on;
    o->recompute_set = on, o->n_recompute_set = t.n_recompute_set;
}

/* --max-recompute, when the plan the policy chose recomputes more than the cap: each plan the
 * policy could have taken (blocks: module scopes, repeated units, grouped runs; POLICY,selective:
 * with and without op-level recompute) is fitted to the cap (blocks' trim_blocks, then cap_trim),
 * and the lowest peak within it wins. Without op-level recompute, a plan keeping every segment
 * recomputes nothing, so one always fits. *kept (the caller frees it) becomes o->recompute_set. */
static void fit_cap(const search *s, ck_options *o, ck_graph **g, bool **kept) {
    bool blocks = blocks_searched(o);
    int segmentations = !blocks ? 1 : ck_checkpoint_units(s->trained) ? 3 : 2;
    search quiet = *s;
    quiet.notes = NULL;
    ck_graph *best = NULL;
    bool *best_set = NULL;
    ck_options best_o = *o;
    for (int seg = 0; seg < segmentations; seg++) {
        for (int sel = 0; sel < (o->selective ? 2 : 1); sel++) {
            ck_options t = *o;
            t.recompute_set = NULL, t.n_recompute_set = 0;
            if (blocks) t.blocks_by_structure = seg > 0, t.blocks_grouped = seg == 2;
            if (sel) t.selective = false;
            ck_graph *g2 = NULL;
            bool *set = NULL;
            bool ok = plan_quietly(&quiet, &t, &g2);
            if (ok && blocks) trim_blocks(&quiet, &t, &g2, &set);
            if (ok) cap_trim(&quiet, &t, &g2, &set);
            if (ok && within_cap(s, g2) && (!best || g2->plan.arena_bytes < best->plan.arena_bytes)) {
                ck_graph_free(best), free(best_set);
                best = g2, best_set = set, best_o = t;
            } else {
                ck_graph_free(g2), free(set);
            }
        }
    }
    if (!best) {
        ck_diag_add(s->notes, "ckptc: --max-recompute %.3g%%: not met: no plan within it was found; the plan recomputes %.1f%% of "
                    "the forward", 100.0 * o->max_recompute, cap_percent(s, *g));
        return;
    }
    static const char *const kinds[] = {"the module scopes in node names", "the units the graph repeats", "grouped runs"};
    ck_diag_add(s->notes, "ckptc: --max-recompute %.3g%%: the policy's plan recomputes %.1f%% of the forward (planned peak %lld bytes); "
                "within the cap: %s%s, %d segment%s recomputed, %.1f%% (planned peak %lld bytes)", 100.0 * o->max_recompute,
                cap_percent(s, *g), (long long)(*g)->plan.arena_bytes, blocks ? kinds[best_o.blocks_grouped ? 2 : best_o.blocks_by_structure]
                : o->policy_name ? o->policy_name : "the policy's segments", o->selective && !best_o.selective ? ", no op-level recompute" : "",
                best->n_segments, best->n_segments == 1 ? "" : "s", cap_percent(s, best), (long long)best->plan.arena_bytes);
    ck_graph_free(*g);
    *g = best;
    free(*kept);
    *kept = best_set;
    *o = best_o; /* its recompute_set is best_set (trim_blocks and cap_trim set both), NULL when every segment is recomputed */
}

/* selective (alone or POLICY,selective) must never raise the planned peak: the greedy estimates
 * bytes, the placement decides. The plan without it is made too, and kept when lower. */
static void plan_selective(const search *s, ck_options *o, ck_graph **g) {
    bool both = blocks_searched(o); /* names and structure */
    int64_t with = (*g)->plan.arena_bytes;
    ck_options first = *o;
    for (int k = 0; k < (both ? 2 : 1); k++) {
        ck_options t = first;
        t.selective = false;
        if (k == 1) t.blocks_by_structure = !first.blocks_by_structure, t.blocks_grouped = false;
        ck_graph *g2 = NULL;
        if (plan_quietly(s, &t, &g2) && g2->plan.arena_bytes < (*g)->plan.arena_bytes) {
            ck_graph_free(*g);
            *g = g2;
            g2 = NULL;
            *o = t;
        }
        ck_graph_free(g2);
    }
    if (!o->selective)
        ck_diag_add(s->notes, "ckptc: selective: op-level recompute would raise the planned peak here (%lld > %lld bytes): "
                    "not applied", (long long)with, (long long)(*g)->plan.arena_bytes);
}

ck_status ck_plan_search(ck_graph **gp, const ck_options *opts, ck_check_fn check, ck_diag *notes, ck_diag *d) {
    ck_graph *trained = *gp, *g = NULL;
    search s = {.trained = trained, .check = check, .notes = notes, .fwd_flops = ck_forward_flops(trained)};
    if (opts->max_recompute > 0) s.capped = true, s.cap = (int64_t)(opts->max_recompute * (double)s.fwd_flops);
    ck_options oo = *opts, *o = &oo; /* what the search settles (the blocks' kind) goes on in it */
    if (one_try(o)) { /* no clone: nothing else to try */
        ck_status st = plan_passes(&s, trained, o, d);
        if (!st) ck_conv_lanes_note(trained, notes);
        return st;
    }
    ck_status st = o->checkpoint == CK_CKPT_BUDGET ? plan_budget(&s, o, &g, d) : plan_try(&s, o, &g, d);
    bool *kept = NULL; /* trim_blocks' or fit_cap's recompute_set, which later tries read through o */
    if (!st && blocks_searched(o) && !o->infer) plan_blocks(&s, o, &g);
    if (!st && o->selective && o->checkpoint != CK_CKPT_BUDGET && !o->infer) plan_selective(&s, o, &g);
    if (!st && o->offload && o->checkpoint != CK_CKPT_BUDGET) plan_offload(&s, o, &g);
    /* last of the choices that move the peak, so that it compares with the peak they settled on */
    if (!st && blocks_searched(o) && !o->recompute_set && !o->infer)
        trim_blocks(&s, o, &g, &kept); /* (a caller's recompute_set is kept as given) */
    if (!st && g && !within_cap(&s, g) && (!o->recompute_set || kept)) fit_cap(&s, o, &g, &kept);
    if (!st) plan_data_parallel(&s, o, &g);
    if (!st && o->clip_grad_norm > 0 && g && g->loss) note_clip_cost(&s, o, g);
    if (!st && g) ck_conv_lanes_note(g, notes);
    if (g) g->owned = trained; /* it shares the trained graph's data: freed with it */
    free(kept);
    *gp = g ? g : trained;
    return st;
}
