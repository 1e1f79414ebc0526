/* ckrt_mpi.c — the transport of data-parallel programs (libckrt_mpi.a): MPI, and NCCL for the
 * data plane when the arena is on a GPU.
 *
 * Built only when CMake finds MPI, into its own library, so libckrt never needs MPI; a program
 * compiled with `ckptc --data-parallel` links it (the generated Makefile uses mpicc). Nothing
 * here decides anything: dp.c holds the algorithm (deterministic rank-order reduction, error
 * agreement, sharding); this file maps the ckrt_comm calls one to one onto MPI collectives on a
 * duplicate of MPI_COMM_WORLD. MPI's default error handler (errors are fatal and end the whole
 * job) is kept: a transport failure can never leave a rank waiting.
 *
 * On the CUDA backend (use_device) the data plane moves to NCCL, opened with dlopen like the
 * driver, NVRTC and cuBLAS (libnccl.so.2, or $CKRT_NCCL_LIBRARY), so building needs no NCCL
 * headers and a CPU run never loads it. The communicator is bootstrapped over MPI (rank 0's
 * unique id broadcast); the control plane (agreement, losses, checksums) stays on MPI. The
 * exchange keeps dp.c's deterministic algorithm: the all-to-all is a group of ncclSend/ncclRecv
 * pairs, the gather another, both on the stream the backend runs its kernels on at that moment
 * (current_stream: the communication stream during an exchange, the compute stream otherwise), so
 * they are ordered after the kernels that packed the bucket and before the kernel that sums it
 * with no events of their own; the backend's events order that stream against the compute stream. ncclAllReduce is
 * not used: its summation order depends on the topology and the algorithm NCCL picks.
 *
 * Counts are int in MPI: dp.c keeps every message under the planned bucket (at most 1 GiB).
 */
#include "ckrt.h"

#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The NCCL API as its shared library exports it (nccl.h is not needed to build). */
typedef struct { char internal[128]; } nccl_unique_id;
typedef struct nccl_comm_s *nccl_comm_t;
enum { NCCL_SUCCESS = 0, NCCL_UINT8 = 1, NCCL_FLOAT32 = 7 };
#define CK_NCCL_FNS(X)                                                                                                    \
    X(ncclGetUniqueId, int, (nccl_unique_id * id))                                                                       \
    X(ncclCommInitRank, int, (nccl_comm_t * comm, int nranks, nccl_unique_id id, int rank))                              \
    X(ncclCommDestroy, int, (nccl_comm_t comm))                                                                          \
    X(ncclCommAbort, int, (nccl_comm_t comm))                                                                            \
    X(ncclGetErrorString, const char *, (int result))                                                                    \
    X(ncclGroupStart, int, (void))                                                                                       \
    X(ncclGroupEnd, int, (void))                                                                                         \
    X(ncclSend, int, (const void *buf, size_t count, int dtype, int peer, nccl_comm_t comm, void *stream))              \
    X(ncclRecv, int, (void *buf, size_t count, int dtype, int peer, nccl_comm_t comm, void *stream))                    \
    X(ncclBroadcast, int, (const void *send, void *recv, size_t count, int dtype, int root, nccl_comm_t comm, void *stream))

typedef struct mpi_comm {
    ckrt_comm base;
    MPI_Comm world;
    int *sc, *sd, *rc, *rd; /* alltoallv/allgatherv counts and displacements as int */
    struct {
        void *lib;
        nccl_comm_t comm;
#define CK_NCCL_MEMBER_(f, ret, args) ret(*f) args;
        CK_NCCL_FNS(CK_NCCL_MEMBER_)
#undef CK_NCCL_MEMBER_
    } nccl;
} mpi_comm;

static mpi_comm *of(ckrt_comm *m) { return (mpi_comm *)m; }

static int check(ckrt_comm *m, int err, const char *what) {
    if (err == MPI_SUCCESS) return 0;
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(err, s, &n);
    snprintf(m->msg, sizeof m->msg, "%s: %.200s", what, s);
    return 1;
}

