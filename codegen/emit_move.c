/* emit_move.c — emitters for pooling and the data-movement families: pool, transpose, concat,
 * split, slice, gather, scatter_nd, gather_nd, expand, trilu, pad, constant_of_shape, range.
 *
 * Data movement is dtype-agnostic in the runtime (elements are esz opaque bytes), so these
 * emitters accept every dtype ckptc loads. Transpose, Slice and Expand all become one
 * ckrt_strided_copy: the emitter turns the op into the input element strides seen from each
 * output axis (permuted, multiplied by the step, or 0) plus a start offset.
 */
#include "emit.h"

#include <string.h>

/* in emit_dense.c: strides, dilations and resolved pads of a Conv/pool node */
void ck_emit_window(const ck_node *n, int ns, const int64_t *k, int64_t *strides, int64_t *dilations,
                    int64_t *pads_begin, int64_t *pads_end);
/* in ir/infer.c: Slice's clamped per-axis start, step and count */

static const ck_dtype any_dtype[] = {CK_F32, CK_F64, CK_F16, CK_I64, CK_I32, CK_I16, CK_I8, CK_U8, CK_BOOL, CK_UNDEF};
static const ck_dtype f32_only[] = {CK_F32, CK_UNDEF};

/* row-major element strides of v */
static void contiguous_strides(const ck_value *v, int64_t *s) {
    int64_t acc = 1;
    for (int k = v->rank - 1; k >= 0; k--) {
        s[k] = acc;
        acc *= v->dims[k];
    }
}

static void emit_strided_copy(ck_emit *e, const ck_value *y, const ck_value *x, const int64_t *in_strides, int64_t base) {
    ck_emit_call(e, "strided_copy");
    ck_emit_printf(e, ", %zu, ", ck_dtype_size(x->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %d, ", y->rank);
    ck_emit_i64s(e, y->rank, y->dims);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, y->rank, in_strides);
    ck_emit_printf(e, ", %lld));\n", (long long)base);
}

/* ---------------------------------------------------------------- pooling */

ck_status ck_emit_pool(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0], *y = n->out[0];
    if (ck_emit_want_dtype(e, n, x, "input", f32_only)) return CK_ERR_UNSUPPORTED;
    if (ck_attr_int(n, "storage_order", 0) != 0)
        return ck_emit_unsupported(e, n, "storage_order=1 (column-major indices) is not supported");
    bool is_max = n->op == CK_OP_MAX_POOL;
    const ck_value *idx = is_max && n->n_out > 1 ? n->out[1] : NULL;
    int ns = x->rank - 2;
    const ck_attr *ka = ck_attr_find(n, "kernel_shape");
    if (!ka || ka->n != ns) return ck_emit_unsupported(e, n, "kernel_shape must have %d values", ns);
    int64_t st[CK_MAX_RANK], dl[CK_MAX_RANK], pb[CK_MAX_RANK], pe[CK_MAX_RANK];
    ck_emit_window(n, ns, ka->ints, st, dl, pb, pe);
    ck_emit_call(e, "pool");
    ck_emit_printf(e, ", %s, ", is_max ? "CKRT_POOL_MAX" : "CKRT_POOL_AVG");
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    if (idx) ck_emit_ptr(e, idx, false);
    else ck_emit_printf(e, "NULL");
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %d, %lld, %lld, ", ns, (long long)x->dims[0], (long long)x->dims[1]);
    ck_emit_i64s(e, ns, x->dims + 2);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, ns, y->dims + 2);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, ns, ka->ints);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, ns, st);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, ns, pb);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, ns, pe);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, ns, dl);
    ck_emit_printf(e, ", %d));\n", is_max ? 0 : ck_attr_int(n, "count_include_pad", 0) != 0);
    return CK_OK;
}

/* ---------------------------------------------------------------- strided copies */

ck_status ck_emit_transpose(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0], *y = n->out[0];
    if (ck_emit_want_dtype(e, n, x, "input", any_dtype)) return CK_ERR_UNSUPPORTED;
    int64_t xs[CK_MAX_RANK], s[CK_MAX_RANK], perm[CK_MAX_RANK];
    ck_transpose_perm(n, perm);
    contiguous_strides(x, xs);
    for (int i = 0; i < y->rank; i++) s[i] = xs[perm[i]];
    emit_strided_copy(e, y, x, s, 0);
    return CK_OK;
}

