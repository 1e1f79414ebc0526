/* main_data.c — datasets for ckrt_main (--data NAME=FILE.npy, --epochs, --shuffle).
 *
 * A dataset is a .npy whose axis 0 indexes samples and whose other axes are the input's shape
 * without its batch axis; it is memory-mapped, so one larger than RAM works (the kernel pages in
 * the rows a batch reads). Every dataset of a run has the same number of samples N; an epoch is
 * floor(N / G) batches of G = ranks x B samples (the last partial batch is dropped), and each
 * rank trains on its own B of them: rows [k G + rank B, k G + (rank + 1) B) of the epoch's order.
 * The order is 0..N-1, or with --shuffle a permutation drawn for each epoch from the seed and
 * the epoch number (Fisher-Yates over splitmix64), the same for every input and every rank.
 * --tokens FILE (nanoGPT's and llm.c's layout: raw uint16 or int32 ids) serves a model whose token
 * input and labels are (B, T): sample j is the window of tokens [jT, jT + T], the first T the
 * input, the last T the labels (the next token of each), so N = floor((tokens - 1) / T).
 * Before each step the batch's rows are written to the inputs' arena bytes: straight from the
 * mapping when they are contiguous, else gathered into one host buffer of the batch's size.
 * --grad-accum K: step s trains on batches sK .. sK + K - 1 of that sequence (epochs of
 * floor(N / G) batches, one after the other).
 *
 * --eval-data NAME=FILE.npy / --eval-tokens FILE: a second dataset feeding every input; an eval
 * runs the training program's forward (through the loss) over its batches in order, in eval mode
 * (c->eval: dropout is the identity, BatchNorm normalizes with its running statistics and updates
 * nothing, as PyTorch's model.eval()), and averages the losses. No gradient, no update: the
 * forward is a prefix of the step, so its memory is the plan's. The inputs are the step's own
 * arena bytes: after an eval the training inputs are written back (the next batch, or --input's
 * files and the seeded fill again).
 */
#include "main.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int ranks_of(const run *r) { return r->dp ? ckrt_dp_size(r->dp) : 1; }

/* This rank's B samples of the batch of that index in the epoch's order; *contiguous: they are
 * rows rows[0] .. rows[0] + B - 1. */
static const int64_t *batch_rows(const run *r, int64_t batch, bool *contiguous) {
    int rank = r->dp ? ckrt_dp_rank(r->dp) : 0;
    const int64_t *rows = r->order + batch % r->batches_per_epoch * r->batch * ranks_of(r) + rank * r->batch;
    *contiguous = true;
    for (int64_t i = 1; *contiguous && i < r->batch; i++) *contiguous = rows[i] == rows[0] + i;
    return rows;
}

/* The rows of epoch e: the identity, or a permutation that depends only on (seed, e). */
static void epoch_order(run *r, int64_t e) {
    int64_t n = r->train.n_samples;
    for (int64_t i = 0; i < n; i++) r->order[i] = i;
    if (!r->shuffle) return;
    uint64_t s = r->seed * 0xD1B54A32D192ED03ull + (uint64_t)e * 0x8CB92BA72F3D8DD7ull + 0x5851F42D4C957F2Dull;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(mix(&s) % (uint64_t)(i + 1));
        int64_t t = r->order[i];
        r->order[i] = r->order[j], r->order[j] = t;
    }
}