static int fits(ckrt_comm *m, int64_t v) {
    if (v >= 0 && v <= 0x7fffffff) return 1;
    snprintf(m->msg, sizeof m->msg, "a message of %lld elements is too large for MPI", (long long)v);
    return 0;
}

static int mpi_allgather(ckrt_comm *m, const void *send, void *recv, int64_t bytes) {
    if (!fits(m, bytes)) return 1;
    return check(m, MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, of(m)->world), "MPI_Allgather");
}

static int mpi_bcast(ckrt_comm *m, void *buf, int64_t bytes, int root) {
    for (int64_t at = 0; at < bytes; at += 1 << 30) { /* large buffers in 1 GiB pieces */
        int64_t k = bytes - at < (1 << 30) ? bytes - at : (1 << 30);
        if (check(m, MPI_Bcast((char *)buf + at, (int)k, MPI_BYTE, root, of(m)->world), "MPI_Bcast")) return 1;
    }
    return 0;
}

static int to_int(ckrt_comm *m, const int64_t *in, int *out) {
    for (int q = 0; q < m->size; q++) {
        if (!fits(m, in[q])) return 0;
        out[q] = (int)in[q];
    }
    return 1;
}

static int mpi_alltoallv(ckrt_comm *m, ckrt_ctx *ctx, const float *send, const int64_t *send_counts, const int64_t *send_displs, float *recv,
                         const int64_t *recv_counts, const int64_t *recv_displs) {
    (void)ctx;
    mpi_comm *c = of(m);
    if (!to_int(m, send_counts, c->sc) || !to_int(m, send_displs, c->sd) || !to_int(m, recv_counts, c->rc) ||
        !to_int(m, recv_displs, c->rd))
        return 1;
    return check(m, MPI_Alltoallv(send, c->sc, c->sd, MPI_FLOAT, recv, c->rc, c->rd, MPI_FLOAT, c->world), "MPI_Alltoallv");
}

static int mpi_allgatherv(ckrt_comm *m, ckrt_ctx *ctx, float *buf, const int64_t *counts, const int64_t *displs) {
    (void)ctx;
    mpi_comm *c = of(m);
    if (!to_int(m, counts, c->rc) || !to_int(m, displs, c->rd)) return 1;
    return check(m, MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, c->rc, c->rd, MPI_FLOAT, c->world), "MPI_Allgatherv");
}

static int mpi_bcast_data(ckrt_comm *m, ckrt_ctx *ctx, void *buf, int64_t bytes, int root) {
    (void)ctx;
    return mpi_bcast(m, buf, bytes, root);
}

/* ---------------------------------------------------------------- NCCL (the arena on a GPU) */

static int nccl_check(ckrt_comm *m, int r, const char *what) {
    if (r == NCCL_SUCCESS) return 0;
    const char *s = of(m)->nccl.ncclGetErrorString ? of(m)->nccl.ncclGetErrorString(r) : NULL;
    snprintf(m->msg, sizeof m->msg, "%s failed: NCCL error %d (%.150s)", what, r, s ? s : "?");
    return 1;
}

/* The device address of an arena pointer (0 with the backend's message in m->msg). */
static void *dev(ckrt_comm *m, ckrt_ctx *ctx, const void *p) {
    unsigned long long d = ctx->be->device_address(ctx, p);
    if (!d) snprintf(m->msg, sizeof m->msg, "%.200s", ctx->msg);
    return (void *)(uintptr_t)d;
}

/* dp.c's all-to-all: this rank's own chunk is a device copy; the others one ncclSend/ncclRecv
 * pair per peer in one group (NCCL runs a group's transfers concurrently, without deadlock). */
