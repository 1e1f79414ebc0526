/* dp.c — data-parallel training inside libckrt, written against the ckrt_comm interface only:
 * libckrt never links MPI. The transport (runtime/mpi/ckrt_mpi.c -> libckrt_mpi.a: MPI, NCCL on GPUs)
 * is handed over by the generated program (ckrt_program.comm_init).
 *
 * Why each piece is built the way it is:
 * - Gradient averaging is deterministic. MPI_Allreduce may sum in any order (and does, by message
 *   size and rank count), so the sum is built here: the gradients (in the order the backward
 *   finishes them) are packed into buckets in the planned staging area; the bucket is cut into N
 *   slices; every rank receives its slice from every rank (alltoallv), sums the N copies in rank
 *   order 0..N-1, divides by N, and the slices are gathered back (allgatherv, pure data
 *   movement). Same bits on every rank and every run for a given N; as fast as a ring allreduce
 *   in bytes moved (each rank sends and receives (N-1)/N of the bucket twice).
 * - Failures are agreed. Every step has fixed agreement points (the start of the gradient
 *   all-reduce, after the loss check): each rank contributes its status; when one failed, all
 *   learn its message and stop cleanly with exit codes. A failure anywhere else aborts the job
 *   (ckrt_dp_finish -> comm->abort): nothing can leave a rank waiting forever.
 * - Rank 0 writes every file; ranks other than 0 print nothing to stdout.
 */
#include "ckrt_dp.h"
#include "ckrt_device.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ckrt_dp {
    ckrt_comm *comm;
    int rank, size;
    bool agreed;             /* a failure was agreed: every rank is stopping */
    bool print;              /* this rank prints the failure */
    bool failed_here;        /* the agreed failure is (also) this rank's own */
    bool backend_checked;    /* the backend's arena is host memory (ckrt_dp_check_replicas) */
    int64_t check_every;     /* --check-replicas K (0: only after loading and after the last step) */
    int64_t n_checks;
    double *comm_s[2];       /* seconds per step: [0] moving data (gradients, buffers, checksums), */
    int64_t n_comm_s[2];     /* [1] waiting in agreements (mostly for the slowest rank's compute) */
    int64_t staging_bytes;   /* what the all-reduce node was planned */
    int64_t grad_floats;
    int64_t buckets;         /* rounds through the staging per step (a bucket larger than its staging takes several) */
    int n_buckets;           /* ckptc.GradAllReduce nodes per step */
    bool side;               /* they run on a device's communication stream */
    double *losses;          /* the ranks' losses of the last step */
    int64_t *cnt, *displ, *rcnt, *rdispl; /* per-rank slices of a bucket */
    char *paths[64];
    int n_paths;
    const char *input_mode[64], *input_name[64];
    char first_msg[sizeof ((ckrt_ctx *)0)->msg];
};

const char *ckrt_dp_usage =
    "\n"
    "data parallel (mpirun -np N %s ...; each rank trains its shard of the batch):\n"
    "  --input NAME=FILE.npy  a FILE with N x the compiled leading dimension is split by rank (rank r\n"
    "                         takes rows [r*B, (r+1)*B)); \"{rank}\" in FILE reads one file per rank\n"
    "  --check-replicas K     compare parameter checksums across ranks every K steps (default: after\n"
    "                         loading and after the last step only)\n";

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { XFER, WAIT };

static void add_time(ckrt_dp *dp, int which, int64_t step, double s) {
    if (step < 1) return;
    if (step > dp->n_comm_s[which]) {
        int64_t n = step > 2 * dp->n_comm_s[which] ? step : 2 * dp->n_comm_s[which];
        double *t = realloc(dp->comm_s[which], sizeof(double) * (size_t)n);
        if (!t) return; /* timing only */
        memset(t + dp->n_comm_s[which], 0, sizeof(double) * (size_t)(n - dp->n_comm_s[which]));
        dp->comm_s[which] = t;
        dp->n_comm_s[which] = n;
    }
    dp->comm_s[which][step - 1] += s;
}

static int comm_fail(ckrt_ctx *c, ckrt_dp *dp, const char *what) {
    return ckrt_fail(c, CKRT_ERR_IO, "rank %d of %d: %s failed: %s", dp->rank, dp->size, what, dp->comm->msg);
}

/* ---------------------------------------------------------------- start, flags, end */

