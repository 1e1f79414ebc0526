/* einsum.c — Einsum's equation: parsed once here, for shape inference and for the lowering.
 *
 * ckptc runs no Einsum kernel: passes/lower.c rewrites every Einsum into ReduceSum, Transpose,
 * Reshape and MatMul before autodiff, so its gradient, recompute, offload and the CUDA path are
 * those of ops ckptc already has. What that lowering can express is what this parser accepts:
 * one or two operands, each letter at most once per operand (no diagonals), no ellipsis, every
 * output letter present in an operand and not repeated, and a letter shared by both operands
 * having the same size in both (no broadcasting of size-1 dims). Anything else is exit 2 naming
 * the node and the equation. The implicit form (no "->") takes the letters that occur once,
 * in alphabetical order, as the spec says.
 */
#include "ck_ir.h"

#include <stdio.h>
#include <string.h>

static bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Reads one operand's letters from s up to a ',' or '-' or the end; spaces are skipped. */
static const char *read_term(const char *s, char *out, int *n, char *err, size_t errlen) {
    *n = 0;
    for (; *s && *s != ',' && *s != '-'; s++) {
        if (*s == ' ') continue;
        if (*s == '.') {
            snprintf(err, errlen, "an ellipsis ('...') is not supported");
            return NULL;
        }
        if (!is_letter(*s)) {
            snprintf(err, errlen, "unexpected character '%c'", *s);
            return NULL;
        }
        if (*n >= CK_MAX_RANK) {
            snprintf(err, errlen, "a term has more than %d letters", CK_MAX_RANK);
            return NULL;
        }
        if (memchr(out, *s, (size_t)*n)) {
            snprintf(err, errlen, "letter '%c' repeats within one term (a diagonal), which is not supported", *s);
            return NULL;
        }
        out[(*n)++] = *s;
    }
    return s;
}

static void implicit_output(ck_einsum *e) {
    e->n_out = 0;
    for (char c = 'A'; c <= 'z'; c++) {
        if (!is_letter(c)) continue;
        int count = 0;
        for (int t = 0; t < e->n_terms; t++) count += memchr(e->term[t], c, (size_t)e->n[t]) != NULL;
        if (count == 1) e->out[e->n_out++] = c;
    }
}

bool ck_einsum_parse(const char *eq, int n_terms, ck_einsum *e, char *err, size_t errlen) {
    memset(e, 0, sizeof *e);
    const char *s = eq;
    for (int t = 0;; t++) {
        if (t >= 2) {
            snprintf(err, errlen, "more than two operands are not supported");
            return false;
        }
        s = read_term(s, e->term[t], &e->n[t], err, errlen);
        if (!s) return false;
        e->n_terms = t + 1;
        if (*s != ',') break;
        s++;
    }
    if (e->n_terms != n_terms) {
        snprintf(err, errlen, "the equation has %d operand(s) but the node has %d input(s)", e->n_terms, n_terms);
        return false;
    }
    if (*s == '-') {
        if (s[1] != '>') {
            snprintf(err, errlen, "expected '->'");
            return false;
        }
        const char *end = read_term(s + 2, e->out, &e->n_out, err, errlen);
        if (!end) return false;
        if (*end) {
            snprintf(err, errlen, "unexpected '%c' after the output term", *end);
            return false;
        }
        e->explicit_out = true;
    } else {
        implicit_output(e);
    }
    for (int i = 0; i < e->n_out; i++) {
        bool found = false;
        for (int t = 0; t < e->n_terms; t++) found |= memchr(e->term[t], e->out[i], (size_t)e->n[t]) != NULL;
        if (!found) {
            snprintf(err, errlen, "output letter '%c' is in no operand", e->out[i]);
            return false;
        }
    }
    return true;
}

/* The size of letter c, from the first operand that has it (-1: none). */
int64_t ck_einsum_dim(const ck_einsum *e, const ck_value *const *in, char c) {
    for (int t = 0; t < e->n_terms; t++) {
        const char *p = memchr(e->term[t], c, (size_t)e->n[t]);
        if (p) return in[t]->dims[p - e->term[t]];
    }
    return -1;
}

ck_status ck_infer_einsum(ck_node *n, ck_diag *d) {
    const char *eq = ck_attr_str(n, "equation", NULL);
    char err[200];
    ck_einsum e;
    if (!eq) return ck_node_err(d, n, CK_ERR_SHAPE, "the attribute 'equation' is missing");
    if (!ck_einsum_parse(eq, n->n_in, &e, err, sizeof err)) return ck_node_err(d, n, CK_ERR_UNSUPPORTED, "equation '%s': %s", eq, err);
    for (int t = 0; t < e.n_terms; t++) {
        const ck_value *x = n->in[t];
        if (x->rank != e.n[t])
            return ck_node_err(d, n, CK_ERR_SHAPE, "equation '%s': operand %d has %d letters but input %d '%s' has rank %d", eq, t,
                               e.n[t], t, x->name, x->rank);
        if (x->dtype != CK_F32) /* what MatMul runs */
            return ck_node_err(d, n, CK_ERR_UNSUPPORTED, "input %d '%s' has dtype %s; ckptc supports float32 here", t, x->name,
                               ck_dtype_name(x->dtype));
    }
    if (e.n_terms == 2)
        for (int i = 0; i < e.n[1]; i++) {
            const char *p = memchr(e.term[0], e.term[1][i], (size_t)e.n[0]);
            int64_t a = p ? n->in[0]->dims[p - e.term[0]] : 0, b = n->in[1]->dims[i];
            if (p && a != b)
                return ck_node_err(d, n, CK_ERR_UNSUPPORTED,
                                   "equation '%s': letter '%c' is %lld in input 0 but %lld in input 1 (ckptc does not broadcast "
                                   "Einsum operands)", eq, e.term[1][i], (long long)a, (long long)b);
        }
    int64_t dims[CK_MAX_RANK];
    for (int i = 0; i < e.n_out; i++) dims[i] = ck_einsum_dim(&e, (const ck_value *const *)n->in, e.out[i]);
    ck_node_set_out(n, 0, n->in[0]->dtype, e.n_out, dims);
    return CK_OK;
}
