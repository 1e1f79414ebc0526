/* emit_cuda.c — writes DIR/kernels.cu: the CUDA kernels one program needs.
 *
 * The kernel bodies are not written here: the text of runtime/ckrt_kernels*.h is embedded into
 * ckptc at build time (cmake/embed_kernels.cmake -> ck_kernel_headers) and copied in, so the GPU
 * runs the very bodies the CPU backend runs. What this file adds is one thin extern "C"
 * __global__ wrapper per launch the CUDA backend makes (runtime/cuda_ops.c), each running the
 * grid-stride loop CK_G_LOOP over its work items and calling a body. A wrapper is emitted when
 * the model's generated C calls the ckrt_* entry point that launches it, so kernels.cu holds only
 * what the program uses. Under CK_EMULATE each wrapper also gets a host thunk taking the
 * argument array of cuLaunchKernel (and its arguments' sizes), which lets tests/cuda_emu.c and
 * tests/fake_cuda.c run kernels.cu on the CPU.
 *
 * The trainer compiles kernels.cu with NVRTC at start-up for its GPU's architecture; a source
 * hash is part of its cache key, so the text must be reproducible (it is: no timestamps).
 */
#include "emit.h"

#include <stdlib.h>
#include <string.h>

/* ckrt_kernels.h, ckrt_kernels_move.h, ckrt_kernels_train.h, ckrt_kernels_gpu.h (generated) */
extern const char *const ck_kernel_header_names[];
extern const char *const ck_kernel_header_texts[];
extern const int ck_kernel_header_count;

typedef struct ck_wrapper {
    const char *entry;   /* the ckrt_* entry point whose CUDA implementation launches it */
    const char *name;    /* ck_g_NAME; the first parameter is always int64_t n, the work items */
    const char *params;  /* after n */
    const char *body;    /* runs once per work item i */
} ck_wrapper;

