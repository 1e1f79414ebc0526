/* infer_train.c — shape inference for the internal ops the training passes create (loss,
 * gradients, optimizer updates). They are rows of ops.def like any op, named "ckptc.*" so no
 * ONNX file can name them; their attributes are set by the passes, never by users, so broken
 * attributes here are invariant violations (CK_ASSERT), while shapes are still checked.
 */
#include "ck_ir.h"
#include "ckrt_conv_batch.h"

#include <stdio.h>
#include <string.h>

static void set_like(ck_value *o, const ck_value *v, ck_dtype dt) {
    if (!o) return;
    o->dtype = dt;
    o->rank = v->rank;
    memcpy(o->dims, v->dims, sizeof o->dims);
}

static void set_dims(ck_value *o, ck_dtype dt, const ck_attr *a) {
    CK_ASSERT(a && a->kind == CK_ATTR_INTS && a->n <= CK_MAX_RANK);
    o->dtype = dt;
    o->rank = a->n;
    for (int i = 0; i < a->n; i++) o->dims[i] = a->ints[i];
}

static ck_status shape_err(ck_diag *d, const ck_node *n, const char *what) {
    ck_diag_add(d, "node '%s' (%s): %s", n->name, ck_ops[n->op].onnx_name, what);
    return CK_ERR_SHAPE;
}

static bool same_shape(const ck_value *a, const ck_value *b) {
    return a->rank == b->rank && memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0;
}

/* logits (..., V) float, labels (...) int64 -> scalar mean loss */
ck_status ck_infer_cross_entropy(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0], *y = n->in[1];
    char a[CK_SHAPE_STR_MAX], b[CK_SHAPE_STR_MAX], msg[600];
    if (x->rank < 1 || !ck_dtype_is_float(x->dtype)) return shape_err(d, n, "logits must be a float tensor of rank >= 1");
    bool ok = y->rank == x->rank - 1 && (y->dtype == CK_I64 || y->dtype == CK_I32);
    for (int i = 0; ok && i < y->rank; i++) ok = y->dims[i] == x->dims[i];
    if (!ok) {
        snprintf(msg, sizeof msg, "labels %s %s must be int64 with the logits' shape %s minus the class axis",
                 ck_dtype_name(y->dtype), ck_shape_str(y, a, sizeof a), ck_shape_str(x, b, sizeof b));
        return shape_err(d, n, msg);
    }
    n->out[0]->dtype = x->dtype;
    n->out[0]->rank = 0;
    return CK_OK;
}

/* (dloss, logits, labels) -> dlogits */
ck_status ck_infer_cross_entropy_grad(ck_node *n, ck_diag *d) {
    (void)d;
    set_like(n->out[0], n->in[1], n->in[1]->dtype);
    return CK_OK;
}

/* Output shaped like input 1 (UnaryGrad: (dy, x); SoftmaxGrad: (dy, y); PoolGrad: (dy, x)). */
ck_status ck_infer_like_input1(ck_node *n, ck_diag *d) {
    if (n->op != CK_OP_POOL_GRAD && !same_shape(n->in[0], n->in[1])) return shape_err(d, n, "gradient and saved tensor differ in shape");
    set_like(n->out[0], n->in[1], n->in[1]->dtype);
    return CK_OK;
}

/* ckptc.Fused: each member's inference in program order (they read the fused node's inputs and
 * each other's outputs; its outputs are some of theirs). */
ck_status ck_infer_fused(ck_node *n, ck_diag *d) {
    if (n->n_fused < 1) return shape_err(d, n, "a fused node without members");
    for (int i = 0; i < n->n_fused; i++) {
        ck_status st = ck_infer_node(n->fused[i], d);
        if (st) return st;
    }
    return CK_OK;
}

/* DropoutGrad: (dy) -> dx */
ck_status ck_infer_like_input0(ck_node *n, ck_diag *d) {
    (void)d;
    set_like(n->out[0], n->in[0], n->in[0]->dtype);
    return CK_OK;
}

/* (dy, x, scale, mean, inv_std) -> dx, dscale, dbias (scale-shaped) */
ck_status ck_infer_norm_grad(ck_node *n, ck_diag *d) {
    if (!same_shape(n->in[0], n->in[1])) return shape_err(d, n, "gradient and input differ in shape");
    set_like(n->out[0], n->in[1], n->in[1]->dtype);
    for (int k = 1; k < n->n_out; k++) set_like(n->out[k], n->in[2], n->in[2]->dtype);
    return CK_OK;
}