/* One dataset against its input: the dtype, the trailing axes, at least one batch of rows. */
static int check_dataset(run *r, const ckrt_dataset *ds, int k) {
    ckrt_ctx *c = &r->c;
    const ckrt_io *io = &r->p->inputs[ds->src[k].input];
    const ckrt_array *a = &ds->src[k].map.a;
    const char *path = ds->src[k].path, *flag = ds->flag;
    char want[200], got[200]; /* want: "(64)" for an input (B, 64); printed as (N,64) */
    ckrt_shape_str(want, sizeof want, io->rank > 0 ? io->rank - 1 : 0, io->dims + 1);
    want[strlen(want) - 1] = 0;
    ckrt_shape_str(got, sizeof got, a->rank, a->dims);
    if (a->dtype != io->dtype)
        return ckrt_fail(c, CKRT_ERR_USAGE, "%s %s: '%s' holds %s but the input is %s", flag, io->name, path, ckrt_dtype_name(a->dtype),
                         ckrt_dtype_name(io->dtype));
    bool same = io->rank >= 1 && a->rank == io->rank;
    for (int d = 1; same && d < a->rank; d++) same = a->dims[d] == io->dims[d];
    if (!same)
        return ckrt_fail(c, CKRT_ERR_USAGE, "%s %s: '%s' has shape %s; this input takes (N%s%s): N samples of its shape without "
                         "the batch axis", flag, io->name, path, got, io->rank > 1 ? "," : "", want + 1);
    int ranks = ranks_of(r);
    if (a->dims[0] < io->dims[0] * ranks)
        return ckrt_fail(c, CKRT_ERR_USAGE, "%s %s: '%s' has %lld samples, fewer than one batch of %lld%s", flag, io->name, path,
                         (long long)a->dims[0], (long long)(io->dims[0] * ranks), ranks > 1 ? " (all ranks)" : "");
    return CKRT_OK;
}

/* --tokens: the model's token input (the first integer input of rank 2, (B, T)) and its labels
 * (another integer input of that shape) become two sources over one mapping of the file. */
static int open_tokens(run *r, ckrt_dataset *ds) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    int tok = -1, lab = -1;
    for (int i = 0; i < p->n_inputs; i++) {
        const ckrt_io *io = &p->inputs[i];
        bool integer = io->dtype == CKRT_I64 || io->dtype == CKRT_I32;
        if (!integer || io->rank != 2) continue;
        if (tok < 0) tok = i;
        else if (lab < 0 && io->dims[0] == p->inputs[tok].dims[0] && io->dims[1] == p->inputs[tok].dims[1]) lab = i;
    }
    if (tok < 0 || lab < 0)
        return ckrt_fail(c, CKRT_ERR_USAGE, "%s: the model has no integer (B, T) token input with labels of the same shape; "
                         "use %s NAME=FILE.npy for each input", ds->flag[2] == 'e' ? "--eval-tokens" : "--tokens", ds->flag);
    const char *flag = ds->flag[2] == 'e' ? "--eval-tokens" : "--tokens";
    int fd = open(ds->tokens, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0) close(fd);
        return ckrt_fail(c, CKRT_ERR_USAGE, "cannot open '%s': %s", ds->tokens, strerror(errno));
    }
    int64_t T = p->inputs[tok].dims[1], n_tok = (int64_t)st.st_size / r->token_bytes;
    if (st.st_size % r->token_bytes) {
        close(fd);
        return ckrt_fail(c, CKRT_ERR_USAGE, "%s '%s': %lld bytes is not a whole number of %d-byte tokens (truncated, or another "
                         "--token-dtype?)", flag, ds->tokens, (long long)st.st_size, r->token_bytes);
    }
    ds->tok_bytes = (size_t)st.st_size;
    ds->tok_base = st.st_size ? mmap(NULL, ds->tok_bytes, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (ds->tok_base == MAP_FAILED) {
        ds->tok_base = NULL;
        return ckrt_fail(c, CKRT_ERR_IO, "cannot map '%s': %s", ds->tokens, strerror(errno));
    }
    ds->n_samples = n_tok > T ? (n_tok - 1) / T : 0;
    int ranks = ranks_of(r);
    if (ds->n_samples < p->inputs[tok].dims[0] * ranks)
        return ckrt_fail(c, CKRT_ERR_USAGE, "%s '%s': %lld tokens make %lld windows of %lld + 1, fewer than one batch of %lld", flag,
                         ds->tokens, (long long)n_tok, (long long)ds->n_samples, (long long)T, (long long)(p->inputs[tok].dims[0] * ranks));
    for (int k = 0; k < 2; k++) {
        ds->src[k].input = k ? lab : tok, ds->src[k].path = ds->tokens, ds->src[k].shift = k;
        ds->src[k].map.a.data = ds->tok_base;
    }
    ds->n = 2;
    return CKRT_OK;
}

