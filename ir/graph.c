/* graph.c — building and querying the IR: dtypes, values, nodes, attributes, the op table and
 * dead-code removal.
 *
 * Arrays of nodes and values grow by doubling inside the graph's arena (the old array is simply
 * abandoned there); that wastes at most as much as it keeps and keeps "one free releases all".
 */
#include "ck_ir.h"
#include "ckrt_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- dtypes */

static const struct { const char *name; size_t bytes; int32_t onnx; } ck_dtype_tab[] = {
#define X(e, name, bytes, onnx) {name, bytes, onnx},
    CK_DTYPES(X)
#undef X
};

const char *ck_dtype_name(ck_dtype t) { return t < CK_DTYPE_COUNT ? ck_dtype_tab[t].name : "?"; }
size_t ck_dtype_size(ck_dtype t) { return t < CK_DTYPE_COUNT ? ck_dtype_tab[t].bytes : 0; }
bool ck_dtype_is_float(ck_dtype t) { return t == CK_F32 || t == CK_F64 || t == CK_F16; }
bool ck_dtype_is_int(ck_dtype t) { return t == CK_I64 || t == CK_I32 || t == CK_I16 || t == CK_I8 || t == CK_U8; }

ck_dtype ck_dtype_from_onnx(int32_t code) {
    for (int i = 1; i < CK_DTYPE_COUNT; i++)
        if (ck_dtype_tab[i].onnx == code) return (ck_dtype)i;
    return CK_UNDEF;
}

const char *ck_onnx_dtype_name(int32_t code) {
    static const char *names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
                                  "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
                                  "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
                                  "FLOAT8E5M2FNUZ"};
    if (code >= 0 && code < (int32_t)(sizeof names / sizeof *names)) return names[code];
    return "unknown";
}

const char *ck_mem_cat_name(ck_mem_cat c) {
    static const char *names[] = {"params", "inputs", "activations", "workspace", "grads", "optimizer_state"};
    return (unsigned)c < CK_MEM_COUNT ? names[c] : "?";
}

const char *ck_role_name(ck_role r) {
    static const char *names[] = {"input", "param", "buffer", "const", "activation", "grad", "opt_state"};
    return (unsigned)r < sizeof names / sizeof *names ? names[r] : "?";
}

/* ---------------------------------------------------------------- values */

int64_t ck_value_numel(const ck_value *v) { return ckrt_numel(v->rank, v->dims); }

size_t ck_value_bytes(const ck_value *v) { return (size_t)ck_value_numel(v) * ck_dtype_size(v->dtype); }

bool ck_shape_ok(int rank, const int64_t *dims) {
    if (rank < 0 || rank > CK_MAX_RANK) return false;
    int64_t p = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || (dims[i] > 1 && p > CK_MAX_NUMEL / dims[i])) return false;
        if (dims[i] > 1) p *= dims[i];
    }
    return true;
}

/* double -> int64 without undefined behaviour: truncates, saturates out of range, NaN -> 0 */
static int64_t ck_f2i(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775807.0) return INT64_MAX;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)x;
}

/* half -> float, enough for reading float16 constants */
static float ck_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000 | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

int64_t ck_value_get_i(const ck_value *v, int64_t i) {
    CK_ASSERT(v->data);
    switch (v->dtype) {
    case CK_I64: return ((const int64_t *)v->data)[i];
    case CK_I32: return ((const int32_t *)v->data)[i];
    case CK_I16: return ((const int16_t *)v->data)[i];
    case CK_I8: return ((const int8_t *)v->data)[i];
    case CK_U8: return ((const uint8_t *)v->data)[i];
    case CK_BOOL: return ((const uint8_t *)v->data)[i] != 0;
    case CK_F32: return ck_f2i(((const float *)v->data)[i]);
    case CK_F64: return ck_f2i(((const double *)v->data)[i]);
    case CK_F16: return ck_f2i(ck_half_to_float(((const uint16_t *)v->data)[i]));
    default: CK_ASSERT(!"dtype");
    }
    return 0;
}

double ck_value_get_f(const ck_value *v, int64_t i) {
    CK_ASSERT(v->data);
    switch (v->dtype) {
    case CK_F32: return ((const float *)v->data)[i];
    case CK_F64: return ((const double *)v->data)[i];
    case CK_F16: return ck_half_to_float(((const uint16_t *)v->data)[i]);
    default: return (double)ck_value_get_i(v, i);
    }
}

void ck_value_set_i(ck_value *v, int64_t i, int64_t x) {
    switch (v->dtype) {
    case CK_I64: ((int64_t *)v->data)[i] = x; break;
    case CK_I32: ((int32_t *)v->data)[i] = (int32_t)x; break;
    case CK_I16: ((int16_t *)v->data)[i] = (int16_t)x; break;
    case CK_I8: ((int8_t *)v->data)[i] = (int8_t)x; break;
    case CK_U8: ((uint8_t *)v->data)[i] = (uint8_t)x; break;
    case CK_BOOL: ((uint8_t *)v->data)[i] = x != 0; break;
    case CK_F32: ((float *)v->data)[i] = (float)x; break;
    case CK_F64: ((double *)v->data)[i] = (double)x; break;
    default: CK_ASSERT(!"dtype");
    }
}

