/* emit_pending.c — TEMPORARY: families whose emitters are being written. Each returns a clear
 * "not supported yet" so the rest of the compiler links and runs. Delete a function here when
 * its real emitter lands in emit_*.c. */
#include "emit.h"

#define PENDING(fam) \
    ck_status ck_emit_##fam(ck_emit *e, const ck_node *n) { return ck_emit_unsupported(e, n, "no kernel yet"); }
PENDING(matmul)
PENDING(conv)
PENDING(where)
PENDING(clip)
PENDING(cast)
PENDING(softmax)
PENDING(layer_norm)
PENDING(batch_norm)
PENDING(dropout)
PENDING(pool)
PENDING(global_pool)
PENDING(reduce)
PENDING(transpose)
PENDING(concat)
PENDING(split)
PENDING(slice)
PENDING(gather)
PENDING(expand)
PENDING(trilu)
PENDING(constant_of_shape)
PENDING(range)

ck_status ck_emit_view(ck_emit *e, const ck_node *n) {
    (void)e, (void)n;
    return CK_OK; /* never called: views are skipped by the frame */
}

ck_status ck_emit_shape(ck_emit *e, const ck_node *n) {
    return ck_emit_unsupported(e, n, "Shape is folded at load time; reaching codegen is a bug");
}
