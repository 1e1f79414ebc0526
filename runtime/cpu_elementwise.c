/* cpu_elementwise.c — the CPU backend's elementwise entry points: loops over the bodies in
 * ckrt_kernels.h, one output element per iteration, dispatching on dtype once per call.
 * Broadcast operands are walked row by row (cpu_iter.h); float binary rows switch on the op once
 * per row. Float binary and unary ops and Where are spread over the thread pool (ckrt_pool.h) in blocks of
 * rows / elements whose size never depends on the thread count; the integer paths (which can
 * fail on a division by zero) stay on the calling thread.
 */
#include "ckrt.h"
#include "ckrt_kernels.h"
#include "ckrt_pool.h"
#include "cpu_iter.h"

/* One output row of a float binary op: y[j] = pa[j*sa] OP pb[j*sb], the op switched once per row
 * (one case per CKRT_BINARY_OPS row, its F32 or F64 expression of a and b, so each element is the
 * expression of ck_k_binary_f32/f64) and the common stride pairs (both contiguous, one side
 * broadcast) spelled out so the compiler vectorizes them. */
#define CK_ROW_LOOP(T, EXPR)                                                                                          \
    do {                                                                                                              \
        if (sa == 1 && sb == 1) {                                                                                     \
            for (int64_t j = 0; j < n; j++) { T a = pa[j], b = pb[j]; y[j] = EXPR; }                                  \
        } else if (sb == 0) {                                                                                         \
            T b = pb[0];                                                                                              \
            for (int64_t j = 0; j < n; j++) { T a = pa[j * sa]; y[j] = EXPR; }                                        \
        } else if (sa == 0) {                                                                                         \
            T a = pa[0];                                                                                              \
            for (int64_t j = 0; j < n; j++) { T b = pb[j * sb]; y[j] = EXPR; }                                        \
        } else {                                                                                                      \
            for (int64_t j = 0; j < n; j++) { T a = pa[j * sa], b = pb[j * sb]; y[j] = EXPR; }                        \
        }                                                                                                             \
    } while (0)
#define CK_ROW_CASE_F32_(CODE, IR, F32, F64, I64) case CKRT_##CODE: CK_ROW_LOOP(float, F32); break;
#define CK_ROW_CASE_F64_(CODE, IR, F32, F64, I64) case CKRT_##CODE: CK_ROW_LOOP(double, F64); break;
CK_VEC static void binary_row_float(int op, float *y, const float *pa, int64_t sa, const float *pb, int64_t sb, int64_t n) {
    switch (op) {
    CKRT_BINARY_OPS(CK_ROW_CASE_F32_)
    default: break;
    }
}
CK_VEC static void binary_row_double(int op, double *y, const double *pa, int64_t sa, const double *pb, int64_t sb, int64_t n) {
    switch (op) {
    CKRT_BINARY_OPS(CK_ROW_CASE_F64_)
    default: break;
    }
}
#undef CK_ROW_CASE_F32_
#undef CK_ROW_CASE_F64_
#undef CK_ROW_LOOP

typedef struct {
    const ck_iter *it;
    int op;
    ckrt_dtype dt;
    void *y;
    const void *a, *b;
} binary_job;

/* rows [r0, r1) of a float binary op */
CK_VEC static void binary_rows(void *arg, int64_t r0, int64_t r1) {
    const binary_job *j = arg;
    ck_iter it = *j->it;
    ck_iter_seek(&it, r0);
    int64_t row = ck_iter_row(&it), sa = ck_iter_step(&it, 0), sb = ck_iter_step(&it, 1);
    for (int64_t r = r0; r < r1; r++, ck_iter_next_row(&it)) {
        if (j->dt == CKRT_F32)
            binary_row_float(j->op, (float *)j->y + r * row, (const float *)j->a + it.off[0], sa, (const float *)j->b + it.off[1], sb, row);
        else
            binary_row_double(j->op, (double *)j->y + r * row, (const double *)j->a + it.off[0], sa, (const double *)j->b + it.off[1],
                              sb, row);
    }
}

