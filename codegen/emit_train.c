/* emit_train.c — emitters of the training ops: the loss, pointwise and softmax derivatives,
 * dropout's backward and the optimizer updates (runtime/cpu_train.c). */
#include "emit.h"

#include <float.h>

static const ck_dtype f32_only[] = {CK_F32, CK_UNDEF};

static ck_status want_f32(ck_emit *e, const ck_node *n, int n_in) {
    for (int i = 0; i < n_in; i++)
        if (n->in[i] && ck_emit_want_dtype(e, n, n->in[i], "input", f32_only)) return CK_ERR_UNSUPPORTED;
    return CK_OK;
}

static void args(ck_emit *e, int n, const ck_value *const *vs, const bool *is_const) {
    for (int i = 0; i < n; i++) {
        ck_emit_printf(e, ", ");
        if (vs[i]) ck_emit_ptr(e, vs[i], is_const[i]);
        else ck_emit_printf(e, "NULL");
    }
}

ck_status ck_emit_cross_entropy(ck_emit *e, const ck_node *n) {
    if (want_f32(e, n, 1)) return CK_ERR_UNSUPPORTED;
    const ck_value *x = n->in[0];
    int64_t classes = x->dims[x->rank - 1], rows = ck_value_numel(x) / (classes ? classes : 1);
    ck_emit_call(e, "cross_entropy");
    args(e, 3, (const ck_value *[]){n->out[0], x, n->in[1]}, (const bool[]){false, true, true});
    ck_emit_printf(e, ", %s, %lld, %lld));\n", ck_emit_dtype(n->in[1]->dtype), (long long)rows, (long long)classes);
    return CK_OK;
}

ck_status ck_emit_cross_entropy_grad(ck_emit *e, const ck_node *n) {
    if (want_f32(e, n, 2)) return CK_ERR_UNSUPPORTED;
    const ck_value *x = n->in[1];
    int64_t classes = x->dims[x->rank - 1], rows = ck_value_numel(x) / (classes ? classes : 1);
    ck_emit_call(e, "cross_entropy_grad");
    args(e, 4, (const ck_value *[]){n->out[0], n->in[0], x, n->in[2]}, (const bool[]){false, true, true, true});
    ck_emit_printf(e, ", %s, %lld, %lld));\n", ck_emit_dtype(n->in[2]->dtype), (long long)rows, (long long)classes);
    return CK_OK;
}

ck_status ck_emit_unary_grad(ck_emit *e, const ck_node *n) {
    if (want_f32(e, n, 2)) return CK_ERR_UNSUPPORTED;
    /* the forward's code and attributes (autodiff copied them onto the UnaryGrad node) */
    ck_op fwd = (ck_op)ck_attr_int(n, "op", -1);
    const ck_unary_code *u = ck_emit_unary_code(n, fwd);
    if (!u && fwd != CK_OP_CLIP) return ck_emit_unsupported(e, n, "no derivative kernel for this op");
    float alpha = u ? ck_attr_float(n, "alpha", u->alpha) : 0, beta = u ? ck_attr_float(n, "beta", u->beta) : 0;
    ck_emit_call(e, "unary_grad");
    ck_emit_printf(e, ", %s", u ? u->name : "CKRT_CLIP_GRAD");
    args(e, 3, (const ck_value *[]){n->out[0], n->in[0], n->in[1]}, (const bool[]){false, true, true});
    /* an absent bound is infinite; C has no literal for that, and +-FLT_MAX acts the same here */
    float lo = ck_attr_float(n, "lo", 0.0f), hi = ck_attr_float(n, "hi", 0.0f);
    lo = lo < -FLT_MAX ? -FLT_MAX : lo;
    hi = hi > FLT_MAX ? FLT_MAX : hi;
    ck_emit_printf(e, ", %lld, %a, %a, %a, %a));\n", (long long)ck_value_numel(n->out[0]), (double)alpha, (double)beta,
                   (double)lo, (double)hi);
    return CK_OK;
}