/* A dataset's files mapped and checked: the same N everywhere (ds->n_samples). */
static int open_dataset(run *r, ckrt_dataset *ds) {
    ckrt_ctx *c = &r->c;
    if (ds->tokens) return open_tokens(r, ds);
    for (int k = 0; k < ds->n; k++) {
        CKRT_TRY(ckrt_npy_map(c, ds->src[k].path, &ds->src[k].map));
        CKRT_TRY(check_dataset(r, ds, k));
        int64_t n = ds->src[k].map.a.dims[0];
        if (k > 0 && n != ds->n_samples)
            return ckrt_fail(c, CKRT_ERR_USAGE, "%s: '%s' has %lld samples but '%s' has %lld: every dataset needs the same number", ds->flag,
                             ds->src[0].path, (long long)ds->n_samples, ds->src[k].path, (long long)n);
        ds->n_samples = n;
    }
    return CKRT_OK;
}

/* The host buffer a batch is gathered in: as large as the largest input. */
static int alloc_gather(run *r) {
    int64_t most = 0;
    for (int i = 0; i < r->p->n_inputs; i++) {
        const ckrt_io *io = &r->p->inputs[i];
        int64_t bytes = ckrt_numel(io->rank, io->dims) * (int64_t)ckrt_dtype_size(io->dtype);
        if (bytes > most) most = bytes;
    }
    r->gather = malloc((size_t)(most > 0 ? most : 1));
    return r->gather ? CKRT_OK : ckrt_fail(&r->c, CKRT_ERR_NOMEM, "cannot allocate a batch's buffer (%lld bytes)", (long long)most);
}

/* --eval-data/--eval-tokens: opened, and feeding every input (an eval never mixes its samples
 * with the training batch's). */
static int open_eval(run *r) {
    ckrt_ctx *c = &r->c;
    ckrt_dataset *ds = &r->eval;
    if (!ds->n && !ds->tokens) {
        if (r->eval_every || r->eval_batches)
            return ckrt_fail(c, CKRT_ERR_USAGE, "%s needs an eval dataset (--eval-data NAME=FILE.npy or --eval-tokens FILE)",
                             r->eval_every ? "--eval-every" : "--eval-batches");
        return CKRT_OK;
    }
    CKRT_TRY(open_dataset(r, ds));
    if (!r->gather) CKRT_TRY(alloc_gather(r));
    for (int i = 0; i < r->p->n_inputs; i++) {
        bool fed = false;
        for (int k = 0; k < ds->n; k++) fed |= ds->src[k].input == i;
        if (!fed)
            return ckrt_fail(c, CKRT_ERR_USAGE, "%s: no eval data for input '%s': give every input (--eval-data %s=FILE.npy)", ds->flag,
                             r->p->inputs[i].name, r->p->inputs[i].name);
    }
    int64_t per = r->p->inputs[ds->src[0].input].dims[0] * ranks_of(r), have = ds->n_samples / per;
    if (!r->eval_batches || r->eval_batches > have) r->eval_batches = have;
    int64_t most = r->steps / (r->eval_every ? r->eval_every : r->steps) + 1;
    r->eval_steps = calloc((size_t)most, sizeof *r->eval_steps);
    r->eval_losses = calloc((size_t)most, sizeof *r->eval_losses);
    if (!r->eval_steps || !r->eval_losses) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the eval records");
    return CKRT_OK;
}

