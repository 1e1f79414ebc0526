/* autodiff.c — reverse-mode differentiation of the forward graph into backward nodes.
 *
 * Which values get a gradient: those that both reach the loss and depend on a trainable
 * parameter, each through differentiable input slots (ops.def's mask). Nothing else is
 * differentiated, so integer paths, masks and position tables cost nothing. Trainable
 * parameters are the float initializers (or, when the model has a ckptc.trainable entry, those it
 * lists: the loader made the others constants) that reach the loss, minus those --freeze matches;
 * float initializers that do not reach it become constants.
 *
 * The forward nodes are walked in reverse; each op's rule (ops.def's gradient column, defined
 * here) appends the nodes computing its inputs' gradients from its outputs' gradients. Rules use
 * ordinary ops where those suffice (MatMul, Transpose, Mul, ReduceSum, Where...) and internal
 * ckptc.* ops where a fused kernel is the sane choice (UnaryGrad, SoftmaxGrad, LayerNormGrad,
 * ConvGradInput...). Fan-out accumulates with Add; broadcasting is undone with ReduceSum +
 * Reshape. Backward nodes are named after their forward node ("/layers.3/fc1/Gemm/grad"), so
 * scope-based passes see them in the right block.
 */
#include "ck_passes.h"

#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ck_ad {
    ck_graph *g;
    const ck_options *o;
    ck_diag *d;
    int nid;                 /* values with id < nid are the forward graph's */
    ck_value **grad;         /* accumulated gradient per forward value id */
    bool *need;              /* per forward value id */
    const ck_node *cur;      /* the forward node being differentiated */
    char name[1024];
} ck_ad;

typedef ck_status (*ck_grad_fn)(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx);

/* ---------------------------------------------------------------- building blocks */

static bool wants(const ck_ad *a, const ck_node *n, int i) {
    return i < n->n_in && n->in[i] && (ck_ops[n->op].diff_inputs >> i & 1) && n->in[i]->id < a->nid && a->need[n->in[i]->id];
}

static ck_node *node(ck_ad *a, ck_op op, int n_in, ck_value **in, int n_out) {
    ck_node *n = ck_graph_add_node(a->g, op, a->name, n_in, in, n_out);
    n->phase = CK_PHASE_BACKWARD;
    return n;
}

/* Shape inference of a node a rule built: failure is a bug in the rule. */
static ck_node *done(ck_ad *a, ck_node *n) {
    ck_diag d = {0};
    if (ck_infer_node(n, &d) != CK_OK) {
        for (int i = 0; i < d.n; i++) fprintf(stderr, "ckptc: internal error: gradient of '%s': %s\n", a->cur->name, d.msg[i]);
        CK_ASSERT(!"a gradient rule built an inconsistent node");
    }
    ck_diag_clear(&d);
    return n;
}

static void attr_i(ck_ad *a, ck_node *n, const char *name, int64_t v) {
    ck_node_add_attr(a->g, n, (ck_attr){.name = name, .kind = CK_ATTR_INT, .i = v});
}
static void attr_f(ck_ad *a, ck_node *n, const char *name, float v) {
    ck_node_add_attr(a->g, n, (ck_attr){.name = name, .kind = CK_ATTR_FLOAT, .f = v});
}
static void attr_is(ck_ad *a, ck_node *n, const char *name, int k, const int64_t *v) {
    int64_t *c = ck_arena_alloc(a->g->arena, sizeof(int64_t) * (size_t)(k + 1));
    memcpy(c, v, sizeof(int64_t) * (size_t)k);
    ck_node_add_attr(a->g, n, (ck_attr){.name = name, .kind = CK_ATTR_INTS, .n = k, .ints = c});
}
static void copy_attrs(ck_ad *a, ck_node *dst, const ck_node *src) {
    for (int i = 0; i < src->n_attr; i++) ck_node_add_attr(a->g, dst, src->attr[i]);
}

static ck_value *op1(ck_ad *a, ck_op op, ck_value *x) { return done(a, node(a, op, 1, &x, 1))->out[0]; }
static ck_value *op2(ck_ad *a, ck_op op, ck_value *x, ck_value *y) {
    ck_value *in[2] = {x, y};
    return done(a, node(a, op, 2, in, 1))->out[0];
}

static ck_value *const_f(ck_ad *a, ck_dtype dt, double v) {
    ck_value *c = ck_graph_add_value(a->g, "const", dt, 0, NULL, CK_ROLE_CONST);
    c->data = ck_arena_alloc(a->g->arena, 8);
    ck_value_set_f(c, 0, v);
    return c;
}

