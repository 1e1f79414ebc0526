/* ckptc.c — the command line: parses flags, calls the layers in order, prints results.
 *
 *   ckptc MODEL.onnx -o DIR [--infer] [--loss=...] [--optimizer=...] [--dim NAME=N]...
 *   ckptc inspect MODEL.onnx [--dim NAME=N]... [--json]
 *
 * compile() is the whole compiler in one straight-line function: load -> passes -> codegen.
 *
 * User errors (bad file, unsupported op, bad shape, bad flag) print one line per problem on
 * stderr, prefixed "ckptc: error:", and exit with status 2. Broken invariants abort through
 * CK_ASSERT. Nothing here knows about protobuf.
 */
#include "ck_codegen.h"
#include "compare.h"
#include "ck_frontend.h"
#include "ckrt_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <getopt.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_USER 2

static char g_cmdline[4096]; /* as typed, for the provenance of generated code */

static const char *usage_main =
    "usage: ckptc COMMAND [OPTIONS]\n"
    "\n"
    "ckptc compiles an ONNX model into a standalone training program whose activation memory is\n"
    "cut by checkpointing and offload.\n"
    "\n"
    "commands:\n"
    "  MODEL.onnx -o DIR    compile a training program into DIR (trainer.c, weights.bin,\n"
    "                       plan.json, Makefile; --infer: the forward pass only, model.c);\n"
    "                       `make -C DIR` builds it (see ckptc MODEL.onnx --help)\n"
    "  compare A.json B.json ...  [--timeline FILE.svg]\n"
    "                       trainer reports side by side, with ratios to the first\n"
    "  inspect MODEL.onnx   load a model, fold its shape subgraphs, infer every shape and print\n"
    "                       opset, producer, inputs/outputs, parameters, op histogram and nodes\n"
    "\n"
    "options:\n"
    "  -h, --help           show this help (or `ckptc COMMAND --help`)\n"
    "  -V, --version        print the version\n";

static const char *usage_compile =
    "usage: ckptc MODEL.onnx -o DIR [options]\n"
    "\n"
    "Compiles MODEL.onnx into DIR: trainer.c (or model.c with --infer), weights.bin, plan.json and a\n"
    "Makefile; `make -C DIR` builds DIR/trainer (DIR/model).\n"
    "\n"
    "  -o, --out-dir DIR        where to write the program\n"
    "  --infer                  forward pass only (an inference program, DIR/model)\n"
    "  --dim NAME=N             bind the symbolic input dimension NAME to N\n"
    "  --disable-dropout        treat every Dropout as the identity\n"
    "  --bn-running-var=KIND    BatchNorm's running variance update: biased (the ONNX spec), unbiased\n"
    "                           (PyTorch), or auto (default: unbiased when the producer is PyTorch)\n"
    "training:\n"
    "  --loss=KIND              cross_entropy (default; adds int64 input 'labels'), mse (adds float input\n"
    "                           'target'), output (the model's output is the loss)\n"
    "  --output NAME            the model output the loss reads (default: the first)\n"
    "  --label-name NAME        name of the labels/target input\n"
    "  --freeze REGEX           do not train parameters whose names match (POSIX extended regex)\n"
    "  --optimizer=KIND         sgd, momentum or adamw (default adamw)\n"
    "  --lr X                   learning rate (default 1e-3)\n"
    "  --momentum X             momentum (default 0.9; --optimizer=momentum)\n"
    "  --weight-decay X         default 0 for sgd/momentum, 1e-2 for adamw\n"
    "  --beta1 X, --beta2 X     AdamW betas (default 0.9, 0.999)\n"
    "  --eps X                  AdamW epsilon (default 1e-8)\n"
    "  --update-at-end          run every parameter's update after the whole backward (default: each one\n"
    "                           as soon as its gradient is final and the old weights are last read, which\n"
    "                           frees the gradient there; same bits either way)\n"
    "checkpointing:\n"
    "  --checkpoint=POLICY      none (default), blocks (repeated module scopes such as /layers.N/),\n"
    "                           every:K (a segment every K cut points), sqrt (about sqrt(n) segments),\n"
    "                           nodes:REGEX (boundaries after matching nodes), budget:SIZE (the least\n"
    "                           recompute that plans the whole step within SIZE, e.g. 512MiB, 2GiB)\n"
    "  --block-regex REGEX      what names a block for --checkpoint=blocks (the matched text is the key)\n"
    "  --offload                keep the segments' checkpoints in a host pool, reloaded (one segment\n"
    "                           ahead) before their backward\n"
    "  --plan-only              print the memory plan; write nothing (no -o needed)\n"
    "  --explain                list every activation kept, recomputed or offloaded, and why\n"
    "data parallel:\n"
    "  --data-parallel          an MPI program (mpirun -np N DIR/trainer): every rank trains the same plan\n"
    "                           on its shard of the batch, gradients averaged (deterministically) before\n"
    "                           the update; --dim binds the PER-RANK batch (global batch = N x it)\n"
    "  --dp-bucket SIZE         gradient all-reduce bucket: the staging planned is 2 x SIZE at most\n"
    "                           (default 25MiB; smaller when the staging would hold the peak)\n"
    "  --dp-overlap=MODE        on: each bucket is averaged as soon as its gradients are final (on a GPU\n"
    "                           beside the rest of the backward); off: all after the backward (less\n"
    "                           memory when the staging would meet the activations); auto (default):\n"
    "                           on, unless it raises the planned peak\n"
    "  -h, --help               show this help\n";