int ckrt_run_open_data(run *r) {
    ckrt_ctx *c = &r->c;
    ckrt_dataset *ds = &r->train;
    if (ds->n == 0 && !ds->tokens) {
        if (r->epochs || r->shuffle)
            return ckrt_fail(c, CKRT_ERR_USAGE, "%s needs a dataset (--data NAME=FILE.npy)", r->epochs ? "--epochs" : "--shuffle");
        return open_eval(r);
    }
    CKRT_TRY(open_dataset(r, ds));
    int ranks = ranks_of(r);
    int64_t k = r->accum;
    r->batch = r->p->inputs[ds->src[0].input].dims[0];
    r->batches_per_epoch = ds->n_samples / (r->batch * ranks);
    int64_t from_epochs = (r->epochs ? r->epochs : 1) * r->batches_per_epoch / k;
    if (from_epochs < 1)
        return ckrt_fail(c, CKRT_ERR_USAGE, "--grad-accum %lld: a step takes %lld batches but the data holds %lld", (long long)k,
                         (long long)k, (long long)((r->epochs ? r->epochs : 1) * r->batches_per_epoch));
    if (!r->steps_given || from_epochs < r->steps) r->steps = from_epochs; /* --steps caps */
    r->order = malloc((size_t)ds->n_samples * sizeof *r->order);
    if (!r->order) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the dataset's order (%lld samples)", (long long)ds->n_samples);
    CKRT_TRY(alloc_gather(r));
    return open_eval(r);
}

/* B rows of a dataset (rows[0] .. when contiguous) written to the inputs its files feed. */
static int feed_rows(run *r, const ckrt_dataset *ds, const int64_t *rows, bool contiguous) {
    ckrt_ctx *c = &r->c;
    for (int d = 0; d < ds->n; d++) {
        const ckrt_io *io = &r->p->inputs[ds->src[d].input];
        int64_t row = ckrt_numel(io->rank - 1, io->dims + 1) * (int64_t)ckrt_dtype_size(io->dtype), B = io->dims[0];
        const unsigned char *src = ds->src[d].map.a.data;
        if (ds->src[d].shift >= 0) { /* --tokens: window w is tokens [wT + shift, wT + shift + T) */
            int64_t T = io->dims[1];
            for (int64_t i = 0; i < B; i++)
                for (int64_t t = 0; t < T; t++) {
                    int64_t at = rows[i] * T + ds->src[d].shift + t;
                    int64_t v = r->token_bytes == 2 ? ((const uint16_t *)(const void *)src)[at] : ((const int32_t *)(const void *)src)[at];
                    if (io->dtype == CKRT_I64) ((int64_t *)(void *)r->gather)[i * T + t] = v;
                    else ((int32_t *)(void *)r->gather)[i * T + t] = (int32_t)v;
                }
            CKRT_TRY(ckrt_arena_write(c, io->offset, r->gather, B * row));
            continue;
        }
        if (contiguous) {
            CKRT_TRY(ckrt_arena_write(c, io->offset, src + rows[0] * row, B * row));
            continue;
        }
        for (int64_t i = 0; i < B; i++) memcpy(r->gather + i * row, src + rows[i] * row, (size_t)row);
        CKRT_TRY(ckrt_arena_write(c, io->offset, r->gather, B * row));
    }
    return CKRT_OK;
}

int ckrt_run_feed(run *r, int64_t batch) {
    if (r->train.n == 0) return CKRT_OK;
    int64_t e = batch / r->batches_per_epoch, k = batch % r->batches_per_epoch;
    if (k == 0 || batch == r->first_step * r->accum) epoch_order(r, e);
    r->epoch = e;
    bool contiguous;
    const int64_t *rows = batch_rows(r, batch, &contiguous);
    return feed_rows(r, &r->train, rows, contiguous);
}

/* The eval: batch j of this rank is rows [j G + rank B, j G + (rank + 1) B) of the eval data, in
 * file order. */
static int eval_batches(run *r, double *mean) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    int64_t B = p->inputs[r->eval.src[0].input].dims[0], G = B * ranks_of(r), rank = r->dp ? ckrt_dp_rank(r->dp) : 0;
    int64_t *rows = malloc((size_t)B * sizeof *rows);
    if (!rows) return ckrt_fail(c, CKRT_ERR_NOMEM, "out of memory");
    double sum = 0;
    int rc = CKRT_OK;
    for (int64_t j = 0; !rc && j < r->eval_batches; j++) {
        for (int64_t i = 0; i < B; i++) rows[i] = j * G + rank * B + i;
        rc = feed_rows(r, &r->eval, rows, true);
        if (!rc) rc = p->forward(c);
        if (!rc) rc = c->be->synchronize(c);
        float loss = 0;
        if (!rc) rc = ckrt_arena_read(c, p->loss_offset, &loss, (int64_t)sizeof loss);
        if (rc && c->code != CKRT_ERR_USAGE) {
            char msg[sizeof c->msg];
            snprintf(msg, sizeof msg, "%s", c->msg);
            c->node = NULL;
            ckrt_fail(c, rc, "eval batch %lld (%s rows %lld-%lld): %.800s", (long long)(j + 1), r->eval.tokens ? "--eval-tokens window"
                      : "--eval-data", (long long)rows[0], (long long)rows[B - 1], msg);
        }
        sum += loss;
    }
    free(rows);
    *mean = r->eval_batches ? sum / (double)r->eval_batches : 0.0;
    return rc;
}

