/* fuzz_opts.h — the load options every fuzzing input runs with, shared by the libFuzzer harness
 * (fuzz_load.c) and the plain regression runner (tests/fuzz_regress.c) so a saved input
 * replays exactly as it was found.
 *
 * Small limits keep each run fast and its memory bounded. In dims mode (fuzz_load_dims) the
 * first two bytes are a header, not model bytes: byte 0 is a mask of which common dim names to
 * bind, byte 1 a signed value for them (zero and negative values included: the loader must
 * handle zero-sized inputs and refuse negative ones itself).
 */
#ifndef CK_FUZZ_OPTS_H
#define CK_FUZZ_OPTS_H

#include "ck_frontend.h"

#define CK_FUZZ_NAMES 8

/* Fills o (and b, the bindings it points to); consumes the header in dims mode. */
static inline void ck_fuzz_options(const uint8_t **data, size_t *size, bool dims, ck_load_options *o,
                                   ck_dim_binding b[CK_FUZZ_NAMES]) {
    static const char *names[CK_FUZZ_NAMES] = {"batch", "seq", "N", "M", "T", "B", "sequence", "dim_0"};
    *o = (ck_load_options){.max_file_bytes = 1 << 20, .max_nodes = 5000, .fold_max_elems = 1 << 16};
    if (!dims || *size < 2) return;
    int8_t value = (int8_t)(*data)[1];
    for (int i = 0; i < CK_FUZZ_NAMES; i++)
        if ((*data)[0] >> i & 1) b[o->n_dims++] = (ck_dim_binding){names[i], value};
    o->dims = b;
    *data += 2, *size -= 2;
}

#endif