static const char *usage_inspect =
    "usage: ckptc inspect MODEL.onnx [--dim NAME=N]... [--json]\n"
    "\n"
    "  --dim NAME=N   bind the symbolic input dimension NAME (an ONNX dim_param) to N\n"
    "  --json         print a JSON document instead of text\n"
    "  -h, --help     show this help\n";

static int user_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int user_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ckptc: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return EXIT_USER;
}

static void print_diag(const ck_diag *d, const char *path) {
    for (int i = 0; i < d->n; i++) fprintf(stderr, "ckptc: error: %s: %s\n", path, d->msg[i]);
}

/* The --dim names parse_dim copies; freed at exit, whichever way a command returns. */
static char *g_dim_names[128];
static int g_n_dim_names;
static void free_dim_names(void) {
    for (int k = 0; k < g_n_dim_names; k++) free(g_dim_names[k]);
    g_n_dim_names = 0;
}

/* NAME=N with N a positive integer */
static bool parse_dim(const char *arg, ck_dim_binding *b) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) return false;
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (errno || end == eq + 1 || *end || v < 1 || v > (1ll << 40)) return false;
    if (g_n_dim_names == (int)(sizeof g_dim_names / sizeof g_dim_names[0])) return false;
    char *name = strndup(arg, (size_t)(eq - arg));
    if (!name) return false;
    g_dim_names[g_n_dim_names++] = name;
    b->name = name;
    b->value = v;
    return true;
}

/* ---------------------------------------------------------------- printing */

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

/* ---------------------------------------------------------------- commands */

static int cmd_inspect(int argc, char **argv) {
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

/* Where the generated Makefile finds libckrt: this build tree when ckptc runs from it, else the
 * prefix ckptc is installed under (PREFIX/bin/ckptc -> PREFIX/lib, PREFIX/include/ckptc), else
 * the configured install prefix. */
static void ckrt_paths(char *inc, char *lib, size_t n) {
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[k > 0 ? k : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    char probe[4200];
    struct stat st;
    snprintf(probe, sizeof probe, "%s/runtime/libckrt.a", exe);
    if (k > 0 && strcmp(exe, CK_BINARY_DIR) == 0 && stat(probe, &st) == 0) {
        snprintf(inc, n, "%s/runtime", CK_SOURCE_DIR);
        snprintf(lib, n, "%s/runtime", CK_BINARY_DIR);
        return;
    }
    slash = strrchr(exe, '/');
    if (k > 0 && slash) {
        *slash = 0; /* PREFIX */
        snprintf(probe, sizeof probe, "%s/lib/libckrt.a", exe);
        if (stat(probe, &st) == 0) {
            snprintf(inc, n, "%s/include/ckptc", exe);
            snprintf(lib, n, "%s/lib", exe);
            return;
        }
    }
    snprintf(inc, n, "%s/include/ckptc", CK_INSTALL_PREFIX);
    snprintf(lib, n, "%s/lib", CK_INSTALL_PREFIX);
}

/* Load and every pass up to the memory plan. */
static ck_status build_plan(const char *path, const ck_load_options *lo, const ck_options *o, ck_graph **out, ck_diag *d) {
    ck_graph *g = NULL;
    ck_status st = ck_frontend_load(path, lo, &g, d);
    if (!st) st = ck_pass_lower(g, o, d);
    if (!st && !o->infer) st = ck_pass_loss(g, o, d);
    if (!st && !o->infer) st = ck_pass_autodiff(g, o, d);
    if (!st && !o->infer) st = ck_pass_optimizer(g, o, d);
    if (!st && !o->infer) st = ck_pass_checkpoint(g, o, d);
    if (!st && !o->infer) st = ck_pass_data_parallel(g, o, d);
    if (!st && !o->infer) st = ck_pass_early_update(g, o, d);
    if (!st) st = ck_graph_verify(g, d);
    if (!st) st = ck_codegen_check(g, o, d); /* reject what cannot run before any work */
    if (!st) st = ck_pass_plan(g, o, d);
    if (!st) st = ck_graph_verify(g, d);
    *out = g;
    return st;
}

/* --explain: what happens to every forward activation the backward needs, and why. */
static void explain(const ck_graph *g) {
    int nid = g->next_value_id;
    /* per forward node id: its recompute clone, if any */
    const ck_node **clone = calloc((size_t)g->next_node_id + 1, sizeof *clone);
    int *readers = calloc((size_t)nid + 1, sizeof *readers), *clone_readers = calloc((size_t)nid + 1, sizeof *clone_readers);
    bool *offloaded = calloc((size_t)nid + 1, 1);
    if (!clone || !readers || !clone_readers || !offloaded) return;
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->recompute_of) clone[n->recompute_of - 1] = n;
        for (int k = 0; k < n->n_in; k++) {
            const ck_value *v = n->in[k];
            if (!v || n->phase == CK_PHASE_FORWARD) continue;
            if (n->op == CK_OP_RELOAD) continue;
            if (n->recompute_of) clone_readers[v->id]++;
            else readers[v->id]++;
        }
        if (n->op == CK_OP_OFFLOAD) offloaded[n->in[0]->id] = true;
    }
    printf("\n%-11s %12s  %-40s %s\n", "activation", "bytes", "tensor", "why");
    int64_t tot[4] = {0};
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->phase != CK_PHASE_FORWARD || n->recompute_of || n->op == CK_OP_OFFLOAD) continue;
        for (int k = 0; k < n->n_out; k++) {
            const ck_value *v = n->out[k];
            if (!v || v->alias) continue;
            const char *what;
            char why[600];
            int64_t b = (int64_t)ck_value_bytes(v);
            if (offloaded[v->id]) {
                what = "offloaded";
                snprintf(why, sizeof why, "a segment checkpoint: to the host pool after '%s', reloaded one segment ahead", n->name);
                tot[2] += b;
            } else if (clone_readers[v->id]) {
                what = "kept";
                snprintf(why, sizeof why, "a segment checkpoint: recomputing its segment starts from it");
                tot[0] += b;
            } else if (readers[v->id]) {
                what = "kept";
                snprintf(why, sizeof why, "the backward reads it");
                tot[0] += b;
            } else if (clone[n->id]) {
                what = "recomputed";
                snprintf(why, sizeof why, "freed after the forward; '%s' reruns it before its segment's backward", clone[n->id]->name);
                tot[1] += b;
            } else {
                continue; /* the backward never needs it: freed at its last forward use */
            }
            printf("%-11s %12lld  %-40.40s %s\n", what, (long long)b, v->name, why);
        }
    }
    printf("total: kept %lld bytes, recomputed %lld bytes, offloaded %lld bytes\n", (long long)tot[0], (long long)tot[1],
           (long long)tot[2]);
    free(clone), free(readers), free(clone_readers), free(offloaded);
}

