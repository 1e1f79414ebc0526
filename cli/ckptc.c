/* ckptc.c — the command line: parses flags and dispatches to the commands.
 *
 *   ckptc MODEL.onnx -o DIR [--infer] [--loss=...] [--optimizer=...] [--dim NAME=N]...
 *   ckptc inspect MODEL.onnx [--dim NAME=N]... [--json]      (inspect.c)
 *   ckptc compare A.json B.json ... [--timeline FILE.svg]     (compare.c)
 *
 * Compiling is ck_compile (compile.c), the whole compiler in one straight-line function:
 * load -> passes (the plan search in passes/search.c among them) -> codegen. Here are only the
 * flags, their checks and the messages about them.
 *
 * User errors (bad file, unsupported op, bad shape, bad flag) print one line per problem on
 * stderr, prefixed "ckptc: error:", and exit with status 2. Broken invariants abort through
 * CK_ASSERT. Nothing here knows about protobuf.
 */
#include "cli.h"
#include "compare.h"
#include "ck_frontend.h"
#include "ckrt_util.h"

#include <sys/stat.h>

#include <getopt.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    "  pareto MODEL.onnx [compile flags] [--svg FILE]\n"
    "                       planned peak against recompute FLOPs, from the smallest reachable peak\n"
    "                       to none's, with none, selective, blocks and sqrt marked\n"
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
    "  --disable-dropout        treat every Dropout as the identity; random ops (Bernoulli, Random*)\n"
    "                           return their expectation instead of drawing\n"
    "  --bn-running-var=KIND    BatchNorm's running variance update: biased (the ONNX spec), unbiased\n"
    "                           (PyTorch), or auto (default: unbiased when the producer is PyTorch)\n"
    "training:\n"
    "  --loss=KIND              cross_entropy (default; adds int64 input 'labels'), mse (adds float input\n"
    "                           'target'), output (the model's output is the loss)\n"
    "  --output NAME            the model output the loss reads (default: the first)\n"
    "  --label-name NAME        name of the labels/target input\n"
    "  --freeze REGEX           do not train parameters whose names match (POSIX extended regex); the\n"
    "                           parameters are the model's metadata_props 'ckptc.trainable' list (written\n"
    "                           by python/ckptc_export.py), else every float initializer (with a warning)\n"
    "  --optimizer=KIND         sgd, momentum or adamw (default adamw)\n"
    "  --lr X                   learning rate (default 1e-3)\n"
    "  --momentum X             momentum (default 0.9; --optimizer=momentum)\n"
    "  --weight-decay X         default 0 for sgd/momentum, 1e-2 for adamw\n"
    "  --beta1 X, --beta2 X     AdamW betas (default 0.9, 0.999)\n"
    "  --eps X                  AdamW epsilon (default 1e-8)\n"
    "  --update-at-end          run every parameter's update after the whole backward (default: each one\n"
    "                           as soon as its gradient is final and the old weights are last read, which\n"
    "                           frees the gradient there; same bits either way)\n"
    "  --grad-accum             plan a gradient accumulator per parameter (one gradient's size each, in the\n"
    "                           static region) so that the trainer's --grad-accum K sums K micro-batches\n"
    "                           before each update\n"
    "  --clip-grad-norm X       the trainer clips the global gradient L2 norm to X (its --clip-grad-norm\n"
    "                           overrides X); implies --update-at-end, since the norm needs every gradient\n"
    "                           before the first update (--plan-only says what that costs)\n"
    "checkpointing:\n"
    "  --checkpoint=POLICY      none (default), blocks (repeated module scopes such as /layers.N/),\n"
    "                           every:K (a segment every K cut points), sqrt (about sqrt(n) segments),\n"
    "                           nodes:REGEX (boundaries after matching nodes), budget:SIZE (the least\n"
    "                           recompute that plans the whole step within SIZE, e.g. 512MiB, 2GiB),\n"
    "                           selective (op-level: keep GEMM/Conv outputs, recompute the cheap ops\n"
    "                           and attention products from them where that frees memory), or\n"
    "                           POLICY,selective (both, e.g. blocks,selective)\n"
    "  --block-regex REGEX      what names a block for --checkpoint=blocks (the matched text is the key)\n"
    "  --max-recompute X        recompute at most X of the forward's FLOPs (0.75 or 75%): the lowest\n"
    "                           peak the policy reaches within that (its segmentations weighed, some\n"
    "                           segments kept instead of recomputed); trades memory for step time\n"
    "  --offload                keep the segments' checkpoints in a host pool, reloaded (one segment\n"
    "                           ahead) before their backward\n"
    "  --no-fuse                run every elementwise op as its own kernel (default: chains of float\n"
    "                           elementwise ops, e.g. bias add + GELU, scale + mask, run as one loop and\n"
    "                           their intermediates get no memory; same bits either way)\n"
    "  --no-fold-transposes     copy every Transpose (default: a MatMul reads or writes a transposed\n"
    "                           tensor in place, as attention's head split, K^T and their gradients do)\n"
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

