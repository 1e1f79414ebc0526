/* main.c — ckrt_main: everything a generated program does around its step functions.
 *
 * Order of work: parse flags, allocate the arena once (the compiler's planned size plus a guard
 * zone), load weights.bin into the static region (magic, version, layout and checksum checked),
 * zero the optimizer state, read each --input .npy (dtype and shape must match exactly; no silent
 * conversion) or fill it from the seed, paint the dynamic region with a canary, run the steps,
 * then measure the high-water mark independently of the plan: the highest arena byte that no
 * longer holds the canary after the first step. A guard zone past the planned end catches any
 * kernel writing outside the plan. Files (outputs, gradients, parameters, weights, report) are
 * written through temporary names renamed into place: a failure never leaves half a file.
 *
 * Training: each step runs the forward, checks the loss (a non-finite loss reruns the forward
 * with every output checked, to name the first node that produced a NaN/Inf, unless
 * --allow-nonfinite), then the backward, which updates each parameter as soon as its gradient is
 * final (ckptc's early updates), then the updates left for the end. The check comes before any
 * update, so a step with a non-finite loss changes no parameter. --dump-grads: on the last step
 * each gradient is copied to a host buffer (outside the planned arena) right before its update
 * (ckrt_grad_ready), and written with the other files after the run.
 */
#include "ckrt.h"
#include "ckrt_dp.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define GUARD_BYTES 4096
#define CANARY_BYTE 0xCB

static const char *usage_infer =
    "usage: %s [--input NAME=FILE.npy]... [--seed S] [--dump-outputs DIR] [--report FILE.json]\n"
    "          [--weights FILE] [--help]\n"
    "\n"
    "  --input NAME=FILE.npy  feed input NAME (dtype and shape must match exactly)\n"
    "  --seed S               seed for inputs not given (default 0)\n"
    "  --dump-outputs DIR     write every output to DIR/NAME.npy\n"
    "  --report FILE.json     write planned and measured peak memory and timings\n"
    "  --weights FILE         weights file (default: weights.bin next to this program)\n"
    "  --mem-limit SIZE       refuse to start when the planned memory is over SIZE (512MiB, 2GB, bytes)\n"
    "  --device cpu|cuda      where to run (default: cuda when a GPU is usable, else cpu)\n"
    "  --tf32                 CUDA: let cuBLAS use TF32 tensor cores (faster, ~1e-3 relative error)\n";

static const char *usage_train =
    "usage: %s [--steps N] [--input NAME=FILE.npy]... [--seed S] [--dump-grads DIR] [--dump-params DIR]\n"
    "          [--report FILE.json] [--save-weights FILE] [--weights FILE] [--allow-nonfinite] [--help]\n"
    "\n"
    "  --steps N              training steps on the same batch (default 1)\n"
    "  --input NAME=FILE.npy  feed input NAME (dtype and shape must match exactly)\n"
    "  --seed S               seed for inputs not given and for dropout (default 0)\n"
    "  --dump-grads DIR       gradients of the last step, each as its update reads it: DIR/PARAM.npy\n"
    "  --dump-params DIR      parameters and buffers after training: DIR/NAME.npy\n"
    "  --report FILE.json     losses, planned and measured peak memory, timings\n"
    "  --save-weights FILE    write the trained weights (loadable with --weights)\n"
    "  --weights FILE         weights file (default: weights.bin next to this program)\n"
    "  --allow-nonfinite      keep going when the loss is NaN or infinite\n"
    "  --timeline FILE.svg    draw the planned live memory over the step\n"
    "  --mem-limit SIZE       refuse to start when the planned memory is over SIZE (512MiB, 2GB, bytes)\n"
    "  --device cpu|cuda      where to run (default: cuda when a GPU is usable, else cpu)\n"
    "  --tf32                 CUDA: let cuBLAS use TF32 tensor cores (faster, ~1e-3 relative error)\n";

typedef struct run {
    const ckrt_program *p;
    ckrt_ctx c;
    const char *input_file[64];
    const char *dump_dir, *report, *weights, *grads_dir, *params_dir, *save_weights, *timeline;
    uint64_t seed;
    int64_t steps;
    int allow_nonfinite;
    int64_t mem_limit;             /* --mem-limit in bytes; 0: none */
    const char *device;            /* --device: "cpu", "cuda" or NULL (cuda when usable) */
    int tf32;
    char device_line[600];         /* "device: ...", the first line printed once the run starts */
    double *losses;
    double *step_seconds;
    int64_t measured;
    int from_file[64];
    ckrt_dp *dp;                   /* data-parallel programs (ckptc --data-parallel); NULL otherwise */
    unsigned char *grad_block;     /* --dump-grads: the host copies of the last step's gradients */
} run;

static bool training(const run *r) { return r->p->forward != NULL; }

int ckrt_check_finite(ckrt_ctx *c, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return ckrt_fail(c, CKRT_ERR_DATA, "produced a non-finite value (%g at element %lld)", (double)x[i], (long long)i);
    return CKRT_OK;
}

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

static void shape_str(char *buf, size_t n, int rank, const int64_t *dims) {
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (k < n) snprintf(buf + k, n - k, ")");
}

