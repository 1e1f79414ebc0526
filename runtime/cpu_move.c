/* cpu_move.c — the CPU backend's data-movement kernels: strided copy (Transpose, Slice, Expand),
 * Concat, Split, Gather, Pad, ScatterND, GatherND, Trilu, fill (ConstantOfShape) and Range.
 *
 * Every kernel is dtype-agnostic: elements are esz opaque bytes (float16 included). The index
 * arithmetic comes from the bodies in ckrt_kernels_move.h; here it is evaluated once per output
 * row and the row is walked (or memcpy'd when contiguous), which copies the same bytes as one
 * body call per element would. The strided copy (the transposes of attention) is spread over the
 * thread pool (ckrt_pool.h) by blocks of rows; a copy has no sums, so its bytes are the same
 * however it is split.
 */
#include "ckrt.h"
#include "ckrt_kernels_move.h"
#include "ckrt_pool.h"
#include "cpu_iter.h"

#include <stdint.h>
#include <string.h>

/* one element of esz bytes; constant sizes let the compiler turn memcpy into a move */
static inline void copy_elem(unsigned char *y, const unsigned char *x, size_t esz) {
    switch (esz) {
    case 1: *y = *x; break;
    case 2: memcpy(y, x, 2); break;
    case 4: memcpy(y, x, 4); break;
    case 8: memcpy(y, x, 8); break;
    default: memcpy(y, x, esz); break;
    }
}

typedef struct {
    size_t esz;
    unsigned char *y;
    const unsigned char *x;
    int rank;
    const int64_t *out_dims, *in_strides;
    int64_t base;
} copy_job;

/* rows [r0, r1) of a strided copy (a pool block: ckrt_pool.h) */
CK_VEC static void strided_rows(void *arg, int64_t r0, int64_t r1) {
    const copy_job *j = arg;
    size_t esz = j->esz;
    int64_t row = j->out_dims[j->rank - 1], st = j->in_strides[j->rank - 1];
    for (int64_t i = r0 * row; i < r1 * row; i += row) {
        int64_t src = ck_k_strided_src(i, j->rank, j->out_dims, j->in_strides, j->base);
        unsigned char *dst = j->y + i * (int64_t)esz;
        const unsigned char *xb = j->x;
        if (st == 1) {
            memcpy(dst, xb + src * (int64_t)esz, (size_t)row * esz);
        } else {
            for (int64_t k = 0; k < row; k++) copy_elem(dst + k * (int64_t)esz, xb + (src + k * st) * (int64_t)esz, esz);
        }
    }
}

/* A transpose of 4-byte elements: the output's last axis reads the input with stride st != 1, and
 * an earlier output axis p reads it with stride 1 (K^T in attention, its gradients, a head split's
 * gradient). Walked row by row, each output row gathers one element per input line. Walked in
 * tiles of CK_TILE x CK_TILE instead (CK_TILE outputs along p by CK_TILE along the last axis),
 * each input line is read CK_TILE elements at a time and each output row written CK_TILE at a
 * time. A pool block is a run of (outer index, tile of p) pairs, outer running over the output's
 * axes other than p and the last. The same bytes land in the same places as strided_rows'. */
#define CK_TILE 16
typedef struct {
    uint32_t *y;
    const uint32_t *x;
    int rank, p;
    const int64_t *out_dims, *in_strides;
    int64_t base, tiles_p;
} tile_job;

