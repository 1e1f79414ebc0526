/* conv_sgemm.c — OpenBLAS's sgemm vs oneDNN's (dnnl_sgemm) on the per-image products of ResNet-18's
 * convolutions (64x64 input), one thread each, oneDNN pinned to AVX2 as libckrt pins it: the
 * figure behind runtime/ckrt_dnnl.h's choice. Forward: y (M, P) = w (M, K) col (K, P); input
 * gradient: col (K, P) = w^T dy. Best of 5 rounds of REPS products per shape; a shared machine
 * makes single figures noisy, the ratios less so.
 *
 *     cc -O2 bench/conv_sgemm.c -o conv_sgemm -I/usr/include/x86_64-linux-gnu/openblas-pthread \
 *        -ldnnl -lgomp -lopenblas && ./conv_sgemm [REPS]
 */
#include <cblas.h>
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void omp_set_num_threads(int n);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 100;
    dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
    /* (M out channels, P output positions, K = in channels * taps): stem, layer1..4 (3x3), 1x1 down */
    static const int shapes[][3] = {{64, 1024, 147}, {64, 256, 576},  {128, 64, 576},   {128, 64, 1152}, {256, 16, 1152},
                                    {256, 16, 2304}, {512, 4, 2304},  {512, 4, 4608},   {128, 64, 64}};
    printf("| M | P | K | fwd OpenBLAS us | fwd oneDNN us | ratio | dgrad OpenBLAS us | dgrad oneDNN us | ratio |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], P = shapes[s][1], K = shapes[s][2];
        float *w = malloc(sizeof(float) * M * K), *col = malloc(sizeof(float) * K * P), *y = malloc(sizeof(float) * M * P);
        for (long i = 0; i < (long)M * K; i++) w[i] = (float)(i % 7) * 0.1f;
        for (long i = 0; i < (long)K * P; i++) col[i] = (float)(i % 5) * 0.1f;
        for (long i = 0; i < (long)M * P; i++) y[i] = (float)(i % 3) * 0.1f;
        double best[4] = {1e9, 1e9, 1e9, 1e9};
        for (int r = 0; r < 5; r++) {
            double t[4];
            t[0] = now();
            for (int i = 0; i < reps; i++) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, P, K, 1, w, K, col, P, 0, y, P);
            t[1] = now();
            for (int i = 0; i < reps; i++) dnnl_sgemm('N', 'N', M, P, K, 1, w, K, col, P, 0, y, P);
            t[2] = now();
            for (int i = 0; i < reps; i++) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, P, M, 1, w, K, y, P, 0, col, P);
            t[3] = now();
            for (int i = 0; i < reps; i++) dnnl_sgemm('T', 'N', K, P, M, 1, w, K, y, P, 0, col, P);
            double end = now();
            for (int k = 0; k < 4; k++) {
                double d = ((k < 3 ? t[k + 1] : end) - t[k]) / reps;
                if (d < best[k]) best[k] = d;
            }
        }
        printf("| %d | %d | %d | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n", M, P, K, best[0] * 1e6, best[1] * 1e6, best[0] / best[1],
               best[2] * 1e6, best[3] * 1e6, best[2] / best[3]);
        free(w), free(col), free(y);
    }
    return 0;
}
