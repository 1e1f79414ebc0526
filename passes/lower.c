/* lower.c — rewrites of the forward graph, before the loss and autodiff, that make the training
 * step cheaper in time and memory without changing what it computes (beyond float rounding).
 *
 * Exporters spell a Linear layer as MatMul(x, Transpose(W)) on (B, T, K) activations, and GELU
 * as five elementwise nodes. Taken literally, the first materializes W^T every step, keeps it for
 * the backward, runs B small GEMMs instead of one, and its gradient transposes again and sums a
 * (B, K, N) batch of partial products; the second keeps four (B, T, 4d) intermediates for the
 * backward where one is enough. So:
 *
 *   MatMul(A: (..., M, K), B: (K, N))       -> Reshape(Gemm(Reshape(A, (prod(...)*M, K)), B), (..., M, N))
 *     with B = Transpose(W: (N, K))            Gemm(..., W, transB=1): no transpose at all
 *   Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)  -> Gelu(x)   (any operand order)
 *
 *   Einsum(A, B)                            -> ReduceSum of the letters only one operand has, then
 *                                              Transpose both to (batch, free, contracted), Reshape to
 *                                              3-D, one batched MatMul, Reshape, Transpose to the output
 *     (ckptc has no Einsum kernel: this is how it runs; what it accepts: ir/einsum.c)
 *   ReduceL1(x) / ReduceSumSquare(x) / ReduceL2(x) -> ReduceSum(Abs(x)) / ReduceSum(x*x) / Sqrt(ReduceSum(x*x))
 *     (same axes and keepdims; L2's gradient is infinite where a norm is 0, as Sqrt's is)
 *   InstanceNormalization(x, scale, B)      -> Reshape(LayerNormalization(Reshape(x, (N, C, S)), ones(S))
 *                                              * Reshape(scale, (C, 1)) + Reshape(B, (C, 1)), x's shape)
 *     (GroupNorm exports as Reshape, InstanceNormalization over the groups, Reshape, Mul, Add)
 *   Resize(x, ...)                          -> per changed axis Gather(y, i0) (nearest), or
 *                                              Gather(y, i0) * (1 - w) + Gather(y, i1) * w (linear),
 *                                              constant indices and weights (ir/resize.c)
 *   ConvTranspose(x, w, B)                  -> Conv(Pad(x with stride - 1 zeros between elements),
 *                                              w flipped and its channel axes swapped, B) at stride 1
 *                                              (ir/convt.c)
 *
 * Reshapes are views (no bytes), Gemm's gradient uses its trans flags (no transposes), and Gelu's
 * gradient reads only x. LSTM, GRU and RNN nodes are unrolled over their sequence by lower_rnn.c
 * (its header says how), with the helpers lower.h shares. Each replacement keeps the replaced node's name, so scope-based
 * checkpoint policies see the same blocks; the last new node produces the original output value,
 * so everything downstream (graph outputs, names in reports) is unchanged.
 */
#include "lower.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends n to the new schedule, growing it (an unrolled LSTM adds many nodes per node). */
static void push(ck_lower *L, ck_node *n) {
    if (L->n_out == L->cap_out) {
        int cap = L->cap_out * 2 + 64;
        ck_node **grown = realloc(L->out, sizeof *grown * (size_t)cap);
        CK_ASSERT(grown);
        L->out = grown, L->cap_out = cap;
    }
    L->out[L->n_out++] = n;
}

ck_node *ck_lower_emit(ck_lower *L, ck_op op, const char *name, int n_in, ck_value **in, int n_out) {
    ck_node *n = ck_graph_new_node(L->g, op, name, n_in, in, n_out); /* scheduled in the new order only */
    push(L, n);
    return n;
}

static ck_node *emit(ck_lower *L, ck_op op, const char *name, int n_in, ck_value **in) {
    return ck_lower_emit(L, op, name, n_in, in, 1);
}

void ck_lower_set_int(ck_lower *L, ck_node *n, const char *name, int64_t v) {
    ck_node_add_attr(L->g, n, (ck_attr){.name = name, .kind = CK_ATTR_INT, .i = v});
}

/* A constant of dtype dt and shape dims[0..rank) holding the bytes at v (zeros when v is NULL), its
 * data in the graph's arena: every constant the lowering makes. */
static ck_value *const_of(ck_lower *L, const char *name, ck_dtype dt, int rank, const int64_t *dims, const void *v) {
    ck_value *c = ck_graph_add_value(L->g, name, dt, rank, dims, CK_ROLE_CONST);
    size_t bytes = ck_value_bytes(c);
    c->data = ck_arena_alloc(L->g->arena, bytes + sizeof(int64_t)); /* never 0 bytes */
    CK_ASSERT(c->data);
    if (v) memcpy(c->data, v, bytes);
    return c;
}

