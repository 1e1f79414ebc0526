/* data_parallel.c — --data-parallel: the gradients are averaged over the ranks between their
 * producers and the optimizer, a bucket at a time, as soon as each bucket is ready.
 *
 * The gradients are ordered by readiness (the step of each gradient's producer; static ones
 * first) and cut into buckets of whole gradients of at most --dp-bucket bytes (default 25 MiB,
 * PyTorch DDP's; a gradient larger than the bucket is a bucket alone, reduced in several rounds
 * through the same staging). Bucket k becomes two nodes:
 *
 *   ckptc.GradAllReduce k      right after the producer of its last gradient: starts the
 *                              averaging (every rank agrees it got there, then pack, exchange,
 *                              sum in rank order, unpack; runtime/dp.c). On the CPU it is done
 *                              when the call returns; on a GPU it is enqueued on the
 *                              communication stream and overlaps the rest of the backward.
 *   ckptc.GradAllReduceWait k  before the first update reading the bucket, and before the start
 *                              of bucket k + DP_IN_FLIGHT: the compute stream waits for it.
 *
 * That is the overlapped schedule (ck_options.dp_overlap). Its stagings live during the
 * backward, beside the activations; without overlap every bucket starts after the backward, one
 * after another (each wait right after its start), where the activations are gone: the lower
 * peak when the staging would otherwise hold it. --dp-overlap=auto (the default, search.c)
 * plans both and keeps the overlap unless it raises the planned peak.
 *
 * Both take the bucket's gradients and give them back averaged, in place (the planner aliases
 * output k to input k, as for the optimizer's updates), and the updates read the wait's outputs,
 * so the dataflow says what runs when. The staging (the packed bucket, then room for the slices
 * the other ranks send) is the start node's workspace, live until its wait (ck_node.ws_until):
 * the plan counts exactly the buckets in flight at each step, at most DP_IN_FLIGHT. The staging
 * is needed because the reduction is deterministic (summed in rank order), which needs each
 * rank's copy of a slice side by side.
 */
#include "ck_passes.h"

#include <stdio.h>
#include <stdlib.h>

#define DP_BUCKET_DEFAULT (25ll << 20)

/* Buckets in flight at once: the wait of bucket k comes before the start of bucket k + 1, so one
 * staging is live at a time (bucket k travels while the backward computes bucket k + 1). */
#define DP_IN_FLIGHT 1

static ck_node *make_node(ck_graph *g, ck_op op, const char *name, int n, ck_value **ins, int k, int buckets, int64_t total,
                          int64_t staging, ck_diag *d, ck_status *st) {
    ck_node *x = ck_graph_new_node(g, op, name, n, ins, n); /* scheduled by the caller */
    ck_node_add_attr(g, x, (ck_attr){.name = "bucket", .kind = CK_ATTR_INT, .i = k});
    ck_node_add_attr(g, x, (ck_attr){.name = "buckets", .kind = CK_ATTR_INT, .i = buckets});
    ck_node_add_attr(g, x, (ck_attr){.name = "gradient_floats", .kind = CK_ATTR_INT, .i = total});
    if (staging) ck_node_add_attr(g, x, (ck_attr){.name = "staging_floats", .kind = CK_ATTR_INT, .i = staging});
    x->phase = CK_PHASE_BACKWARD;
    *st = ck_infer_node(x, d);
    for (int j = 0; !*st && j < n; j++) {
        char nm[1100];
        snprintf(nm, sizeof nm, "%s.%s", ins[j]->name, op == CK_OP_GRAD_ALLREDUCE ? "mean" : "ready");
        x->out[j]->name = ck_arena_strdup(g->arena, nm);
        x->out[j]->role = CK_ROLE_GRAD;
    }
    return x;
}