static void print_plan(const ck_graph *g) {
    const ck_mem_plan *p = &g->plan;
    printf("planned peak %lld bytes (device); host pool %lld bytes\n", (long long)p->arena_bytes, (long long)p->host_bytes);
    for (int k = 0; k < CK_MEM_COUNT; k++)
        if (p->bytes[k]) printf("  %-18s %12lld\n", ck_mem_cat_name((ck_mem_cat)k), (long long)p->bytes[k]);
    printf("  at the peak: saved activations %lld, transient %lld\n", (long long)p->saved_bytes, (long long)p->transient_bytes);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == CK_OP_GRAD_ALLREDUCE) {
            int until = g->nodes[i]->ws_last;
            printf("data parallel: bucket %lld of %lld (%d gradients): all-reduce staging %lld bytes, steps %d..%d%s\n",
                   (long long)ck_attr_int(g->nodes[i], "bucket", 0), (long long)ck_attr_int(g->nodes[i], "buckets", 1),
                   g->nodes[i]->n_in, (long long)g->nodes[i]->ws_bytes, i, until,
                   i <= p->peak_step && p->peak_step <= until ? ", live at the peak" : "");
        }
    int n_up = 0, first_up = -1, last_bwd = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i]->phase == CK_PHASE_UPDATE) n_up++, first_up = first_up < 0 ? i : first_up;
        else if (g->nodes[i]->phase == CK_PHASE_BACKWARD) last_bwd = i;
    }
    if (n_up)
        printf("updates: %d, the first at step %d; %s\n", n_up, first_up,
               first_up < last_bwd ? "each right after its gradient is final" : "after the whole backward");
    if (g->n_nodes) {
        const ck_node *pn = g->nodes[p->peak_step];
        printf("peak at step %d of %d: '%s' (%s)\n", p->peak_step, g->n_nodes, pn->name, pn->recompute_of ? "recompute"
               : pn->phase == CK_PHASE_FORWARD ? "forward" : pn->phase == CK_PHASE_BACKWARD ? "backward" : "update");
    }
    for (int i = 0; i < g->n_segments; i++)
        printf("segment %-16s %s .. %s, checkpoints %lld bytes\n", g->segments[i].name, g->segments[i].first_node,
               g->segments[i].last_node, (long long)g->segments[i].saved_bytes);
}

/* budget:SIZE. Candidates are the blocks policy's segments (cut points when names carry no
 * blocks), ordered by activation bytes per FLOP (most memory for the least recompute first; ties
 * in graph order). The recompute set is always a prefix of that order: the shortest prefix whose
 * plan fits, searched with full plans (the planner's own numbers, fragmentation included, decide,
 * not an estimate): a first guess from the segments' byte counts, then bisection between a prefix
 * that does not fit and one that does. Peaks are not strictly monotone in the prefix length
 * (placement), so the bisection may stop at a slightly longer prefix than the shortest; at most 9
 * plans in all (none, all, 7 tries) instead of one per segment. */
static const ck_graph *budget_cands;
static int by_bytes_per_flop(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    double sa = (double)budget_cands->cand_bytes[a] / (double)(budget_cands->cand_flops[a] + 1);
    double sb = (double)budget_cands->cand_bytes[b] / (double)(budget_cands->cand_flops[b] + 1);
    return sa > sb ? -1 : sa < sb ? 1 : a - b;
}