ck_value *ck_lower_shape_const(ck_lower *L, int rank, const int64_t *dims) {
    int64_t k = rank;
    return const_of(L, "shape", CK_I64, 1, &k, dims);
}

ck_status ck_lower_adopt_output(ck_lower *L, ck_node *n, ck_value *v, ck_diag *d) {
    (void)L;
    ck_status st = ck_infer_node(n, d);
    if (st) return st;
    ck_value *fresh = n->out[0];
    CK_ASSERT(fresh->dtype == v->dtype && fresh->rank == v->rank &&
              memcmp(fresh->dims, v->dims, sizeof(int64_t) * (size_t)v->rank) == 0);
    fresh->producer = NULL;
    n->out[0] = v;
    v->producer = n;
    return CK_OK;
}

/* An INTS attribute holding v[0..cnt) (copied into the graph arena). */
static void set_ints(ck_lower *L, ck_node *n, const char *name, int cnt, const int64_t *v) {
    int64_t *a = ck_arena_alloc(L->g->arena, sizeof(int64_t) * (size_t)(cnt + 1));
    CK_ASSERT(a);
    memcpy(a, v, sizeof(int64_t) * (size_t)cnt);
    ck_node_add_attr(L->g, n, (ck_attr){.name = name, .kind = CK_ATTR_INTS, .n = cnt, .ints = a});
}

ck_value *ck_lower_reshape(ck_lower *L, const char *name, ck_value *x, int rank, const int64_t *dims, ck_diag *d) {
    ck_node *r = emit(L, CK_OP_RESHAPE, name, 2, (ck_value *[]){x, ck_lower_shape_const(L, rank, dims)});
    return ck_infer_node(r, d) ? NULL : r->out[0];
}

#define set_int ck_lower_set_int
#define shape_const ck_lower_shape_const
#define adopt_output ck_lower_adopt_output
#define reshape ck_lower_reshape

static bool has_zero_dim(const ck_value *v) {
    for (int i = 0; i < v->rank; i++)
        if (v->dims[i] == 0) return true;
    return false;
}

/* MatMul with a 2-D float right operand -> Gemm on the flattened rows. Returns true when done. */
static bool lower_matmul(ck_lower *L, ck_node *n, ck_diag *d, ck_status *st) {
    ck_value *A = n->in[0], *B = n->in[1], *Y = n->out[0];
    if (A->dtype != CK_F32 || B->dtype != CK_F32 || A->rank < 2 || B->rank != 2) return false;
    if (has_zero_dim(A) || has_zero_dim(B)) return false;
    int trans_b = 0;
    ck_node *t = B->producer;
    if (t && t->op == CK_OP_TRANSPOSE && t->in[0]->rank == 2 && L->uses[B->id] == 1) {
        const ck_attr *perm = ck_attr_find(t, "perm"); /* absent: reverse, which is the swap */
        if (!perm || (perm->n == 2 && perm->ints[0] == 1 && perm->ints[1] == 0)) {
            B = t->in[0];
            trans_b = 1;
        }
    }
    char name[512];
    ck_value *A2 = A;
    if (A->rank > 2) {
        int64_t rows = 1;
        for (int i = 0; i < A->rank - 1; i++) rows *= A->dims[i];
        snprintf(name, sizeof name, "%s/rows", n->name);
        A2 = reshape(L, name, A, 2, (int64_t[]){rows, A->dims[A->rank - 1]}, d);
        if (!A2) return *st = CK_ERR_SHAPE, true;
    }
    ck_node *gm = emit(L, CK_OP_GEMM, n->name, 2, (ck_value *[]){A2, B});
    if (trans_b) set_int(L, gm, "transB", 1);
    if (A->rank == 2) {
        *st = adopt_output(L, gm, Y, d);
        return true;
    }
    if ((*st = ck_infer_node(gm, d))) return true;
    snprintf(name, sizeof name, "%s/unrows", n->name);
    ck_node *r = emit(L, CK_OP_RESHAPE, name, 2, (ck_value *[]){gm->out[0], shape_const(L, Y->rank, Y->dims)});
    *st = adopt_output(L, r, Y, d);
    return true;
}

