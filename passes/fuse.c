/* fuse.c — elementwise fusion: chains of float elementwise nodes become one ckptc.Fused node,
 * run as one loop over the elements (one pass over memory instead of one per op), and the
 * intermediates that only the chain reads leave the graph, so the memory plan gives them no bytes.
 *
 * Where it runs: last, on the final graph (after autodiff, optimizer, checkpoint/recompute,
 * offload, data parallel, early updates), just before ck_pass_plan (search.c's plan_passes), so it
 * sees every reader a value will ever have: the backward, recompute clones, offloads, graph
 * outputs. --no-fuse (o->no_fuse) skips the chains; the single nodes in place (in_place_singles,
 * below) are a memory-plan matter and stay.
 *
 * What is a member: Add, Sub, Mul, Div, Pow on float32; a unary op with a row in CKRT_UNARY_OPS
 * (runtime/ckrt_kernels_ops.h) on float32; Where with a bool condition and float32 values. Every
 * member has the chain's output shape, and each of its inputs that comes from outside the chain
 * is a suffix broadcast of it: the same shape, a trailing run of its dims (a bias row, a
 * (1,1,T,T) mask over (B,H,T,T)) or one element; the kernel reads input k at (i mod numel(k)).
 * Anything else (other broadcasts, ints, compares) is left unfused.
 *
 * How a chain grows: from a seed member, the next node in the schedule that reads a value the
 * chain produces is taken when it is a member of the same shape and phase, when no node between
 * (those the chain jumps over) runs in place (an optimizer update or all-reduce could overwrite
 * what the chain reads), and while the chain has at most CK_FUSE_MAX_OPS ops, CK_FUSE_MAX_IN
 * external inputs, CK_FUSE_MAX_OUT outputs and spans at most CK_FUSE_WINDOW steps. The fused
 * node takes the place of the chain's last member: every external input is produced by then, and
 * no node before it reads a chain value (the grown-into node is the first reader), so moving the
 * earlier members down changes no result.
 *
 * Outputs: a member's result is an output of the fused node when anything outside the chain reads
 * it (another node, a graph output, the loss, a gradient the trainer dumps); otherwise it is fused
 * away: it leaves g->values and gets no arena bytes. An output may take over the bytes of an input
 * that dies at the chain (same shape, float, nothing reads it later, no later member reads it):
 * attribute "ckptc.inplace", the planner's in-place column. Bias add + GELU (both results kept for the
 * backward) thus writes x + b over the GEMM's output instead of needing a third buffer.
 *
 * Memory: fusing moves the earlier members' reads down to the last member, so inputs that died
 * inside the span live to its end, while the members' results no longer occupy the span. A chain
 * is fused only when, at every step of its span, the bytes it keeps alive longer are at most the
 * bytes it frees (liveness_ok), so the live bytes never rise anywhere. The greedy placement can
 * still differ by a few bytes; search.c's fuse_and_plan keeps the unfused plan then.
 *
 * Same bits: the runtime (ckrt_fused: cpu_fused.c, and the CUDA wrapper over
 * ckrt_kernels_fused.h) computes each member with the very expressions of the unfused kernels
 * (the X-macro rows), each result rounded to float as a stored float is, in member order, and
 * interprets the op list at run time, so no compiler can contract ops of two members into one
 * FMA. Checkpoint policies and thread counts stay bit-identical (tests/fuse_test.py checks
 * fused == unfused bits, and the planned peak fused <= unfused).
 */
#include "ck_passes.h"
#include "../runtime/ckrt_kernels_ops.h"   /* CKRT_UNARY_OPS: the unary ops the runtime runs */
#include "../runtime/ckrt_kernels_fused.h" /* CK_F_MAX_*: the runtime's limits */

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK_FUSE_MAX_OPS CK_F_MAX_OPS
#define CK_FUSE_MAX_IN CK_F_MAX_IN
#define CK_FUSE_MAX_OUT CK_F_MAX_OUT
#define CK_FUSE_WINDOW 48

/* Is v a suffix broadcast of shape (rank, dims): after dropping its leading 1s, its dims equal
 * the trailing dims of the shape (one element: always)? */
static bool suffix_bcast(const ck_value *v, int rank, const int64_t *dims) {
    if (ck_value_numel(v) == 1) return true;
    int lead = 0;
    while (lead < v->rank && v->dims[lead] == 1) lead++;
    int l = v->rank - lead;
    if (l > rank) return false;
    for (int k = 0; k < l; k++)
        if (v->dims[lead + k] != dims[rank - l + k]) return false;
    return true;
}