int ckrt_dp_init(ckrt_dp **out, const ckrt_program *p, ckrt_ctx *c, int *argc, char ***argv) {
    ckrt_dp *dp = calloc(1, sizeof *dp);
    if (!dp) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the data-parallel state");
    *out = dp;
    char msg[256] = "";
    if (p->comm_init(argc, argv, &dp->comm, msg, sizeof msg) != 0 || !dp->comm) {
        dp->agreed = true; /* no communicator: nothing to abort */
        dp->print = true;
        return ckrt_fail(c, CKRT_ERR_IO, "cannot start the communicator: %s", msg);
    }
    dp->rank = dp->comm->rank;
    dp->size = dp->comm->size;
    c->dp = dp;
    size_t n = (size_t)dp->size;
    dp->cnt = calloc(n + 1, sizeof(int64_t)), dp->displ = calloc(n + 1, sizeof(int64_t));
    dp->rcnt = calloc(n + 1, sizeof(int64_t)), dp->rdispl = calloc(n + 1, sizeof(int64_t));
    dp->losses = calloc(n, sizeof(double));
    if (!dp->cnt || !dp->displ || !dp->rcnt || !dp->rdispl || !dp->losses)
        return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the data-parallel state for %d ranks", dp->size);
    /* take our flags out of argv; the rest goes to the trainer's parser (same argv on every rank,
     * so a bad value fails identically everywhere: agreed, printed once by rank 0) */
    int k = 1;
    char **av = *argv;
    for (int i = 1; i < *argc; i++) {
        const char *a = av[i], *val = NULL;
        if (!strcmp(a, "--check-replicas")) {
            if (i + 1 >= *argc) {
                dp->agreed = true, dp->print = dp->rank == 0;
                return ckrt_fail(c, CKRT_ERR_USAGE, "option '--check-replicas' needs a value");
            }
            val = av[++i];
        } else if (!strncmp(a, "--check-replicas=", 17)) {
            val = a + 17;
        } else {
            av[k++] = av[i];
            continue;
        }
        char *end;
        errno = 0;
        long long v = strtoll(val, &end, 10);
        if (errno || *end || !*val || v < 1) {
            dp->agreed = true, dp->print = dp->rank == 0;
            return ckrt_fail(c, CKRT_ERR_USAGE, "--check-replicas '%s': expected an integer >= 1", val);
        }
        dp->check_every = v;
    }
    *argc = k;
    av[k] = NULL;
    if (dp->rank != 0) {
        fflush(stdout);
        if (!freopen("/dev/null", "w", stdout)) { /* keep stdout then: noisy, not wrong */
        }
    }
    return CKRT_OK;
}

bool ckrt_dp_writes(const ckrt_dp *dp) { return !dp || dp->rank == 0; }
bool ckrt_dp_agreed(const ckrt_dp *dp) { return dp && dp->agreed; }

int ckrt_dp_finish(ckrt_dp *dp, ckrt_ctx *c, int rc, const char *name) {
    int status = rc == CKRT_ERR_USAGE || rc == CKRT_ERR_DATA ? 2 : rc ? 1 : 0;
    if (rc > 0) {
        fflush(stdout);
        if (!dp->agreed) { /* a failure the other ranks cannot know about: stop them all */
            fprintf(stderr, "%s: error: rank %d of %d: %s (stopping all ranks)\n", name, dp->rank, dp->size, c->msg);
            fflush(stderr);
            if (dp->comm) dp->comm->abort(dp->comm, status);
        } else if (dp->print) {
            fprintf(stderr, "%s: error: %s\n", name, c->msg);
        }
    }
    if (rc < 0) status = 0; /* --help */
    if (dp->comm) dp->comm->finalize(dp->comm);
    for (int i = 0; i < dp->n_paths; i++) free(dp->paths[i]);
    free(dp->cnt), free(dp->displ), free(dp->rcnt), free(dp->rdispl), free(dp->losses), free(dp->comm_s[0]), free(dp->comm_s[1]);
    c->dp = NULL;
    free(dp);
    return status;
}

/* ---------------------------------------------------------------- agreement */

typedef struct ctl {
    int32_t code, pad;
    double loss;
} ctl;

/* Every rank's {status, loss} (per_rank: each rank's loss, or NULL); on a failure the first
 * failing rank's message is broadcast. */