static ck_value *const_i64s(ck_ad *a, int k, const int64_t *v) {
    int64_t dim = k;
    ck_value *c = ck_graph_add_value(a->g, "shape", CK_I64, 1, &dim, CK_ROLE_CONST);
    c->data = ck_arena_alloc(a->g->arena, sizeof(int64_t) * (size_t)(k + 1));
    memcpy(c->data, v, sizeof(int64_t) * (size_t)k);
    return c;
}

static bool same_shape(const ck_value *x, int rank, const int64_t *dims) {
    return x->rank == rank && memcmp(x->dims, dims, sizeof(int64_t) * (size_t)rank) == 0;
}

static ck_value *reshape(ck_ad *a, ck_value *x, int rank, const int64_t *dims) {
    if (same_shape(x, rank, dims)) return x;
    return op2(a, CK_OP_RESHAPE, x, const_i64s(a, rank, dims));
}

static ck_value *scale(ck_ad *a, ck_value *x, double s) { return s == 1.0 ? x : op2(a, CK_OP_MUL, x, const_f(a, x->dtype, s)); }

static ck_value *reduce_sum(ck_ad *a, ck_value *x, int k, const int64_t *axes, int keepdims) {
    ck_node *n = node(a, CK_OP_REDUCE_SUM, 2, (ck_value *[]){x, const_i64s(a, k, axes)}, 1);
    attr_i(a, n, "keepdims", keepdims);
    return done(a, n)->out[0];
}

/* Undoes broadcasting: sums g over the axes where `target` was stretched, reshapes to it. */
static ck_value *reduce_to(ck_ad *a, ck_value *g, const ck_value *target) {
    if (same_shape(g, target->rank, target->dims)) return g;
    int64_t axes[CK_MAX_RANK];
    int k = 0, lead = g->rank - target->rank;
    CK_ASSERT(lead >= 0);
    for (int i = 0; i < g->rank; i++)
        if (i < lead || (target->dims[i - lead] == 1 && g->dims[i] != 1)) axes[k++] = i;
    ck_value *s = k ? reduce_sum(a, g, k, axes, 1) : g;
    return reshape(a, s, target->rank, target->dims);
}

static ck_value *expand(ck_ad *a, ck_value *x, const ck_value *like) {
    if (same_shape(x, like->rank, like->dims)) return x;
    return op2(a, CK_OP_EXPAND, x, const_i64s(a, like->rank, like->dims));
}

static ck_value *zeros_like(ck_ad *a, const ck_value *like) {
    ck_node *n = node(a, CK_OP_CONSTANT_OF_SHAPE, 1, (ck_value *[]){const_i64s(a, like->rank, like->dims)}, 1);
    ck_value *v = ck_arena_alloc(a->g->arena, sizeof *v);
    v->id = -1;
    v->name = "value";
    v->dtype = like->dtype;
    v->data = ck_arena_alloc(a->g->arena, 8);
    ck_node_add_attr(a->g, n, (ck_attr){.name = "value", .kind = CK_ATTR_TENSOR, .t = v});
    return done(a, n)->out[0];
}

/* Makes sure output k of n exists (optional outputs the backward needs, e.g. LayerNorm's mean). */
static ck_value *ensure_output(ck_ad *a, ck_node *n, int k) {
    if (k < n->n_out && n->out[k]) return n->out[k];
    ck_value **outs = ck_arena_alloc(a->g->arena, sizeof *outs * (size_t)(k + 1));
    for (int i = 0; i < n->n_out; i++) outs[i] = n->out[i];
    for (int i = n->n_out; i <= k; i++) outs[i] = NULL;
    char buf[64];
    snprintf(buf, sizeof buf, "%%%d", a->g->next_value_id);
    outs[k] = ck_graph_add_value(a->g, buf, CK_UNDEF, 0, NULL, CK_ROLE_ACTIVATION);
    outs[k]->producer = n;
    n->out = outs;
    if (n->n_out <= k) n->n_out = k + 1;
    ck_diag d = {0};
    CK_ASSERT(ck_infer_node(n, &d) == CK_OK);
    return outs[k];
}

static ck_status unsupported(ck_ad *a, const ck_node *n, const char *why) {
    ck_diag_add(a->d, "node '%s' (%s): cannot differentiate: %s", n->name, ck_ops[n->op].onnx_name, why);
    return CK_ERR_UNSUPPORTED;
}

/* ---------------------------------------------------------------- rules: dense */

