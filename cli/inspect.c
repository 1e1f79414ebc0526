/* inspect.c — what `ckptc inspect` prints about a loaded model: opset, producer, inputs and
 * outputs, parameter/buffer/constant counts, every initializer trainable or constant (and what
 * decided: the model's ckptc.trainable entry or the default rule), the op histogram and every node
 * with its inferred output shapes, as text or as one JSON document (--json).
 */
#include "cli.h"
#include "ckrt_util.h"

#include <getopt.h>
#include <string.h>

static void json_value(FILE *f, const ck_value *v) {
    fprintf(f, "{\"name\":");
    ckrt_json_str(f, v->name);
    fprintf(f, ",\"dtype\":\"%s\",\"shape\":", ck_dtype_name(v->dtype));
    ckrt_json_i64s(f, v->rank, v->dims, ",");
    fprintf(f, "}");
}

typedef struct stats {
    int64_t count[CK_ROLE_OPT_STATE + 1], elems[CK_ROLE_OPT_STATE + 1], bytes[CK_ROLE_OPT_STATE + 1];
    int hist[CK_OP_COUNT];
} stats;

static void gather_stats(const ck_graph *g, stats *s) {
    memset(s, 0, sizeof *s);
    for (int i = 0; i < g->n_values; i++) {
        const ck_value *v = g->values[i];
        if (v->producer) continue;
        s->count[v->role]++;
        s->elems[v->role] += ck_value_numel(v);
        s->bytes[v->role] += (int64_t)ck_value_bytes(v);
    }
    for (int i = 0; i < g->n_nodes; i++) s->hist[g->nodes[i]->op]++;
}

/* An initializer as the trainer sees it: "trainable" (a PARAM: trained if it reaches the loss and
 * --freeze spares it), "buffer" (BatchNorm running statistics) or "constant". */
static const char *init_kind(const ck_value *v) {
    return v->role == CK_ROLE_PARAM ? "trainable" : v->role == CK_ROLE_BUFFER ? "buffer" : "constant";
}

static const char *trainable_from(const ck_graph *g) { return g->trainable_declared ? CK_TRAINABLE_KEY : "default rule"; }

static void json_initializers(FILE *f, const ck_graph *g) {
    fprintf(f, "  \"trainable_from\": \"%s\",\n  \"initializers\": [", trainable_from(g));
    for (int i = 0, first = 1; i < g->n_values; i++) {
        const ck_value *v = g->values[i];
        if (!v->initializer || v->producer) continue;
        fprintf(f, "%s\n    {\"name\": ", first ? "" : ",");
        ckrt_json_str(f, v->name);
        fprintf(f, ", \"dtype\": \"%s\", \"shape\": ", ck_dtype_name(v->dtype));
        ckrt_json_i64s(f, v->rank, v->dims, ", ");
        fprintf(f, ", \"role\": \"%s\", \"trainable\": %s}", init_kind(v), v->role == CK_ROLE_PARAM ? "true" : "false");
        first = 0;
    }
    fprintf(f, "],\n");
}

