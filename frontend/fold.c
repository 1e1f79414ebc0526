/* fold.c — shape inference plus constant folding of exporter shape subgraphs, then dead code.
 *
 * PyTorch's exporter writes `x.view(B, T, H, -1)` as Shape -> Gather -> Unsqueeze -> Concat ->
 * Reshape. ckptc compiles for static shapes, so once an input's dims are bound these chains are
 * constants: this pass walks the nodes in order, infers each one's output shapes, and evaluates
 * every node whose op has a constant evaluator (the fold column of ops.def names one of the eval_*
 * functions below) and whose inputs are all constants (Shape only needs a static shape). A folded
 * node's outputs become CONST values and the node disappears.
 *
 * Parameters are never folded into: Transpose(weight) must stay a node so the weight stays
 * trainable. Results larger than fold_max_elems stay run-time nodes, and so does everything once
 * CK_FOLD_TOTAL times that has been folded in all: compile time and memory stay linear in the file
 * even when thousands of nodes share one large constant.
 * The evaluator works element by element through ck_value_get/set (int64 arithmetic for integer
 * dtypes, double for floats): these tensors are shape-sized, not activation-sized.
 */
#include "ck_frontend.h"

#include <math.h>
#include <string.h>


/* Advances a row-major multi-index over dims; flat order. */
static void next_index(int64_t *idx, const int64_t *dims, int rank) {
    for (int k = rank - 1; k >= 0; k--) {
        if (++idx[k] < dims[k]) return;
        idx[k] = 0;
    }
}

/* Offset into `in` for output multi-index idx under numpy broadcasting (right-aligned). */
static int64_t bcast_offset(const ck_value *in, const int64_t *idx, int out_rank) {
    int64_t off = 0;
    for (int k = 0; k < in->rank; k++) {
        int64_t i = idx[out_rank - in->rank + k];
        off = off * in->dims[k] + (in->dims[k] == 1 ? 0 : i);
    }
    return off;
}

static void copy_elem(ck_value *dst, int64_t di, const ck_value *src, int64_t si) {
    size_t es = ck_dtype_size(dst->dtype);
    memcpy((char *)dst->data + (size_t)di * es, (const char *)src->data + (size_t)si * es, es);
}

static bool eval_binary(ck_node *n, ck_value *o) {
    const ck_value *a = n->in[0], *b = n->in[1];
    int64_t idx[CK_MAX_RANK] = {0}, cnt = ck_value_numel(o);
    bool isint = !ck_dtype_is_float(a->dtype);
    for (int64_t i = 0; i < cnt; i++, next_index(idx, o->dims, o->rank)) {
        int64_t ia = bcast_offset(a, idx, o->rank), ib = bcast_offset(b, idx, o->rank);
        if (isint) {
            int64_t x = ck_value_get_i(a, ia), y = ck_value_get_i(b, ib), r;
            switch (n->op) {
            case CK_OP_ADD: r = (int64_t)((uint64_t)x + (uint64_t)y); break;
            case CK_OP_SUB: r = (int64_t)((uint64_t)x - (uint64_t)y); break;
            case CK_OP_MUL: r = (int64_t)((uint64_t)x * (uint64_t)y); break;
            case CK_OP_DIV:
                if (y == 0 || (x == INT64_MIN && y == -1)) return false;
                r = x / y;
                break;
            case CK_OP_POW: ck_value_set_f(o, i, pow((double)x, ck_value_get_f(b, ib))); continue; /* saturates */
            case CK_OP_MOD:
                if (y == 0) return false; /* left to run time, which reports it */
                r = y == -1 ? 0 : x % y;
                if (r != 0 && (r < 0) != (y < 0) && !ck_attr_int(n, "fmod", 0)) r += y;
                break;
            case CK_OP_EQUAL: r = x == y; break;
            case CK_OP_LESS: r = x < y; break;
            case CK_OP_GREATER: r = x > y; break;
            default: return false;
            }
            ck_value_set_i(o, i, r);
        } else {
            double x = ck_value_get_f(a, ia), y = ck_value_get_f(b, ib), r;
            switch (n->op) {
            case CK_OP_ADD: r = x + y; break;
            case CK_OP_SUB: r = x - y; break;
            case CK_OP_MUL: r = x * y; break;
            case CK_OP_DIV: r = x / y; break;
            case CK_OP_POW: r = pow(x, y); break;
            case CK_OP_MOD: r = fmod(x, y); break; /* floats need fmod=1 */
            case CK_OP_EQUAL: r = x == y; break;
            case CK_OP_LESS: r = x < y; break;
            case CK_OP_GREATER: r = x > y; break;
            default: return false;
            }
            ck_value_set_f(o, i, r);
        }
    }
    return true;
}

