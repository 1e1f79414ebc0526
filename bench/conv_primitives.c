/* conv_primitives.c — oneDNN's own convolution primitives (forward, input gradient, weight
 * gradient) on ResNet-18's convolutions (64x64 input, batch 16), one thread: what they would
 * cost ckptc's CPU backend in place of its im2col + sgemm kernels (runtime/cpu_dense.c,
 * cpu_train_conv.c). Not part of the build or of bench/run.py: a probe whose figures are in
 * bench/results/conv-onednn-avx512-2026-12-06.md, to compare against a trainer's --profile.
 *
 *     cc -O2 bench/conv_primitives.c -o conv_primitives -ldnnl -lgomp && ./conv_primitives [plain]
 *
 * Layouts: by default oneDNN picks them (format_tag any: blocked nChw16c / OIhw16i16o on
 * AVX-512, where its direct jit kernels run); each row also times the reorders a graph held in
 * NCHW (ONNX's layout, the arena's) would need around the primitive: forward src in, weights
 * in, dst out; input gradient diff_dst in, weights in, diff_src out; weight gradient src in,
 * diff_dst in, diff_weights out. `plain` forces nchw / oihw instead (no reorders; oneDNN then
 * runs im2col + its sgemm, gemm:jit). The median of 15 runs after the primitive is created;
 * oneDNN's scratchpad is its own (library mode).
 */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void omp_set_num_threads(int n);

#define CK(x)                                                                                                                  \
    do {                                                                                                                       \
        dnnl_status_t s_ = (x);                                                                                                \
        if (s_ != dnnl_success) {                                                                                              \
            fprintf(stderr, "conv_primitives: %s failed (%d)\n", #x, (int)s_);                                                 \
            exit(1);                                                                                                           \
        }                                                                                                                      \
    } while (0)

enum { RUNS = 15 };

static dnnl_engine_t eng;
static dnnl_stream_t stream;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static dnnl_memory_t filled(const dnnl_memory_desc_t *md) {
    dnnl_memory_t m;
    void *p;
    CK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
    CK(dnnl_memory_get_data_handle(m, &p));
    size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
    for (size_t i = 0; i < n; i++) ((float *)p)[i] = (float)((i * 7) % 13) * 0.01f;
    return m;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median milliseconds of RUNS executions */
static double ms(dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args) {
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now();
        CK(dnnl_primitive_execute(p, stream, nargs, args));
        CK(dnnl_stream_wait(stream));
        t[r] = now() - t0;
    }
    qsort(t, RUNS, sizeof t[0], cmp);
    return t[RUNS / 2] * 1e3;
}

/* one reorder from -> to (0 when the layouts are the same) */
static double reorder_ms(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to) {
    if (dnnl_memory_desc_equal(from, to)) return 0.0;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t r;
    CK(dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, NULL));
    CK(dnnl_primitive_create(&r, pd));
    dnnl_memory_t a = filled(from), b = filled(to);
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    double t = ms(r, 2, args);
    dnnl_primitive_destroy(r), dnnl_primitive_desc_destroy(pd), dnnl_memory_destroy(a), dnnl_memory_destroy(b);
    return t;
}