ck_status ck_emit_slice(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0], *y = n->out[0];
    if (ck_emit_want_dtype(e, n, x, "input", any_dtype)) return CK_ERR_UNSUPPORTED;
    int64_t start[CK_MAX_RANK], step[CK_MAX_RANK], count[CK_MAX_RANK], xs[CK_MAX_RANK], s[CK_MAX_RANK];
    if (ck_slice_params(n, start, step, count, e->d)) return CK_ERR_UNSUPPORTED;
    contiguous_strides(x, xs);
    int64_t base = 0;
    bool empty = false;
    for (int i = 0; i < x->rank; i++) {
        empty = empty || count[i] == 0;
        s[i] = xs[i] * step[i];
        base += start[i] * xs[i];
    }
    emit_strided_copy(e, y, x, s, empty ? 0 : base);
    return CK_OK;
}

/* ---------------------------------------------------------------- scatter_nd, gather_nd */

/* The index tuples' count n and length k, and the elements of data each addresses (inner). */
static void nd_geometry(const ck_value *data, const ck_value *idx, int *k, int64_t *n, int64_t *inner) {
    *k = (int)idx->dims[idx->rank - 1];
    *n = ck_emit_prod(idx->dims, 0, idx->rank - 1);
    *inner = ck_emit_prod(data->dims, *k, data->rank);
}

ck_status ck_emit_scatter_nd(ck_emit *e, const ck_node *n) {
    static const ck_dtype idx_ok[] = {CK_I64, CK_UNDEF};
    const ck_value *x = n->in[0], *idx = n->in[1], *u = n->in[2], *y = n->out[0];
    const char *red = ck_attr_str(n, "reduction", "none");
    bool plain = strcmp(red, "none") == 0;
    if (ck_emit_want_dtype(e, n, x, "data", plain ? any_dtype : f32_only) || ck_emit_want_dtype(e, n, idx, "indices", idx_ok))
        return CK_ERR_UNSUPPORTED;
    int k;
    int64_t cnt, inner;
    nd_geometry(x, idx, &k, &cnt, &inner);
    ck_emit_call(e, "scatter_nd");
    ck_emit_printf(e, ", %zu, %s, ", ck_dtype_size(x->dtype),
                   plain ? "CKRT_SCATTER_NONE" : strcmp(red, "add") == 0 ? "CKRT_SCATTER_ADD" : "CKRT_SCATTER_MUL");
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, idx, true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, u, true);
    ck_emit_printf(e, ", %d, ", k);
    ck_emit_i64s(e, k, x->dims);
    ck_emit_printf(e, ", %lld, %lld, %lld));\n", (long long)cnt, (long long)inner, (long long)ck_value_numel(x));
    return CK_OK;
}

ck_status ck_emit_gather_nd(ck_emit *e, const ck_node *n) {
    static const ck_dtype idx_ok[] = {CK_I64, CK_UNDEF};
    const ck_value *x = n->in[0], *idx = n->in[1], *y = n->out[0];
    if (ck_emit_want_dtype(e, n, x, "data", any_dtype) || ck_emit_want_dtype(e, n, idx, "indices", idx_ok))
        return CK_ERR_UNSUPPORTED;
    int k;
    int64_t cnt, inner;
    nd_geometry(x, idx, &k, &cnt, &inner);
    ck_emit_call(e, "gather_nd");
    ck_emit_printf(e, ", %zu, ", ck_dtype_size(x->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, idx, true);
    ck_emit_printf(e, ", %d, ", k);
    ck_emit_i64s(e, k, x->dims);
    ck_emit_printf(e, ", %lld, %lld));\n", (long long)cnt, (long long)inner);
    return CK_OK;
}

ck_status ck_emit_expand(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0], *y = n->out[0];
    if (ck_emit_want_dtype(e, n, x, "input", any_dtype)) return CK_ERR_UNSUPPORTED;
    int64_t s[CK_MAX_RANK];
    ck_emit_bcast_strides(x, y->rank, y->dims, s);
    emit_strided_copy(e, y, x, s, 0);
    return CK_OK;
}

/* ---------------------------------------------------------------- concat, split, gather */

static int64_t norm_axis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

