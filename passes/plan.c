/* plan.c — the memory planner: every byte the step touches gets an offset in one arena.
 *
 * Layout: [static region | dynamic region]. The static region holds what lives for the whole
 * program (params, buffers and constants loaded from weights.bin, then the user inputs), in value
 * order. The dynamic region holds activations and kernel workspace. Each dynamic buffer lives
 * from the step of the node that writes it to the step of its last reader (graph outputs: to the
 * end); a node's inputs and outputs are live together, so kernels never run in place.
 *
 * Offsets come from greedy best-fit placement: buffers in some order, each put in the smallest gap
 * between already placed buffers whose lifetimes overlap it, or above the highest of them. Four
 * orders are tried (size, size x lifetime, lifetime, program order) and the lowest peak kept:
 * no single order wins on every graph (size alone fragments residual MLPs). Not optimal in
 * general; the lower bound (max live bytes at any step) is reported next to the plan.
 * Views alias their input: they need no kernel and no bytes, and extend their root's lifetime.
 */
#include "ck_passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct buf {
    int64_t bytes, offset;
    int64_t exact;         /* bytes actually used (bytes is that rounded up to the alignment) */
    int first, last;       /* inclusive step range */
    ck_value *v;           /* NULL for workspace */
    ck_node *ws_node;
    int order;             /* creation order, the tie-breaker that makes the plan deterministic */
} buf;

static int64_t align_up(int64_t x) { return (x + CK_ALIGN - 1) / CK_ALIGN * CK_ALIGN; }

double ck_dropout_ratio(const ck_node *n, const ck_options *o) {
    if (o && o->disable_dropout) return 0.0;
    const ck_value *mode = n->n_in > 2 ? n->in[2] : NULL, *ratio = n->n_in > 1 ? n->in[1] : NULL;
    if (!mode) return 0.0; /* ONNX: training_mode defaults to false */
    if (!mode->data) return -1.0;
    if (!ck_value_get_i(mode, 0)) return 0.0;
    if (!ratio) return 0.5;
    return ratio->data ? ck_value_get_f(ratio, 0) : -1.0;
}

bool ck_node_is_view(const ck_node *n, const ck_options *o) {
    switch (n->op) {
    case CK_OP_RESHAPE: case CK_OP_FLATTEN: case CK_OP_SQUEEZE: case CK_OP_UNSQUEEZE: case CK_OP_IDENTITY:
        return true;
    case CK_OP_DROPOUT: /* the identity when it drops nothing and no mask is wanted */
        return !(n->n_out > 1 && n->out[1]) && ck_dropout_ratio(n, o) == 0.0;
    default:
        return false;
    }
}

int ck_node_inplace_input(const ck_node *n, int k) {
    if (n->op == CK_OP_SGD || n->op == CK_OP_ADAMW) return k == 0 ? 0 : k + 1;
    return -1;
}

static ck_value *root_of(ck_value *v) {
    while (v->alias) v = v->alias;
    return v;
}

/* Placement orders tried; the plan keeps the one with the lowest peak (ties: the first). */
static int g_order;
static int cmp_buf(const void *a, const void *b) {
    const buf *x = a, *y = b;
    int64_t kx, ky;
    switch (g_order) {
    case 0: kx = x->bytes, ky = y->bytes; break;                                   /* size */
    case 1: kx = x->bytes * (x->last - x->first + 1), ky = y->bytes * (y->last - y->first + 1); break; /* area */
    case 2: kx = x->last - x->first, ky = y->last - y->first; break;               /* lifetime */
    default: kx = -x->first, ky = -y->first; break;                                /* program order */
    }
    if (kx != ky) return kx > ky ? -1 : 1;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->order - y->order;
}