static int64_t numel(int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    return n;
}

/* ---------------------------------------------------------------- weights */

static int weights_path(run *r, char *path, size_t n) {
    if (r->weights) {
        snprintf(path, n, "%s", r->weights);
        return CKRT_OK;
    }
    ssize_t k = readlink("/proc/self/exe", path, n - 32);
    if (k <= 0) return ckrt_fail(&r->c, CKRT_ERR_IO, "cannot locate this program to find weights.bin; pass --weights");
    path[k] = 0;
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, 32, "weights.bin");
    return CKRT_OK;
}

static int load_weights(run *r) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    char path[4096];
    CKRT_TRY(weights_path(r, path, sizeof path));
    FILE *f = fopen(path, "rb");
    if (!f) return ckrt_fail(c, CKRT_ERR_USAGE, "cannot open weights file '%s': %s", path, strerror(errno));
    unsigned char h[CKRT_WEIGHTS_HEADER];
    int rc = CKRT_ERR_DATA;
    if (fread(h, 1, sizeof h, f) != sizeof h || memcmp(h, CKRT_WEIGHTS_MAGIC, 8) != 0) {
        ckrt_fail(c, rc, "'%s' is not a ckptc weights file (bad magic)", path);
        goto done;
    }
    uint32_t version;
    uint64_t bytes, sum, at, layout;
    memcpy(&version, h + 8, 4);
    memcpy(&bytes, h + 16, 8);
    memcpy(&sum, h + 24, 8);
    memcpy(&at, h + 32, 8);
    memcpy(&layout, h + 40, 8);
    if (version != CKRT_WEIGHTS_VERSION) {
        ckrt_fail(c, rc, "'%s' has format version %u; this program reads version %d", path, version, CKRT_WEIGHTS_VERSION);
        goto done;
    }
    if ((int64_t)bytes != p->weights_bytes || layout != p->weights_layout) {
        ckrt_fail(c, rc, "'%s' holds weights for another model (%llu bytes, layout %016llx; this program needs %lld bytes, "
                  "layout %016llx)", path, (unsigned long long)bytes, (unsigned long long)layout,
                  (long long)p->weights_bytes, (unsigned long long)p->weights_layout);
        goto done;
    }
    uint64_t got = 0;
    if (fseek(f, (long)at, SEEK_SET) != 0) {
        ckrt_fail(c, rc, "'%s' is truncated", path);
        goto done;
    }
    if ((rc = ckrt_arena_load(c, 0, f, path, (int64_t)bytes, &got)) != CKRT_OK) goto done;
    rc = CKRT_ERR_DATA;
    if (got != sum) {
        ckrt_fail(c, rc, "'%s' is corrupted: its checksum does not match its contents", path);
        goto done;
    }
    rc = CKRT_OK;
done:
    fclose(f);
    return rc;
}

/* A copy of the program's weights file with the payload replaced by the current values. */
static int save_weights(run *r) {
    ckrt_ctx *c = &r->c;
    char src[4096], tmp[4200];
    CKRT_TRY(weights_path(r, src, sizeof src));
    FILE *in = fopen(src, "rb");
    if (!in) return ckrt_fail(c, CKRT_ERR_IO, "cannot reread '%s': %s", src, strerror(errno));
    unsigned char h[CKRT_WEIGHTS_HEADER];
    uint64_t at = 0;
    if (fread(h, 1, sizeof h, in) != sizeof h) {
        fclose(in);
        return ckrt_fail(c, CKRT_ERR_IO, "cannot reread '%s'", src);
    }
    memcpy(&at, h + 32, 8);
    unsigned char *table = malloc((size_t)at);
    if (!table || fseek(in, 0, SEEK_SET) != 0 || fread(table, 1, (size_t)at, in) != at) {
        free(table);
        fclose(in);
        return ckrt_fail(c, CKRT_ERR_IO, "cannot reread '%s'", src);
    }
    fclose(in);
    uint64_t sum = 0;
    int rc = ckrt_arena_checksum(c, 0, r->p->weights_bytes, &sum);
    memcpy(table + 24, &sum, 8);
    snprintf(tmp, sizeof tmp, "%s.tmp", r->save_weights);
    FILE *f = rc ? NULL : fopen(tmp, "wb");
    bool ok = f && fwrite(table, 1, (size_t)at, f) == at;
    free(table);
    if (ok) ok = ckrt_arena_save(c, 0, f, tmp, r->p->weights_bytes) == CKRT_OK;
    if (f) ok = (fclose(f) == 0) && ok;
    if (rc) return rc;
    if (!ok || rename(tmp, r->save_weights) != 0) {
        remove(tmp);
        return ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", r->save_weights, strerror(errno));
    }
    return CKRT_OK;
}

/* ---------------------------------------------------------------- inputs and files */