ck_status ck_emit_concat(ck_emit *e, const ck_node *n) {
    const ck_value *y = n->out[0];
    for (int i = 0; i < n->n_in; i++)
        if (ck_emit_want_dtype(e, n, n->in[i], "input", any_dtype)) return CK_ERR_UNSUPPORTED;
    int axis = (int)norm_axis(ck_attr_int(n, "axis", 0), y->rank);
    int64_t lens[64];
    for (int i = 0; i < n->n_in; i++) lens[i] = n->in[i]->dims[axis];
    ck_emit_call(e, "concat");
    ck_emit_printf(e, ", %zu, ", ck_dtype_size(y->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", %d, (const void *const[]){", n->n_in);
    for (int i = 0; i < n->n_in; i++) {
        if (i) ck_emit_printf(e, ", ");
        ck_emit_ptr(e, n->in[i], true);
    }
    ck_emit_printf(e, "}, ");
    ck_emit_i64s(e, n->n_in, lens);
    ck_emit_printf(e, ", %lld, %lld));\n", (long long)ck_emit_prod(y->dims, 0, axis), (long long)ck_emit_prod(y->dims, axis + 1, y->rank));
    return CK_OK;
}

ck_status ck_emit_split(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0];
    if (ck_emit_want_dtype(e, n, x, "input", any_dtype)) return CK_ERR_UNSUPPORTED;
    int axis = (int)norm_axis(ck_attr_int(n, "axis", 0), x->rank);
    int64_t lens[64];
    for (int i = 0; i < n->n_out; i++) {
        if (!n->out[i]) return ck_emit_unsupported(e, n, "output %d is absent; Split needs every output", i);
        lens[i] = n->out[i]->dims[axis];
    }
    ck_emit_call(e, "split");
    ck_emit_printf(e, ", %zu, %d, (void *const[]){", ck_dtype_size(x->dtype), n->n_out);
    for (int i = 0; i < n->n_out; i++) {
        if (i) ck_emit_printf(e, ", ");
        ck_emit_ptr(e, n->out[i], false);
    }
    ck_emit_printf(e, "}, ");
    ck_emit_i64s(e, n->n_out, lens);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %lld, %lld));\n", (long long)ck_emit_prod(x->dims, 0, axis), (long long)ck_emit_prod(x->dims, axis + 1, x->rank));
    return CK_OK;
}

ck_status ck_emit_gather(ck_emit *e, const ck_node *n) {
    static const ck_dtype idx_ok[] = {CK_I64, CK_I32, CK_UNDEF};
    const ck_value *x = n->in[0], *idx = n->in[1], *y = n->out[0];
    if (ck_emit_want_dtype(e, n, x, "input", any_dtype) || ck_emit_want_dtype(e, n, idx, "indices", idx_ok))
        return CK_ERR_UNSUPPORTED;
    int axis = (int)norm_axis(ck_attr_int(n, "axis", 0), x->rank);
    ck_emit_call(e, "gather");
    ck_emit_printf(e, ", %zu, ", ck_dtype_size(x->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, idx, true);
    ck_emit_printf(e, ", %s, %lld, %lld, %lld, %lld));\n", ck_emit_dtype(idx->dtype), (long long)ck_emit_prod(x->dims, 0, axis),
                   (long long)x->dims[axis], (long long)ck_emit_prod(x->dims, axis + 1, x->rank), (long long)ck_value_numel(idx));
    return CK_OK;
}

/* ---------------------------------------------------------------- trilu, fill, range */

ck_status ck_emit_trilu(ck_emit *e, const ck_node *n) {
    const ck_value *x = n->in[0], *y = n->out[0];
    if (ck_emit_want_dtype(e, n, x, "input", any_dtype)) return CK_ERR_UNSUPPORTED;
    const ck_value *kv = n->n_in > 1 ? n->in[1] : NULL;
    if (kv && !kv->data) return ck_emit_unsupported(e, n, "k must be a constant known at compile time");
    int64_t k = kv ? ck_value_get_i(kv, 0) : 0, rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    ck_emit_call(e, "trilu");
    ck_emit_printf(e, ", %zu, ", ck_dtype_size(x->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %lld, %lld, %lld, %lld, %d));\n", (long long)ck_emit_prod(x->dims, 0, x->rank - 2), (long long)rows,
                   (long long)cols, (long long)k, ck_attr_int(n, "upper", 1) != 0);
    return CK_OK;
}

/* ConstantOfShape's value (default float 0) as a one-element compound literal of its C type. */
/* One element literal of dtype dt inside "(const T[]){...}": element 0 of v, or `dflt` when v is
 * NULL. */