int ckrt_binary(ckrt_ctx *c, int op, ckrt_dtype dt, void *y, const void *a, const void *b, int rank,
                const int64_t *dims, const int64_t *a_strides, const int64_t *b_strides) {
    const int64_t *strides[2] = {a_strides, b_strides};
    ck_iter it;
    int64_t n = ck_iter_init(&it, rank, dims, 2, strides);
    if (n == 0) return CKRT_OK;
    bool cmp = op >= CKRT_EQUAL;
    if (!cmp && dt != CKRT_F32 && dt != CKRT_F64 && dt != CKRT_I64 && dt != CKRT_I32)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "binary op %d on %s", op, ckrt_dtype_name(dt));
    if (cmp && dt != CKRT_F32 && dt != CKRT_F64 && dt != CKRT_I64 && dt != CKRT_I32 && dt != CKRT_BOOL)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "compare op %d on %s", op, ckrt_dtype_name(dt));
    int64_t row = ck_iter_row(&it), sa = ck_iter_step(&it, 0), sb = ck_iter_step(&it, 1);
    if (!cmp && (dt == CKRT_F32 || dt == CKRT_F64)) {
        binary_job j = {&it, op, dt, y, a, b};
        ckrt_parallel_for(n / row, ck_par_rows(row), binary_rows, &j);
        return CKRT_OK;
    }
    for (int64_t i0 = 0; i0 < n; i0 += row, ck_iter_next_row(&it)) {
        int64_t ia = it.off[0], ib = it.off[1];
        for (int64_t j = 0; j < row; j++, ia += sa, ib += sb) {
            int64_t i = i0 + j;
            switch (dt) {
            case CKRT_F32: ((uint8_t *)y)[i] = ck_k_compare(op, ((const float *)a)[ia], ((const float *)b)[ib]); break;
            case CKRT_F64: ((uint8_t *)y)[i] = ck_k_compare(op, ((const double *)a)[ia], ((const double *)b)[ib]); break;
            case CKRT_I64: case CKRT_I32: {
                int64_t x = dt == CKRT_I64 ? ((const int64_t *)a)[ia] : ((const int32_t *)a)[ia];
                int64_t z = dt == CKRT_I64 ? ((const int64_t *)b)[ib] : ((const int32_t *)b)[ib];
                if ((op == CKRT_DIV || op == CKRT_MOD || op == CKRT_FMOD) && z == 0)
                    return ckrt_fail(c, CKRT_ERR_DATA, "integer division by zero at element %lld", (long long)i);
                if (cmp) ((uint8_t *)y)[i] = ck_k_compare_i64(op, x, z);
                else if (dt == CKRT_I64) ((int64_t *)y)[i] = ck_k_binary_i64(op, x, z);
                else ((int32_t *)y)[i] = (int32_t)ck_k_binary_i64(op, x, z);
                break;
            }
            default: /* bool, compare only */
                ((uint8_t *)y)[i] = ck_k_compare_i64(op, ((const uint8_t *)a)[ia], ((const uint8_t *)b)[ib]);
                break;
            }
        }
    }
    return CKRT_OK;
}

typedef struct {
    int op;
    float *y;
    const float *x;
    float alpha, beta;
} unary_job;

/* elements [i0, i1) of a float unary op: one loop per CKRT_UNARY_OPS row with the op a constant,
 * so the body's switch folds away and simple ops vectorize; the same expression per element as
 * ck_k_unary_f32 */
