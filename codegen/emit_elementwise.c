/* emit_elementwise.c — emitters for the elementwise families: binary (with broadcasting), unary.
 */
#include "emit.h"

#include <string.h>

ck_status ck_emit_binary(ck_emit *e, const ck_node *n) {
    static const ck_dtype arith[] = {CK_F32, CK_F64, CK_I64, CK_I32, CK_UNDEF};
    static const ck_dtype cmp[] = {CK_F32, CK_F64, CK_I64, CK_I32, CK_BOOL, CK_UNDEF};
    static const ck_dtype pow_ok[] = {CK_F32, CK_UNDEF};
    const char *op;
    const ck_dtype *ok = arith;
    switch (n->op) {
    case CK_OP_ADD: op = "CKRT_ADD"; break;
    case CK_OP_SUB: op = "CKRT_SUB"; break;
    case CK_OP_MUL: op = "CKRT_MUL"; break;
    case CK_OP_DIV: op = "CKRT_DIV"; break;
    case CK_OP_POW: op = "CKRT_POW", ok = pow_ok; break;
    case CK_OP_EQUAL: op = "CKRT_EQUAL", ok = cmp; break;
    case CK_OP_LESS: op = "CKRT_LESS"; break;
    case CK_OP_GREATER: op = "CKRT_GREATER"; break;
    default: return ck_emit_unsupported(e, n, "not a binary op");
    }
    if (ck_emit_want_dtype(e, n, n->in[0], "input", ok) || ck_emit_want_dtype(e, n, n->in[1], "input", ok))
        return CK_ERR_UNSUPPORTED;
    const ck_value *y = n->out[0];
    int64_t sa[CK_MAX_RANK], sb[CK_MAX_RANK];
    ck_emit_bcast_strides(n->in[0], y->rank, y->dims, sa);
    ck_emit_bcast_strides(n->in[1], y->rank, y->dims, sb);
    ck_emit_printf(e, "    CKRT_TRY(ckrt_binary(c, %s, %s, ", op, ck_emit_dtype(n->in[0]->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->in[0], true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->in[1], true);
    ck_emit_printf(e, ", %d, ", y->rank);
    ck_emit_i64s(e, y->rank, y->dims);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, y->rank, sa);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, y->rank, sb);
    ck_emit_printf(e, "));\n");
    return CK_OK;
}

ck_status ck_emit_unary(ck_emit *e, const ck_node *n) {
    static const ck_dtype f32[] = {CK_F32, CK_UNDEF};
    static const ck_dtype num[] = {CK_F32, CK_I64, CK_I32, CK_UNDEF};
    static const ck_dtype boolean[] = {CK_BOOL, CK_UNDEF};
    const char *op;
    const ck_dtype *ok = f32;
    float alpha = 0;
    switch (n->op) {
    case CK_OP_SQRT: op = "CKRT_SQRT"; break;
    case CK_OP_RECIPROCAL: op = "CKRT_RECIPROCAL"; break;
    case CK_OP_NEG: op = "CKRT_NEG", ok = num; break;
    case CK_OP_EXP: op = "CKRT_EXP"; break;
    case CK_OP_LOG: op = "CKRT_LOG"; break;
    case CK_OP_ABS: op = "CKRT_ABS", ok = num; break;
    case CK_OP_TANH: op = "CKRT_TANH"; break;
    case CK_OP_SIGMOID: op = "CKRT_SIGMOID"; break;
    case CK_OP_RELU: op = "CKRT_RELU", ok = num; break;
    case CK_OP_LEAKY_RELU: op = "CKRT_LEAKY_RELU", alpha = ck_attr_float(n, "alpha", 0.01f); break;
    case CK_OP_ERF: op = "CKRT_ERF"; break;
    case CK_OP_GELU: op = strcmp(ck_attr_str(n, "approximate", "none"), "tanh") == 0 ? "CKRT_GELU_TANH" : "CKRT_GELU"; break;
    case CK_OP_NOT: op = "CKRT_NOT", ok = boolean; break;
    default: return ck_emit_unsupported(e, n, "not a unary op");
    }
    if (ck_emit_want_dtype(e, n, n->in[0], "input", ok)) return CK_ERR_UNSUPPORTED;
    ck_emit_printf(e, "    CKRT_TRY(ckrt_unary(c, %s, %s, ", op, ck_emit_dtype(n->in[0]->dtype));
    ck_emit_ptr(e, n->out[0], false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->in[0], true);
    ck_emit_printf(e, ", %lld, %a));\n", (long long)ck_value_numel(n->out[0]), (double)alpha);
    return CK_OK;
}