int user_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ckptc: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return EXIT_USER;
}

void print_diag(const ck_diag *d, const char *path) {
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
bool parse_dim(const char *arg, ck_dim_binding *b) {
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

/* ---------------------------------------------------------------- commands */

static bool parse_double(const char *s, double lo, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo) || v > 1e30) return false;
    *out = v;
    return true;
}

/* What the compile command's flags set besides the compiler options. */
typedef struct compile_flags {
    ck_options o;
    ck_dim_binding dims[64];
    int n_dims;
    const char *out;
    bool plan_only, explain, dp_overlap_given;
    bool pareto; /* parsed for `ckptc pareto` */
    int dp_overlap; /* --dp-overlap: -1 auto, 1 on, 0 off */
} compile_flags;

enum { O_LOSS = 1000, O_OUTPUT, O_LABEL, O_FREEZE, O_OPT, O_LR, O_MOM, O_WD, O_B1, O_B2, O_EPS, O_CKPT, O_BLOCK_RE, O_OFFLOAD,
       O_PLAN_ONLY, O_EXPLAIN, O_BN_VAR, O_DP, O_DP_BUCKET, O_DP_OVERLAP, O_UPDATE_AT_END, O_GRAD_ACCUM, O_CLIP, O_NO_FUSE, O_NO_FOLD,
       O_MAX_RECOMPUTE };