static ck_status ck_grad_gemm(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    ck_value *A = n->in[0], *B = n->in[1], *g = dy[0];
    int ta = ck_attr_int(n, "transA", 0) != 0, tb = ck_attr_int(n, "transB", 0) != 0;
    float alpha = ck_attr_float(n, "alpha", 1.0f), beta = ck_attr_float(n, "beta", 1.0f);
    if (wants(a, n, 0)) { /* dA = alpha g op(B)^T, or its transpose when A is stored transposed */
        ck_node *m = ta ? node(a, CK_OP_GEMM, 2, (ck_value *[]){B, g}, 1) : node(a, CK_OP_GEMM, 2, (ck_value *[]){g, B}, 1);
        attr_i(a, m, "transA", ta ? tb : 0);
        attr_i(a, m, "transB", ta ? 1 : !tb);
        attr_f(a, m, "alpha", alpha);
        dx[0] = done(a, m)->out[0];
    }
    if (wants(a, n, 1)) { /* dB = alpha op(A)^T g, or its transpose */
        ck_node *m = tb ? node(a, CK_OP_GEMM, 2, (ck_value *[]){g, A}, 1) : node(a, CK_OP_GEMM, 2, (ck_value *[]){A, g}, 1);
        attr_i(a, m, "transA", tb ? 1 : !ta);
        attr_i(a, m, "transB", tb ? ta : 0);
        attr_f(a, m, "alpha", alpha);
        dx[1] = done(a, m)->out[0];
    }
    if (wants(a, n, 2)) dx[2] = reduce_to(a, scale(a, g, beta), n->in[2]);
    return CK_OK;
}

static ck_value *swap_last2(ck_ad *a, ck_value *x) {
    int64_t perm[CK_MAX_RANK];
    for (int i = 0; i < x->rank; i++) perm[i] = i;
    perm[x->rank - 1] = x->rank - 2, perm[x->rank - 2] = x->rank - 1;
    ck_node *t = node(a, CK_OP_TRANSPOSE, 1, &x, 1);
    attr_is(a, t, "perm", x->rank, perm);
    return done(a, t)->out[0];
}

static ck_status ck_grad_matmul(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    ck_value *A = n->in[0], *B = n->in[1];
    /* numpy's promotion of 1-D operands, made explicit so both products are plain batched */
    int64_t ad[CK_MAX_RANK] = {1, A->dims[0]}, bd[CK_MAX_RANK] = {B->dims[0], 1};
    ck_value *A2 = A->rank == 1 ? reshape(a, A, 2, ad) : A, *B2 = B->rank == 1 ? reshape(a, B, 2, bd) : B;
    /* the promoted product's shape: broadcast batch dims, then (M, N) */
    int r = A2->rank > B2->rank ? A2->rank : B2->rank;
    int64_t yd[CK_MAX_RANK];
    for (int i = 0; i < r - 2; i++) {
        int ia = i - (r - A2->rank), ib = i - (r - B2->rank);
        int64_t da = ia >= 0 ? A2->dims[ia] : 1, db = ib >= 0 ? B2->dims[ib] : 1;
        yd[i] = da == 1 ? db : da;
    }
    yd[r - 2] = A2->dims[A2->rank - 2];
    yd[r - 1] = B2->dims[B2->rank - 1];
    ck_value *g = reshape(a, dy[0], r, yd);
    if (wants(a, n, 0)) {
        ck_value *d = op2(a, CK_OP_MATMUL, g, swap_last2(a, B2));
        dx[0] = reshape(a, reduce_to(a, d, A2), A->rank, A->dims);
    }
    if (wants(a, n, 1)) {
        ck_value *d = op2(a, CK_OP_MATMUL, swap_last2(a, A2), g);
        dx[1] = reshape(a, reduce_to(a, d, B2), B->rank, B->dims);
    }
    return CK_OK;
}

static ck_status ck_grad_conv(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    ck_value *X = n->in[0], *W = n->in[1], *g = dy[0];
    if (wants(a, n, 0)) {
        ck_node *m = node(a, CK_OP_CONV_GRAD_INPUT, 2, (ck_value *[]){g, W}, 1);
        copy_attrs(a, m, n);
        attr_is(a, m, "input_shape", X->rank, X->dims);
        dx[0] = done(a, m)->out[0];
    }
    if (wants(a, n, 1)) {
        ck_node *m = node(a, CK_OP_CONV_GRAD_WEIGHT, 2, (ck_value *[]){g, X}, 1);
        copy_attrs(a, m, n);
        attr_is(a, m, "weight_shape", W->rank, W->dims);
        dx[1] = done(a, m)->out[0];
    }
    if (wants(a, n, 2)) {
        int64_t axes[CK_MAX_RANK] = {0};
        for (int i = 2; i < g->rank; i++) axes[i - 1] = i;
        dx[2] = reduce_sum(a, g, g->rank - 1, axes, 0);
    }
    return CK_OK;
}

/* ---------------------------------------------------------------- rules: elementwise */