ck_status ck_emit_softmax_grad(ck_emit *e, const ck_node *n) {
    if (want_f32(e, n, 2)) return CK_ERR_UNSUPPORTED;
    const ck_value *y = n->in[1];
    int64_t axis = ck_attr_int(n, "axis", y->rank - 1), outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= y->dims[i];
    for (int i = (int)axis + 1; i < y->rank; i++) inner *= y->dims[i];
    ck_emit_call(e, "softmax_grad");
    ck_emit_printf(e, ", %d", (int)ck_attr_int(n, "log", 0));
    args(e, 3, (const ck_value *[]){n->out[0], n->in[0], y}, (const bool[]){false, true, true});
    ck_emit_printf(e, ", %lld, %lld, %lld));\n", (long long)outer, (long long)y->dims[axis], (long long)inner);
    return CK_OK;
}

ck_status ck_emit_dropout_grad(ck_emit *e, const ck_node *n) {
    if (want_f32(e, n, 1)) return CK_ERR_UNSUPPORTED;
    ck_emit_call(e, "dropout_grad");
    args(e, 2, (const ck_value *[]){n->out[0], n->in[0]}, (const bool[]){false, true});
    ck_emit_printf(e, ", %lld, %a, %lldu));\n", (long long)ck_value_numel(n->out[0]), (double)ck_attr_float(n, "ratio", 0.5f),
                   (long long)ck_attr_int(n, "key", 0));
    return CK_OK;
}

/* The update's gradient accumulator (ckptc --grad-accum: its last input), or NULL. */
static const ck_value *accumulator(const ck_node *n) { return ck_attr_int(n, "accum", 0) ? n->in[n->n_in - 1] : NULL; }

ck_status ck_emit_sgd(ck_emit *e, const ck_node *n) {
    if (want_f32(e, n, n->n_in)) return CK_ERR_UNSUPPORTED;
    const ck_value *acc = accumulator(n);
    ck_emit_call(e, "sgd");
    args(e, 4, (const ck_value *[]){n->in[0], n->in[1], n->n_in - (acc != NULL) > 2 ? n->in[2] : NULL, acc},
         (const bool[]){false, true, false, false});
    ck_emit_printf(e, ", %lld, %a, %a, %a));\n", (long long)ck_value_numel(n->in[0]), (double)ck_attr_float(n, "lr", 0),
                   (double)ck_attr_float(n, "momentum", 0), (double)ck_attr_float(n, "weight_decay", 0));
    return CK_OK;
}

ck_status ck_emit_adamw(ck_emit *e, const ck_node *n) {
    if (want_f32(e, n, n->n_in)) return CK_ERR_UNSUPPORTED;
    ck_emit_call(e, "adamw");
    args(e, 5, (const ck_value *[]){n->in[0], n->in[1], n->in[2], n->in[3], accumulator(n)}, (const bool[]){false, true, false, false, false});
    ck_emit_printf(e, ", %lld, %a, %a, %a, %a, %a));\n", (long long)ck_value_numel(n->in[0]), (double)ck_attr_float(n, "lr", 0),
                   (double)ck_attr_float(n, "beta1", 0), (double)ck_attr_float(n, "beta2", 0), (double)ck_attr_float(n, "eps", 0),
                   (double)ck_attr_float(n, "weight_decay", 0));
    return CK_OK;
}

ck_status ck_emit_offload(ck_emit *e, const ck_node *n) {
    ck_emit_call(e, "offload");
    ck_emit_printf(e, ", H + %lld, A + %lld, %lld));\n", (long long)n->out[0]->offset,
                   (long long)n->in[0]->offset, (long long)ck_value_bytes(n->in[0]));
    return CK_OK;
}

ck_status ck_emit_reload(ck_emit *e, const ck_node *n) {
    ck_emit_call(e, "reload");
    ck_emit_printf(e, ", A + %lld, H + %lld, %lld));\n", (long long)n->out[0]->offset,
                   (long long)n->in[0]->offset, (long long)ck_value_bytes(n->in[0]));
    return CK_OK;
}
