/* clone.c — a copy of a graph that passes can rewrite while the original stays as it was.
 *
 * The plan search (passes/search.c) tries several checkpoint, offload and bucket choices on the
 * same trained graph; each try rewrites a clone instead of loading the model again. A clone has
 * its own nodes, values, edge arrays and attribute arrays with the same ids, names and order as
 * the original, so every pass makes on it the choices it would make on the original. What passes
 * never write once a value or attribute exists is shared, not copied: names, attribute payloads
 * (ints, floats, strings, tensors) and constant data (weights may be a read-only file mapping).
 * So a clone borrows from its original (g->borrowed), which must outlive it; ck_graph_data_done
 * on a clone lets go of the original's mapped pages.
 */
#include "ck_ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct cloner {
    ck_graph *g;
    ck_value **vmap; /* by value id: the copy */
    ck_node **nmap;  /* by node id: the copy */
    int nv, nn;      /* the maps' sizes */
} cloner;

static ck_value *value_of(const cloner *c, const ck_value *v) {
    if (!v) return NULL;
    CK_ASSERT(v->id >= 0 && v->id < c->nv && c->vmap[v->id]); /* every value a node reads is listed */
    return c->vmap[v->id];
}

static const ck_node *node_of(const cloner *c, const ck_node *n) {
    if (!n) return NULL;
    CK_ASSERT(n->id >= 0 && n->id < c->nn && c->nmap[n->id]); /* every producer is scheduled */
    return c->nmap[n->id];
}

static ck_value **copy_list(const cloner *c, int n, ck_value *const *vs) {
    ck_value **p = ck_arena_alloc(c->g->arena, sizeof *p * (size_t)(n ? n : 1));
    CK_ASSERT(p);
    for (int i = 0; i < n; i++) p[i] = value_of(c, vs[i]);
    return p;
}

/* The node's struct and its own arrays (edges, attributes); edges are filled by link_node. */
static ck_node *copy_node(cloner *c, const ck_node *n) {
    ck_node *m = ck_arena_alloc(c->g->arena, sizeof *m);
    CK_ASSERT(m);
    *m = *n;
    if (n->n_attr) {
        m->attr = ck_arena_alloc(c->g->arena, sizeof *m->attr * (size_t)n->n_attr);
        CK_ASSERT(m->attr);
        memcpy(m->attr, n->attr, sizeof *m->attr * (size_t)n->n_attr);
    } else {
        m->attr = NULL;
    }
    m->cap_attr = n->n_attr;
    c->nmap[n->id] = m;
    return m;
}

/* A fused node's member edges: the results only the chain reads are in no value list (fuse.c),
 * so they are copied here, the first time a member names them, produced by that member's copy. */
static ck_value **member_list(cloner *c, int n, ck_value *const *vs, const ck_node *src, ck_node *copy) {
    ck_value **p = ck_arena_alloc(c->g->arena, sizeof *p * (size_t)(n ? n : 1));
    CK_ASSERT(p);
    for (int i = 0; i < n; i++) {
        const ck_value *v = vs[i];
        if (!v) continue;
        CK_ASSERT(v->id >= 0 && v->id < c->nv);
        if (!c->vmap[v->id]) {
            ck_value *w = ck_arena_alloc(c->g->arena, sizeof *w);
            CK_ASSERT(w);
            *w = *v;
            w->alias = NULL;
            c->vmap[v->id] = w;
        }
        p[i] = c->vmap[v->id];
        if (v->producer == src) p[i]->producer = copy; /* a listed value's producer is remapped later */
    }
    return p;
}

