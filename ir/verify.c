/* verify.c — the graph's invariants, checked after loading and after every pass.
 *
 * A pass that breaks one of these has a bug; the messages say which invariant and where, so
 * `--dump-after=PASS` plus the verifier pinpoints it. Checked:
 *   - node and value ids are unique; every value a node touches is in the graph's value list;
 *   - every value is produced at most once, and producer pointers agree with node outputs;
 *   - values without a producer are inputs, params, buffers or constants (constants carry data);
 *   - every shape satisfies ck_shape_ok (no negative dim, no element count near overflow);
 *   - nodes are in topological order: every input is defined before the node that reads it;
 *   - graph inputs and outputs are in the value list; inputs have no producer;
 *   - re-running shape inference on every node reproduces the stored dtypes and shapes.
 */
#include "ck_ir.h"

#include <stdlib.h>
#include <string.h>

ck_status ck_graph_verify(const ck_graph *g, ck_diag *d) {
    int nid = g->next_value_id + 1, errs = 0;
    char *in_graph = calloc((size_t)nid, 1), *defined = calloc((size_t)nid, 1), *produced = calloc((size_t)nid, 1);
    char *node_seen = calloc((size_t)g->next_node_id + 1, 1);
    CK_ASSERT(in_graph && defined && produced && node_seen);
#define VERR(...) (ck_diag_add(d, "verifier: " __VA_ARGS__), errs++)

    for (int i = 0; i < g->n_values; i++) {
        const ck_value *v = g->values[i];
        if (v->id < 0 || v->id >= nid || in_graph[v->id]) {
            VERR("value '%s' has a bad or duplicate id %d", v->name, v->id);
            continue;
        }
        in_graph[v->id] = 1;
        if (!v->producer) {
            if (v->role == CK_ROLE_ACTIVATION || v->role == CK_ROLE_GRAD)
                VERR("value '%s' is an %s but no node produces it", v->name, ck_role_name(v->role));
            if (v->role == CK_ROLE_CONST && !v->data) VERR("constant '%s' has no data", v->name);
            defined[v->id] = 1;
        }
        if (v->rank < 0 || v->rank > CK_MAX_RANK) VERR("value '%s' has rank %d", v->name, v->rank);
        else if (!ck_shape_ok(v->rank, v->dims)) VERR("value '%s' has a negative dim or too many elements", v->name);
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (!in_graph[g->inputs[i]->id] || g->inputs[i]->producer)
            VERR("graph input '%s' is not a producer-less value of the graph", g->inputs[i]->name);

    for (int i = 0; i < g->n_nodes; i++) {
        ck_node *n = g->nodes[i];
        if (n->id < 0 || n->id >= g->next_node_id || node_seen[n->id]) {
            VERR("node '%s' has a bad or duplicate id %d", n->name, n->id);
            continue;
        }
        node_seen[n->id] = 1;
        for (int k = 0; k < n->n_in; k++) {
            const ck_value *v = n->in[k];
            if (!v) continue;
            if (v->id < 0 || v->id >= nid || !in_graph[v->id]) VERR("node '%s': input %d '%s' is not in the graph", n->name, k, v->name);
            else if (!defined[v->id]) VERR("node '%s': input %d '%s' is used before it is produced", n->name, k, v->name);
        }
        for (int k = 0; k < n->n_out; k++) {
            const ck_value *v = n->out[k];
            if (!v) continue;
            if (v->id < 0 || v->id >= nid || !in_graph[v->id]) {
                VERR("node '%s': output %d '%s' is not in the graph", n->name, k, v->name);
                continue;
            }
            if (produced[v->id]) VERR("value '%s' is produced more than once", v->name);
            if (v->producer != n) VERR("value '%s': its producer is not node '%s' that outputs it", v->name, n->name);
            produced[v->id] = defined[v->id] = 1;
        }
        /* inference must reproduce what is stored */
        ck_value saved[64];
        int no = n->n_out < 64 ? n->n_out : 64;
        for (int k = 0; k < no; k++)
            if (n->out[k]) saved[k] = *n->out[k];
        ck_diag tmp = {0};
        if (ck_infer_node(n, &tmp) != CK_OK) {
            VERR("node '%s': shape inference fails: %s", n->name, tmp.n ? tmp.msg[0] : "?");
        } else {
            for (int k = 0; k < no; k++) {
                const ck_value *v = n->out[k];
                if (!v) continue;
                if (v->dtype != saved[k].dtype || v->rank != saved[k].rank ||
                    memcmp(v->dims, saved[k].dims, sizeof(int64_t) * (size_t)v->rank) != 0) {
                    char a[CK_SHAPE_STR_MAX], b[CK_SHAPE_STR_MAX];
                    VERR("node '%s': output '%s' is stored as %s %s but inference gives %s %s", n->name, v->name,
                         ck_dtype_name(saved[k].dtype), ck_shape_str(&saved[k], a, sizeof a), ck_dtype_name(v->dtype),
                         ck_shape_str(v, b, sizeof b));
                }
            }
        }
        for (int k = 0; k < no; k++)
            if (n->out[k]) *n->out[k] = saved[k];
        ck_diag_clear(&tmp);
    }
    for (int i = 0; i < g->n_values; i++) {
        const ck_value *v = g->values[i];
        if (v->producer && (v->id < 0 || v->id >= nid || !produced[v->id]))
            VERR("value '%s' names producer '%s' which is not in the graph", v->name, v->producer->name);
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i]->id < 0 || g->outputs[i]->id >= nid || !in_graph[g->outputs[i]->id])
            VERR("graph output '%s' is not in the graph", g->outputs[i]->name);
#undef VERR
    free(in_graph), free(defined), free(produced), free(node_seen);
    return errs ? CK_ERR_MODEL : CK_OK;
}
