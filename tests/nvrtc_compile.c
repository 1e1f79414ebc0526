/* nvrtc_compile.c — compiles DIR/kernels.cu files with NVRTC exactly as a trainer does at start-up
 * (ckrt_cuda_compile, runtime/cuda_driver.c), for a given architecture, with no GPU needed.
 *
 *   nvrtc_compile SM FILE...      e.g. nvrtc_compile 90 build/gpt/kernels.cu
 *
 * Prints one line per file (wrappers, cubin bytes, seconds); fails (exit 1) on a compile error
 * or on any message in NVRTC's log (a warning counts as a failure), printing the log.
 */
#include "ckrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SM FILE...\n", argv[0]);
        return 2;
    }
    int sm = atoi(argv[1]), bad = 0;
    for (int i = 2; i < argc; i++) {
        char *src = slurp(argv[i]);
        if (!src) {
            printf("%s: cannot read\n", argv[i]);
            bad++;
            continue;
        }
        int wrappers = 0;
        for (const char *p = src; (p = strstr(p, "__global__ void")); p++) wrappers++;
        ckrt_ctx c;
        memset(&c, 0, sizeof c);
        char *log = NULL;
        void *cubin = NULL;
        size_t bytes = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = ckrt_cuda_compile(&c, src, argv[i], sm, &log, &cubin, &bytes);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        int warned = log && log[0];
        printf("%s sm_%d: %d kernels, %zu cubin bytes, %.1f s: %s\n", argv[i], sm, wrappers, bytes, s,
               rc ? "ERROR" : warned ? "WARNINGS" : "ok");
        if (rc) printf("%s\n", c.msg);
        else if (warned) printf("%s\n", log);
        bad += rc || warned;
        free(log);
        free(cubin);
        free(src);
    }
    return bad ? 1 : 0;
}
