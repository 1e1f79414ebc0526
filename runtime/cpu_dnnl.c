/* cpu_dnnl.c — the CPU backend's oneDNN convolutions: Conv's forward and its input gradient
 * (ckrt_conv, ckrt_conv_grad_input hand them here first; see ckrt_dnnl.h for what is planned and
 * why the weight gradient is not among them).
 *
 * A primitive is built once per distinct convolution (a small cache keyed by its whole
 * geometry) and run on the caller's pointers, with its scratchpad at the node's planned
 * workspace: oneDNN allocates nothing of its own per call, so the measured peak is the plan's.
 * Determinism: one thread, the ISA pinned to AVX2 (ckrt_dnnl_setup): the same primitive, the same
 * order of sums, the same bits on every run and every AVX2 machine. The cache is not locked: the
 * CPU backend runs its kernels from one thread.
 */
#include "ckrt.h"
#include "ckrt_dnnl.h"

#ifdef CKRT_HAVE_DNNL
#include <dnnl.h>
#include <string.h>

#define CACHE_SLOTS 256

typedef struct {
    ckrt_dnnl_conv_key key;
    dnnl_primitive_t prim; /* NULL: oneDNN does not take it (im2col runs) */
    dnnl_primitive_desc_t pd;
    int64_t scratch;
} slot;

static slot cache[CACHE_SLOTS];
static int n_cached;
static dnnl_engine_t eng; /* dnnl_desc.c's, which the descriptors are built on */
static dnnl_stream_t stream;

/* The cached primitive of key; *s NULL with CKRT_OK when im2col should run. */
static int lookup(ckrt_ctx *c, const ckrt_dnnl_conv_key *key, slot **s) {
    *s = NULL;
    for (int i = 0; i < n_cached; i++)
        if (memcmp(&cache[i].key, key, sizeof *key) == 0) {
            *s = cache[i].prim ? &cache[i] : NULL;
            return CKRT_OK;
        }
    if (!ckrt_dnnl_setup()) return CKRT_OK;
    if (!eng && (!(eng = ckrt_dnnl_engine()) || dnnl_stream_create(&stream, eng, dnnl_stream_default_flags) != dnnl_success)) {
        eng = NULL;
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "oneDNN: cannot create the CPU engine and stream");
    }
    if (n_cached == CACHE_SLOTS) return CKRT_OK; /* beyond the cache: im2col (its workspace is planned too) */
    slot *e = &cache[n_cached++];
    memset(e, 0, sizeof *e);
    e->key = *key;
    if (ckrt_dnnl_conv_pd(key, &e->pd)) return CKRT_OK;
    if (dnnl_primitive_create(&e->prim, e->pd) != dnnl_success) {
        e->prim = NULL;
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "oneDNN: cannot create a convolution primitive");
    }
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(e->pd, dnnl_query_scratchpad_md, 0);
    e->scratch = sp ? (int64_t)dnnl_memory_desc_get_size(sp) : 0;
    *s = e;
    return CKRT_OK;
}

/* One argument: the memory of the pd's descriptor (what, index) over ptr (the bias: weights 1). */
static int arg(ckrt_ctx *c, dnnl_exec_arg_t *a, int *n, const slot *s, int which, dnnl_query_t what, int index,
               const void *ptr) {
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(s->pd, what, index);
    if (!md || dnnl_memory_create(&a[*n].memory, md, eng, (void *)ptr) != dnnl_success)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "oneDNN: cannot wrap a convolution argument");
    a[(*n)++].arg = which;
    return CKRT_OK;
}

/* fwd: out = y, in = x, b may be NULL; bwd_data: out = dx, in = dy. */
int ckrt_dnnl_conv(ckrt_ctx *c, const ckrt_dnnl_conv_key *key, float *out, const float *in, const float *w,
                   const float *b, float *ws, bool *done) {
    slot *s;
    *done = false;
    CKRT_TRY(lookup(c, key, &s));
    if (!s) return CKRT_OK;
    if (s->scratch > 0 && !ws) return ckrt_fail(c, CKRT_ERR_INTERNAL, "oneDNN convolution needs a workspace but none was planned");
    bool fwd = key->kind == CKRT_DNNL_CONV_FWD;
    dnnl_exec_arg_t a[5];
    int n = 0, rc = CKRT_OK;
    if (fwd) {
        rc = arg(c, a, &n, s, DNNL_ARG_SRC, dnnl_query_src_md, 0, in);
        if (!rc) rc = arg(c, a, &n, s, DNNL_ARG_DST, dnnl_query_dst_md, 0, out);
        if (!rc && key->has_bias) rc = arg(c, a, &n, s, DNNL_ARG_BIAS, dnnl_query_weights_md, 1, b);
    } else {
        rc = arg(c, a, &n, s, DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, 0, in);
        if (!rc) rc = arg(c, a, &n, s, DNNL_ARG_DIFF_SRC, dnnl_query_diff_src_md, 0, out);
    }
    if (!rc) rc = arg(c, a, &n, s, DNNL_ARG_WEIGHTS, dnnl_query_weights_md, 0, w);
    if (!rc && s->scratch > 0) rc = arg(c, a, &n, s, DNNL_ARG_SCRATCHPAD, dnnl_query_scratchpad_md, 0, ws);
    dnnl_status_t st = rc ? dnnl_success : dnnl_primitive_execute(s->prim, stream, n, a);
    if (st == dnnl_success && !rc) st = dnnl_stream_wait(stream);
    if (st != dnnl_success) rc = ckrt_fail(c, CKRT_ERR_INTERNAL, "oneDNN: a convolution failed to run (status %d)", (int)st);
    for (int i = 0; i < n; i++) dnnl_memory_destroy(a[i].memory);
    *done = rc == CKRT_OK;
    return rc;
}

#else

int ckrt_dnnl_conv(ckrt_ctx *c, const ckrt_dnnl_conv_key *key, float *out, const float *in, const float *w,
                   const float *b, float *ws, bool *done) {
    (void)c, (void)key, (void)out, (void)in, (void)w, (void)b, (void)ws;
    *done = false;
    return CKRT_OK;
}
#endif