/* The scalar float constant c holds, or NAN. */
static double scalar_const(const ck_value *c) {
    if (!c || c->role != CK_ROLE_CONST || !c->data || !ck_dtype_is_float(c->dtype) || ck_value_numel(c) != 1) return NAN;
    return ck_value_get_f(c, 0);
}

/* The operand of binary node n (op) that is not the scalar constant `k`, or NULL. */
static ck_value *other_than_const(const ck_node *n, ck_op op, double k) {
    if (!n || n->op != op || n->n_in != 2) return NULL;
    for (int i = 0; i < 2; i++)
        if (fabs(scalar_const(n->in[i]) - k) <= 1e-6 * fabs(k)) return n->in[1 - i];
    return NULL;
}

/* Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5) -> Gelu(x); every intermediate used once. */
static bool lower_gelu(ck_lower *L, ck_node *n, ck_diag *d, ck_status *st) {
    ck_value *t = other_than_const(n, CK_OP_MUL, 0.5), *Y = n->out[0];
    if (!t || Y->dtype != CK_F32 || !t->producer || t->producer->op != CK_OP_MUL || L->uses[t->id] != 1) return false;
    ck_node *m = t->producer;
    for (int i = 0; i < 2; i++) {
        ck_value *x = m->in[i], *u = m->in[1 - i];
        if (!u->producer || L->uses[u->id] != 1) continue;
        ck_value *e = other_than_const(u->producer, CK_OP_ADD, 1.0);
        if (!e || !e->producer || e->producer->op != CK_OP_ERF || L->uses[e->id] != 1) continue;
        ck_value *q = e->producer->in[0];
        if (!q->producer || L->uses[q->id] != 1) continue;
        ck_node *dv = q->producer;
        bool div = dv->op == CK_OP_DIV && dv->in[0] == x && fabs(scalar_const(dv->in[1]) - sqrt(2.0)) <= 1e-6;
        bool mul = other_than_const(dv, CK_OP_MUL, sqrt(0.5)) == x;
        if (!div && !mul) continue;
        if (x->rank != Y->rank || memcmp(x->dims, Y->dims, sizeof(int64_t) * (size_t)Y->rank) != 0) continue;
        ck_node *gl = emit(L, CK_OP_GELU, n->name, 1, &x);
        *st = adopt_output(L, gl, Y, d);
        return true;
    }
    return false;
}

/* ---------------------------------------------------------------- Einsum */

static ck_value *transpose(ck_lower *L, const char *name, ck_value *x, const int *perm, ck_diag *d) {
    bool identity = true;
    for (int i = 0; i < x->rank; i++) identity &= perm[i] == i;
    if (identity) return x;
    ck_node *t = emit(L, CK_OP_TRANSPOSE, name, 1, &x);
    int64_t p[CK_MAX_RANK];
    for (int i = 0; i < x->rank; i++) p[i] = perm[i];
    set_ints(L, t, "perm", x->rank, p);
    return ck_infer_node(t, d) ? NULL : t->out[0];
}

static ck_value *reshape_if(ck_lower *L, const char *name, ck_value *x, int rank, const int64_t *dims, ck_diag *d) {
    if (rank == x->rank && memcmp(dims, x->dims, sizeof(int64_t) * (size_t)rank) == 0) return x;
    return reshape(L, name, x, rank, dims, d);
}

/* Sums operand t over the letters neither the other operand nor the output has; drops them
 * from its term. */
static ck_value *einsum_reduce(ck_lower *L, const char *name, ck_einsum *e, int t, ck_value *x, ck_diag *d) {
    int64_t axes[CK_MAX_RANK];
    int na = 0, keep = 0;
    for (int i = 0; i < e->n[t]; i++) {
        char c = e->term[t][i];
        bool other = e->n_terms == 2 && memchr(e->term[1 - t], c, (size_t)e->n[1 - t]);
        if (!other && !memchr(e->out, c, (size_t)e->n_out)) axes[na++] = i;
        else e->term[t][keep++] = c;
    }
    if (na == 0) return x;
    e->n[t] = keep;
    ck_node *r = emit(L, CK_OP_REDUCE_SUM, name, 2, (ck_value *[]){x, shape_const(L, na, axes)});
    set_int(L, r, "keepdims", 0);
    return ck_infer_node(r, d) ? NULL : r->out[0];
}

/* The positions in `term` of the letters of `want` (in want's order). */
static int letters_at(const char *term, int n, const char *want, int nw, int *pos) {
    for (int i = 0; i < nw; i++) pos[i] = (int)((const char *)memchr(term, want[i], (size_t)n) - term);
    return nw;
}

static int64_t prod_of(const ck_value *x, const int *pos, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= x->dims[pos[i]];
    return p;
}