CK_VEC static void unary_elems(void *arg, int64_t i0, int64_t i1) {
    const unary_job *j = arg;
    float *yf = j->y, alpha = j->alpha, beta = j->beta;
    const float *xf = j->x;
    switch (j->op) {
#define CK_UNARY_CASE_(CODE, ...)                                                                                     \
    case CKRT_##CODE:                                                                                                 \
        for (int64_t i = i0; i < i1; i++) yf[i] = ck_k_unary_f32(CKRT_##CODE, xf[i], alpha, beta);                    \
        return;
        CKRT_UNARY_OPS(CK_UNARY_CASE_)
#undef CK_UNARY_CASE_
    default: break;
    }
}

int ckrt_unary(ckrt_ctx *c, int op, ckrt_dtype dt, void *y, const void *x, int64_t n, float alpha, float beta) {
    switch (dt) {
    case CKRT_F32: {
        switch (op) {
#define CK_UNARY_KNOWN_(CODE, ...) case CKRT_##CODE:
            CKRT_UNARY_OPS(CK_UNARY_KNOWN_)
#undef CK_UNARY_KNOWN_
            {
                unary_job j = {op, y, x, alpha, beta};
                ckrt_parallel_for(n, CK_PAR_ELEMS, unary_elems, &j);
                return CKRT_OK;
            }
        default: break;
        }
        break;
    }
    case CKRT_I64:
        for (int64_t i = 0; i < n; i++) ((int64_t *)y)[i] = ck_k_unary_i64(op, ((const int64_t *)x)[i]);
        return CKRT_OK;
    case CKRT_I32:
        for (int64_t i = 0; i < n; i++) ((int32_t *)y)[i] = (int32_t)ck_k_unary_i64(op, ((const int32_t *)x)[i]);
        return CKRT_OK;
    case CKRT_BOOL:
        if (op != CKRT_NOT) break;
        for (int64_t i = 0; i < n; i++) ((uint8_t *)y)[i] = !((const uint8_t *)x)[i];
        return CKRT_OK;
    default: break;
    }
    return ckrt_fail(c, CKRT_ERR_INTERNAL, "unary op %d on %s", op, ckrt_dtype_name(dt));
}

/* ckrt_kernels.h spells the dtype codes itself (it must compile alone under NVRTC). */
_Static_assert(CK_K_F32 == CKRT_F32 && CK_K_U8 == CKRT_U8 && CK_K_I8 == CKRT_I8 && CK_K_I16 == CKRT_I16 &&
                   CK_K_I32 == CKRT_I32 && CK_K_I64 == CKRT_I64 && CK_K_BOOL == CKRT_BOOL && CK_K_F64 == CKRT_F64,
               "ckrt_kernels.h dtype codes out of sync with ckrt_dtype");

typedef struct {
    const ck_iter *it;
    size_t esz;
    void *y;
    const uint8_t *cond;
    const void *a, *b;
} where_job;

/* rows [r0, r1) of Where: the element of ck_k_where, with the 4-byte rows (float, int32) spelled
 * out so that they vectorize */
CK_VEC static void where_rows(void *arg, int64_t r0, int64_t r1) {
    const where_job *j = arg;
    ck_iter it = *j->it;
    ck_iter_seek(&it, r0);
    int64_t row = ck_iter_row(&it), sc = ck_iter_step(&it, 0), sa = ck_iter_step(&it, 1), sb = ck_iter_step(&it, 2);
    for (int64_t r = r0; r < r1; r++, ck_iter_next_row(&it)) {
        const uint8_t *pc = j->cond + it.off[0];
        if (j->esz == 4) {
            uint32_t *y = (uint32_t *)j->y + r * row;
            const uint32_t *pa = (const uint32_t *)j->a + it.off[1], *pb = (const uint32_t *)j->b + it.off[2];
            for (int64_t k = 0; k < row; k++) y[k] = pc[k * sc] ? pa[k * sa] : pb[k * sb];
            continue;
        }
        int64_t ic = it.off[0], ia = it.off[1], ib = it.off[2];
        for (int64_t k = 0; k < row; k++, ic += sc, ia += sa, ib += sb)
            ck_k_where(r * row + k, (int)j->esz, j->y, j->cond, j->a, j->b, ic, ia, ib);
    }
}

int ckrt_where(ckrt_ctx *c, size_t esz, void *y, const uint8_t *cond, const void *a, const void *b, int rank,
               const int64_t *dims, const int64_t *cond_strides, const int64_t *a_strides, const int64_t *b_strides) {
    if (esz != 1 && esz != 2 && esz != 4 && esz != 8)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "where on %zu-byte elements", esz);
    const int64_t *strides[3] = {cond_strides, a_strides, b_strides};
    ck_iter it;
    int64_t n = ck_iter_init(&it, rank, dims, 3, strides);
    if (n == 0) return CKRT_OK;
    int64_t row = ck_iter_row(&it);
    where_job j = {&it, esz, y, cond, a, b};
    ckrt_parallel_for(n / row, ck_par_rows(row), where_rows, &j);
    return CKRT_OK;
}

