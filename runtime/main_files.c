/* main_files.c — ckrt_main's files: weights.bin loaded into the arena (magic, version, layout and
 * checksum checked) and saved back (--save-weights), the inputs (.npy, dtype and shape exactly the
 * model's, or filled from the seed), .npy dumps of outputs, parameters and gradients, and the host
 * buffers --dump-grads copies gradients into. Arena bytes move through ckrt_arena_* (arena_io.c):
 * on a device the host holds no copy of the arena. Files are written through temporary names.
 */
#include "main.h"
#include "ckrt_kernels_train.h" /* ck_k_grad_eff */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int ckrt_run_load_weights(run *r) {
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
int ckrt_run_save_weights(run *r) {
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

int ckrt_run_load_inputs(run *r) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    for (int i = 0; i < p->n_inputs; i++) {
        const ckrt_io *io = &p->inputs[i];
        r->from_file[i] = r->input_file[i] != NULL;
        bool data = false;
        for (int k = 0; k < r->train.n; k++) data |= r->train.src[k].input == i;
        if (data) {
            r->from_file[i] = 2; /* written before each step (main_data.c) */
            continue;
        }
        if (!r->input_file[i]) {
            int64_t bytes = ckrt_numel(io->rank, io->dims) * (int64_t)ckrt_dtype_size(io->dtype);
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
        ckrt_shape_str(want, sizeof want, io->rank, io->dims);
        ckrt_shape_str(got, sizeof got, a.rank, a.dims);
        int rc = CKRT_OK;
        bool same = a.rank == io->rank && ckrt_numel(a.rank, a.dims) == ckrt_numel(io->rank, io->dims);
        for (int k = 0; same && k < a.rank; k++) same = a.dims[k] == io->dims[k];
        if (a.dtype != io->dtype)
            rc = ckrt_fail(c, CKRT_ERR_USAGE, "input '%s': '%s' holds %s %s but the model takes %s %s", io->name,
                           r->input_file[i], ckrt_dtype_name(a.dtype), got, ckrt_dtype_name(io->dtype), want);
        else if (!same)
            rc = ckrt_fail(c, CKRT_ERR_USAGE, "input '%s': '%s' has shape %s but the model takes %s", io->name,
                           r->input_file[i], got, want);
        else
            rc = ckrt_arena_write(c, io->offset, a.data, ckrt_numel(a.rank, a.dims) * (int64_t)ckrt_dtype_size(a.dtype));
        free(a.data);
        if (rc) return rc;
    }
    return CKRT_OK;
}

/* Creates DIR when missing (one level), so --dump-* DIR works on a fresh path. */
int ckrt_run_ensure_dir(ckrt_ctx *c, const char *dir) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return ckrt_fail(c, CKRT_ERR_IO, "cannot create '%s': %s", dir, strerror(errno));
    return CKRT_OK;
}

/* A tensor of the arena to an .npy file, through a host copy of its size. */
int ckrt_run_write_arena_npy(ckrt_ctx *c, const char *path, ckrt_dtype dt, int rank, const int64_t *dims, int64_t offset) {
    int64_t bytes = ckrt_numel(rank, dims) * (int64_t)ckrt_dtype_size(dt);
    void *buf;
    CKRT_TRY(ckrt_arena_fetch(c, offset, bytes, &buf));
    int rc = ckrt_npy_write(c, path, dt, rank, dims, buf);
    ckrt_arena_release(c, buf, bytes);
    return rc;
}

/* Parameters and buffers from the arena, or (grads) the trainable parameters' gradients from the
 * --dump-grads buffers. */
int ckrt_run_write_npys(run *r, const char *dir, bool grads) {
    const ckrt_program *p = r->p;
    CKRT_TRY(ckrt_run_ensure_dir(&r->c, dir));
    for (int i = 0; i < p->n_state; i++) {
        const ckrt_state *s = &p->state[i];
        if (grads && s->grad_offset < 0) continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.npy", dir, s->file);
        if (grads) {
            CKRT_TRY(ckrt_npy_write(&r->c, path, s->dtype, s->rank, s->dims, r->c.grad_dump[i]));
            continue;
        }
        CKRT_TRY(ckrt_run_write_arena_npy(&r->c, path, s->dtype, s->rank, s->dims, s->offset));
    }
    return CKRT_OK;
}

int ckrt_run_grad_pass(ckrt_ctx *c, const float *g, const float *acc, int64_t n, float *dump, double *sq) {
    int64_t bytes = n * (int64_t)sizeof(float);
    void *hg = NULL, *ha = NULL;
    int rc = CKRT_OK;
    if (c->be->dev) { /* device bytes: host copies (a debugging and metrics path) */
        rc = ckrt_arena_fetch(c, (const unsigned char *)g - c->arena, bytes, &hg);
        if (!rc && acc) rc = ckrt_arena_fetch(c, (const unsigned char *)acc - c->arena, bytes, &ha);
        g = hg, acc = acc ? ha : NULL;
    }
    double s = 0;
    for (int64_t i = 0; !rc && i < n; i++) {
        float e = ck_k_grad_eff(i, g, acc, c->grad_scale);
        if (dump) dump[i] = e;
        s += (double)e * (double)e;
    }
    *sq = s;
    if (hg) ckrt_arena_release(c, hg, bytes);
    if (ha) ckrt_arena_release(c, ha, bytes);
    return rc;
}

int ckrt_grad_ready(ckrt_ctx *c, int k, const float *g, const float *acc, int64_t bytes) {
    if (c->accum > 1 && c->micro + 1 < c->accum) return CKRT_OK; /* accumulating: not final yet */
    const float *a = c->accum > 1 ? acc : NULL;
    if (c->grad_dump && !a && c->grad_scale == 1.0f && !c->grad_sq) /* the gradient itself, copied on the copy stream */
        return c->be->copy_to_host(c, c->grad_dump[k], g, bytes, 1);
    double sq = 0;
    int rc = ckrt_run_grad_pass(c, g, a, bytes / (int64_t)sizeof(float), c->grad_dump ? c->grad_dump[k] : NULL, &sq);
    if (c->grad_sq) c->grad_sq[k] = sq;
    return rc;
}

/* --dump-grads: one host block for every trainable parameter's gradient (debug memory, not in
 * the plan); c->grad_dump set makes the last step's updates copy their gradients there. */
int ckrt_run_alloc_grad_dump(run *r) {
    const ckrt_program *p = r->p;
    int64_t total = 0;
    for (int i = 0; i < p->n_state; i++)
        if (p->state[i].grad_offset >= 0) total += ckrt_numel(p->state[i].rank, p->state[i].dims) * (int64_t)ckrt_dtype_size(p->state[i].dtype);
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
            at += (ckrt_numel(p->state[i].rank, p->state[i].dims) * (int64_t)ckrt_dtype_size(p->state[i].dtype));
        }
    r->c.grad_dump = slot;
    return CKRT_OK;
}

void ckrt_run_free_grad_dump(run *r) {
    free(r->grad_block);
    free(r->c.grad_dump);
    r->grad_block = NULL, r->c.grad_dump = NULL;
}
