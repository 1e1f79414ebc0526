/* infer.c — static shape and dtype inference, one function per op family (named in ops.def).
 *
 * ckptc compiles for static shapes: every value's dims are known after loading. Each function
 * reads its node's inputs (dtype, dims, and for shape-like inputs the constant data), checks
 * them against the ONNX operator spec, and writes dtype and dims into the node's outputs.
 * Errors name the node, its op and the offending inputs with their shapes, so a user can find
 * the problem in their exporter's graph.
 */
#include "ck_ir.h"
#include "ckrt_conv_batch.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define OPNAME(n) (ck_ops[(n)->op].onnx_name)

#define node_err ck_node_err

ck_status ck_node_err(ck_diag *d, const ck_node *n, ck_status s, const char *fmt, ...) {
    char buf[1500];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ck_diag_add(d, "node '%s' (%s): %s", n->name, OPNAME(n), buf);
    return s;
}

/* "input 1 'y' (4,5)" */
static const char *in_desc(const ck_node *n, int i, char *buf, size_t len) {
    char sh[CK_SHAPE_STR_MAX];
    const ck_value *v = n->in[i];
    snprintf(buf, len, "input %d '%s' %s %s", i, v->name, ck_dtype_name(v->dtype), ck_shape_str(v, sh, sizeof sh));
    return buf;
}

void ck_node_set_out(ck_node *n, int k, ck_dtype dt, int rank, const int64_t *dims) {
    ck_value *o = n->out[k];
    if (!o) return;
    o->dtype = dt;
    o->rank = rank;
    for (int i = 0; i < rank; i++) o->dims[i] = dims[i];
}

#define set_out ck_node_set_out

static void copy_out(ck_node *n, int k, const ck_value *like) { set_out(n, k, like->dtype, like->rank, like->dims); }

static bool has_in(const ck_node *n, int i) { return i < n->n_in && n->in[i]; }

/* Normalizes axis into [0, rank); false when out of range. */
static bool norm_axis(int64_t *axis, int rank) {
    if (*axis < -rank || *axis >= rank) return false;
    if (*axis < 0) *axis += rank;
    return true;
}

/* Reads a constant 1-D (or scalar) integer input; the data must be known at compile time. */
static ck_status const_ints(ck_node *n, int i, int64_t *out, int max, int *count, ck_diag *d) {
    char b[300];
    const ck_value *v = n->in[i];
    if (!v->data && v->rank == 1 && v->dims[0] == 0 && ck_dtype_is_int(v->dtype)) {
        *count = 0; /* an empty list is known from its shape alone */
        return CK_OK;
    }
    if (!v->data)
        return node_err(d, n, CK_ERR_UNSUPPORTED,
                        "%s must be a constant known at compile time, but it is computed at run time",
                        in_desc(n, i, b, sizeof b));
    if (!ck_dtype_is_int(v->dtype) || v->rank > 1)
        return node_err(d, n, CK_ERR_SHAPE, "%s must be a 1-D integer tensor", in_desc(n, i, b, sizeof b));
    int64_t cnt = ck_value_numel(v);
    if (cnt > max) return node_err(d, n, CK_ERR_SHAPE, "%s has more than %d elements", in_desc(n, i, b, sizeof b), max);
    for (int64_t k = 0; k < cnt; k++) out[k] = ck_value_get_i(v, k);
    *count = (int)cnt;
    return CK_OK;
}

/* An INTS attribute into out; returns its length, or -1 when absent. */
static int attr_ints(const ck_node *n, const char *name, int64_t *out, int max) {
    const ck_attr *a = ck_attr_find(n, name);
    if (!a || a->kind != CK_ATTR_INTS) return -1;
    int k = a->n < max ? a->n : max;
    for (int i = 0; i < k; i++) out[i] = a->ints[i];
    return a->n;
}

static bool check_dtype_float(ck_node *n, int i, ck_diag *d) {
    char b[300];
    if (ck_dtype_is_float(n->in[i]->dtype)) return true;
    node_err(d, n, CK_ERR_UNSUPPORTED, "%s must be a floating-point tensor", in_desc(n, i, b, sizeof b));
    return false;
}

/* Multidirectional (numpy) broadcasting of a and b into out; false when incompatible. */
static bool broadcast(const ck_value *a, const ck_value *b, int *rank, int64_t *dims) {
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        dims[i] = da == 1 ? db : da;
    }
    *rank = r;
    return true;
}

static ck_status broadcast_err(ck_node *n, int i, int j, ck_diag *d) {
    char b1[300], b2[300];
    return node_err(d, n, CK_ERR_SHAPE, "%s and %s cannot be broadcast together", in_desc(n, i, b1, sizeof b1),
                    in_desc(n, j, b2, sizeof b2));
}

/* ---------------------------------------------------------------- elementwise */

static ck_status binary_shape(ck_node *n, ck_dtype out_dt, ck_diag *d) {
    int r;
    int64_t dims[CK_MAX_RANK];
    if (!broadcast(n->in[0], n->in[1], &r, dims)) return broadcast_err(n, 0, 1, d);
    set_out(n, 0, out_dt, r, dims);
    return CK_OK;
}

ck_status ck_infer_binary(ck_node *n, ck_diag *d) {
    if (n->in[0]->dtype != n->in[1]->dtype) {
        char b1[300], b2[300];
        return node_err(d, n, CK_ERR_SHAPE, "%s and %s have different dtypes", in_desc(n, 0, b1, sizeof b1),
                        in_desc(n, 1, b2, sizeof b2));
    }
    return binary_shape(n, n->in[0]->dtype, d);
}

/* Mod: fmod=0 (the default) is the integer remainder with the divisor's sign, as in Python;
 * fmod=1 C's fmod (the dividend's sign), which ONNX requires for floating-point inputs. */
ck_status ck_infer_mod(ck_node *n, ck_diag *d) {
    int64_t fmod = ck_attr_int(n, "fmod", 0);
    if (fmod != 0 && fmod != 1) return node_err(d, n, CK_ERR_MODEL, "fmod=%lld must be 0 or 1", (long long)fmod);
    if (ck_dtype_is_float(n->in[0]->dtype) && fmod == 0) {
        char b[300];
        return node_err(d, n, CK_ERR_MODEL, "%s is floating-point, which needs fmod=1", in_desc(n, 0, b, sizeof b));
    }
    return ck_infer_binary(n, d);
}

ck_status ck_infer_pow(ck_node *n, ck_diag *d) { return binary_shape(n, n->in[0]->dtype, d); }

ck_status ck_infer_compare(ck_node *n, ck_diag *d) {
    if (n->in[0]->dtype != n->in[1]->dtype) {
        char b1[300], b2[300];
        return node_err(d, n, CK_ERR_SHAPE, "%s and %s have different dtypes", in_desc(n, 0, b1, sizeof b1),
                        in_desc(n, 1, b2, sizeof b2));
    }
    return binary_shape(n, CK_BOOL, d);
}

ck_status ck_infer_where(ck_node *n, ck_diag *d) {
    char b[300];
    if (n->in[0]->dtype != CK_BOOL)
        return node_err(d, n, CK_ERR_SHAPE, "condition %s must be bool", in_desc(n, 0, b, sizeof b));
    if (n->in[1]->dtype != n->in[2]->dtype) {
        char b2[300];
        return node_err(d, n, CK_ERR_SHAPE, "%s and %s have different dtypes", in_desc(n, 1, b, sizeof b),
                        in_desc(n, 2, b2, sizeof b2));
    }
    ck_value t = *n->in[1];
    int r;
    if (!broadcast(n->in[1], n->in[2], &t.rank, t.dims)) return broadcast_err(n, 1, 2, d);
    int64_t dims[CK_MAX_RANK];
    if (!broadcast(n->in[0], &t, &r, dims)) {
        char b2[300], sh[CK_SHAPE_STR_MAX];
        (void)b2;
        return node_err(d, n, CK_ERR_SHAPE, "condition %s cannot be broadcast with the values' shape %s",
                        in_desc(n, 0, b, sizeof b), ck_shape_str(&t, sh, sizeof sh));
    }
    set_out(n, 0, n->in[1]->dtype, r, dims);
    return CK_OK;
}

ck_status ck_infer_unary(ck_node *n, ck_diag *d) {
    (void)d;
    copy_out(n, 0, n->in[0]);
    return CK_OK;
}

ck_status ck_infer_identity(ck_node *n, ck_diag *d) { return ck_infer_unary(n, d); }

ck_status ck_infer_gelu(ck_node *n, ck_diag *d) {
    const char *ap = ck_attr_str(n, "approximate", "none");
    if (strcmp(ap, "none") != 0 && strcmp(ap, "tanh") != 0)
        return node_err(d, n, CK_ERR_UNSUPPORTED, "attribute approximate='%s' is not 'none' or 'tanh'", ap);
    return ck_infer_unary(n, d);
}

