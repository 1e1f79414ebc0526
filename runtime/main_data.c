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

/* This rank's B samples of step's batch in the epoch's order; *contiguous: they are rows
 * rows[0] .. rows[0] + B - 1. */
static const int64_t *batch_rows(const run *r, int64_t step, bool *contiguous) {
    int rank = r->dp ? ckrt_dp_rank(r->dp) : 0;
    const int64_t *rows = r->order + step % r->batches_per_epoch * r->batch * ranks_of(r) + rank * r->batch;
    *contiguous = true;
    for (int64_t i = 1; *contiguous && i < r->batch; i++) *contiguous = rows[i] == rows[0] + i;
    return rows;
}

/* The rows of epoch e: the identity, or a permutation that depends only on (seed, e). */
static void epoch_order(run *r, int64_t e) {
    int64_t n = r->n_samples;
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
static int check_dataset(run *r, int k) {
    ckrt_ctx *c = &r->c;
    const ckrt_io *io = &r->p->inputs[r->data[k].input];
    const ckrt_array *a = &r->data[k].map.a;
    const char *path = r->data[k].path;
    char want[200], got[200]; /* want: "(64)" for an input (B, 64); printed as (N,64) */
    ckrt_shape_str(want, sizeof want, io->rank > 0 ? io->rank - 1 : 0, io->dims + 1);
    want[strlen(want) - 1] = 0;
    ckrt_shape_str(got, sizeof got, a->rank, a->dims);
    if (a->dtype != io->dtype)
        return ckrt_fail(c, CKRT_ERR_USAGE, "--data %s: '%s' holds %s but the input is %s", io->name, path, ckrt_dtype_name(a->dtype),
                         ckrt_dtype_name(io->dtype));
    bool same = io->rank >= 1 && a->rank == io->rank;
    for (int d = 1; same && d < a->rank; d++) same = a->dims[d] == io->dims[d];
    if (!same)
        return ckrt_fail(c, CKRT_ERR_USAGE, "--data %s: '%s' has shape %s; this input takes (N%s%s): N samples of its shape without "
                         "the batch axis", io->name, path, got, io->rank > 1 ? "," : "", want + 1);
    int ranks = ranks_of(r);
    if (a->dims[0] < io->dims[0] * ranks)
        return ckrt_fail(c, CKRT_ERR_USAGE, "--data %s: '%s' has %lld samples, fewer than one batch of %lld%s", io->name, path,
                         (long long)a->dims[0], (long long)(io->dims[0] * ranks), ranks > 1 ? " (all ranks)" : "");
    return CKRT_OK;
}

/* --tokens: the model's token input (the first integer input of rank 2, (B, T)) and its labels
 * (another integer input of that shape) become two sources over one mapping of the file. */
static int open_tokens(run *r) {
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
        return ckrt_fail(c, CKRT_ERR_USAGE, "--tokens: the model has no integer (B, T) token input with labels of the same shape; "
                         "use --data NAME=FILE.npy for each input");
    int fd = open(r->tokens, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0) close(fd);
        return ckrt_fail(c, CKRT_ERR_USAGE, "cannot open '%s': %s", r->tokens, strerror(errno));
    }
    int64_t T = p->inputs[tok].dims[1], n_tok = (int64_t)st.st_size / r->token_bytes;
    if (st.st_size % r->token_bytes) {
        close(fd);
        return ckrt_fail(c, CKRT_ERR_USAGE, "--tokens '%s': %lld bytes is not a whole number of %d-byte tokens (truncated, or another "
                         "--token-dtype?)", r->tokens, (long long)st.st_size, r->token_bytes);
    }
    r->tok_bytes = (size_t)st.st_size;
    r->tok_base = st.st_size ? mmap(NULL, r->tok_bytes, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (r->tok_base == MAP_FAILED) {
        r->tok_base = NULL;
        return ckrt_fail(c, CKRT_ERR_IO, "cannot map '%s': %s", r->tokens, strerror(errno));
    }
    r->n_samples = n_tok > T ? (n_tok - 1) / T : 0;
    int ranks = ranks_of(r);
    if (r->n_samples < p->inputs[tok].dims[0] * ranks)
        return ckrt_fail(c, CKRT_ERR_USAGE, "--tokens '%s': %lld tokens make %lld windows of %lld + 1, fewer than one batch of %lld",
                         r->tokens, (long long)n_tok, (long long)r->n_samples, (long long)T, (long long)(p->inputs[tok].dims[0] * ranks));
    for (int k = 0; k < 2; k++) {
        r->data[k].input = k ? lab : tok, r->data[k].path = r->tokens, r->data[k].shift = k;
        r->data[k].map.a.data = r->tok_base;
    }
    r->n_data = 2;
    return CKRT_OK;
}

int ckrt_run_open_data(run *r) {
    ckrt_ctx *c = &r->c;
    if (r->tokens) CKRT_TRY(open_tokens(r));
    if (r->n_data == 0) {
        if (r->epochs || r->shuffle)
            return ckrt_fail(c, CKRT_ERR_USAGE, "%s needs a dataset (--data NAME=FILE.npy)", r->epochs ? "--epochs" : "--shuffle");
        return CKRT_OK;
    }
    for (int k = 0; k < r->n_data && !r->tokens; k++) {
        CKRT_TRY(ckrt_npy_map(c, r->data[k].path, &r->data[k].map));
        CKRT_TRY(check_dataset(r, k));
        int64_t n = r->data[k].map.a.dims[0];
        if (k > 0 && n != r->n_samples)
            return ckrt_fail(c, CKRT_ERR_USAGE, "--data: '%s' has %lld samples but '%s' has %lld: every dataset needs the same number",
                             r->data[0].path, (long long)r->n_samples, r->data[k].path, (long long)n);
        r->n_samples = n;
    }
    int ranks = ranks_of(r);
    r->batch = r->p->inputs[r->data[0].input].dims[0];
    r->batches_per_epoch = r->n_samples / (r->batch * ranks);
    int64_t from_epochs = (r->epochs ? r->epochs : 1) * r->batches_per_epoch;
    if (!r->steps_given || from_epochs < r->steps) r->steps = from_epochs; /* --steps caps */
    r->order = malloc((size_t)r->n_samples * sizeof *r->order);
    int64_t most = 0;
    for (int k = 0; k < r->n_data; k++) {
        const ckrt_io *io = &r->p->inputs[r->data[k].input];
        int64_t bytes = ckrt_numel(io->rank, io->dims) * (int64_t)ckrt_dtype_size(io->dtype);
        if (bytes > most) most = bytes;
    }
    r->gather = malloc((size_t)(most > 0 ? most : 1));
    if (!r->order || !r->gather) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the dataset's order (%lld samples)",
                                                  (long long)r->n_samples);
    return CKRT_OK;
}