static int agree_loss(ckrt_dp *dp, ckrt_ctx *c, int rc, double *loss, double *per_rank) {
    if (dp->size == 1 && !loss) return rc;
    ctl mine = {rc, 0, loss ? *loss : 0}, *all = calloc((size_t)dp->size, sizeof *all);
    if (!all) return ckrt_fail(c, CKRT_ERR_NOMEM, "out of memory");
    char own[sizeof c->msg];
    snprintf(own, sizeof own, "%s", c->msg);
    if (dp->comm->allgather(dp->comm, &mine, all, (int64_t)sizeof mine)) {
        free(all);
        return comm_fail(c, dp, "the agreement between ranks");
    }
    int first = -1;
    double sum = 0;
    for (int q = 0; q < dp->size; q++) {
        if (all[q].code && first < 0) first = q;
        sum += all[q].loss; /* rank order: the same mean on every rank */
        if (per_rank) per_rank[q] = all[q].loss;
    }
    int code = first >= 0 ? all[first].code : CKRT_OK;
    free(all);
    if (first < 0) {
        if (loss) *loss = sum / dp->size;
        return CKRT_OK;
    }
    char msg[sizeof c->msg];
    if (dp->rank == first) snprintf(msg, sizeof msg, "%s", own);
    if (dp->comm->bcast(dp->comm, msg, (int64_t)sizeof msg, first)) return comm_fail(c, dp, "broadcasting an error");
    msg[sizeof msg - 1] = 0;
    dp->agreed = true;
    dp->failed_here = rc != CKRT_OK;
    /* printed twice at most: by the first failing rank (its own message) and by rank 0 */
    dp->print = dp->rank == first || dp->rank == 0;
    c->node = NULL;
    if (dp->failed_here) ckrt_fail(c, rc, "rank %d of %d: %s", dp->rank, dp->size, own);
    else ckrt_fail(c, code, "rank %d of %d failed, stopping all ranks: %s", first, dp->size, msg);
    return dp->failed_here ? rc : code;
}

int ckrt_dp_agree(ckrt_dp *dp, ckrt_ctx *c, int rc) {
    if (dp->size == 1) {
        if (rc) dp->agreed = dp->print = dp->failed_here = true;
        return rc;
    }
    double t0 = now();
    int r = agree_loss(dp, c, rc, NULL, NULL);
    add_time(dp, WAIT, c->step, now() - t0);
    return r;
}

int ckrt_dp_after_backward(ckrt_dp *dp, ckrt_ctx *c, int rc, double *loss) {
    double t0 = now();
    int r = dp->size == 1 ? ckrt_dp_agree(dp, c, rc) : agree_loss(dp, c, rc, loss, dp->losses);
    if (dp->size == 1) dp->losses[0] = *loss;
    add_time(dp, WAIT, c->step, now() - t0);
    return r;
}

int ckrt_dp_mean(ckrt_dp *dp, ckrt_ctx *c, int rc, double *v) { return agree_loss(dp, c, rc, v, NULL); }

/* ---------------------------------------------------------------- inputs */

const char *ckrt_dp_input_path(ckrt_dp *dp, const char *path) {
    if (!strstr(path, "{rank}") || dp->n_paths >= 64) return path;
    char num[16];
    snprintf(num, sizeof num, "%d", dp->rank);
    size_t n = strlen(path) + 1;
    for (const char *q = strstr(path, "{rank}"); q; q = strstr(q + 6, "{rank}")) n += strlen(num);
    char *out = malloc(n), *o = out;
    if (!out) return path;
    for (const char *q = path; *q;) {
        if (!strncmp(q, "{rank}", 6)) {
            o += sprintf(o, "%s", num);
            q += 6;
        } else {
            *o++ = *q++;
        }
    }
    *o = 0;
    dp->paths[dp->n_paths++] = out;
    return out;
}