static int load_inputs(run *r) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    for (int i = 0; i < p->n_inputs; i++) {
        const ckrt_io *io = &p->inputs[i];
        r->from_file[i] = r->input_file[i] != NULL;
        if (!r->input_file[i]) {
            int64_t bytes = numel(io->rank, io->dims) * (int64_t)ckrt_dtype_size(io->dtype);
            void *buf = malloc((size_t)(bytes > 0 ? bytes : 1));
            if (!buf) return ckrt_fail(c, CKRT_ERR_NOMEM, "input '%s': cannot allocate %lld bytes", io->name, (long long)bytes);
            fill_input(io, buf, ckrt_dp_seed(r->dp, r->seed), i);
            int rc = ckrt_arena_write(c, io->offset, buf, bytes);
            free(buf);
            if (rc) return rc;
            continue;
        }
        ckrt_array a;
        if (r->dp) r->input_file[i] = ckrt_dp_input_path(r->dp, r->input_file[i]); /* "{rank}" */
        CKRT_TRY(ckrt_npy_read(c, r->input_file[i], &a));
        if (r->dp && ckrt_dp_shard(r->dp, c, io, i, r->input_file[i], &a)) { /* this rank's rows of the batch */
            free(a.data);
            return c->code;
        }
        char want[200], got[200];
        shape_str(want, sizeof want, io->rank, io->dims);
        shape_str(got, sizeof got, a.rank, a.dims);
        int rc = CKRT_OK;
        bool same = a.rank == io->rank && numel(a.rank, a.dims) == numel(io->rank, io->dims);
        for (int k = 0; same && k < a.rank; k++) same = a.dims[k] == io->dims[k];
        if (a.dtype != io->dtype)
            rc = ckrt_fail(c, CKRT_ERR_USAGE, "input '%s': '%s' holds %s %s but the model takes %s %s", io->name,
                           r->input_file[i], ckrt_dtype_name(a.dtype), got, ckrt_dtype_name(io->dtype), want);
        else if (!same)
            rc = ckrt_fail(c, CKRT_ERR_USAGE, "input '%s': '%s' has shape %s but the model takes %s", io->name,
                           r->input_file[i], got, want);
        else
            rc = ckrt_arena_write(c, io->offset, a.data, numel(a.rank, a.dims) * (int64_t)ckrt_dtype_size(a.dtype));
        free(a.data);
        if (rc) return rc;
    }
    return CKRT_OK;
}

/* Creates DIR when missing (one level), so --dump-* DIR works on a fresh path. */
static int ensure_dir(ckrt_ctx *c, const char *dir) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return ckrt_fail(c, CKRT_ERR_IO, "cannot create '%s': %s", dir, strerror(errno));
    return CKRT_OK;
}

/* A tensor of the arena to an .npy file, through a host copy of its size. */
static int write_arena_npy(ckrt_ctx *c, const char *path, ckrt_dtype dt, int rank, const int64_t *dims, int64_t offset) {
    int64_t bytes = numel(rank, dims) * (int64_t)ckrt_dtype_size(dt);
    void *buf;
    CKRT_TRY(ckrt_arena_fetch(c, offset, bytes, &buf));
    int rc = ckrt_npy_write(c, path, dt, rank, dims, buf);
    ckrt_arena_release(c, buf, bytes);
    return rc;
}

/* Parameters and buffers from the arena, or (grads) the trainable parameters' gradients from the
 * --dump-grads buffers. */
static int write_npys(run *r, const char *dir, bool grads) {
    const ckrt_program *p = r->p;
    CKRT_TRY(ensure_dir(&r->c, dir));
    for (int i = 0; i < p->n_state; i++) {
        const ckrt_state *s = &p->state[i];
        if (grads && s->grad_offset < 0) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.npy", dir, s->file);
        if (grads) {
            CKRT_TRY(ckrt_npy_write(&r->c, path, s->dtype, s->rank, s->dims, r->c.grad_dump[i]));
            continue;
        }
        CKRT_TRY(write_arena_npy(&r->c, path, s->dtype, s->rank, s->dims, s->offset));
    }
    return CKRT_OK;
}

int ckrt_grad_ready(ckrt_ctx *c, int k, const void *g, int64_t bytes) {
    return c->be->copy_to_host(c, c->grad_dump[k], g, bytes, 1);
}

/* --dump-grads: one host block for every trainable parameter's gradient (debug memory, not in
 * the plan); c->grad_dump set makes the last step's updates copy their gradients there. */
static int alloc_grad_dump(run *r) {
    const ckrt_program *p = r->p;
    int64_t total = 0;
    for (int i = 0; i < p->n_state; i++)
        if (p->state[i].grad_offset >= 0) total += numel(p->state[i].rank, p->state[i].dims) * (int64_t)ckrt_dtype_size(p->state[i].dtype);
    void **slot = calloc((size_t)p->n_state + 1, sizeof *slot);
    unsigned char *block = calloc((size_t)total + 1, 1);
    if (!slot || !block) {
        free(slot), free(block);
        return ckrt_fail(&r->c, CKRT_ERR_NOMEM, "--dump-grads: cannot allocate %lld bytes of host memory for the gradients",
                         (long long)total);
    }
    r->grad_block = block;
    for (int64_t i = 0, at = 0; i < p->n_state; i++)
        if (p->state[i].grad_offset >= 0) {
            slot[i] = block + at;
            at += (numel(p->state[i].rank, p->state[i].dims) * (int64_t)ckrt_dtype_size(p->state[i].dtype));
        }
    r->c.grad_dump = slot;
    return CKRT_OK;
}

