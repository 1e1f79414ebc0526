/* trainable.c — the warning ckptc prints when a model does not say which initializers to train.
 *
 * ONNX does not mark parameters: PyTorch exports buffers (attention masks, RoPE cos/sin tables)
 * as initializers too, and without the model's CK_TRAINABLE_KEY entry ckptc trains every float
 * initializer that reaches the loss (the default rule). Training a mask holding -inf or a RoPE
 * table is wrong, silently. So a training compile of a model without the entry always warns, in
 * one line: the rule cannot be proved right from the graph, and a heuristic that stayed quiet
 * when it found nothing would be silent exactly where it misses. The line says how many
 * initializers will be trained and names those that look like buffers.
 *
 * "Looks like a buffer" is structural (no weight byte is read: --plan-only must not touch them):
 * a trained initializer looks like a parameter when some forward use of it, seen through
 * Identity/Cast/Reshape/Transpose/(Un)Squeeze/Flatten/Expand, is a weight slot — any input of
 * MatMul/Gemm, Conv's weight or bias, a norm's scale or bias, Gather's data (an embedding), also
 * through Slice/Split/Concat (the gate-reordered weights of an exported LSTM) — or,
 * for a tensor with at most one dimension above 1 (a bias, a per-channel or RMSNorm scale, a class
 * token), an input of Add/Sub/Mul/Div/Concat. Every other one looks like a buffer: a (T,T) mask
 * added to the scores, a (T,D) cos/sin table multiplied in, a table only ever sliced. A learned
 * positional table added to activations looks like a buffer too (a false alarm the line hedges:
 * "look like buffers").
 */
#include "ck_passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool pass_through(ck_op op) {
    return op == CK_OP_IDENTITY || op == CK_OP_CAST || op == CK_OP_RESHAPE || op == CK_OP_TRANSPOSE ||
           op == CK_OP_UNSQUEEZE || op == CK_OP_SQUEEZE || op == CK_OP_FLATTEN || op == CK_OP_EXPAND;
}

/* Input k of n is where a layer reads its weight. */
static bool weight_slot(const ck_node *n, int k) {
    switch (n->op) {
    case CK_OP_GEMM: case CK_OP_MATMUL: return true;
    case CK_OP_CONV: return k >= 1;
    case CK_OP_LAYER_NORM: case CK_OP_BATCH_NORM: return k == 1 || k == 2;
    case CK_OP_GATHER: return k == 0;
    default: return false;
    }
}

/* A weight assembled from pieces (PyTorch's LSTM/GRU export reorders the gates of its weights and
 * biases by Slice and Concat, and the unrolled recurrence Splits them per direction and gate): a
 * slice, a split part or a concatenated piece of a weight is a weight (of a bias, a bias). */
static void pieces_to_weight(const ck_node *n, char *strict, char *elem) {
    for (int k = 0; n->op == CK_OP_SPLIT && k < n->n_out; k++)
        if (n->out[k]) strict[n->in[0]->id] |= strict[n->out[k]->id], elem[n->in[0]->id] |= elem[n->out[k]->id];
    if (n->op == CK_OP_SLICE) strict[n->in[0]->id] |= strict[n->out[0]->id], elem[n->in[0]->id] |= elem[n->out[0]->id];
    for (int k = 0; n->op == CK_OP_CONCAT && k < n->n_in; k++)
        if (n->in[k]) strict[n->in[k]->id] |= strict[n->out[0]->id];
}

static bool elementwise_slot(const ck_node *n) {
    return n->op == CK_OP_ADD || n->op == CK_OP_SUB || n->op == CK_OP_MUL || n->op == CK_OP_DIV || n->op == CK_OP_CONCAT;
}

static bool vector_shaped(const ck_value *v) {
    int big = 0;
    for (int i = 0; i < v->rank; i++) big += v->dims[i] > 1;
    return big <= 1;
}

/* looks[k]: whether g->train_params[k] looks like a buffer (the rule above). */
static void buffer_like(const ck_graph *g, bool *looks) {
    int nid = g->next_value_id;
    char *strict = calloc((size_t)nid + 1, 1), *elem = calloc((size_t)nid + 1, 1);
    CK_ASSERT(strict && elem);
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->phase != CK_PHASE_FORWARD || n->recompute_of) continue;
        for (int k = 0; k < n->n_in; k++) {
            if (!n->in[k]) continue;
            if (weight_slot(n, k)) strict[n->in[k]->id] = 1;
            if (elementwise_slot(n)) elem[n->in[k]->id] = 1;
        }
    }
    /* last node first: a chain of pass-through ops carries its end's use back to its start */
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const ck_node *n = g->nodes[i];
        if (n->phase != CK_PHASE_FORWARD || !n->in[0] || !n->out[0]) continue;
        if (pass_through(n->op)) {
            strict[n->in[0]->id] |= strict[n->out[0]->id];
            elem[n->in[0]->id] |= elem[n->out[0]->id];
        }
        pieces_to_weight(n, strict, elem);
    }
    for (int k = 0; k < g->n_train; k++) {
        const ck_value *p = g->train_params[k];
        looks[k] = !strict[p->id] && !(elem[p->id] && vector_shaped(p));
    }
    free(strict), free(elem);
}

#define CK_WARN_NAMES 8

bool ck_trainable_warning(const ck_graph *g, char *buf, size_t n) {
    if (g->trainable_declared || g->n_train == 0) return false;
    bool *looks = calloc((size_t)g->n_train, 1);
    CK_ASSERT(looks);
    buffer_like(g, looks);
    int nl = 0;
    for (int k = 0; k < g->n_train; k++) nl += looks[k];
    size_t at = (size_t)snprintf(buf, n, "the model has no metadata_props entry '%s' saying which initializers are parameters: "
                                 "training %d float initializers; ", CK_TRAINABLE_KEY, g->n_train);
    if (nl == 0 && at < n) at += (size_t)snprintf(buf + at, n - at, "none looks like a buffer");
    for (int k = 0, shown = 0; k < g->n_train && at < n; k++) {
        if (!looks[k]) continue;
        if (shown == CK_WARN_NAMES) {
            at += (size_t)snprintf(buf + at, n - at, " and %d more", nl - shown);
            break;
        }
        at += (size_t)snprintf(buf + at, n - at, "%s'%s'", shown ? ", " : (nl == 1 ? "this one looks like a buffer: " :
                                                                           "these look like buffers: "),
                               g->train_params[k]->name);
        shown++;
    }
    if (at < n) snprintf(buf + at, n - at, " (export with python/ckptc_export.py to declare the trainable ones)");
    free(looks);
    return true;
}
