/* fold_transpose.c — Transposes next to a MatMul become its operands' and result's strides, so
 * the copies go (attention's head split and merge, K^T, and the transposes autodiff adds for
 * MatMul's gradients: 12 copies a GPT block, none left).
 *
 * Reads: a MatMul operand produced by a chain of Transposes (Transpose(Transpose(x, p), q) reads
 * x through the composed permutation) reads the chain's source x in place: attribute CK_PERM_A or
 * CK_PERM_B (ck_ir.h) holds the permutation, and the kernel gets x's rows' stride and whether x is
 * stored transposed (ck_matmul_layout_of). That needs one of the two matrix axes to have unit
 * stride in x; the fold goes as deep along the chain as that holds.
 * Writes: a MatMul whose result only a Transpose reads writes the Transpose's output itself,
 * through CK_PERM_Y, when the result's columns stay contiguous there.
 *
 * Memory: a Transpose is folded away only when every reader of its output is folded with it (a
 * MatMul reading through it, or a Transpose folded away in turn) and no MatMul's fold stops at
 * its output, so it always disappears. The source then lives up to the last of those readers:
 * across steps where the copy, of the same bytes, lived before. So the live bytes of the graph
 * it runs on (the schedule `none` plans) never rise at any step; a checkpointed plan keeps or
 * recomputes the sources where it kept or recomputed the copies. A source whose bytes something
 * overwrites in place (a parameter, its gradient, optimizer state) is never read later than it
 * was, and one in the host pool (offloaded) is left alone.
 *
 * Where it runs: on the trained graph (after autodiff and the optimizer; after lowering with
 * --infer), before the plan search, so it sees the whole backward, and every policy starts from
 * the same folded graph: a recompute clone of a MatMul copies its permutations (checkpoint.c),
 * so each policy runs the very GEMMs `none` runs. Deciding per policy instead would let a clone
 * fold where the forward node did not (its Transpose has other readers), and a transposed
 * operand may be summed in another order by the GEMM library: the bits would differ.
 * --no-fold-transposes turns it off. It does not depend on --no-fuse: the GEMMs are the same
 * with or without chains, which keeps fused and unfused programs bit-identical. The product's
 * bits can differ from the unfolded graph's, but every policy and thread count runs the same
 * folded GEMMs, so they stay bit-identical to each other.
 */
#include "ck_passes.h"

#include <stdlib.h>
#include <string.h>

#define MAX_CHAIN 8

typedef struct folder {
    ck_graph *g;
    const ck_options *o;
    int nv;
    int *readers;     /* by value id: reads by nodes (a node reading it twice counts twice) */
    int *first;       /* by value id: its readers in use[first[id] .. first[id + 1]) */
    int *use;         /* (node index << 1 | input slot) for slots 0, 1; -1 - node index otherwise */
    bool *pinned;     /* by value id: read outside the schedule (graph output, loss, gradients) */
    bool *no_source;  /* by value id: must not be read later than it is (bytes written in place) */
    bool *removable;  /* by node index: a Transpose that may fold away */
    int *depth;       /* by node index * 2 + slot: how many Transposes the operand folds through */
    int *index;       /* by node id: its index in the schedule, -1 when not in it */
} folder;

static bool is_transpose(const ck_node *n) {
    return n && n->op == CK_OP_TRANSPOSE && n->n_in == 1 && n->n_out == 1 && n->in[0] && n->out[0];
}

static bool is_matmul(const ck_node *n) {
    return n && n->op == CK_OP_MATMUL && n->in[0] && n->in[1] && n->out[0] && n->out[0]->dtype == CK_F32 &&
           n->in[0]->rank >= 2 && n->in[1]->rank >= 2;
}

/* The schedule index of n, or -1. */
static int index_of(const folder *f, const ck_node *n) {
    return n->id >= 0 && n->id <= f->g->next_node_id && f->g->nodes[f->index[n->id]] == n ? f->index[n->id] : -1;
}

static void pin(folder *f, const ck_value *v) {
    if (v) f->pinned[v->id] = true;
}