/* Has op a row in CKRT_UNARY_OPS (Gelu has two)? */
static bool is_unary_member(ck_op op) {
    static const ck_op rows[] = {
#define CK_UNARY_IS_(CODE, IR, ...) CK_OP_##IR,
        CKRT_UNARY_OPS(CK_UNARY_IS_)
#undef CK_UNARY_IS_
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i] == op) return true;
    return false;
}

/* Can n be a member (any chain, before the shape-against-chain checks)? */
static bool fusible(const ck_node *n) {
    if (n->n_out != 1 || !n->out[0] || n->out[0]->dtype != CK_F32 || n->out[0]->host) return false;
    if (ck_value_numel(n->out[0]) == 0) return false;
    const ck_value *y = n->out[0];
    switch (n->op) {
    case CK_OP_ADD: case CK_OP_SUB: case CK_OP_MUL: case CK_OP_DIV: case CK_OP_POW:
        for (int k = 0; k < 2; k++)
            if (!n->in[k] || n->in[k]->dtype != CK_F32 || !suffix_bcast(n->in[k], y->rank, y->dims)) return false;
        return true;
    case CK_OP_WHERE:
        if (!n->in[0] || n->in[0]->dtype != CK_BOOL || !suffix_bcast(n->in[0], y->rank, y->dims)) return false;
        for (int k = 1; k < 3; k++)
            if (!n->in[k] || n->in[k]->dtype != CK_F32 || !suffix_bcast(n->in[k], y->rank, y->dims)) return false;
        return true;
    default:
        return is_unary_member(n->op) && n->n_in == 1 && n->in[0] && n->in[0]->dtype == CK_F32 &&
               ck_value_numel(n->in[0]) == ck_value_numel(y);
    }
}

static bool same_shape(const ck_value *a, const ck_value *b) {
    return a->rank == b->rank && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0;
}

typedef struct chain {
    ck_node *m[CK_FUSE_MAX_OPS];
    int pos[CK_FUSE_MAX_OPS]; /* schedule steps */
    int n;
} chain;

static bool in_chain(const chain *c, const ck_value *v) {
    for (int i = 0; i < c->n; i++)
        if (c->m[i]->out[0] == v) return true;
    return false;
}

static bool reads_chain(const chain *c, const ck_node *n) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] && in_chain(c, n->in[k])) return true;
    return false;
}

/* External inputs of the chain (+ n when given), deduplicated; -1 when over the limit. */
static int count_inputs(const chain *c, const ck_node *extra, ck_value **out) {
    int ni = 0;
    for (int i = 0; i <= c->n; i++) {
        const ck_node *n = i < c->n ? c->m[i] : extra;
        if (!n) break;
        for (int k = 0; k < n->n_in; k++) {
            ck_value *v = n->in[k];
            if (in_chain(c, v)) continue;
            int j = 0;
            while (j < ni && out[j] != v) j++;
            if (j < ni) continue;
            if (ni == CK_FUSE_MAX_IN) return -1;
            out[ni++] = v;
        }
    }
    return ni;
}

typedef struct fuser {
    ck_graph *g;
    const ck_options *o;
    int *readers;     /* by value id: nodes of the schedule reading it (an input listed twice: twice) */
    bool *pinned;     /* by value id: read outside any node (graph output, loss, gradient) */
    bool *taken;      /* by schedule step: already in a chain */
    int *root;        /* by value id: the value whose bytes it is (views, in-place outputs: their input's) */
    int *last;        /* by root id: the last step that reads or writes it; INT_MAX: static or pinned */
    int n_groups, n_ops, n_away;
} fuser;

/* Would this member's result be an output of the chain (read outside it)? */
static bool is_output(const fuser *f, const chain *c, const ck_value *v) {
    if (f->pinned[v->id]) return true;
    int inside = 0;
    for (int i = 0; i < c->n; i++)
        for (int k = 0; k < c->m[i]->n_in; k++) inside += c->m[i]->in[k] == v;
    return f->readers[v->id] > inside;
}

/* The fused node a chain would be: external inputs, outputs (member results read outside), and
 * per output the input whose bytes it may take over (-1: none). An output may overwrite a float
 * input of the chain's full shape whose bytes nothing reads after the chain (last <= the chain's
 * step, not static, not pinned) and that no later member reads (the CPU runs member by member
 * over a tile and writes outputs in place; the GPU reads every input of an element first). */