int ckrt_dp_shard(ckrt_dp *dp, ckrt_ctx *c, const ckrt_io *io, int i, const char *path, ckrt_array *a) {
    bool same_rank = a->rank == io->rank, same = same_rank, tail = same_rank && io->rank >= 1;
    for (int k = 0; same_rank && k < io->rank; k++) {
        same = same && a->dims[k] == io->dims[k];
        if (k > 0) tail = tail && a->dims[k] == io->dims[k];
    }
    bool per_rank = false; /* a path ckrt_dp_input_path rewrote */
    for (int k = 0; !per_rank && k < dp->n_paths; k++) per_rank = dp->paths[k] == path;
    if (i >= 0 && i < 64) {
        dp->input_name[i] = io->name;
        dp->input_mode[i] = per_rank ? "per-rank file" : same ? "replicated (the same on every rank)" : "split by rank";
    }
    if (same || a->dtype != io->dtype) return CKRT_OK; /* the caller checks dtype and shape as usual */
    if (!per_rank && tail && a->dims[0] == io->dims[0] * dp->size) {
        size_t row = ckrt_dtype_size(a->dtype);
        for (int k = 1; k < a->rank; k++) row *= (size_t)a->dims[k];
        size_t rows = (size_t)io->dims[0];
        memmove(a->data, (char *)a->data + row * rows * (size_t)dp->rank, row * rows);
        a->dims[0] = io->dims[0];
        return CKRT_OK;
    }
    char want[200], got[200], global[200];
    ckrt_shape_str(want, sizeof want, io->rank, io->dims);
    ckrt_shape_str(got, sizeof got, a->rank, a->dims);
    int64_t gd[CKRT_MAX_RANK];
    memcpy(gd, io->dims, sizeof gd);
    if (io->rank >= 1) gd[0] *= dp->size;
    ckrt_shape_str(global, sizeof global, io->rank, gd);
    if (per_rank)
        return ckrt_fail(c, CKRT_ERR_USAGE, "input '%s': '%s' has shape %s but this rank's shard is %s", io->name, path, got, want);
    return ckrt_fail(c, CKRT_ERR_USAGE, "input '%s': '%s' has shape %s; with %d ranks this program takes the global batch %s "
                     "(split along axis 0 by rank), one file per rank of shape %s with {rank} in the path, or %s on every rank",
                     io->name, path, got, dp->size, global, want, want);
}

int ckrt_dp_rank(const ckrt_dp *dp) { return dp->rank; }
int ckrt_dp_size(const ckrt_dp *dp) { return dp->size; }

int ckrt_dp_local_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v >= '0' && *v <= '9') return atoi(v);
    }
    return 0;
}