static const struct option compile_opts[] = {{"out-dir", required_argument, 0, 'o'}, {"infer", no_argument, 0, 'I'},
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
                                             {"grad-accum", no_argument, 0, O_GRAD_ACCUM},
                                             {"no-fuse", no_argument, 0, O_NO_FUSE},
                                             {"no-fold-transposes", no_argument, 0, O_NO_FOLD},
                                             {"clip-grad-norm", required_argument, 0, O_CLIP},
                                             {"max-recompute", required_argument, 0, O_MAX_RECOMPUTE},
                                             {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

/* --lr, --momentum, --weight-decay, --beta1, --beta2, --eps. Returns -1, or the exit status. */
static int set_number(ck_options *o, int c, const char *flag, const char *arg) {
    double v;
    if (!parse_double(arg, 0.0, &v)) return user_error("%s '%s': expected a non-negative number", flag, arg);
    if ((c == O_B1 || c == O_B2 || c == O_MOM) && v >= 1.0) return user_error("%s '%s': must be below 1", flag, arg);
    if (c == O_LR) o->lr = v;
    else if (c == O_MOM) o->momentum = v;
    else if (c == O_WD) o->weight_decay = v;
    else if (c == O_B1) o->beta1 = v;
    else if (c == O_B2) o->beta2 = v;
    else o->eps = v;
    return -1;
}

/* --checkpoint=POLICY. Returns -1, or the exit status. */
static int set_checkpoint(ck_options *o, const char *arg) {
    o->policy_name = arg;
    /* selective: op-level recompute, alone or after a segment policy (POLICY,selective) */
    static char base[4096];
    size_t len = strlen(arg), sl = strlen(",selective");
    o->selective = false;
    if (!strcmp(arg, "selective")) {
        o->selective = true, o->checkpoint = CK_CKPT_NONE;
        return -1;
    }
    if (len > sl && len - sl < sizeof base && !strcmp(arg + len - sl, ",selective")) {
        memcpy(base, arg, len - sl);
        base[len - sl] = 0;
        if (!strcmp(base, "none") || !strncmp(base, "budget:", 7) || strchr(base, ','))
            return user_error("--checkpoint '%s': selective combines with blocks, every:K, sqrt or nodes:REGEX", arg);
        int r = set_checkpoint(o, base);
        o->policy_name = arg, o->selective = true;
        return r;
    }
    if (!strcmp(arg, "none")) o->checkpoint = CK_CKPT_NONE;
    else if (!strcmp(arg, "blocks")) o->checkpoint = CK_CKPT_BLOCKS;
    else if (!strcmp(arg, "sqrt")) o->checkpoint = CK_CKPT_SQRT;
    else if (!strncmp(arg, "every:", 6)) {
        char *end;
        long k = strtol(arg + 6, &end, 10);
        if (end == arg + 6 || *end || k < 1 || k > 1000000) return user_error("--checkpoint '%s': every:K needs K >= 1", arg);
        o->checkpoint = CK_CKPT_EVERY, o->checkpoint_k = (int)k;
    } else if (!strncmp(arg, "budget:", 7)) {
        if (!ckrt_parse_size(arg + 7, &o->budget)) return user_error("--checkpoint '%s': budget:SIZE needs a size such as 512MiB, 2GiB or 1000000", arg);
        o->checkpoint = CK_CKPT_BUDGET;
    } else if (!strncmp(arg, "nodes:", 6) && arg[6]) {
        o->checkpoint = CK_CKPT_NODES, o->checkpoint_regex = arg + 6;
    } else {
        return user_error("--checkpoint '%s': expected none, blocks, every:K, sqrt, nodes:REGEX, budget:SIZE, selective or POLICY,selective", arg);
    }
    return -1;
}

/* The choices among words: --loss, --optimizer, --bn-running-var, --dp-overlap. Returns -1, or
 * the exit status. */
static int set_choice(compile_flags *f, int c, const char *arg) {
    ck_options *o = &f->o;
    switch (c) {
    case O_LOSS:
        if (!strcmp(arg, "cross_entropy")) o->loss = CK_LOSS_CROSS_ENTROPY;
        else if (!strcmp(arg, "mse")) o->loss = CK_LOSS_MSE;
        else if (!strcmp(arg, "output")) o->loss = CK_LOSS_OUTPUT;
        else return user_error("--loss '%s': expected cross_entropy, mse or output", arg);
        break;
    case O_OPT:
        if (!strcmp(arg, "sgd")) o->optimizer = CK_OPT_SGD;
        else if (!strcmp(arg, "momentum")) o->optimizer = CK_OPT_MOMENTUM;
        else if (!strcmp(arg, "adamw")) o->optimizer = CK_OPT_ADAMW;
        else return user_error("--optimizer '%s': expected sgd, momentum or adamw", arg);
        break;
    case O_BN_VAR:
        if (!strcmp(arg, "unbiased")) o->bn_unbiased_var = 1;
        else if (!strcmp(arg, "biased")) o->bn_unbiased_var = 0;
        else if (!strcmp(arg, "auto")) o->bn_unbiased_var = -1;
        else return user_error("--bn-running-var '%s': expected biased (the ONNX spec), unbiased (PyTorch) or auto", arg);
        break;
    case O_DP_OVERLAP:
        if (!strcmp(arg, "auto")) f->dp_overlap = -1;
        else if (!strcmp(arg, "on")) f->dp_overlap = 1;
        else if (!strcmp(arg, "off")) f->dp_overlap = 0;
        else return user_error("--dp-overlap '%s': expected auto, on or off", arg);
        f->dp_overlap_given = true;
        break;
    }
    return -1;
}

/* One flag: getopt's c, as typed (flag) with its value (arg). Returns -1 to go on, or the exit
 * status. */
static int set_flag(compile_flags *f, int c, const char *flag, const char *arg) {
    ck_options *o = &f->o;
    switch (c) {
    case 'o': f->out = arg; break;
    case 'I': o->infer = true; break;
    case 'D': o->disable_dropout = true; break;
    case 'd':
        if (f->n_dims == 64) return user_error("--dim: too many bindings (at most 64)");
        if (!parse_dim(arg, &f->dims[f->n_dims])) return user_error("--dim '%s': expected NAME=N with N a positive integer", arg);
        f->n_dims++;
        break;
    case O_LOSS: case O_OPT: case O_BN_VAR: case O_DP_OVERLAP: return set_choice(f, c, arg);
    case O_OUTPUT: o->output = arg; break;
    case O_LABEL:
        if (!*arg) return user_error("--label-name: the name is empty");
        o->label_name = arg;
        break;
    case O_FREEZE: o->freeze = arg; break;
    case O_LR: case O_MOM: case O_WD: case O_B1: case O_B2: case O_EPS: return set_number(o, c, flag, arg);
    case O_CKPT: return set_checkpoint(o, arg);
    case O_BLOCK_RE: o->block_regex = arg; break;
    case O_OFFLOAD: o->offload = true; break;
    case O_PLAN_ONLY: f->plan_only = true; break;
    case O_EXPLAIN: f->explain = true; break;
    case O_DP: o->data_parallel = true; break;
    case O_UPDATE_AT_END: o->update_at_end = true; break;
    case O_NO_FUSE: o->no_fuse = true; break;
    case O_NO_FOLD: o->no_fold = true; break;
    case O_GRAD_ACCUM: o->grad_accum = true; break;
    case O_CLIP:
        if (!parse_double(arg, 0.0, &o->clip_grad_norm) || !(o->clip_grad_norm > 0))
            return user_error("--clip-grad-norm '%s': expected a number > 0", arg);
        break;
    case O_MAX_RECOMPUTE: {
        /* a fraction of the forward's FLOPs (0.5) or a percentage (50%) */
        char buf[64];
        size_t n = strlen(arg);
        bool pct = n > 0 && n < sizeof buf && arg[n - 1] == '%';
        if (pct) memcpy(buf, arg, n - 1), buf[n - 1] = 0;
        if (!parse_double(pct ? buf : arg, 0.0, &o->max_recompute) || !(o->max_recompute > 0) || o->max_recompute > (pct ? 100 : 1))
            return user_error("--max-recompute '%s': expected a fraction of the forward's FLOPs in (0, 1] or a percentage in (0%%, 100%%], "
                              "e.g. 0.75 or 75%%", arg);
        if (pct) o->max_recompute /= 100.0;
        break;
    }
    case O_DP_BUCKET:
        if (!ckrt_parse_size(arg, &o->dp_bucket_bytes) || o->dp_bucket_bytes < 1024 || o->dp_bucket_bytes > (1ll << 30))
            return user_error("--dp-bucket '%s': expected a size from 1KiB to 1GiB, e.g. 25MiB", arg);
        break;
    case 'h': fputs(usage_compile, stdout); return 0;
    case ':': return user_error("option '%s' needs a value", flag);
    default: return user_error("unknown option '%s' (see ckptc --help)", flag);
    }
    return -1;
}

/* Flags that do not go together, and what is missing; settles --dp-overlap=auto. Returns -1 when
 * the command can run, or the exit status. */
static int check_flags(compile_flags *f, int argc, char **argv) {
    ck_options *o = &f->o;
    if (optind >= argc) return user_error("missing MODEL.onnx (see ckptc --help)");
    if (o->infer && (o->checkpoint != CK_CKPT_NONE || o->offload)) return user_error("--checkpoint and --offload apply to training programs, not --infer");
    if (o->offload && o->checkpoint == CK_CKPT_NONE && o->selective)
        return user_error("--offload moves the checkpoints of recomputed segments to the host, and selective has none; combine it with a segment policy (e.g. --checkpoint=blocks,selective)");
    if (o->offload && o->checkpoint == CK_CKPT_NONE) return user_error("--offload moves the checkpoints of a --checkpoint policy to the host; choose one (e.g. --checkpoint=blocks)");
    if (o->infer && o->data_parallel) return user_error("--data-parallel applies to training programs, not --infer");
    if (o->infer && o->update_at_end) return user_error("--update-at-end applies to training programs, not --infer");
    if (o->infer && (o->grad_accum || o->clip_grad_norm > 0))
        return user_error("%s applies to training programs, not --infer", o->grad_accum ? "--grad-accum" : "--clip-grad-norm");
    if (o->clip_grad_norm > 0) o->update_at_end = true; /* the global norm needs every gradient first */
    if (o->max_recompute > 0 && o->checkpoint == CK_CKPT_BUDGET)
        return user_error("--max-recompute bounds the recompute of a segment policy; budget:SIZE already takes the least recompute within its size");
    if (o->max_recompute > 0 && o->infer) return user_error("--max-recompute applies to training programs, not --infer");
    if (o->max_recompute > 0 && f->pareto)
        return user_error("--max-recompute picks one plan; ckptc pareto shows the whole trade-off (read the recompute column instead)");
    if (o->dp_bucket_bytes && !o->data_parallel) return user_error("--dp-bucket sizes the buckets of --data-parallel; add it");
    if (f->dp_overlap_given && !o->data_parallel) return user_error("--dp-overlap schedules the buckets of --data-parallel; add it");
    /* auto plans both schedules; under budget:SIZE (whose search is all full plans already) the
     * memory-first one */
    o->dp_overlap = f->dp_overlap < 0 && o->checkpoint == CK_CKPT_BUDGET ? 0 : f->dp_overlap;
    if (optind + 1 < argc) return user_error("unexpected argument '%s' (one model at a time)", argv[optind + 1]);
    if (!f->out && !f->plan_only) return user_error("missing -o DIR: where to write the program (or --plan-only)");
    return -1;
}

/* `ckptc pareto MODEL.onnx [compile flags] [--svg FILE]`: the compile flags as for a compile
 * (no -o: nothing is written but the SVG). */
static const char *g_pareto_svg;
static bool g_pareto;
static int cmd_compile(int argc, char **argv);

static int cmd_pareto(int argc, char **argv) {
    char **args = calloc((size_t)argc + 1, sizeof *args);
    int n = 0;
    if (!args) return user_error("out of memory");
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--svg")) {
            if (i + 1 >= argc) {
                free(args);
                return user_error("option '--svg' needs a value");
            }
            g_pareto_svg = argv[++i];
        } else if (!strncmp(argv[i], "--svg=", 6)) {
            g_pareto_svg = argv[i] + 6;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            free(args);
            fputs("usage: ckptc pareto MODEL.onnx [compile flags] [--svg FILE]\n\n"
                  "Plans the trade-off budget:SIZE walks: for budgets from the smallest reachable peak to none's,\n"
                  "the planned peak, the recompute FLOPs per step and what is recomputed; then none, selective,\n"
                  "blocks, blocks,selective and sqrt as the compiler plans them. --svg draws peak against recompute\n"
                  "FLOPs with those policies marked. The compile flags (--dim, --loss, --optimizer, ...) apply;\n"
                  "--checkpoint is ignored.\n", stdout);
            return 0;
        } else {
            args[n++] = argv[i];
        }
    }
    g_pareto = true;
    int r = cmd_compile(n, args);
    free(args);
    return r;
}

