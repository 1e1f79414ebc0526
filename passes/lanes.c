/* lanes.c — convolution lanes (runtime/ckrt_conv_batch.h), granted where the plan has room.
 *
 * A convolution or its input gradient runs on the CPU one batch of images at a time through one
 * column matrix; with two threads, each multiplies half of a matrix that the other core partly
 * wrote, which on a 2-core host made ResNet-18's 8x8 and 4x4 stages 1.2x faster on two threads
 * where independent images go 1.8x. With lanes (CK_LANES_ATTR = CK_CONV_LANES) the kernel runs
 * that many batches at once, each in its own column matrix: the node's workspace grows by that
 * factor. That is only free where the workspace is not what sets the peak, so this pass, on the
 * plan of every try (search.c's plan_passes), grants lanes to every convolution they fit
 * (ck_conv_lanes_fit), plans again, and takes them back from each node whose workspace now
 * reaches above the old peak, until the peak is no higher than the old one (after a few rounds,
 * or when the raised peak is no node's workspace: from all). The bits do not change (each image
 * is computed as without lanes); the peak does not rise (placement may even lower it a little).
 */
#include "ck_passes.h"
#include "ckrt_conv_batch.h"

#include <string.h>

#define LANES_ROUNDS 8 /* plans at most, before every lane is taken back */

/* Whether lanes fit n (Conv or ConvGradInput with a column matrix, ckrt_conv_batch.h). */
static bool lanes_fit(const ck_node *n) {
    if (n->ws_bytes <= 0 || (n->op != CK_OP_CONV && n->op != CK_OP_CONV_GRAD_INPUT)) return false;
    bool grad = n->op == CK_OP_CONV_GRAD_INPUT;
    const ck_value *w = n->in[1], *o = grad ? n->in[0] : n->out[0]; /* o: the output positions */
    int64_t group = ck_attr_int(n, "group", 1), R = w->dims[1], P = 1;
    if (group < 1 || o->rank < 3 || w->rank != o->rank) return false;
    for (int i = 2; i < w->rank; i++) R *= w->dims[i], P *= o->dims[i];
    return ck_conv_lanes_fit(grad, o->rank - 2, o->dims[0], group, w->dims[0] / group, R, P);
}

/* n's lanes attribute (set earlier by this pass), or NULL. */
static ck_attr *lanes_attr(ck_node *n) {
    for (int i = 0; i < n->n_attr; i++)
        if (strcmp(n->attr[i].name, CK_LANES_ATTR) == 0) return &n->attr[i];
    return NULL;
}

ck_status ck_pass_conv_lanes(ck_graph *g, const ck_options *o, ck_diag *d) {
    if (!g->plan.done) return CK_OK;
    int64_t peak = g->plan.arena_bytes;
    int fit = 0, kept = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ck_node *n = g->nodes[i];
        if (!lanes_fit(n)) continue;
        ck_attr *a = lanes_attr(n);
        if (a) a->i = CK_CONV_LANES;
        else ck_node_add_attr(g, n, (ck_attr){.name = CK_LANES_ATTR, .kind = CK_ATTR_INT, .i = CK_CONV_LANES});
        fit++;
    }
    if (!fit) return CK_OK;
    for (int round = 0;; round++) {
        ck_status st = ck_pass_plan(g, o, d);
        if (st) return st;
        kept = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            ck_attr *a = lanes_attr(g->nodes[i]);
            kept += a && a->i > 1;
        }
        if (g->plan.arena_bytes <= peak || !kept) break;
        int taken = 0; /* from the nodes whose workspace reaches above the old peak */
        for (int i = 0; i < g->n_nodes; i++) {
            ck_node *n = g->nodes[i];
            ck_attr *a = lanes_attr(n);
            if (a && a->i > 1 && n->ws_offset + n->ws_bytes > peak) a->i = 1, taken++;
        }
        if (!taken || round + 1 >= LANES_ROUNDS) /* the raise is elsewhere (placement), or it goes on: all */
            for (int i = 0; i < g->n_nodes; i++) {
                ck_attr *a = lanes_attr(g->nodes[i]);
                if (a) a->i = 1;
            }
    }
    return CK_OK;
}

void ck_conv_lanes_note(const ck_graph *g, ck_diag *notes) {
    int fit = 0, kept = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (!lanes_fit(n)) continue;
        fit++;
        kept += ck_attr_int(n, CK_LANES_ATTR, 1) > 1;
    }
    if (notes && fit)
        ck_diag_add(notes, "ckptc: lanes: %d of %d convolutions (forward or input gradient) run %d batches of images at "
                    "once on the CPU, in workspace the plan had free (the planned peak is no higher for it)",
                    kept, fit, CK_CONV_LANES);
}