static ck_status ck_grad_binary(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    ck_value *A = n->in[0], *B = n->in[1], *Y = n->out[0], *g = dy[0];
    bool w0 = wants(a, n, 0), w1 = wants(a, n, 1);
    switch (n->op) {
    case CK_OP_ADD:
        if (w0) dx[0] = reduce_to(a, g, A);
        if (w1) dx[1] = reduce_to(a, g, B);
        break;
    case CK_OP_SUB:
        if (w0) dx[0] = reduce_to(a, g, A);
        if (w1) dx[1] = reduce_to(a, op1(a, CK_OP_NEG, g), B);
        break;
    case CK_OP_MUL:
        if (w0) dx[0] = reduce_to(a, op2(a, CK_OP_MUL, g, B), A);
        if (w1) dx[1] = reduce_to(a, op2(a, CK_OP_MUL, g, A), B);
        break;
    case CK_OP_DIV: /* y = a / b: da = g / b, db = -g y / b */
        if (w0) dx[0] = reduce_to(a, op2(a, CK_OP_DIV, g, B), A);
        if (w1) dx[1] = reduce_to(a, op1(a, CK_OP_NEG, op2(a, CK_OP_DIV, op2(a, CK_OP_MUL, g, Y), B)), B);
        break;
    case CK_OP_POW: { /* y = a^b: da = g b a^(b-1), db = g y ln a */
        ck_value *Bf = B->dtype == A->dtype ? B : NULL;
        if (!Bf) {
            ck_node *c = node(a, CK_OP_CAST, 1, &B, 1);
            attr_i(a, c, "to", A->dtype == CK_F64 ? 11 : 1);
            Bf = done(a, c)->out[0];
        }
        if (w0) {
            ck_value *p = op2(a, CK_OP_POW, A, op2(a, CK_OP_SUB, Bf, const_f(a, A->dtype, 1.0)));
            dx[0] = reduce_to(a, op2(a, CK_OP_MUL, g, op2(a, CK_OP_MUL, Bf, p)), A);
        }
        if (w1) dx[1] = reduce_to(a, op2(a, CK_OP_MUL, g, op2(a, CK_OP_MUL, Y, op1(a, CK_OP_LOG, A))), B);
        break;
    }
    case CK_OP_MOD: /* float y = fmod(a, b) = a - b trunc(a / b): da = g, db = -g trunc(a / b) = -g (a - y) / b */
        if (w0) dx[0] = reduce_to(a, g, A);
        if (w1) dx[1] = reduce_to(a, op1(a, CK_OP_NEG, op2(a, CK_OP_DIV, op2(a, CK_OP_MUL, g, op2(a, CK_OP_SUB, A, Y)), B)), B);
        break;
    default: CK_ASSERT(!"binary rule");
    }
    return CK_OK;
}

static ck_status ck_grad_where(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    ck_value *c = n->in[0], *g = dy[0], *zero = const_f(a, g->dtype, 0.0);
    for (int i = 1; i <= 2; i++) {
        if (!wants(a, n, i)) continue;
        ck_value *in[3] = {c, i == 1 ? g : zero, i == 1 ? zero : g};
        dx[i] = reduce_to(a, done(a, node(a, CK_OP_WHERE, 3, in, 1))->out[0], n->in[i]);
    }
    return CK_OK;
}

/* One fused kernel for every pointwise derivative: UnaryGrad(dy, x) with the forward op. */
static ck_status ck_grad_unary(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    if (n->op == CK_OP_NEG) {
        dx[0] = op1(a, CK_OP_NEG, dy[0]);
        return CK_OK;
    }
    /* Relu's derivative reads its output (y > 0 exactly where x > 0, NaN included: relu(NaN) = 0),
     * so that the backward keeps one tensor of a BatchNorm -> Relu pair, not both */
    ck_value *at = n->op == CK_OP_RELU ? n->out[0] : n->in[0];
    ck_node *m = node(a, CK_OP_UNARY_GRAD, 2, (ck_value *[]){dy[0], at}, 1);
    attr_i(a, m, "op", n->op);
    copy_attrs(a, m, n); /* alpha, beta, approximate...: codegen picks the runtime code and its arguments from them */
    if (n->op == CK_OP_CLIP) {
        double lo = -INFINITY, hi = INFINITY;
        for (int i = 1; i < n->n_in && i < 3; i++) {
            if (!n->in[i]) continue;
            if (!n->in[i]->data) return unsupported(a, n, "min/max must be constants");
            if (i == 1) lo = ck_value_get_f(n->in[i], 0);
            else hi = ck_value_get_f(n->in[i], 0);
        }
        attr_f(a, m, "lo", (float)lo);
        attr_f(a, m, "hi", (float)hi);
    }
    dx[0] = done(a, m)->out[0];
    return CK_OK;
}