static int cmd_compile(int argc, char **argv) {
    compile_flags f = {.o = CK_OPTIONS_DEFAULT, .dp_overlap = -1, .pareto = g_pareto};
    int c, li = -1, r;
    optind = 1;
    opterr = 0;
    char flagbuf[64];
    while ((c = getopt_long(argc, argv, ":ho:", compile_opts, &li)) != -1) {
        /* the flag as typed, for messages: its value may be in the next argument */
        const char *flag = argv[optind - 1];
        if (li >= 0 && c != '?' && c != ':') {
            snprintf(flagbuf, sizeof flagbuf, "--%s", compile_opts[li].name);
            flag = flagbuf;
        }
        li = -1;
        if ((r = set_flag(&f, c, flag, optarg)) >= 0) return r;
    }
    if (g_pareto) f.plan_only = true; /* nothing to write but the SVG */
    if ((r = check_flags(&f, argc, argv)) >= 0) return r;
    if (g_pareto) {
        if (f.o.infer) return user_error("pareto: --infer has no backward to recompute");
        ck_load_options plo = {.dims = f.dims, .n_dims = f.n_dims};
        ck_diag pd = {0};
        ck_status pst = ck_pareto(argv[optind], &plo, &f.o, g_pareto_svg, &pd);
        print_diag(&pd, argv[optind]);
        ck_diag_clear(&pd);
        return pst ? EXIT_USER : 0;
    }
    const char *path = argv[optind];
    char inc[4200], lib[4200];
    ckrt_paths(inc, lib, sizeof inc);
    if (f.o.data_parallel && !f.plan_only) { /* the MPI transport is built only where CMake found MPI */
        char mpi_lib[4300];
        struct stat sb;
        snprintf(mpi_lib, sizeof mpi_lib, "%s/libckrt_mpi.a", lib);
        if (stat(mpi_lib, &sb) != 0)
            return user_error("--data-parallel needs libckrt_mpi.a, which this ckptc's build does not have (%s): it is built "
                              "when CMake finds MPI (Debian: apt-get install openmpi-bin libopenmpi-dev, then reconfigure)", mpi_lib);
    }
    ck_codegen_options co = {.out_dir = f.out, .command_line = g_cmdline, .ckrt_include = inc, .ckrt_lib = lib,
                             .program_name = f.o.infer ? "model" : "trainer", .plan_only = f.plan_only, .explain = f.explain};
    ck_load_options lo = {.dims = f.dims, .n_dims = f.n_dims};
    ck_diag d = {0};
    ck_status st = ck_compile(path, &lo, &f.o, &co, &d);
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
    if (!strcmp(cmd, "pareto")) return cmd_pareto(argc - 1, argv + 1);
    if (cmd[0] == '-') return user_error("unknown option '%s' (see ckptc --help)", cmd);
    if (strlen(cmd) > 5 && !strcmp(cmd + strlen(cmd) - 5, ".onnx")) return cmd_compile(argc, argv);
    return user_error("unknown command '%s' (see ckptc --help)", cmd);
}