static bool eval_unary(ck_node *n, ck_value *o) {
    const ck_value *x = n->in[0];
    int64_t cnt = ck_value_numel(o);
    for (int64_t i = 0; i < cnt; i++) {
        if (!ck_dtype_is_float(x->dtype)) {
            int64_t v = ck_value_get_i(x, i);
            switch (n->op) {
            case CK_OP_NEG: v = (int64_t)(0 - (uint64_t)v); break;
            case CK_OP_ABS: v = v < 0 ? (int64_t)(0 - (uint64_t)v) : v; break;
            case CK_OP_NOT: v = !v; break;
            default: return false; /* Sqrt/Reciprocal of integers: leave to run time */
            }
            ck_value_set_i(o, i, v);
        } else {
            double v = ck_value_get_f(x, i);
            switch (n->op) {
            case CK_OP_NEG: v = -v; break;
            case CK_OP_ABS: v = fabs(v); break;
            case CK_OP_SQRT: v = sqrt(v); break;
            case CK_OP_RECIPROCAL: v = 1.0 / v; break;
            default: return false;
            }
            ck_value_set_f(o, i, v);
        }
    }
    return true;
}

static bool eval_cast(ck_node *n, ck_value *o) {
    const ck_value *x = n->in[0];
    int64_t cnt = ck_value_numel(o);
    if (o->dtype == CK_F16) return false;
    for (int64_t i = 0; i < cnt; i++) {
        if (ck_dtype_is_float(o->dtype) || (ck_dtype_is_float(x->dtype) && o->dtype == CK_BOOL))
            ck_value_set_f(o, i, ck_value_get_f(x, i));
        else if (ck_dtype_is_float(x->dtype)) {
            double v = ck_value_get_f(x, i);
            if (!(v > -9.2e18 && v < 9.2e18)) return false; /* NaN/inf/out of range: leave to run time */
            ck_value_set_i(o, i, (int64_t)v);
        } else
            ck_value_set_i(o, i, ck_value_get_i(x, i));
    }
    return true;
}

static bool eval_where(ck_node *n, ck_value *o) {
    int64_t idx[CK_MAX_RANK] = {0}, cnt = ck_value_numel(o);
    for (int64_t i = 0; i < cnt; i++, next_index(idx, o->dims, o->rank)) {
        bool c = ck_value_get_i(n->in[0], bcast_offset(n->in[0], idx, o->rank)) != 0;
        const ck_value *src = n->in[c ? 1 : 2];
        copy_elem(o, i, src, bcast_offset(src, idx, o->rank));
    }
    return true;
}

static bool eval_concat(ck_node *n, ck_value *o) {
    int64_t axis = ck_attr_int(n, "axis", 0);
    if (axis < 0) axis += o->rank;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; k++) outer *= o->dims[k];
    for (int k = (int)axis + 1; k < o->rank; k++) inner *= o->dims[k];
    size_t es = ck_dtype_size(o->dtype);
    char *dst = o->data;
    for (int64_t i = 0; i < outer; i++)
        for (int k = 0; k < n->n_in; k++) {
            size_t chunk = (size_t)(n->in[k]->dims[axis] * inner) * es;
            memcpy(dst, (const char *)n->in[k]->data + (size_t)i * chunk, chunk);
            dst += chunk;
        }
    return true;
}

static bool eval_split(ck_node *n, ck_value *out0) {
    (void)out0; /* writes every output */
    const ck_value *x = n->in[0];
    int64_t axis = ck_attr_int(n, "axis", 0);
    if (axis < 0) axis += x->rank;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; k++) outer *= x->dims[k];
    for (int k = (int)axis + 1; k < x->rank; k++) inner *= x->dims[k];
    size_t es = ck_dtype_size(x->dtype), row = (size_t)(x->dims[axis] * inner) * es;
    size_t off = 0;
    for (int k = 0; k < n->n_out; k++)
        if (!n->out[k]) return false;
    for (int k = 0; k < n->n_out; k++) {
        ck_value *o = n->out[k];
        size_t chunk = (size_t)(o->dims[axis] * inner) * es;
        for (int64_t i = 0; i < outer; i++)
                memcpy((char *)o->data + (size_t)i * chunk, (const char *)x->data + (size_t)i * row + off, chunk);
        off += chunk;
    }
    return true;
}

