/* ckrt_mpi.c — the MPI transport of data-parallel programs (libckrt_mpi.a).
 *
 * Built only when CMake finds MPI, into its own library, so libckrt never needs MPI; a program
 * compiled with `ckptc --data-parallel` links it (the generated Makefile uses mpicc). Nothing
 * here decides anything: dp.c holds the algorithm (deterministic rank-order reduction, error
 * agreement, sharding); this file maps the ckrt_comm calls one to one onto MPI collectives on a
 * duplicate of MPI_COMM_WORLD. MPI's default error handler (errors are fatal and end the whole
 * job) is kept: a transport failure can never leave a rank waiting.
 *
 * Counts are int in MPI: dp.c keeps every message under the planned bucket (at most 1 GiB).
 */
#include "ckrt.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mpi_comm {
    ckrt_comm base;
    MPI_Comm world;
    int *sc, *sd, *rc, *rd; /* alltoallv/allgatherv counts and displacements as int */
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

static int mpi_alltoallv(ckrt_comm *m, const float *send, const int64_t *send_counts, const int64_t *send_displs, float *recv,
                         const int64_t *recv_counts, const int64_t *recv_displs) {
    mpi_comm *c = of(m);
    if (!to_int(m, send_counts, c->sc) || !to_int(m, send_displs, c->sd) || !to_int(m, recv_counts, c->rc) ||
        !to_int(m, recv_displs, c->rd))
        return 1;
    return check(m, MPI_Alltoallv(send, c->sc, c->sd, MPI_FLOAT, recv, c->rc, c->rd, MPI_FLOAT, c->world), "MPI_Alltoallv");
}

static int mpi_allgatherv(ckrt_comm *m, float *buf, const int64_t *counts, const int64_t *displs) {
    mpi_comm *c = of(m);
    if (!to_int(m, counts, c->rc) || !to_int(m, displs, c->rd)) return 1;
    return check(m, MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, c->rc, c->rd, MPI_FLOAT, c->world), "MPI_Allgatherv");
}

static void mpi_abort(ckrt_comm *m, int code) {
    MPI_Abort(of(m)->world, code ? code : 1);
    exit(code ? code : 1); /* not reached */
}

static void mpi_finalize(ckrt_comm *m) {
    mpi_comm *c = of(m);
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
    c->base.bcast_data = mpi_bcast;
    c->base.grad_allreduce = NULL; /* dp.c's deterministic reduction */
    c->base.abort = mpi_abort;
    c->base.finalize = mpi_finalize;
    *out = &c->base;
    return 0;
}