ck_status ck_infer_not(ck_node *n, ck_diag *d) {
    char b[300];
    if (n->in[0]->dtype != CK_BOOL) return node_err(d, n, CK_ERR_SHAPE, "%s must be bool", in_desc(n, 0, b, sizeof b));
    return ck_infer_unary(n, d);
}

ck_status ck_infer_clip(ck_node *n, ck_diag *d) {
    for (int i = 1; i < n->n_in; i++) {
        char b[300];
        if (has_in(n, i) && n->in[i]->rank != 0 && ck_value_numel(n->in[i]) != 1)
            return node_err(d, n, CK_ERR_SHAPE, "%s must be a scalar", in_desc(n, i, b, sizeof b));
    }
    return ck_infer_unary(n, d);
}

ck_status ck_infer_cast(ck_node *n, ck_diag *d) {
    const ck_attr *a = ck_attr_find(n, "to");
    if (!a || a->kind != CK_ATTR_INT) return node_err(d, n, CK_ERR_MODEL, "missing attribute 'to'");
    ck_dtype dt = ck_dtype_from_onnx((int32_t)a->i);
    if (dt == CK_UNDEF)
        return node_err(d, n, CK_ERR_UNSUPPORTED, "cast to %s is not supported", ck_onnx_dtype_name((int32_t)a->i));
    set_out(n, 0, dt, n->in[0]->rank, n->in[0]->dims);
    return CK_OK;
}

ck_status ck_infer_softmax(ck_node *n, ck_diag *d) {
    int64_t axis = ck_attr_int(n, "axis", -1);
    if (!norm_axis(&axis, n->in[0]->rank))
        return node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range for rank %d", (long long)ck_attr_int(n, "axis", -1),
                        n->in[0]->rank);
    if (!check_dtype_float(n, 0, d)) return CK_ERR_UNSUPPORTED;
    return ck_infer_unary(n, d);
}

/* ---------------------------------------------------------------- dense algebra */

ck_status ck_infer_gemm(ck_node *n, ck_diag *d) {
    const ck_value *a = n->in[0], *b = n->in[1];
    char b1[300], b2[300];
    if (a->rank != 2 || b->rank != 2)
        return node_err(d, n, CK_ERR_SHAPE, "%s and %s must both be 2-D", in_desc(n, 0, b1, sizeof b1),
                        in_desc(n, 1, b2, sizeof b2));
    int ta = ck_attr_int(n, "transA", 0) != 0, tb = ck_attr_int(n, "transB", 0) != 0;
    int64_t m = ta ? a->dims[1] : a->dims[0], ka = ta ? a->dims[0] : a->dims[1];
    int64_t kb = tb ? b->dims[1] : b->dims[0], nn = tb ? b->dims[0] : b->dims[1];
    if (ka != kb)
        return node_err(d, n, CK_ERR_SHAPE, "inner dimensions differ (%lld vs %lld; transA=%d transB=%d): %s, %s",
                        (long long)ka, (long long)kb, ta, tb, in_desc(n, 0, b1, sizeof b1), in_desc(n, 1, b2, sizeof b2));
    int64_t dims[2] = {m, nn};
    if (has_in(n, 2)) {
        ck_value y = *a;
        y.rank = 2;
        y.dims[0] = m;
        y.dims[1] = nn;
        int r;
        int64_t bd[CK_MAX_RANK];
        if (!broadcast(n->in[2], &y, &r, bd) || r != 2 || bd[0] != m || bd[1] != nn)
            return node_err(d, n, CK_ERR_SHAPE, "%s cannot be broadcast to the product's shape (%lld,%lld)",
                            in_desc(n, 2, b1, sizeof b1), (long long)m, (long long)nn);
    }
    if (!check_dtype_float(n, 0, d)) return CK_ERR_UNSUPPORTED;
    set_out(n, 0, a->dtype, 2, dims);
    return CK_OK;
}

/* The perm attribute `name` of n when it is a permutation of rank axes, else NULL. */
static const int64_t *perm_attr(const ck_node *n, const char *name, int rank) {
    const ck_attr *a = ck_attr_find(n, name);
    if (!a || a->kind != CK_ATTR_INTS || a->n != rank) return NULL;
    bool seen[CK_MAX_RANK] = {false};
    for (int k = 0; k < rank; k++) {
        if (a->ints[k] < 0 || a->ints[k] >= rank || seen[a->ints[k]]) return NULL;
        seen[a->ints[k]] = true;
    }
    return a->ints;
}

/* MatMul's operand k as the product reads it: in[k], or in[k] transposed by CK_PERM_A/B, with
 * the element strides of its axes in in[k]'s bytes (row-major). */
static void matmul_operand(const ck_node *n, int k, ck_value *v, int64_t *strides) {
    const ck_value *src = n->in[k];
    int64_t cs[CK_MAX_RANK], s = 1;
    for (int i = src->rank - 1; i >= 0; i--) cs[i] = s, s *= src->dims[i] > 1 ? src->dims[i] : 1; /* empty: as if 1 */
    const int64_t *p = src->rank >= 2 ? perm_attr(n, k ? CK_PERM_B : CK_PERM_A, src->rank) : NULL;
    *v = *src;
    for (int i = 0; i < src->rank; i++) {
        v->dims[i] = src->dims[p ? p[i] : i];
        strides[i] = cs[p ? p[i] : i];
    }
}

ck_status ck_infer_matmul(ck_node *n, ck_diag *d) {
    ck_value A, B;
    int64_t sa[CK_MAX_RANK], sb[CK_MAX_RANK];
    char b1[300], b2[300];
    if (n->in[0]->rank < 1 || n->in[1]->rank < 1)
        return node_err(d, n, CK_ERR_SHAPE, "inputs must have rank >= 1: %s, %s", in_desc(n, 0, b1, sizeof b1),
                        in_desc(n, 1, b2, sizeof b2));
    matmul_operand(n, 0, &A, sa);
    matmul_operand(n, 1, &B, sb);
    int ra = A.rank, rb = B.rank;
    /* promote 1-D operands as numpy does, then drop the added dims from the result */
    if (A.rank == 1) {
        A.rank = 2;
        A.dims[1] = A.dims[0];
        A.dims[0] = 1;
    }
    if (B.rank == 1) {
        B.rank = 2;
        B.dims[1] = 1;
    }
    if (A.dims[A.rank - 1] != B.dims[B.rank - 2])
        return node_err(d, n, CK_ERR_SHAPE, "inner dimensions differ (%lld vs %lld): %s, %s",
                        (long long)A.dims[A.rank - 1], (long long)B.dims[B.rank - 2], in_desc(n, 0, b1, sizeof b1),
                        in_desc(n, 1, b2, sizeof b2));
    ck_value ba = A, bb = B;
    ba.rank -= 2;
    bb.rank -= 2;
    int r;
    int64_t dims[CK_MAX_RANK];
    if (!broadcast(&ba, &bb, &r, dims))
        return node_err(d, n, CK_ERR_SHAPE, "batch dimensions cannot be broadcast: %s, %s", in_desc(n, 0, b1, sizeof b1),
                        in_desc(n, 1, b2, sizeof b2));
    if (ra > 1) dims[r++] = A.dims[A.rank - 2];
    if (rb > 1) dims[r++] = B.dims[B.rank - 1];
    if (r > CK_MAX_RANK) return node_err(d, n, CK_ERR_UNSUPPORTED, "result rank exceeds %d", CK_MAX_RANK);
    if (!check_dtype_float(n, 0, d)) return CK_ERR_UNSUPPORTED;
    const int64_t *py = perm_attr(n, CK_PERM_Y, r);
    if (py) {
        int64_t t[CK_MAX_RANK];
        for (int k = 0; k < r; k++) t[k] = dims[py[k]];
        memcpy(dims, t, sizeof(int64_t) * (size_t)r);
    }
    set_out(n, 0, n->in[0]->dtype, r, dims);
    return CK_OK;
}