void ck_value_set_f(ck_value *v, int64_t i, double x) {
    switch (v->dtype) {
    case CK_F32: ((float *)v->data)[i] = (float)x; break;
    case CK_F64: ((double *)v->data)[i] = x; break;
    case CK_BOOL: ((uint8_t *)v->data)[i] = x != 0; break;
    default: ck_value_set_i(v, i, ck_f2i(x)); break;
    }
}

char *ck_shape_str(const ck_value *v, char *buf, size_t n) { return ckrt_shape_str(buf, n, v->rank, v->dims); }

/* ---------------------------------------------------------------- op table */

#define CK_OP(e, onnx, in_min, in_max, out_min, out_max, flags, diff, infer, grad, kernel, ws, flops, fold, view, in_place) ck_status infer(ck_node *n, ck_diag *d);
#include "ops.def"
#undef CK_OP

const ck_op_info ck_ops[CK_OP_COUNT] = {
#define CK_OP(e, onnx, in_min, in_max, out_min, out_max, flags, diff, infer, grad, kernel, ws, flops, fold, view, in_place) \
    [CK_OP_##e] = {onnx, in_min, in_max, out_min, out_max, flags, diff, infer, ws},
#include "ops.def"
#undef CK_OP
};

bool ck_op_from_name(const char *onnx_name, ck_op *op) {
    for (int i = 0; i < CK_OP_COUNT; i++)
        if (strcmp(ck_ops[i].onnx_name, onnx_name) == 0) {
            *op = (ck_op)i;
            return true;
        }
    return false;
}

/* ---------------------------------------------------------------- graph */

ck_graph *ck_graph_new(void) {
    ck_arena *a = ck_arena_new();
    if (!a) return NULL;
    ck_graph *g = ck_arena_alloc(a, sizeof *g);
    if (!g) {
        ck_arena_free(a);
        return NULL;
    }
    g->arena = a;
    g->name = g->producer_name = g->producer_version = "";
    return g;
}

void ck_graph_free(ck_graph *g) {
    if (!g) return;
    ck_graph *owned = g->owned; /* a clone's original: after the clone, whose data it holds */
    for (ck_hold *h = g->holds; h; h = h->next) h->release(h->ctx); /* the list is newest first */
    ck_arena_free(g->arena);
    ck_graph_free(owned);
}

ck_io_stats ck_stats;

void ck_graph_hold(ck_graph *g, const void *base, size_t len, void (*drop)(void *ctx, const void *p, size_t n),
                   void (*release)(void *ctx), void *ctx) {
    ck_hold *h = ck_arena_alloc(g->arena, sizeof *h);
    CK_ASSERT(h);
    *h = (ck_hold){.base = base, .len = len, .drop = drop, .release = release, .ctx = ctx, .next = g->holds};
    g->holds = h;
}

void ck_graph_data_done(const ck_graph *g, const void *p, size_t n) {
    const char *c = p;
    for (; g; g = g->borrowed) /* a clone's data are its original's */
        for (const ck_hold *h = g->holds; h; h = h->next)
            if (h->drop && h->base && c >= h->base && (size_t)(c - h->base) <= h->len && n <= h->len - (size_t)(c - h->base)) {
                h->drop(h->ctx, p, n);
                return;
            }
}

static void *ck_grow(ck_arena *a, void *old, int n, int *cap, size_t elem) {
    if (n < *cap) return old;
    int nc = *cap ? *cap * 2 : 64;
    void *p = ck_arena_alloc(a, (size_t)nc * elem);
    CK_ASSERT(p);
    if (old) memcpy(p, old, (size_t)n * elem);
    *cap = nc;
    return p;
}

ck_value *ck_graph_add_value(ck_graph *g, const char *name, ck_dtype dt, int rank, const int64_t *dims,
                             ck_role role) {
    CK_ASSERT(rank >= 0 && rank <= CK_MAX_RANK);
    ck_value *v = ck_arena_alloc(g->arena, sizeof *v);
    CK_ASSERT(v);
    v->id = g->next_value_id++;
    v->name = ck_arena_strdup(g->arena, name);
    v->dtype = dt;
    v->rank = rank;
    for (int i = 0; i < rank; i++) v->dims[i] = dims[i];
    v->role = role;
    g->values = ck_grow(g->arena, g->values, g->n_values, &g->cap_values, sizeof *g->values);
    g->values[g->n_values++] = v;
    return v;
}

ck_node *ck_graph_new_node(ck_graph *g, ck_op op, const char *name, int n_in, ck_value **in, int n_out) {
    ck_node *n = ck_arena_alloc(g->arena, sizeof *n);
    CK_ASSERT(n);
    n->id = g->next_node_id++;
    n->op = op;
    n->name = ck_arena_strdup(g->arena, name);
    n->n_in = n_in;
    n->in = ck_arena_alloc(g->arena, (size_t)(n_in ? n_in : 1) * sizeof *n->in);
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    n->n_out = n_out;
    n->out = ck_arena_alloc(g->arena, (size_t)(n_out ? n_out : 1) * sizeof *n->out);
    for (int i = 0; i < n_out; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%%%d", g->next_value_id);
        n->out[i] = ck_graph_add_value(g, buf, CK_UNDEF, 0, NULL, CK_ROLE_ACTIVATION);
        n->out[i]->producer = n;
    }
    return n;
}

ck_node *ck_graph_add_node(ck_graph *g, ck_op op, const char *name, int n_in, ck_value **in, int n_out) {
    ck_node *n = ck_graph_new_node(g, op, name, n_in, in, n_out);
    g->nodes = ck_grow(g->arena, g->nodes, g->n_nodes, &g->cap_nodes, sizeof *g->nodes);
    g->nodes[g->n_nodes++] = n;
    return n;
}

void ck_node_add_attr(ck_graph *g, ck_node *n, ck_attr a) {
    if (n->n_attr >= n->cap_attr) { /* arena memory is never freed: grow by doubling, not by one */
        int cap = n->n_attr < 4 ? 4 : 2 * n->n_attr;
        ck_attr *na = ck_arena_alloc(g->arena, (size_t)cap * sizeof *na);
        CK_ASSERT(na);
        if (n->n_attr) memcpy(na, n->attr, (size_t)n->n_attr * sizeof *na);
        n->attr = na;
        n->cap_attr = cap;
    }
    a.name = ck_arena_strdup(g->arena, a.name);
    n->attr[n->n_attr++] = a;
}

static ck_value **ck_copy_values(ck_graph *g, int n, ck_value **vs) {
    ck_value **p = ck_arena_alloc(g->arena, (size_t)(n ? n : 1) * sizeof *p);
    CK_ASSERT(p);
    for (int i = 0; i < n; i++) p[i] = vs[i];
    return p;
}

void ck_graph_set_nodes(ck_graph *g, int n, ck_node **nodes) {
    if (n > g->cap_nodes) {
        ck_node **p = ck_arena_alloc(g->arena, sizeof *p * (size_t)n);
        CK_ASSERT(p);
        g->nodes = p;
        g->cap_nodes = n;
    }
    memmove(g->nodes, nodes, sizeof *nodes * (size_t)n);
    g->n_nodes = n;
}

void ck_graph_set_outputs(ck_graph *g, int n, ck_value **outs) {
    g->outputs = ck_copy_values(g, n, outs);
    g->n_outputs = n;
}

void ck_graph_set_inputs(ck_graph *g, int n, ck_value **ins) {
    g->inputs = ck_copy_values(g, n, ins);
    g->n_inputs = n;
}

void ck_graph_remove_dead(ck_graph *g) {
    /* a value is live if it is a graph output or an input of a live node; walk backwards */
    bool *live = calloc((size_t)g->next_value_id + 1, sizeof *live);
    CK_ASSERT(live);
    for (int i = 0; i < g->n_outputs; i++) live[g->outputs[i]->id] = true;
    for (int i = 0; i < g->n_inputs; i++) live[g->inputs[i]->id] = true; /* inputs stay declared */
    int kept = 0;
    bool *keep = calloc((size_t)g->n_nodes + 1, sizeof *keep);
    CK_ASSERT(keep);
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        ck_node *n = g->nodes[i];
        bool used = (ck_ops[n->op].flags & CK_OPF_STATEFUL) != 0; /* updates state: always runs */
        for (int k = 0; k < n->n_out; k++) used |= n->out[k] && live[n->out[k]->id];
        if (!used) continue;
        keep[i] = true;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]) live[n->in[k]->id] = true;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (keep[i]) g->nodes[kept++] = g->nodes[i];
    g->n_nodes = kept;
    /* outputs of kept nodes stay in the value list even when unused (optional outputs) */
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_out; k++)
            if (g->nodes[i]->out[k]) live[g->nodes[i]->out[k]->id] = true;
    int nv = 0;
    for (int i = 0; i < g->n_values; i++)
        if (live[g->values[i]->id]) g->values[nv++] = g->values[i];
    g->n_values = nv;
    free(keep);
    free(live);
}

/* ---------------------------------------------------------------- attributes */

const ck_attr *ck_attr_find(const ck_node *n, const char *name) {
    for (int i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i].name, name) == 0) return &n->attr[i];
    return NULL;
}

int64_t ck_attr_int(const ck_node *n, const char *name, int64_t dflt) {
    const ck_attr *a = ck_attr_find(n, name);
    return a && a->kind == CK_ATTR_INT ? a->i : dflt;
}

float ck_attr_float(const ck_node *n, const char *name, float dflt) {
    const ck_attr *a = ck_attr_find(n, name);
    return a && a->kind == CK_ATTR_FLOAT ? a->f : dflt;
}

const char *ck_attr_str(const ck_node *n, const char *name, const char *dflt) {
    const ck_attr *a = ck_attr_find(n, name);
    return a && a->kind == CK_ATTR_STRING ? a->s : dflt;
}
