/* emit_elementwise.c — emitters for the elementwise families: binary (with broadcasting), unary,
 * where (broadcasting over three inputs, any dtype), clip (bounds read from the arena at run time,
 * so they may be computed), cast, and fused chains of them (ckptc.Fused: the members as an op list
 * for ckrt_fused, each op's runtime code from the same tables as its unfused call).
 */
#include "emit.h"
#include "../runtime/ckrt_kernels_ops.h" /* the runtime's op codes */
#include "../runtime/ckrt_kernels_fused.h" /* a fused chain's program format */

#include <string.h>

/* ckrt's binary and compare codes by IR op, one entry per row of CKRT_BINARY_OPS and
 * CKRT_COMPARE_OPS (runtime/ckrt_kernels_ops.h); the compare ops are the ones after CKRT_EQUAL. */
static const struct {
    ck_op op;
    const char *name;
} binary_codes[] = {
#define CK_BINARY_ROW_(CODE, IR, ...) {CK_OP_##IR, "CKRT_" #CODE},
    CKRT_BINARY_OPS(CK_BINARY_ROW_) CKRT_COMPARE_OPS(CK_BINARY_ROW_)
#undef CK_BINARY_ROW_
};

ck_status ck_emit_binary(ck_emit *e, const ck_node *n) {
    static const ck_dtype arith[] = {CK_F32, CK_F64, CK_I64, CK_I32, CK_UNDEF};
    static const ck_dtype cmp[] = {CK_F32, CK_F64, CK_I64, CK_I32, CK_BOOL, CK_UNDEF};
    static const ck_dtype pow_ok[] = {CK_F32, CK_UNDEF};
    int k = 0, nk = (int)(sizeof binary_codes / sizeof binary_codes[0]);
    while (k < nk && binary_codes[k].op != n->op) k++;
    if (k == nk) return ck_emit_unsupported(e, n, "not a binary op");
    const char *op = n->op == CK_OP_MOD && ck_attr_int(n, "fmod", 0) ? "CKRT_FMOD" : binary_codes[k].name;
    /* Equal also compares bools; Pow runs on float32 only */
    const ck_dtype *ok = n->op == CK_OP_EQUAL ? cmp : n->op == CK_OP_POW ? pow_ok : arith;
    if (ck_emit_want_dtype(e, n, n->in[0], "input", ok) || ck_emit_want_dtype(e, n, n->in[1], "input", ok))
        return CK_ERR_UNSUPPORTED;
    const ck_value *y = n->out[0];
    int64_t sa[CK_MAX_RANK], sb[CK_MAX_RANK];
    ck_emit_bcast_strides(n->in[0], y->rank, y->dims, sa);
    ck_emit_bcast_strides(n->in[1], y->rank, y->dims, sb);
    ck_emit_call(e, "binary");
    ck_emit_printf(e, ", %s, %s, ", op, ck_emit_dtype(n->in[0]->dtype));
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

/* ckrt's unary codes by IR op, one entry per row of CKRT_UNARY_OPS (runtime/ckrt_kernels_ops.h). */
#define CK_UNARY_ROW_(CODE, IR, ALPHA, BETA, FWD, DERIV) {CK_OP_##IR, "CKRT_" #CODE, ALPHA, BETA},
static const ck_unary_code unary_codes[] = {CKRT_UNARY_OPS(CK_UNARY_ROW_)};
#undef CK_UNARY_ROW_
enum { N_UNARY_CODES = (int)(sizeof unary_codes / sizeof unary_codes[0]) };

static const ck_unary_code *unary_code_named(const char *name) {
    for (int i = 0; i < N_UNARY_CODES; i++)
        if (strcmp(unary_codes[i].name, name) == 0) return &unary_codes[i];
    return NULL;
}

/* Does the runtime's code also run on int64/int32 (a row of CKRT_UNARY_INT_OPS)? */
static bool runs_on_ints(const ck_unary_code *u) {
#define CK_UNARY_INT_ROW_(CODE, EXPR) if (strcmp(u->name, "CKRT_" #CODE) == 0) return true;
    CKRT_UNARY_INT_OPS(CK_UNARY_INT_ROW_)
#undef CK_UNARY_INT_ROW_
    return false;
}

const ck_unary_code *ck_emit_unary_code(const ck_node *n, ck_op op) {
    if (op == CK_OP_GELU && strcmp(ck_attr_str(n, "approximate", "none"), "tanh") == 0)
        return unary_code_named("CKRT_GELU_TANH");
    for (int i = 0; i < N_UNARY_CODES; i++)
        if (unary_codes[i].op == op) return &unary_codes[i];
    return NULL;
}

ck_status ck_emit_unary(ck_emit *e, const ck_node *n) {
    static const ck_dtype f32[] = {CK_F32, CK_UNDEF};
    static const ck_dtype num[] = {CK_F32, CK_I64, CK_I32, CK_UNDEF};
    static const ck_dtype boolean[] = {CK_BOOL, CK_UNDEF};
    const ck_unary_code *u = ck_emit_unary_code(n, n->op);
    if (!u && n->op != CK_OP_NOT) return ck_emit_unsupported(e, n, "not a unary op");
    if (ck_emit_want_dtype(e, n, n->in[0], "input", !u ? boolean : runs_on_ints(u) ? num : f32)) return CK_ERR_UNSUPPORTED;
    float alpha = u ? ck_attr_float(n, "alpha", u->alpha) : 0, beta = u ? ck_attr_float(n, "beta", u->beta) : 0;
    ck_emit_call(e, "unary");
    ck_emit_printf(e, ", %s, %s, ", u ? u->name : "CKRT_NOT", ck_emit_dtype(n->in[0]->dtype));
    ck_emit_ptr(e, n->out[0], false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->in[0], true);
    ck_emit_printf(e, ", %lld, %a, %a));\n", (long long)ck_value_numel(n->out[0]), (double)alpha, (double)beta);
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
    ck_emit_call(e, "where");
    ck_emit_printf(e, ", %zu, ", esz);
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
    ck_emit_call(e, "clip");
    ck_emit_printf(e, ", %s, ", ck_emit_dtype(x->dtype));
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
    ck_emit_call(e, "cast");
    ck_emit_printf(e, ", %s, %s, ", ck_emit_dtype(y->dtype), ck_emit_dtype(x->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %lld));\n", (long long)ck_value_numel(x));
    return CK_OK;
}

/* ---------------------------------------------------------------- ckptc.Fused (passes/fuse.c) */

/* The operand ref of value v in fused node n's program: input k, or member j's result. */
static int fused_ref(const ck_node *n, const ck_value *v) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] == v) return k;
    for (int j = 0; j < n->n_fused; j++)
        if (n->fused[j]->out[0] == v) return CK_F_MAX_IN + j;
    CK_ASSERT(!"a fused member reads a value that is neither an input nor a member's result");
    return -1;
}