static void transpose_tiles(void *arg, int64_t w0, int64_t w1) {
    const tile_job *j = arg;
    int r = j->rank, p = j->p;
    int64_t row = j->out_dims[r - 1], st = j->in_strides[r - 1], np = j->out_dims[p], ostr_p = row;
    for (int k = p + 1; k < r - 1; k++) ostr_p *= j->out_dims[k];
    for (int64_t w = w0; w < w1; w++) {
        int64_t o = w / j->tiles_p, p0 = w % j->tiles_p * CK_TILE, p1 = p0 + CK_TILE < np ? p0 + CK_TILE : np;
        /* o over the axes other than p and the last, the last of them fastest */
        int64_t src = j->base, dst = 0, ostr = row;
        for (int k = r - 2; k >= 0; k--) {
            if (k != p) {
                int64_t ik = o % j->out_dims[k];
                o /= j->out_dims[k];
                src += ik * j->in_strides[k];
                dst += ik * ostr;
            }
            ostr *= j->out_dims[k];
        }
        for (int64_t c0 = 0; c0 < row; c0 += CK_TILE) {
            int64_t c1 = c0 + CK_TILE < row ? c0 + CK_TILE : row;
            for (int64_t q = p0; q < p1; q++) {
                uint32_t *yr = j->y + dst + q * ostr_p;
                const uint32_t *xr = j->x + src + q;
                for (int64_t cc = c0; cc < c1; cc++) yr[cc] = xr[cc * st];
            }
        }
    }
}

int ckrt_strided_copy(ckrt_ctx *c, size_t esz, void *y, const void *x, int rank, const int64_t *out_dims,
                      const int64_t *in_strides, int64_t base) {
    (void)c;
    if (rank == 0) {
        copy_elem(y, (const unsigned char *)x + base * (int64_t)esz, esz);
        return CKRT_OK;
    }
    int64_t n = 1;
    for (int k = 0; k < rank; k++) n *= out_dims[k];
    if (n == 0) return CKRT_OK;
    int64_t row = out_dims[rank - 1];
    int p = -1; /* the output axis that reads the input contiguously, when the last does not */
    for (int k = rank - 2; k >= 0 && esz == 4 && in_strides[rank - 1] != 1 && row > 1; k--)
        if (in_strides[k] == 1 && out_dims[k] > 1) {
            p = k;
            break;
        }
    if (p >= 0) {
        int64_t tiles_p = (out_dims[p] + CK_TILE - 1) / CK_TILE;
        tile_job t = {y, x, rank, p, out_dims, in_strides, base, tiles_p};
        ckrt_parallel_for(n / (out_dims[p] * row) * tiles_p, ck_par_rows(CK_TILE * row), transpose_tiles, &t);
        return CKRT_OK;
    }
    copy_job j = {esz, y, x, rank, out_dims, in_strides, base};
    ckrt_parallel_for(n / row, ck_par_rows(row), strided_rows, &j);
    return CKRT_OK;
}

int ckrt_concat(ckrt_ctx *c, size_t esz, void *y, int n, const void *const *xs, const int64_t *lens, int64_t outer,
                int64_t inner) {
    (void)c;
    int64_t total = 0;
    for (int k = 0; k < n; k++) total += lens[k];
    /* output rows of (lens[k] * inner) elements, in output order */
    for (int64_t o = 0; o < outer; o++) {
        int64_t at = 0; /* offset along the axis */
        for (int k = 0; k < n; at += lens[k], k++) {
            size_t bytes = (size_t)(lens[k] * inner) * esz;
            if (!bytes) continue;
            int64_t i = (o * total + at) * inner;
            int which;
            int64_t src = ck_k_concat_src(i, n, lens, total, inner, &which);
            memcpy((unsigned char *)y + i * (int64_t)esz, (const unsigned char *)xs[which] + src * (int64_t)esz, bytes);
        }
    }
    return CKRT_OK;
}

int ckrt_split(ckrt_ctx *c, size_t esz, int n, void *const *ys, const int64_t *lens, const void *x, int64_t outer,
               int64_t inner) {
    (void)c;
    int64_t total = 0;
    for (int k = 0; k < n; k++) total += lens[k];
    int64_t start = 0;
    for (int k = 0; k < n; start += lens[k], k++) {
        if (!ys[k]) continue;
        size_t bytes = (size_t)(lens[k] * inner) * esz;
        if (!bytes) continue;
        for (int64_t o = 0; o < outer; o++) {
            int64_t i = o * lens[k] * inner;
            int64_t src = ck_k_split_src(i, lens[k], start, total, inner);
            memcpy((unsigned char *)ys[k] + i * (int64_t)esz, (const unsigned char *)x + src * (int64_t)esz, bytes);
        }
    }
    return CKRT_OK;
}

