/* flops.c — floating-point operation counts per node, for the checkpoint report and the budget
 * policy. Products count 2 per multiply-add; everything else counts one per output element
 * (pointwise and data movement alike: what matters is the ratio between GEMM-heavy nodes and the
 * rest, not a precise roofline). */
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

int64_t ck_node_flops(const ck_node *n) {
    switch (n->op) {
    case CK_OP_GEMM: {
        const ck_value *a = n->in[0];
        int64_t k = ck_attr_int(n, "transA", 0) ? a->dims[0] : a->dims[1];
        return 2 * ck_value_numel(n->out[0]) * k;
    }
    case CK_OP_MATMUL: {
        const ck_value *a = n->in[0];
        return 2 * ck_value_numel(n->out[0]) * a->dims[a->rank - 1];
    }
    case CK_OP_CONV: return conv_flops(ck_value_numel(n->out[0]), n->in[1]->dims[1], n->in[1]);
    case CK_OP_CONV_GRAD_INPUT: /* dx = conv^T(dy, w): the forward's count */
        return conv_flops(ck_value_numel(n->in[0]), n->in[1]->dims[1], n->in[1]);
    case CK_OP_CONV_GRAD_WEIGHT: {
        const ck_value *dy = n->in[0];
        int64_t k = ck_value_numel(n->out[0]) / (n->out[0]->dims[0] ? n->out[0]->dims[0] : 1); /* per filter */
        return 2 * ck_value_numel(dy) * k;
    }
    case CK_OP_GRAD_ALLREDUCE: return 0; /* communication (its sums are N - 1 adds per element) */
    default: return numel_out(n);
    }
}
