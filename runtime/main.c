/* main.c — ckrt_main: everything a generated program does around its step function.
 *
 * Order of work: parse flags, allocate the arena once (the compiler's planned size plus a guard
 * zone), load weights.bin into the static region (magic, version, size and checksum checked
 * against what the program was compiled with), read each --input .npy (dtype and shape must
 * match exactly; no silent conversion) or fill it from the seed, paint the dynamic region with
 * a canary, run the step, then measure the high-water mark independently of the plan: the
 * highest arena byte that no longer holds the canary. A guard zone past the planned end catches
 * any kernel writing outside the plan. Outputs and the report are written through temporary
 * files renamed into place.
 */
#include "ckrt.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GUARD_BYTES 4096
#define CANARY 0xCBCBCBCBCBCBCBCBull

static const char *usage =
    "usage: %s [--input NAME=FILE.npy]... [--seed S] [--dump-outputs DIR] [--report FILE.json]\n"
    "          [--weights FILE] [--help]\n"
    "\n"
    "  --input NAME=FILE.npy  feed input NAME (dtype and shape must match; see below)\n"
    "  --seed S               seed for inputs not given (default 0)\n"
    "  --dump-outputs DIR     write every output to DIR/NAME.npy\n"
    "  --report FILE.json     write planned and measured peak memory and timings\n"
    "  --weights FILE         weights file (default: weights.bin next to this program)\n";

typedef struct run {
    const ckrt_program *p;
    ckrt_ctx c;
    const char *input_file[64];
    const char *dump_dir, *report, *weights;
    uint64_t seed;
} run;

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Deterministic inputs: floats uniform in [-1, 1), integers in [fill_lo, fill_hi), bools 0/1. */
static void fill_input(const ckrt_io *io, void *dst, uint64_t seed, int index) {
    uint64_t s = seed * 0x100000001B3ull + (uint64_t)index * 0x9E3779B97F4A7C15ull + 1;
    int64_t n = 1;
    for (int i = 0; i < io->rank; i++) n *= io->dims[i];
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = splitmix(&s);
        double u = (double)(r >> 11) / 9007199254740992.0;
        int64_t span = io->fill_hi > io->fill_lo ? io->fill_hi - io->fill_lo : 1;
        int64_t iv = io->fill_lo + (int64_t)(r % (uint64_t)span);
        switch (io->dtype) {
        case CKRT_F32: ((float *)dst)[i] = (float)(2 * u - 1); break;
        case CKRT_F64: ((double *)dst)[i] = 2 * u - 1; break;
        case CKRT_I64: ((int64_t *)dst)[i] = iv; break;
        case CKRT_I32: ((int32_t *)dst)[i] = (int32_t)iv; break;
        case CKRT_BOOL: ((uint8_t *)dst)[i] = (uint8_t)(r >> 63); break;
        default: memset((char *)dst + (size_t)i * ckrt_dtype_size(io->dtype), 0, ckrt_dtype_size(io->dtype)); break;
        }
    }
}

static int shape_eq(const ckrt_array *a, const ckrt_io *io) {
    if (a->rank != io->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != io->dims[i]) return 0;
    return 1;
}

static void shape_str(char *buf, size_t n, int rank, const int64_t *dims) {
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (k < n) snprintf(buf + k, n - k, ")");
}

static int load_weights(run *r) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    char path[4096];
    if (r->weights) {
        snprintf(path, sizeof path, "%s", r->weights);
    } else {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
        if (n <= 0) return ckrt_fail(c, CKRT_ERR_IO, "cannot locate this program to find weights.bin; pass --weights");
        path[n] = 0;
        char *slash = strrchr(path, '/');
        snprintf(slash ? slash + 1 : path, 32, "weights.bin");
    }
    FILE *f = fopen(path, "rb");
    if (!f) return ckrt_fail(c, CKRT_ERR_USAGE, "cannot open weights file '%s': %s", path, strerror(errno));
    unsigned char h[32];
    int rc = CKRT_ERR_DATA;
    if (fread(h, 1, 32, f) != 32 || memcmp(h, CKRT_WEIGHTS_MAGIC, 8) != 0) {
        ckrt_fail(c, rc, "'%s' is not a ckptc weights file (bad magic)", path);
        goto done;
    }
    uint32_t version, ntens;
    uint64_t bytes, sum, table;
    memcpy(&version, h + 8, 4);
    memcpy(&ntens, h + 12, 4);
    memcpy(&bytes, h + 16, 8);
    memcpy(&sum, h + 24, 8);
    if (version != CKRT_WEIGHTS_VERSION) {
        ckrt_fail(c, rc, "'%s' has format version %u; this program reads version %d", path, version, CKRT_WEIGHTS_VERSION);
        goto done;
    }
    if ((int64_t)bytes != p->weights_bytes || sum != p->weights_checksum) {
        ckrt_fail(c, rc, "'%s' does not belong to this program (%llu bytes, checksum %016llx; expected %lld bytes, %016llx)",
                  path, (unsigned long long)bytes, (unsigned long long)sum, (long long)p->weights_bytes,
                  (unsigned long long)p->weights_checksum);
        goto done;
    }
    if (fread(&table, 8, 1, f) != 1 || fseek(f, (long)table, SEEK_SET) != 0 ||
        fread(c->arena, 1, (size_t)bytes, f) != bytes) {
        ckrt_fail(c, rc, "'%s' is truncated", path);
        goto done;
    }
    if (ckrt_checksum(c->arena, (size_t)bytes) != sum) {
        ckrt_fail(c, rc, "'%s' is corrupted: its checksum does not match its contents", path);
        goto done;
    }
    rc = CKRT_OK;