int ckrt_gather_check(ckrt_ctx *c, const void *idx, ckrt_dtype idx_dt, int64_t len, int64_t n_idx) {
    if (idx_dt != CKRT_I64 && idx_dt != CKRT_I32)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "Gather indices of dtype %s", ckrt_dtype_name(idx_dt));
    int i64 = idx_dt == CKRT_I64;
    for (int64_t j = 0; j < n_idx; j++)
        if (ck_k_gather_index(idx, i64, j, len) < 0) {
            long long v = i64 ? (long long)((const int64_t *)idx)[j] : (long long)((const int32_t *)idx)[j];
            return ckrt_fail(c, CKRT_ERR_DATA, "Gather index %lld (position %lld of the indices) is out of range [%lld, %lld)",
                             v, (long long)j, -(long long)len, (long long)len);
        }
    return CKRT_OK;
}

int ckrt_gather(ckrt_ctx *c, size_t esz, void *y, const void *x, const void *idx, ckrt_dtype idx_dt, int64_t outer,
                int64_t len, int64_t inner, int64_t n_idx) {
    CKRT_TRY(ckrt_gather_check(c, idx, idx_dt, len, n_idx));
    int i64 = idx_dt == CKRT_I64;
    size_t bytes = (size_t)inner * esz;
    if (!bytes) return CKRT_OK;
    for (int64_t r = 0; r < outer * n_idx; r++) {
        int64_t src = ck_k_gather_src(r * inner, idx, i64, len, inner, n_idx);
        memcpy((unsigned char *)y + r * inner * (int64_t)esz, (const unsigned char *)x + src * (int64_t)esz, bytes);
    }
    return CKRT_OK;
}

int ckrt_trilu(ckrt_ctx *c, size_t esz, void *y, const void *x, int64_t batch, int64_t rows, int64_t cols, int64_t k,
               int upper) {
    (void)c;
    int64_t n = batch * rows * cols;
    unsigned char *yb = y;
    const unsigned char *xb = x;
    for (int64_t i = 0; i < n; i++) {
        if (ck_k_trilu_keep(i, rows, cols, k, upper)) copy_elem(yb + i * (int64_t)esz, xb + i * (int64_t)esz, esz);
        else memset(yb + i * (int64_t)esz, 0, esz);
    }
    return CKRT_OK;
}

int ckrt_pad(ckrt_ctx *c, size_t esz, void *y, const void *x, int rank, const int64_t *in_dims, const int64_t *out_dims,
             const int64_t *begin, int mode, const void *value) {
    (void)c;
    unsigned char *yb = y;
    const unsigned char *xb = x;
    int64_t n = 1;
    for (int k = 0; k < rank; k++) n *= out_dims[k];
    for (int64_t i = 0; i < n; i++) {
        int64_t src = ck_k_pad_src(i, rank, in_dims, out_dims, begin, mode);
        copy_elem(yb + i * (int64_t)esz, src < 0 ? (const unsigned char *)value : xb + src * (int64_t)esz, esz);
    }
    return CKRT_OK;
}

int ckrt_nd_check(ckrt_ctx *c, const int64_t *idx, int k, const int64_t *dims, int64_t n) {
    for (int64_t j = 0; j < n; j++)
        if (ck_k_nd_row(idx, j, k, dims) < 0) {
            for (int t = 0; t < k; t++)
                if (idx[j * k + t] < -dims[t] || idx[j * k + t] >= dims[t])
                    return ckrt_fail(c, CKRT_ERR_DATA, "index %lld (tuple %lld, position %d) is out of range [%lld, %lld)",
                                     (long long)idx[j * k + t], (long long)j, t, -(long long)dims[t], (long long)dims[t]);
        }
    return CKRT_OK;
}

