/* dnnl_desc.c — the oneDNN convolution descriptors, written once for the compiler (which plans
 * their scratchpads) and the runtime (which runs them): see ckrt_dnnl.h for why both build the
 * same descriptor. Compiled into libckrt and into ckrt_util (the compiler's copy) when the build
 * has oneDNN; otherwise the stubs at the end answer "im2col".
 *
 * Layouts are the plain row-major ones ONNX tensors have (nchw, oihw, goihw for groups): no
 * reorders, so no hidden buffers. On AVX2 oneDNN then picks its GEMM-based convolution
 * ("gemm:jit"); its reference implementation ("ref:...", a hundred times slower) is refused.
 */
#include "ckrt_dnnl.h"

#include <string.h>

bool ckrt_dnnl_conv_key_init(ckrt_dnnl_conv_key *key, int kind, int has_bias, int nsp, int64_t N, int64_t C, int64_t M,
                             int64_t group, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                             const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations) {
    memset(key, 0, sizeof *key);
    if (nsp < 1 || nsp > CKRT_DNNL_MAX_SP || N < 1 || C < 1 || M < 1 || group < 1 || C % group || M % group) return false;
    key->kind = kind, key->nsp = nsp, key->has_bias = has_bias != 0;
    key->N = N, key->C = C, key->M = M, key->group = group;
    for (int d = 0; d < nsp; d++) {
        if (in_sp[d] < 1 || out_sp[d] < 1 || k[d] < 1) return false;
        key->in_sp[d] = in_sp[d], key->out_sp[d] = out_sp[d], key->k[d] = k[d];
        key->strides[d] = strides[d], key->pads_begin[d] = pads_begin[d], key->dilations[d] = dilations[d];
    }
    return true;
}

#ifdef CKRT_HAVE_DNNL
#include <dnnl.h>

void omp_set_num_threads(int n); /* libgomp, oneDNN's threading runtime in Debian's build */

bool ckrt_dnnl_setup(void) {
    static int state; /* 0: not yet, 1: usable, -1: not */
    if (!state) {
        /* before any primitive exists: the cap is read once */
        dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
        omp_set_num_threads(1);
        state = dnnl_get_effective_cpu_isa() == dnnl_cpu_isa_avx2 ? 1 : -1;
    }
    return state > 0;
}

dnnl_engine_t ckrt_dnnl_engine(void) {
    static dnnl_engine_t eng;
    if (!eng && dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) eng = NULL;
    return eng;
}

/* x, y: plain (N, C, sp...); w: plain (M, C/g, k...) or, grouped, (g, M/g, C/g, k...) */
static bool plain_md(dnnl_memory_desc_t *md, int rank, const int64_t *dims) {
    static const dnnl_format_tag_t tags[] = {dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
    dnnl_dims_t d;
    for (int i = 0; i < rank; i++) d[i] = dims[i];
    return dnnl_memory_desc_init_by_tag(md, rank, d, dnnl_f32, tags[rank - 1]) == dnnl_success;
}

typedef struct {
    dnnl_memory_desc_t x, w, y, b;
    dnnl_dims_t st, dl, pl, pr;
} conv_mds;

static bool conv_mds_init(conv_mds *m, const ckrt_dnnl_conv_key *key) {
    int nsp = key->nsp;
    int64_t xd[2 + CKRT_DNNL_MAX_SP] = {key->N, key->C}, yd[2 + CKRT_DNNL_MAX_SP] = {key->N, key->M};
    int64_t wd[3 + CKRT_DNNL_MAX_SP] = {key->group, key->M / key->group, key->C / key->group};
    for (int d = 0; d < nsp; d++) {
        xd[2 + d] = key->in_sp[d], yd[2 + d] = key->out_sp[d], wd[3 + d] = key->k[d];
        int64_t ek = (key->k[d] - 1) * key->dilations[d] + 1;
        m->st[d] = key->strides[d], m->dl[d] = key->dilations[d] - 1, m->pl[d] = key->pads_begin[d];
        /* the end pad that makes oneDNN's output size out_sp (ONNX floors it the same way) */
        m->pr[d] = (key->out_sp[d] - 1) * key->strides[d] + ek - key->in_sp[d] - key->pads_begin[d];
        if (m->pr[d] < 0 || m->pl[d] < 0) return false;
    }
    bool grouped = key->group > 1;
    return plain_md(&m->x, 2 + nsp, xd) && plain_md(&m->y, 2 + nsp, yd) &&
           plain_md(&m->w, 2 + nsp + grouped, grouped ? wd : wd + 1) && plain_md(&m->b, 1, &key->M);
}

static int pd_create(dnnl_primitive_desc_t *pd, const void *desc, const_dnnl_primitive_desc_t hint) {
    dnnl_primitive_attr_t attr;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) return -1;
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(pd, desc, attr, ckrt_dnnl_engine(), hint);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return -1;
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
        strncmp(impl, "ref", 3) == 0) {
        dnnl_primitive_desc_destroy(*pd);
        return -1;
    }
    return 0;
}

int ckrt_dnnl_conv_pd(const ckrt_dnnl_conv_key *key, dnnl_primitive_desc_t *pd) {
    conv_mds m;
    dnnl_convolution_desc_t fd, bd;
    if (!ckrt_dnnl_setup() || !ckrt_dnnl_engine() || !conv_mds_init(&m, key)) return -1;
    bool fwd = key->kind == CKRT_DNNL_CONV_FWD;
    if (dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &m.x, &m.w,
                                                   fwd && key->has_bias ? &m.b : NULL, &m.y, m.st, m.dl, m.pl,
                                                   m.pr) != dnnl_success)
        return -1;
    if (fwd) return pd_create(pd, &fd, NULL);
    /* the data gradient is described against its forward (without a bias: none is needed) */
    dnnl_primitive_desc_t hint;
    if (pd_create(&hint, &fd, NULL)) return -1;
    int rc = -1;
    if (dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &m.x, &m.w, &m.y, m.st, m.dl,
                                                         m.pl, m.pr) == dnnl_success)
        rc = pd_create(pd, &bd, hint);
    dnnl_primitive_desc_destroy(hint);
    return rc;
}

int64_t ckrt_dnnl_conv_scratch(const ckrt_dnnl_conv_key *key) {
    dnnl_primitive_desc_t pd;
    if (ckrt_dnnl_conv_pd(key, &pd)) return -1;
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    int64_t bytes = sp ? (int64_t)dnnl_memory_desc_get_size(sp) : 0;
    dnnl_primitive_desc_destroy(pd);
    return bytes;
}

#else /* no oneDNN in this build: im2col everywhere */

bool ckrt_dnnl_setup(void) { return false; }
struct dnnl_engine *ckrt_dnnl_engine(void) { return NULL; }
int64_t ckrt_dnnl_conv_scratch(const ckrt_dnnl_conv_key *key) {
    (void)key;
    return -1;
}
int ckrt_dnnl_conv_pd(const ckrt_dnnl_conv_key *key, struct dnnl_primitive_desc **pd) {
    (void)key, (void)pd;
    return -1;
}
#endif