/* Two operands: batch letters (both and the output), contracted (both, not the output), each
 * operand's free letters; A -> (batch, M, K), B -> (batch, K, N), MatMul, back to letters. */
static ck_value *einsum_matmul(ck_lower *L, const char *name, const ck_einsum *e, ck_value *A, ck_value *B, char *letters,
                               int *nl, ck_diag *d) {
    char bat[CK_MAX_RANK], con[CK_MAX_RANK], fa[CK_MAX_RANK], fb[CK_MAX_RANK];
    int nb = 0, nc = 0, na = 0, nfb = 0;
    for (int i = 0; i < e->n_out; i++) {
        char c = e->out[i];
        bool a = memchr(e->term[0], c, (size_t)e->n[0]), b = memchr(e->term[1], c, (size_t)e->n[1]);
        if (a && b) bat[nb++] = c;
        else if (a) fa[na++] = c;
        else fb[nfb++] = c;
    }
    for (int i = 0; i < e->n[0]; i++)
        if (!memchr(e->out, e->term[0][i], (size_t)e->n_out)) con[nc++] = e->term[0][i];
    int pa[CK_MAX_RANK], pb[CK_MAX_RANK], k = 0;
    k += letters_at(e->term[0], e->n[0], bat, nb, pa + k);
    k += letters_at(e->term[0], e->n[0], fa, na, pa + k);
    letters_at(e->term[0], e->n[0], con, nc, pa + k);
    k = letters_at(e->term[1], e->n[1], bat, nb, pb);
    k += letters_at(e->term[1], e->n[1], con, nc, pb + k);
    letters_at(e->term[1], e->n[1], fb, nfb, pb + k);
    int64_t nbat = prod_of(A, pa, nb), M = prod_of(A, pa + nb, na), K = prod_of(A, pa + nb + na, nc),
            N = prod_of(B, pb + nb + nc, nfb);
    int64_t out_dims[CK_MAX_RANK];
    int r = 0;
    for (int i = 0; i < nb; i++) out_dims[r] = A->dims[pa[i]], letters[r++] = bat[i];
    for (int i = 0; i < na; i++) out_dims[r] = A->dims[pa[nb + i]], letters[r++] = fa[i];
    for (int i = 0; i < nfb; i++) out_dims[r] = B->dims[pb[nb + nc + i]], letters[r++] = fb[i];
    *nl = r;
    char nm[600];
    snprintf(nm, sizeof nm, "%s/a", name);
    A = transpose(L, nm, A, pa, d);
    if (A) A = reshape_if(L, nm, A, 3, (int64_t[]){nbat, M, K}, d);
    snprintf(nm, sizeof nm, "%s/b", name);
    if (A) B = transpose(L, nm, B, pb, d);
    if (A && B) B = reshape_if(L, nm, B, 3, (int64_t[]){nbat, K, N}, d);
    if (!A || !B) return NULL;
    ck_node *mm = emit(L, CK_OP_MATMUL, name, 2, (ck_value *[]){A, B});
    if (ck_infer_node(mm, d)) return NULL;
    snprintf(nm, sizeof nm, "%s/y", name);
    return reshape_if(L, nm, mm->out[0], r, out_dims, d);
}

static bool lower_einsum(ck_lower *L, ck_node *n, ck_diag *d, ck_status *st) {
    ck_einsum e;
    char err[200], letters[CK_MAX_RANK];
    bool ok = ck_einsum_parse(ck_attr_str(n, "equation", ""), n->n_in, &e, err, sizeof err);
    CK_ASSERT(ok); /* ck_infer_einsum accepted it */
    ck_value *x[2] = {n->in[0], n->n_in > 1 ? n->in[1] : NULL}, *y = NULL;
    int nl = 0, first = L->n_out;
    for (int t = 0; t < e.n_terms; t++)
        if (!(x[t] = einsum_reduce(L, n->name, &e, t, x[t], d))) return *st = CK_ERR_SHAPE, true;
    if (e.n_terms == 2) {
        y = einsum_matmul(L, n->name, &e, x[0], x[1], letters, &nl, d);
    } else {
        y = x[0];
        memcpy(letters, e.term[0], (size_t)e.n[0]);
        nl = e.n[0];
    }
    int perm[CK_MAX_RANK];
    if (y) letters_at(letters, nl, e.out, e.n_out, perm);
    if (y) y = transpose(L, n->name, y, perm, d);
    if (!y) return *st = CK_ERR_SHAPE, true;
    ck_node *last = L->n_out > first ? L->out[L->n_out - 1] : NULL;
    if (!last || last->out[0] != y) last = emit(L, CK_OP_IDENTITY, n->name, 1, &y); /* "ij->ij": nothing emitted */
    *st = adopt_output(L, last, n->out[0], d);
    return true;
}