static ck_status ck_grad_cast(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    ck_node *c = node(a, CK_OP_CAST, 1, &dy[0], 1);
    attr_i(a, c, "to", n->in[0]->dtype == CK_F64 ? 11 : n->in[0]->dtype == CK_F16 ? 10 : 1);
    dx[0] = done(a, c)->out[0];
    return CK_OK;
}

static ck_status ck_grad_dropout(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    double ratio = ck_dropout_ratio(n, a->o);
    if (ratio < 0) return unsupported(a, n, "the ratio and training_mode must be constants");
    if (ratio == 0.0) { /* drops nothing: the identity */
        dx[0] = dy[0];
        return CK_OK;
    }
    ck_node *m = node(a, CK_OP_DROPOUT_GRAD, 1, &dy[0], 1);
    attr_f(a, m, "ratio", (float)ratio);
    attr_i(a, m, "key", ck_attr_int(n, "key", n->id)); /* the forward's RNG stream: the same mask, regenerated */
    dx[0] = done(a, m)->out[0];
    return CK_OK;
}

/* ---------------------------------------------------------------- rules: over an axis */

static ck_status ck_grad_softmax(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    ck_node *m = node(a, CK_OP_SOFTMAX_GRAD, 2, (ck_value *[]){dy[0], n->out[0]}, 1);
    int64_t axis = ck_attr_int(n, "axis", -1);
    attr_i(a, m, "axis", axis < 0 ? axis + n->in[0]->rank : axis);
    attr_i(a, m, "log", n->op == CK_OP_LOG_SOFTMAX);
    dx[0] = done(a, m)->out[0];
    return CK_OK;
}

static ck_status ck_grad_layer_norm(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    ck_value *mean = ensure_output(a, n, 1), *inv = ensure_output(a, n, 2);
    ck_node *m = node(a, CK_OP_LAYER_NORM_GRAD, 5, (ck_value *[]){dy[0], n->in[0], n->in[1], mean, inv}, 3);
    copy_attrs(a, m, n);
    done(a, m);
    for (int i = 0; i < 3; i++)
        if (wants(a, n, i)) dx[i] = i ? reduce_to(a, m->out[i], n->in[i]) : m->out[0];
    return CK_OK;
}

static ck_status ck_grad_batch_norm(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!ck_attr_int(n, "training_mode", 0))
        return unsupported(a, n, "training_mode=0 (running statistics) in a training graph; export in training mode");
    ck_value *mean = ensure_output(a, n, 3), *inv = ensure_output(a, n, 4);
    ck_node *m = node(a, CK_OP_BATCH_NORM_GRAD, 5, (ck_value *[]){dy[0], n->in[0], n->in[1], mean, inv}, 3);
    copy_attrs(a, m, n);
    done(a, m);
    for (int i = 0; i < 3; i++)
        if (wants(a, n, i)) dx[i] = m->out[i];
    return CK_OK;
}

static ck_status ck_grad_pool(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    ck_node *m = node(a, CK_OP_POOL_GRAD, 2, (ck_value *[]){dy[0], n->in[0]}, 1);
    copy_attrs(a, m, n);
    attr_i(a, m, "mode", n->op == CK_OP_MAX_POOL ? 0 : 1);
    dx[0] = done(a, m)->out[0];
    return CK_OK;
}

static ck_status ck_grad_global_pool(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    int64_t s = 1;
    for (int i = 2; i < n->in[0]->rank; i++) s *= n->in[0]->dims[i];
    dx[0] = expand(a, scale(a, dy[0], 1.0 / (double)s), n->in[0]);
    return CK_OK;
}

static ck_status ck_grad_reduce(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    ck_value *X = n->in[0];
    int64_t axes[CK_MAX_RANK];
    int na = 0;
    const ck_attr *aa = ck_attr_find(n, "axes");
    if (n->n_in > 1 && n->in[1]) {
        na = (int)ck_value_numel(n->in[1]);
        for (int i = 0; i < na; i++) axes[i] = ck_value_get_i(n->in[1], i);
    } else if (aa) {
        na = aa->n;
        for (int i = 0; i < na; i++) axes[i] = aa->ints[i];
    }
    bool red[CK_MAX_RANK] = {0};
    if (na == 0) {
        if (ck_attr_int(n, "noop_with_empty_axes", 0)) {
            dx[0] = dy[0];
            return CK_OK;
        }
        for (int i = 0; i < X->rank; i++) red[i] = true;
    }
    for (int i = 0; i < na; i++) red[axes[i] < 0 ? axes[i] + X->rank : axes[i]] = true;
    int64_t kd[CK_MAX_RANK], count = 1;
    for (int i = 0; i < X->rank; i++) {
        kd[i] = red[i] ? 1 : X->dims[i];
        if (red[i]) count *= X->dims[i];
    }
    ck_value *g = reshape(a, dy[0], X->rank, kd);
    if (n->op == CK_OP_REDUCE_MEAN) g = scale(a, g, 1.0 / (double)count);
    dx[0] = expand(a, g, X);
    return CK_OK;
}