static void print_json(FILE *f, const ck_graph *g, const char *path) {
    stats s;
    gather_stats(g, &s);
    fprintf(f, "{\n  \"model\": ");
    ckrt_json_str(f, path);
    fprintf(f, ",\n  \"producer\": ");
    ckrt_json_str(f, g->producer_name);
    fprintf(f, ",\n  \"producer_version\": ");
    ckrt_json_str(f, g->producer_version);
    fprintf(f, ",\n  \"ir_version\": %lld,\n  \"opset\": %lld,\n", (long long)g->ir_version, (long long)g->opset);
    fprintf(f, "  \"onnx_nodes\": %d,\n  \"nodes_after_folding\": %d,\n", g->onnx_nodes, g->n_nodes);
    fprintf(f, "  \"inputs\": [");
    for (int i = 0; i < g->n_inputs; i++) {
        fprintf(f, i ? ", " : "");
        json_value(f, g->inputs[i]);
    }
    fprintf(f, "],\n  \"outputs\": [");
    for (int i = 0; i < g->n_outputs; i++) {
        fprintf(f, i ? ", " : "");
        json_value(f, g->outputs[i]);
    }
    fprintf(f, "],\n");
    static const ck_role roles[] = {CK_ROLE_PARAM, CK_ROLE_BUFFER, CK_ROLE_CONST};
    static const char *keys[] = {"parameters", "buffers", "constants"};
    for (int r = 0; r < 3; r++)
        fprintf(f, "  \"%s\": {\"tensors\": %lld, \"elements\": %lld, \"bytes\": %lld},\n", keys[r],
                (long long)s.count[roles[r]], (long long)s.elems[roles[r]], (long long)s.bytes[roles[r]]);
    json_initializers(f, g);
    fprintf(f, "  \"op_histogram\": {");
    for (int op = 0, first = 1; op < CK_OP_COUNT; op++)
        if (s.hist[op]) {
            fprintf(f, "%s\"%s\": %d", first ? "" : ", ", ck_ops[op].onnx_name, s.hist[op]);
            first = 0;
        }
    fprintf(f, "},\n  \"nodes\": [\n");
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        fprintf(f, "    {\"name\": ");
        ckrt_json_str(f, n->name);
        fprintf(f, ", \"op\": \"%s\", \"inputs\": [", ck_ops[n->op].onnx_name);
        for (int k = 0; k < n->n_in; k++) {
            fprintf(f, k ? ", " : "");
            if (n->in[k]) ckrt_json_str(f, n->in[k]->name);
            else fprintf(f, "null");
        }
        fprintf(f, "], \"outputs\": [");
        for (int k = 0; k < n->n_out; k++) {
            fprintf(f, k ? ", " : "");
            if (n->out[k]) json_value(f, n->out[k]);
            else fprintf(f, "null");
        }
        fprintf(f, "]}%s\n", i + 1 < g->n_nodes ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
}

static const char *human_bytes(int64_t b, char *buf, size_t n) {
    if (b < 1024) snprintf(buf, n, "%lld B", (long long)b);
    else if (b < 1024 * 1024) snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else if (b < 1024ll * 1024 * 1024) snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    return buf;
}

static void print_text(FILE *f, const ck_graph *g, const char *path) {
    stats s;
    gather_stats(g, &s);
    char sh[CK_SHAPE_STR_MAX], hb[32];
    fprintf(f, "model     %s\n", path);
    fprintf(f, "producer  %s %s (ir_version %lld, opset %lld)\n", *g->producer_name ? g->producer_name : "(none)",
            g->producer_version, (long long)g->ir_version, (long long)g->opset);
    fprintf(f, "inputs\n");
    for (int i = 0; i < g->n_inputs; i++)
        fprintf(f, "  %-24s %-8s %s\n", g->inputs[i]->name, ck_dtype_name(g->inputs[i]->dtype), ck_shape_str(g->inputs[i], sh, sizeof sh));
    fprintf(f, "outputs\n");
    for (int i = 0; i < g->n_outputs; i++)
        fprintf(f, "  %-24s %-8s %s\n", g->outputs[i]->name, ck_dtype_name(g->outputs[i]->dtype),
                ck_shape_str(g->outputs[i], sh, sizeof sh));
    fprintf(f, "params    %lld elements in %lld tensors (%s)\n", (long long)s.elems[CK_ROLE_PARAM],
            (long long)s.count[CK_ROLE_PARAM], human_bytes(s.bytes[CK_ROLE_PARAM], hb, sizeof hb));
    if (s.count[CK_ROLE_BUFFER])
        fprintf(f, "buffers   %lld elements in %lld tensors (%s)\n", (long long)s.elems[CK_ROLE_BUFFER],
                (long long)s.count[CK_ROLE_BUFFER], human_bytes(s.bytes[CK_ROLE_BUFFER], hb, sizeof hb));
    fprintf(f, "consts    %lld elements in %lld tensors (%s)\n", (long long)s.elems[CK_ROLE_CONST],
            (long long)s.count[CK_ROLE_CONST], human_bytes(s.bytes[CK_ROLE_CONST], hb, sizeof hb));
    if (g->trainable_declared)
        fprintf(f, "trainable initializers: from metadata_props '%s'\n", CK_TRAINABLE_KEY);
    else
        fprintf(f, "trainable initializers: the default rule, every float one (the model has no metadata_props '%s')\n",
                CK_TRAINABLE_KEY);
    for (int i = 0; i < g->n_values; i++) {
        const ck_value *v = g->values[i];
        if (v->initializer && !v->producer)
            fprintf(f, "  %-24s %-8s %-16s %s\n", v->name, ck_dtype_name(v->dtype), ck_shape_str(v, sh, sizeof sh), init_kind(v));
    }
    fprintf(f, "nodes     %d (%d in the file, Constants included, before folding)\n", g->n_nodes, g->onnx_nodes);
    fprintf(f, "ops      ");
    for (int op = 0; op < CK_OP_COUNT; op++)
        if (s.hist[op]) fprintf(f, " %s:%d", ck_ops[op].onnx_name, s.hist[op]);
    fprintf(f, "\n\n");
    int w = 4;
    for (int i = 0; i < g->n_nodes; i++) {
        int l = (int)strlen(g->nodes[i]->name);
        if (l > w) w = l;
    }
    if (w > 60) w = 60;
    fprintf(f, "%5s  %-*s  %-18s  %s\n", "#", w, "node", "op", "outputs");
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        fprintf(f, "%5d  %-*s  %-18s ", i, w, n->name, ck_ops[n->op].onnx_name);
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k]) fprintf(f, " %s %s%s", ck_dtype_name(n->out[k]->dtype), ck_shape_str(n->out[k], sh, sizeof sh),
                                   k + 1 < n->n_out ? "," : "");
        fprintf(f, "\n");
    }
}