/* ---------------------------------------------------------------- ReduceL1, ReduceL2, ReduceSumSquare */

static bool lower_reduce_norm(ck_lower *L, ck_node *n, ck_diag *d, ck_status *st) {
    ck_value *x = n->in[0];
    char nm[600];
    snprintf(nm, sizeof nm, "%s/%s", n->name, n->op == CK_OP_REDUCE_L1 ? "abs" : "square");
    ck_node *e = n->op == CK_OP_REDUCE_L1 ? emit(L, CK_OP_ABS, nm, 1, &x) : emit(L, CK_OP_MUL, nm, 2, (ck_value *[]){x, x});
    if ((*st = ck_infer_node(e, d))) return true;
    ck_value *in[2] = {e->out[0], n->n_in > 1 ? n->in[1] : NULL};
    ck_node *r = emit(L, CK_OP_REDUCE_SUM, n->name, in[1] ? 2 : 1, in);
    for (int i = 0; i < n->n_attr; i++) ck_node_add_attr(L->g, r, n->attr[i]);
    if (n->op != CK_OP_REDUCE_L2) {
        *st = adopt_output(L, r, n->out[0], d);
        return true;
    }
    if ((*st = ck_infer_node(r, d))) return true;
    snprintf(nm, sizeof nm, "%s/sqrt", n->name);
    *st = adopt_output(L, emit(L, CK_OP_SQRT, nm, 1, &r->out[0]), n->out[0], d);
    return true;
}

/* ---------------------------------------------------------------- InstanceNormalization */

/* A 1-D float constant of n ones. */
static ck_value *ones_const(ck_lower *L, int64_t n) {
    ck_value *c = const_of(L, "ones", CK_F32, 1, &n, NULL);
    for (int64_t i = 0; i < n; i++) ((float *)c->data)[i] = 1.0f;
    return c;
}

/* InstanceNormalization(x (N, C, D...), scale, B) -> Reshape(x, (N, C, S)), LayerNormalization over
 * its last axis with a constant scale of ones, then * scale[c] + B[c] on (C, 1) views, Reshape back:
 * the normalization is LayerNormalization's kernel and gradient (mean, then the biased variance,
 * as the spec and PyTorch), the affine two broadcast elementwise nodes (fusion joins them). */
static bool lower_instance_norm(ck_lower *L, ck_node *n, ck_diag *d, ck_status *st) {
    ck_value *x = n->in[0];
    int64_t N = x->dims[0], C = x->dims[1], S = 1;
    for (int i = 2; i < x->rank; i++) S *= x->dims[i];
    char nm[600];
    snprintf(nm, sizeof nm, "%s/rows", n->name);
    ck_value *rows = x->rank == 3 ? x : reshape(L, nm, x, 3, (int64_t[]){N, C, S}, d);
    if (!rows) return *st = CK_ERR_SHAPE, true;
    snprintf(nm, sizeof nm, "%s/norm", n->name);
    ck_node *ln = emit(L, CK_OP_LAYER_NORM, nm, 2, (ck_value *[]){rows, ones_const(L, S)});
    set_int(L, ln, "axis", 2);
    ck_node_add_attr(L->g, ln, (ck_attr){.name = "epsilon", .kind = CK_ATTR_FLOAT, .f = ck_attr_float(n, "epsilon", 1e-5f)});
    if ((*st = ck_infer_node(ln, d))) return true;
    snprintf(nm, sizeof nm, "%s/scale", n->name);
    ck_value *sc = reshape(L, nm, n->in[1], 2, (int64_t[]){C, 1}, d);
    snprintf(nm, sizeof nm, "%s/bias", n->name);
    ck_value *bi = sc ? reshape(L, nm, n->in[2], 2, (int64_t[]){C, 1}, d) : NULL;
    if (!bi) return *st = CK_ERR_SHAPE, true;
    snprintf(nm, sizeof nm, "%s/mul", n->name);
    ck_node *m = emit(L, CK_OP_MUL, nm, 2, (ck_value *[]){ln->out[0], sc});
    if ((*st = ck_infer_node(m, d))) return true;
    snprintf(nm, sizeof nm, "%s/add", n->name);
    ck_node *a = emit(L, CK_OP_ADD, x->rank == 3 ? n->name : nm, 2, (ck_value *[]){m->out[0], bi});
    if (x->rank == 3) return *st = adopt_output(L, a, n->out[0], d), true;
    if ((*st = ck_infer_node(a, d))) return true;
    *st = adopt_output(L, emit(L, CK_OP_RESHAPE, n->name, 2, (ck_value *[]){a->out[0], shape_const(L, x->rank, x->dims)}), n->out[0], d);
    return true;
}