#define D "const int64_t *"
static const ck_wrapper wrappers[] = {
    /* elementwise */
    {"binary", "binary_f32", "int op, void *y, const float *a, const float *b, int rank, ck_dims dims, ck_dims sa, ck_dims sb",
     "float x = a[ck_k_offset(i, rank, dims.v, sa.v)], z = b[ck_k_offset(i, rank, dims.v, sb.v)];\n"
     "if (op >= CKRT_EQUAL) ((uint8_t *)y)[i] = ck_k_compare(op, x, z); else ((float *)y)[i] = ck_k_binary_f32(op, x, z);"},
    {"binary", "binary_f64", "int op, void *y, const double *a, const double *b, int rank, ck_dims dims, ck_dims sa, ck_dims sb",
     "double x = a[ck_k_offset(i, rank, dims.v, sa.v)], z = b[ck_k_offset(i, rank, dims.v, sb.v)];\n"
     "if (op >= CKRT_EQUAL) ((uint8_t *)y)[i] = ck_k_compare(op, x, z); else ((double *)y)[i] = ck_k_binary_f64(op, x, z);"},
    {"binary", "binary_int", "int op, int dt, void *y, const void *a, const void *b, int rank, ck_dims dims, ck_dims sa, ck_dims sb",
     "int64_t x = ck_k_load_int(dt, a, ck_k_offset(i, rank, dims.v, sa.v)), z = ck_k_load_int(dt, b, ck_k_offset(i, rank, dims.v, sb.v));\n"
     "if (op >= CKRT_EQUAL) ((uint8_t *)y)[i] = ck_k_compare_i64(op, x, z); else ck_k_store_int(dt, y, i, ck_k_binary_i64(op, x, z));"},
    {"unary", "unary_f32", "int op, float *y, const float *x, float alpha, float beta", "y[i] = ck_k_unary_f32(op, x[i], alpha, beta);"},
    {"unary", "unary_int", "int op, int dt, void *y, const void *x",
     "ck_k_store_int(dt, y, i, ck_k_unary_i64(op, ck_k_load_int(dt, x, i)));"},
    {"unary", "not", "uint8_t *y, const uint8_t *x", "y[i] = !x[i];"},
    {"where", "where", "int esz, void *y, const uint8_t *cond, const void *a, const void *b, int rank, ck_dims dims, ck_dims sc, ck_dims sa, ck_dims sb",
     "ck_k_where(i, esz, y, cond, a, b, ck_k_offset(i, rank, dims.v, sc.v), ck_k_offset(i, rank, dims.v, sa.v), ck_k_offset(i, rank, dims.v, sb.v));"},
    {"clip", "clip_f32", "float *y, const float *x, const float *lo, const float *hi",
     "y[i] = ck_k_clip_f32(x[i], lo != NULL, lo ? *lo : 0.0f, hi != NULL, hi ? *hi : 0.0f);"},
    {"clip", "clip_f64", "double *y, const double *x, const double *lo, const double *hi",
     "y[i] = ck_k_clip_f64(x[i], lo != NULL, lo ? *lo : 0.0, hi != NULL, hi ? *hi : 0.0);"},
    {"clip", "clip_int", "int dt, void *y, const void *x, const void *lo, const void *hi",
     "ck_k_store_int(dt, y, i, ck_k_clip_i64(ck_k_load_int(dt, x, i), lo != NULL, lo ? ck_k_load_int(dt, lo, 0) : 0,\n"
     "                                      hi != NULL, hi ? ck_k_load_int(dt, hi, 0) : 0));"},
    {"cast", "cast", "int to, int from, void *y, const void *x", "ck_k_cast(to, from, y, x, i);"},
    /* over an axis */
    {"softmax", "softmax", "int log_, float *y, const float *x, int64_t len, int64_t inner", "ck_k_softmax_row(i, log_, y, x, len, inner);"},
    {"layer_norm", "layer_norm", "float *y, float *mean, float *inv_std, const float *x, const float *scale, const float *bias, int64_t cols, float eps",
     "ck_k_layer_norm_row(i, y, mean, inv_std, x, scale, bias, cols, eps);"},
    {"batch_norm", "batch_norm_train",
     "float *y, float *run_mean, float *run_var, float *saved_mean, float *saved_inv_std, const float *x, const float *scale, "
     "const float *bias, const float *mean, const float *var, int64_t N, int64_t C, int64_t S, float eps, float momentum, int unbiased",
     "ck_k_batch_norm_train_channel(i, y, run_mean, run_var, saved_mean, saved_inv_std, x, scale, bias, mean, var, N, C, S, eps, momentum, unbiased);"},
    {"batch_norm", "batch_norm_infer", "float *y, const float *x, const float *scale, const float *bias, const float *mean, const float *var, int64_t C, int64_t S, float eps",
     "y[i] = ck_k_batch_norm_infer(i, x, scale, bias, mean, var, C, S, eps);"},
    {"dropout", "dropout", "float *y, uint8_t *mask, const float *x, int64_t cnt, float ratio, float scale, uint64_t seed, uint64_t step, uint64_t key, uint64_t first",
     "ck_k_dropout_block(i, y, mask, x, cnt, ratio, scale, seed, step, key, first);"},
    {"dropout_grad", "dropout", NULL, NULL},
    {"reduce", "reduce_f32", "int mean, float *y, const float *x, int nk, ck_dims kd, ck_dims ks, int nr, ck_dims rd, ck_dims rs",
     "y[i] = ck_k_reduce_f32(i, mean, x, nk, kd.v, ks.v, nr, rd.v, rs.v);"},
    {"reduce", "reduce_int", "int is64, void *y, const void *x, int nk, ck_dims kd, ck_dims ks, int nr, ck_dims rd, ck_dims rs",
     "int64_t s = ck_k_reduce_sum_int(i, is64, x, nk, kd.v, ks.v, nr, rd.v, rs.v);\n"
     "if (is64) ((int64_t *)y)[i] = s; else ((int32_t *)y)[i] = (int32_t)(uint32_t)(uint64_t)s;"},
    {"global_avg_pool", "global_avg_pool", "float *y, const float *x, int64_t s", "y[i] = ck_k_global_avg_pool(i, x, s);"},
    /* dense: cuBLAS does the products */
    {"gemm", "gemm_cm", "float *y, const float *cm, int64_t N, int64_t cm_rows, int64_t cm_cols", "y[i] = ck_k_gemm_cm(i, cm, N, cm_rows, cm_cols);"},
    {"gemm", "scale", "float *y, float s", "y[i] *= s;"},
    {"conv", "im2col", "float *col, const float *img, int nsp, ck_dims in_sp, ck_dims out_sp, ck_dims k, ck_dims st, ck_dims pb, ck_dims dl",
     "col[i] = ck_k_im2col(i, img, nsp, in_sp.v, out_sp.v, k.v, st.v, pb.v, dl.v);"},
    {"conv", "bias_add", "float *y, const float *b, int64_t out_n", "y[i] += ck_k_bias_of(i, b, out_n);"},
    {"pool", "pool", "int kind, float *y, int64_t *indices, const float *x, int nsp, ck_dims in_sp, ck_dims out_sp, ck_dims k, ck_dims st, "
     "ck_dims pb, ck_dims pe, ck_dims dl, int cip",
     "int64_t at = -1;\ny[i] = ck_k_pool(i, kind, x, nsp, in_sp.v, out_sp.v, k.v, st.v, pb.v, pe.v, dl.v, cip, &at);\n"
     "if (indices) indices[i] = at;"},
    /* data movement */
    {"strided_copy", "strided_copy", "int esz, void *y, const void *x, int rank, ck_dims dims, ck_dims strides, int64_t base",
     "ck_k_copy_elem(y, i, x, ck_k_strided_src(i, rank, dims.v, strides.v, base), esz);"},
    {"concat", "split_copy", "int esz, int to_whole, void *whole, void *part, int64_t len, int64_t start, int64_t total, int64_t inner",
     "int64_t j = ck_k_split_src(i, len, start, total, inner);\n"
     "if (to_whole) ck_k_copy_elem(whole, j, part, i, esz); else ck_k_copy_elem(part, i, whole, j, esz);"},
    {"split", "split_copy", NULL, NULL},
    {"gather", "gather", "int esz, void *y, const void *x, const void *idx, int idx_i64, int64_t len, int64_t inner, int64_t n_idx",
     "int64_t src = ck_k_gather_src(i, idx, idx_i64, len, inner, n_idx);\nif (src >= 0) ck_k_copy_elem(y, i, x, src, esz);"},
    {"trilu", "trilu", "int esz, void *y, const void *x, int64_t rows, int64_t cols, int64_t k, int upper",
     "if (ck_k_trilu_keep(i, rows, cols, k, upper)) ck_k_copy_elem(y, i, x, i, esz);\n"
     "else for (int b = 0; b < esz; b++) ((uint8_t *)y)[i * esz + b] = 0;"},
    {"fill", "fill", "int esz, void *y, ck_value16 v", "ck_k_copy_elem(y, i, v.w, 0, esz);"},
    {"range", "range", "int dt, void *y, const void *start, const void *delta",
     "switch (dt) {\n"
     "case CK_K_F32: ((float *)y)[i] = (float)ck_k_range_f(i, *(const float *)start, *(const float *)delta); break;\n"
     "case CK_K_F64: ((double *)y)[i] = ck_k_range_f(i, *(const double *)start, *(const double *)delta); break;\n"
     "case CK_K_I64: ((int64_t *)y)[i] = ck_k_range_i(i, *(const int64_t *)start, *(const int64_t *)delta); break;\n"
     "default: ((int32_t *)y)[i] = (int32_t)ck_k_range_i(i, *(const int32_t *)start, *(const int32_t *)delta); break;\n"
     "}"},
    /* training */
    {"cross_entropy", "xent_rows", "double *out, int64_t r0, const float *logits, const void *labels, int lab_i64, int64_t classes",
     "int64_t r = r0 + i, l = lab_i64 ? ((const int64_t *)labels)[r] : ((const int32_t *)labels)[r];\n"
     "out[i] = ck_k_xent_row(r, logits, l, classes);"},
    {"cross_entropy", "xent_accum", "double *acc, const double *vals, int64_t cnt, int first, float *loss, int64_t rows",
     "double s = first ? 0.0 : acc[0];\nfor (int64_t j = 0; j < cnt; j++) s += vals[j];\nacc[0] = s;\n"
     "if (loss) loss[0] = (float)(s / (double)rows);"},
    {"cross_entropy_grad", "xent_grad", "float *dx, const float *dloss, const float *logits, const void *labels, int lab_i64, int64_t rows, int64_t classes",
     "int64_t l = lab_i64 ? ((const int64_t *)labels)[i] : ((const int32_t *)labels)[i];\n"
     "ck_k_xent_grad_row(i, dx, logits, l, classes, (float)((double)dloss[0] / (double)rows));"},
    /* data parallel: dp.c's reduction of the gradients (ckrt_grad_allreduce) on device memory */
    {"grad_allreduce", "rank_mean", "float *out, const float *recv, int64_t count, int ranks", "out[i] = ck_k_rank_mean(i, recv, count, ranks);"},
    {"grad_allreduce", "copy_f32", "float *y, const float *x", "y[i] = x[i];"},
    {"unary_grad", "unary_grad", "int op, float *dx, const float *dy, const float *x, float alpha, float beta, float lo, float hi",
     "dx[i] = ck_k_unary_grad(op, dy[i], x[i], alpha, beta, lo, hi);"},
    {"softmax_grad", "softmax_grad", "int log_sm, float *dx, const float *dy, const float *y, int64_t len, int64_t inner",
     "ck_k_softmax_grad_line(i, log_sm, dx, dy, y, len, inner);"},
    {"layer_norm_grad", "layer_norm_grad_row", "float *dx, const float *dy, const float *x, const float *scale, const float *mean, const float *inv_std, int64_t cols",
     "ck_k_layer_norm_grad_row(i, dx, dy, x, scale, mean, inv_std, cols);"},
    {"layer_norm_grad", "layer_norm_grad_col", "float *dscale, float *dbias, const float *dy, const float *x, const float *mean, const float *inv_std, int64_t rows, int64_t cols",
     "ck_k_layer_norm_grad_col(i, dscale, dbias, dy, x, mean, inv_std, rows, cols);"},
    {"batch_norm_grad", "batch_norm_grad", "float *dx, float *dscale, float *dbias, const float *dy, const float *x, const float *scale, const float *mean, "
     "const float *inv_std, int64_t N, int64_t C, int64_t S",
     "ck_k_batch_norm_grad_channel(i, dx, dscale, dbias, dy, x, scale, mean, inv_std, N, C, S);"},
    {"batch_norm_apply", "batch_norm_apply", "float *y, const float *x, const float *scale, const float *bias, const float *mean, const float *inv_std, int64_t C, int64_t S",
     "y[i] = ck_k_batch_norm_apply(i, x, scale, bias, mean, inv_std, C, S);"},
    {"sgd", "sgd", "float *p, const float *g, float *buf, float lr, float mu, float wd", "ck_k_sgd(i, p, g, buf, lr, mu, wd);"},
    {"adamw", "adamw", "float *p, const float *g, float *m, float *v, float lr, float b1, float b2, float eps, float wd, float bc1, float bc2",
     "ck_k_adamw(i, p, g, m, v, lr, b1, b2, eps, wd, bc1, bc2);"},
    {"conv_grad_input", "col2im", "float *dx, const float *col, int nsp, ck_dims in_sp, ck_dims out_sp, ck_dims k, ck_dims st, ck_dims pb, ck_dims dl",
     "dx[i] = ck_k_col2im(i, col, nsp, in_sp.v, out_sp.v, k.v, st.v, pb.v, dl.v);"},
    {"conv_grad_weight", "im2col", NULL, NULL},
    {"pool_grad", "pool_grad", "int kind, float *dx, const float *dy, const float *x, int nsp, ck_dims in_sp, ck_dims out_sp, ck_dims k, ck_dims st, "
     "ck_dims pb, ck_dims pe, ck_dims dl, int cip",
     "dx[i] = ck_k_pool_grad(i, kind, dy, x, nsp, in_sp.v, out_sp.v, k.v, st.v, pb.v, pe.v, dl.v, cip);"},
    {"gather_grad", "gather_grad", "float *dx, const float *dy, const void *idx, int idx_i64, int64_t len, int64_t inner, int64_t n_idx",
     "ck_k_gather_grad(i / inner, i % inner, i % inner + 1, dx, dy, idx, idx_i64, len, inner, n_idx);"},
    {"slice_grad", "slice_grad", "int esz, void *dx, const void *dy, int rank, ck_dims dims, ck_dims strides, int64_t base",
     "ck_k_copy_elem(dx, ck_k_strided_src(i, rank, dims.v, strides.v, base), dy, i, esz);"},
};
#undef D

