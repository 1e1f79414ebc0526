/* selective.c — op-level recompute (--checkpoint=selective, and X,selective with a segment policy).
 *
 * Segment policies (checkpoint.c) recompute whole stretches of the forward. Selective recompute
 * works on single activations instead, as Megatron's selective activation recompute and PyTorch's
 * min-cut partitioner do: the outputs of the GEMMs (Gemm, MatMul with a parameter operand, Conv)
 * are kept, and an activation the backward reads is recomputed from them when that frees memory:
 * elementwise ops, norms, softmax, GELU, casts and copies, Dropout (its mask comes again from the
 * counter RNG, keyed by the forward node's id), BatchNormalization as ckptc.BatchNormApply (the
 * forward's batch statistics; the running statistics are never touched twice), and the attention
 * products (MatMul of two activations: QK^T and PV), which cost a few percent of a transformer
 * layer's FLOPs and free its largest tensors.
 *
 * The choice is greedy over the activations the backward reads, latest first, repeated until
 * nothing changes: recomputing v means walking back from v through recomputable producers until
 * values that stay anyway (kept activations, parameters, constants) or that cannot be recomputed
 * (GEMM outputs, stateful ops) — the cone of v. Its gain is v's bytes (its storage root's, when
 * it is a view and no other kept activation shares that root); its cost the bytes of the cone's
 * stops that were not kept before. v is recomputed when the gain is larger. Each chosen v is a
 * candidate for the budget search (search.c): any subset of the candidates is a valid rewrite,
 * because the rewrite decides from the final kept set alone.
 *
 * The rewrite: before the first backward node reading a recomputed value, clones of its cone's
 * nodes run (in forward order, each once), reading kept values and other clones; every later
 * backward reader reads the clone. The forward's copy then dies at its last forward use.
 */
#include "ck_passes.h"

#include <stdlib.h>
#include <string.h>

#define CONE_MAX 256 /* nodes in one cone: longer chains are not recomputed */

typedef struct sel {
    const ck_graph *g;
    const ck_options *o;
    int nf, nid;
    bool *fwd_val;   /* per value id: produced by a forward node */
    bool *read_bwd;  /* per value id: read by a node after the forward */
    bool *kept;      /* per value id: stays live for the backward (the state of the greedy) */
    int *root_refs;  /* per root value id: how many kept values have that storage root */
    int *mark;       /* per value id: visited by the cone walk numbered mark */
    int walk;
} sel;

static bool is_view(const sel *s, const ck_node *n) { return ck_node_is_view(n, s->o); }

/* The value whose bytes v occupies (v itself unless it is a view). */
static const ck_value *root_of(const sel *s, const ck_value *v) {
    while (v->producer && v->id < s->nid && s->fwd_val[v->id] && is_view(s, v->producer)) v = v->producer->in[0];
    return v;
}

static bool has_param_input(const ck_node *n) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] && !n->in[k]->producer) return true;
    return false;
}

/* Can a forward node be rerun in the backward, giving the same bits? */
static bool recomputable(const ck_node *n) {
    unsigned fl = ck_ops[n->op].flags;
    if (n->op == CK_OP_BATCH_NORM) return n->n_out >= 5 && n->out[3] && n->out[4]; /* as BatchNormApply */
    if (!(fl & CK_OPF_RECOMPUTABLE) || (fl & CK_OPF_STATEFUL)) return false;
    if ((fl & CK_OPF_RANDOM) && n->op != CK_OP_DROPOUT) return false;
    if (n->op == CK_OP_GEMM || n->op == CK_OP_CONV) return false;
    if (n->op == CK_OP_MATMUL) return !has_param_input(n); /* attention products only */
    return true;
}

/* Is v static for the backward (no forward producer: params, inputs, constants)? */
static bool is_static(const sel *s, const ck_value *v) { return !v->producer || v->id >= s->nid || !s->fwd_val[v->id]; }

/* The cone walk from value u: stops (values the clones would read that are not kept now) go to
 * stops[]; returns false when the cone is too large. Marks visited values with s->walk. */
static bool cone(sel *s, const ck_value *u, bool top, const ck_value **stops, int *nstops, int *nodes, int64_t *flops) {
    if (is_static(s, u) || s->mark[u->id] == s->walk) return true;
    s->mark[u->id] = s->walk;
    if (!top && s->kept[u->id]) return true;
    const ck_node *p = u->producer;
    if (!recomputable(p) || (p->op == CK_OP_BATCH_NORM && u != p->out[0])) {
        stops[(*nstops)++] = u;
        return true;
    }
    if (++*nodes > CONE_MAX) return false;
    *flops += ck_node_flops(p);
    int n_in = p->op == CK_OP_BATCH_NORM ? 3 : p->n_in;
    for (int k = 0; k < n_in; k++)
        if (p->in[k] && !cone(s, p->in[k], false, stops, nstops, nodes, flops)) return false;
    if (p->op == CK_OP_BATCH_NORM) /* BatchNormApply reads the saved statistics: kept */
        for (int k = 3; k < 5; k++)
            if (!s->kept[p->out[k]->id] && s->mark[p->out[k]->id] != s->walk) s->mark[p->out[k]->id] = s->walk, stops[(*nstops)++] = p->out[k];
    return true;
}