/* ---------------------------------------------------------------- rules: layout */

static ck_status ck_grad_reshape(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (wants(a, n, 0)) dx[0] = reshape(a, dy[0], n->in[0]->rank, n->in[0]->dims);
    return CK_OK;
}

static ck_status ck_grad_transpose(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    int r = n->in[0]->rank;
    int64_t perm[CK_MAX_RANK], inv[CK_MAX_RANK];
    ck_transpose_perm(n, perm);
    for (int i = 0; i < r; i++) inv[perm[i]] = i;
    ck_node *t = node(a, CK_OP_TRANSPOSE, 1, &dy[0], 1);
    attr_is(a, t, "perm", r, inv);
    dx[0] = done(a, t)->out[0];
    return CK_OK;
}

static ck_status ck_grad_concat(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    int64_t axis = ck_attr_int(n, "axis", 0), lens[64];
    if (axis < 0) axis += n->out[0]->rank;
    for (int i = 0; i < n->n_in; i++) lens[i] = n->in[i]->dims[axis];
    ck_node *s = node(a, CK_OP_SPLIT, 2, (ck_value *[]){dy[0], const_i64s(a, n->n_in, lens)}, n->n_in);
    attr_i(a, s, "axis", axis);
    done(a, s);
    for (int i = 0; i < n->n_in; i++)
        if (wants(a, n, i)) dx[i] = s->out[i];
    return CK_OK;
}

static ck_status ck_grad_split(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    ck_value *parts[64];
    for (int k = 0; k < n->n_out; k++) parts[k] = dy[k] ? dy[k] : zeros_like(a, n->out[k]);
    ck_node *c = node(a, CK_OP_CONCAT, n->n_out, parts, 1);
    int64_t axis = ck_attr_int(n, "axis", 0);
    attr_i(a, c, "axis", axis < 0 ? axis + n->in[0]->rank : axis);
    dx[0] = done(a, c)->out[0];
    return CK_OK;
}

static ck_status ck_grad_slice(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    int64_t start[CK_MAX_RANK], step[CK_MAX_RANK], count[CK_MAX_RANK];
    CK_ASSERT(ck_slice_params(n, start, step, count, NULL) == CK_OK);
    ck_node *m = node(a, CK_OP_SLICE_GRAD, 1, &dy[0], 1);
    attr_is(a, m, "input_shape", n->in[0]->rank, n->in[0]->dims);
    attr_is(a, m, "starts", n->in[0]->rank, start);
    attr_is(a, m, "steps", n->in[0]->rank, step);
    dx[0] = done(a, m)->out[0];
    return CK_OK;
}

/* Pad: one PadGrad (dy) -> dx that sums, for each dx element, the dy elements Pad copied from it
 * (constant mode: at most one; reflect and edge: the mirrored or clamped ones too). */
static ck_status ck_grad_pad(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    int64_t begin[CK_MAX_RANK], end[CK_MAX_RANK];
    int mode;
    CK_ASSERT(ck_pad_params(n, begin, end, &mode, NULL) == CK_OK);
    ck_node *m = node(a, CK_OP_PAD_GRAD, 1, &dy[0], 1);
    attr_is(a, m, "input_shape", n->in[0]->rank, n->in[0]->dims);
    attr_is(a, m, "pads_begin", n->in[0]->rank, begin);
    attr_i(a, m, "mode", mode);
    dx[0] = done(a, m)->out[0];
    return CK_OK;
}

static ck_status ck_grad_gather(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    ck_node *m = node(a, CK_OP_GATHER_GRAD, 2, (ck_value *[]){dy[0], n->in[1]}, 1);
    int64_t axis = ck_attr_int(n, "axis", 0);
    attr_i(a, m, "axis", axis < 0 ? axis + n->in[0]->rank : axis);
    attr_is(a, m, "data_shape", n->in[0]->rank, n->in[0]->dims);
    dx[0] = done(a, m)->out[0];
    return CK_OK;
}

/* ScatterND (data, indices, updates): d updates = GatherND(dy, indices); d data = dy with the
 * scattered positions zeroed (ScatterND of zeros; reduction none) or dy itself (add). mul would
 * need the products of the other updates: refused. */
