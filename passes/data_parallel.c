/* data_parallel.c — --data-parallel: the gradients are averaged over the ranks between the
 * backward and the optimizer.
 *
 * One ckptc.GradAllReduce node is scheduled after the last backward node and before the first
 * update: its inputs are every trainable parameter's gradient, in the order the backward finishes
 * them (the step of each gradient's producer), its outputs the same bytes averaged in place (the
 * planner aliases output k to input k, as it does for the optimizer's updates), and the update
 * nodes read the outputs, so the dataflow says what runs when. Its workspace is the communication
 * staging, planned in the arena like any kernel workspace (live at that one step, usually in bytes
 * the activations just freed): a bucket of staging_floats floats that the gradients are packed
 * into, then room for the slices the other ranks send. The staging is needed because the reduction
 * is deterministic (summed in rank order, runtime/dp.c), which needs each rank's copy of a slice
 * side by side; the gradients themselves are not copied elsewhere for good: they are unpacked back.
 *
 * Bucket size: --dp-bucket (default 25 MiB, PyTorch DDP's), at most the gradients' total. With
 * the update after the whole backward, one node at the end is all the CPU needs; a transport that
 * overlaps communication with the backward (NCCL on a side stream) would get one node per bucket,
 * placed right after its last gradient's producer — the readiness order computed here
 * (docs/data-parallel.md).
 */
#include "ck_passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DP_BUCKET_DEFAULT (25ll << 20)

ck_status ck_pass_data_parallel(ck_graph *g, const ck_options *o, ck_diag *d) {
    if (!o->data_parallel || !g->loss || g->n_train == 0) return CK_OK;
    int nn = g->n_nodes, ng = g->n_train;
    int *pos = malloc(sizeof(int) * (size_t)(g->next_node_id + 1)), *order = malloc(sizeof(int) * (size_t)ng);
    CK_ASSERT(pos && order);
    for (int i = 0; i < nn; i++) pos[g->nodes[i]->id] = i;
    int first_update = nn;
    for (int i = 0; i < nn; i++)
        if (g->nodes[i]->phase == CK_PHASE_UPDATE) {
            first_update = i;
            break;
        }
    /* readiness: the step of each gradient's producer (static gradients: ready from the start) */
    int64_t total = 0;
    for (int k = 0; k < ng; k++) {
        order[k] = k;
        total += ck_value_numel(g->train_grads[k]);
    }
    for (int a = 1; a < ng; a++) /* insertion sort, stable: ties keep the parameter order */
        for (int b = a; b > 0; b--) {
            const ck_value *x = g->train_grads[order[b]], *y = g->train_grads[order[b - 1]];
            int px = x->producer ? pos[x->producer->id] : -1, py = y->producer ? pos[y->producer->id] : -1;
            if (px >= py) break;
            int t = order[b];
            order[b] = order[b - 1], order[b - 1] = t;
        }
    ck_value **ins = malloc(sizeof *ins * (size_t)ng);
    CK_ASSERT(ins);
    for (int k = 0; k < ng; k++) {
        ins[k] = g->train_grads[order[k]];
        CK_ASSERT(!ins[k]->producer || pos[ins[k]->producer->id] < first_update);
    }
    int64_t bucket = (o->dp_bucket_bytes > 0 ? o->dp_bucket_bytes : DP_BUCKET_DEFAULT) / (int64_t)sizeof(float);
    int64_t w = total < bucket ? total : bucket;
    w = (w + 15) / 16 * 16; /* whole 64-byte lines */
    ck_node *n = ck_graph_add_node(g, CK_OP_GRAD_ALLREDUCE, "/data_parallel/GradAllReduce", ng, ins, ng);
    ck_node_add_attr(g, n, (ck_attr){.name = "staging_floats", .kind = CK_ATTR_INT, .i = w});
    ck_node_add_attr(g, n, (ck_attr){.name = "gradient_floats", .kind = CK_ATTR_INT, .i = total});
    n->phase = CK_PHASE_BACKWARD;
    ck_status st = ck_infer_node(n, d);
    if (st) {
        free(pos), free(order), free(ins);
        return st;
    }
    for (int k = 0; k < ng; k++) {
        char name[1100];
        snprintf(name, sizeof name, "%s.mean", ins[k]->name);
        n->out[k]->name = ck_arena_strdup(g->arena, name);
        n->out[k]->role = CK_ROLE_GRAD;
    }
    /* the update reads the averaged gradients */
    int *slot = calloc((size_t)g->next_value_id + 1, sizeof *slot); /* value id -> k + 1 */
    CK_ASSERT(slot);
    for (int k = 0; k < ng; k++) slot[ins[k]->id] = k + 1;
    for (int i = first_update; i < nn; i++) {
        ck_node *u = g->nodes[i];
        for (int j = 0; j < u->n_in; j++)
            if (u->in[j] && slot[u->in[j]->id]) u->in[j] = n->out[slot[u->in[j]->id] - 1];
    }
    free(slot);
    /* scheduled at the boundary: add_node appended it */
    memmove(&g->nodes[first_update + 1], &g->nodes[first_update], sizeof *g->nodes * (size_t)(nn - first_update));
    g->nodes[first_update] = n;
    free(pos), free(order), free(ins);
    return CK_OK;
}