static void free_grad_dump(run *r) {
    free(r->grad_block);
    free(r->c.grad_dump);
    r->grad_block = NULL, r->c.grad_dump = NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median step time; the first step (cold caches, page faults) is left out when there are more. */
static double median_ms(const run *r) {
    int64_t n = r->steps > 1 ? r->steps - 1 : r->steps;
    double *t = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!t || n == 0) {
        free(t);
        return 0;
    }
    memcpy(t, r->step_seconds + (r->steps > 1), sizeof(double) * (size_t)n);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    double m = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    free(t);
    return m * 1e3;
}

/* The table printed after training. */
static void print_summary(const run *r) {
    const ckrt_program *p = r->p;
    static const char *cat[] = {"params", "inputs", "activations", "workspace", "grads", "optimizer state"};
    printf("\n  memory (planned)        bytes\n");
    for (int k = 0; k < CKRT_MEM_COUNT; k++)
        if (p->planned_bytes[k]) printf("  %-20s %12lld\n", cat[k], (long long)p->planned_bytes[k]);
    printf("  %-20s %12lld\n  %-20s %12lld\n", "planned peak", (long long)p->arena_bytes, "measured peak", (long long)r->measured);
    if (p->host_bytes) printf("  %-20s %12lld\n", "host pool (offload)", (long long)p->host_bytes);
    if (r->dp) ckrt_dp_print_summary(r->dp);
    printf("  %-20s %12.3f ms (median)\n", "step time", median_ms(r));
    ckrt_device_stats ds;
    if (r->c.be->dev && ckrt_cuda_stats((ckrt_ctx *)&r->c, &ds) == CKRT_OK) {
        printf("  %-20s %12lld of %lld (cuMemGetInfo: the whole device, CUDA context included)\n", "device used", (long long)ds.mem_used_bytes,
               (long long)ds.mem_total_bytes);
        if (ds.copy_bytes)
            printf("  %-20s %12.3f ms exposed of %.3f ms copying, %.2f GB/s\n", "offload copies", ds.copy_exposed_ms, ds.copy_ms,
                   ds.copy_ms > 0 ? (double)ds.copy_bytes / (ds.copy_ms * 1e6) : 0.0);
        printf("  %-20s %12.3f ms (weights, inputs, losses, dumps), %lld bytes of pinned staging\n", "host transfers", ds.host_io_ms,
               (long long)ds.host_staging_bytes);
        printf("  %-20s %12s\n", "kernels", ds.cache_hit ? "from the cache" : "compiled by NVRTC");
    }
    if (training(r) && r->steps > 0) printf("  %-20s %12.6f -> %.6f\n", "loss", r->losses[0], r->losses[r->steps - 1]);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        if (*q == '"' || *q == '\\') fprintf(f, "\\%c", *q);
        else if (*q < 0x20) fprintf(f, "\\u%04x", *q);
        else fputc(*q, f);
    }
    fputc('"', f);
}