static ck_status ck_grad_scatter_nd(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    const char *red = ck_attr_str(n, "reduction", "none");
    if (strcmp(red, "mul") == 0) return unsupported(a, n, "reduction 'mul' has no gradient rule (none and add do)");
    if (wants(a, n, 0)) {
        if (strcmp(red, "add") == 0) {
            dx[0] = dy[0];
        } else {
            ck_value *in[3] = {dy[0], n->in[1], zeros_like(a, n->in[2])};
            dx[0] = done(a, node(a, CK_OP_SCATTER_ND, 3, in, 1))->out[0];
        }
    }
    if (wants(a, n, 2)) dx[2] = op2(a, CK_OP_GATHER_ND, dy[0], n->in[1]);
    return CK_OK;
}

/* GatherND (data, indices): d data = ScatterND(zeros, indices, dy, reduction add), the
 * repeated indices accumulating in index order. */
static ck_status ck_grad_gather_nd(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    ck_value *in[3] = {zeros_like(a, n->in[0]), n->in[1], dy[0]};
    ck_node *m = node(a, CK_OP_SCATTER_ND, 3, in, 1);
    ck_node_add_attr(a->g, m, (ck_attr){.name = "reduction", .kind = CK_ATTR_STRING, .s = "add"});
    dx[0] = done(a, m)->out[0];
    return CK_OK;
}

static ck_status ck_grad_expand(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (wants(a, n, 0)) dx[0] = reduce_to(a, dy[0], n->in[0]);
    return CK_OK;
}

static ck_status ck_grad_trilu(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    ck_value *in[2] = {dy[0], n->n_in > 1 ? n->in[1] : NULL};
    ck_node *m = node(a, CK_OP_TRILU, in[1] ? 2 : 1, in, 1);
    copy_attrs(a, m, n);
    dx[0] = done(a, m)->out[0];
    return CK_OK;
}

static ck_status ck_grad_cross_entropy(ck_ad *a, ck_node *n, ck_value **dy, ck_value **dx) {
    if (!wants(a, n, 0)) return CK_OK;
    ck_node *m = node(a, CK_OP_CROSS_ENTROPY_GRAD, 3, (ck_value *[]){dy[0], n->in[0], n->in[1]}, 1);
    dx[0] = done(a, m)->out[0];
    return CK_OK;
}

static const ck_grad_fn rules[CK_OP_COUNT] = {
#define CK_OP(e, onnx, in_min, in_max, out_min, out_max, flags, diff, infer, grad, kernel, ws, flops, fold, view, in_place) [CK_OP_##e] = grad,
#include "ops.def"
#undef CK_OP
};

/* ---------------------------------------------------------------- the pass */

static void accumulate(ck_ad *a, ck_value *v, ck_value *gv) {
    CK_ASSERT(v->id < a->nid);
    CK_ASSERT(gv->rank == v->rank && memcmp(gv->dims, v->dims, sizeof(int64_t) * (size_t)v->rank) == 0);
    ck_value *prev = a->grad[v->id];
    a->grad[v->id] = prev ? op2(a, CK_OP_ADD, prev, gv) : gv;
}

/* reach[value id]: the value reaches the loss through differentiable input slots. */
static void mark_reaching(const ck_graph *g, bool *reach) {
    reach[g->loss->id] = true;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const ck_node *n = g->nodes[i];
        bool r = false;
        for (int k = 0; k < n->n_out; k++) r |= n->out[k] && reach[n->out[k]->id];
        if (!r) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] && (ck_ops[n->op].diff_inputs >> k & 1) && ck_dtype_is_float(n->in[k]->dtype)) reach[n->in[k]->id] = true;
    }
}

/* The trainable parameters: float PARAMs (every float initializer, or those the model's
 * CK_TRAINABLE_KEY entry lists: the loader made the others CONST) that reach the loss, minus
 * --freeze; the others become CONST. Marks them in dep and counts them in *np. */
static ck_status choose_params(ck_graph *g, const ck_options *o, const bool *reach, bool *dep, int *np, ck_diag *d) {
    regex_t re;
    bool have_re = o->freeze && *o->freeze;
    if (have_re && regcomp(&re, o->freeze, REG_EXTENDED | REG_NOSUB) != 0) {
        ck_diag_add(d, "--freeze '%s': not a valid regular expression", o->freeze);
        return CK_ERR_USAGE;
    }
    *np = 0;
    for (int i = 0; i < g->n_values; i++) {
        ck_value *v = g->values[i];
        if (v->role != CK_ROLE_PARAM) continue;
        bool frozen = have_re && regexec(&re, v->name, 0, NULL, 0) == 0;
        if (!reach[v->id] || !ck_dtype_is_float(v->dtype) || frozen) {
            v->role = CK_ROLE_CONST; /* data the step reads, never updates */
            continue;
        }
        dep[v->id] = true;
        (*np)++;
    }
    if (have_re) regfree(&re);
    if (*np == 0) {
        ck_diag_add(d, "the model has no trainable parameters: no %s reaches the loss%s",
                    g->trainable_declared ? "initializer its metadata_props entry '" CK_TRAINABLE_KEY "' lists" : "float initializer",
                    have_re ? " (or --freeze matches all of them)" : "");
        return CK_ERR_MODEL;
    }
    return CK_OK;
}