bool ck_matmul_layout_of(const ck_node *n, ck_matmul_layout *L) {
    ck_value A, B;
    int64_t sa[CK_MAX_RANK + 1], sb[CK_MAX_RANK + 1];
    matmul_operand(n, 0, &A, sa);
    matmul_operand(n, 1, &B, sb);
    if (A.rank == 1) { /* (K) -> (1, K) */
        A.rank = 2, A.dims[1] = A.dims[0], A.dims[0] = 1;
        sa[1] = 1, sa[0] = A.dims[1] > 1 ? A.dims[1] : 1; /* empty: as if 1 */
    }
    if (B.rank == 1) { /* (K) -> (K, 1) */
        B.rank = 2, B.dims[1] = 1;
        sb[1] = 1, sb[0] = 1;
    }
    memset(L, 0, sizeof *L);
    L->M = A.dims[A.rank - 2], L->K = A.dims[A.rank - 1], L->N = B.dims[B.rank - 1];
    L->brank = (A.rank > B.rank ? A.rank : B.rank) - 2;
    /* each operand: unit stride along its columns (as stored), or along its rows (transposed) */
    const ck_value *ops[2] = {&A, &B};
    const int64_t *st[2] = {sa, sb};
    int64_t *bs[2] = {L->sa, L->sb}, *ld[2] = {&L->lda, &L->ldb}, cols[2] = {L->K, L->N}, rows[2] = {L->M, L->K};
    int *tr[2] = {&L->ta, &L->tb};
    for (int o = 0; o < 2; o++) {
        const ck_value *v = ops[o];
        int r = v->rank;
        int64_t rs = st[o][r - 2], cs = st[o][r - 1];
        if (cs == 1 && rs >= (cols[o] > 1 ? cols[o] : 1)) *tr[o] = 0, *ld[o] = rs;
        else if (rs == 1 && cs >= (rows[o] > 1 ? rows[o] : 1)) *tr[o] = 1, *ld[o] = cs;
        else return false;
        for (int k = L->brank - 1; k >= 0; k--) {
            int vk = k - (L->brank - (r - 2));
            bs[o][k] = vk < 0 || v->dims[vk] == 1 ? 0 : st[o][vk];
        }
    }
    for (int k = 0; k < L->brank; k++) { /* broadcast: a missing or size-1 axis takes the other's size */
        int ka = k - (L->brank - (A.rank - 2)), kb = k - (L->brank - (B.rank - 2));
        int64_t da = ka >= 0 ? A.dims[ka] : 1, db = kb >= 0 ? B.dims[kb] : 1;
        L->bdims[k] = da == 1 ? db : da;
    }
    /* the result (bdims..., M, N): contiguous, or out[0] = it transposed by CK_PERM_Y */
    int ry = L->brank + 2;
    int64_t ys[CK_MAX_RANK + 2], s = 1;
    const ck_value *y = n->out[0];
    const int64_t *py = y->rank == ry ? perm_attr(n, CK_PERM_Y, ry) : NULL;
    if (py) {
        for (int k = ry - 1; k >= 0; k--) ys[py[k]] = s, s *= y->dims[k] > 1 ? y->dims[k] : 1;
    } else {
        int64_t yd[CK_MAX_RANK + 2];
        memcpy(yd, L->bdims, sizeof(int64_t) * (size_t)L->brank);
        yd[ry - 2] = L->M, yd[ry - 1] = L->N;
        for (int k = ry - 1; k >= 0; k--) ys[k] = s, s *= yd[k] > 1 ? yd[k] : 1;
    }
    for (int k = 0; k < L->brank; k++) L->sy[k] = ys[k];
    if (ys[ry - 1] == 1 && ys[ry - 2] >= (L->N > 1 ? L->N : 1)) {
        L->ldc = ys[ry - 2];
        return true;
    }
    if (ys[ry - 2] != 1 || ys[ry - 1] < (L->M > 1 ? L->M : 1)) return false;
    /* y's rows contiguous: y^T (N,M) = op(b)^T op(a)^T, its rows ys[ry - 1] apart */
    int64_t t, ts[CK_MAX_RANK];
    int tt;
    t = L->M, L->M = L->N, L->N = t;
    tt = L->ta, L->ta = !L->tb, L->tb = !tt;
    t = L->lda, L->lda = L->ldb, L->ldb = t;
    memcpy(ts, L->sa, sizeof ts), memcpy(L->sa, L->sb, sizeof ts), memcpy(L->sb, ts, sizeof ts);
    L->ldc = ys[ry - 1];
    L->swap = 1;
    return true;
}

/* ---------------------------------------------------------------- normalization, dropout */

ck_status ck_infer_layer_norm(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    int64_t axis = ck_attr_int(n, "axis", -1);
    char b1[300], b2[300];
    if (!norm_axis(&axis, x->rank))
        return node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range for %s", (long long)ck_attr_int(n, "axis", -1),
                        in_desc(n, 0, b1, sizeof b1));
    if (!check_dtype_float(n, 0, d)) return CK_ERR_UNSUPPORTED;
    /* Scale and B must broadcast to the normalized shape x.dims[axis:] */
    ck_value norm = *x;
    norm.rank = x->rank - (int)axis;
    for (int i = 0; i < norm.rank; i++) norm.dims[i] = x->dims[axis + i];
    for (int i = 1; i < 3; i++) {
        if (!has_in(n, i)) continue;
        int r;
        int64_t dims[CK_MAX_RANK];
        if (!broadcast(n->in[i], &norm, &r, dims) || r != norm.rank || memcmp(dims, norm.dims, sizeof(int64_t) * (size_t)r))
            return node_err(d, n, CK_ERR_SHAPE, "%s does not match the normalized shape %s of %s",
                            in_desc(n, i, b1, sizeof b1), ck_shape_str(&norm, b2, sizeof b2), n->in[0]->name);
    }
    copy_out(n, 0, x);
    int64_t st[CK_MAX_RANK];
    for (int i = 0; i < x->rank; i++) st[i] = i < axis ? x->dims[i] : 1;
    ck_dtype sdt = ck_dtype_from_onnx((int32_t)ck_attr_int(n, "stash_type", 1));
    if (sdt == CK_UNDEF) sdt = CK_F32;
    for (int k = 1; k < n->n_out; k++) set_out(n, k, sdt, x->rank, st);
    return CK_OK;
}

/* InstanceNormalization: x (N, C, D1, ...) normalized over D1... per (n, c), then scale[c] x + B[c]
 * (passes/lower.c turns it into LayerNormalization; GroupNorm exports as one) */
ck_status ck_infer_instance_norm(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    char b1[300], b2[300];
    if (x->rank < 3) return node_err(d, n, CK_ERR_SHAPE, "%s must have rank >= 3 (N,C,D1,...)", in_desc(n, 0, b1, sizeof b1));
    for (int i = 0; i < 3; i++) /* what its lowering (LayerNormalization, Mul, Add) runs */
        if (n->in[i]->dtype != CK_F32)
            return node_err(d, n, CK_ERR_UNSUPPORTED, "%s: ckptc runs InstanceNormalization in float32", in_desc(n, i, b1, sizeof b1));
    for (int i = 1; i < 3; i++)
        if (n->in[i]->rank != 1 || n->in[i]->dims[0] != x->dims[1])
            return node_err(d, n, CK_ERR_SHAPE, "%s %s must have shape (%lld) to match the channels of %s", i == 1 ? "scale" : "B",
                            in_desc(n, i, b1, sizeof b1), (long long)x->dims[1], in_desc(n, 0, b2, sizeof b2));
    copy_out(n, 0, x);
    return CK_OK;
}

ck_status ck_infer_batch_norm(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    char b1[300], b2[300];
    if (x->rank < 2) return node_err(d, n, CK_ERR_SHAPE, "%s must have rank >= 2 (N,C,...)", in_desc(n, 0, b1, sizeof b1));
    if (!check_dtype_float(n, 0, d)) return CK_ERR_UNSUPPORTED;
    int64_t c = x->dims[1];
    static const char *what[] = {"", "scale", "bias", "input_mean", "input_var"};
    for (int i = 1; i < 5; i++)
        if (n->in[i]->rank != 1 || n->in[i]->dims[0] != c)
            return node_err(d, n, CK_ERR_SHAPE, "%s %s must have shape (%lld) to match the channels of %s", what[i],
                            in_desc(n, i, b1, sizeof b1), (long long)c, in_desc(n, 0, b2, sizeof b2));
    int training = (int)ck_attr_int(n, "training_mode", 0);
    if (!training && n->n_out > 1 && (n->out[1] || (n->n_out > 2 && n->out[2])))
        return node_err(d, n, CK_ERR_MODEL, "running_mean/running_var outputs require training_mode=1");
    copy_out(n, 0, x);
    /* outputs 1, 2: updated running mean/var (ONNX); 3, 4: the batch mean and inverse standard
     * deviation, internal outputs the gradient rule adds for the backward */
    for (int k = 1; k < n->n_out && k < 3; k++) copy_out(n, k, n->in[k + 2]);
    for (int k = 3; k < n->n_out; k++) copy_out(n, k, n->in[1]);
    if (n->n_out > 3 && !training) return node_err(d, n, CK_ERR_MODEL, "saved statistics require training_mode=1");
    return CK_OK;
}

