/* emit_pending_b.c — TEMPORARY: families whose emitters are being written. Each returns a clear
 * "not supported yet" so the rest of the compiler links and runs. Delete a function here when
 * its real emitter lands in emit_*.c; delete the file when it is empty. */
#include "emit.h"

#define PENDING(fam) \
    ck_status ck_emit_##fam(ck_emit *e, const ck_node *n) { return ck_emit_unsupported(e, n, "no kernel yet"); }
PENDING(matmul)
PENDING(conv)
PENDING(pool)
PENDING(transpose)
PENDING(concat)
PENDING(split)
PENDING(slice)
PENDING(gather)
PENDING(expand)
PENDING(trilu)
PENDING(constant_of_shape)
PENDING(range)