enum { N_WRAPPERS = (int)(sizeof wrappers / sizeof wrappers[0]) };

/* Does the model's C call ckrt_ENTRY(c, ...)? */
static bool calls(const char *model_c, const char *entry) {
    char pat[64];
    snprintf(pat, sizeof pat, "ckrt_%s(c,", entry);
    return strstr(model_c, pat) != NULL;
}

/* Entry points the CUDA backend runs without a kernel of kernels.cu (cuBLAS, copies, reads). */
static const char *const no_kernel_entries[] = {"matmul", "check_finite", "offload", "reload", "grad_allreduce_wait"};

/* Is ckrt_<entry> one the CUDA backend implements (runtime/ckrt_device.h's list)? */
static bool cuda_knows(const char *entry, size_t len) {
    for (int i = 0; i < N_WRAPPERS; i++)
        if (strlen(wrappers[i].entry) == len && strncmp(wrappers[i].entry, entry, len) == 0) return true;
    for (size_t i = 0; i < sizeof no_kernel_entries / sizeof no_kernel_entries[0]; i++)
        if (strlen(no_kernel_entries[i]) == len && strncmp(no_kernel_entries[i], entry, len) == 0) return true;
    return false;
}

/* A header's text with its #include "ckrt_kernels*.h" lines turned into comments: kernels.cu
 * holds every header it needs, in order, and must compile alone. */