ck_status ck_infer_dropout(ck_node *n, ck_diag *d) {
    char b[300];
    if (has_in(n, 1) && ck_value_numel(n->in[1]) != 1)
        return node_err(d, n, CK_ERR_SHAPE, "ratio %s must be a scalar", in_desc(n, 1, b, sizeof b));
    if (has_in(n, 2) && (ck_value_numel(n->in[2]) != 1 || n->in[2]->dtype != CK_BOOL))
        return node_err(d, n, CK_ERR_SHAPE, "training_mode %s must be a bool scalar", in_desc(n, 2, b, sizeof b));
    if (has_in(n, 1) && n->in[1]->data) {
        double r = ck_value_get_f(n->in[1], 0);
        if (!(r >= 0 && r < 1)) return node_err(d, n, CK_ERR_MODEL, "ratio %g is not in [0, 1)", r);
    }
    copy_out(n, 0, n->in[0]);
    if (n->n_out > 1) set_out(n, 1, CK_BOOL, n->in[0]->rank, n->in[0]->dims);
    return CK_OK;
}

/* ---------------------------------------------------------------- convolution and pooling */

/* Spatial output sizes shared by Conv and the pools. k: kernel, s: strides, dl: dilations, pads:
 * begins then ends (written back when auto_pad computes them). */
static ck_status window_out(ck_node *n, const ck_value *x, int ns, const int64_t *k, int64_t *out, ck_diag *d) {
    int64_t s[CK_MAX_RANK], dl[CK_MAX_RANK], p[2 * CK_MAX_RANK];
    for (int i = 0; i < ns; i++) s[i] = dl[i] = 1, p[i] = p[ns + i] = 0;
    int cnt;
    if ((cnt = attr_ints(n, "strides", s, ns)) >= 0 && cnt != ns)
        return node_err(d, n, CK_ERR_MODEL, "strides has %d values, expected %d", cnt, ns);
    if ((cnt = attr_ints(n, "dilations", dl, ns)) >= 0 && cnt != ns)
        return node_err(d, n, CK_ERR_MODEL, "dilations has %d values, expected %d", cnt, ns);
    if ((cnt = attr_ints(n, "pads", p, 2 * ns)) >= 0 && cnt != 2 * ns)
        return node_err(d, n, CK_ERR_MODEL, "pads has %d values, expected %d", cnt, 2 * ns);
    const char *ap = ck_attr_str(n, "auto_pad", "NOTSET");
    int ceil_mode = (int)ck_attr_int(n, "ceil_mode", 0);
    for (int i = 0; i < ns; i++) {
        /* bounded so that no sum or product below overflows (dims are at most CK_MAX_NUMEL) */
        if (s[i] < 1 || dl[i] < 1 || k[i] < 1 || p[i] < 0 || p[ns + i] < 0 || s[i] > CK_MAX_NUMEL ||
            p[i] > CK_MAX_NUMEL || p[ns + i] > CK_MAX_NUMEL || k[i] - 1 > (CK_MAX_NUMEL - 1) / dl[i])
            return node_err(d, n, CK_ERR_MODEL,
                            "kernel, strides and dilations must be >= 1 and pads >= 0, the dilated kernel, strides and "
                            "pads at most %lld (axis %d)", (long long)CK_MAX_NUMEL, i);
        int64_t in = x->dims[2 + i], ek = (k[i] - 1) * dl[i] + 1;
        if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
            out[i] = (in + s[i] - 1) / s[i];
        } else if (strcmp(ap, "VALID") == 0) {
            out[i] = in >= ek ? (in - ek) / s[i] + 1 : 0;
        } else if (strcmp(ap, "NOTSET") == 0) {
            int64_t span = in + p[i] + p[ns + i] - ek;
            if (span < 0) out[i] = 0;
            else if (ceil_mode) {
                out[i] = (span + s[i] - 1) / s[i] + 1;
                if ((out[i] - 1) * s[i] >= in + p[i]) out[i]--; /* last window must start inside */
            } else {
                out[i] = span / s[i] + 1;
            }
        } else {
            return node_err(d, n, CK_ERR_MODEL, "unknown auto_pad '%s'", ap);
        }
        if (out[i] < 1) {
            char b[300];
            return node_err(d, n, CK_ERR_SHAPE, "window of %lld (dilated) does not fit spatial axis %d of %s",
                            (long long)ek, i, in_desc(n, 0, b, sizeof b));
        }
    }
    return CK_OK;
}

ck_status ck_infer_conv(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0], *w = n->in[1];
    char b1[300], b2[300];
    if (x->rank < 3 || w->rank != x->rank)
        return node_err(d, n, CK_ERR_SHAPE, "%s and weight %s must have the same rank >= 3", in_desc(n, 0, b1, sizeof b1),
                        in_desc(n, 1, b2, sizeof b2));
    if (!check_dtype_float(n, 0, d)) return CK_ERR_UNSUPPORTED;
    int ns = x->rank - 2;
    int64_t group = ck_attr_int(n, "group", 1);
    if (group < 1 || x->dims[1] % group || w->dims[0] % group || w->dims[1] != x->dims[1] / group)
        return node_err(d, n, CK_ERR_SHAPE, "channels do not match with group=%lld: %s, weight %s", (long long)group,
                        in_desc(n, 0, b1, sizeof b1), in_desc(n, 1, b2, sizeof b2));
    int64_t k[CK_MAX_RANK];
    int cnt = attr_ints(n, "kernel_shape", k, ns);
    if (cnt >= 0 && cnt != ns) return node_err(d, n, CK_ERR_MODEL, "kernel_shape has %d values, expected %d", cnt, ns);
    for (int i = 0; i < ns; i++) {
        if (cnt >= 0 && k[i] != w->dims[2 + i])
            return node_err(d, n, CK_ERR_SHAPE, "kernel_shape disagrees with weight %s", in_desc(n, 1, b1, sizeof b1));
        k[i] = w->dims[2 + i];
    }
    if (has_in(n, 2) && (n->in[2]->rank != 1 || n->in[2]->dims[0] != w->dims[0]))
        return node_err(d, n, CK_ERR_SHAPE, "bias %s must have shape (%lld)", in_desc(n, 2, b1, sizeof b1),
                        (long long)w->dims[0]);
    int64_t dims[CK_MAX_RANK] = {x->dims[0], w->dims[0]};
    ck_status st = window_out(n, x, ns, k, dims + 2, d);
    if (st) return st;
    set_out(n, 0, x->dtype, x->rank, dims);
    return CK_OK;
}

/* The kernels lower one image (one group) at a time to a column matrix for GEMM:
 * (C/group * prod(kernel)) x prod(out spatial) floats, or B images side by side plus a staging
 * matrix where the images have few output positions (ckrt_conv_batch.h); times its lanes
 * (CK_LANES_ATTR). 1x1 stride-1 unpadded convs need none. */
int64_t ck_ws_conv(const ck_node *n) {
    const ck_value *x = n->in[0], *w = n->in[1], *y = n->out[0];
    int64_t k = w->dims[1], sp = 1;
    bool trivial = true;
    for (int i = 2; i < w->rank; i++) {
        k *= w->dims[i];
        sp *= y->dims[i];
        trivial = trivial && w->dims[i] == 1 && x->dims[i] == y->dims[i];
    }
    const ck_attr *pads = ck_attr_find(n, "pads");
    for (int i = 0; pads && i < pads->n; i++) trivial = trivial && pads->ints[i] == 0;
    if (trivial && strcmp(ck_attr_str(n, "auto_pad", "NOTSET"), "NOTSET") == 0) return 0;
    int64_t group = ck_attr_int(n, "group", 1), mg = w->dims[0] / (group > 0 ? group : 1);
    return ck_conv_ws_floats(ck_attr_int(n, CK_LANES_ATTR, 1), ck_conv_batch(CK_CONV_FWD, x->dims[0], group, mg, k, sp), mg, k, sp) *
           (int64_t)ck_dtype_size(x->dtype);
}

ck_status ck_infer_pool(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    char b1[300];
    if (x->rank < 3) return node_err(d, n, CK_ERR_SHAPE, "%s must have rank >= 3 (N,C,spatial...)", in_desc(n, 0, b1, sizeof b1));
    int ns = x->rank - 2;
    int64_t k[CK_MAX_RANK];
    int cnt = attr_ints(n, "kernel_shape", k, ns);
    if (cnt != ns) return node_err(d, n, CK_ERR_MODEL, "kernel_shape must have %d values", ns);
    if (ck_attr_int(n, "storage_order", 0) != 0)
        return node_err(d, n, CK_ERR_UNSUPPORTED, "storage_order=1 (column-major indices) is not supported");
    int64_t dims[CK_MAX_RANK] = {x->dims[0], x->dims[1]};
    ck_status st = window_out(n, x, ns, k, dims + 2, d);
    if (st) return st;
    set_out(n, 0, x->dtype, x->rank, dims);
    if (n->n_out > 1) set_out(n, 1, CK_I64, x->rank, dims);
    return CK_OK;
}