uint64_t ckrt_dp_seed(const ckrt_dp *dp, uint64_t seed) {
    if (!dp || dp->rank == 0) return seed;
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (uint64_t)dp->rank;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---------------------------------------------------------------- gradients */

/* The backend's kernels: this file is library code (no ckrt_device.h dispatch), so it picks the
 * device's entry point itself. On the CUDA backend the pointers are into the arena's address range
 * and the device op layer maps them, so the code below is the same for both. */
static int copy_f32(ckrt_ctx *c, float *dst, const float *src, int64_t n) {
    return c->be->dev ? c->be->dev->copy_f32(c, dst, src, n) : ckrt_copy_f32(c, dst, src, n);
}
static int rank_mean(ckrt_ctx *c, float *out, const float *recv, int64_t count, int ranks) {
    return c->be->dev ? c->be->dev->rank_mean(c, out, recv, count, ranks) : ckrt_rank_mean(c, out, recv, count, ranks);
}

/* Copies nb floats between the gradient stream (from slot *gi, element *go on) and buf. */
static int stream_copy(ckrt_ctx *c, const ckrt_grad_slot *g, int n, int *gi, int64_t *go, float *buf, int64_t nb, bool pack) {
    int64_t done = 0;
    while (done < nb && *gi < n) {
        int64_t take = g[*gi].numel - *go;
        if (take > nb - done) take = nb - done;
        float *grad = (float *)(c->arena + g[*gi].offset) + *go;
        CKRT_TRY(pack ? copy_f32(c, buf + done, grad, take) : copy_f32(c, grad, buf + done, take));
        done += take;
        *go += take;
        if (*go == g[*gi].numel) ++*gi, *go = 0;
    }
    return CKRT_OK;
}

static int reduce(ckrt_dp *dp, ckrt_ctx *c, float *staging, int64_t staging_floats, int n, const ckrt_grad_slot *g) {
    int N = dp->size, me = dp->rank;
    int64_t w = staging_floats / N * N, total = 0; /* a bucket: N slices of at most w / N floats each */
    for (int i = 0; i < n; i++) total += g[i].numel;
    if (w < N)
        return ckrt_fail(c, CKRT_ERR_USAGE, "the planned communication staging (%lld floats) is smaller than the %d ranks; "
                         "recompile with a larger --dp-bucket", (long long)staging_floats, N);
    float *pack = staging, *recv = staging + staging_floats;
    int gi = 0;
    int64_t go = 0;
    dp->grad_floats += total;
    for (int64_t base = 0; base < total;) {
        int64_t nb = total - base < w ? total - base : w;
        int gi0 = gi;
        int64_t go0 = go;
        CKRT_TRY(stream_copy(c, g, n, &gi, &go, pack, nb, true));
        for (int q = 0; q <= N; q++) dp->displ[q] = nb * q / N;
        for (int q = 0; q < N; q++) dp->cnt[q] = dp->displ[q + 1] - dp->displ[q];
        int64_t mine = dp->cnt[me];
        for (int q = 0; q < N; q++) dp->rcnt[q] = mine, dp->rdispl[q] = (int64_t)q * mine;
        if (dp->comm->alltoallv(dp->comm, c, pack, dp->cnt, dp->displ, recv, dp->rcnt, dp->rdispl))
            return comm_fail(c, dp, "the gradient exchange");
        /* this rank's slice: the N copies summed in rank order, then the mean */
        CKRT_TRY(rank_mean(c, pack + dp->displ[me], recv, mine, N));
        if (dp->comm->allgatherv(dp->comm, c, pack, dp->cnt, dp->displ)) return comm_fail(c, dp, "the gradient gather");
        gi = gi0, go = go0;
        CKRT_TRY(stream_copy(c, g, n, &gi, &go, pack, nb, false));
        base += nb;
        dp->buckets++;
    }
    return CKRT_OK;
}

/* The backend's events ordering a bucket's exchange on a device: "ready" recorded on the compute
 * stream when the bucket starts (its gradients are then enqueued), "done" on the communication
 * stream after it. One bucket is in flight at a time (passes/data_parallel.c); four pairs used
 * in turn leave room should that grow. */
#define EV_READY(b) (2 * ((b) % 4))
#define EV_DONE(b) (2 * ((b) % 4) + 1)

int ckrt_grad_allreduce(ckrt_ctx *c, int bucket, int buckets, float *staging, int64_t staging_floats, int n,
                        const ckrt_grad_slot *grads) {
    ckrt_dp *dp = c->dp;
    if (!dp) return ckrt_fail(c, CKRT_ERR_INTERNAL, "a data-parallel program runs without its communicator");
    if (bucket == 0) dp->staging_bytes = dp->grad_floats = dp->buckets = 0;
    if (2 * staging_floats * (int64_t)sizeof(float) > dp->staging_bytes) dp->staging_bytes = 2 * staging_floats * (int64_t)sizeof(float);
    dp->n_buckets = buckets;
    if (dp->size == 1) { /* one rank: the gradients are already the mean */
        for (int i = 0; i < n; i++) dp->grad_floats += grads[i].numel;
        return CKRT_OK;
    }
    double t0 = now();
    /* every rank got here, or one failed earlier in the step and is calling ckrt_dp_agree too;
     * agreed before every bucket, so no rank can be left in an exchange another never joins */
    int rc = agree_loss(dp, c, CKRT_OK, NULL, NULL);
    double t1 = now();
    add_time(dp, WAIT, c->step, t1 - t0);
    const ckrt_backend *be = c->be;
    bool side = dp->side = be->dev && be->set_stream; /* a device: the exchange runs beside the compute stream */
    if (!rc && side) {
        rc = be->event_record(c, EV_READY(bucket), CKRT_STREAM_COMPUTE);
        if (!rc) rc = be->stream_wait(c, CKRT_STREAM_COMM, EV_READY(bucket));
        if (!rc) rc = be->set_stream(c, CKRT_STREAM_COMM);
    }
    if (!rc) rc = reduce(dp, c, staging, staging_floats, n, grads);
    if (side) { /* back on the compute stream whatever happened */
        int r2 = rc ? CKRT_OK : be->event_record(c, EV_DONE(bucket), CKRT_STREAM_COMM);
        int r3 = be->set_stream(c, CKRT_STREAM_COMPUTE);
        if (!rc) rc = r2 ? r2 : r3;
    }
    add_time(dp, XFER, c->step, now() - t1);
    return rc;
}

int ckrt_grad_allreduce_wait(ckrt_ctx *c, int bucket) {
    if (!c->dp || c->dp->size == 1 || !c->be->dev || !c->be->set_stream) return CKRT_OK;
    return c->be->stream_wait(c, CKRT_STREAM_COMPUTE, EV_DONE(bucket));
}

/* ---------------------------------------------------------------- replicas */

/* Every rank runs on the same kind of memory (a mix would run different transports and hang). */
static int same_backend(ckrt_dp *dp, ckrt_ctx *c) {
    if (dp->size == 1) return CKRT_OK;
    int32_t mine = c->be->dev != NULL, *all = calloc((size_t)dp->size, sizeof *all);
    if (!all) return ckrt_fail(c, CKRT_ERR_NOMEM, "out of memory");
    int rc = dp->comm->allgather(dp->comm, &mine, all, (int64_t)sizeof mine) ? comm_fail(c, dp, "the backend check") : CKRT_OK;
    for (int q = 1; !rc && q < dp->size; q++)
        if (all[q] != all[0])
            rc = ckrt_fail(c, CKRT_ERR_USAGE, "rank 0 runs on the %s but rank %d on the %s: give every rank the same --device",
                           all[0] ? "GPU" : "CPU", q, all[q] ? "GPU" : "CPU");
    free(all);
    return rc;
}

int ckrt_dp_check_replicas(ckrt_dp *dp, ckrt_ctx *c, const ckrt_program *p, const char *when) {
    if (!dp->backend_checked) { /* the first call, after loading: every rank on the same kind of memory */
        dp->backend_checked = true;
        int rc = CKRT_OK;
        if ((rc = ckrt_dp_agree(dp, c, same_backend(dp, c)))) return rc;
        if (c->be->dev && dp->size > 1) {
            if (!dp->comm->use_device)
                rc = ckrt_fail(c, CKRT_ERR_USAGE, "the %s transport cannot move device memory: add --device cpu", dp->comm->name);
            else if (dp->comm->use_device(dp->comm, c))
                rc = ckrt_fail(c, CKRT_ERR_IO, "the GPU transport did not start: %s", dp->comm->msg);
            if ((rc = ckrt_dp_agree(dp, c, rc))) return rc;
        }
    }
    if (dp->size == 1) return CKRT_OK;
    double t0 = now();
    /* params, buffers, constants, then optimizer state: the static region before the inputs */
    int64_t end = p->static_bytes - p->planned_bytes[CKRT_MEM_INPUTS];
    uint64_t mine = 0;
    if (c->be->read) CKRT_TRY(c->be->synchronize(c));
    CKRT_TRY(ckrt_arena_checksum(c, 0, end > 0 ? end : 0, &mine));
    uint64_t *all = calloc((size_t)dp->size, sizeof *all);
    if (!all) return ckrt_fail(c, CKRT_ERR_NOMEM, "out of memory");
    int rc = CKRT_OK;
    if (dp->comm->allgather(dp->comm, &mine, all, (int64_t)sizeof mine)) rc = comm_fail(c, dp, "the replica check");
    for (int q = 1; !rc && q < dp->size; q++)
        if (all[q] != all[0]) {
            /* every rank sees the same table: an agreed failure */
            dp->agreed = true;
            dp->print = dp->rank == 0;
            c->node = NULL;
            rc = ckrt_fail(c, CKRT_ERR_DATA, "the parameters differ across ranks %s: rank 0 checksum %016llx, rank %d %016llx",
                           when, (unsigned long long)all[0], q, (unsigned long long)all[q]);
        }
    free(all);
    dp->n_checks++;
    add_time(dp, XFER, c->step, now() - t0);
    return rc;
}

int ckrt_dp_after_update(ckrt_dp *dp, ckrt_ctx *c, const ckrt_program *p, int64_t step, int64_t steps) {
    if (dp->size == 1) return CKRT_OK;
    double t0 = now();
    for (int i = 0; i < p->n_state; i++) {
        const ckrt_state *s = &p->state[i];
        if (s->grad_offset >= 0) continue;
        int64_t bytes = (int64_t)ckrt_dtype_size(s->dtype);
        for (int k = 0; k < s->rank; k++) bytes *= s->dims[k];
        if (dp->comm->bcast_data(dp->comm, c, c->arena + s->offset, bytes, 0)) return comm_fail(c, dp, "broadcasting buffers");
    }
    add_time(dp, XFER, c->step, now() - t0);
    if ((dp->check_every && step % dp->check_every == 0) || step == steps) {
        char when[64];
        snprintf(when, sizeof when, "after step %lld", (long long)step);
        return ckrt_dp_check_replicas(dp, c, p, when);
    }
    return CKRT_OK;
}

/* ---------------------------------------------------------------- report */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median over the steps (the first left out when there are more). */
static double median_ms(const ckrt_dp *dp, int which) {
    int64_t n = dp->n_comm_s[which], skip = 0;
    while (n > 0 && dp->comm_s[which][n - 1] == 0) n--; /* steps never run */
    if (n > 1) skip = 1;
    if (n - skip <= 0) return 0;
    double *t = malloc(sizeof(double) * (size_t)(n - skip));
    if (!t) return 0;
    memcpy(t, dp->comm_s[which] + skip, sizeof(double) * (size_t)(n - skip));
    n -= skip;
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    double m = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    free(t);
    return m * 1e3;
}

static void seconds(FILE *f, const ckrt_dp *dp, int which) {
    int64_t n = dp->n_comm_s[which];
    while (n > 0 && dp->comm_s[which][n - 1] == 0) n--;
    fprintf(f, "[");
    for (int64_t i = 0; i < n; i++) fprintf(f, "%s%.6f", i ? ", " : "", dp->comm_s[which][i]);
    fprintf(f, "]");
}

void ckrt_dp_report_json(const ckrt_dp *dp, FILE *f) {
    fprintf(f, "  \"data_parallel\": {\"ranks\": %d, \"transport\": \"%s\", \"reduction\": \"deterministic: per-slice sum in rank "
               "order, then / ranks\",\n", dp->size, dp->comm ? dp->comm->name : "?");
    fprintf(f, "    \"comm_staging_bytes\": %lld, \"gradient_bytes\": %lld, \"buckets_per_step\": %d, \"rounds_per_step\": %lld,\n",
            (long long)dp->staging_bytes, (long long)dp->grad_floats * 4, dp->n_buckets, (long long)dp->buckets);
    fprintf(f, "    \"overlap\": \"%s\",\n", dp->side ? "on the communication stream, beside the backward (comm_time: host time to enqueue)"
                                                 : "none: each bucket is exchanged when the backward reaches it (blocking)");
    fprintf(f, "    \"comm_time_ms\": %.4f, \"comm_seconds\": ", median_ms(dp, XFER));
    seconds(f, dp, XFER);
    fprintf(f, ",\n    \"sync_wait_ms\": %.4f, \"sync_wait_seconds\": ", median_ms(dp, WAIT));
    seconds(f, dp, WAIT);
    fprintf(f, ",\n    \"replica_checks\": %lld, \"rank_losses\": [", (long long)dp->n_checks);
    for (int q = 0; q < dp->size; q++) fprintf(f, "%s%.9g", q ? ", " : "", dp->losses[q]);
    fprintf(f, "],\n    \"inputs\": {");
    bool first = true;
    for (int i = 0; i < 64; i++)
        if (dp->input_mode[i]) {
            ckrt_json_key(f, first ? "" : ", ", dp->input_name[i]);
            fprintf(f, "\"%s\"", dp->input_mode[i]);
            first = false;
        }
    fprintf(f, "}},\n");
}

void ckrt_dp_print_summary(const ckrt_dp *dp) {
    if (dp->size == 1) {
        printf("  %-20s %12d (no communication)\n", "ranks", 1);
        return;
    }
    printf("  %-20s %12d (%s, deterministic rank-order reduction)\n", "ranks", dp->size, dp->comm ? dp->comm->name : "?");
    printf("  %-20s %12lld (planned, per bucket; gradients %lld bytes in %d bucket%s%s)\n", "comm staging", (long long)dp->staging_bytes,
           (long long)dp->grad_floats * 4, dp->n_buckets, dp->n_buckets == 1 ? "" : "s",
           dp->side ? ", exchanged on the communication stream beside the backward" : "");
    printf("  %-20s %12.3f ms (median per step; waiting for other ranks %.3f ms)\n", "comm time", median_ms(dp, XFER),
           median_ms(dp, WAIT));
}
