/* emit_comm.c — the emitters of ckptc.GradAllReduce / GradAllReduceWait (--data-parallel,
 * passes/data_parallel.c): a ckrt_grad_allreduce call per bucket (runtime/dp.c) on its planned
 * staging, with the bucket's gradients as a literal table of arena offsets and element counts in
 * the order the backward finished them, and a ckrt_grad_allreduce_wait call where the averaged
 * gradients are first needed. */
#include "emit.h"

ck_status ck_emit_grad_allreduce(ck_emit *e, const ck_node *n) {
    static const ck_dtype f32_only[] = {CK_F32, CK_UNDEF};
    for (int k = 0; k < n->n_in; k++)
        if (ck_emit_want_dtype(e, n, n->in[k], "gradient", f32_only)) return CK_ERR_UNSUPPORTED;
    int64_t w = ck_attr_int(n, "staging_floats", 0);
    ck_emit_printf(e, "    /* staging %lld bytes, live until its wait: a bucket of %lld floats, then the slices the other ranks send */\n",
                   (long long)(2 * w * 4), (long long)w);
    ck_emit_call(e, "grad_allreduce");
    ck_emit_printf(e, ", %lld, %lld, (float *)(A + %lld), %lld, %d, (const ckrt_grad_slot[]){",
                   (long long)ck_attr_int(n, "bucket", 0), (long long)ck_attr_int(n, "buckets", 1), (long long)n->ws_offset,
                   (long long)w, n->n_in);
    for (int k = 0; k < n->n_in; k++)
        ck_emit_printf(e, "%s{%lld, %lld}", k == 0 ? "" : k % 4 ? ", " : ",\n        ", (long long)n->in[k]->offset,
                       (long long)ck_value_numel(n->in[k]));
    ck_emit_printf(e, "}));\n");
    return CK_OK;
}

ck_status ck_emit_grad_allreduce_wait(ck_emit *e, const ck_node *n) {
    ck_emit_call(e, "grad_allreduce_wait");
    ck_emit_printf(e, ", %lld));\n", (long long)ck_attr_int(n, "bucket", 0));
    return CK_OK;
}