static void emit_elem_literal(ck_emit *e, ck_dtype dt, const ck_value *v, double dflt) {
    if (!v) {
        if (dt == CK_F32 || dt == CK_F64) ck_emit_printf(e, "%a", dt == CK_F32 ? (double)(float)dflt : dflt);
        else ck_emit_printf(e, "%lld", (long long)dflt);
        return;
    }
    switch (dt) {
    case CK_F32: ck_emit_printf(e, "%a", (double)*(const float *)v->data); break;
    case CK_F64: ck_emit_printf(e, "%a", *(const double *)v->data); break;
    case CK_F16: ck_emit_printf(e, "0x%04x", (unsigned)*(const uint16_t *)v->data); break;
    case CK_I64: {
        int64_t x = *(const int64_t *)v->data;
        if (x == INT64_MIN) ck_emit_printf(e, "INT64_MIN");
        else ck_emit_printf(e, "%lldLL", (long long)x);
        break;
    }
    default: ck_emit_printf(e, "%lld", (long long)ck_value_get_i(v, 0)); break;
    }
}

ck_status ck_emit_constant_of_shape(ck_emit *e, const ck_node *n) {
    const ck_value *y = n->out[0];
    if (ck_emit_want_dtype(e, n, y, "output", any_dtype)) return CK_ERR_UNSUPPORTED;
    const ck_attr *a = ck_attr_find(n, "value");
    const ck_value *v = a && a->kind == CK_ATTR_TENSOR ? a->t : NULL;
    if (v && (!v->data || v->dtype != y->dtype)) return ck_emit_unsupported(e, n, "attribute 'value' has no data");
    ck_emit_call(e, "fill");
    ck_emit_printf(e, ", %zu, ", ck_dtype_size(y->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", (const %s[]){", ck_emit_ctype(y->dtype));
    emit_elem_literal(e, y->dtype, v, 0);
    ck_emit_printf(e, "}, %lld));\n", (long long)ck_value_numel(y));
    return CK_OK;
}

/* Pad: the resolved per-axis begin pads, the mode, and the constant (input 2, the attribute
 * 'value' before opset 11, or 0) as a literal. */
ck_status ck_emit_pad(ck_emit *e, const ck_node *n) {
    static const char *const modes[] = {"CKRT_PAD_CONSTANT", "CKRT_PAD_REFLECT", "CKRT_PAD_EDGE"};
    const ck_value *x = n->in[0], *y = n->out[0];
    const ck_value *cv = n->n_in > 2 && n->in[2] ? n->in[2] : NULL;
    if (ck_emit_want_dtype(e, n, x, "input", any_dtype)) return CK_ERR_UNSUPPORTED;
    int64_t begin[CK_MAX_RANK], end[CK_MAX_RANK];
    int mode;
    if (ck_pad_params(n, begin, end, &mode, e->d)) return CK_ERR_UNSUPPORTED;
    if (cv && !cv->data) return ck_emit_unsupported(e, n, "constant_value must be known at compile time");
    ck_emit_call(e, "pad");
    ck_emit_printf(e, ", %zu, ", ck_dtype_size(x->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, x, true);
    ck_emit_printf(e, ", %d, ", x->rank);
    ck_emit_i64s(e, x->rank, x->dims);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, y->rank, y->dims);
    ck_emit_printf(e, ", ");
    ck_emit_i64s(e, x->rank, begin);
    ck_emit_printf(e, ", %s, (const %s[]){", modes[mode], ck_emit_ctype(x->dtype));
    emit_elem_literal(e, x->dtype, cv, cv ? 0 : ck_attr_float(n, "value", 0.0f));
    ck_emit_printf(e, "}));\n");
    return CK_OK;
}

ck_status ck_emit_range(ck_emit *e, const ck_node *n) {
    static const ck_dtype ok[] = {CK_F32, CK_F64, CK_I64, CK_I32, CK_UNDEF};
    const ck_value *y = n->out[0];
    if (ck_emit_want_dtype(e, n, y, "output", ok)) return CK_ERR_UNSUPPORTED;
    ck_emit_call(e, "range");
    ck_emit_printf(e, ", %s, ", ck_emit_dtype(y->dtype));
    ck_emit_ptr(e, y, false);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->in[0], true);
    ck_emit_printf(e, ", ");
    ck_emit_ptr(e, n->in[2], true);
    ck_emit_printf(e, ", %lld));\n", (long long)ck_value_numel(y));
    return CK_OK;
}