static void keep(sel *s, const ck_value *v, int delta) {
    s->kept[v->id] = delta > 0;
    s->root_refs[root_of(s, v)->id] += delta;
}

/* Try recomputing v (kept now): true when chosen (s updated); *flops: its cone's. */
static bool try_value(sel *s, const ck_value *v, const ck_value **stops, int64_t *flops) {
    const ck_node *p = v->producer;
    if (!recomputable(p) || (p->op == CK_OP_BATCH_NORM && v != p->out[0])) return false;
    s->walk++;
    int nstops = 0, nodes = 0;
    *flops = 0;
    if (!cone(s, v, true, stops, &nstops, &nodes, flops)) return false;
    const ck_value *r = root_of(s, v);
    int64_t gain = s->root_refs[r->id] == 1 ? (int64_t)ck_value_bytes(r) : 0, cost = 0;
    s->walk++; /* count each new root once */
    for (int i = 0; i < nstops; i++) {
        const ck_value *sr = root_of(s, stops[i]);
        if (s->root_refs[sr->id] > 0 || s->mark[sr->id] == s->walk) continue;
        s->mark[sr->id] = s->walk;
        cost += sr == r ? 0 : (int64_t)ck_value_bytes(sr);
    }
    if (gain <= cost) return false;
    keep(s, v, -1);
    for (int i = 0; i < nstops; i++)
        if (!s->kept[stops[i]->id]) keep(s, stops[i], +1);
    return true;
}

static void sel_free(sel *s) { free(s->fwd_val), free(s->read_bwd), free(s->kept), free(s->root_refs), free(s->mark); }

static void sel_init(sel *s, const ck_graph *g, const ck_options *o) {
    memset(s, 0, sizeof *s);
    s->g = g, s->o = o, s->nid = g->next_value_id;
    while (s->nf < g->n_nodes && g->nodes[s->nf]->phase == CK_PHASE_FORWARD) s->nf++;
    size_t n = (size_t)s->nid + 1;
    s->fwd_val = calloc(n, 1), s->read_bwd = calloc(n, 1), s->kept = calloc(n, 1);
    s->root_refs = calloc(n, sizeof(int)), s->mark = calloc(n, sizeof(int));
    CK_ASSERT(s->fwd_val && s->read_bwd && s->kept && s->root_refs && s->mark);
    for (int i = 0; i < s->nf; i++)
        for (int k = 0; k < g->nodes[i]->n_out; k++)
            if (g->nodes[i]->out[k]) s->fwd_val[g->nodes[i]->out[k]->id] = true;
    for (int i = s->nf; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++) {
            const ck_value *v = g->nodes[i]->in[k];
            if (v && v->id < s->nid && s->fwd_val[v->id]) s->read_bwd[v->id] = true;
        }
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k]->id < s->nid && s->fwd_val[g->outputs[k]->id]) s->read_bwd[g->outputs[k]->id] = true;
}

ck_status ck_selective_candidates(const ck_graph *g, const ck_options *o, ck_sel_candidates *c) {
    memset(c, 0, sizeof *c);
    sel s;
    sel_init(&s, g, o);
    /* the values the backward reads, latest producer first */
    const ck_value **order = malloc(sizeof *order * ((size_t)s.nid + 1)), **stops = malloc(sizeof *stops * ((size_t)s.nid + 1));
    int no = 0;
    CK_ASSERT(order && stops);
    for (int i = s.nf - 1; i >= 0; i--)
        for (int k = g->nodes[i]->n_out - 1; k >= 0; k--) {
            const ck_value *v = g->nodes[i]->out[k];
            if (v && s.read_bwd[v->id]) order[no++] = v, keep(&s, v, +1);
        }
    bool *outputs = calloc((size_t)s.nid + 1, 1);
    CK_ASSERT(outputs);
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k]->id < s.nid) outputs[g->outputs[k]->id] = true;
    c->value = malloc(sizeof(int) * ((size_t)no + 1));
    c->node = malloc(sizeof(int) * ((size_t)no + 1));
    c->flops = calloc((size_t)no + 1, sizeof *c->flops);
    c->bytes = calloc((size_t)no + 1, sizeof *c->bytes);
    CK_ASSERT(c->value && c->node && c->flops && c->bytes);
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < no; i++) {
            const ck_value *v = order[i];
            if (!s.kept[v->id] || outputs[v->id]) continue;
            int64_t b = (int64_t)ck_value_bytes(root_of(&s, v));
            int64_t fl = 0;
            if (!try_value(&s, v, stops, &fl)) continue;
            c->value[c->n] = v->id, c->node[c->n] = v->producer->id, c->bytes[c->n] = b, c->flops[c->n] = fl;
            c->n++, changed = true;
        }
    }
    free(order), free(stops), free(outputs);
    sel_free(&s);
    return CK_OK;
}

