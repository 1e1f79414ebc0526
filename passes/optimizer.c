/* optimizer.c — one in-place update node per trainable parameter, and where each one runs.
 *
 * sgd:      p -= lr * (g + wd p)
 * momentum: b = mu b + (g + wd p); p -= lr b               (torch.optim.SGD, dampening 0)
 * adamw:    p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *           p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)   (torch.optim.AdamW)
 * The update ops' outputs overwrite their parameter and state in place (the planner aliases
 * them); the state values are zero-initialized by the runtime and counted as optimizer state.
 * With --grad-accum each update has one more input and output, last, with attribute accum 1: the
 * parameter's gradient accumulator (NAME.grad_accum, static like the state). The trainer's
 * --grad-accum K runs K micro-batches per step; on the first K - 1 the update node only adds the
 * gradient into it, on the last it updates with (accumulated + gradient) / K (runtime/cpu_train.c).
 *
 * ck_pass_optimizer appends the updates after the whole backward; ck_pass_early_update (run once
 * checkpointing has placed its recompute and offload nodes) moves each one to the earliest step
 * where it is legal, so that its gradient dies there instead of at the end of the step. Legal:
 * after the node producing each of its inputs (the gradient is final), after every other node
 * reading a value it overwrites (the parameter and its optimizer state, or a view sharing their
 * bytes: dX = dY W, a recompute clone rerunning the forward, each use of a shared weight), and
 * after the whole forward, so that a step whose loss is not finite updates nothing. Each update
 * reads and writes only its own parameter's values, so the order changes no bit.
 */
#include "ck_passes.h"

#include <stdio.h>
#include <stdlib.h>

static ck_value *state(ck_graph *g, const ck_value *p, const char *what) {
    char name[1100];
    snprintf(name, sizeof name, "%s.%s", p->name, what);
    return ck_graph_add_value(g, name, p->dtype, p->rank, p->dims, CK_ROLE_OPT_STATE);
}

ck_status ck_pass_optimizer(ck_graph *g, const ck_options *o, ck_diag *d) {
    double wd = o->weight_decay >= 0 ? o->weight_decay : o->optimizer == CK_OPT_ADAMW ? 1e-2 : 0.0;
    for (int i = 0; i < g->n_train; i++) {
        ck_value *p = g->train_params[i], *gr = g->train_grads[i];
        char name[1100];
        snprintf(name, sizeof name, "/optimizer/%s", p->name);
        ck_node *n;
        ck_value *acc = o->grad_accum ? state(g, p, "grad_accum") : NULL;
        int extra = acc != NULL;
        if (o->optimizer == CK_OPT_ADAMW) {
            n = ck_graph_add_node(g, CK_OP_ADAMW, name, 4 + extra, (ck_value *[]){p, gr, state(g, p, "exp_avg"), state(g, p, "exp_avg_sq"), acc},
                                  3 + extra);
            ck_node_add_attr(g, n, (ck_attr){.name = "beta1", .kind = CK_ATTR_FLOAT, .f = (float)o->beta1});
            ck_node_add_attr(g, n, (ck_attr){.name = "beta2", .kind = CK_ATTR_FLOAT, .f = (float)o->beta2});
            ck_node_add_attr(g, n, (ck_attr){.name = "eps", .kind = CK_ATTR_FLOAT, .f = (float)o->eps});
        } else if (o->optimizer == CK_OPT_MOMENTUM) {
            n = ck_graph_add_node(g, CK_OP_SGD, name, 3 + extra, (ck_value *[]){p, gr, state(g, p, "momentum_buffer"), acc}, 2 + extra);
            ck_node_add_attr(g, n, (ck_attr){.name = "momentum", .kind = CK_ATTR_FLOAT, .f = (float)o->momentum});
        } else {
            n = ck_graph_add_node(g, CK_OP_SGD, name, 2 + extra, (ck_value *[]){p, gr, acc}, 1 + extra);
        }
        if (acc) ck_node_add_attr(g, n, (ck_attr){.name = "accum", .kind = CK_ATTR_INT, .i = 1});
        ck_node_add_attr(g, n, (ck_attr){.name = "lr", .kind = CK_ATTR_FLOAT, .f = (float)o->lr});
        ck_node_add_attr(g, n, (ck_attr){.name = "weight_decay", .kind = CK_ATTR_FLOAT, .f = (float)wd});
        n->phase = CK_PHASE_UPDATE;
        ck_status st = ck_infer_node(n, d);
        if (st) return st;
        n->out[0]->name = p->name;
    }
    return CK_OK;
}