static const dnnl_memory_desc_t *md(const_dnnl_primitive_desc_t pd, dnnl_query_t what) {
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

static const char *impl(const_dnnl_primitive_desc_t pd) {
    const char *s = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    return s;
}

int main(int argc, char **argv) {
    int plain = argc > 1 && strcmp(argv[1], "plain") == 0;
    omp_set_num_threads(1);
    CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
    /* ResNet-18 at 64x64, batch 16: in channels, input side, out channels, kernel, stride, pad, how many */
    static const int shapes[][7] = {{3, 64, 64, 7, 2, 3, 1},    {64, 16, 64, 3, 1, 1, 4},   {64, 16, 128, 3, 2, 1, 1},
                                    {128, 8, 128, 3, 1, 1, 3},  {64, 16, 128, 1, 2, 0, 1},  {128, 8, 256, 3, 2, 1, 1},
                                    {256, 4, 256, 3, 1, 1, 3},  {128, 8, 256, 1, 2, 0, 1},  {256, 4, 512, 3, 2, 1, 1},
                                    {512, 2, 512, 3, 1, 1, 3},  {256, 4, 512, 1, 2, 0, 1}};
    const int N = 16;
    double tot[5] = {0};
    printf("| conv | x | fwd ms | input grad ms | weight grad ms | reorders fwd ms | reorders grads ms | kernels |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---|\n");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int C = shapes[i][0], H = shapes[i][1], M = shapes[i][2], k = shapes[i][3], s = shapes[i][4], p = shapes[i][5];
        int count = shapes[i][6], OH = (H + 2 * p - k) / s + 1;
        dnnl_dims_t sd = {N, C, H, H}, wd = {M, C, k, k}, dd = {N, M, OH, OH}, strides = {s, s}, pad = {p, p};
        dnnl_memory_desc_t src, wei, dst, psrc, pwei, pdst;
        CK(dnnl_memory_desc_init_by_tag(&psrc, 4, sd, dnnl_f32, dnnl_nchw));
        CK(dnnl_memory_desc_init_by_tag(&pwei, 4, wd, dnnl_f32, dnnl_oihw));
        CK(dnnl_memory_desc_init_by_tag(&pdst, 4, dd, dnnl_f32, dnnl_nchw));
        CK(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, plain ? dnnl_nchw : dnnl_format_tag_any));
        CK(dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, plain ? dnnl_oihw : dnnl_format_tag_any));
        CK(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, plain ? dnnl_nchw : dnnl_format_tag_any));
        dnnl_convolution_desc_t fd, bd, wdesc;
        dnnl_primitive_desc_t fpd, bpd, wpd;
        CK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &src, &wei, NULL, &dst, strides,
                                              pad, pad));
        CK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
        CK(dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &src, &wei, &dst, strides, pad, pad));
        CK(dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd));
        CK(dnnl_convolution_backward_weights_desc_init(&wdesc, dnnl_convolution_direct, &src, &wei, NULL, &dst, strides, pad, pad));
        CK(dnnl_primitive_desc_create(&wpd, &wdesc, NULL, eng, fpd));
        dnnl_primitive_t f, b, w;
        CK(dnnl_primitive_create(&f, fpd));
        CK(dnnl_primitive_create(&b, bpd));
        CK(dnnl_primitive_create(&w, wpd));
        dnnl_memory_t S = filled(md(fpd, dnnl_query_src_md)), W = filled(md(fpd, dnnl_query_weights_md)),
                      D = filled(md(fpd, dnnl_query_dst_md)), DS = filled(md(bpd, dnnl_query_diff_src_md)),
                      BW = filled(md(bpd, dnnl_query_weights_md)), DD = filled(md(bpd, dnnl_query_diff_dst_md)),
                      WS = filled(md(wpd, dnnl_query_src_md)), WD = filled(md(wpd, dnnl_query_diff_dst_md)),
                      DW = filled(md(wpd, dnnl_query_diff_weights_md));
        dnnl_exec_arg_t fa[] = {{DNNL_ARG_SRC, S}, {DNNL_ARG_WEIGHTS, W}, {DNNL_ARG_DST, D}};
        dnnl_exec_arg_t ba[] = {{DNNL_ARG_DIFF_SRC, DS}, {DNNL_ARG_WEIGHTS, BW}, {DNNL_ARG_DIFF_DST, DD}};
        dnnl_exec_arg_t wa[] = {{DNNL_ARG_SRC, WS}, {DNNL_ARG_DIFF_WEIGHTS, DW}, {DNNL_ARG_DIFF_DST, WD}};
        double tf = ms(f, 3, fa), tb = ms(b, 3, ba), tw = ms(w, 3, wa);
        double rf = reorder_ms(&psrc, md(fpd, dnnl_query_src_md)) + reorder_ms(&pwei, md(fpd, dnnl_query_weights_md)) +
                    reorder_ms(md(fpd, dnnl_query_dst_md), &pdst);
        double rg = reorder_ms(&pdst, md(bpd, dnnl_query_diff_dst_md)) + reorder_ms(&pwei, md(bpd, dnnl_query_weights_md)) +
                    reorder_ms(md(bpd, dnnl_query_diff_src_md), &psrc) + reorder_ms(&psrc, md(wpd, dnnl_query_src_md)) +
                    reorder_ms(&pdst, md(wpd, dnnl_query_diff_dst_md)) + reorder_ms(md(wpd, dnnl_query_diff_weights_md), &pwei);
        printf("| %d->%d %dx%d k%d s%d | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %s, %s, %s |\n", C, M, H, H, k, s, count, tf, tb, tw,
               rf, rg, impl(fpd), impl(bpd), impl(wpd));
        double t[5] = {tf, tb, tw, rf, rg};
        for (int j = 0; j < 5; j++) tot[j] += t[j] * count;
        dnnl_memory_t ms_[] = {S, W, D, DS, BW, DD, WS, WD, DW};
        for (size_t j = 0; j < sizeof ms_ / sizeof ms_[0]; j++) dnnl_memory_destroy(ms_[j]);
        dnnl_primitive_destroy(f), dnnl_primitive_destroy(b), dnnl_primitive_destroy(w);
        dnnl_primitive_desc_destroy(fpd), dnnl_primitive_desc_destroy(bpd), dnnl_primitive_desc_destroy(wpd);
    }
    printf("| all 20 (%s) | | %.1f | %.1f | %.1f | %.1f | %.1f | |\n", plain ? "nchw" : "oneDNN's layouts", tot[0], tot[1], tot[2],
           tot[3], tot[4]);
    return 0;
}