/* Readers of every value, pins, and the values that must not become sources. */
static void scan(folder *f) {
    ck_graph *g = f->g;
    memset(f->readers, 0, sizeof(int) * (size_t)f->nv);
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            if (g->nodes[i]->in[k]) f->readers[g->nodes[i]->in[k]->id]++;
    f->first[0] = 0;
    for (int v = 0; v < f->nv; v++) f->first[v + 1] = f->first[v] + f->readers[v];
    int *at = calloc((size_t)f->nv, sizeof *at);
    CK_ASSERT(at);
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++) {
            const ck_value *v = g->nodes[i]->in[k];
            if (v) f->use[f->first[v->id] + at[v->id]++] = k < 2 ? i << 1 | k : -1 - i;
        }
    free(at);
    memset(f->pinned, 0, (size_t)f->nv);
    for (int i = 0; i < g->n_outputs; i++) pin(f, g->outputs[i]);
    pin(f, g->loss);
    for (int i = 0; i < g->n_train; i++) {
        if (g->train_grads) pin(f, g->train_grads[i]);
        if (g->train_params) pin(f, g->train_params[i]);
    }
    /* sources: activations, inputs and constants whose bytes nothing overwrites; views share their
     * input's verdict, and so do in-place outputs (whose bytes are their input's) */
    memset(f->no_source, 0, (size_t)f->nv);
    for (int i = 0; i < g->n_values; i++) {
        const ck_value *v = g->values[i];
        f->no_source[v->id] = v->host || !(v->role == CK_ROLE_ACTIVATION || v->role == CK_ROLE_INPUT || v->role == CK_ROLE_CONST);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        for (int k = 0; k < n->n_out; k++) {
            int src = ck_node_inplace_input(n, k);
            if (src >= 0 && n->in[src]) f->no_source[n->in[src]->id] = true;
        }
    }
    for (int i = g->n_nodes - 1; i >= 0; i--) { /* a view's verdict reaches back to its input */
        const ck_node *n = g->nodes[i];
        if (ck_node_is_view(n, f->o) && n->in[0] && n->out[0] && f->no_source[n->out[0]->id]) f->no_source[n->in[0]->id] = true;
    }
    for (int i = 0; i < g->n_nodes; i++) { /* and forward to the view */
        const ck_node *n = g->nodes[i];
        if (ck_node_is_view(n, f->o) && n->in[0] && n->out[0] && f->no_source[n->in[0]->id]) f->no_source[n->out[0]->id] = true;
    }
}

/* Would MatMul m with input `slot` replaced by src read through perm (NULL: none), or with its
 * result written into out through perm_y, have a GEMM layout? */
static bool layout_ok(const ck_node *m, int slot, ck_value *src, const int64_t *perm, ck_value *out, const int64_t *perm_y) {
    ck_node t = *m;
    ck_value *in[2] = {m->in[0], m->in[1]}, *outs[1] = {out ? out : m->out[0]};
    ck_attr attrs[64];
    if (m->n_attr + 2 > 64) return false;
    int na = 0;
    const char *name = slot ? CK_PERM_B : CK_PERM_A;
    for (int i = 0; i < m->n_attr; i++)
        if (!(perm && strcmp(m->attr[i].name, name) == 0) && !(perm_y && strcmp(m->attr[i].name, CK_PERM_Y) == 0))
            attrs[na++] = m->attr[i];
    if (perm) {
        in[slot] = src;
        attrs[na++] = (ck_attr){.name = name, .kind = CK_ATTR_INTS, .n = src->rank, .ints = (int64_t *)perm};
    }
    if (perm_y) attrs[na++] = (ck_attr){.name = CK_PERM_Y, .kind = CK_ATTR_INTS, .n = out->rank, .ints = (int64_t *)perm_y};
    t.in = in, t.out = outs, t.attr = attrs, t.n_attr = na;
    ck_matmul_layout L;
    return ck_matmul_layout_of(&t, &L);
}

/* The operand's current permutation (identity when it has none). */
static void current_perm(const ck_node *m, int slot, int64_t *perm) {
    const ck_attr *a = ck_attr_find(m, slot ? CK_PERM_B : CK_PERM_A);
    int r = m->in[slot]->rank;
    for (int i = 0; i < r; i++) perm[i] = a && a->kind == CK_ATTR_INTS && a->n == r ? a->ints[i] : i;
}

/* Walks MatMul m's operand `slot` up its chain of Transposes, at most MAX_CHAIN deep along
 * removable ones; returns the deepest depth with a layout (0: none), its source and
 * permutation. */
