/* search.c — the plan search: the choices that only whole memory plans can decide.
 *
 * Whether a recompute set meets budget:SIZE, whether --offload lowers the device peak, which
 * gradient bucket and which bucket schedule plan the lowest peak: estimates cannot say, because
 * placement (fragmentation) moves the peak. So each candidate is planned for real: a try is a
 * clone of the trained graph (after loss, autodiff and optimizer, which none of these choices
 * changes) taken through checkpoint -> data_parallel -> early_update -> check -> plan, and the
 * search keeps the try whose planned peak wins. No try loads the model again. When there is
 * nothing to choose (no budget, no --offload, data parallel with its bucket and schedule given),
 * the one plan is made on the trained graph itself, without a clone.
 *
 *   budget:SIZE      candidates are the blocks policy's segments (cut points when names carry no
 *                    blocks), ordered by activation bytes per FLOP (most memory for the least
 *                    recompute first; ties in graph order). The recompute set is always a prefix
 *                    of that order: the shortest prefix whose plan fits, searched with full plans:
 *                    a first guess from the segments' byte counts, then bisection between a prefix
 *                    that does not fit and one that does. Peaks are not strictly monotone in the
 *                    prefix length (placement), so the bisection may stop at a slightly longer
 *                    prefix than the shortest; at most 9 plans in all (none, all, 7 tries).
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
 *                    the structural try is the sqrt segmentation.
 *   --clip-grad-norm  its updates run after the whole backward; a second plan with early updates
 *                    says what that costs (a note, nothing chosen).
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
} search;

/* The passes the search's choices change, on g (the trained graph or a clone of it). */
static ck_status plan_passes(const search *s, ck_graph *g, const ck_options *o, ck_diag *d) {
    ck_status st = CK_OK;
    if (!o->infer) st = ck_pass_checkpoint(g, o, d);
    if (!st && !o->infer) st = ck_pass_data_parallel(g, o, d);
    if (!st && !o->infer) st = ck_pass_early_update(g, o, d);
    if (!st) st = ck_graph_verify(g, d);
    if (!st && s->check) st = s->check(g, o, d); /* reject what cannot run before any planning */
    if (!st) st = ck_pass_plan(g, o, d);
    if (!st) st = ck_graph_verify(g, d);
    return st;
}

/* One try: a clone of the trained graph through those passes. */
static ck_status plan_try(const search *s, const ck_options *o, ck_graph **out, ck_diag *d) {
    *out = ck_graph_clone(s->trained);
    return plan_passes(s, *out, o, d);
}