static ck_status plan_budget(const char *path, const ck_load_options *lo, const ck_options *o, ck_graph **out, ck_diag *d) {
    ck_options t = *o;
    t.checkpoint = CK_CKPT_NONE;
    ck_graph *best = NULL, *g = NULL;
    ck_status st = build_plan(path, lo, &t, &best, d);
    if (st || best->plan.arena_bytes <= o->budget) {
        *out = best;
        if (!st) printf("ckptc: budget %lld bytes: met without recompute (peak %lld)\n", (long long)o->budget,
                        (long long)best->plan.arena_bytes);
        return st;
    }
    int64_t none_peak = best->plan.arena_bytes;
    t = *o; /* all candidates recomputed, to learn them */
    st = build_plan(path, lo, &t, &g, d);
    if (st) {
        ck_graph_free(best);
        *out = g;
        return st;
    }
    int nc = g->n_candidates;
    int *order = malloc(sizeof(int) * (size_t)(nc + 1));
    bool *set = calloc((size_t)nc + 1, 1);
    for (int k = 0; k < nc; k++) order[k] = k;
    budget_cands = g;
    qsort(order, (size_t)nc, sizeof *order, by_bytes_per_flop);
    ck_graph *all = g;
    int chosen = 0;
    if (all->plan.arena_bytes <= o->budget) {
        /* The shortest prefix of that order that fits, searched with the real planner as judge:
         * the first guess covers the excess with the segments' own byte counts, then bisection
         * between a prefix that does not fit (none: 0) and one that does (all: nc). A recompute
         * set is a prefix, so a larger budget never gets a longer one; at most 7 plans. */
        int no_fit = 0, fit = nc, k = 0;
        int64_t freed = 0, need = none_peak - o->budget;
        while (k < nc && freed < need) freed += all->cand_bytes[order[k++]];
        for (int round = 0; round < 7 && fit - no_fit > 1; round++) {
            if (round > 0 || k <= no_fit || k >= fit) k = no_fit + (fit - no_fit) / 2;
            for (int j = 0; j < nc; j++) set[order[j]] = j < k;
            t = *o;
            t.recompute_set = set, t.n_recompute_set = nc;
            ck_diag d2 = {0};
            g = NULL;
            if (build_plan(path, lo, &t, &g, &d2) == CK_OK && g->plan.arena_bytes <= o->budget) {
                ck_graph_free(best);
                best = g;
                chosen = fit = k;
            } else {
                no_fit = k;
                ck_graph_free(g);
            }
            ck_diag_clear(&d2);
        }
    }
    if (all->plan.arena_bytes < best->plan.arena_bytes && best->plan.arena_bytes > o->budget && all->plan.arena_bytes <= o->budget) {
        ck_graph_free(best);
        best = all;
        all = NULL;
        chosen = nc;
    }
    st = CK_OK;
    if (best->plan.arena_bytes > o->budget) {
        const ck_graph *m = all && all->plan.arena_bytes < best->plan.arena_bytes ? all : best;
        ck_diag_add(d, "budget:%lld cannot be met: the smallest planned peak ckptc reaches is %lld bytes (no recompute: %lld)%s",
                    (long long)o->budget, (long long)m->plan.arena_bytes, (long long)none_peak,
                    o->offload ? "" : "; --offload may lower it");
        const ck_mem_plan *p = &m->plan;
        ck_diag_add(d, "at that peak (step %d, '%s'): params %lld, grads %lld, optimizer state %lld, activations %lld, workspace %lld bytes",
                    p->peak_step, m->n_nodes ? m->nodes[p->peak_step]->name : "", (long long)p->bytes[CK_MEM_PARAMS],
                    (long long)p->bytes[CK_MEM_GRADS], (long long)p->bytes[CK_MEM_OPT_STATE],
                    (long long)p->bytes[CK_MEM_ACTIVATIONS], (long long)p->bytes[CK_MEM_WORKSPACE]);
        for (int i = 0, shown = 0; i < m->n_values && shown < 5; i++) {
            const ck_value *v = m->values[i];
            if (!v->producer || v->alias || v->host || v->live_first > p->peak_step || v->live_last < p->peak_step) continue;
            if ((int64_t)ck_value_bytes(v) * 20 < p->bytes[CK_MEM_ACTIVATIONS]) continue; /* the big ones */
            ck_diag_add(d, "  live at the peak: '%s' (%lld bytes) from '%s'", v->name, (long long)ck_value_bytes(v), v->producer->name);
            shown++;
        }
        st = CK_ERR_USAGE;
    } else {
        printf("ckptc: budget %lld bytes: recomputing %d of %d segments; planned peak %lld (no recompute: %lld)\n",
               (long long)o->budget, chosen, nc, (long long)best->plan.arena_bytes, (long long)none_peak);
    }
    if (all && all != best) ck_graph_free(all);
    free(order), free(set);
    *out = best;
    return st;
}