static const char *usage_inspect =
    "usage: ckptc inspect MODEL.onnx [--dim NAME=N]... [--json]\n"
    "\n"
    "  --dim NAME=N   bind the symbolic input dimension NAME (an ONNX dim_param) to N\n"
    "  --json         print a JSON document instead of text\n"
    "  -h, --help     show this help\n";

int cmd_inspect(int argc, char **argv) {
    static const struct option opts[] = {
        {"dim", required_argument, 0, 'd'}, {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    ck_dim_binding dims[64];
    int n_dims = 0, json = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (n_dims == 64) return user_error("--dim: too many bindings (at most 64)");
            if (!parse_dim(optarg, &dims[n_dims])) return user_error("--dim '%s': expected NAME=N with N a positive integer", optarg);
            for (int k = 0; k < n_dims; k++)
                if (strcmp(dims[k].name, dims[n_dims].name) == 0) return user_error("--dim %s is given twice", dims[k].name);
            n_dims++;
            break;
        case 'j': json = 1; break;
        case 'h': fputs(usage_inspect, stdout); return 0;
        case ':': return user_error("option '%s' needs a value", argv[optind - 1]);
        default: return user_error("unknown option '%s' for inspect (see ckptc inspect --help)", argv[optind - 1]);
        }
    }
    if (optind >= argc) return user_error("inspect: missing MODEL.onnx (see ckptc inspect --help)");
    if (optind + 1 < argc) return user_error("inspect: unexpected argument '%s' (one model at a time)", argv[optind + 1]);
    const char *path = argv[optind];
    ck_load_options o = {.dims = dims, .n_dims = n_dims};
    ck_diag d = {0};
    ck_graph *g = NULL;
    ck_status st = ck_frontend_load(path, &o, &g, &d);
    if (st != CK_OK) {
        print_diag(&d, path);
        ck_diag_clear(&d);
        return EXIT_USER;
    }
    if (json) print_json(stdout, g, path);
    else print_text(stdout, g, path);
    ck_graph_free(g);
    ck_diag_clear(&d);
    return fflush(stdout) == 0 ? 0 : 1;
}