ck_status ck_pass_early_update(ck_graph *g, const ck_options *o, ck_diag *d) {
    /* --data-parallel: an update reads its bucket's averaged gradient (the GradAllReduceWait's
     * output, data_parallel.c), so it lands after that wait like after any producer */
    if (o->infer || o->update_at_end || !g->loss) return CK_OK;
    int nn = g->n_nodes, nid = g->next_value_id, last_fwd = -1;
    int *slot = calloc((size_t)nid + 1, sizeof *slot); /* value id -> 1 + the update overwriting its bytes */
    int *pos = malloc(sizeof(int) * (size_t)(g->next_node_id + 1)), *need = malloc(sizeof(int) * (size_t)(nn + 1));
    int *start = calloc((size_t)nn + 2, sizeof *start);
    ck_node **out = malloc(sizeof *out * (size_t)(nn + 1));
    CK_ASSERT(slot && pos && need && start && out);
    for (int i = 0; i < nn; i++) {
        ck_node *n = g->nodes[i];
        pos[n->id] = i;
        if (n->phase == CK_PHASE_FORWARD) last_fwd = i;
        for (int k = 0; n->phase == CK_PHASE_UPDATE && k < n->n_out; k++) {
            int src = ck_node_inplace_input(n, k);
            if (src >= 0 && n->in[src]) slot[n->in[src]->id] = i + 1;
        }
    }
    for (int i = 0; i < nn; i++) { /* views share their input's bytes: reading one reads the parameter */
        ck_node *n = g->nodes[i];
        if (ck_node_is_view(n, o) && n->in[0] && slot[n->in[0]->id]) slot[n->out[0]->id] = slot[n->in[0]->id];
    }
    for (int i = 0; i < nn; i++) need[i] = last_fwd;
    for (int i = 0; i < nn; i++) {
        ck_node *n = g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            ck_value *v = n->in[k];
            if (!v) continue;
            if (n->phase == CK_PHASE_UPDATE) { /* after its inputs' producers */
                if (v->producer && pos[v->producer->id] > need[i]) need[i] = pos[v->producer->id];
            } else if (slot[v->id] && need[slot[v->id] - 1] < i) { /* after the old value's readers */
                need[slot[v->id] - 1] = i;
            }
        }
    }
    /* each update right after the node it waits for, ties in parameter order (a counting sort) */
    for (int i = 0; i < nn; i++)
        if (g->nodes[i]->phase == CK_PHASE_UPDATE) {
            CK_ASSERT(need[i] >= 0 && g->nodes[need[i]]->phase != CK_PHASE_UPDATE);
            start[need[i] + 1]++;
        }
    for (int i = 0; i < nn; i++) start[i + 1] += start[i];
    int *at = malloc(sizeof(int) * (size_t)(start[nn] + 1)), no = 0;
    CK_ASSERT(at);
    for (int i = 0; i < nn; i++)
        if (g->nodes[i]->phase == CK_PHASE_UPDATE) at[start[need[i]]++] = i; /* start[j]: now the end of j's updates */
    for (int i = 0, q = 0; i < nn; i++) {
        if (g->nodes[i]->phase == CK_PHASE_UPDATE) continue;
        out[no++] = g->nodes[i];
        for (; q < start[i]; q++) out[no++] = g->nodes[at[q]];
    }
    CK_ASSERT(no == nn);
    ck_graph_set_nodes(g, nn, out);
    free(slot), free(pos), free(need), free(start), free(out), free(at);
    return ck_graph_verify(g, d);
}