/* ---------------------------------------------------------------- Resize */

/* Gather(x, idx[0..n), axis) with the indices a constant, inferred; NULL on an error (in d). */
static ck_node *gather_axis(ck_lower *L, const char *name, ck_value *x, int axis, const int64_t *idx, int64_t n, ck_diag *d) {
    ck_node *g = emit(L, CK_OP_GATHER, name, 2, (ck_value *[]){x, const_of(L, "indices", CK_I64, 1, &n, idx)});
    set_int(L, g, "axis", axis);
    return ck_infer_node(g, d) ? NULL : g;
}

/* Resize -> for each axis it changes (ir/resize.c: ck_resize_taps), the axis' output positions
 * gathered from constant indices: nearest, one Gather; linear, two Gathers weighted by constants,
 * (1 - w) x[i0] + w x[i1] (a position that needs one tap has w = 0 and i1 = i0). Axes that shrink
 * go first, so the intermediate tensors stay as small as they can. Gather's gradient sums into the
 * input in a fixed order, so the step stays deterministic. */
static bool lower_resize(ck_lower *L, ck_node *n, ck_diag *d, ck_status *st) {
    ck_resize r;
    if ((*st = ck_resize_geometry(n, &r, d))) return true;
    ck_value *x = n->in[0], *y = x;
    ck_node *last = NULL;
    char nm[600];
    for (int pass = 0; pass < 2; pass++)
        for (int a = 0; a < r.rank; a++) {
            int64_t in = x->dims[a], out = r.out[a];
            if ((pass == 0) != (out < in)) continue;
            int64_t *i0 = malloc(sizeof(int64_t) * (size_t)(out + 1)), *i1 = malloc(sizeof(int64_t) * (size_t)(out + 1));
            float *w0 = malloc(sizeof(float) * (size_t)(out + 1)), *w1 = malloc(sizeof(float) * (size_t)(out + 1));
            if (!i0 || !i1 || !w0 || !w1) {
                free(i0), free(i1), free(w0), free(w1);
                ck_diag_add(d, "out of memory lowering Resize '%s' (axis %d, %lld outputs)", n->name, a, (long long)out);
                return *st = CK_ERR_NOMEM, true;
            }
            bool two = false;
            for (int64_t i = 0; i < out; i++) {
                if (ck_resize_taps(&r, a, in, i, &i0[i], &i1[i], &w1[i])) two = true;
                else i1[i] = i0[i], w1[i] = 0.0f;
                w0[i] = 1.0f - w1[i];
            }
            bool same = out == in && !two; /* every position reads its own index: the axis stays */
            for (int64_t i = 0; same && i < out; i++) same = i0[i] == i;
            if (same) {
                free(i0), free(i1), free(w0), free(w1);
                continue;
            }
            snprintf(nm, sizeof nm, "%s/axis%d", n->name, a);
            ck_node *g0 = gather_axis(L, nm, y, a, i0, out, d), *g1 = two && g0 ? gather_axis(L, nm, y, a, i1, out, d) : NULL;
            if (g0 && two && g1) { /* (1 - w) g0 + w g1, the weights (out, 1, ...) along axis a */
                int64_t wd[CK_MAX_RANK];
                int wr = r.rank - a;
                wd[0] = out;
                for (int k = 1; k < wr; k++) wd[k] = 1;
                ck_node *m0 = emit(L, CK_OP_MUL, nm, 2, (ck_value *[]){g0->out[0], const_of(L, "resize_w0", CK_F32, wr, wd, w0)});
                ck_node *m1 = emit(L, CK_OP_MUL, nm, 2, (ck_value *[]){g1->out[0], const_of(L, "resize_w1", CK_F32, wr, wd, w1)});
                last = ck_infer_node(m0, d) || ck_infer_node(m1, d) ? NULL : emit(L, CK_OP_ADD, nm, 2, (ck_value *[]){m0->out[0], m1->out[0]});
                if (last && ck_infer_node(last, d)) last = NULL;
            } else
                last = two ? NULL : g0;
            free(i0), free(i1), free(w0), free(w1);
            if (!last) return *st = CK_ERR_SHAPE, true;
            y = last->out[0];
        }
    if (!last) last = emit(L, CK_OP_IDENTITY, n->name, 1, &x); /* every axis as it was */
    *st = adopt_output(L, last, n->out[0], d);
    return true;
}

