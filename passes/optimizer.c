/* optimizer.c — one in-place update node per trainable parameter, run after the whole backward.
 *
 * sgd:      p -= lr * (g + wd p)
 * momentum: b = mu b + (g + wd p); p -= lr b               (torch.optim.SGD, dampening 0)
 * adamw:    p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *           p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)   (torch.optim.AdamW)
 * The update ops' outputs overwrite their parameter and state in place (the planner aliases
 * them); the state values are zero-initialized by the runtime and counted as optimizer state.
 */
#include "ck_passes.h"

#include <stdio.h>

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
        if (o->optimizer == CK_OPT_ADAMW) {
            n = ck_graph_add_node(g, CK_OP_ADAMW, name, 4, (ck_value *[]){p, gr, state(g, p, "exp_avg"), state(g, p, "exp_avg_sq")}, 3);
            ck_node_add_attr(g, n, (ck_attr){.name = "beta1", .kind = CK_ATTR_FLOAT, .f = (float)o->beta1});
            ck_node_add_attr(g, n, (ck_attr){.name = "beta2", .kind = CK_ATTR_FLOAT, .f = (float)o->beta2});
            ck_node_add_attr(g, n, (ck_attr){.name = "eps", .kind = CK_ATTR_FLOAT, .f = (float)o->eps});
        } else if (o->optimizer == CK_OPT_MOMENTUM) {
            n = ck_graph_add_node(g, CK_OP_SGD, name, 3, (ck_value *[]){p, gr, state(g, p, "momentum_buffer")}, 2);
            ck_node_add_attr(g, n, (ck_attr){.name = "momentum", .kind = CK_ATTR_FLOAT, .f = (float)o->momentum});
        } else {
            n = ck_graph_add_node(g, CK_OP_SGD, name, 2, (ck_value *[]){p, gr}, 1);
        }
        ck_node_add_attr(g, n, (ck_attr){.name = "lr", .kind = CK_ATTR_FLOAT, .f = (float)o->lr});
        ck_node_add_attr(g, n, (ck_attr){.name = "weight_decay", .kind = CK_ATTR_FLOAT, .f = (float)wd});
        n->phase = CK_PHASE_UPDATE;
        ck_status st = ck_infer_node(n, d);
        if (st) return st;
        n->out[0]->name = p->name;
    }
    return CK_OK;
}