static bool eval_slice(ck_node *n, ck_value *o) {
    int64_t start[CK_MAX_RANK], step[CK_MAX_RANK], count[CK_MAX_RANK];
    if (ck_slice_params(n, start, step, count, NULL)) return false;
    const ck_value *x = n->in[0];
    int64_t idx[CK_MAX_RANK] = {0}, cnt = ck_value_numel(o);
    for (int64_t i = 0; i < cnt; i++, next_index(idx, o->dims, o->rank)) {
        int64_t off = 0;
        for (int k = 0; k < x->rank; k++) off = off * x->dims[k] + start[k] + idx[k] * step[k];
        copy_elem(o, i, x, off);
    }
    return true;
}

/* Pad's source index along one axis of length len for output index o, or -1 (constant mode,
 * outside the input): reflect mirrors with period 2 (len - 1), edge clamps. */
static int64_t pad_axis_src(int64_t o, int64_t len, int64_t begin, int mode) {
    int64_t t = o - begin;
    if (t >= 0 && t < len) return t;
    if (mode == CK_PAD_CONSTANT) return -1;
    if (mode == CK_PAD_EDGE || len == 1) return t < 0 ? 0 : len - 1;
    int64_t p = 2 * (len - 1);
    t %= p;
    if (t < 0) t += p;
    return t < len ? t : p - t;
}

static bool eval_pad(ck_node *n, ck_value *o) {
    int64_t begin[CK_MAX_RANK], end[CK_MAX_RANK];
    int mode;
    if (ck_pad_params(n, begin, end, &mode, NULL)) return false;
    const ck_value *x = n->in[0];
    const ck_value *cv = n->n_in > 2 ? n->in[2] : NULL;
    const ck_attr *va = ck_attr_find(n, "value"); /* before opset 11 */
    int64_t idx[CK_MAX_RANK] = {0}, cnt = ck_value_numel(o);
    for (int64_t i = 0; i < cnt; i++, next_index(idx, o->dims, o->rank)) {
        int64_t off = 0;
        for (int k = 0; k < x->rank && off >= 0; k++) {
            int64_t s = pad_axis_src(idx[k], x->dims[k], begin[k], mode);
            off = s < 0 ? -1 : off * x->dims[k] + s;
        }
        if (off >= 0) copy_elem(o, i, x, off);
        else if (cv) copy_elem(o, i, cv, 0);
        else if (va && ck_dtype_is_float(o->dtype)) ck_value_set_f(o, i, va->f);
        else ck_value_set_i(o, i, 0);
    }
    return true;
}

static bool eval_gather(ck_node *n, ck_value *o) {
    const ck_value *x = n->in[0], *ix = n->in[1];
    int64_t axis = ck_attr_int(n, "axis", 0);
    if (axis < 0) axis += x->rank;
    int64_t outer = 1, inner = 1, ni = ck_value_numel(ix), dim = x->dims[axis];
    for (int k = 0; k < axis; k++) outer *= x->dims[k];
    for (int k = (int)axis + 1; k < x->rank; k++) inner *= x->dims[k];
    int64_t di = 0;
    for (int64_t a = 0; a < outer; a++)
        for (int64_t j = 0; j < ni; j++) {
            int64_t v = ck_value_get_i(ix, j);
            if (v < 0) v += dim;
            if (v < 0 || v >= dim) return false; /* inference range-checks only small index tensors */
            for (int64_t b = 0; b < inner; b++) copy_elem(o, di++, x, (a * dim + v) * inner + b);
        }
    return true;
}

/* ScatterND / GatherND: the row of data (its first k dims) index tuple j addresses, or -1 when
 * out of range (inference range-checks only small index tensors). */
static int64_t nd_row(const ck_value *x, const ck_value *idx, int64_t j, int k) {
    int64_t row = 0;
    for (int t = 0; t < k; t++) {
        int64_t v = ck_value_get_i(idx, j * k + t), dim = x->dims[t];
        if (v < -dim || v >= dim) return -1;
        row = row * dim + (v < 0 ? v + dim : v);
    }
    return row;
}