static int write_report(run *r) {
    const ckrt_program *p = r->p;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", r->report);
    FILE *f = fopen(tmp, "w");
    if (!f) return ckrt_fail(&r->c, CKRT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    static const char *cat[] = {"params", "inputs", "activations", "workspace", "grads", "optimizer_state"};
    fprintf(f, "{\n  \"program\": ");
    json_str(f, p->name);
    fprintf(f, ",\n  \"backend\": \"%s\",\n  \"mode\": \"%s\",\n", r->c.be->name, training(r) ? "train" : "infer");
    ckrt_device_stats ds;
    if (r->c.be->dev && ckrt_cuda_stats(&r->c, &ds) == CKRT_OK)
        fprintf(f, "  \"device\": {\"name\": \"%s\", \"used_bytes_context_included\": %lld, \"total_bytes\": %lld, "
                   "\"copy_bytes\": %lld, \"copy_ms\": %.3f, \"copy_exposed_ms\": %.3f, \"host_io_ms\": %.3f, "
                   "\"host_staging_bytes\": %lld, \"nvrtc_ms\": %.1f, \"kernel_cache_hit\": %s},\n",
                ckrt_cuda_describe(), (long long)ds.mem_used_bytes, (long long)ds.mem_total_bytes, (long long)ds.copy_bytes,
                ds.copy_ms, ds.copy_exposed_ms, ds.host_io_ms, (long long)ds.host_staging_bytes, ds.compile_ms,
                ds.cache_hit ? "true" : "false");
    fprintf(f, "  \"planned_peak_bytes\": %lld,\n  \"measured_peak_bytes\": %lld,\n", (long long)p->arena_bytes,
            (long long)r->measured);
    /* the largest host copy of arena bytes held at once (dumps of outputs and parameters) */
    fprintf(f, "  \"host_readback_peak_bytes\": %lld,\n", (long long)r->c.readback_peak);
    fprintf(f, "  \"planned_bytes\": {");
    for (int k = 0; k < CKRT_MEM_COUNT; k++) fprintf(f, "%s\"%s\": %lld", k ? ", " : "", cat[k], (long long)p->planned_bytes[k]);
    fprintf(f, "},\n  \"static_bytes\": %lld,\n  \"seed\": %llu,\n  \"steps\": %lld,\n", (long long)p->static_bytes,
            (unsigned long long)r->seed, (long long)r->steps);
    if (p->report_json && *p->report_json) fprintf(f, "  %s,\n", p->report_json);
    if (p->n_timeline) {
        fprintf(f, "  \"timeline\": {\"backward_step\": %d, \"update_step\": %d, \"recompute_steps\": [", p->backward_step,
                p->update_step);
        for (int i = 0; i < p->n_recompute_steps; i++) fprintf(f, "%s%d", i ? ", " : "", p->recompute_steps[i]);
        fprintf(f, "], \"bytes\": [");
        for (int i = 0; i < p->n_timeline; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)p->timeline[i]);
        fprintf(f, "]},\n");
    }
    if (r->dp) ckrt_dp_report_json(r->dp, f);
    fprintf(f, "  \"step_time_ms\": %.4f,\n", median_ms(r));
    fprintf(f, "  \"step_seconds\": [");
    for (int64_t i = 0; i < r->steps; i++) fprintf(f, "%s%.6f", i ? ", " : "", r->step_seconds[i]);
    fprintf(f, "],\n");
    if (training(r)) {
        fprintf(f, "  \"losses\": [");
        for (int64_t i = 0; i < r->steps; i++) fprintf(f, "%s%.9g", i ? ", " : "", r->losses[i]);
        fprintf(f, "],\n");
    }
    fprintf(f, "  \"inputs\": {");
    for (int i = 0; i < p->n_inputs; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, p->inputs[i].name);
        fprintf(f, ": \"%s\"", r->from_file[i] ? "file" : "random");
    }
    fprintf(f, "},\n  \"outputs\": {");
    for (int i = 0; i < p->n_outputs; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, p->outputs[i].name);
        fprintf(f, ": \"%s.npy\"", p->outputs[i].file); /* sanitized: [A-Za-z0-9._-] only */
    }
    fprintf(f, "}\n}\n");
    if (fclose(f) != 0 || rename(tmp, r->report) != 0) {
        remove(tmp);
        return ckrt_fail(&r->c, CKRT_ERR_IO, "cannot write '%s': %s", r->report, strerror(errno));
    }
    return CKRT_OK;
}

/* ---------------------------------------------------------------- flags */

static int parse_u64(ckrt_ctx *c, const char *flag, const char *s, uint64_t *out, uint64_t min) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || !*s || s[0] == '-' || v < min)
        return ckrt_fail(c, CKRT_ERR_USAGE, "%s '%s': expected an integer >= %llu", flag, s, (unsigned long long)min);
    *out = v;
    return CKRT_OK;
}

/* SIZE as ckptc reads it: bytes, or a number with a binary (KiB, MiB, GiB, TiB) or decimal (KB,
 * MB, GB, TB) unit; B alone is bytes. */
