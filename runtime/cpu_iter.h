/* cpu_iter.h — how the CPU backend walks broadcast/strided operands without a division per
 * element.
 *
 * The device-agnostic bodies (ckrt_kernels.h) locate element i of an operand with ck_k_offset:
 * a div and a mod per dimension per element, right for a GPU thread that starts cold, slow on a
 * CPU loop that visits elements in order. Here the output's dims are first collapsed (size-1 dims
 * dropped, neighbours merged when every operand is contiguous across them), then walked row by
 * row: the innermost dim is a tight loop with fixed operand strides, the outer dims an odometer
 * that adds and subtracts strides. The elements visited, and the order of any accumulation, are
 * exactly those of the per-element formula, so results are the same bits.
 */
#ifndef CKRT_CPU_ITER_H
#define CKRT_CPU_ITER_H

#include "ckrt.h"

#define CK_ITER_MAX_OPS 3

typedef struct {
    int rank;                                        /* >= 1 after collapsing */
    int nops;
    int64_t dims[CKRT_MAX_RANK];
    int64_t strides[CK_ITER_MAX_OPS][CKRT_MAX_RANK]; /* element strides, 0 on broadcast dims */
    int64_t idx[CKRT_MAX_RANK];                      /* odometer over dims[0 .. rank-2] */
    int64_t off[CK_ITER_MAX_OPS];                    /* current row's operand offsets */
} ck_iter;

/* Sets up a walk over `rank` dims (rank 0 is one element) for nops operands with the given
 * strides. Returns the number of elements (0: nothing to do). */
static inline int64_t ck_iter_init(ck_iter *it, int rank, const int64_t *dims, int nops, const int64_t *const *strides) {
    int64_t n = 1;
    it->rank = 0;
    it->nops = nops;
    for (int k = 0; k < rank; k++) {
        n *= dims[k];
        if (dims[k] == 1) continue;
        int r = it->rank;
        bool merge = r > 0;
        for (int o = 0; o < nops && merge; o++) merge = it->strides[o][r - 1] == strides[o][k] * dims[k];
        if (merge) {
            it->dims[r - 1] *= dims[k];
            for (int o = 0; o < nops; o++) it->strides[o][r - 1] = strides[o][k];
        } else {
            it->dims[r] = dims[k];
            for (int o = 0; o < nops; o++) it->strides[o][r] = strides[o][k];
            it->rank++;
        }
    }
    if (it->rank == 0) { /* a single element */
        it->rank = 1;
        it->dims[0] = 1;
        for (int o = 0; o < nops; o++) it->strides[o][0] = 0;
    }
    for (int k = 0; k < it->rank; k++) it->idx[k] = 0;
    for (int o = 0; o < nops; o++) it->off[o] = 0;
    return n;
}

/* The innermost dim: row length and operand o's stride along it. */
static inline int64_t ck_iter_row(const ck_iter *it) { return it->dims[it->rank - 1]; }
static inline int64_t ck_iter_step(const ck_iter *it, int o) { return it->strides[o][it->rank - 1]; }

/* Puts the walk at row `row` (rows of ck_iter_row elements, in order): where a thread starts its
 * block of rows (ckrt_parallel_for). */
static inline void ck_iter_seek(ck_iter *it, int64_t row) {
    for (int o = 0; o < it->nops; o++) it->off[o] = 0;
    for (int k = it->rank - 2; k >= 0; k--) {
        it->idx[k] = row % it->dims[k];
        row /= it->dims[k];
        for (int o = 0; o < it->nops; o++) it->off[o] += it->idx[k] * it->strides[o][k];
    }
}

/* Elements per block when a CPU kernel is spread over the pool (ckrt_pool.h): a constant, never
 * derived from the thread count, so every block is the same loop whatever the count. */
#define CK_PAR_ELEMS 16384
/* Rows of `len` elements per block: at least one. */
static inline int64_t ck_par_rows(int64_t len) { return len >= CK_PAR_ELEMS ? 1 : CK_PAR_ELEMS / (len > 0 ? len : 1); }

/* Moves the operand offsets to the next row. */
static inline void ck_iter_next_row(ck_iter *it) {
    for (int k = it->rank - 2; k >= 0; k--) {
        for (int o = 0; o < it->nops; o++) it->off[o] += it->strides[o][k];
        if (++it->idx[k] < it->dims[k]) return;
        for (int o = 0; o < it->nops; o++) it->off[o] -= it->strides[o][k] * it->dims[k];
        it->idx[k] = 0;
    }
}

#endif