done:
    fclose(f);
    return rc;
}

static int load_inputs(run *r, int *from_file) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    for (int i = 0; i < p->n_inputs; i++) {
        const ckrt_io *io = &p->inputs[i];
        from_file[i] = r->input_file[i] != NULL;
        if (!r->input_file[i]) {
            fill_input(io, c->arena + io->offset, r->seed, i);
            continue;
        }
        ckrt_array a;
        CKRT_TRY(ckrt_npy_read(c, r->input_file[i], &a));
        char want[200], got[200];
        shape_str(want, sizeof want, io->rank, io->dims);
        shape_str(got, sizeof got, a.rank, a.dims);
        int rc = CKRT_OK;
        if (a.dtype != io->dtype)
            rc = ckrt_fail(c, CKRT_ERR_USAGE, "input '%s': '%s' holds %s %s but the model takes %s %s", io->name,
                           r->input_file[i], ckrt_dtype_name(a.dtype), got, ckrt_dtype_name(io->dtype), want);
        else if (!shape_eq(&a, io))
            rc = ckrt_fail(c, CKRT_ERR_USAGE, "input '%s': '%s' has shape %s but the model takes %s", io->name,
                           r->input_file[i], got, want);
        else {
            int64_t n = 1;
            for (int k = 0; k < a.rank; k++) n *= a.dims[k];
            memcpy(c->arena + io->offset, a.data, (size_t)n * ckrt_dtype_size(a.dtype));
        }
        free(a.data);
        if (rc) return rc;
    }
    return CKRT_OK;
}