typedef struct layout {
    ck_value *in[CK_FUSE_MAX_IN], *out[CK_FUSE_MAX_OUT];
    int n_in, n_out, alias[CK_FUSE_MAX_OUT], out_op[CK_FUSE_MAX_OUT];
} layout;

static bool read_after(const chain *c, int j, int root_id, const fuser *f) {
    for (int i = j + 1; i < c->n; i++)
        for (int k = 0; k < c->m[i]->n_in; k++)
            if (c->m[i]->in[k] && f->root[c->m[i]->in[k]->id] == root_id) return true;
    return false;
}

static bool lay_out(const fuser *f, const chain *c, layout *l) {
    l->n_in = count_inputs(c, NULL, l->in);
    if (l->n_in < 0) return false;
    l->n_out = 0;
    int64_t n = ck_value_numel(c->m[0]->out[0]), step = c->pos[c->n - 1];
    bool used[CK_FUSE_MAX_IN] = {0};
    for (int j = 0; j < c->n; j++) {
        ck_value *v = c->m[j]->out[0];
        if (!is_output(f, c, v)) continue;
        if (l->n_out == CK_FUSE_MAX_OUT) return false;
        int a = -1;
        for (int k = 0; k < l->n_in && a < 0; k++) {
            const ck_value *e = l->in[k];
            int r = f->root[e->id];
            if (!used[k] && e->dtype == CK_F32 && ck_value_numel(e) == n && !e->host && f->last[r] <= step &&
                !read_after(c, j, r, f))
                a = k;
        }
        if (a >= 0) used[a] = true;
        l->alias[l->n_out] = a, l->out_op[l->n_out] = j, l->out[l->n_out++] = v;
    }
    return l->n_out >= 1;
}

/* Does fusing the chain keep the live bytes at every step of its span at or below the unfused
 * schedule's? Moving the members down to the last one's step keeps the inputs that died inside
 * the span alive to its end (plus), and frees the member results that were alive in it (minus:
 * before the last step every result, at it the fused-away ones and the outputs that take over an
 * input's bytes). Only chains with plus <= minus at every step are fused, so fusion never raises
 * the live bytes anywhere (the plan's lower bound); the placement itself is the planner's. */
static bool liveness_ok(const fuser *f, const chain *c, const layout *l) {
    int p0 = c->pos[0], pl = c->pos[c->n - 1];
    for (int s = p0 + 1; s <= pl; s++) {
        int64_t plus = 0, minus = 0;
        for (int k = 0; k < l->n_in; k++) {
            int r = f->root[l->in[k]->id];
            bool dup = false;
            for (int q = 0; q < k; q++) dup |= f->root[l->in[q]->id] == r;
            if (!dup && f->last[r] < s) plus += (int64_t)ck_value_bytes(l->in[k]);
        }
        for (int j = 0; j < c->n && c->pos[j] <= s; j++) {
            const ck_value *v = c->m[j]->out[0];
            if (f->last[f->root[v->id]] < s) continue;
            int o = -1;
            for (int k = 0; k < l->n_out; k++)
                if (l->out[k] == v) o = k;
            if (s < pl || o < 0 || l->alias[o] >= 0) minus += (int64_t)ck_value_bytes(v);
        }
        if (plus > minus) return false;
    }
    return true;
}

static bool fits(const fuser *f, const chain *c) {
    layout l;
    return lay_out(f, c, &l) && liveness_ok(f, c, &l);
}

/* Grows the chain seeded at step s as far as the rules allow. */
static void grow(fuser *f, chain *c, int s) {
    ck_graph *g = f->g;
    const ck_value *y0 = g->nodes[s]->out[0];
    c->n = 1, c->m[0] = g->nodes[s], c->pos[0] = s;
    while (c->n < CK_FUSE_MAX_OPS) {
        int last = c->pos[c->n - 1], next = -1;
        for (int j = last + 1; j < g->n_nodes && j <= c->pos[0] + CK_FUSE_WINDOW; j++) {
            const ck_node *n = g->nodes[j];
            if (!n) continue; /* an earlier chain's member, moved down to its fused node */
            if (reads_chain(c, n)) {
                next = j;
                break;
            }
            for (int k = 0; k < n->n_out; k++)
                if (ck_node_inplace_input(n, k) >= 0) return; /* may overwrite an input */
        }
        if (next < 0 || f->taken[next]) return;
        ck_node *n = g->nodes[next];
        if (!fusible(n) || n->phase != c->m[0]->phase || !same_shape(n->out[0], y0)) return;
        ck_value *ins[CK_FUSE_MAX_IN];
        if (count_inputs(c, n, ins) < 0) return;
        c->m[c->n] = n, c->pos[c->n] = next, c->n++;
        if (!fits(f, c)) {
            c->n--;
            return;
        }
    }
}