static int parse_size(ckrt_ctx *c, const char *flag, const char *s, int64_t *out) {
    static const struct { const char *u; double m; } units[] = {
        {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
        {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!errno && end != s && v > 0 && s[0] >= '0' && s[0] <= '9')
        for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
            if (!strcmp(end, units[k].u)) {
                double b = v * units[k].m;
                if (b < 1 || b >= 9e18) break;
                *out = (int64_t)b;
                return CKRT_OK;
            }
    return ckrt_fail(c, CKRT_ERR_USAGE, "%s '%s': expected a size such as 512MiB, 2GB or 1000000 (units B, KiB, MiB, GiB, KB, MB, GB)",
                     flag, s);
}

static int parse_args(run *r, int argc, char **argv) {
    static const struct option opts[] = {
        {"input", required_argument, 0, 'i'},  {"seed", required_argument, 0, 's'},        {"dump-outputs", required_argument, 0, 'o'},
        {"report", required_argument, 0, 'r'}, {"weights", required_argument, 0, 'w'},    {"steps", required_argument, 0, 'n'},
        {"dump-grads", required_argument, 0, 'g'}, {"dump-params", required_argument, 0, 'p'},
        {"save-weights", required_argument, 0, 'W'}, {"allow-nonfinite", no_argument, 0, 'A'},
        {"timeline", required_argument, 0, 'T'}, {"mem-limit", required_argument, 0, 'M'},
        {"device", required_argument, 0, 'D'}, {"tf32", no_argument, 0, 'F'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    ckrt_ctx *c = &r->c;
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *opt = argv[optind - 1];
        bool train_only = ch == 'n' || ch == 'g' || ch == 'p' || ch == 'W' || ch == 'A' || ch == 'T';
        if (train_only && !training(r)) return ckrt_fail(c, CKRT_ERR_USAGE, "%s: this is an inference program (see --help)", opt);
        if (ch == 'o' && training(r)) return ckrt_fail(c, CKRT_ERR_USAGE, "--dump-outputs: a training program's output is its loss; see --report");
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
        case 's': CKRT_TRY(parse_u64(c, "--seed", optarg, &r->seed, 0)); break;
        case 'n': {
            uint64_t v = 0;
            CKRT_TRY(parse_u64(c, "--steps", optarg, &v, 1));
            if (v > 100000000) return ckrt_fail(c, CKRT_ERR_USAGE, "--steps %llu: at most 100000000", (unsigned long long)v);
            r->steps = (int64_t)v;
            break;
        }
        case 'o': r->dump_dir = optarg; break;
        case 'r': r->report = optarg; break;
        case 'w': r->weights = optarg; break;
        case 'g': r->grads_dir = optarg; break;
        case 'p': r->params_dir = optarg; break;
        case 'W': r->save_weights = optarg; break;
        case 'A': r->allow_nonfinite = 1; break;
        case 'T': r->timeline = optarg; break;
        case 'M': CKRT_TRY(parse_size(c, "--mem-limit", optarg, &r->mem_limit)); break;
        case 'D':
            if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0)
                return ckrt_fail(c, CKRT_ERR_USAGE, "--device '%s': expected cpu or cuda", optarg);
            r->device = optarg;
            break;
        case 'F': r->tf32 = 1; break;
        case 'h': printf(training(r) ? usage_train : usage_infer, argv[0]); return -1;
        case ':': return ckrt_fail(c, CKRT_ERR_USAGE, "option '%s' needs a value", opt);
        default: return ckrt_fail(c, CKRT_ERR_USAGE, "unknown option '%s' (see --help)", opt);
        }
    }
    if (optind < argc) return ckrt_fail(c, CKRT_ERR_USAGE, "unexpected argument '%s' (see --help)", argv[optind]);
    return CKRT_OK;
}

/* ---------------------------------------------------------------- steps */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Forward, the loss check, then the backward (with the early updates) of one step. */
static int train_local(run *r, int64_t s) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    c->step = s + 1;
    CKRT_TRY(p->forward(c));
    CKRT_TRY(c->be->synchronize(c));
    c->node = NULL;
    float loss;
    CKRT_TRY(ckrt_arena_read(c, p->loss_offset, &loss, (int64_t)sizeof loss));
    r->losses[s] = loss;
    if (!isfinite(loss) && !r->allow_nonfinite) {
        /* rerun the forward (no parameter is updated before the backward) checking every output */
        c->check_finite = 1;
        int rc = p->forward(c);
        c->check_finite = 0;
        c->node = NULL; /* the message names the node itself */
        if (rc) {
            char msg[sizeof c->msg];
            snprintf(msg, sizeof msg, "%s", c->msg);
            return ckrt_fail(c, CKRT_ERR_DATA, "step %lld: the loss is %g; first non-finite tensor: %s (rerun with "
                             "--allow-nonfinite to go on)", (long long)(s + 1), (double)loss, msg);
        }
        return ckrt_fail(c, CKRT_ERR_DATA, "step %lld: the loss is %g but no forward tensor is non-finite on a rerun", (long long)(s + 1),
                         (double)loss);
    }
    CKRT_TRY(p->backward(c));
    return c->be->synchronize(c);
}

/* One training step; on the last one, --dump-grads copies each gradient as its update reads it
 * (the files are written after the run). Data parallel: the backward's all-reduce node averaged
 * the gradients bucket by bucket once every rank got there (each update follows its bucket); a
 * rank that failed makes the one agreement call the others are waiting in, so all stop at the
 * same point; the loss becomes the ranks' mean; buffers and replica checks follow (dp.c). */
static int train_step(run *r, int64_t s) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    int rc = s + 1 == r->steps && r->grads_dir && ckrt_dp_writes(r->dp) ? alloc_grad_dump(r) : CKRT_OK;
    if (!rc) rc = train_local(r, s);
    if (r->dp && !ckrt_dp_agreed(r->dp)) rc = ckrt_dp_after_backward(r->dp, c, rc, &r->losses[s]);
    if (rc) return rc;
    CKRT_TRY(p->update(c));
    CKRT_TRY(c->be->synchronize(c));
    return r->dp ? ckrt_dp_after_update(r->dp, c, p, s + 1, r->steps) : CKRT_OK;
}

/* "N bytes (X.Y MiB)" */
static const char *bytes_str(char *buf, size_t n, int64_t b) {
    static const char *unit[] = {"KiB", "MiB", "GiB", "TiB"};
    int k = -1;
    double v = (double)b;
    while (v >= 1024.0 && k < 3) v /= 1024.0, k++;
    if (k < 0) snprintf(buf, n, "%lld bytes", (long long)b);
    else snprintf(buf, n, "%lld bytes (%.1f %s)", (long long)b, v, unit[k]);
    return buf;
}

/* What limits an allocation the system refused: the address-space limit when one is set, else
 * the memory Linux says is available. */
static void system_limit(char *buf, size_t n) {
    char b[64];
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        snprintf(buf, n, "the address-space limit (ulimit -v) is %s", bytes_str(b, sizeof b, (int64_t)rl.rlim_cur));
        return;
    }
    snprintf(buf, n, "the system refused it");
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return;
    char line[256];
    long long kb;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) {
            snprintf(buf, n, "the system refused it (%s available)", bytes_str(b, sizeof b, kb * 1024));
            break;
        }
    fclose(f);
}

