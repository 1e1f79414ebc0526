/* emit_pending_train.c — TEMPORARY: emitters of the internal training ops (ops.def's ckptc.*
 * rows) whose kernels are being written. Each returns a clear "not supported yet" so the rest of
 * the compiler links. Delete a line when its emitter lands; delete the file when empty. */
#include "emit.h"

#define PENDING(fam) \
    ck_status ck_emit_##fam(ck_emit *e, const ck_node *n) { return ck_emit_unsupported(e, n, "no kernel yet"); }
PENDING(layer_norm_grad)
PENDING(batch_norm_grad)
PENDING(conv_grad_input)
PENDING(conv_grad_weight)
PENDING(pool_grad)
PENDING(gather_grad)
PENDING(slice_grad)
PENDING(batch_norm_apply)