static int resolve(const folder *f, const ck_node *m, int slot, ck_value **src, int64_t *perm) {
    int64_t p[CK_MAX_RANK];
    current_perm(m, slot, p);
    ck_value *v = m->in[slot];
    int best = 0, d = 0;
    while (d < MAX_CHAIN && is_transpose(v->producer)) {
        ck_node *t = v->producer;
        int ti = index_of(f, t);
        if (ti < 0 || !f->removable[ti]) break;
        int64_t q[CK_MAX_RANK], c[CK_MAX_RANK];
        ck_transpose_perm(t, q);
        for (int i = 0; i < v->rank; i++) c[i] = q[p[i]];
        memcpy(p, c, sizeof(int64_t) * (size_t)v->rank);
        d++;
        v = t->in[0];
        if (!f->no_source[v->id] && layout_ok(m, slot, v, p, NULL, NULL)) {
            best = d;
            *src = v;
            memcpy(perm, p, sizeof(int64_t) * (size_t)v->rank);
        }
    }
    return best;
}

/* The value MatMul n's operand `slot` reads once `depth` Transposes up its chain are folded;
 * *through (when given): whether t is one of them. */
static const ck_value *folded_source(const ck_node *n, int slot, int depth, const ck_node *t, bool *through) {
    const ck_value *v = n->in[slot];
    for (int dd = 0; dd < depth && is_transpose(v->producer); dd++) {
        if (through && v->producer == t) *through = true;
        v = v->producer->in[0];
    }
    return v;
}

/* Is every reader of Transpose t's output folded with it? */
static bool all_readers_fold(const folder *f, int ti) {
    const ck_node *t = f->g->nodes[ti];
    const ck_value *y = t->out[0];
    if (f->pinned[y->id] || y->host) return false;
    for (int u = f->first[y->id]; u < f->first[y->id + 1]; u++) {
        int e = f->use[u];
        if (e < 0) { /* a third or later input: a Transpose has one, a MatMul two */
            return false;
        }
        int ni = e >> 1, slot = e & 1;
        const ck_node *n = f->g->nodes[ni];
        if (is_transpose(n) && f->removable[ni]) continue;
        if (!is_matmul(n)) return false;
        bool through = false; /* the operand's chain must pass through t within its depth */
        folded_source(n, slot, f->depth[ni * 2 + slot], t, &through);
        if (!through) return false;
    }
    return true;
}

static void set_perm(ck_graph *g, ck_node *n, const char *name, int rank, const int64_t *perm) {
    int64_t *p = ck_arena_alloc(g->arena, sizeof(int64_t) * (size_t)rank);
    CK_ASSERT(p);
    memcpy(p, perm, sizeof(int64_t) * (size_t)rank);
    for (int i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i].name, name) == 0) {
            n->attr[i] = (ck_attr){.name = name, .kind = CK_ATTR_INTS, .n = rank, .ints = p};
            return;
        }
    ck_node_add_attr(g, n, (ck_attr){.name = name, .kind = CK_ATTR_INTS, .n = rank, .ints = p});
}

/* Drops the nodes marked in `drop` from the schedule and the values in `gone` from the graph. */
static void compact(ck_graph *g, const bool *drop, const bool *gone) {
    int nn = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!drop[i]) g->nodes[nn++] = g->nodes[i];
    g->n_nodes = nn;
    int kept = 0;
    for (int i = 0; i < g->n_values; i++)
        if (!gone[g->values[i]->id]) g->values[kept++] = g->values[i];
    g->n_values = kept;
}