static int write_report(run *r, int64_t measured, double seconds, const int *from_file) {
    const ckrt_program *p = r->p;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", r->report);
    FILE *f = fopen(tmp, "w");
    if (!f) return ckrt_fail(&r->c, CKRT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    static const char *cat[] = {"params", "inputs", "activations", "workspace"};
    fprintf(f, "{\n  \"program\": \"%s\",\n  \"backend\": \"%s\",\n", p->name, r->c.be->name);
    fprintf(f, "  \"planned_peak_bytes\": %lld,\n  \"measured_peak_bytes\": %lld,\n", (long long)p->arena_bytes,
            (long long)measured);
    fprintf(f, "  \"planned_bytes\": {");
    for (int k = 0; k < CKRT_MEM_COUNT; k++) fprintf(f, "%s\"%s\": %lld", k ? ", " : "", cat[k], (long long)p->planned_bytes[k]);
    fprintf(f, "},\n  \"static_bytes\": %lld,\n  \"seed\": %llu,\n  \"step_seconds\": %.6f,\n", (long long)p->static_bytes,
            (unsigned long long)r->seed, seconds);
    fprintf(f, "  \"inputs\": {");
    for (int i = 0; i < p->n_inputs; i++)
        fprintf(f, "%s\"%s\": \"%s\"", i ? ", " : "", p->inputs[i].name, from_file[i] ? "file" : "random");
    fprintf(f, "},\n  \"outputs\": {");
    for (int i = 0; i < p->n_outputs; i++)
        fprintf(f, "%s\"%s\": \"%s.npy\"", i ? ", " : "", p->outputs[i].name, p->outputs[i].file);
    fprintf(f, "}\n}\n");
    if (fclose(f) != 0 || rename(tmp, r->report) != 0) {
        remove(tmp);
        return ckrt_fail(&r->c, CKRT_ERR_IO, "cannot write '%s': %s", r->report, strerror(errno));
    }
    return CKRT_OK;
}

static int parse_args(run *r, int argc, char **argv) {
    static const struct option opts[] = {{"input", required_argument, 0, 'i'},  {"seed", required_argument, 0, 's'},
                                         {"dump-outputs", required_argument, 0, 'o'}, {"report", required_argument, 0, 'r'},
                                         {"weights", required_argument, 0, 'w'}, {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    ckrt_ctx *c = &r->c;
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'i': {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || !eq[1]) return ckrt_fail(c, CKRT_ERR_USAGE, "--input '%s': expected NAME=FILE.npy", optarg);
            int k = 0;
            while (k < r->p->n_inputs && (strncmp(r->p->inputs[k].name, optarg, (size_t)(eq - optarg)) != 0 ||
                                          r->p->inputs[k].name[eq - optarg] != 0))
                k++;
            if (k == r->p->n_inputs || k >= 64) {
                char names[512] = "";
                for (int j = 0; j < r->p->n_inputs; j++)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", j ? ", " : "", r->p->inputs[j].name);
                return ckrt_fail(c, CKRT_ERR_USAGE, "--input: the model has no input named '%.*s' (inputs: %s)",
                                 (int)(eq - optarg), optarg, names);
            }
            r->input_file[k] = eq + 1;
            break;
        }
        case 's': {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || *end || !*optarg || optarg[0] == '-')
                return ckrt_fail(c, CKRT_ERR_USAGE, "--seed '%s': expected a non-negative integer", optarg);
            r->seed = v;
            break;
        }
        case 'o': r->dump_dir = optarg; break;
        case 'r': r->report = optarg; break;
        case 'w': r->weights = optarg; break;
        case 'h': printf(usage, argv[0]); return -1;
        case ':': return ckrt_fail(c, CKRT_ERR_USAGE, "option '%s' needs a value", argv[optind - 1]);
        default: return ckrt_fail(c, CKRT_ERR_USAGE, "unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) return ckrt_fail(c, CKRT_ERR_USAGE, "unexpected argument '%s' (see --help)", argv[optind]);
    return CKRT_OK;
}

static int run_program(run *r, int argc, char **argv) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    int rc = parse_args(r, argc, argv);
    if (rc) return rc;
    if (p->n_inputs > 64) return ckrt_fail(c, CKRT_ERR_INTERNAL, "more than 64 inputs");
    CKRT_TRY(c->be->arena_alloc(c, p->arena_bytes + GUARD_BYTES, &c->arena));
    c->arena_bytes = p->arena_bytes;
    int from_file[64] = {0};
    if (!(rc = load_weights(r)) && !(rc = load_inputs(r, from_file))) {
        uint64_t *w = (uint64_t *)(c->arena + p->static_bytes);
        int64_t nw = (p->arena_bytes + GUARD_BYTES - p->static_bytes) / 8;
        for (int64_t i = 0; i < nw; i++) w[i] = CANARY;
        c->seed = r->seed;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = p->step(c);
        if (!rc) rc = c->be->synchronize(c);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        c->node = NULL;
        double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        int64_t guard = (p->arena_bytes - p->static_bytes) / 8;
        for (int64_t i = guard; !rc && i < nw; i++)
            if (w[i] != CANARY) rc = ckrt_fail(c, CKRT_ERR_INTERNAL, "a kernel wrote past the planned arena (byte %lld)",
                                               (long long)(p->static_bytes + i * 8));
        int64_t hw = guard;
        while (hw > 0 && w[hw - 1] == CANARY) hw--;
        int64_t measured = p->static_bytes + hw * 8;
        for (int i = 0; !rc && r->dump_dir && i < p->n_outputs; i++) {
            const ckrt_io *io = &p->outputs[i];
            char path[4200];
            snprintf(path, sizeof path, "%s/%s.npy", r->dump_dir, io->file);
            rc = ckrt_npy_write(c, path, io->dtype, io->rank, io->dims, c->arena + io->offset);
        }
        if (!rc && r->report) rc = write_report(r, measured, seconds, from_file);
        if (!rc)
            printf("%s: step done in %.3f ms; planned peak %lld bytes, measured %lld bytes\n", p->name, seconds * 1e3,
                   (long long)p->arena_bytes, (long long)measured);
    }
    c->be->arena_free(c, c->arena);
    c->arena = NULL;
    return rc;
}

int ckrt_main(const ckrt_program *p, int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    r.p = p;
    r.c.be = &ckrt_cpu_backend;
    int rc = run_program(&r, argc, argv);
    if (rc < 0) return 0; /* --help */
    if (rc) {
        fprintf(stderr, "%s: error: %s\n", p->name, r.c.msg);
        return rc == CKRT_ERR_USAGE || rc == CKRT_ERR_DATA ? 2 : 1;
    }
    return 0;
}
