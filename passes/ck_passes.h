/* ck_passes.h — the passes that turn a loaded graph into a scheduled, planned one.
 *
 * Each pass is `ck_status ck_pass_NAME(ck_graph *g, const ck_options *o, ck_diag *d)`, runs
 * after the previous one, and leaves a graph the verifier accepts. The pipeline is
 * ck_compile() in cli/ckptc.c: one straight-line function a reader sees whole.
 *
 * Passes so far: plan (liveness over the scheduled order + static offsets in one arena).
 * The training passes (loss, autodiff, optimizer) and checkpoint/offload passes come next.
 */
#ifndef CK_PASSES_H
#define CK_PASSES_H

#include "ck_ir.h"

#define CK_ALIGN 64

typedef struct ck_options {
    bool infer;             /* --infer: forward only */
    bool disable_dropout;   /* --disable-dropout: Dropout is the identity */
} ck_options;

/* Memory plan: static region (params, buffers, constants, inputs) then a dynamic region where
 * activations and kernel workspace get offsets by liveness, greedy by size with best fit.
 * Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity) share their input's bytes.
 * Fills v->offset / v->alias for every value, n->ws_offset for nodes with workspace, and
 * g->plan. */
ck_status ck_pass_plan(ck_graph *g, const ck_options *o, ck_diag *d);

/* Is this node a view of its first input (no kernel, same bytes)? */
bool ck_node_is_view(const ck_node *n, const ck_options *o);

#endif