/* Replaces the chain by one ckptc.Fused node at its last member's step; the members' results
 * nothing else reads leave g->values (marked in gone). An output that takes over an input's bytes
 * is said by the node's "ckptc.inplace" attribute (the planner's in-place column: plan.c). */
static void replace(fuser *f, const chain *c, bool *gone) {
    ck_graph *g = f->g;
    layout l;
    CK_ASSERT(lay_out(f, c, &l));
    int step = c->pos[c->n - 1];
    for (int i = 0; i < c->n; i++) {
        bool out = false;
        for (int k = 0; k < l.n_out; k++) out |= l.out[k] == c->m[i]->out[0];
        if (!out) gone[c->m[i]->out[0]->id] = true, f->n_away++;
    }
    char name[512];
    snprintf(name, sizeof name, "%s/fused", c->m[c->n - 1]->name);
    ck_node *fn = ck_graph_new_node(g, CK_OP_FUSED, name, l.n_in, l.in, l.n_out);
    int64_t *inplace = ck_arena_alloc(g->arena, sizeof(int64_t) * CK_FUSE_MAX_OUT);
    CK_ASSERT(inplace);
    bool any = false;
    for (int k = 0; k < l.n_out; k++) { /* the fresh outputs give way to the members' own */
        gone[fn->out[k]->id] = true;
        fn->out[k] = l.out[k];
        l.out[k]->producer = fn;
        inplace[k] = l.alias[k];
        any |= l.alias[k] >= 0;
    }
    if (any) ck_node_add_attr(g, fn, (ck_attr){.name = CK_INPLACE_ATTR, .kind = CK_ATTR_INTS, .n = l.n_out, .ints = inplace});
    /* what later chains see: inputs live to this step, outputs in place on their input's bytes */
    for (int k = 0; k < l.n_in; k++) {
        int r = f->root[l.in[k]->id];
        if (f->last[r] < step) f->last[r] = step;
    }
    for (int k = 0; k < l.n_out; k++)
        if (l.alias[k] >= 0) {
            int r = f->root[l.in[l.alias[k]]->id], o = l.out[k]->id;
            if (f->last[r] < f->last[o]) f->last[r] = f->last[o];
            f->root[o] = r;
        }
    fn->phase = c->m[0]->phase;
    fn->fused = ck_arena_alloc(g->arena, sizeof *fn->fused * (size_t)c->n);
    CK_ASSERT(fn->fused);
    for (int i = 0; i < c->n; i++) fn->fused[i] = c->m[i], f->taken[c->pos[i]] = true;
    fn->n_fused = c->n;
    g->nodes[step] = fn;
    for (int i = 0; i < c->n - 1; i++) g->nodes[c->pos[i]] = NULL; /* compacted by the caller */
    f->n_groups++, f->n_ops += c->n;
}

static void pin(fuser *f, const ck_value *v) {
    if (!v) return;
    f->pinned[v->id] = true;
    f->last[f->root[v->id]] = INT_MAX;
}

/* Readers, pinned values, and the roots' last steps (views and in-place outputs share their
 * input's bytes, as the planner will have them). */
static void count_readers(fuser *f) {
    ck_graph *g = f->g;
    for (int i = 0; i < g->n_values; i++) {
        const ck_value *v = g->values[i];
        f->root[v->id] = v->id;
        f->last[v->id] = v->producer ? -1 : INT_MAX; /* static: live all along */
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (ck_node_is_view(n, f->o) && n->out[0] && n->in[0]) f->root[n->out[0]->id] = f->root[n->in[0]->id];
        for (int k = 0; k < n->n_out; k++) {
            int src = ck_node_inplace_input(n, k);
            if (src >= 0 && n->out[k] && n->in[src]) f->root[n->out[k]->id] = f->root[n->in[src]->id];
        }
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]) {
                f->readers[n->in[k]->id]++;
                int r = f->root[n->in[k]->id];
                if (f->last[r] < i) f->last[r] = i;
            }
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] && f->last[f->root[n->out[k]->id]] < i) f->last[f->root[n->out[k]->id]] = i;
    }
    for (int i = 0; i < g->n_outputs; i++) pin(f, g->outputs[i]);
    pin(f, g->loss);
    for (int i = 0; i < g->n_train; i++) {
        if (g->train_grads) pin(f, g->train_grads[i]);
        if (g->train_params) pin(f, g->train_params[i]);
    }
}