/* ---------------------------------------------------------------- ConvTranspose */


/* Pad(x, begin[0..rank) ++ end[0..rank)) with zeros (negative amounts crop), inferred; NULL on an error. */
static ck_value *pad_zeros(ck_lower *L, const char *name, ck_value *x, const int64_t *pads, ck_diag *d) {
    ck_node *p = emit(L, CK_OP_PAD, name, 2, (ck_value *[]){x, const_of(L, "pads", CK_I64, 1, (int64_t[]){2 * x->rank}, pads)});
    return ck_infer_node(p, d) ? NULL : p->out[0];
}

/* ConvTranspose(x, w, B) -> Conv(z, w', B) at stride 1 (ir/convt.c): z is x with stride - 1 zeros
 * after each element along each spatial axis (Reshape to (N, C, D1, 1, D2, 1, ...), Pad the unit
 * axes to the stride, Reshape back), then padded by dilation (k - 1) - pad_begin before and
 * dilation (k - 1) - pad_end + output_padding - (stride - 1) after (negative: cropped); w' is w
 * flipped along each spatial axis (Gathers of reversed indices) with its input and output
 * channels swapped within each group (Transpose). The convolution multiplies the inserted zeros
 * too: stride^ns times the FLOPs of a direct kernel, the price of running on Conv's kernels and
 * gradient. Gradients reach x through the Pads and Reshapes and w through the Transpose and
 * Gathers. */
static bool lower_conv_transpose(ck_lower *L, ck_node *n, ck_diag *d, ck_status *st) {
    ck_convt g;
    if ((*st = ck_convt_geometry(n, &g, d))) return true;
    ck_value *x = n->in[0], *w = n->in[1], *z = x;
    int r = x->rank, ns = g.ns;
    char nm[600];
    snprintf(nm, sizeof nm, "%s/dilate", n->name);
    bool strided = false;
    for (int i = 0; i < ns; i++) strided = strided || g.stride[i] > 1;
    if (strided) { /* (N, C, D1, 1, D2, 1, ...) padded to (N, C, D1, s1, D2, s2, ...), then (N, C, D1 s1, D2 s2, ...) */
        int64_t split[CK_MAX_RANK], pads[2 * CK_MAX_RANK] = {0}, merged[CK_MAX_RANK];
        int rs = 2 + 2 * ns;
        split[0] = merged[0] = x->dims[0], split[1] = merged[1] = x->dims[1];
        for (int i = 0; i < ns; i++) {
            split[2 + 2 * i] = x->dims[2 + i], split[3 + 2 * i] = 1;
            pads[rs + 3 + 2 * i] = g.stride[i] - 1;
            merged[2 + i] = x->dims[2 + i] * g.stride[i];
        }
        z = reshape(L, nm, z, rs, split, d);
        z = z ? pad_zeros(L, nm, z, pads, d) : NULL;
        z = z ? reshape(L, nm, z, r, merged, d) : NULL;
        if (!z) return *st = CK_ERR_SHAPE, true;
    }
    int64_t pads[2 * CK_MAX_RANK] = {0};
    bool padded = false;
    for (int i = 0; i < ns; i++) {
        int64_t span = g.dil[i] * (g.k[i] - 1);
        pads[2 + i] = span - g.pad_b[i];
        pads[r + 2 + i] = span - g.pad_e[i] + g.out_pad[i] - (g.stride[i] - 1);
        padded = padded || pads[2 + i] || pads[r + 2 + i];
    }
    snprintf(nm, sizeof nm, "%s/pad", n->name);
    if (padded && !(z = pad_zeros(L, nm, z, pads, d))) return *st = CK_ERR_SHAPE, true;
    /* the weights: flipped, then (C_in, C_out/g, k...) -> (C_out, C_in/g, k...) */
    snprintf(nm, sizeof nm, "%s/flip", n->name);
    ck_value *wf = w;
    for (int i = 0; i < ns; i++) {
        if (g.k[i] < 2) continue;
        int64_t *idx = malloc(sizeof(int64_t) * (size_t)g.k[i]);
        CK_ASSERT(idx);
        for (int64_t t = 0; t < g.k[i]; t++) idx[t] = g.k[i] - 1 - t;
        ck_node *fl = gather_axis(L, nm, wf, 2 + i, idx, g.k[i], d);
        free(idx);
        if (!fl) return *st = CK_ERR_SHAPE, true;
        wf = fl->out[0];
    }
    /* (g, C_in/g, C_out/g, k...) when grouped (ns <= 3: rank r + 1 <= 6), the group axis staying first */
    int64_t cg = w->dims[0] / g.group, mg = w->dims[1], dims[CK_MAX_RANK];
    dims[0] = g.group, dims[1] = cg, dims[2] = mg;
    for (int i = 0; i < ns; i++) dims[3 + i] = g.k[i];
    bool grouped = g.group > 1;
    int o = grouped ? 1 : 0, perm[CK_MAX_RANK];
    perm[0] = 0, perm[o] = o + 1, perm[o + 1] = o;
    for (int i = 0; i < ns; i++) perm[o + 2 + i] = o + 2 + i;
    snprintf(nm, sizeof nm, "%s/weight", n->name);
    ck_value *wg = grouped ? reshape(L, nm, wf, r + 1, dims, d) : wf;
    ck_value *wt = wg ? transpose(L, nm, wg, perm, d) : NULL;
    if (!wt) return *st = CK_ERR_SHAPE, true;
    if (grouped) {
        int64_t wd[CK_MAX_RANK];
        wd[0] = g.out_ch, wd[1] = cg;
        for (int i = 0; i < ns; i++) wd[2 + i] = g.k[i];
        if (!(wt = reshape(L, nm, wt, r, wd, d))) return *st = CK_ERR_SHAPE, true;
    }
    bool bias = n->n_in > 2 && n->in[2];
    ck_node *cv = emit(L, CK_OP_CONV, n->name, bias ? 3 : 2, (ck_value *[]){z, wt, bias ? n->in[2] : NULL});
    set_ints(L, cv, "dilations", ns, g.dil);
    set_int(L, cv, "group", g.group);
    *st = adopt_output(L, cv, n->out[0], d);
    return true;
}