/* ConvGradInput (dy, w) -> dx of attr input_shape; ConvGradWeight (dy, x) -> dw of attr
 * weight_shape; GatherGrad (dy, indices) -> d(data) of attr data_shape; SliceGrad (dy) -> dx of
 * attr input_shape. */
ck_status ck_infer_grad_to_shape(ck_node *n, ck_diag *d) {
    (void)d;
    const char *key = n->op == CK_OP_CONV_GRAD_WEIGHT ? "weight_shape" : n->op == CK_OP_GATHER_GRAD ? "data_shape" : "input_shape";
    set_dims(n->out[0], n->in[0]->dtype, ck_attr_find(n, key));
    return CK_OK;
}

/* GradAllReduce (g_1 .. g_n) -> the same gradients averaged over the ranks, in place. */
ck_status ck_infer_grad_allreduce(ck_node *n, ck_diag *d) {
    if (n->n_out != n->n_in) return shape_err(d, n, "needs one output per gradient");
    for (int k = 0; k < n->n_in; k++) {
        if (!n->in[k] || n->in[k]->dtype != CK_F32) return shape_err(d, n, "averages float32 gradients only");
        set_like(n->out[k], n->in[k], CK_F32);
    }
    return CK_OK;
}

int64_t ck_ws_grad_allreduce(const ck_node *n) {
    int64_t w = ck_attr_int(n, "staging_floats", 0);
    CK_ASSERT(w > 0);
    return 2 * w * (int64_t)sizeof(float);
}

/* SGD (param, grad[, momentum]) and AdamW (param, grad, m, v): updated state, in place. */
ck_status ck_infer_optimizer(ck_node *n, ck_diag *d) {
    for (int i = 1; i < n->n_in; i++)
        if (!same_shape(n->in[0], n->in[i])) return shape_err(d, n, "parameter, gradient and state differ in shape");
    for (int k = 0; k < n->n_out; k++) set_like(n->out[k], n->in[k == 0 ? 0 : k + 1], n->in[0]->dtype);
    return CK_OK;
}

/* The CPU conv-gradient kernels (runtime/cpu_train_conv.c) lower one image (one group) at a time
 * through a column matrix: (C/group * prod(kernel)) x prod(dy spatial) floats, or B images side
 * by side plus a staging matrix for dy where the images have few positions (ckrt_conv_batch.h),
 * every byte written (ConvGradInput: w_g^T dy_g, times its lanes, CK_LANES_ATTR; ConvGradWeight:
 * im2col(x_g)). A 1x1 conv with no begin padding
 * whose output is as large as its input needs none (x or dx is its own column matrix): the
 * kernels test exactly this on the resolved pads, and auto_pad resolves to no padding there. */
int64_t ck_ws_conv_grad(const ck_node *n) {
    const ck_value *dy = n->in[0];
    bool weight = n->op == CK_OP_CONV_GRAD_WEIGHT;
    const ck_attr *shape = ck_attr_find(n, weight ? "weight_shape" : "input_shape");
    CK_ASSERT(shape && shape->n == dy->rank);
    const int64_t *wd = weight ? shape->ints : n->in[1]->dims, *xd = weight ? n->in[1]->dims : shape->ints;
    int64_t group = ck_attr_int(n, "group", 1), k = xd[1] / (group > 0 ? group : 1), sp = 1;
    bool direct = true;
    for (int i = 2; i < dy->rank; i++) {
        k *= wd[i];
        sp *= dy->dims[i];
        direct = direct && wd[i] == 1 && xd[i] == dy->dims[i];
    }
    const ck_attr *pads = ck_attr_find(n, "pads");
    if (strcmp(ck_attr_str(n, "auto_pad", "NOTSET"), "NOTSET") == 0 && pads && pads->n == 2 * (dy->rank - 2))
        for (int i = 0; i < dy->rank - 2; i++) direct = direct && pads->ints[i] == 0;
    if (direct || ck_value_numel(dy) == 0) return 0;
    int64_t mg = dy->dims[1] / (group > 0 ? group : 1);
    int64_t lanes = weight ? 1 : ck_attr_int(n, CK_LANES_ATTR, 1);
    return ck_conv_ws_floats(lanes, ck_conv_batch(weight ? CK_CONV_WGRAD : CK_CONV_DGRAD, dy->dims[0], group, mg, k, sp), mg, k, sp) * (int64_t)ck_dtype_size(dy->dtype);
}