/* --data-parallel without --dp-bucket: when a communication staging is live at the peak (they
 * live while gradients pile up, so after checkpointing they often are), halve the bucket while
 * that lowers the planned peak: more, smaller messages instead of more memory. The largest bucket
 * reaching the lowest peak is kept (not below 64 KiB). Each try is a full plan, so fragmentation
 * is counted. Returns the message saying so ("" when the bucket stayed). */
typedef struct dp_fit {
    char msg[300];
} dp_fit;
static dp_fit fit_dp_bucket(const char *path, const ck_load_options *lo, const ck_options *o, ck_graph **g) {
    dp_fit r = {""};
    if (!o->data_parallel || o->dp_bucket_bytes || o->checkpoint == CK_CKPT_BUDGET || !(*g)->loss) return r;
    const ck_node *ar = NULL;
    int64_t bucket = 0;
    for (int i = 0; i < (*g)->n_nodes; i++) {
        const ck_node *n = (*g)->nodes[i];
        if (n->op != CK_OP_GRAD_ALLREDUCE) continue;
        if (4 * ck_attr_int(n, "staging_floats", 0) > bucket) bucket = 4 * ck_attr_int(n, "staging_floats", 0);
        if (i <= (*g)->plan.peak_step && (*g)->plan.peak_step <= n->ws_last) ar = n;
    }
    if (!ar) return r;
    ck_options t = *o;
    t.offload = o->offload && (*g)->plan.host_bytes > 0; /* as compile() settled it */
    int64_t first_peak = (*g)->plan.arena_bytes, first_bucket = bucket;
    while (bucket / 2 >= (64 << 10)) {
        t.dp_bucket_bytes = bucket / 2;
        ck_graph *g2 = NULL;
        ck_diag d2 = {0};
        bool lower = build_plan(path, lo, &t, &g2, &d2) == CK_OK && g2->plan.arena_bytes < (*g)->plan.arena_bytes;
        ck_diag_clear(&d2);
        if (!lower) {
            ck_graph_free(g2);
            break;
        }
        ck_graph_free(*g);
        *g = g2;
        bucket /= 2;
    }
    if (bucket != first_bucket)
        snprintf(r.msg, sizeof r.msg, "ckptc: --data-parallel: the all-reduce staging held the peak; bucket %lld bytes instead of "
                 "%lld: planned peak %lld bytes instead of %lld (--dp-bucket SIZE to choose)\n", (long long)bucket,
                 (long long)first_bucket, (long long)(*g)->plan.arena_bytes, (long long)first_peak);
    return r;
}

/* --data-parallel: the bucket size (fit_dp_bucket), then with --dp-overlap=auto the overlapped
 * schedule (each bucket averaged as soon as its gradients are final) unless all buckets after the
 * backward plan a lower peak (their stagings then meet no activations). Each variant is full
 * plans with its own bucket fit; what was chosen is printed. */
static void plan_data_parallel(const char *path, const ck_load_options *lo, const ck_options *o, ck_graph **g) {
    dp_fit fit = fit_dp_bucket(path, lo, o, g);
    if (o->data_parallel && o->dp_overlap < 0 && o->checkpoint != CK_CKPT_BUDGET && (*g)->loss) {
        ck_options t = *o;
        t.offload = o->offload && (*g)->plan.host_bytes > 0; /* as compile() settled it */
        t.dp_overlap = 0;
        ck_graph *g2 = NULL;
        ck_diag d2 = {0};
        if (build_plan(path, lo, &t, &g2, &d2) == CK_OK) {
            dp_fit fit2 = fit_dp_bucket(path, lo, &t, &g2);
            if (g2->plan.arena_bytes < (*g)->plan.arena_bytes) {
                printf("%sckptc: --data-parallel: averaging each bucket during the backward would raise the planned peak "
                       "(%lld > %lld bytes); the buckets are averaged after the backward (--dp-overlap=on to overlap anyway)\n",
                       fit2.msg, (long long)(*g)->plan.arena_bytes, (long long)g2->plan.arena_bytes);
                fit.msg[0] = 0;
                ck_graph_free(*g);
                *g = g2;
                g2 = NULL;
            }
        }
        ck_graph_free(g2);
        ck_diag_clear(&d2);
    }
    printf("%s", fit.msg);
}

