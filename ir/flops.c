/* flops.c — floating-point operation counts per node, for the checkpoint report and the budget
 * policy. Products count 2 per multiply-add; everything else counts one per output element
 * (pointwise and data movement alike: what matters is the ratio between GEMM-heavy nodes and the
 * rest, not a precise roofline). The FLOPs column of ops.def names the count of each op that is
 * not one per output element (NULL: the default). */
#include "ck_ir.h"

static int64_t numel_out(const ck_node *n) {
    int64_t s = 0;
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k]) s += ck_value_numel(n->out[k]);
    return s;
}

/* 2 * (output elements) * (input channels per group) * prod(kernel) */
static int64_t conv_flops(int64_t out_elems, int64_t c_per_group, const ck_value *w) {
    int64_t k = c_per_group;
    for (int i = 2; i < w->rank; i++) k *= w->dims[i];
    return 2 * out_elems * k;
}

static int64_t flops_gemm(const ck_node *n) {
    const ck_value *a = n->in[0];
    int64_t k = ck_attr_int(n, "transA", 0) ? a->dims[0] : a->dims[1];
    return 2 * ck_value_numel(n->out[0]) * k;
}

static int64_t flops_matmul(const ck_node *n) {
    ck_matmul_layout L;
    const ck_value *a = n->in[0];
    return 2 * ck_value_numel(n->out[0]) * (ck_matmul_layout_of(n, &L) ? L.K : a->dims[a->rank - 1]);
}

static int64_t flops_conv(const ck_node *n) { return conv_flops(ck_value_numel(n->out[0]), n->in[1]->dims[1], n->in[1]); }

/* dx = conv^T(dy, w): the forward's count */
static int64_t flops_conv_grad_input(const ck_node *n) {
    return conv_flops(ck_value_numel(n->in[0]), n->in[1]->dims[1], n->in[1]);
}

static int64_t flops_conv_grad_weight(const ck_node *n) {
    const ck_value *dy = n->in[0];
    int64_t k = ck_value_numel(n->out[0]) / (n->out[0]->dims[0] ? n->out[0]->dims[0] : 1); /* per filter */
    return 2 * ck_value_numel(dy) * k;
}

/* communication (its sums are N - 1 adds per element) */
static int64_t flops_none(const ck_node *n) {
    (void)n;
    return 0;
}

/* ckptc.Fused: the sum of its members' counts (declared before use: the table below names it) */
static int64_t flops_fused(const ck_node *n);

static int64_t (*const flops_of[CK_OP_COUNT])(const ck_node *n) = {
#define CK_OP(e, onnx, in_min, in_max, out_min, out_max, flags, diff, infer, grad, kernel, ws, flops, fold, view, in_place) \
    [CK_OP_##e] = flops,
#include "ops.def"
#undef CK_OP
};

int64_t ck_node_flops(const ck_node *n) { return flops_of[n->op] ? flops_of[n->op](n) : numel_out(n); }

static int64_t flops_fused(const ck_node *n) {
    int64_t s = 0;
    for (int i = 0; i < n->n_fused; i++) s += ck_node_flops(n->fused[i]);
    return s;
}