ck_status ck_infer_global_pool(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    char b1[300];
    if (x->rank < 3) return node_err(d, n, CK_ERR_SHAPE, "%s must have rank >= 3 (N,C,spatial...)", in_desc(n, 0, b1, sizeof b1));
    int64_t dims[CK_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = i < 2 ? x->dims[i] : 1;
    set_out(n, 0, x->dtype, x->rank, dims);
    return CK_OK;
}

/* ---------------------------------------------------------------- reductions */

ck_status ck_infer_reduce(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    int64_t axes[CK_MAX_RANK];
    int na = -1;
    if (has_in(n, 1)) {
        ck_status st = const_ints(n, 1, axes, CK_MAX_RANK, &na, d);
        if (st) return st;
    } else {
        na = attr_ints(n, "axes", axes, CK_MAX_RANK);
        if (na > CK_MAX_RANK) return node_err(d, n, CK_ERR_SHAPE, "too many axes");
    }
    int keep = ck_attr_int(n, "keepdims", 1) != 0;
    bool red[CK_MAX_RANK] = {0};
    if (na <= 0) {
        if (ck_attr_int(n, "noop_with_empty_axes", 0)) {
            copy_out(n, 0, x);
            return CK_OK;
        }
        for (int i = 0; i < x->rank; i++) red[i] = true;
    }
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i];
        if (!norm_axis(&a, x->rank)) {
            char b[300];
            return node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range for %s", (long long)axes[i], in_desc(n, 0, b, sizeof b));
        }
        if (red[a]) return node_err(d, n, CK_ERR_SHAPE, "axis %lld is repeated", (long long)axes[i]);
        red[a] = true;
    }
    int64_t dims[CK_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!red[i]) dims[r++] = x->dims[i];
        else if (keep) dims[r++] = 1;
    }
    set_out(n, 0, x->dtype, r, dims);
    return CK_OK;
}

/* ---------------------------------------------------------------- layout */

ck_status ck_infer_flatten(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    int64_t axis = ck_attr_int(n, "axis", 1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis > x->rank) {
        char b[300];
        return node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range for %s", (long long)ck_attr_int(n, "axis", 1),
                        in_desc(n, 0, b, sizeof b));
    }
    int64_t dims[2] = {1, 1};
    for (int i = 0; i < x->rank; i++) dims[i >= axis] *= x->dims[i];
    set_out(n, 0, x->dtype, 2, dims);
    return CK_OK;
}

ck_status ck_infer_reshape(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    int64_t sh[CK_MAX_RANK];
    int r;
    ck_status st = const_ints(n, 1, sh, CK_MAX_RANK, &r, d);
    if (st) return st;
    int allowzero = (int)ck_attr_int(n, "allowzero", 0);
    int infer_at = -1;
    int64_t known = 1;
    char b1[300], b2[300];
    for (int i = 0; i < r; i++) {
        if (sh[i] == 0 && !allowzero) {
            if (i >= x->rank)
                return node_err(d, n, CK_ERR_SHAPE, "shape %s copies dim %d (0) but %s has rank %d",
                                in_desc(n, 1, b1, sizeof b1), i, x->name, x->rank);
            sh[i] = x->dims[i];
        }
        if (sh[i] == -1) {
            if (infer_at >= 0) return node_err(d, n, CK_ERR_SHAPE, "shape %s has more than one -1", in_desc(n, 1, b1, sizeof b1));
            infer_at = i;
        } else if (sh[i] < 0) {
            return node_err(d, n, CK_ERR_SHAPE, "shape %s has a negative dimension", in_desc(n, 1, b1, sizeof b1));
        } else if (sh[i] > 1 && known > CK_MAX_NUMEL / sh[i]) {
            return node_err(d, n, CK_ERR_SHAPE, "shape %s has more than %lld elements", in_desc(n, 1, b1, sizeof b1),
                            (long long)CK_MAX_NUMEL);
        } else {
            known *= sh[i];
        }
    }
    int64_t total = ck_value_numel(x);
    if (infer_at >= 0) {
        if (known == 0 || total % known)
            return node_err(d, n, CK_ERR_SHAPE, "cannot reshape %s to %s (the -1 dimension is not a whole number)",
                            in_desc(n, 0, b1, sizeof b1), in_desc(n, 1, b2, sizeof b2));
        sh[infer_at] = total / known;
        known *= sh[infer_at];
    }
    if (known != total) {
        char s3[CK_SHAPE_STR_MAX];
        ck_value t = {.rank = r};
        memcpy(t.dims, sh, sizeof(int64_t) * (size_t)r);
        return node_err(d, n, CK_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s (%lld elements)",
                        in_desc(n, 0, b1, sizeof b1), (long long)total, ck_shape_str(&t, s3, sizeof s3), (long long)known);
    }
    set_out(n, 0, x->dtype, r, sh);
    return CK_OK;
}

void ck_transpose_perm(const ck_node *n, int64_t *perm) {
    const ck_attr *a = ck_attr_find(n, "perm");
    int r = n->in[0]->rank;
    for (int i = 0; i < r; i++) perm[i] = a && a->n == r ? a->ints[i] : r - 1 - i;
}

ck_status ck_infer_transpose(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    int64_t perm[CK_MAX_RANK];
    int r = attr_ints(n, "perm", perm, CK_MAX_RANK);
    if (r < 0) {
        r = x->rank;
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    }
    bool seen[CK_MAX_RANK] = {0};
    char b[300];
    if (r != x->rank) return node_err(d, n, CK_ERR_SHAPE, "perm has %d entries but %s has rank %d", r, x->name, x->rank);
    int64_t dims[CK_MAX_RANK];
    for (int i = 0; i < r; i++) {
        if (perm[i] < 0 || perm[i] >= r || seen[perm[i]])
            return node_err(d, n, CK_ERR_SHAPE, "perm is not a permutation of 0..%d for %s", r - 1, in_desc(n, 0, b, sizeof b));
        seen[perm[i]] = true;
        dims[i] = x->dims[perm[i]];
    }
    set_out(n, 0, x->dtype, r, dims);
    return CK_OK;
}

