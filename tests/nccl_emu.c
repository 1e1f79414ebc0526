/* nccl_emu.c — a stand-in for libnccl.so.2 built over MPI, for dp_test.py's GPU-path case.
 *
 * With no GPU here, the data-parallel CUDA path runs in the CUDA emulation (tests/cuda_emu.c:
 * device memory is host memory, kernels.cu runs on the CPU). The transport (runtime/mpi/
 * ckrt_mpi.c) then opens this library instead of NCCL (CKRT_NCCL_LIBRARY), through the same
 * dlopen/dlsym path, and drives it with the same calls it makes on a GPU: the unique-id
 * bootstrap, ncclCommInitRank, grouped ncclSend/ncclRecv, ncclBroadcast. Each call checks what
 * NCCL would reject (a send outside a group, a peer out of range, an unknown type, a rank that
 * does not match the communicator it was bootstrapped on), so a misuse fails the test instead
 * of passing by accident. Streams are ignored: the emulation's kernels are synchronous.
 *
 * Only what ckrt_mpi.c loads is here. Error codes follow nccl.h: 3 internal, 4 invalid
 * argument, 5 invalid usage.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { char internal[128]; } nccl_unique_id;
typedef struct nccl_comm_s {
    MPI_Comm comm;
    int rank, size;
} nccl_comm_s;

enum { OK = 0, INTERNAL = 3, INVALID_ARGUMENT = 4, INVALID_USAGE = 5, MAX_OPS = 1024 };

static struct {
    int depth; /* ncclGroupStart nesting */
    int n;
    struct { int send; void *buf; size_t bytes; int peer; nccl_comm_s *comm; } ops[MAX_OPS];
} G;

static size_t type_size(int dtype) { return dtype == 1 ? 1 : dtype == 7 ? 4 : 0; } /* uint8, float32 */

const char *ncclGetErrorString(int r) {
    return r == INVALID_ARGUMENT ? "invalid argument (emulated NCCL)" : r == INVALID_USAGE ? "invalid usage (emulated NCCL)"
                                                                                            : "internal error (emulated NCCL)";
}

int ncclGetUniqueId(nccl_unique_id *id) {
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "nccl-emu %ld", (long)getpid());
    return OK;
}

int ncclCommInitRank(nccl_comm_s **out, int nranks, nccl_unique_id id, int rank) {
    int init = 0, wr = -1, ws = 0;
    MPI_Initialized(&init);
    if (!init) return INVALID_USAGE;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &ws);
    if (rank != wr || nranks != ws) return INVALID_ARGUMENT;
    /* every rank must hold rank 0's id, as NCCL requires */
    nccl_unique_id root = id;
    MPI_Bcast(&root, (int)sizeof root, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (memcmp(&root, &id, sizeof id) != 0) return INVALID_ARGUMENT;
    nccl_comm_s *c = calloc(1, sizeof *c);
    if (!c) return INTERNAL;
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    c->rank = rank, c->size = nranks;
    *out = c;
    return OK;
}

int ncclCommDestroy(nccl_comm_s *c) {
    if (!c) return INVALID_ARGUMENT;
    MPI_Comm_free(&c->comm);
    free(c);
    return OK;
}

int ncclCommAbort(nccl_comm_s *c) { return c ? OK : INVALID_ARGUMENT; }

int ncclGroupStart(void) {
    G.depth++;
    return OK;
}

static int queue(int send, void *buf, size_t count, int dtype, int peer, nccl_comm_s *c) {
    size_t es = type_size(dtype);
    if (G.depth == 0) return INVALID_USAGE; /* ckrt_mpi.c always groups its pairs */
    if (!c || !es || peer < 0 || peer >= c->size || peer == c->rank || !buf || count * es > INT32_MAX) return INVALID_ARGUMENT;
    if (G.n == MAX_OPS) return INTERNAL;
    G.ops[G.n].send = send, G.ops[G.n].buf = buf, G.ops[G.n].bytes = count * es, G.ops[G.n].peer = peer, G.ops[G.n].comm = c;
    G.n++;
    return OK;
}

int ncclSend(const void *buf, size_t count, int dtype, int peer, nccl_comm_s *c, void *stream) {
    (void)stream;
    return queue(1, (void *)buf, count, dtype, peer, c);
}

int ncclRecv(void *buf, size_t count, int dtype, int peer, nccl_comm_s *c, void *stream) {
    (void)stream;
    return queue(0, buf, count, dtype, peer, c);
}

int ncclGroupEnd(void) {
    if (G.depth == 0) return INVALID_USAGE;
    if (--G.depth > 0) return OK;
    MPI_Request req[MAX_OPS];
    int rc = OK;
    for (int i = 0; i < G.n; i++) {
        int e = G.ops[i].send ? MPI_Isend(G.ops[i].buf, (int)G.ops[i].bytes, MPI_BYTE, G.ops[i].peer, 7, G.ops[i].comm->comm, &req[i])
                              : MPI_Irecv(G.ops[i].buf, (int)G.ops[i].bytes, MPI_BYTE, G.ops[i].peer, 7, G.ops[i].comm->comm, &req[i]);
        if (e != MPI_SUCCESS) rc = INTERNAL, req[i] = MPI_REQUEST_NULL;
    }
    if (G.n && MPI_Waitall(G.n, req, MPI_STATUSES_IGNORE) != MPI_SUCCESS) rc = INTERNAL;
    G.n = 0;
    return rc;
}

int ncclBroadcast(const void *send, void *recv, size_t count, int dtype, int root, nccl_comm_s *c, void *stream) {
    (void)stream;
    size_t es = type_size(dtype);
    if (!c || !es || root < 0 || root >= c->size || count * es > INT32_MAX) return INVALID_ARGUMENT;
    if (G.depth) return INVALID_USAGE; /* not used inside a group here */
    if (c->rank == root && send != recv) memcpy(recv, send, count * es);
    return MPI_Bcast(recv, (int)(count * es), MPI_BYTE, root, c->comm) == MPI_SUCCESS ? OK : INTERNAL;
}