/* --mem-limit, then the arena and the host pool. A plan over the limit, or memory the system will
 * not give, is the user's to fix (exit 2): the message names what the plan needs and the limit. */
static int alloc_memory(run *r) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    char need[200], b1[64], b2[64], lim[sizeof c->msg];
    int64_t total = p->arena_bytes + p->host_bytes;
    if (p->host_bytes > 0)
        snprintf(need, sizeof need, "%s: arena %lld + host pool %lld bytes", bytes_str(b1, sizeof b1, total),
                 (long long)p->arena_bytes, (long long)p->host_bytes);
    else
        snprintf(need, sizeof need, "%s for the arena", bytes_str(b1, sizeof b1, total));
    if (r->mem_limit > 0 && total > r->mem_limit)
        return ckrt_fail(c, CKRT_ERR_NOMEM, "the plan needs %s, over --mem-limit %s; compile with a checkpoint policy "
                         "(ckptc --checkpoint=blocks, or --checkpoint=budget:SIZE) to plan less", need,
                         bytes_str(b2, sizeof b2, r->mem_limit));
    if (c->be->arena_alloc(c, p->arena_bytes + GUARD_BYTES, &c->arena)) {
        /* a device backend says what its memory holds; the host's limits say nothing there */
        if (c->be->dev) snprintf(lim, sizeof lim, "%s", c->msg);
        else system_limit(lim, sizeof lim);
        return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the arena in %s memory: the plan needs %s; %s", c->be->name, need, lim);
    }
    c->arena_bytes = p->arena_bytes;
    c->guard_bytes = GUARD_BYTES;
    if (p->host_bytes > 0) {
        void *h = NULL;
        if (c->be->host_alloc(c, p->host_bytes, &h)) {
            system_limit(lim, sizeof lim);
            c->be->arena_free(c, c->arena);
            c->arena = NULL;
            return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the host pool for offloaded activations: the plan needs %s; %s", need,
                             lim);
        }
        c->host = h;
        c->host_bytes = p->host_bytes;
    }
    return CKRT_OK;
}

/* --device: the CUDA backend when asked for (an error when it cannot open) or, by default, when
 * a GPU is usable; the CPU otherwise. The first line of output says which (printed once weights
 * and inputs loaded: a program that fails before its steps prints nothing on stdout). */
static int select_device(run *r) {
    ckrt_ctx *c = &r->c;
    const char *why = "--device cpu";
    /* data parallel: every rank must pick the same backend, so the GPU is never probed for, only
     * asked for; each rank then takes the GPU of its local rank (modulo the GPUs present) */
    if (r->dp && !r->device) why = "data-parallel programs run on the CPU unless given --device cuda";
    else if (!r->device || strcmp(r->device, "cuda") == 0) {
        ckrt_cuda_options o = {.ordinal = r->dp ? ckrt_dp_local_rank() : 0, .wrap_ordinal = r->dp != NULL, .tf32 = r->tf32,
                               .quiet_probe = r->device == NULL};
        const ckrt_backend *be = NULL;
        int rc = ckrt_cuda_open(c, &o, &be);
        if (!rc) {
            c->be = be;
            snprintf(r->device_line, sizeof r->device_line, "device: cuda (%s)\n", ckrt_cuda_describe());
            return CKRT_OK;
        }
        if (r->device) {
            char msg[sizeof c->msg];
            snprintf(msg, sizeof msg, "%s", c->msg);
            return ckrt_fail(c, rc == CKRT_ERR_USAGE ? CKRT_ERR_USAGE : rc, "--device cuda: %s", msg);
        }
        why = c->msg;
    }
    snprintf(r->device_line, sizeof r->device_line, "device: cpu (%.500s)\n", why);
    c->code = 0;
    return CKRT_OK;
}

