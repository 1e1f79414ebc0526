/* emit_pending_a.c — TEMPORARY: families whose emitters are being written. Each returns a clear
 * "not supported yet" so the rest of the compiler links and runs. Delete a function here when
 * its real emitter lands in emit_*.c; delete the file when it is empty. */
#include "emit.h"

#define PENDING(fam) \
    ck_status ck_emit_##fam(ck_emit *e, const ck_node *n) { return ck_emit_unsupported(e, n, "no kernel yet"); }
PENDING(where)
PENDING(clip)
PENDING(cast)
PENDING(softmax)
PENDING(layer_norm)
PENDING(batch_norm)
PENDING(dropout)
PENDING(reduce)
PENDING(global_pool)
