/* bench/sgemm.c — single-threaded sgemm rate on given shapes, OpenBLAS's (PyTorch's CPU GEMM
 * here) or oneDNN's (ckptc's: runtime/ckrt_dnnl.h), the yardsticks for the benchmark's
 * "GEMM-bound step" figures (bench/run.py builds and runs it).
 *
 *     cc -O2 bench/sgemm.c -o sgemm -lopenblas && ./sgemm NN|NT|TN M N K [SECONDS]
 *     cc -O2 -DWITH_DNNL bench/sgemm.c -o sgemm -lopenblas -ldnnl -lgomp && ./sgemm NN M N K 1 onednn
 *
 * C (M x N) = op(A) op(B), op(A) M x K, op(B) K x N, row-major as ckptc calls it. Repeats for
 * about SECONDS (default 1) after one warm-up call and prints
 * `sgemm TRANS M N K: GFLOPS median p90 (REPS reps)` with 2 M N K flops per call.
 */
#include <cblas.h>
#ifdef WITH_DNNL
#include <dnnl.h>
void omp_set_num_threads(int);
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int use_dnnl;

static void gemm(int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb, float *c) {
#ifdef WITH_DNNL
    if (use_dnnl) {
        dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f,
                c, n);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 5 || strlen(argv[1]) != 2) {
        fprintf(stderr, "usage: sgemm NN|NT|TN|TT M N K [SECONDS] [openblas|onednn]\n");
        return 2;
    }
    int ta = argv[1][0] == 'T', tb = argv[1][1] == 'T';
    int m = atoi(argv[2]), n = atoi(argv[3]), k = atoi(argv[4]);
    double secs = argc > 5 ? atof(argv[5]) : 1.0;
    if (m <= 0 || n <= 0 || k <= 0) return 2;
    use_dnnl = argc > 6 && strcmp(argv[6], "onednn") == 0;
#ifndef WITH_DNNL
    if (use_dnnl) {
        fprintf(stderr, "sgemm: built without oneDNN (-DWITH_DNNL)\n");
        return 2;
    }
#else
    omp_set_num_threads(1);
#endif
    openblas_set_num_threads(1);
    float *a = malloc(sizeof(float) * (size_t)m * (size_t)k), *b = malloc(sizeof(float) * (size_t)k * (size_t)n);
    float *c = malloc(sizeof(float) * (size_t)m * (size_t)n);
    if (!a || !b || !c) return 1;
    for (size_t i = 0; i < (size_t)m * (size_t)k; i++) a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < (size_t)k * (size_t)n; i++) b[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
    int lda = ta ? m : k, ldb = tb ? k : n;
    double *t = malloc(sizeof(double) * 100000);
    int reps = 0;
    gemm(ta, tb, m, n, k, a, lda, b, ldb, c);
    for (double start = now(); reps < 100000 && (reps < 5 || now() - start < secs); reps++) {
        double t0 = now();
        gemm(ta, tb, m, n, k, a, lda, b, ldb, c);
        t[reps] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    double flops = 2.0 * m * n * k;
    /* the median time gives the median rate; the 90th-percentile time the p90 (slow) rate */
    printf("sgemm %s %d %d %d: %.2f %.2f (%d reps)\n", argv[1], m, n, k, flops / t[reps / 2] / 1e9,
           flops / t[(int)(reps * 0.9)] / 1e9, reps);
    free(a), free(b), free(c), free(t);
    return 0;
}