ck_status ck_infer_concat(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    const ck_attr *aa = ck_attr_find(n, "axis");
    if (!aa) return node_err(d, n, CK_ERR_MODEL, "missing attribute 'axis'");
    int64_t axis = aa->i;
    char b1[300], b2[300];
    if (!norm_axis(&axis, x->rank))
        return node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range for %s", (long long)aa->i, in_desc(n, 0, b1, sizeof b1));
    int64_t dims[CK_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = 0;
    for (int i = 0; i < n->n_in; i++) {
        const ck_value *v = n->in[i];
        if (!v) return node_err(d, n, CK_ERR_MODEL, "input %d is empty", i);
        bool ok = v->rank == x->rank && v->dtype == x->dtype;
        for (int k = 0; ok && k < x->rank; k++) ok = k == axis || v->dims[k] == x->dims[k];
        if (!ok)
            return node_err(d, n, CK_ERR_SHAPE, "%s does not match %s outside axis %lld", in_desc(n, i, b1, sizeof b1),
                            in_desc(n, 0, b2, sizeof b2), (long long)axis);
        dims[axis] += v->dims[axis];
    }
    set_out(n, 0, x->dtype, x->rank, dims);
    return CK_OK;
}

ck_status ck_infer_split(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    int64_t axis = ck_attr_int(n, "axis", 0);
    char b[300];
    if (!norm_axis(&axis, x->rank))
        return node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range for %s", (long long)ck_attr_int(n, "axis", 0),
                        in_desc(n, 0, b, sizeof b));
    int64_t sizes[64];
    int ns = -1;
    if (has_in(n, 1)) {
        ck_status st = const_ints(n, 1, sizes, 64, &ns, d);
        if (st) return st;
    } else {
        ns = attr_ints(n, "split", sizes, 64);
    }
    int64_t len = x->dims[axis];
    if (ns < 0) {
        /* equal parts; opset 18's num_outputs lets the last part be smaller */
        int64_t k = n->n_out, chunk = (len + k - 1) / k;
        if (!ck_attr_find(n, "num_outputs") && len % k)
            return node_err(d, n, CK_ERR_SHAPE, "axis %lld of %s (%lld) does not split into %lld equal parts", (long long)axis,
                            in_desc(n, 0, b, sizeof b), (long long)len, (long long)k);
        if (ck_attr_find(n, "num_outputs") && ck_attr_int(n, "num_outputs", 0) != k)
            return node_err(d, n, CK_ERR_MODEL, "num_outputs=%lld but the node has %d outputs",
                            (long long)ck_attr_int(n, "num_outputs", 0), n->n_out);
        ns = (int)k;
        for (int i = 0; i < ns; i++) sizes[i] = len - chunk * i < chunk ? len - chunk * i : chunk;
    }
    if (ns != n->n_out) return node_err(d, n, CK_ERR_SHAPE, "split has %d sizes but the node has %d outputs", ns, n->n_out);
    int64_t sum = 0;
    for (int i = 0; i < ns; i++) {
        if (sizes[i] < 0 || sizes[i] > len) /* bounded: the sum cannot overflow */
            return node_err(d, n, CK_ERR_SHAPE, "split size %d (%lld) is negative or larger than axis %lld of %s (%lld)", i,
                            (long long)sizes[i], (long long)axis, in_desc(n, 0, b, sizeof b), (long long)len);
        sum += sizes[i];
    }
    if (sum != len)
        return node_err(d, n, CK_ERR_SHAPE, "split sizes add up to %lld but axis %lld of %s is %lld", (long long)sum,
                        (long long)axis, in_desc(n, 0, b, sizeof b), (long long)len);
    for (int i = 0; i < ns; i++) {
        int64_t dims[CK_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = sizes[i];
        set_out(n, i, x->dtype, x->rank, dims);
    }
    return CK_OK;
}

/* Resolves Slice's starts/ends/steps for one axis into a clamped start and a count; shared with
 * the constant folder through ck_slice_params. */
ck_status ck_slice_params(const ck_node *n, int64_t *start, int64_t *step, int64_t *count, ck_diag *d) {
    const ck_value *x = n->in[0];
    int64_t st[CK_MAX_RANK], en[CK_MAX_RANK], ax[CK_MAX_RANK], sp[CK_MAX_RANK];
    int nst, nen, nax, nsp;
    ck_node *m = (ck_node *)n;
    if (const_ints(m, 1, st, CK_MAX_RANK, &nst, d) || const_ints(m, 2, en, CK_MAX_RANK, &nen, d)) return CK_ERR_UNSUPPORTED;
    if (nst != nen) return node_err(d, n, CK_ERR_SHAPE, "starts has %d values but ends has %d", nst, nen);
    if (has_in(n, 3)) {
        if (const_ints(m, 3, ax, CK_MAX_RANK, &nax, d)) return CK_ERR_UNSUPPORTED;
        if (nax != nst) return node_err(d, n, CK_ERR_SHAPE, "axes has %d values but starts has %d", nax, nst);
    } else {
        for (int i = 0; i < nst; i++) ax[i] = i;
    }
    if (has_in(n, 4)) {
        if (const_ints(m, 4, sp, CK_MAX_RANK, &nsp, d)) return CK_ERR_UNSUPPORTED;
        if (nsp != nst) return node_err(d, n, CK_ERR_SHAPE, "steps has %d values but starts has %d", nsp, nst);
    } else {
        for (int i = 0; i < nst; i++) sp[i] = 1;
    }
    for (int i = 0; i < x->rank; i++) start[i] = 0, step[i] = 1, count[i] = x->dims[i];
    bool seen[CK_MAX_RANK] = {0};
    for (int i = 0; i < nst; i++) {
        int64_t a = ax[i];
        char b[300];
        if (!norm_axis(&a, x->rank) || seen[a])
            return node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range or repeated for %s", (long long)ax[i],
                            in_desc(n, 0, b, sizeof b));
        seen[a] = true;
        if (sp[i] == 0) return node_err(d, n, CK_ERR_SHAPE, "step for axis %lld is 0", (long long)ax[i]);
        int64_t dim = x->dims[a], s = st[i], e = en[i];
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        if (sp[i] > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            count[a] = e > s ? (e - s - 1) / sp[i] + 1 : 0; /* ceil((e - s) / step), no overflow for a huge step */
        } else {
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            count[a] = s > e ? (s - e - 1) / (sp[i] == INT64_MIN ? INT64_MAX : -sp[i]) + 1 : 0;
        }
        start[a] = s;
        step[a] = sp[i];
    }
    return CK_OK;
}

ck_status ck_infer_slice(ck_node *n, ck_diag *d) {
    int64_t start[CK_MAX_RANK], step[CK_MAX_RANK], count[CK_MAX_RANK];
    ck_status st = ck_slice_params(n, start, step, count, d);
    if (st) return st;
    set_out(n, 0, n->in[0]->dtype, n->in[0]->rank, count);
    return CK_OK;
}

/* Resolves Pad's pads (input 1, or the attribute before opset 11) over the axes (input 3, opset
 * 18; default all) into per-axis begin and end counts for every axis of the input, and its mode;
 * shared with the constant folder, autodiff and codegen through ck_pad_params. */
ck_status ck_pad_params(const ck_node *n, int64_t *begin, int64_t *end, int *mode, ck_diag *d) {
    const ck_value *x = n->in[0];
    int64_t pads[2 * CK_MAX_RANK], ax[CK_MAX_RANK];
    int np, nax = x->rank;
    ck_node *m = (ck_node *)n;
    char b[300];
    const char *ms = ck_attr_str(n, "mode", "constant");
    if (strcmp(ms, "constant") == 0) *mode = CK_PAD_CONSTANT;
    else if (strcmp(ms, "reflect") == 0) *mode = CK_PAD_REFLECT;
    else if (strcmp(ms, "edge") == 0) *mode = CK_PAD_EDGE;
    else return node_err(d, n, CK_ERR_UNSUPPORTED, "mode '%s' is not supported (constant, reflect and edge are; wrap is Pad-19)", ms);
    if (has_in(n, 1)) {
        if (!n->in[1]->data && ck_value_numel(n->in[1]) > 0) /* Swin's F.pad: computable once the shapes are static */
            return node_err(d, n, CK_ERR_UNSUPPORTED, "pads, %s must be a constant known at compile time, but it is computed at run time",
                            in_desc(n, 1, b, sizeof b));
        if (const_ints(m, 1, pads, 2 * CK_MAX_RANK, &np, d)) return CK_ERR_UNSUPPORTED;
    } else {
        np = attr_ints(n, "pads", pads, 2 * CK_MAX_RANK);
        if (np < 0) return node_err(d, n, CK_ERR_MODEL, "has neither a pads input nor a pads attribute");
    }
    if (has_in(n, 3)) {
        if (const_ints(m, 3, ax, CK_MAX_RANK, &nax, d)) return CK_ERR_UNSUPPORTED;
    } else {
        for (int i = 0; i < x->rank; i++) ax[i] = i;
    }
    if (np != 2 * nax)
        return node_err(d, n, CK_ERR_SHAPE, "pads has %d values but %s needs 2 x %d", np, in_desc(n, 0, b, sizeof b), nax);
    for (int i = 0; i < x->rank; i++) begin[i] = end[i] = 0;
    bool seen[CK_MAX_RANK] = {0};
    for (int i = 0; i < nax; i++) {
        int64_t a = ax[i];
        if (!norm_axis(&a, x->rank) || seen[a])
            return node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range or repeated for %s", (long long)ax[i],
                            in_desc(n, 0, b, sizeof b));
        seen[a] = true;
        int64_t pb = pads[i], pe = pads[i + nax], len = x->dims[a];
        if (pb < -len || pe < -len || pb > CK_MAX_NUMEL || pe > CK_MAX_NUMEL || len + pb + pe < 0)
            return node_err(d, n, CK_ERR_SHAPE, "pads %lld and %lld on axis %lld of %s leave a negative size", (long long)pb,
                            (long long)pe, (long long)a, in_desc(n, 0, b, sizeof b));
        if (*mode != CK_PAD_CONSTANT && len == 0 && len + pb + pe > 0)
            return node_err(d, n, CK_ERR_SHAPE, "%s mode cannot pad axis %lld of %s: it is empty", ms, (long long)a,
                            in_desc(n, 0, b, sizeof b));
        begin[a] = pb;
        end[a] = pe;
    }
    return CK_OK;
}

ck_status ck_infer_pad(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    int64_t begin[CK_MAX_RANK], end[CK_MAX_RANK], dims[CK_MAX_RANK];
    int mode;
    char b[300];
    ck_status st = ck_pad_params(n, begin, end, &mode, d);
    if (st) return st;
    if (has_in(n, 2)) {
        const ck_value *v = n->in[2];
        if (v->dtype != x->dtype || ck_value_numel(v) != 1 || v->rank > 1)
            return node_err(d, n, CK_ERR_SHAPE, "%s must be one element of the data's dtype %s", in_desc(n, 2, b, sizeof b),
                            ck_dtype_name(x->dtype));
        if (!v->data)
            return node_err(d, n, CK_ERR_UNSUPPORTED, "%s must be a constant known at compile time, but it is computed at run time",
                            in_desc(n, 2, b, sizeof b));
    }
    for (int i = 0; i < x->rank; i++) dims[i] = x->dims[i] + begin[i] + end[i];
    set_out(n, 0, x->dtype, x->rank, dims);
    return CK_OK;
}