/* The whole compiler: load, passes, codegen. */
static ck_status compile(const char *path, const ck_load_options *lo, const ck_options *o, const ck_codegen_options *co,
                         ck_diag *d) {
    ck_graph *g = NULL;
    ck_status st = o->checkpoint == CK_CKPT_BUDGET ? plan_budget(path, lo, o, &g, d) : build_plan(path, lo, o, &g, d);
    if (!st && o->offload && o->checkpoint != CK_CKPT_BUDGET) {
        /* --offload must never raise the device peak: the placement heuristic can lose a few
         * bytes to fragmentation that the shorter lifetimes do not win back; then keep the
         * checkpoints on the device */
        ck_options keep = *o;
        keep.offload = false;
        ck_graph *g2 = NULL;
        ck_diag d2 = {0};
        if (build_plan(path, lo, &keep, &g2, &d2) == CK_OK && g2->plan.arena_bytes < g->plan.arena_bytes) {
            printf("ckptc: --offload would raise the planned device peak (%lld > %lld bytes); the checkpoints stay on the "
                   "device\n", (long long)g->plan.arena_bytes, (long long)g2->plan.arena_bytes);
            ck_graph_free(g);
            g = g2;
            g2 = NULL;
        }
        ck_graph_free(g2);
        ck_diag_clear(&d2);
    }
    if (!st) plan_data_parallel(path, lo, o, &g);
    if (!st && co->explain) explain(g);
    if (!st && co->plan_only) {
        print_plan(g);
        ck_graph_free(g);
        return CK_OK;
    }
    if (!st) st = ck_codegen(g, o, co, d);
    if (!st) {
        const int64_t *b = g->plan.bytes;
        printf("ckptc: wrote %s/{%s.c,weights.bin,plan.json,Makefile}: %d nodes", co->out_dir, co->program_name, g->n_nodes);
        if (g->loss) printf(", %d trainable parameters, %d segments recomputed", g->n_train, g->n_segments);
        printf("\n       planned peak %lld bytes: params %lld, inputs %lld, activations %lld, workspace %lld", (long long)g->plan.arena_bytes,
               (long long)b[CK_MEM_PARAMS], (long long)b[CK_MEM_INPUTS], (long long)b[CK_MEM_ACTIVATIONS], (long long)b[CK_MEM_WORKSPACE]);
        if (g->loss) printf(", grads %lld, optimizer state %lld", (long long)b[CK_MEM_GRADS], (long long)b[CK_MEM_OPT_STATE]);
        if (g->plan.host_bytes) printf("; host pool %lld bytes (%lld offloaded per step)", (long long)g->plan.host_bytes, (long long)g->plan.offload_bytes);
        printf("\n");
    }
    ck_graph_free(g);
    return st;
}

static bool parse_double(const char *s, double lo, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo) || v > 1e30) return false;
    *out = v;
    return true;
}

