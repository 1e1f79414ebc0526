/* ckrt_kernels_fused.h — the element program of a fused elementwise chain (ckptc.Fused, built by
 * ckptc's passes/fuse.c) and its one-element body for the GPU wrapper.
 *
 * A program is a short op list interpreted at run time, not code generated per chain: the same
 * entry (ckrt_fused) runs every chain on both backends, each op is the very expression of the
 * unfused kernel (the X-macro rows of ckrt_kernels_ops.h, through ck_k_binary_f32 and
 * ck_k_unary_f32), and because which op follows which is data, no compiler can contract two
 * members' float operations into one FMA: fused and unfused give the same bits.
 *
 * Operands: input k is read at element (i mod period[k]) (a suffix broadcast: same shape, a
 * trailing run of dims, or one element); in_bool[k]: a bool (uint8) input, read only as a Where
 * condition. An op's operand ref r < CK_F_MAX_IN is input r, else the result of op
 * r - CK_F_MAX_IN (an earlier op). Output k is op out_op[k]'s result, written at element i.
 *
 * The types below are read by ckptc (limits), by generated programs (ckrt_ops.h) and by kernels.cu;
 * the body needs ckrt_kernels.h first (CK_DEV). Under the rules of ckrt_kernels.h.
 */
#ifndef CKRT_KERNELS_FUSED_H
#define CKRT_KERNELS_FUSED_H

#if !defined(__CUDACC_RTC__)
#include <stdint.h>
#endif

#define CK_F_MAX_IN 8
#define CK_F_MAX_OPS 8
#define CK_F_MAX_OUT 4

enum { CK_F_BINARY, CK_F_UNARY, CK_F_WHERE };

/* One member: kind; its runtime code (CKRT_ADD, CKRT_GELU, ...; unused for Where); operand refs
 * a, b, c (binary: a, b; unary: a; Where: a the condition input, b and c the values); a unary
 * op's alpha and beta. */
typedef struct ck_fop {
    int kind, code, a, b, c;
    float alpha, beta;
} ck_fop;

typedef struct ck_fprog {
    int n_in, n_ops, n_out;
    int out_op[CK_F_MAX_OUT];
    int in_bool[CK_F_MAX_IN];
    int64_t period[CK_F_MAX_IN];
    ck_fop op[CK_F_MAX_OPS];
} ck_fprog;

/* The arrays, by value (device addresses on the GPU). */
typedef struct ck_fptrs {
    const void *in[CK_F_MAX_IN];
    void *out[CK_F_MAX_OUT];
} ck_fptrs;

#ifdef CKRT_KERNELS_H
/* Element i of the chain: every op in order, each result a float (the GPU wrapper's body; the
 * CPU runs the same ops tile by tile, cpu_fused.c). */
CK_DEV void ck_k_fused_elem(int64_t i, const ck_fprog *p, const ck_fptrs *q) {
    float r[CK_F_MAX_IN + CK_F_MAX_OPS];
    for (int k = 0; k < p->n_in; k++)
        if (!p->in_bool[k]) r[k] = ((const float *)q->in[k])[i % p->period[k]];
    for (int j = 0; j < p->n_ops; j++) {
        const ck_fop *o = &p->op[j];
        float v;
        if (o->kind == CK_F_BINARY) v = ck_k_binary_f32(o->code, r[o->a], r[o->b]);
        else if (o->kind == CK_F_UNARY) v = ck_k_unary_f32(o->code, r[o->a], o->alpha, o->beta);
        else v = ((const uint8_t *)q->in[o->a])[i % p->period[o->a]] ? r[o->b] : r[o->c];
        r[CK_F_MAX_IN + j] = v;
    }
    for (int k = 0; k < p->n_out; k++) ((float *)q->out[k])[i] = r[CK_F_MAX_IN + p->out_op[k]];
}
#endif

#endif