int ckrt_scatter_nd(ckrt_ctx *c, size_t esz, int reduction, void *y, const void *data, const int64_t *idx, const void *upd,
                    int k, const int64_t *dims, int64_t n_upd, int64_t inner, int64_t data_n) {
    CKRT_TRY(ckrt_nd_check(c, idx, k, dims, n_upd));
    if (reduction != CKRT_SCATTER_NONE && esz != sizeof(float))
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "ScatterND reduction %d on %zu-byte elements", reduction, esz);
    if (y != data) memcpy(y, data, (size_t)data_n * esz);
    if (reduction != CKRT_SCATTER_NONE) {
        for (int64_t r = 0; r < inner; r++) ck_k_scatter_nd_col(r, reduction, y, upd, idx, n_upd, k, dims, inner);
        return CKRT_OK;
    }
    size_t bytes = (size_t)inner * esz;
    for (int64_t j = 0; j < n_upd && bytes; j++)
        memcpy((unsigned char *)y + ck_k_nd_row(idx, j, k, dims) * (int64_t)bytes, (const unsigned char *)upd + j * (int64_t)bytes,
               bytes);
    return CKRT_OK;
}

int ckrt_gather_nd(ckrt_ctx *c, size_t esz, void *y, const void *x, const int64_t *idx, int k, const int64_t *dims,
                   int64_t n_idx, int64_t inner) {
    CKRT_TRY(ckrt_nd_check(c, idx, k, dims, n_idx));
    size_t bytes = (size_t)inner * esz;
    for (int64_t j = 0; j < n_idx && bytes; j++)
        memcpy((unsigned char *)y + j * (int64_t)bytes, (const unsigned char *)x + ck_k_nd_row(idx, j, k, dims) * (int64_t)bytes,
               bytes);
    return CKRT_OK;
}

int ckrt_fill(ckrt_ctx *c, size_t esz, void *y, const void *value, int64_t n) {
    (void)c;
    unsigned char *yb = y;
    for (int64_t i = 0; i < n; i++) copy_elem(yb + i * (int64_t)esz, value, esz);
    return CKRT_OK;
}

int ckrt_range(ckrt_ctx *c, ckrt_dtype dt, void *y, const void *start, const void *delta, int64_t n) {
    switch (dt) {
    case CKRT_F32: {
        double s = *(const float *)start, d = *(const float *)delta;
        for (int64_t i = 0; i < n; i++) ((float *)y)[i] = (float)ck_k_range_f(i, s, d);
        return CKRT_OK;
    }
    case CKRT_F64: {
        double s = *(const double *)start, d = *(const double *)delta;
        for (int64_t i = 0; i < n; i++) ((double *)y)[i] = ck_k_range_f(i, s, d);
        return CKRT_OK;
    }
    case CKRT_I64: {
        int64_t s = *(const int64_t *)start, d = *(const int64_t *)delta;
        for (int64_t i = 0; i < n; i++) ((int64_t *)y)[i] = ck_k_range_i(i, s, d);
        return CKRT_OK;
    }
    case CKRT_I32: {
        int64_t s = *(const int32_t *)start, d = *(const int32_t *)delta;
        for (int64_t i = 0; i < n; i++) ((int32_t *)y)[i] = (int32_t)ck_k_range_i(i, s, d);
        return CKRT_OK;
    }
    default: return ckrt_fail(c, CKRT_ERR_INTERNAL, "Range of dtype %s", ckrt_dtype_name(dt));
    }
}

int ckrt_rank_mean(ckrt_ctx *c, float *out, const float *recv, int64_t count, int ranks) {
    (void)c;
    for (int64_t i = 0; i < count; i++) out[i] = ck_k_rank_mean(i, recv, count, ranks);
    return CKRT_OK;
}

int ckrt_copy_f32(ckrt_ctx *c, float *dst, const float *src, int64_t n) {
    (void)c;
    if (n > 0) memmove(dst, src, sizeof(float) * (size_t)n);
    return CKRT_OK;
}