ck_status ck_infer_gather(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0], *idx = n->in[1];
    int64_t axis = ck_attr_int(n, "axis", 0);
    char b[300];
    if (!norm_axis(&axis, x->rank))
        return node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range for %s", (long long)ck_attr_int(n, "axis", 0),
                        in_desc(n, 0, b, sizeof b));
    if (idx->dtype != CK_I64 && idx->dtype != CK_I32)
        return node_err(d, n, CK_ERR_SHAPE, "indices %s must be int32 or int64", in_desc(n, 1, b, sizeof b));
    if (x->rank - 1 + idx->rank > CK_MAX_RANK) return node_err(d, n, CK_ERR_UNSUPPORTED, "result rank exceeds %d", CK_MAX_RANK);
    /* constant indices are range-checked here when there are few of them (shape subgraphs): one
     * large index tensor feeding thousands of Gathers must not make inference quadratic. Larger
     * ones are checked when folded (fold.c) and by the kernel at run time. */
    if (idx->data && ck_value_numel(idx) <= 256) {
        for (int64_t i = 0, k = ck_value_numel(idx); i < k; i++) {
            int64_t v = ck_value_get_i(idx, i);
            if (v < -x->dims[axis] || v >= x->dims[axis])
                return node_err(d, n, CK_ERR_SHAPE, "index %lld is out of range for axis %lld of %s", (long long)v,
                                (long long)axis, in_desc(n, 0, b, sizeof b));
        }
    }
    int64_t dims[CK_MAX_RANK];
    int r = 0;
    for (int i = 0; i < axis; i++) dims[r++] = x->dims[i];
    for (int i = 0; i < idx->rank; i++) dims[r++] = idx->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) dims[r++] = x->dims[i];
    set_out(n, 0, x->dtype, r, dims);
    return CK_OK;
}

/* ScatterND and GatherND address data: (d_0 .. d_{r-1}) with int64 indices: (i_0 .. i_{q-2}, k),
 * each index tuple naming a slice data[t_0, .., t_{k-1}] of the trailing dims. Returns k after
 * checking the indices (constant ones when few, as for Gather) and writes the shape
 * (i_0 .. i_{q-2}, d_k .. d_{r-1}) of the updates (ScatterND) or output (GatherND) into dims. */
static ck_status nd_shape(ck_node *n, int *k, int *rank, int64_t *dims, ck_diag *d) {
    const ck_value *x = n->in[0], *idx = n->in[1];
    char b[300], b2[300];
    if (idx->dtype != CK_I64 || idx->rank < 1)
        return node_err(d, n, CK_ERR_SHAPE, "indices %s must be int64 with at least one dimension", in_desc(n, 1, b, sizeof b));
    int64_t kk = idx->dims[idx->rank - 1];
    if (kk > x->rank)
        return node_err(d, n, CK_ERR_SHAPE, "indices %s address %lld dims of %s", in_desc(n, 1, b, sizeof b), (long long)kk,
                        in_desc(n, 0, b2, sizeof b2));
    if (idx->rank - 1 + x->rank - kk > CK_MAX_RANK) return node_err(d, n, CK_ERR_UNSUPPORTED, "result rank exceeds %d", CK_MAX_RANK);
    if (idx->data && ck_value_numel(idx) <= 256)
        for (int64_t i = 0, c = ck_value_numel(idx); i < c; i++) {
            int64_t v = ck_value_get_i(idx, i), dim = x->dims[i % kk];
            if (v < -dim || v >= dim)
                return node_err(d, n, CK_ERR_SHAPE, "index %lld is out of range for axis %lld of %s", (long long)v,
                                (long long)(i % kk), in_desc(n, 0, b, sizeof b));
        }
    int r = 0;
    for (int i = 0; i < idx->rank - 1; i++) dims[r++] = idx->dims[i];
    for (int i = (int)kk; i < x->rank; i++) dims[r++] = x->dims[i];
    *k = (int)kk;
    *rank = r;
    return CK_OK;
}

ck_status ck_infer_scatter_nd(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0], *u = n->in[2];
    int64_t dims[CK_MAX_RANK];
    int k, r;
    char b[300], b2[300];
    const char *red = ck_attr_str(n, "reduction", "none");
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul"))
        return node_err(d, n, CK_ERR_UNSUPPORTED, "reduction '%s' is not supported (none, add and mul are)", red);
    ck_status st = nd_shape(n, &k, &r, dims, d);
    if (st) return st;
    bool same = u->rank == r && u->dtype == x->dtype;
    for (int i = 0; same && i < r; i++) same = u->dims[i] == dims[i];
    if (!same)
        return node_err(d, n, CK_ERR_SHAPE, "updates %s do not fit data %s and its indices", in_desc(n, 2, b, sizeof b),
                        in_desc(n, 0, b2, sizeof b2));
    copy_out(n, 0, x);
    return CK_OK;
}

ck_status ck_infer_gather_nd(ck_node *n, ck_diag *d) {
    int64_t dims[CK_MAX_RANK];
    int k, r;
    if (ck_attr_int(n, "batch_dims", 0) != 0)
        return node_err(d, n, CK_ERR_UNSUPPORTED, "batch_dims=%lld is not supported (0 is)", (long long)ck_attr_int(n, "batch_dims", 0));
    ck_status st = nd_shape(n, &k, &r, dims, d);
    if (st) return st;
    set_out(n, 0, n->in[0]->dtype, r, dims);
    return CK_OK;
}

static ck_status axes_arg(ck_node *n, int64_t *axes, int *na, ck_diag *d) {
    if (has_in(n, 1)) return const_ints(n, 1, axes, CK_MAX_RANK, na, d);
    *na = attr_ints(n, "axes", axes, CK_MAX_RANK);
    if (*na > CK_MAX_RANK) return node_err(d, n, CK_ERR_SHAPE, "too many axes");
    return CK_OK;
}

ck_status ck_infer_unsqueeze(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    int64_t axes[CK_MAX_RANK];
    int na;
    ck_status st = axes_arg(n, axes, &na, d);
    if (st) return st;
    if (na < 1) return node_err(d, n, CK_ERR_MODEL, "axes are missing");
    int r = x->rank + na;
    if (r > CK_MAX_RANK) return node_err(d, n, CK_ERR_UNSUPPORTED, "result rank exceeds %d", CK_MAX_RANK);
    bool ins[CK_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i];
        if (!norm_axis(&a, r) || ins[a])
            return node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range or repeated for output rank %d", (long long)axes[i], r);
        ins[a] = true;
    }
    int64_t dims[CK_MAX_RANK];
    for (int i = 0, k = 0; i < r; i++) dims[i] = ins[i] ? 1 : x->dims[k++];
    set_out(n, 0, x->dtype, r, dims);
    return CK_OK;
}