void ck_selective_candidates_free(ck_sel_candidates *c) {
    free(c->value), free(c->node), free(c->flops), free(c->bytes);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------- the rewrite */

typedef struct sel_rewrite {
    ck_graph *g;
    const ck_options *o;
    int nf, nid;
    const bool *recompute; /* per value id: read through a clone */
    ck_node **clone;       /* per forward node id */
    ck_node **out;
    int no;
} sel_rewrite;

/* The clone of v's producer (made now, at the end of the schedule, with the clones it reads made
 * first); returns the clone's output for v. */
static ck_value *clone_value(sel_rewrite *r, ck_value *v) {
    ck_node *p = v->producer;
    if (!r->clone[p->id]) {
        ck_value *in[64];
        int n_in = p->n_in;
        for (int k = 0; k < n_in; k++) {
            ck_value *u = p->in[k];
            in[k] = u && u->id < r->nid && r->recompute[u->id] ? clone_value(r, u) : u;
        }
        ck_node *c = ck_checkpoint_clone_node(r->g, p, in);
        r->g->n_nodes--; /* placed here instead */
        r->clone[p->id] = c;
        r->out[r->no++] = c;
    }
    ck_node *c = r->clone[p->id];
    for (int k = 0; k < p->n_out && k < c->n_out; k++)
        if (p->out[k] == v) return c->out[k];
    CK_ASSERT(!"selective: a clone lacks the output read");
    return v;
}

/* recompute[]: the chosen values, and every forward value that is neither kept nor static but
 * lies in a chosen cone (found by walking the cones again against the final kept set). */
static void mark_recomputed(const ck_graph *g, const ck_options *o, const bool *chosen, bool *recompute) {
    sel s;
    sel_init(&s, g, o);
    for (int id = 0; id < s.nid; id++) s.kept[id] = s.read_bwd[id] && !chosen[id];
    int nid = s.nid;
    int *stack = malloc(sizeof(int) * ((size_t)nid + 1)), sp = 0;
    CK_ASSERT(stack);
    for (int id = 0; id < nid; id++)
        if (chosen[id]) recompute[id] = true, stack[sp++] = id;
    const ck_value **by_id = calloc((size_t)nid + 1, sizeof *by_id);
    CK_ASSERT(by_id);
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i]->id < nid) by_id[g->values[i]->id] = g->values[i];
    while (sp > 0) {
        const ck_value *v = by_id[stack[--sp]];
        const ck_node *p = v->producer;
        int n_in = p->op == CK_OP_BATCH_NORM ? 3 : p->n_in;
        for (int k = 0; k < n_in; k++) {
            const ck_value *u = p->in[k];
            if (!u || is_static(&s, u) || s.kept[u->id] || recompute[u->id]) continue;
            if (!recomputable(u->producer) || (u->producer->op == CK_OP_BATCH_NORM && u != u->producer->out[0])) continue; /* kept */
            recompute[u->id] = true, stack[sp++] = u->id;
        }
    }
    free(stack), free(by_id);
    sel_free(&s);
}

/* The chosen values (per value id) from o: every candidate, or those o->selective_set keeps. */
static bool *chosen_values(const ck_graph *g, const ck_options *o, int *n_chosen) {
    ck_sel_candidates c;
    ck_selective_candidates(g, o, &c);
    bool *chosen = calloc((size_t)g->next_value_id + 1, 1);
    CK_ASSERT(chosen);
    *n_chosen = 0;
    for (int k = 0; k < c.n; k++)
        if (!o->selective_set || (k < o->n_selective_set && o->selective_set[k])) chosen[c.value[k]] = true, ++*n_chosen;
    ck_selective_candidates_free(&c);
    return chosen;
}

ck_status ck_pass_selective(ck_graph *g, const ck_options *o, ck_diag *d) {
    if (o->infer || !o->selective) return CK_OK;
    int n_chosen = 0;
    bool *chosen = chosen_values(g, o, &n_chosen);
    sel_rewrite r = {.g = g, .o = o, .nid = g->next_value_id};
    while (r.nf < g->n_nodes && g->nodes[r.nf]->phase == CK_PHASE_FORWARD) r.nf++;
    bool *recompute = calloc((size_t)r.nid + 1, 1);
    CK_ASSERT(recompute);
    mark_recomputed(g, o, chosen, recompute);
    r.recompute = recompute;
    int nn = g->n_nodes;
    r.clone = calloc((size_t)g->next_node_id + 1, sizeof *r.clone);
    r.out = malloc(sizeof(ck_node *) * ((size_t)nn * 3 + 16));
    CK_ASSERT(r.clone && r.out);
    for (int i = 0; i < nn; i++) {
        ck_node *b = g->nodes[i];
        for (int k = 0; i >= r.nf && k < b->n_in; k++) {
            ck_value *u = b->in[k];
            if (u && u->id < r.nid && recompute[u->id]) b->in[k] = clone_value(&r, u);
        }
        r.out[r.no++] = b;
    }
    ck_graph_set_nodes(g, r.no, r.out);
    ck_graph_remove_dead(g);
    g->n_selective = n_chosen;
    free(chosen), free(recompute), free(r.clone), free(r.out);
    return ck_graph_verify(g, d);
}
