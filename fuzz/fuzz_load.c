/* fuzz_load.c — libFuzzer harness: arbitrary bytes -> the whole frontend.
 *
 * Each input goes through ck_frontend_load_buffer exactly as a model file would: protobuf
 * parsing, conversion, constant folding, shape inference and the verifier, under the small
 * limits of fuzz_opts.h. The loader may refuse anything, but only by returning a status with a
 * message; a crash, a leak, a hang or a sanitizer report is a bug. Built with -DCK_FUZZ_DIMS it
 * is fuzz_load_dims, whose inputs start with a two-byte header binding symbolic dims.
 *
 *   CC=clang cmake -B build-fuzz -S . -DCK_FUZZ=ON && cmake --build build-fuzz --target fuzz_load
 *   build-fuzz/fuzz/fuzz_load -dict=fuzz/onnx.dict fuzz/corpus
 */
#include "fuzz_opts.h"

#ifdef CK_FUZZ_DIMS
#define CK_DIMS_MODE true
#else
#define CK_DIMS_MODE false
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ck_load_options o;
    ck_dim_binding b[CK_FUZZ_NAMES];
    ck_fuzz_options(&data, &size, CK_DIMS_MODE, &o, b);
    ck_graph *g = NULL;
    ck_diag d = {0};
    ck_status st = ck_frontend_load_buffer(data, size, NULL, &o, &g, &d);
    /* the contract: a graph exactly on success, at least one message on failure */
    if ((st == CK_OK) != (g != NULL) || (st != CK_OK && d.n == 0)) __builtin_trap();
    ck_graph_free(g);
    ck_diag_clear(&d);
    return 0;
}