static void put_header(FILE *f, const char *name, const char *text) {
    fprintf(f, "\n/* ================================================================ runtime/%s */\n", name);
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > 18 && strncmp(p, "#include \"ckrt_ker", 18) == 0) fprintf(f, "/* %.*s: above */", (int)len, p);
        else fwrite(p, 1, len, f);
        fputc('\n', f);
        p += len + (nl != NULL);
    }
}

/* The emulation's thunks: ck_emu_NAME unpacks cuLaunchKernel's argument array and calls the
 * wrapper; ck_emu_NAME_sizes gives each argument's size (a stand-in driver copies the arguments
 * when the launch is enqueued, as the real one does). */
static void put_thunk(FILE *f, const ck_wrapper *w) {
    char types[32][96];
    int nt = 0;
    for (const char *p = w->params; *p && nt < 32;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && p[len - 1] == ' ') len--;
        size_t nm = len; /* the parameter's name: the trailing identifier */
        while (nm > 0 && (p[nm - 1] == '_' || (p[nm - 1] >= 'a' && p[nm - 1] <= 'z') || (p[nm - 1] >= 'A' && p[nm - 1] <= 'Z') || (p[nm - 1] >= '0' && p[nm - 1] <= '9')))
            nm--;
        while (nm && p[nm - 1] == ' ') nm--;
        snprintf(types[nt++], sizeof types[0], "%.*s", (int)nm, p);
        if (!end) break;
        p = end + 1;
        while (*p == ' ') p++;
    }
    fprintf(f, "extern \"C\" void ck_emu_%s(void **a) {\n    ck_g_%s(*(int64_t *)a[0]", w->name, w->name);
    for (int k = 0; k < nt; k++) fprintf(f, ", *(%s *)a[%d]", types[k], k + 1);
    fprintf(f, ");\n}\nextern \"C\" int ck_emu_%s_sizes(size_t *s) {\n    s[0] = sizeof(int64_t);\n", w->name);
    for (int k = 0; k < nt; k++) fprintf(f, "    s[%d] = sizeof(%s);\n", k + 1, types[k]);
    fprintf(f, "    return %d;\n}\n", nt + 1);
}