static int cmp_off(const void *a, const void *b) {
    const buf *x = *(buf *const *)a, *y = *(buf *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Places bufs in array order, each at the best-fitting gap among already placed buffers whose
 * lifetimes overlap it; returns the peak. O(n^2 log n): fine up to tens of thousands of buffers. */
static int64_t place(buf *bufs, int nb, buf **placed) {
    int64_t peak = 0;
    for (int i = 0; i < nb; i++) {
        buf *b = &bufs[i];
        int np = 0;
        for (int k = 0; k < i; k++)
            if (bufs[k].first <= b->last && b->first <= bufs[k].last) placed[np++] = &bufs[k];
        qsort(placed, (size_t)np, sizeof *placed, cmp_off);
        int64_t best = -1, best_gap = INT64_MAX, cur = 0;
        for (int k = 0; k < np; k++) {
            int64_t gap = placed[k]->offset - cur;
            if (gap >= b->bytes && gap < best_gap) best = cur, best_gap = gap;
            if (placed[k]->offset + placed[k]->bytes > cur) cur = placed[k]->offset + placed[k]->bytes;
        }
        b->offset = best >= 0 ? best : cur;
        if (b->offset + b->bytes > peak) peak = b->offset + b->bytes;
    }
    return peak;
}

/* Moves buffers down: highest first, each to the lowest offset where it fits among the others
 * whose lifetimes overlap it. Never raises a buffer, so the peak can only drop. */
static int64_t compact(buf *bufs, int nb, buf **others, int64_t peak) {
    buf **by = malloc(sizeof(buf *) * (size_t)(nb + 1));
    CK_ASSERT(by);
    for (int i = 0; i < nb; i++) by[i] = &bufs[i];
    qsort(by, (size_t)nb, sizeof *by, cmp_off);
    for (int i = nb - 1; i >= 0; i--) {
        buf *b = by[i];
        int np = 0;
        for (int k = 0; k < nb; k++)
            if (&bufs[k] != b && bufs[k].first <= b->last && b->first <= bufs[k].last) others[np++] = &bufs[k];
        qsort(others, (size_t)np, sizeof *others, cmp_off);
        int64_t cur = 0;
        for (int k = 0; k < np && cur < b->offset; k++) {
            if (others[k]->offset - cur >= b->bytes) break;
            if (others[k]->offset + others[k]->bytes > cur) cur = others[k]->offset + others[k]->bytes;
        }
        if (cur < b->offset) b->offset = cur;
    }
    int64_t p = 0;
    for (int i = 0; i < nb; i++)
        if (bufs[i].offset + bufs[i].bytes > p) p = bufs[i].offset + bufs[i].bytes;
    free(by);
    (void)peak;
    return p;
}

ck_status ck_pass_plan(ck_graph *g, const ck_options *o, ck_diag *d) {
    int nn = g->n_nodes, nid = g->next_value_id;
    int *first = malloc(sizeof(int) * (size_t)(nid + 1)), *last = malloc(sizeof(int) * (size_t)(nid + 1));
    CK_ASSERT(first && last);
    for (int i = 0; i <= nid; i++) first[i] = -1, last[i] = -1;
    for (int i = 0; i < g->n_values; i++) g->values[i]->alias = NULL, g->values[i]->offset = -1;

    /* views and in-place updates first: their outputs alias the root of an input */
    for (int i = 0; i < nn; i++) {
        ck_node *n = g->nodes[i];
        if (ck_node_is_view(n, o)) n->out[0]->alias = root_of(n->in[0]);
        for (int k = 0; k < n->n_out; k++) {
            int src = ck_node_inplace_input(n, k);
            if (src >= 0 && n->out[k]) n->out[k]->alias = root_of(n->in[src]);
        }
    }
    /* lifetimes, accumulated on roots */
    for (int i = 0; i < nn; i++) {
        ck_node *n = g->nodes[i];
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k]) {
                ck_value *r = root_of(n->out[k]);
                if (first[r->id] < 0) first[r->id] = i;
                if (last[r->id] < i) last[r->id] = i;
            }
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]) {
                ck_value *r = root_of(n->in[k]);
                if (last[r->id] < i) last[r->id] = i;
            }
    }
    for (int i = 0; i < g->n_outputs; i++) last[root_of(g->outputs[i])->id] = nn;

    /* static region: data-carrying values (weights.bin's image), optimizer state (zeroed at
     * start), then inputs */
    ck_mem_plan *p = &g->plan;
    memset(p, 0, sizeof *p);
    int64_t off = 0;
    for (int pass = 0; pass < 3; pass++) {
        for (int i = 0; i < g->n_values; i++) {
            ck_value *v = g->values[i];
            if (v->producer || v->alias) continue;
            int which = v->role == CK_ROLE_INPUT ? 2 : v->role == CK_ROLE_OPT_STATE ? 1 : 0;
            if (which != pass) continue;
            v->offset = off;
            int64_t b = align_up((int64_t)ck_value_bytes(v));
            off += b;
            p->bytes[which == 2 ? CK_MEM_INPUTS : which == 1 ? CK_MEM_OPT_STATE : CK_MEM_PARAMS] += b;
        }
        if (pass == 0) p->weights_bytes = off;
    }
    p->static_bytes = off;

    /* dynamic buffers */
    int cap = g->n_values + nn + 1, nb = 0;
    buf *bufs = calloc((size_t)cap, sizeof *bufs);
    CK_ASSERT(bufs);
    for (int i = 0; i < g->n_values; i++) {
        ck_value *v = g->values[i];
        if (!v->producer || v->alias || v->host) continue;
        if (first[v->id] < 0) first[v->id] = last[v->id] = 0; /* produced but never read: still written */
        bufs[nb] = (buf){.bytes = align_up((int64_t)ck_value_bytes(v)), .exact = (int64_t)ck_value_bytes(v), .first = first[v->id],
                         .last = last[v->id], .v = v, .order = nb};
        nb++;
    }
    for (int i = 0; i < nn; i++) {
        ck_node *n = g->nodes[i];
        n->ws_offset = -1;
        n->ws_bytes = ck_ops[n->op].workspace ? ck_ops[n->op].workspace(n) : 0;
        if (n->ws_bytes > 0) {
            bufs[nb] = (buf){.bytes = align_up(n->ws_bytes), .exact = n->ws_bytes, .first = i, .last = i, .ws_node = n, .order = nb};
            nb++;
        }
    }
    for (int i = 0; i < nb; i++)
        if (bufs[i].bytes == 0) bufs[i].bytes = CK_ALIGN; /* empty tensors still get a distinct address */
    buf **placed = malloc(sizeof(buf *) * (size_t)(nb + 1));
    int64_t *best_off = malloc(sizeof(int64_t) * (size_t)(nb + 1));
    CK_ASSERT(placed && best_off);
    int64_t dyn_peak = INT64_MAX;
    for (int order = 0; order < 4; order++) {
        g_order = order;
        qsort(bufs, (size_t)nb, sizeof *bufs, cmp_buf);
        int64_t peak = place(bufs, nb, placed);
        peak = compact(bufs, nb, placed, peak);
        if (peak < dyn_peak) {
            dyn_peak = peak;
            for (int i = 0; i < nb; i++) best_off[bufs[i].order] = bufs[i].offset;
        }
    }
    for (int i = 0; i < nb; i++) bufs[i].offset = best_off[bufs[i].order];
    free(placed);
    free(best_off);

    /* write back; find the step with the most live dynamic bytes */
    int64_t *live = calloc((size_t)nn + 2, sizeof *live), *live_ws = calloc((size_t)nn + 2, sizeof *live_ws);
    int64_t *live_gr = calloc((size_t)nn + 2, sizeof *live_gr);
    CK_ASSERT(live && live_ws && live_gr);
    for (int i = 0; i < nb; i++) {
        buf *b = &bufs[i];
        if (b->v) b->v->offset = p->static_bytes + b->offset;
        else b->ws_node->ws_offset = p->static_bytes + b->offset;
        for (int t = b->first; t <= b->last && t <= nn; t++) {
            live[t] += b->bytes;
            if (!b->v) live_ws[t] += b->bytes;
            else if (b->v->role == CK_ROLE_GRAD) live_gr[t] += b->bytes;
        }
    }
    int tmax = 0;
    for (int t = 0; t <= nn; t++)
        if (live[t] > live[tmax]) tmax = t;
    /* what holds the peak: forward activations kept for the backward vs everything transient */
    int first_bwd = nn;
    for (int i = 0; i < nn; i++)
        if (g->nodes[i]->phase != CK_PHASE_FORWARD) {
            first_bwd = i;
            break;
        }
    p->peak_step = tmax < nn ? tmax : nn - 1;
    for (int i = 0; i < nb; i++) {
        buf *b = &bufs[i];
        if (!b->v || b->v->role == CK_ROLE_GRAD || b->first > tmax || b->last < tmax) continue;
        bool saved = b->v->producer->phase == CK_PHASE_FORWARD && b->last >= first_bwd;
        if (saved) p->saved_bytes += b->bytes;
        else p->transient_bytes += b->bytes;
    }
    p->timeline = ck_arena_alloc(g->arena, sizeof(int64_t) * (size_t)(nn + 1));
    p->n_timeline = nn + 1;
    for (int t = 0; t <= nn; t++) p->timeline[t] = p->static_bytes + live[t];
    p->dynamic_lower_bound = live[tmax];
    p->bytes[CK_MEM_ACTIVATIONS] = live[tmax] - live_ws[tmax] - live_gr[tmax];
    p->bytes[CK_MEM_WORKSPACE] = live_ws[tmax];
    p->bytes[CK_MEM_GRADS] = live_gr[tmax];
    free(live_gr);
    /* the planned peak is the last byte any buffer uses, not its aligned end: that is what the
     * runtime's high-water mark can observe */
    int64_t exact_end = 0;
    for (int i = 0; i < nb; i++)
        if (bufs[i].offset + bufs[i].exact > exact_end) exact_end = bufs[i].offset + bufs[i].exact;
    (void)dyn_peak;
    p->arena_bytes = p->static_bytes + exact_end;
    p->n_buffers = nb;
    p->done = true;
    /* the host pool: offloaded tensors, placed the same way over their own lifetimes */
    int nh = 0;
    for (int i = 0; i < g->n_values; i++) {
        ck_value *v = g->values[i];
        if (!v->host) continue;
        bufs[nh] = (buf){.bytes = align_up((int64_t)ck_value_bytes(v)), .exact = (int64_t)ck_value_bytes(v),
                         .first = first[v->id] < 0 ? 0 : first[v->id], .last = last[v->id] < 0 ? 0 : last[v->id], .v = v, .order = nh};
        p->offload_bytes += (int64_t)ck_value_bytes(v);
        nh++;
    }
    if (nh) {
        buf **hp = malloc(sizeof(buf *) * (size_t)(nh + 1));
        g_order = 0;
        qsort(bufs, (size_t)nh, sizeof *bufs, cmp_buf);
        p->host_bytes = place(bufs, nh, hp);
        for (int i = 0; i < nh; i++) bufs[i].v->offset = bufs[i].offset;
        free(hp);
    }
    for (int i = 0; i < g->n_values; i++) {
        ck_value *v = g->values[i];
        ck_value *r = root_of(v);
        if (v->alias) v->offset = r->offset;
        bool dyn = r->producer != NULL;
        v->live_first = dyn ? (first[r->id] < 0 ? 0 : first[r->id]) : -1;
        v->live_last = dyn ? (last[r->id] < 0 ? 0 : last[r->id]) : -1;
        CK_ASSERT(v->offset >= 0);
    }
    free(first), free(last);
    free(live), free(live_ws);
    free(bufs);
    (void)d;
    return CK_OK;
}