/* One member as a ck_fop initializer: {kind, code, a, b, c, alpha, beta}, the codes from the same
 * tables the unfused emitters use. */
static ck_status emit_fused_op(ck_emit *e, const ck_node *n, const ck_node *m) {
    if (m->op == CK_OP_WHERE) {
        ck_emit_printf(e, "{CK_F_WHERE, 0, %d, %d, %d, 0, 0}", fused_ref(n, m->in[0]), fused_ref(n, m->in[1]), fused_ref(n, m->in[2]));
        return CK_OK;
    }
    const ck_unary_code *u = ck_emit_unary_code(m, m->op);
    if (u) {
        float alpha = ck_attr_float(m, "alpha", u->alpha), beta = ck_attr_float(m, "beta", u->beta);
        ck_emit_printf(e, "{CK_F_UNARY, %s, %d, 0, 0, %a, %a}", u->name, fused_ref(n, m->in[0]), (double)alpha, (double)beta);
        return CK_OK;
    }
    int k = 0, nk = (int)(sizeof binary_codes / sizeof binary_codes[0]);
    while (k < nk && binary_codes[k].op != m->op) k++;
    if (k == nk || m->op == CK_OP_MOD || (m->op >= CK_OP_EQUAL && m->op <= CK_OP_GREATER))
        return ck_emit_unsupported(e, m, "not an op a fused chain runs");
    ck_emit_printf(e, "{CK_F_BINARY, %s, %d, %d, 0, 0, 0}", binary_codes[k].name, fused_ref(n, m->in[0]), fused_ref(n, m->in[1]));
    return CK_OK;
}

ck_status ck_emit_fused(ck_emit *e, const ck_node *n) {
    if (n->n_in > CK_F_MAX_IN || n->n_fused > CK_F_MAX_OPS || n->n_out > CK_F_MAX_OUT)
        return ck_emit_unsupported(e, n, "a fused chain of %d ops, %d inputs, %d outputs is over the runtime's limits", n->n_fused,
                                   n->n_in, n->n_out);
    ck_emit_call(e, "fused");
    ck_emit_printf(e, ", &(const ck_fprog){.n_in = %d, .n_ops = %d, .n_out = %d, .out_op = {", n->n_in, n->n_fused, n->n_out);
    for (int k = 0; k < n->n_out; k++) ck_emit_printf(e, "%s%d", k ? ", " : "", fused_ref(n, n->out[k]) - CK_F_MAX_IN);
    ck_emit_printf(e, "}, .in_bool = {");
    for (int k = 0; k < n->n_in; k++) ck_emit_printf(e, "%s%d", k ? ", " : "", n->in[k]->dtype == CK_BOOL);
    ck_emit_printf(e, "}, .period = {");
    for (int k = 0; k < n->n_in; k++) ck_emit_printf(e, "%s%lld", k ? ", " : "", (long long)ck_value_numel(n->in[k]));
    ck_emit_printf(e, "}, .op = {");
    for (int j = 0; j < n->n_fused; j++) {
        ck_emit_printf(e, "%s", j ? ", " : "");
        ck_status st = emit_fused_op(e, n, n->fused[j]);
        if (st) return st;
    }
    ck_emit_printf(e, "}}, &(const ck_fptrs){.in = {");
    for (int k = 0; k < n->n_in; k++) {
        ck_emit_printf(e, "%s", k ? ", " : "");
        ck_emit_ptr(e, n->in[k], true);
    }
    ck_emit_printf(e, "}, .out = {");
    for (int k = 0; k < n->n_out; k++) {
        ck_emit_printf(e, "%s", k ? ", " : "");
        ck_emit_ptr(e, n->out[k], false);
    }
    ck_emit_printf(e, "}}, %lld));\n", (long long)ck_value_numel(n->out[0]));
    return CK_OK;
}
