/* cuda_streams.c — the CUDA backend's stream ordering in one scene the samples do not reach: a
 * kernel on the communication stream reading bytes a reload (on the copy stream) is still
 * bringing in. Run against tests/fake_cuda.c (cuda_fake_test.py), whose streams run only when
 * something waits for them: without the communication stream waiting for the reload, its kernel
 * reads device garbage.
 *
 *   cuda_streams KERNELS_CU      (a kernels.cu holding the copy_f32 wrapper: a data-parallel program's)
 * Exit 0 when the copy is right, 1 (naming the first wrong element) when not, 2 on setup errors.
 */
#include "ckrt.h"
#include "ckrt_device.h"

#include <stdio.h>
#include <string.h>

enum { N = 256, ARENA = 1 << 16, OUT = 8192 };

int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: cuda_streams KERNELS_CU\n"), 2;
    ckrt_ctx c;
    memset(&c, 0, sizeof c);
    const ckrt_backend *be = NULL;
    ckrt_cuda_options o = {.kernels_cu = argv[1]};
    void *pool = NULL;
    if (ckrt_cuda_open(&c, &o, &be) || (c.be = be, be->arena_alloc(&c, ARENA, &c.arena)) || be->host_alloc(&c, N * 4, &pool)) {
        fprintf(stderr, "cuda_streams: %s\n", c.msg);
        return 2;
    }
    c.arena_bytes = ARENA;
    float *src = pool, *reloaded = (float *)(void *)c.arena, *out = (float *)(void *)(c.arena + OUT), got[N];
    for (int i = 0; i < N; i++) src[i] = (float)(i + 1);
    int rc = ckrt_arena_fill(&c, 0, ARENA, 0);
    if (!rc) rc = be->copy_to_device(&c, reloaded, src, N * 4, CKRT_STREAM_COPY); /* a reload: a prefetch */
    if (!rc) rc = be->set_stream(&c, CKRT_STREAM_COMM);
    if (!rc) rc = be->dev->copy_f32(&c, out, reloaded, N); /* the communication stream reads it */
    if (!rc) rc = be->set_stream(&c, CKRT_STREAM_COMPUTE);
    if (!rc) rc = be->synchronize(&c);
    if (!rc) rc = ckrt_arena_read(&c, OUT, got, N * 4);
    if (rc) {
        fprintf(stderr, "cuda_streams: %s\n", c.msg);
        return 2;
    }
    for (int i = 0; i < N; i++)
        if (got[i] != (float)(i + 1)) {
            printf("cuda_streams: element %d read %g, expected %d: the communication stream ran before the reload\n", i, (double)got[i],
                   i + 1);
            return 1;
        }
    printf("cuda_streams: a communication-stream kernel read a pending reload after it landed (%d floats)\n", N);
    be->host_free(&c, pool);
    be->arena_free(&c, c.arena);
    ckrt_cuda_close(&c);
    return 0;
}
