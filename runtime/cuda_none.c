/* cuda_none.c — the CUDA backend's entry points in a libckrt built without the CUDA toolkit:
 * `--device cuda` fails with a message saying so. */
#include "ckrt.h"

#include <string.h>

int ckrt_cuda_open(ckrt_ctx *c, const ckrt_cuda_options *o, const ckrt_backend **out) {
    (void)o;
    *out = NULL;
    return ckrt_fail(c, CKRT_ERR_USAGE, "this program was built without CUDA support (libckrt was "
                     "configured without the CUDA toolkit in /usr/local/cuda)");
}
void ckrt_cuda_close(ckrt_ctx *c) { (void)c; }
const char *ckrt_cuda_describe(void) { return "no CUDA support built in"; }
int ckrt_cuda_stats(ckrt_ctx *c, ckrt_device_stats *out) {
    (void)c;
    memset(out, 0, sizeof *out);
    return CKRT_OK;
}
