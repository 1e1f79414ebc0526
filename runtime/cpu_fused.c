/* cpu_fused.c — the CPU backend's ckrt_fused: a fused elementwise chain (ckptc.Fused; the program
 * format is in ckrt_kernels_fused.h) run tile by tile.
 *
 * Why tiles: interpreting the op list per element would switch on every op for every element; per
 * tile of CK_F_TILE elements each op is one tight loop with its code a constant (one case per
 * X-macro row, as cpu_elementwise.c's loops), which the compiler vectorizes, and the tile's
 * intermediates stay in L1 instead of going to memory. An op whose result is an output of the
 * chain writes it in place in the output array. Inputs read in place when the tile does not wrap
 * around their period (broadcast operands are copied into a tile buffer when it does).
 *
 * Same bits as the unfused kernels: each op's element expression is the one cpu_elementwise.c
 * evaluates (the F32 column of CKRT_BINARY_OPS, ck_k_unary_f32 with the code a constant, Where's
 * select), each result stored to a float tile by its own loop before the next op's loop reads it
 * (and which op follows which is data), so nothing can contract two members' operations into one
 * FMA. Within one op the code is the unfused kernel's: this file must be compiled with the same
 * flags as cpu_elementwise.c (tests/fuse_test.py compares the bits). Threads: blocks of CK_PAR_ELEMS elements
 * (ckrt_pool.h), whose size never depends on the thread count; elementwise results do not depend
 * on the split anyway.
 */
#include "ckrt.h"
#include "ckrt_kernels.h"
#include "ckrt_kernels_fused.h"
#include "ckrt_pool.h"
#include "cpu_iter.h"

#include <string.h>

enum { CK_F_TILE = 256 };

/* y[j] = a[j] OP b[j], j < m: the F32 expression of the op's CKRT_BINARY_OPS row */
CK_VEC static void binary_tile(int op, float *y, const float *pa, const float *pb, int64_t m) {
    switch (op) {
#define CK_F_BIN_(CODE, IR, F32, F64, I64)                                                                            \
    case CKRT_##CODE:                                                                                                 \
        for (int64_t j = 0; j < m; j++) {                                                                             \
            float a = pa[j], b = pb[j];                                                                               \
            y[j] = F32;                                                                                               \
        }                                                                                                             \
        return;
        CKRT_BINARY_OPS(CK_F_BIN_)
#undef CK_F_BIN_
    default: break;
    }
}

/* y[j] = op(x[j]), j < m: ck_k_unary_f32 with the code a constant (cpu_elementwise.c's loop) */
CK_VEC static void unary_tile(int op, float *y, const float *x, int64_t m, float alpha, float beta) {
    switch (op) {
#define CK_F_UN_(CODE, ...)                                                                                           \
    case CKRT_##CODE:                                                                                                 \
        for (int64_t j = 0; j < m; j++) y[j] = ck_k_unary_f32(CKRT_##CODE, x[j], alpha, beta);                        \
        return;
        CKRT_UNARY_OPS(CK_F_UN_)
#undef CK_F_UN_
    default: break;
    }
}

/* Elements [i0, i0 + m) of input k: in place, or copied into buf (a scalar filled; a broadcast
 * operand whose period the tile crosses copied in runs). */
static const void *operand(const ck_fprog *p, const ck_fptrs *q, int k, int64_t i0, int64_t m, void *buf) {
    int64_t per = p->period[k], off = i0 % per;
    size_t esz = p->in_bool[k] ? 1 : 4;
    const unsigned char *base = q->in[k];
    if (off + m <= per) return base + (size_t)off * esz;
    if (per == 1) {
        if (esz == 1) {
            memset(buf, base[0], (size_t)m);
        } else {
            float v = *(const float *)q->in[k], *fb = buf;
            for (int64_t j = 0; j < m; j++) fb[j] = v;
        }
        return buf;
    }
    unsigned char *b = buf;
    for (int64_t j = 0; j < m;) {
        int64_t run = per - off < m - j ? per - off : m - j;
        memcpy(b + (size_t)j * esz, base + (size_t)off * esz, (size_t)run * esz);
        j += run, off = 0;
    }
    return buf;
}

/* One tile of m <= CK_F_TILE elements starting at i0. */
static void fused_tile(const ck_fprog *p, const ck_fptrs *q, int64_t i0, int64_t m) {
    float tmp[CK_F_MAX_IN + CK_F_MAX_OPS][CK_F_TILE];
    const void *src[CK_F_MAX_IN + CK_F_MAX_OPS];
    for (int k = 0; k < p->n_in; k++) src[k] = operand(p, q, k, i0, m, tmp[k]);
    for (int j = 0; j < p->n_ops; j++) {
        const ck_fop *o = &p->op[j];
        float *y = tmp[CK_F_MAX_IN + j];
        for (int k = 0; k < p->n_out; k++)
            if (p->out_op[k] == j) y = (float *)q->out[k] + i0;
        if (o->kind == CK_F_BINARY) {
            binary_tile(o->code, y, src[o->a], src[o->b], m);
        } else if (o->kind == CK_F_UNARY) {
            unary_tile(o->code, y, src[o->a], m, o->alpha, o->beta);
        } else {
            const uint8_t *cond = src[o->a];
            const float *a = src[o->b], *b = src[o->c];
            for (int64_t t = 0; t < m; t++) y[t] = cond[t] ? a[t] : b[t];
        }
        src[CK_F_MAX_IN + j] = y;
    }
}

typedef struct {
    const ck_fprog *p;
    const ck_fptrs *q;
} fused_job;

CK_VEC static void fused_elems(void *arg, int64_t i0, int64_t i1) {
    const fused_job *j = arg;
    for (int64_t t = i0; t < i1; t += CK_F_TILE) fused_tile(j->p, j->q, t, i1 - t < CK_F_TILE ? i1 - t : CK_F_TILE);
}

int ckrt_fused(ckrt_ctx *c, const ck_fprog *p, const ck_fptrs *q, int64_t n) {
    if (p->n_in < 1 || p->n_in > CK_F_MAX_IN || p->n_ops < 1 || p->n_ops > CK_F_MAX_OPS || p->n_out < 1 ||
        p->n_out > CK_F_MAX_OUT)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "fused program with %d inputs, %d ops, %d outputs", p->n_in, p->n_ops, p->n_out);
    for (int k = 0; k < p->n_in; k++)
        if (p->period[k] < 1) return ckrt_fail(c, CKRT_ERR_INTERNAL, "fused input %d has period %lld", k, (long long)p->period[k]);
    if (n <= 0) return CKRT_OK;
    fused_job j = {p, q};
    ckrt_parallel_for(n, CK_PAR_ELEMS, fused_elems, &j);
    return CKRT_OK;
}