/* updates applied in index order: a repeated index keeps the last (none) or accumulates */
static bool eval_scatter_nd(ck_node *n, ck_value *o) {
    const ck_value *x = n->in[0], *idx = n->in[1], *u = n->in[2];
    int k = (int)idx->dims[idx->rank - 1];
    int64_t inner = 1, cnt = 1;
    for (int t = 0; t < idx->rank - 1; t++) cnt *= idx->dims[t];
    for (int t = k; t < x->rank; t++) inner *= x->dims[t];
    const char *red = ck_attr_str(n, "reduction", "none");
    bool add = strcmp(red, "add") == 0, mul = strcmp(red, "mul") == 0, isint = !ck_dtype_is_float(o->dtype);
    memcpy(o->data, x->data, ck_value_bytes(o));
    for (int64_t j = 0; j < cnt; j++) {
        int64_t row = nd_row(x, idx, j, k);
        if (row < 0) return false;
        for (int64_t r = 0; r < inner; r++) {
            int64_t at = row * inner + r, from = j * inner + r;
            if (!add && !mul) copy_elem(o, at, u, from);
            else if (isint && add) ck_value_set_i(o, at, (int64_t)((uint64_t)ck_value_get_i(o, at) + (uint64_t)ck_value_get_i(u, from)));
            else if (isint) ck_value_set_i(o, at, (int64_t)((uint64_t)ck_value_get_i(o, at) * (uint64_t)ck_value_get_i(u, from)));
            else if (add) ck_value_set_f(o, at, ck_value_get_f(o, at) + ck_value_get_f(u, from));
            else ck_value_set_f(o, at, ck_value_get_f(o, at) * ck_value_get_f(u, from));
        }
    }
    return true;
}

static bool eval_gather_nd(ck_node *n, ck_value *o) {
    const ck_value *x = n->in[0], *idx = n->in[1];
    int k = (int)idx->dims[idx->rank - 1];
    int64_t inner = 1, cnt = ck_value_numel(o);
    for (int t = k; t < x->rank; t++) inner *= x->dims[t];
    for (int64_t i = 0; i < cnt; i++) {
        int64_t row = nd_row(x, idx, i / inner, k);
        if (row < 0) return false;
        copy_elem(o, i, x, row * inner + i % inner);
    }
    return true;
}

static bool eval_transpose(ck_node *n, ck_value *o) {
    const ck_value *x = n->in[0];
    const ck_attr *pa = ck_attr_find(n, "perm");
    int64_t perm[CK_MAX_RANK], idx[CK_MAX_RANK] = {0}, cnt = ck_value_numel(o);
    for (int k = 0; k < x->rank; k++) perm[k] = pa && pa->kind == CK_ATTR_INTS ? pa->ints[k] : x->rank - 1 - k;
    for (int64_t i = 0; i < cnt; i++, next_index(idx, o->dims, o->rank)) {
        int64_t src[CK_MAX_RANK], off = 0;
        for (int k = 0; k < x->rank; k++) src[perm[k]] = idx[k];
        for (int k = 0; k < x->rank; k++) off = off * x->dims[k] + src[k];
        copy_elem(o, i, x, off);
    }
    return true;
}

static bool eval_expand(ck_node *n, ck_value *o) {
    int64_t idx[CK_MAX_RANK] = {0}, cnt = ck_value_numel(o);
    for (int64_t i = 0; i < cnt; i++, next_index(idx, o->dims, o->rank)) copy_elem(o, i, n->in[0], bcast_offset(n->in[0], idx, o->rank));
    return true;
}

static bool eval_trilu(ck_node *n, ck_value *o) {
    const ck_value *x = n->in[0];
    int64_t k = n->n_in > 1 && n->in[1] ? ck_value_get_i(n->in[1], 0) : 0;
    bool upper = ck_attr_int(n, "upper", 1) != 0;
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1], cnt = ck_value_numel(o);
    memset(o->data, 0, ck_value_bytes(o));
    for (int64_t i = 0; i < cnt; i++) {
        int64_t c = i % cols, r = (i / cols) % rows;
        if (upper ? c - r >= k : c - r <= k) copy_elem(o, i, x, i);
    }
    return true;
}

static bool eval_shape(ck_node *n, ck_value *o) {
    int64_t lo, hi;
    ck_shape_range(n, &lo, &hi);
    for (int64_t k = lo; k < hi; k++) ck_value_set_i(o, k - lo, n->in[0]->dims[k]);
    return true;
}

/* Identity and the reshapes: the same elements */
static bool eval_copy(ck_node *n, ck_value *o) {
    memcpy(o->data, n->in[0]->data, ck_value_bytes(o));
    return true;
}

static bool eval_constant_of_shape(ck_node *n, ck_value *o) {
    const ck_attr *a = ck_attr_find(n, "value");
    size_t es = ck_dtype_size(o->dtype);
    for (int64_t i = 0, c = ck_value_numel(o); i < c; i++) {
        if (a) memcpy((char *)o->data + (size_t)i * es, a->t->data, es);
        else ((float *)o->data)[i] = 0.0f;
    }
    return true;
}