static void fold_reads(folder *f) {
    ck_graph *g = f->g;
    int n = g->n_nodes;
    for (int i = 0; i < n; i++) f->removable[i] = is_transpose(g->nodes[i]) && g->nodes[i]->out[0]->dtype == CK_F32;
    ck_value *src;
    int64_t perm[CK_MAX_RANK];
    for (bool changed = true; changed;) { /* removable only ever turns false: this ends */
        changed = false;
        for (int i = 0; i < n; i++)
            for (int s = 0; s < 2; s++)
                f->depth[i * 2 + s] = is_matmul(g->nodes[i]) ? resolve(f, g->nodes[i], s, &src, perm) : 0;
        for (int i = 0; i < n; i++)
            if (f->removable[i] && !all_readers_fold(f, i)) f->removable[i] = false, changed = true;
        /* a MatMul whose fold stops at a removable Transpose's output would keep that Transpose
         * alive beside the source another MatMul folds through to: it stays then */
        for (int i = 0; i < n; i++)
            for (int s = 0; s < 2; s++) {
                if (!f->depth[i * 2 + s]) continue;
                const ck_value *v = folded_source(g->nodes[i], s, f->depth[i * 2 + s], NULL, NULL);
                int ti = is_transpose(v->producer) ? index_of(f, v->producer) : -1;
                if (ti >= 0 && f->removable[ti]) f->removable[ti] = false, changed = true;
            }
    }
    bool any = false;
    for (int i = 0; i < n; i++)
        for (int s = 0; s < 2; s++) {
            if (!is_matmul(g->nodes[i]) || !resolve(f, g->nodes[i], s, &src, perm)) continue;
            set_perm(g, g->nodes[i], s ? CK_PERM_B : CK_PERM_A, src->rank, perm);
            g->nodes[i]->in[s] = src;
            any = true;
        }
    if (!any) return;
    /* the folded Transposes have no readers left: drop them, the last first */
    scan(f);
    bool *drop = calloc((size_t)n, sizeof *drop), *gone = calloc((size_t)f->nv, sizeof *gone);
    CK_ASSERT(drop && gone);
    for (int i = n - 1; i >= 0; i--) {
        ck_node *t = g->nodes[i];
        if (!f->removable[i] || f->readers[t->out[0]->id] > 0 || f->pinned[t->out[0]->id]) continue;
        drop[i] = true;
        gone[t->out[0]->id] = true;
        f->readers[t->in[0]->id]--;
    }
    compact(g, drop, gone);
    free(drop), free(gone);
}

static void fold_writes(folder *f) {
    ck_graph *g = f->g;
    scan(f);
    int n = g->n_nodes;
    bool *drop = calloc((size_t)n, sizeof *drop), *gone = calloc((size_t)f->nv, sizeof *gone);
    CK_ASSERT(drop && gone);
    bool any = false;
    for (int i = 0; i < n; i++) {
        ck_node *m = g->nodes[i];
        if (!is_matmul(m) || ck_attr_find(m, CK_PERM_Y)) continue;
        ck_value *y = m->out[0];
        if (f->readers[y->id] != 1 || f->pinned[y->id] || y->host) continue;
        int e = f->use[f->first[y->id]];
        if (e < 0) continue;
        ck_node *t = g->nodes[e >> 1];
        if (!is_transpose(t) || drop[e >> 1] || t->out[0]->host) continue;
        int64_t perm[CK_MAX_RANK];
        ck_transpose_perm(t, perm);
        if (!layout_ok(m, 0, NULL, NULL, t->out[0], perm)) continue;
        set_perm(g, m, CK_PERM_Y, y->rank, perm);
        m->out[0] = t->out[0];
        t->out[0]->producer = m;
        drop[e >> 1] = true;
        gone[y->id] = true;
        any = true;
    }
    if (any) compact(g, drop, gone);
    free(drop), free(gone);
}

ck_status ck_pass_fold_transposes(ck_graph *g, const ck_options *o, ck_diag *d) {
    (void)d;
    if (o->no_fold) return CK_OK;
    folder f = {.g = g, .o = o, .nv = g->next_value_id + 1};
    size_t nv = (size_t)f.nv, nn = (size_t)g->n_nodes + 1;
    int64_t uses = 0;
    for (int i = 0; i < g->n_nodes; i++) uses += g->nodes[i]->n_in;
    f.readers = calloc(nv, sizeof *f.readers);
    f.first = calloc(nv + 1, sizeof *f.first);
    f.use = calloc((size_t)uses + 1, sizeof *f.use);
    f.pinned = calloc(nv, sizeof *f.pinned);
    f.no_source = calloc(nv, sizeof *f.no_source);
    f.removable = calloc(nn, sizeof *f.removable);
    f.depth = calloc(nn * 2, sizeof *f.depth);
    f.index = calloc((size_t)g->next_node_id + 1, sizeof *f.index);
    CK_ASSERT(f.readers && f.first && f.use && f.pinned && f.no_source && f.removable && f.depth && f.index);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->id >= 0 && g->nodes[i]->id <= g->next_node_id) f.index[g->nodes[i]->id] = i;
    scan(&f);
    fold_reads(&f);
    fold_writes(&f);
    free(f.readers), free(f.first), free(f.use), free(f.pinned), free(f.no_source), free(f.removable), free(f.depth), free(f.index);
    return CK_OK;
}
