/* emit_frame_ops.c — the families that emit no kernel call: views (Reshape, Flatten,
 * Squeeze, Unsqueeze, Identity, disabled Dropout share their input's bytes and are skipped by the
 * frame), Shape (always folded at load time) and family `lowered`: ops that passes/lower.c
 * rewrites into others (LSTM, GRU and RNN unrolled; Einsum; ReduceL1/L2/SumSquare). */
#include "emit.h"

ck_status ck_emit_view(ck_emit *e, const ck_node *n) {
    (void)e, (void)n;
    return CK_OK; /* never called: the frame skips views */
}

ck_status ck_emit_shape(ck_emit *e, const ck_node *n) {
    return ck_emit_unsupported(e, n, "Shape is folded at load time; reaching codegen is a bug");
}

ck_status ck_emit_lowered(ck_emit *e, const ck_node *n) {
    return ck_emit_unsupported(e, n, "%s is rewritten by passes/lower.c; reaching codegen is a bug", ck_ops[n->op].onnx_name);
}