ck_status ck_codegen_kernels_cu(FILE *f, const char *program, const char *model_c) {
    fprintf(f, "/* Generated by ckptc %s: the CUDA kernels of %s. Do not edit.\n *\n"
               " * The trainer compiles this file with NVRTC at start-up for its GPU (sm_XY from the device's\n"
               " * compute capability) and caches the result keyed by its hash, the architecture and the NVRTC\n"
               " * version. The kernel bodies are libckrt's (runtime/ckrt_kernels*.h, copied below): the CPU\n"
               " * backend runs the same code. Each ck_g_* wrapper runs one grid-stride loop over n work items.\n"
               " */\n", CK_VERSION, program);
    fprintf(f, "#if defined(CK_EMULATE)\n#include \"cuda_emu_shim.h\" /* tests/: the CPU emulation */\n#else\n"
               "typedef signed char int8_t;\ntypedef short int16_t;\ntypedef int int32_t;\ntypedef long long int64_t;\n"
               "typedef unsigned char uint8_t;\ntypedef unsigned short uint16_t;\ntypedef unsigned int uint32_t;\n"
               "typedef unsigned long long uint64_t;\n#define INT64_MAX 9223372036854775807LL\n#define INT64_MIN (-INT64_MAX - 1)\n"
               "#ifndef NULL\n#define NULL 0\n#endif\n"
               "/* the headers hold every body libckrt has; a program calls some: unused ones are no warning */\n"
               "#pragma nv_diag_suppress 177\n#endif\n");
    /* a kernel entry point the CUDA backend lacks would run on the CPU against device memory: the
     * program must not start on a GPU (NVRTC stops at the #error and the trainer says why) */
    for (const char *p = model_c; (p = strstr(p, "ckrt_")); p++) {
        const char *q = p + 5;
        size_t len = 0;
        while ((q[len] >= 'a' && q[len] <= 'z') || (q[len] >= '0' && q[len] <= '9') || q[len] == '_') len++;
        if (p > model_c && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'))) continue;
        if (strncmp(q + len, "(c,", 3) == 0 && !cuda_knows(q, len))
            fprintf(f, "#error \"ckptc: ckrt_%.*s has no CUDA implementation yet; run this program with --device cpu\"\n", (int)len, q);
    }
    for (int i = 0; i < ck_kernel_header_count; i++) put_header(f, ck_kernel_header_names[i], ck_kernel_header_texts[i]);
    fprintf(f, "\n/* ================================================================ wrappers */\n");
    for (int i = 0; i < N_WRAPPERS; i++) {
        const ck_wrapper *w = &wrappers[i];
        if (!w->params) continue; /* a reuse: emitted with its definition */
        bool need = false;
        for (int j = 0; j < N_WRAPPERS && !need; j++)
            if (strcmp(wrappers[j].name, w->name) == 0 && calls(model_c, wrappers[j].entry)) need = true;
        if (!need) continue;
        fprintf(f, "\n/* for ckrt_%s */\nextern \"C\" __global__ void __launch_bounds__(CK_G_BLOCK) ck_g_%s(int64_t n, %s) {\n"
                   "    CK_G_LOOP(i, n) {\n        ", w->entry, w->name, w->params);
        for (const char *p = w->body; *p; p++) {
            fputc(*p, f);
            if (*p == '\n') fputs("        ", f);
        }
        fprintf(f, "\n    }\n}\n#if defined(CK_EMULATE)\n");
        put_thunk(f, w);
        fprintf(f, "#endif\n");
    }
    return ferror(f) ? CK_ERR_IO : CK_OK;
}
