/* ckptc.c — the command line: parses flags, calls the layers in order, prints results.
 *
 *   ckptc MODEL.onnx --infer -o DIR [--dim NAME=N]... [--disable-dropout]
 *   ckptc inspect MODEL.onnx [--dim NAME=N]... [--json]
 *
 * compile() is the whole compiler in one straight-line function: load -> passes -> codegen.
 *
 * User errors (bad file, unsupported op, bad shape, bad flag) print one line per problem on
 * stderr, prefixed "ckptc: error:", and exit with status 2. Broken invariants abort through
 * CK_ASSERT. Nothing here knows about protobuf.
 */
#include "ck_codegen.h"
#include "ck_frontend.h"

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
    "  MODEL.onnx --infer -o DIR\n"
    "                       compile the forward pass into DIR (model.c, weights.bin, plan.json,\n"
    "                       Makefile); `make -C DIR` builds DIR/model\n"
    "  inspect MODEL.onnx   load a model, fold its shape subgraphs, infer every shape and print\n"
    "                       opset, producer, inputs/outputs, parameters, op histogram and nodes\n"
    "\n"
    "options:\n"
    "  -h, --help           show this help (or `ckptc COMMAND --help`)\n"
    "  -V, --version        print the version\n";

static const char *usage_compile =
    "usage: ckptc MODEL.onnx --infer -o DIR [--dim NAME=N]... [--disable-dropout]\n"
    "\n"
    "  -o, --output DIR     write model.c, weights.bin, plan.json and Makefile into DIR\n"
    "  --infer              compile the forward pass only (training is not available yet)\n"
    "  --dim NAME=N         bind the symbolic input dimension NAME to N\n"
    "  --disable-dropout    treat every Dropout as the identity\n"
    "  -h, --help           show this help\n";

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

/* NAME=N with N a positive integer */
static bool parse_dim(const char *arg, ck_dim_binding *b) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) return false;
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (errno || end == eq + 1 || *end || v < 1 || v > (1ll << 40)) return false;
    b->name = strndup(arg, (size_t)(eq - arg));
    b->value = v;
    return b->name != NULL;
}

/* ---------------------------------------------------------------- printing */

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void json_shape(FILE *f, const ck_value *v) {
    fputc('[', f);
    for (int i = 0; i < v->rank; i++) fprintf(f, i ? ",%lld" : "%lld", (long long)v->dims[i]);
    fputc(']', f);
}

static void json_value(FILE *f, const ck_value *v) {
    fprintf(f, "{\"name\":");
    json_str(f, v->name);
    fprintf(f, ",\"dtype\":\"%s\",\"shape\":", ck_dtype_name(v->dtype));
    json_shape(f, v);
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
    json_str(f, path);
    fprintf(f, ",\n  \"producer\": ");
    json_str(f, g->producer_name);
    fprintf(f, ",\n  \"producer_version\": ");
    json_str(f, g->producer_version);
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
        json_str(f, n->name);
        fprintf(f, ", \"op\": \"%s\", \"inputs\": [", ck_ops[n->op].onnx_name);
        for (int k = 0; k < n->n_in; k++) {
            fprintf(f, k ? ", " : "");
            if (n->in[k]) json_str(f, n->in[k]->name);
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
    for (int k = 0; k < n_dims; k++) free((void *)dims[k].name);
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

/* The whole compiler: load, passes, codegen. */
static ck_status compile(const char *path, const ck_load_options *lo, const ck_options *o, const ck_codegen_options *co,
                         ck_diag *d) {
    ck_graph *g = NULL;
    ck_status st = ck_frontend_load(path, lo, &g, d);
    if (!st) st = ck_codegen_check(g, o, d); /* reject what cannot run before any work */
    if (!st) st = ck_pass_plan(g, o, d);
    if (!st) st = ck_graph_verify(g, d);
    if (!st) st = ck_codegen(g, o, co, d);
    if (!st)
        printf("ckptc: wrote %s/{model.c,weights.bin,plan.json,Makefile}: %d nodes, arena %lld bytes "
               "(params %lld, inputs %lld, activations %lld, workspace %lld)\n",
               co->out_dir, g->n_nodes, (long long)g->plan.arena_bytes, (long long)g->plan.bytes[CK_MEM_PARAMS],
               (long long)g->plan.bytes[CK_MEM_INPUTS], (long long)g->plan.bytes[CK_MEM_ACTIVATIONS],
               (long long)g->plan.bytes[CK_MEM_WORKSPACE]);
    ck_graph_free(g);
    return st;
}

static int cmd_compile(int argc, char **argv) {
    static const struct option opts[] = {{"output", required_argument, 0, 'o'}, {"infer", no_argument, 0, 'I'},
                                         {"dim", required_argument, 0, 'd'},    {"disable-dropout", no_argument, 0, 'D'},
                                         {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    ck_dim_binding dims[64];
    int n_dims = 0, c;
    ck_options o = {0};
    const char *out = NULL;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'I': o.infer = true; break;
        case 'D': o.disable_dropout = true; break;
        case 'd':
            if (n_dims == 64) return user_error("--dim: too many bindings (at most 64)");
            if (!parse_dim(optarg, &dims[n_dims])) return user_error("--dim '%s': expected NAME=N with N a positive integer", optarg);
            n_dims++;
            break;
        case 'h': fputs(usage_compile, stdout); return 0;
        case ':': return user_error("option '%s' needs a value", argv[optind - 1]);
        default: return user_error("unknown option '%s' (see ckptc --help)", argv[optind - 1]);
        }
    }
    if (optind >= argc) return user_error("missing MODEL.onnx (see ckptc --help)");
    if (optind + 1 < argc) return user_error("unexpected argument '%s' (one model at a time)", argv[optind + 1]);
    if (!out) return user_error("missing -o DIR: where to write the program");
    if (!o.infer) return user_error("training programs are not available yet: pass --infer to compile the forward pass");
    const char *path = argv[optind];
    /* provenance: the command line as given (getopt has permuted argv by now) */
    char cmdline[4096];
    snprintf(cmdline, sizeof cmdline, "%s", g_cmdline);
    char inc[4200], lib[4200];
    ckrt_paths(inc, lib, sizeof inc);
    ck_codegen_options co = {.out_dir = out, .command_line = cmdline, .ckrt_include = inc, .ckrt_lib = lib, .program_name = "model"};
    ck_load_options lo = {.dims = dims, .n_dims = n_dims};
    ck_diag d = {0};
    ck_status st = compile(path, &lo, &o, &co, &d);
    for (int k = 0; k < n_dims; k++) free((void *)dims[k].name);
    print_diag(&d, path);
    ck_diag_clear(&d);
    return st ? EXIT_USER : 0;
}

int main(int argc, char **argv) {
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
    if (cmd[0] == '-') return user_error("unknown option '%s' (see ckptc --help)", cmd);
    if (strlen(cmd) > 5 && !strcmp(cmd + strlen(cmd) - 5, ".onnx")) return cmd_compile(argc, argv);
    return user_error("unknown command '%s' (see ckptc --help)", cmd);
}
