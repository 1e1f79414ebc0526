/* main_flags.c — ckrt_main's command line: the usage texts (inference and training programs take
 * different flags), getopt_long, integers and sizes (512MiB, 2GB, bytes).
 */
#include "main.h"
#include "ckrt_pool.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage_infer =
    "usage: %s [--input NAME=FILE.npy]... [--seed S] [--dump-outputs DIR] [--report FILE.json]\n"
    "          [--weights FILE] [--threads N] [--help]\n"
    "\n"
    "  --input NAME=FILE.npy  feed input NAME (dtype and shape must match exactly)\n"
    "  --data NAME=FILE.npy   a dataset for input NAME, B samples a step (see the training program's --help)\n"
    "  --seed S               seed for inputs not given and for the random ops (default 0)\n"
    "  --dump-outputs DIR     write every output to DIR/NAME.npy\n"
    "  --report FILE.json     write planned and measured peak memory and timings\n"
    "  --weights FILE         weights file (default: weights.bin next to this program)\n"
    "  --mem-limit SIZE       refuse to start when the planned memory is over SIZE (512MiB, 2GB, bytes)\n"
    "  --device cpu|cuda      where to run (default: cuda when a GPU is usable, else cpu)\n"
    "  --threads N            CPU threads for the kernels and GEMMs (default: CKRT_NUM_THREADS, else\n"
    "                         OMP_NUM_THREADS, else every core this process may run on); the results are\n"
    "                         the same bits for every N\n"
    "  --tf32                 CUDA: let cuBLAS use TF32 tensor cores (faster, ~1e-3 relative error)\n";

static const char *usage_train =
    "usage: %s [--steps N] [--input NAME=FILE.npy]... [--data NAME=FILE.npy]... [--epochs E] [--shuffle]\n"
    "          [--grad-accum K] [--clip-grad-norm X] [--eval-data NAME=FILE.npy]... [--eval-every N]\n"
    "          [--seed S] [--dump-grads DIR] [--dump-params DIR] [--report FILE.json] [--save-weights FILE]\n"
    "          [--weights FILE] [--allow-nonfinite] [--threads N] [--help]\n"
    "\n"
    "  --steps N              training steps (default 1; with --data: the epochs' steps, N caps them)\n"
    "  --input NAME=FILE.npy  feed input NAME the same batch every step (dtype and shape exactly the input's)\n"
    "  --data NAME=FILE.npy   a dataset for input NAME: (N, ...) with ... the input's shape without its batch\n"
    "                         axis B; step k reads samples [kB, (k+1)B); memory-mapped; every --data has N samples\n"
    "  --tokens FILE          a token file (nanoGPT/llm.c: raw ids, --token-dtype uint16 (default) or int32) for a\n"
    "                         model whose token input and labels are (B, T): sample j is tokens [jT, jT+T]: the\n"
    "                         first T fill the input, the last T the labels\n"
    "  --epochs E             passes over the datasets: E x floor(N / B) / K steps (default 1)\n"
    "  --shuffle              a new order of the samples every epoch (from --seed), the same for every input\n"
    "  --lr-schedule KIND     constant (default), linear or cosine: from the compiled --lr down to --min-lr\n"
    "                         over the run's steps (after the warmup)\n"
    "  --warmup N             the first N steps ramp the learning rate up: lr x (s + 1) / N at step s\n"
    "  --min-lr X             where linear and cosine end (default 0)\n"
    "  --save-every N         a checkpoint every N steps in --ckpt-dir DIR (DIR/ckpt-STEP.bin, the newest\n"
    "                         --keep K kept, default 3); SIGINT/SIGTERM write one after the step and stop\n"
    "  --grad-accum K         K micro-batches (each the compiled batch) per optimizer step, their gradients\n"
    "                         summed and divided by K (= one batch of K x B); needs ckptc --grad-accum\n"
    "  --clip-grad-norm X     scale the gradients so that their global L2 norm is at most X\n"
    "                         (torch.nn.utils.clip_grad_norm_); needs ckptc --clip-grad-norm (its X is the default)\n"
    "  --eval-data NAME=FILE.npy  an eval dataset for input NAME (every input needs one); the mean loss of the\n"
    "                         forward in eval mode (no dropout, BatchNorm's running statistics) over its batches\n"
    "  --eval-tokens FILE     the eval windows from a token file (as --tokens)\n"
    "  --eval-every N         evaluate after every N steps (default: after the last step only)\n"
    "  --eval-batches M       evaluate on the first M batches (default: all)\n"
    "  --metrics FILE.jsonl   one JSON line per step: step, epoch, loss, lr, grad_norm, step_ms, samples_per_s;\n"
    "                         and one per eval: step, eval_loss, eval_batches, eval_ms\n"
    "  --resume DIR           continue from DIR's newest valid checkpoint (same flags: the same bits as a\n"
    "                         run never stopped)\n"
    "  --seed S               seed for inputs not given, for dropout and the random ops (default 0)\n"
    "  --dump-grads DIR       gradients of the last step, each as its update reads it: DIR/PARAM.npy\n"
    "  --dump-params DIR      parameters and buffers after training: DIR/NAME.npy\n"
    "  --report FILE.json     losses, planned and measured peak memory, timings\n"
    "  --save-weights FILE    write the trained weights (loadable with --weights)\n"
    /* export (main_export.c) */
    "  --export-onnx FILE     the source model with its initializers replaced by the trained values (same\n"
    "                         graph, names and bytes otherwise); external data is written next to FILE\n"
    "  --export-safetensors FILE  the trained parameters and buffers, keyed by initializer name, as safetensors\n"
    "  --source-model PATH    the source model's path for --export-onnx, when it moved since ckptc compiled\n"
    "  --weights FILE         weights file (default: weights.bin next to this program)\n"
    "  --allow-nonfinite      keep going when the loss is NaN or infinite\n"
    "  --timeline FILE.svg    draw the planned live memory over the step\n"
    "  --profile FILE         time every node (on a GPU with device events) and write the time per step by\n"
    "                         kind of node and the slowest nodes to FILE (steps after the first)\n"
    "  --mem-limit SIZE       refuse to start when the planned memory is over SIZE (512MiB, 2GB, bytes)\n"
    "  --device cpu|cuda      where to run (default: cuda when a GPU is usable, else cpu)\n"
    "  --threads N            CPU threads for the kernels and GEMMs (default: CKRT_NUM_THREADS, else\n"
    "                         OMP_NUM_THREADS, else every core this process may run on); the results are\n"
    "                         the same bits for every N\n"
    "  --tf32                 CUDA: let cuBLAS use TF32 tensor cores (faster, ~1e-3 relative error)\n";