ck_status ck_pass_data_parallel(ck_graph *g, const ck_options *o, ck_diag *d) {
    if (!o->data_parallel || !g->loss || g->n_train == 0) return CK_OK;
    int nn = g->n_nodes, ng = g->n_train;
    int *pos = malloc(sizeof(int) * (size_t)(g->next_node_id + 1)), *order = malloc(sizeof(int) * (size_t)ng);
    CK_ASSERT(pos && order);
    for (int i = 0; i < nn; i++) pos[g->nodes[i]->id] = i;
    int first_update = nn, first_bwd = nn;
    for (int i = nn - 1; i >= 0; i--) {
        if (g->nodes[i]->phase == CK_PHASE_UPDATE) first_update = i;
        if (g->nodes[i]->phase != CK_PHASE_FORWARD) first_bwd = i;
    }
    /* readiness: the step of each gradient's producer (static gradients: ready from the start) */
    int64_t total = 0;
    for (int k = 0; k < ng; k++) {
        order[k] = k;
        total += ck_value_numel(g->train_grads[k]);
    }
#define READY(v) ((v)->producer ? pos[(v)->producer->id] : -1)
    for (int a = 1; a < ng; a++) /* insertion sort, stable: ties keep the parameter order */
        for (int b = a; b > 0; b--) {
            if (READY(g->train_grads[order[b]]) >= READY(g->train_grads[order[b - 1]])) break;
            int t = order[b];
            order[b] = order[b - 1], order[b - 1] = t;
        }
    ck_value **ins = malloc(sizeof *ins * (size_t)ng);
    int *first_of = malloc(sizeof(int) * (size_t)(ng + 1)); /* bucket b: ins[first_of[b] .. first_of[b + 1]) */
    CK_ASSERT(ins && first_of);
    int64_t bucket = (o->dp_bucket_bytes > 0 ? o->dp_bucket_bytes : DP_BUCKET_DEFAULT) / (int64_t)sizeof(float), fill = 0;
    int nb = 0;
    for (int k = 0; k < ng; k++) {
        ins[k] = g->train_grads[order[k]];
        CK_ASSERT(READY(ins[k]) < first_update);
        int64_t m = ck_value_numel(ins[k]);
        if (k == 0 || fill + m > bucket) first_of[nb++] = k, fill = 0;
        fill += m;
    }
    first_of[nb] = ng;
    /* the nodes, and where each goes: start b after its last gradient's producer (not before the
     * backward), wait b before the start of b + DP_IN_FLIGHT, or before the first update */
    ck_node **start = calloc((size_t)nb, sizeof *start), **wait = calloc((size_t)nb, sizeof *wait);
    int *at = malloc(sizeof(int) * (size_t)nb);
    CK_ASSERT(start && wait && at);
    ck_status st = CK_OK;
    for (int b = 0; b < nb && !st; b++) {
        int n = first_of[b + 1] - first_of[b];
        int64_t sum = 0;
        at[b] = o->dp_overlap ? first_bwd : first_update; /* without overlap: all after the backward */
        for (int j = first_of[b]; j < first_of[b + 1]; j++) {
            sum += ck_value_numel(ins[j]);
            if (o->dp_overlap && READY(ins[j]) + 1 > at[b]) at[b] = READY(ins[j]) + 1;
        }
        int64_t w = sum < bucket ? sum : bucket;
        w = (w + 15) / 16 * 16; /* whole 64-byte lines */
        char name[80];
        snprintf(name, sizeof name, "/data_parallel/GradAllReduce_%d", b);
        start[b] = make_node(g, CK_OP_GRAD_ALLREDUCE, name, n, ins + first_of[b], b, nb, total, w, d, &st);
        if (st) break;
        snprintf(name, sizeof name, "/data_parallel/GradAllReduceWait_%d", b);
        wait[b] = make_node(g, CK_OP_GRAD_ALLREDUCE_WAIT, name, n, start[b]->out, b, nb, total, 0, d, &st);
        start[b]->ws_until = wait[b];
    }
#undef READY
    if (!st) {
        /* the updates read the averaged gradients */
        int *slot = calloc((size_t)g->next_value_id + 1, sizeof *slot); /* value id -> k + 1 */
        CK_ASSERT(slot);
        for (int b = 0; b < nb; b++)
            for (int j = 0; j < wait[b]->n_in; j++) slot[ins[first_of[b] + j]->id] = first_of[b] + j + 1;
        for (int i = first_update; i < nn; i++) {
            ck_node *u = g->nodes[i];
            for (int j = 0; j < u->n_in; j++)
                if (u->in[j] && slot[u->in[j]->id]) {
                    int k = slot[u->in[j]->id] - 1, b = 0;
                    while (first_of[b + 1] <= k) b++;
                    u->in[j] = wait[b]->out[k - first_of[b]];
                }
        }
        free(slot);
        /* the new schedule: the old one with start b inserted before old step at[b] (after its
         * last gradient), wait b just before start b + DP_IN_FLIGHT or before the first update */
        ck_node **sched = malloc(sizeof *sched * (size_t)(nn + 2 * nb));
        CK_ASSERT(sched);
        int m = 0, nextb = 0, nextw = 0;
        for (int i = 0; i <= nn; i++) {
            while (nextb < nb && (at[nextb] <= i || i == first_update)) {
                if (nextb >= DP_IN_FLIGHT) sched[m++] = wait[nextw++];
                sched[m++] = start[nextb++];
            }
            if (i == first_update || i == nn)
                while (nextw < nb) sched[m++] = wait[nextw++];
            if (i < nn) sched[m++] = g->nodes[i];
        }
        CK_ASSERT(m == nn + 2 * nb);
        ck_graph_set_nodes(g, m, sched);
        free(sched);
    }
    free(pos), free(order), free(ins), free(first_of), free(start), free(wait), free(at);
    return st;
}
