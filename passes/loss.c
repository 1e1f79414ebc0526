/* loss.c — appends the loss to the model's output and makes it the graph's only output.
 *
 * cross_entropy reads logits with the class axis last ((N, C) or GPT's (B, T, V)) and adds an
 * int64 input of the logits' shape minus that axis; the fused ckptc.CrossEntropy op averages
 * -log_softmax(logits)[label] over every position, as torch.nn.functional.cross_entropy does with
 * reduction='mean' (labels out of range are a run-time error, not a crash). mse adds a float
 * input shaped like the output and averages the squared difference. output takes a scalar output
 * as the loss itself.
 */
#include "ck_passes.h"

#include <stdio.h>
#include <string.h>

static ck_node *add(ck_graph *g, ck_op op, const char *name, int n_in, ck_value **in, ck_diag *d) {
    ck_node *n = ck_graph_add_node(g, op, name, n_in, in, 1);
    n->phase = CK_PHASE_FORWARD;
    return ck_infer_node(n, d) == CK_OK ? n : NULL;
}

static ck_value *new_input(ck_graph *g, const char *name, ck_dtype dt, int rank, const int64_t *dims, ck_diag *d) {
    for (int i = 0; i < g->n_values; i++)
        if (strcmp(g->values[i]->name, name) == 0) {
            ck_diag_add(d, "the loss needs an input named '%s' but the model already has a value of that name; "
                           "choose another with --label-name", name);
            return NULL;
        }
    ck_value *v = ck_graph_add_value(g, name, dt, rank, dims, CK_ROLE_INPUT);
    ck_value *ins[65];
    if (g->n_inputs >= 64) return NULL;
    for (int i = 0; i < g->n_inputs; i++) ins[i] = g->inputs[i];
    ins[g->n_inputs] = v;
    ck_graph_set_inputs(g, g->n_inputs + 1, ins);
    return v;
}

ck_status ck_pass_loss(ck_graph *g, const ck_options *o, ck_diag *d) {
    ck_value *y = NULL;
    if (o->output) {
        for (int i = 0; i < g->n_outputs; i++)
            if (strcmp(g->outputs[i]->name, o->output) == 0) y = g->outputs[i];
        if (!y) {
            char names[1024] = "";
            for (int i = 0; i < g->n_outputs; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", i ? ", " : "", g->outputs[i]->name);
            ck_diag_add(d, "--output %s: the model has no output of that name (outputs: %s)", o->output, names);
            return CK_ERR_USAGE;
        }
    } else {
        y = g->outputs[0];
    }
    char sh[CK_SHAPE_STR_MAX];
    ck_value *loss = NULL;
    switch (o->loss) {
    case CK_LOSS_CROSS_ENTROPY: {
        if (y->rank < 1 || !ck_dtype_is_float(y->dtype) || y->dims[y->rank - 1] < 1) {
            ck_diag_add(d, "--loss=cross_entropy needs float logits with the classes on the last axis, e.g. (N,C) or "
                           "(B,T,V); output '%s' is %s %s",
                        y->name, ck_dtype_name(y->dtype), ck_shape_str(y, sh, sizeof sh));
            return CK_ERR_SHAPE;
        }
        ck_value *labels = new_input(g, o->label_name ? o->label_name : "labels", CK_I64, y->rank - 1, y->dims, d);
        if (!labels) return CK_ERR_USAGE;
        ck_node *n = add(g, CK_OP_CROSS_ENTROPY, "/loss/CrossEntropy", 2, (ck_value *[]){y, labels}, d);
        if (!n) return CK_ERR_SHAPE;
        loss = n->out[0];
        break;
    }
    case CK_LOSS_MSE: {
        if (!ck_dtype_is_float(y->dtype)) {
            ck_diag_add(d, "--loss=mse needs a float output; output '%s' is %s", y->name, ck_dtype_name(y->dtype));
            return CK_ERR_SHAPE;
        }
        ck_value *t = new_input(g, o->label_name ? o->label_name : "target", y->dtype, y->rank, y->dims, d);
        if (!t) return CK_ERR_USAGE;
        ck_node *diff = add(g, CK_OP_SUB, "/loss/Sub", 2, (ck_value *[]){y, t}, d);
        ck_node *sq = diff ? add(g, CK_OP_MUL, "/loss/Mul", 2, (ck_value *[]){diff->out[0], diff->out[0]}, d) : NULL;
        ck_node *mean = sq ? add(g, CK_OP_REDUCE_MEAN, "/loss/ReduceMean", 1, sq->out, d) : NULL;
        if (!mean) return CK_ERR_SHAPE;
        ck_node_add_attr(g, mean, (ck_attr){.name = "keepdims", .kind = CK_ATTR_INT, .i = 0});
        ck_infer_node(mean, d);
        loss = mean->out[0];
        break;
    }
    case CK_LOSS_OUTPUT:
        if (ck_value_numel(y) != 1 || !ck_dtype_is_float(y->dtype)) {
            ck_diag_add(d, "--loss=output needs a float scalar output (the loss itself); output '%s' is %s %s", y->name,
                        ck_dtype_name(y->dtype), ck_shape_str(y, sh, sizeof sh));
            return CK_ERR_SHAPE;
        }
        loss = y;
        break;
    }
    if (!loss->producer) {
        ck_diag_add(d, "the loss '%s' is a constant: nothing to train", loss->name);
        return CK_ERR_MODEL;
    }
    if (loss != y) loss->name = "loss";
    g->loss = loss;
    ck_graph_set_outputs(g, 1, &loss);
    ck_graph_remove_dead(g); /* outputs the loss does not read */
    return CK_OK;
}