/* ---------------------------------------------------------------- flags */

/* export (main_export.c): long-only options, out of the short options' range */
enum { OPT_EXPORT_ONNX = 0x200, OPT_EXPORT_ST, OPT_SOURCE_MODEL, OPT_THREADS };

static int parse_u64(ckrt_ctx *c, const char *flag, const char *s, uint64_t *out, uint64_t min) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || !*s || s[0] == '-' || v < min)
        return ckrt_fail(c, CKRT_ERR_USAGE, "%s '%s': expected an integer >= %llu", flag, s, (unsigned long long)min);
    *out = v;
    return CKRT_OK;
}

/* An integer flag in [min, max]. */
static int parse_count(ckrt_ctx *c, const char *flag, const char *s, uint64_t min, uint64_t max, int64_t *out) {
    uint64_t v = 0;
    CKRT_TRY(parse_u64(c, flag, s, &v, min));
    if (v > max) return ckrt_fail(c, CKRT_ERR_USAGE, "%s %llu: at most %llu", flag, (unsigned long long)v, (unsigned long long)max);
    *out = (int64_t)v;
    return CKRT_OK;
}

/* --input, --data or --eval-data NAME=FILE.npy: which input, given once in its kind. */
static int add_source(run *r, int ch, const char *arg) {
    ckrt_ctx *c = &r->c;
    const char *flag = ch == 'i' ? "--input" : ch == 'd' ? "--data" : "--eval-data";
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) return ckrt_fail(c, CKRT_ERR_USAGE, "%s '%s': expected NAME=FILE.npy", flag, arg);
    int k = 0;
    while (k < r->p->n_inputs && (strncmp(r->p->inputs[k].name, arg, (size_t)(eq - arg)) != 0 || r->p->inputs[k].name[eq - arg] != 0))
        k++;
    if (k == r->p->n_inputs || k >= 64) {
        char names[512] = "";
        for (int j = 0; j < r->p->n_inputs; j++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", j ? ", " : "", r->p->inputs[j].name);
        return ckrt_fail(c, CKRT_ERR_USAGE, "%s: the model has no input named '%.*s' (inputs: %s)", flag, (int)(eq - arg), arg, names);
    }
    ckrt_dataset *ds = ch == 'e' ? &r->eval : &r->train;
    bool data = false;
    for (int j = 0; j < ds->n; j++) data |= ds->src[j].input == k;
    if (ch == 'e' && data) return ckrt_fail(c, CKRT_ERR_USAGE, "--eval-data: input '%s' is given twice", r->p->inputs[k].name);
    if (ch != 'e' && (r->input_file[k] || data))
        return ckrt_fail(c, CKRT_ERR_USAGE, "%s: input '%s' is given twice (--input and --data each feed it)", flag, r->p->inputs[k].name);
    if (ch == 'i') {
        r->input_file[k] = eq + 1;
        return CKRT_OK;
    }
    ds->src[ds->n].input = k, ds->src[ds->n].shift = -1;
    ds->src[ds->n++].path = eq + 1;
    return CKRT_OK;
}