static int run_program(run *r, int argc, char **argv) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    r->steps = 1;
    int rc = parse_args(r, argc, argv);
    if (!rc) rc = select_device(r);
    if (rc > 0 && r->dp) rc = ckrt_dp_agree(r->dp, c, rc);
    if (rc) return rc;
    if (p->n_inputs > 64) return ckrt_fail(c, CKRT_ERR_INTERNAL, "more than 64 inputs");
    r->losses = calloc((size_t)r->steps, sizeof *r->losses);
    r->step_seconds = calloc((size_t)r->steps, sizeof *r->step_seconds);
    if (!r->losses || !r->step_seconds) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate %lld steps' records", (long long)r->steps);
    CKRT_TRY(alloc_memory(r));
    c->seed = r->seed; /* dropout: the same stream on every rank, each at its own counters (ck_k_dropout_block) */
    c->rng_rank = r->dp ? (uint64_t)ckrt_dp_rank(r->dp) : 0;
    if (!(rc = load_weights(r))) {
        rc = ckrt_arena_fill(c, p->weights_bytes, p->static_bytes - p->weights_bytes, 0); /* optimizer state */
        if (!rc) rc = load_inputs(r);
    }
    if (r->dp) { /* every rank checked its weights and inputs: stop all if one failed; same weights everywhere */
        rc = ckrt_dp_agree(r->dp, c, rc);
        if (!rc) rc = ckrt_dp_check_replicas(r->dp, c, p, "after loading the weights");
    }
    if (!rc) {
        fputs(r->device_line, stdout);
        /* the dynamic region and the guard zone, to a multiple of 8 bytes (static_bytes is aligned) */
        int64_t paint_end = p->static_bytes + (p->arena_bytes + GUARD_BYTES - p->static_bytes) / 8 * 8;
        rc = ckrt_arena_fill(c, p->static_bytes, paint_end - p->static_bytes, CANARY_BYTE);
        double t_start = now();
        for (int64_t s = 0; !rc && s < r->steps; s++) {
            double t0 = now();
            if (training(r)) {
                rc = train_step(r, s);
            } else {
                c->step = s + 1;
                rc = p->step(c);
                if (!rc) rc = c->be->synchronize(c);
            }
            r->step_seconds[s] = now() - t0;
            if (s == 0 && !rc) { /* the high-water mark of one whole step, measured before reuse hides it */
                c->node = NULL;
                int64_t top = 0;
                rc = ckrt_arena_top(c, p->static_bytes, paint_end, CANARY_BYTE, &top);
                if (!rc && top > p->arena_bytes)
                    rc = ckrt_fail(c, CKRT_ERR_INTERNAL, "a kernel wrote past the planned arena (byte %lld of %lld)",
                                   (long long)(top - 1), (long long)p->arena_bytes);
                r->measured = top;
            }
            if (!rc && training(r)) {
                double el = now() - t_start;
                printf("step %lld/%lld  loss %.6f  %.1f ms", (long long)(s + 1), (long long)r->steps, r->losses[s],
                       r->step_seconds[s] * 1e3);
                if (r->steps >= 20) printf("  (%.0f%%, %.1f s left)", 100.0 * (double)(s + 1) / (double)r->steps,
                                           el / (double)(s + 1) * (double)(r->steps - s - 1));
                printf("\n");
            }
        }
        c->node = NULL;
        bool steps_ok = rc == CKRT_OK;
        if (!ckrt_dp_writes(r->dp)) /* data parallel: rank 0 writes every file */
            r->dump_dir = r->params_dir = r->save_weights = r->report = r->timeline = r->grads_dir = NULL;
        if (!rc && r->dump_dir) rc = ensure_dir(c, r->dump_dir);
        for (int i = 0; !rc && r->dump_dir && i < p->n_outputs; i++) {
            const ckrt_io *io = &p->outputs[i];
            char path[4200];
            snprintf(path, sizeof path, "%s/%s.npy", r->dump_dir, io->file);
            rc = write_arena_npy(c, path, io->dtype, io->rank, io->dims, io->offset);
        }
        if (!rc && r->grads_dir) rc = write_npys(r, r->grads_dir, true);
        if (!rc && r->params_dir) rc = write_npys(r, r->params_dir, false);
        if (!rc && r->save_weights) rc = save_weights(r);
        if (!rc && r->report) rc = write_report(r);
        if (!rc && r->timeline) {
            ckrt_curve cv = {p->policy ? p->policy : p->name, p->n_timeline, p->timeline, p->backward_step, p->n_recompute_steps, p->recompute_steps};
            rc = ckrt_timeline_svg(c, r->timeline, 1, &cv);
        }
        if (r->dp && steps_ok) rc = ckrt_dp_agree(r->dp, c, rc); /* rank 0's files written, or all stop */
        if (!rc && training(r)) print_summary(r);
        if (!rc)
            printf("%s: %lld step%s; planned peak %lld bytes, measured %lld bytes\n", p->name, (long long)r->steps,
                   r->steps == 1 ? "" : "s", (long long)p->arena_bytes, (long long)r->measured);
    }
    free_grad_dump(r);
    c->be->arena_free(c, c->arena);
    c->arena = NULL;
    if (c->host) c->be->host_free(c, c->host);
    c->host = NULL;
    if (c->be->dev) ckrt_cuda_close(c);
    return rc;
}

int ckrt_main(const ckrt_program *p, int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    r.p = p;
    r.c.be = &ckrt_cpu_backend;
    ckrt_cpu_init();
    int rc = p->comm_init ? ckrt_dp_init(&r.dp, p, &r.c, &argc, &argv) : CKRT_OK;
    if (!rc) rc = run_program(&r, argc, argv);
    if (rc < 0 && r.dp) printf(ckrt_dp_usage, argv[0]);
    free(r.losses);
    free(r.step_seconds);
    if (r.dp) return ckrt_dp_finish(r.dp, &r.c, rc, p->name); /* prints, aborts or finalizes */
    if (rc < 0) return 0; /* --help */
    if (rc) {
        fflush(stdout);
        fprintf(stderr, "%s: error: %s\n", p->name, r.c.msg);
        return rc == CKRT_ERR_USAGE || rc == CKRT_ERR_DATA || rc == CKRT_ERR_NOMEM ? 2 : 1;
    }
    return 0;
}
