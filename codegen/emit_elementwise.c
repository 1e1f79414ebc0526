/* emit_elementwise.c — emitters for the elementwise families: binary (with broadcasting), unary,
 * where (broadcasting over three inputs, any dtype), clip (bounds read from the arena at run time,
 * so they may be computed) and cast.
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

ck_status ck_emit_where(ck_emit *e, const ck_node *n) {
    static const ck_dtype cond_ok[] = {CK_BOOL, CK_UNDEF};
    if (ck_emit_want_dtype(e, n, n->in[0], "condition", cond_ok)) return CK_ERR_UNSUPPORTED;
    const ck_value *y = n->out[0];
    size_t esz = ck_dtype_size(y->dtype);
    if (esz != 1 && esz != 2 && esz != 4 && esz != 8)
        return ck_emit_unsupported(e, n, "values of dtype %s are not supported", ck_dtype_name(y->dtype));
    int64_t sc[CK_MAX_RANK], sa[CK_MAX_RANK], sb[CK_MAX_RANK];
    ck_emit_bcast_strides(n->in[0], y->rank, y->dims, sc);
    ck_emit_bcast_strides(n->in[1], y->rank, y->dims, sa);
    ck_emit_bcast_strides(n->in[2], y->rank, y->dims, sb);
    ck_emit_printf(e, "    CKRT_TRY(ckrt_where(c, %zu, ", esz);
    ck_emit_ptr(e, y, false);
    for (int i = 0; i < 3; i++) {
        ck_emit_printf(e, ", ");
        ck_emit_ptr(e, n->in[i], true);
    }
    ck_emit_printf(e, ", %d, ", y->rank);
    ck_emit_i64s(e, y->rank, y->dims);
    const int64_t *st[3] = {sc, sa, sb};
    for (int i = 0; i < 3; i++) {
        ck_emit_printf(e, ", ");
        ck_emit_i64s(e, y->rank, st[i]);
    }
    ck_emit_printf(e, "));\n");
    return CK_OK;
}

ck_status ck_emit_clip(ck_emit *e, const ck_node *n) {
    static const ck_dtype ok[] = {CK_F32, CK_F64, CK_I64, CK_I32, CK_I16, CK_I8, CK_U8, CK_UNDEF};
    const ck_value *x = n->in[0];
    if (ck_emit_want_dtype(e, n, x, "input", ok)) return CK_ERR_UNSUPPORTED;
    static const char *what[] = {"", "min", "max"};
    for (int i = 1; i < n->n_in && i < 3; i++) {
        const ck_value *b = n->in[i];
        if (!b) continue;
        if (b->dtype != x->dtype)
            return ck_emit_unsupported(e, n, "%s '%s' has dtype %s but the input is %s", what[i], b->name,
                                       ck_dtype_name(b->dtype), ck_dtype_name(x->dtype));
        if (ck_value_numel(b) != 1)
            return ck_emit_unsupported(e, n, "%s '%s' must hold one element", what[i], b->name);
    }
    ck_emit_printf(e, "    CKRT_TRY(ckrt_clip(c, %s, ", ck_emit_dtype(x->dtype));
    ck_emit_ptr(e, n->out[0], false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %lld", (long long)ck_value_numel(x));
    for (int i = 1; i < 3; i++) {
        ck_emit_printf(e, ", ");
        if (i < n->n_in && n->in[i]) ck_emit_ptr(e, n->in[i], true);
        else ck_emit_printf(e, "NULL");
    }
    ck_emit_printf(e, "));\n");
    return CK_OK;
}

static bool castable(ck_dtype t) {
    switch (t) {
    case CK_F32: case CK_F64: case CK_I64: case CK_I32: case CK_I16: case CK_I8: case CK_U8: case CK_BOOL: return true;
    default: return false;
    }
}

ck_status ck_emit_cast(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0], *y = n->out[0];
    if (!castable(x->dtype) || !castable(y->dtype))
        return ck_emit_unsupported(e, n, "cast from %s to %s is not supported (ckptc casts among float32, float64, "
                                   "int64, int32, int16, int8, uint8 and bool)", ck_dtype_name(x->dtype),
                                   ck_dtype_name(y->dtype));
    ck_emit_printf(e, "    CKRT_TRY(ckrt_cast(c, %s, %s, ", ck_emit_dtype(y->dtype), ck_emit_dtype(x->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %lld));\n", (long long)ck_value_numel(x));
    return CK_OK;
}