int ckrt_run_parse_args(run *r, int argc, char **argv) {
    static const struct option opts[] = {
        {"input", required_argument, 0, 'i'},  {"seed", required_argument, 0, 's'},        {"dump-outputs", required_argument, 0, 'o'},
        {"report", required_argument, 0, 'r'}, {"weights", required_argument, 0, 'w'},    {"steps", required_argument, 0, 'n'},
        {"dump-grads", required_argument, 0, 'g'}, {"dump-params", required_argument, 0, 'p'},
        {"save-weights", required_argument, 0, 'W'}, {"allow-nonfinite", no_argument, 0, 'A'},
        {"timeline", required_argument, 0, 'T'}, {"profile", required_argument, 0, 'P'}, {"mem-limit", required_argument, 0, 'M'},
        {"device", required_argument, 0, 'D'}, {"tf32", no_argument, 0, 'F'},
        {"lr-schedule", required_argument, 0, 'L'}, {"warmup", required_argument, 0, 'U'},
        {"min-lr", required_argument, 0, 'm'},
        {"save-every", required_argument, 0, 'K'}, {"ckpt-dir", required_argument, 0, 'C'},
        {"metrics", required_argument, 0, 'j'},
        {"tokens", required_argument, 0, 't'}, {"token-dtype", required_argument, 0, 'y'},
        {"keep", required_argument, 0, 'k'},   {"resume", required_argument, 0, 'R'},
        {"data", required_argument, 0, 'd'},   {"epochs", required_argument, 0, 'E'},      {"shuffle", no_argument, 0, 'S'},
        /* export (main_export.c) */
        {"export-onnx", required_argument, 0, OPT_EXPORT_ONNX}, {"export-safetensors", required_argument, 0, OPT_EXPORT_ST},
        {"source-model", required_argument, 0, OPT_SOURCE_MODEL},
        {"grad-accum", required_argument, 0, 'G'}, {"clip-grad-norm", required_argument, 0, 'c'},
        {"eval-data", required_argument, 0, 'e'}, {"eval-tokens", required_argument, 0, 'x'},
        {"eval-every", required_argument, 0, 'v'}, {"eval-batches", required_argument, 0, 'b'},
        {"threads", required_argument, 0, OPT_THREADS},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    ckrt_ctx *c = &r->c;
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *opt = argv[optind - 1];
        bool train_only = ch == 'n' || ch == 'g' || ch == 'p' || ch == 'W' || ch == 'A' || ch == 'T' || ch == 'E' || ch == 'S' ||
                          ch == 'L' || ch == 'U' || ch == 'm' || ch == 'K' || ch == 'C' || ch == 'k' || ch == 'R' || ch == 'j' || ch == 't' || ch == 'y' ||
                          ch == 'G' || ch == 'c' || ch == 'e' || ch == 'x' || ch == 'v' || ch == 'b';
        train_only |= ch >= OPT_EXPORT_ONNX && ch <= OPT_SOURCE_MODEL; /* export */
        if (train_only && !training(r)) return ckrt_fail(c, CKRT_ERR_USAGE, "%s: this is an inference program (see --help)", opt);
        if (ch == 'o' && training(r)) return ckrt_fail(c, CKRT_ERR_USAGE, "--dump-outputs: a training program's output is its loss; see --report");
        switch (ch) {
        case 'i':
        case 'd':
        case 'e': CKRT_TRY(add_source(r, ch, optarg)); break;
        case 'E': CKRT_TRY(parse_count(c, "--epochs", optarg, 1, 1000000, &r->epochs)); break;
        case 'S': r->shuffle = 1; break;
        case 'K': CKRT_TRY(parse_count(c, "--save-every", optarg, 1, 100000000, &r->save_every)); break;
        case 'k': CKRT_TRY(parse_count(c, "--keep", optarg, 1, 1000000, &r->keep)); break;
        case 'C': r->ckpt_dir = optarg; break;
        case 'j': r->metrics = optarg; break;
        case 't': r->train.tokens = optarg; break;
        case 'x': r->eval.tokens = optarg; break;
        case 'G': CKRT_TRY(parse_count(c, "--grad-accum", optarg, 1, 1000000, &r->accum)); break;
        case 'v': CKRT_TRY(parse_count(c, "--eval-every", optarg, 1, 100000000, &r->eval_every)); break;
        case 'b': CKRT_TRY(parse_count(c, "--eval-batches", optarg, 1, 100000000, &r->eval_batches)); break;
        case 'c': {
            char *end;
            r->clip = strtod(optarg, &end);
            if (*end || end == optarg || !(r->clip > 0) || !isfinite(r->clip))
                return ckrt_fail(c, CKRT_ERR_USAGE, "--clip-grad-norm '%s': expected a number > 0", optarg);
            break;
        }
        case 'y':
            if (strcmp(optarg, "uint16") && strcmp(optarg, "int32"))
                return ckrt_fail(c, CKRT_ERR_USAGE, "--token-dtype '%s': expected uint16 or int32", optarg);
            r->token_bytes = optarg[0] == 'u' ? 2 : 4;
            break;
        case 'R': r->resume = optarg; break;
        case 'L': {
            static const char *const names[] = {"constant", "linear", "cosine"};
            r->schedule = -1;
            for (int k = 0; k < 3; k++)
                if (strcmp(optarg, names[k]) == 0) r->schedule = k;
            if (r->schedule < 0) return ckrt_fail(c, CKRT_ERR_USAGE, "--lr-schedule '%s': expected constant, linear or cosine", optarg);
            break;
        }
        case 'U': CKRT_TRY(parse_count(c, "--warmup", optarg, 0, 100000000, &r->warmup)); break;
        case 'm': {
            char *end;
            r->min_lr = strtod(optarg, &end);
            if (*end || end == optarg || !(r->min_lr >= 0))
                return ckrt_fail(c, CKRT_ERR_USAGE, "--min-lr '%s': expected a number >= 0", optarg);
            r->min_lr_given = 1;
            break;
        }
        case 's': CKRT_TRY(parse_u64(c, "--seed", optarg, &r->seed, 0)); break;
        case 'n':
            CKRT_TRY(parse_count(c, "--steps", optarg, 1, 100000000, &r->steps));
            r->steps_given = 1;
            break;
        case 'o': r->dump_dir = optarg; break;
        case 'r': r->report = optarg; break;
        case 'w': r->weights = optarg; break;
        case 'g': r->grads_dir = optarg; break;
        case 'p': r->params_dir = optarg; break;
        case 'W': r->save_weights = optarg; break;
        case 'A': r->allow_nonfinite = 1; break;
        case 'T': r->timeline = optarg; break;
        case 'P': r->profile = optarg; break;
        case 'M':
            if (!ckrt_parse_size(optarg, &r->mem_limit))
                return ckrt_fail(c, CKRT_ERR_USAGE, "--mem-limit '%s': expected a size such as 512MiB, 2GB or 1000000 (units B, KiB, "
                                 "MiB, GiB, TiB, KB, MB, GB, TB)", optarg);
            break;
        case 'D':
            if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0)
                return ckrt_fail(c, CKRT_ERR_USAGE, "--device '%s': expected cpu or cuda", optarg);
            r->device = optarg;
            break;
        case 'F': r->tf32 = 1; break;
        /* export (main_export.c) */
        case OPT_EXPORT_ONNX: r->export_onnx = optarg; break;
        case OPT_EXPORT_ST: r->export_st = optarg; break;
        case OPT_SOURCE_MODEL: r->source_model = optarg; break;
        case OPT_THREADS: CKRT_TRY(parse_count(c, "--threads", optarg, 1, CKRT_MAX_THREADS, &r->threads)); break;
        case 'h': printf(training(r) ? usage_train : usage_infer, argv[0]); return -1;
        case ':': return ckrt_fail(c, CKRT_ERR_USAGE, "option '%s' needs a value", opt);
        default: return ckrt_fail(c, CKRT_ERR_USAGE, "unknown option '%s' (see --help)", opt);
        }
    }
    if (optind < argc) return ckrt_fail(c, CKRT_ERR_USAGE, "unexpected argument '%s' (see --help)", argv[optind]);
    if (!r->token_bytes) r->token_bytes = 2;
    if (!r->accum) r->accum = 1; /* --grad-accum: K micro-batches a step, 1 without */
    if (r->train.tokens && r->train.n) return ckrt_fail(c, CKRT_ERR_USAGE, "--tokens and --data: give one or the other");
    if (r->eval.tokens && r->eval.n) return ckrt_fail(c, CKRT_ERR_USAGE, "--eval-tokens and --eval-data: give one or the other");
    r->train.flag = "--data", r->eval.flag = "--eval-data";
    if (r->accum > 1 && !r->p->grad_accum)
        return ckrt_fail(c, CKRT_ERR_USAGE, "--grad-accum %lld: this program has no gradient accumulators; compile it with ckptc "
                         "--grad-accum (they cost one gradient's size per parameter: see ckptc --plan-only)", (long long)r->accum);
    if (!r->clip) r->clip = r->p->clip_grad_norm;
    if (r->clip && !r->p->updates_at_end)
        return ckrt_fail(c, CKRT_ERR_USAGE, "--clip-grad-norm: the global norm needs every gradient before the first update, and this "
                         "program updates each parameter during the backward; compile it with ckptc --clip-grad-norm X (or "
                         "--update-at-end): ckptc --plan-only says what that costs");
    if (r->save_every && !r->ckpt_dir) return ckrt_fail(c, CKRT_ERR_USAGE, "--save-every needs --ckpt-dir DIR");
    if (!r->keep) r->keep = 3;
    if (r->min_lr_given && r->schedule == LR_CONSTANT)
        return ckrt_fail(c, CKRT_ERR_USAGE, "--min-lr: only --lr-schedule linear or cosine decay to it");
    if (r->min_lr_given && r->min_lr > r->p->lr)
        return ckrt_fail(c, CKRT_ERR_USAGE, "--min-lr %g is above the compiled learning rate %g (ckptc --lr)", r->min_lr, r->p->lr);
    return CKRT_OK;
}

/* LambdaLR-style: lr_s = lr x f(s) for the optimizer's step s = 0, 1, ... of T. Warmup W: f(s) =
 * (s + 1) / W for s < W. After it, constant: 1; linear and cosine decay from lr to min_lr over the
 * steps left, p = (s - W) / (T - W) in [0, 1): lr_s = min_lr + (lr - min_lr) (1 - p), or
 * min_lr + (lr - min_lr) (1 + cos(pi p)) / 2 (nanoGPT's get_lr with lr_decay_iters = T). */
float ckrt_run_lr_scale(const run *r, int64_t s) {
    if (s < r->warmup) return (float)((double)(s + 1) / (double)r->warmup);
    if (r->schedule == LR_CONSTANT || r->p->lr <= 0) return 1.0f;
    double p = r->steps > r->warmup ? (double)(s - r->warmup) / (double)(r->steps - r->warmup) : 0.0;
    double m = r->min_lr / r->p->lr, f = r->schedule == LR_LINEAR ? 1.0 - p : 0.5 * (1.0 + cos(3.14159265358979323846 * p));
    return (float)(m + (1.0 - m) * f);
}