ck_status ck_infer_squeeze(ck_node *n, ck_diag *d) {
    const ck_value *x = n->in[0];
    int64_t axes[CK_MAX_RANK];
    int na;
    ck_status st = axes_arg(n, axes, &na, d);
    if (st) return st;
    bool rm[CK_MAX_RANK] = {0};
    char b[300];
    if (na < 0) {
        for (int i = 0; i < x->rank; i++) rm[i] = x->dims[i] == 1;
    }
    for (int i = 0; i < na; i++) {
        int64_t a = axes[i];
        if (!norm_axis(&a, x->rank))
            return node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range for %s", (long long)axes[i], in_desc(n, 0, b, sizeof b));
        if (x->dims[a] != 1)
            return node_err(d, n, CK_ERR_SHAPE, "cannot squeeze axis %lld of %s: its size is not 1", (long long)axes[i],
                            in_desc(n, 0, b, sizeof b));
        rm[a] = true;
    }
    int64_t dims[CK_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (!rm[i]) dims[r++] = x->dims[i];
    set_out(n, 0, x->dtype, r, dims);
    return CK_OK;
}

ck_status ck_infer_expand(ck_node *n, ck_diag *d) {
    int64_t sh[CK_MAX_RANK];
    int r;
    ck_status st = const_ints(n, 1, sh, CK_MAX_RANK, &r, d);
    if (st) return st;
    ck_value t = {.rank = r};
    for (int i = 0; i < r; i++) t.dims[i] = sh[i];
    int rr;
    int64_t dims[CK_MAX_RANK];
    if (!broadcast(n->in[0], &t, &rr, dims)) {
        char b1[300], b2[300];
        return node_err(d, n, CK_ERR_SHAPE, "%s cannot be expanded to %s", in_desc(n, 0, b1, sizeof b1), in_desc(n, 1, b2, sizeof b2));
    }
    set_out(n, 0, n->in[0]->dtype, rr, dims);
    return CK_OK;
}

ck_status ck_infer_trilu(ck_node *n, ck_diag *d) {
    char b[300];
    if (n->in[0]->rank < 2) return node_err(d, n, CK_ERR_SHAPE, "%s must have rank >= 2", in_desc(n, 0, b, sizeof b));
    if (has_in(n, 1) && ck_value_numel(n->in[1]) != 1)
        return node_err(d, n, CK_ERR_SHAPE, "k %s must be a scalar", in_desc(n, 1, b, sizeof b));
    if (has_in(n, 1) && !n->in[1]->data)
        return node_err(d, n, CK_ERR_UNSUPPORTED, "k %s must be a constant known at compile time", in_desc(n, 1, b, sizeof b));
    copy_out(n, 0, n->in[0]);
    return CK_OK;
}

/* ---------------------------------------------------------------- shape producers */

/* Shape's optional start/end (opset 15) clamp into [0, rank]. */
void ck_shape_range(const ck_node *n, int64_t *lo, int64_t *hi) {
    int64_t r = n->in[0]->rank, s = ck_attr_int(n, "start", 0), e = ck_attr_int(n, "end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    *lo = s < 0 ? 0 : s > r ? r : s;
    *hi = e < 0 ? 0 : e > r ? r : e;
    if (*hi < *lo) *hi = *lo;
}

ck_status ck_infer_shape(ck_node *n, ck_diag *d) {
    (void)d;
    int64_t lo, hi;
    ck_shape_range(n, &lo, &hi);
    int64_t dims[1] = {hi - lo};
    set_out(n, 0, CK_I64, 1, dims);
    return CK_OK;
}

ck_status ck_infer_constant_of_shape(ck_node *n, ck_diag *d) {
    int64_t sh[CK_MAX_RANK];
    int r;
    ck_status st = const_ints(n, 0, sh, CK_MAX_RANK, &r, d);
    if (st) return st;
    for (int i = 0; i < r; i++)
        if (sh[i] < 0) return node_err(d, n, CK_ERR_SHAPE, "shape has a negative dimension %lld", (long long)sh[i]);
    ck_dtype dt = CK_F32;
    const ck_attr *a = ck_attr_find(n, "value");
    if (a) {
        if (a->kind != CK_ATTR_TENSOR || ck_value_numel(a->t) != 1)
            return node_err(d, n, CK_ERR_MODEL, "attribute 'value' must be a one-element tensor");
        dt = a->t->dtype;
    }
    set_out(n, 0, dt, r, sh);
    return CK_OK;
}

ck_status ck_infer_range(ck_node *n, ck_diag *d) {
    char b[300];
    for (int i = 0; i < 3; i++) {
        if (ck_value_numel(n->in[i]) != 1) return node_err(d, n, CK_ERR_SHAPE, "%s must be a scalar", in_desc(n, i, b, sizeof b));
        if (!n->in[i]->data)
            return node_err(d, n, CK_ERR_UNSUPPORTED, "%s must be a constant known at compile time", in_desc(n, i, b, sizeof b));
        if (n->in[i]->dtype != n->in[0]->dtype)
            return node_err(d, n, CK_ERR_SHAPE, "%s has a different dtype from start", in_desc(n, i, b, sizeof b));
    }
    double s = ck_value_get_f(n->in[0], 0), l = ck_value_get_f(n->in[1], 0), dl = ck_value_get_f(n->in[2], 0);
    if (dl == 0) return node_err(d, n, CK_ERR_SHAPE, "delta is 0");
    int64_t cnt;
    if (ck_dtype_is_int(n->in[0]->dtype)) {
        int64_t si = ck_value_get_i(n->in[0], 0), li = ck_value_get_i(n->in[1], 0), di = ck_value_get_i(n->in[2], 0);
        int64_t span;
        if (__builtin_sub_overflow(li, si, &span) || span == INT64_MIN)
            return node_err(d, n, CK_ERR_SHAPE, "range from %lld to %lld is too long", (long long)si, (long long)li);
        /* ceil(span / delta) when they have the same sign; no intermediate overflows */
        cnt = (span > 0 && di > 0) || (span < 0 && di < 0) ? span / di + (span % di != 0) : 0;
    } else {
        double c = (l - s) / dl;
        if (!(c <= (double)CK_MAX_NUMEL)) /* NaN, infinite or huge */
            return node_err(d, n, CK_ERR_SHAPE, "range from %g to %g by %g does not have a size (%g elements)", s, l, dl, c);
        cnt = c > 0 ? (int64_t)c + ((double)(int64_t)c < c) : 0;
    }
    int64_t dims[1] = {cnt};
    set_out(n, 0, n->in[0]->dtype, 1, dims);
    return CK_OK;
}

/* ---------------------------------------------------------------- random ops */

/* RandomUniform, RandomNormal: the `shape` attribute, dtype (attribute `dtype`) float by default.
 * RandomUniformLike, RandomNormalLike: the input's shape; dtype the attribute's, else the input's,
 * which must then be a float. Bernoulli: the input's shape; the input (the probabilities) a
 * float; dtype the attribute's (any numeric type or bool), else the input's. Uniform and normal
 * outputs must be floats (the spec's T/T2). */
ck_status ck_infer_random(ck_node *n, ck_diag *d) {
    char b[300];
    bool bern = n->op == CK_OP_BERNOULLI;
    const ck_attr *dta = ck_attr_find(n, "dtype");
    ck_dtype dt = CK_UNDEF;
    if (dta) {
        if (dta->kind != CK_ATTR_INT) return node_err(d, n, CK_ERR_MODEL, "attribute 'dtype' must be an int");
        dt = ck_dtype_from_onnx((int32_t)dta->i);
        if (dt == CK_UNDEF)
            return node_err(d, n, CK_ERR_UNSUPPORTED, "dtype %s is not supported", ck_onnx_dtype_name((int32_t)dta->i));
    }
    if (n->n_in == 0) {
        const ck_attr *sh = ck_attr_find(n, "shape");
        if (!sh || sh->kind != CK_ATTR_INTS) return node_err(d, n, CK_ERR_MODEL, "missing attribute 'shape' (ints)");
        if (sh->n > CK_MAX_RANK) return node_err(d, n, CK_ERR_SHAPE, "shape has rank %d; at most %d", sh->n, CK_MAX_RANK);
        for (int i = 0; i < sh->n; i++)
            if (sh->ints[i] < 0)
                return node_err(d, n, CK_ERR_SHAPE, "shape has a negative dimension %lld", (long long)sh->ints[i]);
        if (dt != CK_UNDEF && !ck_dtype_is_float(dt))
            return node_err(d, n, CK_ERR_MODEL, "dtype %s is not a float type", ck_dtype_name(dt));
        set_out(n, 0, dt == CK_UNDEF ? CK_F32 : dt, sh->n, sh->ints);
        return CK_OK;
    }
    const ck_value *x = n->in[0];
    if (bern && !ck_dtype_is_float(x->dtype))
        return node_err(d, n, CK_ERR_MODEL, "%s must be a float tensor (the probabilities)", in_desc(n, 0, b, sizeof b));
    if (dt == CK_UNDEF) {
        if (!ck_dtype_is_float(x->dtype))
            return node_err(d, n, CK_ERR_MODEL, "%s is not a float tensor and attribute 'dtype' is absent",
                            in_desc(n, 0, b, sizeof b));
        dt = x->dtype;
    }
    if (!bern && !ck_dtype_is_float(dt))
        return node_err(d, n, CK_ERR_MODEL, "dtype %s is not a float type", ck_dtype_name(dt));
    set_out(n, 0, dt, x->rank, x->dims);
    return CK_OK;
}

/* ---------------------------------------------------------------- entry point */

ck_status ck_infer_node(ck_node *n, ck_diag *d) {
    const ck_op_info *oi = &ck_ops[n->op];
    if (n->n_in < oi->in_min || n->n_in > oi->in_max)
        return node_err(d, n, CK_ERR_MODEL, "has %d inputs, expected %d to %d", n->n_in, oi->in_min, oi->in_max);
    if (n->n_out < oi->out_min || n->n_out > oi->out_max)
        return node_err(d, n, CK_ERR_MODEL, "has %d outputs, expected %d to %d", n->n_out, oi->out_min, oi->out_max);
    for (int i = 0; i < oi->in_min; i++)
        if (!n->in[i]) return node_err(d, n, CK_ERR_MODEL, "required input %d is empty", i);
    if (oi->out_min > 0 && !n->out[0]) return node_err(d, n, CK_ERR_MODEL, "output 0 is empty"); /* LSTM's Y is optional */
    ck_status st = oi->infer(n, d);
    if (st) return st;
    /* later code multiplies dims freely: no inferred shape may be negative or overflow */
    for (int k = 0; k < n->n_out; k++) {
        const ck_value *o = n->out[k];
        char sh[CK_SHAPE_STR_MAX];
        if (o && !ck_shape_ok(o->rank, o->dims))
            return node_err(d, n, CK_ERR_SHAPE, "output %d would have shape %s: a negative dimension or more than %lld elements",
                            k, ck_shape_str(o, sh, sizeof sh), (long long)CK_MAX_NUMEL);
    }
    return CK_OK;
}