ck_status ck_pass_lower(ck_graph *g, const ck_options *o, ck_diag *d) {
    (void)o;
    ck_lower L = {.g = g};
    int nn = g->n_nodes;
    L.uses = calloc((size_t)g->next_value_id + 1, sizeof *L.uses);
    ck_node **old = malloc(sizeof *old * (size_t)(nn + 1));
    L.cap_out = 3 * nn + 1;
    L.out = malloc(sizeof *L.out * (size_t)L.cap_out);
    if (!L.uses || !old || !L.out) {
        free(L.uses), free(old), free(L.out);
        ck_diag_add(d, "out of memory lowering the graph");
        return CK_ERR_NOMEM;
    }
    if (nn > 0) memcpy(old, g->nodes, sizeof *old * (size_t)nn); /* g->nodes is NULL in a graph folded to nothing */
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < old[i]->n_in; k++)
            if (old[i]->in[k]) L.uses[old[i]->in[k]->id]++;
    for (int i = 0; i < g->n_outputs; i++) L.uses[g->outputs[i]->id]++;
    ck_status st = CK_OK;
    int changed = 0;
    for (int i = 0; i < nn && !st; i++) {
        ck_node *n = old[i];
        bool done = false;
        if (n->op == CK_OP_MATMUL) done = lower_matmul(&L, n, d, &st);
        else if (n->op == CK_OP_MUL) done = lower_gelu(&L, n, d, &st);
        else if (n->op == CK_OP_EINSUM) done = lower_einsum(&L, n, d, &st);
        else if (n->op == CK_OP_REDUCE_L1 || n->op == CK_OP_REDUCE_L2 || n->op == CK_OP_REDUCE_SUM_SQUARE)
            done = lower_reduce_norm(&L, n, d, &st);
        else if (n->op == CK_OP_INSTANCE_NORM) done = lower_instance_norm(&L, n, d, &st);
        else if (n->op == CK_OP_RESIZE) done = lower_resize(&L, n, d, &st);
        else if (n->op == CK_OP_CONV_TRANSPOSE) done = lower_conv_transpose(&L, n, d, &st);
        else if (n->op == CK_OP_LSTM || n->op == CK_OP_GRU || n->op == CK_OP_RNN) done = true, st = ck_lower_rnn(&L, n, d);
        if (done) changed++;
        else push(&L, n);
    }
    if (!st && changed) {
        /* the replaced nodes' inputs (a Transpose, the GELU's inner nodes) die here */
        ck_graph_set_nodes(g, L.n_out, L.out);
        ck_graph_remove_dead(g);
    }
    free(L.uses), free(old), free(L.out);
    return st;
}