static bool eval_range(ck_node *n, ck_value *o) {
    const ck_value *s = n->in[0], *dl = n->in[2];
    for (int64_t i = 0, c = ck_value_numel(o); i < c; i++) {
        if (ck_dtype_is_float(o->dtype)) ck_value_set_f(o, i, ck_value_get_f(s, 0) + (double)i * ck_value_get_f(dl, 0));
        else ck_value_set_i(o, i, ck_value_get_i(s, 0) + i * ck_value_get_i(dl, 0));
    }
    return true;
}

/* The constant evaluator of each op (ops.def's fold column; NULL: never folded). Each computes
 * the node's outputs from its constant inputs (o: output 0) or returns false to leave the node
 * to run time. */
static bool (*const eval_fns[CK_OP_COUNT])(ck_node *n, ck_value *o) = {
#define CK_OP(e, onnx, in_min, in_max, out_min, out_max, flags, diff, infer, grad, kernel, ws, flops, fold, view, in_place) \
    [CK_OP_##e] = fold,
#include "ops.def"
#undef CK_OP
};

static bool eval_node(ck_node *n, ck_value *o) {
    /* empty results need no evaluation; the loops below would still walk outer dims that can be
     * 2^51 long when an inner dim is 0 */
    bool empty = true;
    for (int k = 0; k < n->n_out; k++) empty = empty && (!n->out[k] || ck_value_numel(n->out[k]) == 0);
    if (empty) return true;
    return eval_fns[n->op](n, o);
}

/* Can n be evaluated now? Its inputs must be constants (never params or buffers). */
static bool foldable(const ck_node *n, int64_t max_elems) {
    if (!eval_fns[n->op]) return false;
    if (n->op != CK_OP_SHAPE)
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] && (n->in[i]->role != CK_ROLE_CONST || !n->in[i]->data)) return false;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k] && (ck_value_numel(n->out[k]) > max_elems || n->out[k]->dtype == CK_F16)) return false;
    return true;
}

/* Pow(float x, constant integer e): the exponent becomes a float constant, so one kernel (float
 * base and exponent) runs every Pow an exporter writes (x ** 2 comes out with an int64 2). */
static void pow_float_exponent(ck_graph *g, ck_node *n, int64_t *budget) {
    if (n->op != CK_OP_POW || n->n_in != 2 || !n->in[0] || !n->in[1]) return;
    ck_value *e = n->in[1];
    if (!ck_dtype_is_float(n->in[0]->dtype) || !ck_dtype_is_int(e->dtype) || !e->data || e->role != CK_ROLE_CONST) return;
    if (ck_value_numel(e) > *budget) return; /* a copy per node: paid from the folding budget */
    *budget -= ck_value_numel(e);
    ck_value *f = ck_graph_add_value(g, e->name, n->in[0]->dtype, e->rank, e->dims, CK_ROLE_CONST);
    f->data = ck_arena_alloc(g->arena, ck_value_bytes(f) + 1);
    for (int64_t k = 0, c = ck_value_numel(e); k < c; k++) ck_value_set_f(f, k, (double)ck_value_get_i(e, k));
    n->in[1] = f;
}

/* Elements of all folded results together, in units of fold_max_elems. */
#define CK_FOLD_TOTAL 64

static int64_t out_elems(const ck_node *n) {
    int64_t c = 0;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k]) c += ck_value_numel(n->out[k]); /* each at most fold_max_elems when foldable */
    return c;
}

ck_status ck_frontend_fold(ck_graph *g, int64_t fold_max_elems, ck_diag *d) {
    int kept = 0;
    int64_t budget = fold_max_elems > INT64_MAX / CK_FOLD_TOTAL ? INT64_MAX : fold_max_elems * CK_FOLD_TOTAL;
    for (int i = 0; i < g->n_nodes; i++) {
        ck_node *n = g->nodes[i];
        pow_float_exponent(g, n, &budget);
        ck_status st = ck_infer_node(n, d);
        if (st) return st;
        bool folded = false;
        if (foldable(n, fold_max_elems) && out_elems(n) <= budget) {
            budget -= out_elems(n);
            bool ok = true;
            for (int k = 0; k < n->n_out && ok; k++)
                if (n->out[k]) ok = (n->out[k]->data = ck_arena_alloc(g->arena, ck_value_bytes(n->out[k]) + 1)) != NULL;
            folded = ok && eval_node(n, n->out[0]);
            for (int k = 0; k < n->n_out; k++) {
                if (!n->out[k]) continue;
                if (folded) {
                    n->out[k]->role = CK_ROLE_CONST;
                    n->out[k]->producer = NULL;
                } else {
                    n->out[k]->data = NULL;
                }
            }
        }
        if (!folded) g->nodes[kept++] = n;
    }
    g->n_nodes = kept;
    ck_graph_remove_dead(g);
    return CK_OK;
}