int ckrt_run_eval(run *r, int64_t step) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    /* without --data the training inputs are written once: keep them */
    void *saved[64] = {0};
    int rc = CKRT_OK;
    for (int i = 0; !rc && !r->train.n && i < p->n_inputs; i++)
        rc = ckrt_arena_fetch(c, p->inputs[i].offset, ckrt_numel(p->inputs[i].rank, p->inputs[i].dims) *
                              (int64_t)ckrt_dtype_size(p->inputs[i].dtype), &saved[i]);
    double mean = 0;
    c->eval = 1; /* dropout draws nothing, BatchNorm updates nothing */
    if (!rc) rc = eval_batches(r, &mean);
    c->eval = 0;
    if (r->dp) { /* the ranks' mean, and one status for all */
        double m = mean;
        rc = ckrt_dp_mean(r->dp, c, rc, &m);
        mean = m;
    }
    for (int i = 0; i < p->n_inputs; i++) {
        if (!saved[i]) continue;
        int64_t bytes = ckrt_numel(p->inputs[i].rank, p->inputs[i].dims) * (int64_t)ckrt_dtype_size(p->inputs[i].dtype);
        if (!rc) rc = ckrt_arena_write(c, p->inputs[i].offset, saved[i], bytes);
        ckrt_arena_release(c, saved[i], bytes);
    }
    if (rc) return rc;
    r->eval_steps[r->n_evals] = step;
    r->eval_losses[r->n_evals++] = mean;
    return CKRT_OK;
}

/* A step that failed on --data (a label out of range, a NaN): which samples it read, so that a
 * "position i" in the kernel's message can be traced to its row of the dataset. */
int ckrt_run_data_context(run *r, int64_t step, int rc) {
    if (r->train.n == 0 || !rc || r->c.eval) return rc;
    ckrt_ctx *c = &r->c;
    bool contiguous;
    int64_t k = r->accum;
    const int64_t *rows = batch_rows(r, step * k + r->c.micro, &contiguous);
    char list[600] = "";
    if (contiguous) {
        snprintf(list, sizeof list, "rows %lld-%lld", (long long)rows[0], (long long)(rows[0] + r->batch - 1));
    } else {
        size_t n = (size_t)snprintf(list, sizeof list, "rows");
        for (int64_t i = 0; i < r->batch && n < sizeof list - 32; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%lld", i ? "," : " ", (long long)rows[i]);
        if (n >= sizeof list - 32) snprintf(list + n, sizeof list - n, ",...");
    }
    char msg[sizeof c->msg];
    snprintf(msg, sizeof msg, "%s", c->msg);
    const char *node = c->node;
    c->node = NULL;
    ckrt_fail(c, rc, "%.900s (step %lld's batch is the datasets' %s%s)", msg, (long long)(step + 1), list,
              contiguous ? "" : ", in batch order");
    c->node = node;
    return rc;
}

static void close_dataset(ckrt_dataset *ds) {
    for (int k = 0; k < ds->n && !ds->tokens; k++) ckrt_npy_unmap(&ds->src[k].map);
    if (ds->tok_base) munmap(ds->tok_base, ds->tok_bytes);
    ds->tok_base = NULL;
}

void ckrt_run_close_data(run *r) {
    close_dataset(&r->train);
    close_dataset(&r->eval);
    free(r->order);
    free(r->gather);
    r->order = NULL, r->gather = NULL;
}