int ckrt_run_feed(run *r, int64_t step) {
    if (r->n_data == 0) return CKRT_OK;
    ckrt_ctx *c = &r->c;
    int64_t e = step / r->batches_per_epoch, k = step % r->batches_per_epoch;
    if (k == 0 || step == r->first_step) epoch_order(r, e);
    r->epoch = e;
    bool contiguous;
    const int64_t *rows = batch_rows(r, step, &contiguous);
    for (int d = 0; d < r->n_data; d++) {
        const ckrt_io *io = &r->p->inputs[r->data[d].input];
        int64_t row = ckrt_numel(io->rank - 1, io->dims + 1) * (int64_t)ckrt_dtype_size(io->dtype);
        const unsigned char *src = r->data[d].map.a.data;
        if (r->data[d].shift >= 0) { /* --tokens: window w is tokens [wT + shift, wT + shift + T) */
            int64_t T = io->dims[1];
            for (int64_t i = 0; i < r->batch; i++)
                for (int64_t t = 0; t < T; t++) {
                    int64_t at = rows[i] * T + r->data[d].shift + t;
                    int64_t v = r->token_bytes == 2 ? ((const uint16_t *)(const void *)src)[at] : ((const int32_t *)(const void *)src)[at];
                    if (io->dtype == CKRT_I64) ((int64_t *)(void *)r->gather)[i * T + t] = v;
                    else ((int32_t *)(void *)r->gather)[i * T + t] = (int32_t)v;
                }
            CKRT_TRY(ckrt_arena_write(c, io->offset, r->gather, r->batch * row));
            continue;
        }
        if (contiguous) {
            CKRT_TRY(ckrt_arena_write(c, io->offset, src + rows[0] * row, r->batch * row));
            continue;
        }
        for (int64_t i = 0; i < r->batch; i++) memcpy(r->gather + i * row, src + rows[i] * row, (size_t)row);
        CKRT_TRY(ckrt_arena_write(c, io->offset, r->gather, r->batch * row));
    }
    return CKRT_OK;
}

/* A step that failed on --data (a label out of range, a NaN): which samples it read, so that a
 * "position i" in the kernel's message can be traced to its row of the dataset. */
int ckrt_run_data_context(run *r, int64_t step, int rc) {
    if (r->n_data == 0 || !rc) return rc;
    ckrt_ctx *c = &r->c;
    bool contiguous;
    const int64_t *rows = batch_rows(r, step, &contiguous);
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

void ckrt_run_close_data(run *r) {
    for (int k = 0; k < r->n_data && !r->tokens; k++) ckrt_npy_unmap(&r->data[k].map);
    if (r->tok_base) munmap(r->tok_base, r->tok_bytes);
    r->tok_base = NULL;
    free(r->order);
    free(r->gather);
    r->order = NULL, r->gather = NULL;
}