/* dep[value id]: a float value that depends on a trainable parameter through differentiable
 * slots (the parameters are marked already). */
static void mark_dependent(const ck_graph *g, bool *dep) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        bool dd = false;
        for (int k = 0; k < n->n_in; k++) dd |= n->in[k] && (ck_ops[n->op].diff_inputs >> k & 1) && dep[n->in[k]->id];
        for (int k = 0; dd && k < n->n_out; k++)
            if (n->out[k] && ck_dtype_is_float(n->out[k]->dtype)) dep[n->out[k]->id] = true;
    }
}

/* The backward sweep over the forward's nf nodes, last first: each node's gradient rule, the
 * input gradients accumulated. */
static ck_status backward_sweep(ck_ad *a, int nf) {
    ck_graph *g = a->g;
    ck_status st = CK_OK;
    a->cur = g->loss->producer;
    snprintf(a->name, sizeof a->name, "%s/grad", g->loss->producer ? g->loss->producer->name : "loss");
    a->grad[g->loss->id] = const_f(a, g->loss->dtype, 1.0);
    for (int i = nf - 1; i >= 0 && !st; i--) {
        ck_node *n = g->nodes[i];
        ck_value *dy[64] = {0}, *dx[64] = {0};
        bool any_dy = false, any_want = false;
        for (int k = 0; k < n->n_out && k < 64; k++)
            if (n->out[k] && n->out[k]->id < a->nid && (dy[k] = a->grad[n->out[k]->id])) any_dy = true;
        for (int k = 0; k < n->n_in; k++) any_want |= wants(a, n, k);
        if (!any_dy || !any_want) continue;
        if (!rules[n->op]) return unsupported(a, n, "no gradient rule");
        a->cur = n;
        snprintf(a->name, sizeof a->name, "%s/grad", n->name);
        st = rules[n->op](a, n, dy, dx);
        for (int k = 0; !st && k < n->n_in; k++)
            if (dx[k] && wants(a, n, k)) accumulate(a, n->in[k], dx[k]);
    }
    return st;
}

/* g->train_params / g->train_grads: each trainable parameter (np of them) with a gradient value
 * of its own, named PARAM.grad. */
static void collect_grads(ck_ad *a, int np) {
    ck_graph *g = a->g;
    g->train_params = ck_arena_alloc(g->arena, sizeof(ck_value *) * (size_t)np);
    g->train_grads = ck_arena_alloc(g->arena, sizeof(ck_value *) * (size_t)np);
    g->n_train = 0;
    for (int i = 0; i < g->n_values; i++) {
        ck_value *v = g->values[i];
        if (v->role != CK_ROLE_PARAM || v->id >= a->nid) continue;
        ck_value *gv = a->grad[v->id];
        if (!gv) { /* reaches the loss only through paths whose derivative is identically zero */
            gv = zeros_like(a, v);
        }
        /* a gradient value of its own: it may be shared (a bias added to a tensor whose gradient
         * flows on unchanged) or a constant */
        if (gv->role != CK_ROLE_ACTIVATION || gv->producer == NULL) gv = op1(a, CK_OP_IDENTITY, gv);
        char name[1100];
        snprintf(name, sizeof name, "%s.grad", v->name);
        gv->name = ck_arena_strdup(g->arena, name);
        gv->role = CK_ROLE_GRAD;
        g->train_params[g->n_train] = v;
        g->train_grads[g->n_train++] = gv;
    }
}

ck_status ck_pass_autodiff(ck_graph *g, const ck_options *o, ck_diag *d) {
    CK_ASSERT(g->loss);
    ck_ad a = {.g = g, .o = o, .d = d, .nid = g->next_value_id};
    int nf = g->n_nodes, nid = a.nid, np = 0;
    bool *reach = calloc((size_t)nid, 1), *dep = calloc((size_t)nid, 1);
    a.need = calloc((size_t)nid, 1);
    a.grad = calloc((size_t)nid, sizeof *a.grad);
    CK_ASSERT(reach && dep && a.need && a.grad);
    mark_reaching(g, reach);
    ck_status st = choose_params(g, o, reach, dep, &np, d);
    if (!st) {
        mark_dependent(g, dep);
        for (int i = 0; i < nid; i++) a.need[i] = reach[i] && dep[i];
        st = backward_sweep(&a, nf);
    }
    if (!st) collect_grads(&a, np);
    free(reach), free(dep), free(a.need), free(a.grad);
    return st;
}