static int nccl_alltoallv(ckrt_comm *m, ckrt_ctx *ctx, const float *send, const int64_t *send_counts, const int64_t *send_displs,
                          float *recv, const int64_t *recv_counts, const int64_t *recv_displs) {
    mpi_comm *c = of(m);
    int me = m->rank;
    if (send_counts[me] && ctx->be->dev->copy_f32(ctx, recv + recv_displs[me], send + send_displs[me], send_counts[me])) {
        snprintf(m->msg, sizeof m->msg, "%.200s", ctx->msg);
        return 1;
    }
    void *stream = ctx->be->current_stream(ctx);
    if (nccl_check(m, c->nccl.ncclGroupStart(), "ncclGroupStart")) return 1;
    int bad = 0;
    for (int q = 0; q < m->size && !bad; q++) {
        if (q == me) continue;
        void *s = send_counts[q] ? dev(m, ctx, send + send_displs[q]) : NULL, *r = recv_counts[q] ? dev(m, ctx, recv + recv_displs[q]) : NULL;
        bad = (send_counts[q] && !s) || (recv_counts[q] && !r);
        if (!bad && send_counts[q]) bad = nccl_check(m, c->nccl.ncclSend(s, (size_t)send_counts[q], NCCL_FLOAT32, q, c->nccl.comm, stream), "ncclSend");
        if (!bad && recv_counts[q]) bad = nccl_check(m, c->nccl.ncclRecv(r, (size_t)recv_counts[q], NCCL_FLOAT32, q, c->nccl.comm, stream), "ncclRecv");
    }
    int end = c->nccl.ncclGroupEnd(); /* closes the group even after a failure */
    return bad || nccl_check(m, end, "ncclGroupEnd");
}

/* In place: this rank's chunk to every peer, every peer's chunk from it. */
static int nccl_allgatherv(ckrt_comm *m, ckrt_ctx *ctx, float *buf, const int64_t *counts, const int64_t *displs) {
    mpi_comm *c = of(m);
    int me = m->rank;
    void *stream = ctx->be->current_stream(ctx), *mine = counts[me] ? dev(m, ctx, buf + displs[me]) : NULL;
    if (counts[me] && !mine) return 1;
    if (nccl_check(m, c->nccl.ncclGroupStart(), "ncclGroupStart")) return 1;
    int bad = 0;
    for (int q = 0; q < m->size && !bad; q++) {
        if (q == me) continue;
        if (counts[me]) bad = nccl_check(m, c->nccl.ncclSend(mine, (size_t)counts[me], NCCL_FLOAT32, q, c->nccl.comm, stream), "ncclSend");
        if (!bad && counts[q]) {
            void *r = dev(m, ctx, buf + displs[q]);
            bad = !r || nccl_check(m, c->nccl.ncclRecv(r, (size_t)counts[q], NCCL_FLOAT32, q, c->nccl.comm, stream), "ncclRecv");
        }
    }
    int end = c->nccl.ncclGroupEnd();
    return bad || nccl_check(m, end, "ncclGroupEnd");
}

static int nccl_bcast_data(ckrt_comm *m, ckrt_ctx *ctx, void *buf, int64_t bytes, int root) {
    if (bytes <= 0) return 0;
    void *d = dev(m, ctx, buf);
    if (!d) return 1;
    mpi_comm *c = of(m);
    return nccl_check(m, c->nccl.ncclBroadcast(d, d, (size_t)bytes, NCCL_UINT8, root, c->nccl.comm, ctx->be->current_stream(ctx)),
                      "ncclBroadcast");
}

/* Every rank: open NCCL, rank 0's unique id to all over MPI, one communicator on this rank's
 * GPU (the CUDA backend's context is current). On failure m->msg says why; the data plane stays
 * on MPI and dp.c stops every rank (the result is agreed). */