/* A float elementwise node that no chain took (a member kind, or a unary op's derivative): may
 * its output take over input k's bytes? */
static bool single_in_place(const fuser *f, const ck_node *n, int k, int step) {
    const ck_value *y = n->out[0], *e = n->in[k];
    return e && e->dtype == CK_F32 && !e->host && same_shape(e, y) && f->last[f->root[e->id]] <= step;
}

/* Single nodes in place: the output of a float elementwise node outside every chain (Relu after
 * a BatchNorm, a residual Add, Relu's derivative) takes over the bytes of a full-shape input
 * that dies there, as a chain's may. Each kernel reads an element's inputs before it writes that
 * element (ckrt_binary/unary/where/unary_grad on both backends), so the bits are the same, and
 * the live bytes only fall: at that step by the input's size. Runs after the chains, on their
 * liveness (fused inputs live to the fused node), so none overwrites what a chain reads. */
static void in_place_singles(fuser *f, int n0) {
    ck_graph *g = f->g;
    for (int s = 0; s < n0; s++) {
        ck_node *n = g->nodes[s];
        if (!n || n->op == CK_OP_FUSED || ck_attr_find(n, CK_INPLACE_ATTR)) continue;
        const ck_value *y = n->out[0]; /* UnaryGrad: dy and x have y's shape (single_in_place checks the one it takes) */
        if (n->op == CK_OP_UNARY_GRAD ? !y || y->dtype != CK_F32 || y->host : !fusible(n)) continue;
        for (int k = 0; k < n->n_in; k++) {
            if (!single_in_place(f, n, k, s)) continue;
            int64_t *at = ck_arena_alloc(g->arena, sizeof *at);
            CK_ASSERT(at);
            *at = k;
            ck_node_add_attr(g, n, (ck_attr){.name = CK_INPLACE_ATTR, .kind = CK_ATTR_INTS, .n = 1, .ints = at});
            int r = f->root[n->in[k]->id], o = n->out[0]->id;
            if (f->last[r] < f->last[o]) f->last[r] = f->last[o];
            f->root[o] = r;
            break;
        }
    }
}

ck_status ck_pass_fuse(ck_graph *g, const ck_options *o, ck_diag *d) {
    (void)d;
    int nv = g->next_value_id + 1 + CK_FUSE_MAX_OUT * (g->n_nodes + 1);
    fuser f = {.g = g, .o = o};
    f.readers = calloc((size_t)nv, sizeof *f.readers);
    f.root = calloc((size_t)nv, sizeof *f.root);
    f.last = calloc((size_t)nv, sizeof *f.last);
    f.pinned = calloc((size_t)nv, sizeof *f.pinned);
    f.taken = calloc((size_t)g->n_nodes + 1, sizeof *f.taken);
    bool *gone = calloc((size_t)nv, sizeof *gone);
    CK_ASSERT(f.readers && f.pinned && f.taken && gone && f.root && f.last);
    count_readers(&f);
    int n0 = g->n_nodes;
    for (int s = 0; s < n0 && !o->no_fuse; s++) {
        if (f.taken[s] || !g->nodes[s] || !fusible(g->nodes[s]) || g->nodes[s]->op == CK_OP_FUSED) continue;
        chain c;
        grow(&f, &c, s);
        if (c.n >= 2) replace(&f, &c, gone);
    }
    in_place_singles(&f, n0); /* on the steps f->last counts in, before the compaction */
    int nn = 0;
    for (int i = 0; i < n0; i++)
        if (g->nodes[i]) g->nodes[nn++] = g->nodes[i];
    g->n_nodes = nn;
    int kept = 0;
    for (int i = 0; i < g->n_values; i++)
        if (!gone[g->values[i]->id]) g->values[kept++] = g->values[i];
    g->n_values = kept;
    free(f.readers), free(f.pinned), free(f.taken), free(gone), free(f.root), free(f.last);
    return CK_OK;
}