/* ckptc.Fused (passes/fuse.c): its members, copied like scheduled nodes. */
static void clone_members(cloner *c, ck_node *m, const ck_node *n) {
    m->fused = ck_arena_alloc(c->g->arena, sizeof *m->fused * (size_t)n->n_fused);
    CK_ASSERT(m->fused);
    for (int j = 0; j < n->n_fused; j++) {
        const ck_node *src = n->fused[j];
        ck_node *x = copy_node(c, src);
        x->in = member_list(c, src->n_in, src->in, NULL, NULL);
        x->out = member_list(c, src->n_out, src->out, src, x);
        x->ws_until = NULL;
        m->fused[j] = x;
    }
}

static void link_node(cloner *c, ck_node *m, const ck_node *n) {
    if (n->n_fused) clone_members(c, m, n);
    m->in = copy_list(c, n->n_in, n->in);
    m->out = copy_list(c, n->n_out, n->out);
    m->ws_until = node_of(c, n->ws_until);
}

ck_graph *ck_graph_clone(const ck_graph *src) {
    ck_graph *g = ck_graph_new();
    CK_ASSERT(g);
    cloner c = {.g = g, .nv = src->next_value_id + 1, .nn = src->next_node_id + 1};
    c.vmap = calloc((size_t)c.nv, sizeof *c.vmap);
    c.nmap = calloc((size_t)c.nn, sizeof *c.nmap);
    CK_ASSERT(c.vmap && c.nmap);
    ck_arena *a = g->arena;
    *g = *src; /* scalars, provenance, names; every array and pointer below is replaced */
    g->arena = a;
    g->holds = NULL;
    g->borrowed = src;
    g->owned = NULL;

    g->values = ck_arena_alloc(a, sizeof *g->values * (size_t)(src->n_values ? src->n_values : 1));
    CK_ASSERT(g->values);
    g->cap_values = src->n_values;
    for (int i = 0; i < src->n_values; i++) {
        const ck_value *v = src->values[i];
        ck_value *w = ck_arena_alloc(a, sizeof *w);
        CK_ASSERT(w && v->id < c.nv && !c.vmap[v->id]);
        *w = *v;
        c.vmap[v->id] = g->values[i] = w;
    }
    g->nodes = ck_arena_alloc(a, sizeof *g->nodes * (size_t)(src->n_nodes ? src->n_nodes : 1));
    CK_ASSERT(g->nodes);
    g->cap_nodes = src->n_nodes;
    for (int i = 0; i < src->n_nodes; i++) {
        CK_ASSERT(src->nodes[i]->id < c.nn && !c.nmap[src->nodes[i]->id]);
        g->nodes[i] = copy_node(&c, src->nodes[i]);
    }
    for (int i = 0; i < src->n_nodes; i++) link_node(&c, g->nodes[i], src->nodes[i]);
    for (int i = 0; i < src->n_values; i++) {
        ck_value *w = g->values[i];
        w->producer = (ck_node *)node_of(&c, w->producer);
        w->alias = w->alias ? value_of(&c, w->alias) : NULL;
    }

    g->inputs = copy_list(&c, src->n_inputs, src->inputs);
    g->outputs = copy_list(&c, src->n_outputs, src->outputs);
    g->loss = src->loss ? value_of(&c, src->loss) : NULL;
    if (src->train_params) g->train_params = copy_list(&c, src->n_train, src->train_params);
    if (src->train_grads) g->train_grads = copy_list(&c, src->n_train, src->train_grads);
    if (src->segments) {
        g->segments = ck_arena_alloc(a, sizeof *g->segments * (size_t)(src->n_segments + 1));
        CK_ASSERT(g->segments);
        memcpy(g->segments, src->segments, sizeof *g->segments * (size_t)src->n_segments);
    }
    if (src->plan.timeline) {
        g->plan.timeline = ck_arena_alloc(a, sizeof(int64_t) * (size_t)src->plan.n_timeline);
        CK_ASSERT(g->plan.timeline);
        memcpy(g->plan.timeline, src->plan.timeline, sizeof(int64_t) * (size_t)src->plan.n_timeline);
    }
    free(c.vmap), free(c.nmap);
    return g;
}