static int mpi_use_device(ckrt_comm *m, ckrt_ctx *ctx) {
    mpi_comm *c = of(m);
    if (!ctx->be->device_address || !ctx->be->current_stream || !ctx->be->dev) {
        snprintf(m->msg, sizeof m->msg, "the backend gives no device addresses");
        return 1;
    }
    const char *path = getenv("CKRT_NCCL_LIBRARY");
    if (!path || !*path) path = "libnccl.so.2";
    int ok = 1;
    if (!c->nccl.lib && !(c->nccl.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
        const char *e = dlerror();
        snprintf(m->msg, sizeof m->msg, "cannot load NCCL (%.150s); install it (libnccl2) or set CKRT_NCCL_LIBRARY",
                 e ? e : path);
        ok = 0;
    }
#define CK_NCCL_LOAD_(f, ret, args)                                                                       \
    if (ok && !(c->nccl.f = (ret(*) args)dlsym(c->nccl.lib, #f))) {                                       \
        snprintf(m->msg, sizeof m->msg, "%.150s has no %s: NCCL 2.7 or later is needed", path, #f);       \
        ok = 0;                                                                                           \
    }
    CK_NCCL_FNS(CK_NCCL_LOAD_)
#undef CK_NCCL_LOAD_
    nccl_unique_id id;
    memset(&id, 0, sizeof id);
    /* rank 0 makes the id; its status travels with it, so no rank waits for one that failed */
    struct { int32_t ok; nccl_unique_id id; } hello = {0};
    if (m->rank == 0) {
        if (ok && nccl_check(m, c->nccl.ncclGetUniqueId(&id), "ncclGetUniqueId")) ok = 0;
        hello.ok = ok, hello.id = id;
    }
    if (check(m, MPI_Bcast(&hello, (int)sizeof hello, MPI_BYTE, 0, c->world), "MPI_Bcast(NCCL id)")) return 1;
    if (!hello.ok) {
        if (m->rank != 0) snprintf(m->msg, sizeof m->msg, "NCCL did not start on rank 0");
        return 1;
    }
    int32_t mine = ok, all_ok = 0; /* every rank loaded NCCL before any enters the collective init */
    if (check(m, MPI_Allreduce(&mine, &all_ok, 1, MPI_INT32_T, MPI_MIN, c->world), "MPI_Allreduce")) return 1;
    if (!all_ok) {
        if (ok) snprintf(m->msg, sizeof m->msg, "NCCL did not load on every rank");
        return 1;
    }
    if (nccl_check(m, c->nccl.ncclCommInitRank(&c->nccl.comm, m->size, hello.id, m->rank), "ncclCommInitRank")) return 1;
    m->alltoallv = nccl_alltoallv;
    m->allgatherv = nccl_allgatherv;
    m->bcast_data = nccl_bcast_data;
    m->name = "mpi+nccl";
    return 0;
}

static void mpi_abort(ckrt_comm *m, int code) {
    if (of(m)->nccl.comm) of(m)->nccl.ncclCommAbort(of(m)->nccl.comm); /* a peer may be stuck in a transfer */
    MPI_Abort(of(m)->world, code ? code : 1);
    exit(code ? code : 1); /* not reached */
}

static void mpi_finalize(ckrt_comm *m) {
    mpi_comm *c = of(m);
    if (c->nccl.comm) c->nccl.ncclCommDestroy(c->nccl.comm);
    if (c->nccl.lib) dlclose(c->nccl.lib);
    MPI_Comm_free(&c->world);
    MPI_Finalize();
    free(c->sc), free(c->sd), free(c->rc), free(c->rd);
    free(c);
}

int ckrt_mpi_comm_init(int *argc, char ***argv, ckrt_comm **out, char *msg, size_t msg_size) {
    *out = NULL;
    int err = MPI_Init(argc, argv);
    if (err != MPI_SUCCESS) {
        snprintf(msg, msg_size, "MPI_Init failed (error %d)", err);
        return 1;
    }
    mpi_comm *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(msg, msg_size, "out of memory");
        MPI_Finalize();
        return 1;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &c->world);
    MPI_Comm_rank(c->world, &c->base.rank);
    MPI_Comm_size(c->world, &c->base.size);
    size_t n = (size_t)c->base.size;
    c->sc = calloc(n, sizeof(int)), c->sd = calloc(n, sizeof(int)), c->rc = calloc(n, sizeof(int)), c->rd = calloc(n, sizeof(int));
    if (!c->sc || !c->sd || !c->rc || !c->rd) {
        snprintf(msg, msg_size, "out of memory");
        mpi_finalize(&c->base);
        return 1;
    }
    c->base.name = "mpi";
    c->base.allgather = mpi_allgather;
    c->base.bcast = mpi_bcast;
    c->base.alltoallv = mpi_alltoallv;
    c->base.allgatherv = mpi_allgatherv;
    c->base.bcast_data = mpi_bcast_data;
    c->base.use_device = mpi_use_device;
    c->base.abort = mpi_abort;
    c->base.finalize = mpi_finalize;
    *out = &c->base;
    return 0;
}