/* Is there nothing to choose, so that one plan of the trained graph itself settles it? */
static bool one_try(const ck_options *o) {
    if (o->checkpoint == CK_CKPT_BUDGET || o->offload || o->clip_grad_norm > 0 || o->selective) return false;
    if (o->checkpoint == CK_CKPT_BLOCKS && !(o->block_regex && *o->block_regex)) return false; /* names or structure */
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

typedef struct ranked {
    double score; /* activation bytes per FLOP */
    int k;        /* the candidate */
} ranked;

static int by_score(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    return a->score > b->score ? -1 : a->score < b->score ? 1 : a->k - b->k;
}

/* order[0 .. c->n): candidates, most activation bytes per FLOP first, ties in graph order */
static int *rank_candidates(const ck_ckpt_candidates *c) {
    ranked *r = malloc(sizeof *r * (size_t)(c->n + 1));
    int *order = malloc(sizeof(int) * (size_t)(c->n + 1));
    CK_ASSERT(r && order);
    for (int k = 0; k < c->n; k++) r[k] = (ranked){(double)c->bytes[k] / (double)(c->flops[k] + 1), k};
    qsort(r, (size_t)c->n, sizeof *r, by_score);
    for (int k = 0; k < c->n; k++) order[k] = r[k].k;
    free(r);
    return order;
}

/* The shortest prefix of order that fits, searched with the real planner as judge: the first
 * guess covers the excess with the segments' own byte counts, then bisection between a prefix
 * that does not fit (none: 0) and one that does (all: n). A recompute set is a prefix, so a
 * larger budget never gets a longer one; at most 7 plans. *best becomes the fitting plan found
 * (if any); returns the prefix length chosen (0: none fitted). */
static int bisect_prefix(const search *s, const ck_options *o, const ck_ckpt_candidates *c, const int *order, int64_t none_peak,
                         ck_graph **best) {
    int nc = c->n, chosen = 0, no_fit = 0, fit = nc, k = 0;
    bool *set = calloc((size_t)nc + 1, 1);
    CK_ASSERT(set);
    int64_t freed = 0, need = none_peak - o->budget;
    while (k < nc && freed < need) freed += c->bytes[order[k++]];
    for (int round = 0; round < 7 && fit - no_fit > 1; round++) {
        if (round > 0 || k <= no_fit || k >= fit) k = no_fit + (fit - no_fit) / 2;
        for (int j = 0; j < nc; j++) set[order[j]] = j < k;
        ck_options t = *o;
        t.recompute_set = set, t.n_recompute_set = nc;
        ck_graph *g = NULL;
        if (plan_quietly(s, &t, &g) && g->plan.arena_bytes <= o->budget) {
            ck_graph_free(*best);
            *best = g;
            chosen = fit = k;
        } else {
            no_fit = k;
            ck_graph_free(g);
        }
    }
    free(set);
    return chosen;
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

static ck_status plan_budget(const search *s, const ck_options *o, ck_graph **out, ck_diag *d) {
    ck_options t = *o;
    t.checkpoint = CK_CKPT_NONE;
    ck_graph *best = NULL, *all = NULL;
    ck_status st = plan_try(s, &t, &best, d);
    *out = best;
    if (st || best->plan.arena_bytes <= o->budget) {
        if (!st) ck_diag_add(s->notes, "ckptc: budget %lld bytes: met without recompute (peak %lld)", (long long)o->budget,
                             (long long)best->plan.arena_bytes);
        return st;
    }
    int64_t none_peak = best->plan.arena_bytes;
    ck_ckpt_candidates c;
    st = ck_checkpoint_candidates(s->trained, o, &c, d);
    if (!st) st = plan_try(s, o, &all, d); /* every candidate recomputed */
    if (st) {
        ck_graph_free(best);
        ck_checkpoint_candidates_free(&c);
        *out = all;
        return st;
    }
    int nc = c.n, chosen = 0;
    int *order = rank_candidates(&c);
    if (all->plan.arena_bytes <= o->budget) chosen = bisect_prefix(s, o, &c, order, none_peak, &best);
    if (all->plan.arena_bytes < best->plan.arena_bytes && best->plan.arena_bytes > o->budget && all->plan.arena_bytes <= o->budget) {
        ck_graph_free(best);
        best = all;
        all = NULL;
        chosen = nc;
    }
    if (best->plan.arena_bytes > o->budget) {
        budget_missed(o, all && all->plan.arena_bytes < best->plan.arena_bytes ? all : best, none_peak, d);
        st = CK_ERR_USAGE;
    } else {
        ck_diag_add(s->notes, "ckptc: budget %lld bytes: recomputing %d of %d segments; planned peak %lld (no recompute: %lld)",
                    (long long)o->budget, chosen, nc, (long long)best->plan.arena_bytes, (long long)none_peak);
    }
    ck_graph_free(all);
    free(order);
    ck_checkpoint_candidates_free(&c);
    *out = best;
    return st;
}

/* ---------------------------------------------------------------- --offload */

/* --offload must never raise the device peak: the placement heuristic can lose a few bytes to
 * fragmentation that the shorter lifetimes do not win back; then keep the checkpoints on the
 * device. */
static void plan_offload(const search *s, const ck_options *o, ck_graph **g) {
    ck_options keep = *o;
    keep.offload = false;
    ck_graph *g2 = NULL;
    if (plan_quietly(s, &keep, &g2) && g2->plan.arena_bytes < (*g)->plan.arena_bytes) {
        ck_diag_add(s->notes, "ckptc: --offload would raise the planned device peak (%lld > %lld bytes); the checkpoints stay on "
                    "the device", (long long)(*g)->plan.arena_bytes, (long long)g2->plan.arena_bytes);
        ck_graph_free(*g);
        *g = g2;
        g2 = NULL;
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
    } else if ((*g)->n_segments == 0) {
        ck_diag_add(s->notes, "ckptc: --checkpoint=blocks: no segmentation lowers the planned peak (module scopes, %d repeated "
                    "units, sqrt): nothing is recomputed", units);
    }
    ck_graph_free(g2);
}

/* selective (alone or POLICY,selective) must never raise the planned peak: the greedy estimates
 * bytes, the placement decides. The plan without it is made too, and kept when lower. */
static void plan_selective(const search *s, ck_options *o, ck_graph **g) {
    bool both = o->checkpoint == CK_CKPT_BLOCKS && !(o->block_regex && *o->block_regex); /* names and structure */
    int64_t with = (*g)->plan.arena_bytes;
    ck_options first = *o;
    for (int k = 0; k < (both ? 2 : 1); k++) {
        ck_options t = first;
        t.selective = false;
        if (k == 1) t.blocks_by_structure = !first.blocks_by_structure;
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
    search s = {.trained = trained, .check = check, .notes = notes};
    ck_options oo = *opts, *o = &oo; /* what the search settles (the blocks' kind) goes on in it */
    if (one_try(o)) return plan_passes(&s, trained, o, d); /* no clone: nothing else to try */
    ck_status st = o->checkpoint == CK_CKPT_BUDGET ? plan_budget(&s, o, &g, d) : plan_try(&s, o, &g, d);
    if (!st && o->checkpoint == CK_CKPT_BLOCKS && !(o->block_regex && *o->block_regex) && !o->infer) plan_blocks(&s, o, &g);
    if (!st && o->selective && o->checkpoint != CK_CKPT_BUDGET && !o->infer) plan_selective(&s, o, &g);
    if (!st && o->offload && o->checkpoint != CK_CKPT_BUDGET) plan_offload(&s, o, &g);
    if (!st) plan_data_parallel(&s, o, &g);
    if (!st && o->clip_grad_norm > 0 && g && g->loss) note_clip_cost(&s, o, g);
    if (g) g->owned = trained; /* it shares the trained graph's data: freed with it */
    *gp = g ? g : trained;
    return st;
}