/* Loads element 0 of an integer dtype as int64. */
static int64_t load_int(ckrt_dtype dt, const void *p) {
    switch (dt) {
    case CKRT_I64: return *(const int64_t *)p;
    case CKRT_I32: return *(const int32_t *)p;
    case CKRT_I16: return *(const int16_t *)p;
    case CKRT_I8: return *(const int8_t *)p;
    default: return *(const uint8_t *)p;
    }
}

int ckrt_clip(ckrt_ctx *c, ckrt_dtype dt, void *y, const void *x, int64_t n, const void *lo, const void *hi) {
    int hl = lo != NULL, hh = hi != NULL;
    switch (dt) {
    case CKRT_F32: {
        float l = hl ? *(const float *)lo : 0.0f, h = hh ? *(const float *)hi : 0.0f;
        for (int64_t i = 0; i < n; i++) ((float *)y)[i] = ck_k_clip_f32(((const float *)x)[i], hl, l, hh, h);
        return CKRT_OK;
    }
    case CKRT_F64: {
        double l = hl ? *(const double *)lo : 0.0, h = hh ? *(const double *)hi : 0.0;
        for (int64_t i = 0; i < n; i++) ((double *)y)[i] = ck_k_clip_f64(((const double *)x)[i], hl, l, hh, h);
        return CKRT_OK;
    }
    case CKRT_I64: case CKRT_I32: case CKRT_I16: case CKRT_I8: case CKRT_U8: {
        int64_t l = hl ? load_int(dt, lo) : 0, h = hh ? load_int(dt, hi) : 0;
        size_t esz = ckrt_dtype_size(dt);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = ck_k_clip_i64(load_int(dt, (const unsigned char *)x + (size_t)i * esz), hl, l, hh, h);
            switch (dt) { /* v is x or a bound: representable in dt */
            case CKRT_I64: ((int64_t *)y)[i] = v; break;
            case CKRT_I32: ((int32_t *)y)[i] = (int32_t)v; break;
            case CKRT_I16: ((int16_t *)y)[i] = (int16_t)v; break;
            case CKRT_I8: ((int8_t *)y)[i] = (int8_t)v; break;
            default: ((uint8_t *)y)[i] = (uint8_t)v; break;
            }
        }
        return CKRT_OK;
    }
    default: return ckrt_fail(c, CKRT_ERR_INTERNAL, "clip on %s", ckrt_dtype_name(dt));
    }
}

int ckrt_cast(ckrt_ctx *c, ckrt_dtype to, ckrt_dtype from, void *y, const void *x, int64_t n) {
    for (int k = 0; k < 2; k++) {
        ckrt_dtype t = k ? from : to;
        if (t != CKRT_F32 && t != CKRT_F64 && t != CKRT_I64 && t != CKRT_I32 && t != CKRT_I16 && t != CKRT_I8 &&
            t != CKRT_U8 && t != CKRT_BOOL)
            return ckrt_fail(c, CKRT_ERR_INTERNAL, "cast from %s to %s", ckrt_dtype_name(from), ckrt_dtype_name(to));
    }
    for (int64_t i = 0; i < n; i++) ck_k_cast((int)to, (int)from, y, x, i);
    return CKRT_OK;
}