static int cmd_compile(int argc, char **argv) {
    enum { O_LOSS = 1000, O_OUTPUT, O_LABEL, O_FREEZE, O_OPT, O_LR, O_MOM, O_WD, O_B1, O_B2, O_EPS, O_CKPT, O_BLOCK_RE, O_OFFLOAD,
           O_PLAN_ONLY, O_EXPLAIN, O_BN_VAR, O_DP, O_DP_BUCKET, O_DP_OVERLAP, O_UPDATE_AT_END };
    static const struct option opts[] = {{"out-dir", required_argument, 0, 'o'}, {"infer", no_argument, 0, 'I'},
                                         {"dim", required_argument, 0, 'd'}, {"disable-dropout", no_argument, 0, 'D'},
                                         {"loss", required_argument, 0, O_LOSS}, {"output", required_argument, 0, O_OUTPUT},
                                         {"label-name", required_argument, 0, O_LABEL}, {"freeze", required_argument, 0, O_FREEZE},
                                         {"optimizer", required_argument, 0, O_OPT}, {"lr", required_argument, 0, O_LR},
                                         {"momentum", required_argument, 0, O_MOM}, {"weight-decay", required_argument, 0, O_WD},
                                         {"beta1", required_argument, 0, O_B1}, {"beta2", required_argument, 0, O_B2},
                                         {"eps", required_argument, 0, O_EPS}, {"checkpoint", required_argument, 0, O_CKPT},
                                         {"block-regex", required_argument, 0, O_BLOCK_RE}, {"offload", no_argument, 0, O_OFFLOAD},
                                         {"plan-only", no_argument, 0, O_PLAN_ONLY}, {"explain", no_argument, 0, O_EXPLAIN},
                                         {"bn-running-var", required_argument, 0, O_BN_VAR},
                                         {"data-parallel", no_argument, 0, O_DP}, {"dp-bucket", required_argument, 0, O_DP_BUCKET},
                                         {"dp-overlap", required_argument, 0, O_DP_OVERLAP},
                                         {"update-at-end", no_argument, 0, O_UPDATE_AT_END},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    ck_dim_binding dims[64];
    int n_dims = 0, c;
    ck_options o = CK_OPTIONS_DEFAULT;
    const char *out = NULL;
    bool plan_only = false, explain_it = false, dp_overlap_given = false;
    int dp_overlap = -1; /* --dp-overlap: -1 auto, 1 on, 0 off */
    optind = 1;
    opterr = 0;
    int li = -1;
    char flagbuf[64];
    while ((c = getopt_long(argc, argv, ":ho:", opts, &li)) != -1) {
        /* the flag as typed, for messages: its value may be in the next argument */
        const char *flag = argv[optind - 1];
        if (li >= 0 && c != '?' && c != ':') {
            snprintf(flagbuf, sizeof flagbuf, "--%s", opts[li].name);
            flag = flagbuf;
        }
        li = -1;
        switch (c) {
        case 'o': out = optarg; break;
        case 'I': o.infer = true; break;
        case 'D': o.disable_dropout = true; break;
        case 'd':
            if (n_dims == 64) return user_error("--dim: too many bindings (at most 64)");
            if (!parse_dim(optarg, &dims[n_dims])) return user_error("--dim '%s': expected NAME=N with N a positive integer", optarg);
            n_dims++;
            break;
        case O_LOSS:
            if (!strcmp(optarg, "cross_entropy")) o.loss = CK_LOSS_CROSS_ENTROPY;
            else if (!strcmp(optarg, "mse")) o.loss = CK_LOSS_MSE;
            else if (!strcmp(optarg, "output")) o.loss = CK_LOSS_OUTPUT;
            else return user_error("--loss '%s': expected cross_entropy, mse or output", optarg);
            break;
        case O_OUTPUT: o.output = optarg; break;
        case O_LABEL:
            if (!*optarg) return user_error("--label-name: the name is empty");
            o.label_name = optarg;
            break;
        case O_FREEZE: o.freeze = optarg; break;
        case O_OPT:
            if (!strcmp(optarg, "sgd")) o.optimizer = CK_OPT_SGD;
            else if (!strcmp(optarg, "momentum")) o.optimizer = CK_OPT_MOMENTUM;
            else if (!strcmp(optarg, "adamw")) o.optimizer = CK_OPT_ADAMW;
            else return user_error("--optimizer '%s': expected sgd, momentum or adamw", optarg);
            break;
        case O_LR: case O_MOM: case O_WD: case O_B1: case O_B2: case O_EPS: {
            double v;
            if (!parse_double(optarg, 0.0, &v)) return user_error("%s '%s': expected a non-negative number", flag, optarg);
            if ((c == O_B1 || c == O_B2 || c == O_MOM) && v >= 1.0) return user_error("%s '%s': must be below 1", flag, optarg);
            if (c == O_LR) o.lr = v;
            else if (c == O_MOM) o.momentum = v;
            else if (c == O_WD) o.weight_decay = v;
            else if (c == O_B1) o.beta1 = v;
            else if (c == O_B2) o.beta2 = v;
            else o.eps = v;
            break;
        }
        case O_CKPT:
            o.policy_name = optarg;
            if (!strcmp(optarg, "none")) o.checkpoint = CK_CKPT_NONE;
            else if (!strcmp(optarg, "blocks")) o.checkpoint = CK_CKPT_BLOCKS;
            else if (!strcmp(optarg, "sqrt")) o.checkpoint = CK_CKPT_SQRT;
            else if (!strncmp(optarg, "every:", 6)) {
                char *end;
                long k = strtol(optarg + 6, &end, 10);
                if (end == optarg + 6 || *end || k < 1 || k > 1000000) return user_error("--checkpoint '%s': every:K needs K >= 1", optarg);
                o.checkpoint = CK_CKPT_EVERY, o.checkpoint_k = (int)k;
            } else if (!strncmp(optarg, "budget:", 7)) {
                if (!ckrt_parse_size(optarg + 7, &o.budget)) return user_error("--checkpoint '%s': budget:SIZE needs a size such as 512MiB, 2GiB or 1000000", optarg);
                o.checkpoint = CK_CKPT_BUDGET;
            } else if (!strncmp(optarg, "nodes:", 6) && optarg[6]) {
                o.checkpoint = CK_CKPT_NODES, o.checkpoint_regex = optarg + 6;
            } else {
                return user_error("--checkpoint '%s': expected none, blocks, every:K, sqrt or nodes:REGEX", optarg);
            }
            break;
        case O_BLOCK_RE: o.block_regex = optarg; break;
        case O_OFFLOAD: o.offload = true; break;
        case O_PLAN_ONLY: plan_only = true; break;
        case O_BN_VAR:
            if (!strcmp(optarg, "unbiased")) o.bn_unbiased_var = 1;
            else if (!strcmp(optarg, "biased")) o.bn_unbiased_var = 0;
            else if (!strcmp(optarg, "auto")) o.bn_unbiased_var = -1;
            else return user_error("--bn-running-var '%s': expected biased (the ONNX spec), unbiased (PyTorch) or auto", optarg);
            break;
        case O_EXPLAIN: explain_it = true; break;
        case O_DP: o.data_parallel = true; break;
        case O_DP_OVERLAP:
            if (!strcmp(optarg, "auto")) dp_overlap = -1;
            else if (!strcmp(optarg, "on")) dp_overlap = 1;
            else if (!strcmp(optarg, "off")) dp_overlap = 0;
            else return user_error("--dp-overlap '%s': expected auto, on or off", optarg);
            dp_overlap_given = true;
            break;
        case O_UPDATE_AT_END: o.update_at_end = true; break;
        case O_DP_BUCKET:
            if (!ckrt_parse_size(optarg, &o.dp_bucket_bytes) || o.dp_bucket_bytes < 1024 || o.dp_bucket_bytes > (1ll << 30))
                return user_error("--dp-bucket '%s': expected a size from 1KiB to 1GiB, e.g. 25MiB", optarg);
            break;
        case 'h': fputs(usage_compile, stdout); return 0;
        case ':': return user_error("option '%s' needs a value", flag);
        default: return user_error("unknown option '%s' (see ckptc --help)", flag);
        }
    }
    if (optind >= argc) return user_error("missing MODEL.onnx (see ckptc --help)");
    if (o.infer && (o.checkpoint != CK_CKPT_NONE || o.offload)) return user_error("--checkpoint and --offload apply to training programs, not --infer");
    if (o.offload && o.checkpoint == CK_CKPT_NONE) return user_error("--offload moves the checkpoints of a --checkpoint policy to the host; choose one (e.g. --checkpoint=blocks)");
    if (o.infer && o.data_parallel) return user_error("--data-parallel applies to training programs, not --infer");
    if (o.infer && o.update_at_end) return user_error("--update-at-end applies to training programs, not --infer");
    if (o.dp_bucket_bytes && !o.data_parallel) return user_error("--dp-bucket sizes the buckets of --data-parallel; add it");
    if (dp_overlap_given && !o.data_parallel) return user_error("--dp-overlap schedules the buckets of --data-parallel; add it");
    /* auto plans both schedules; under budget:SIZE (whose search is all full plans already) the
     * memory-first one */
    o.dp_overlap = dp_overlap < 0 && o.checkpoint == CK_CKPT_BUDGET ? 0 : dp_overlap;
    if (optind + 1 < argc) return user_error("unexpected argument '%s' (one model at a time)", argv[optind + 1]);
    if (!out && !plan_only) return user_error("missing -o DIR: where to write the program (or --plan-only)");
    const char *path = argv[optind];
    char inc[4200], lib[4200];
    ckrt_paths(inc, lib, sizeof inc);
    if (o.data_parallel && !plan_only) { /* the MPI transport is built only where CMake found MPI */
        char mpi_lib[4300];
        struct stat sb;
        snprintf(mpi_lib, sizeof mpi_lib, "%s/libckrt_mpi.a", lib);
        if (stat(mpi_lib, &sb) != 0)
            return user_error("--data-parallel needs libckrt_mpi.a, which this ckptc's build does not have (%s): it is built "
                              "when CMake finds MPI (Debian: apt-get install openmpi-bin libopenmpi-dev, then reconfigure)", mpi_lib);
    }
    ck_codegen_options co = {.out_dir = out, .command_line = g_cmdline, .ckrt_include = inc, .ckrt_lib = lib,
                             .program_name = o.infer ? "model" : "trainer", .plan_only = plan_only, .explain = explain_it};
    ck_load_options lo = {.dims = dims, .n_dims = n_dims};
    ck_diag d = {0};
    ck_status st = compile(path, &lo, &o, &co, &d);
    print_diag(&d, path);
    ck_diag_clear(&d);
    return st ? EXIT_USER : 0;
}

static int cmd_compare(int argc, char **argv) {
    static const struct option opts[] = {{"timeline", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *svg = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 't': svg = optarg; break;
        case 'h':
            fputs("usage: ckptc compare A.json B.json ... [--timeline FILE.svg]\n\n"
                  "Side-by-side table of trainer reports (--report), ratios to the first; --timeline draws\n"
                  "their planned memory over the step in one SVG.\n", stdout);
            return 0;
        case ':': return user_error("option '%s' needs a value", argv[optind - 1]);
        default: return user_error("unknown option '%s' (see ckptc compare --help)", argv[optind - 1]);
        }
    }
    if (optind >= argc) return user_error("compare: give at least one report (see ckptc compare --help)");
    return ck_compare(argc - optind, argv + optind, svg);
}

/* CKPTC_STATS=1: the weight-byte counters (ck_io_stats) and the peak resident set, one line on
 * stderr at exit, for tests and benchmarks (not a user interface). The peak is VmHWM, this
 * address space's own high-water mark: getrusage's ru_maxrss would also count the process that
 * forked this one (the maximum is carried across exec). */
static void print_stats(void) {
    long hwm = -1;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &hwm) == 1) break;
    if (f) fclose(f);
    fprintf(stderr, "ckptc: stats: mapped_files=%lld mapped_bytes=%lld copied_bytes=%lld resident_bytes=%lld "
                    "streamed_bytes=%lld stream_buffer=%lld peak_rss_kib=%ld\n",
            (long long)ck_stats.mapped_files, (long long)ck_stats.mapped_bytes, (long long)ck_stats.copied_bytes,
            (long long)ck_stats.resident_bytes, (long long)ck_stats.streamed_bytes, (long long)ck_stats.stream_buffer, hwm);
}

int main(int argc, char **argv) {
    atexit(free_dim_names);
    if (getenv("CKPTC_STATS") && *getenv("CKPTC_STATS")) {
        ck_stats.enabled = true;
        atexit(print_stats);
    }
    for (int i = 0; i < argc; i++)
        snprintf(g_cmdline + strlen(g_cmdline), sizeof g_cmdline - strlen(g_cmdline), "%s%s", i ? " " : "",
                 i ? argv[i] : "ckptc");
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USER;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        fputs(usage_main, stdout);
        return 0;
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("ckptc %s (ONNX opsets %d-%d)\n", CK_VERSION, CK_OPSET_MIN, CK_OPSET_MAX);
        return 0;
    }
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "compare")) return cmd_compare(argc - 1, argv + 1);
    if (cmd[0] == '-') return user_error("unknown option '%s' (see ckptc --help)", cmd);
    if (strlen(cmd) > 5 && !strcmp(cmd + strlen(cmd) - 5, ".onnx")) return cmd_compile(argc, argv);
    return user_error("unknown command '%s' (see ckptc --help)", cmd);
}
