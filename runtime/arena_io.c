/* arena_io.c — the host's access to the arena: weights in, the canary painted, the high-water mark
 * found, the loss, dumps, checksums and saved weights out.
 *
 * On the CPU the arena is host memory and these are memcpy, memset and loops. A device backend
 * keeps the arena only on the device (ckrt_backend.write/read/fill/top): its c->arena is a range
 * of addresses with no memory behind it, so every host access goes through here, and the host
 * memory it takes is bounded: files move through one buffer of CKRT_IO_CHUNK bytes (plus the
 * backend's own pinned staging), a read back is the size of what is read (ckrt_arena_fetch counts
 * it in c->readback_peak, which the report shows), and the high-water mark is found by a
 * reduction on the device, not by downloading the arena.
 */
#include "ckrt.h"
#include "ckrt_kernels_gpu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int check_range(ckrt_ctx *c, int64_t offset, int64_t bytes) {
    if (offset < 0 || bytes < 0 || offset + bytes > c->arena_bytes + c->guard_bytes)
        return ckrt_fail(c, CKRT_ERR_INTERNAL, "host access to arena bytes [%lld, %lld) outside the arena (%lld bytes)",
                         (long long)offset, (long long)(offset + bytes), (long long)(c->arena_bytes + c->guard_bytes));
    return CKRT_OK;
}

int ckrt_arena_write(ckrt_ctx *c, int64_t offset, const void *src, int64_t bytes) {
    CKRT_TRY(check_range(c, offset, bytes));
    if (bytes == 0) return CKRT_OK;
    if (c->be->write) return c->be->write(c, offset, src, bytes);
    memcpy(c->arena + offset, src, (size_t)bytes);
    return CKRT_OK;
}

int ckrt_arena_read(ckrt_ctx *c, int64_t offset, void *dst, int64_t bytes) {
    CKRT_TRY(check_range(c, offset, bytes));
    if (bytes == 0) return CKRT_OK;
    if (c->be->read) return c->be->read(c, offset, dst, bytes);
    memcpy(dst, c->arena + offset, (size_t)bytes);
    return CKRT_OK;
}

int ckrt_arena_fill(ckrt_ctx *c, int64_t offset, int64_t bytes, int byte) {
    CKRT_TRY(check_range(c, offset, bytes));
    if (bytes == 0) return CKRT_OK;
    if (c->be->fill) return c->be->fill(c, offset, bytes, byte);
    memset(c->arena + offset, byte, (size_t)bytes);
    return CKRT_OK;
}

int ckrt_arena_top(ckrt_ctx *c, int64_t from, int64_t to, int byte, int64_t *top) {
    CKRT_TRY(check_range(c, from, to - from));
    if (from % 8 || to % 8) return ckrt_fail(c, CKRT_ERR_INTERNAL, "high-water search over [%lld, %lld): not 8-byte aligned",
                                             (long long)from, (long long)to);
    if (c->be->top) return c->be->top(c, from, to, byte, top);
    /* the device's chunk function, from the last chunk down: the first that differs holds the top */
    int64_t n = to - from, t = 0;
    for (int64_t i = (n + CK_K_TOP_CHUNK - 1) / CK_K_TOP_CHUNK - 1; i >= 0 && !t; i--)
        t = ck_k_top_chunk(i, c->arena + from, n, (uint8_t)byte);
    *top = from + t;
    return CKRT_OK;
}

/* The host buffer files and checksums move through. */
static int io_buffer(ckrt_ctx *c, int64_t bytes, unsigned char **out) {
    size_t n = (size_t)(bytes < CKRT_IO_CHUNK ? (bytes > 0 ? bytes : 1) : CKRT_IO_CHUNK);
    *out = malloc(n);
    return *out ? CKRT_OK : ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate a %zu-byte transfer buffer", n);
}

/* What a chunked transfer does with each chunk in the host buffer: fold it into a checksum,
 * fill it from a file, write it to a file. */
typedef struct chunk_io {
    FILE *f;
    const char *path;
    uint64_t *sum;
} chunk_io;
typedef int (*chunk_fn)(ckrt_ctx *c, unsigned char *buf, int64_t n, const chunk_io *io);

static int chunk_sum(ckrt_ctx *c, unsigned char *buf, int64_t n, const chunk_io *io) {
    (void)c;
    *io->sum = ckrt_checksum_update(*io->sum, buf, (size_t)n);
    return CKRT_OK;
}

static int chunk_load(ckrt_ctx *c, unsigned char *buf, int64_t n, const chunk_io *io) {
    if (fread(buf, 1, (size_t)n, io->f) != (size_t)n) return ckrt_fail(c, CKRT_ERR_DATA, "'%s' is truncated", io->path);
    return chunk_sum(c, buf, n, io);
}

static int chunk_save(ckrt_ctx *c, unsigned char *buf, int64_t n, const chunk_io *io) {
    if (fwrite(buf, 1, (size_t)n, io->f) != (size_t)n) return ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", io->path, strerror(errno));
    return CKRT_OK;
}

/* Arena bytes [offset, offset + bytes) through one host buffer, CKRT_IO_CHUNK bytes at a time:
 * each chunk read from the arena and handed to fn, or (into_arena) filled by fn and written. */
static int chunked(ckrt_ctx *c, int64_t offset, int64_t bytes, bool into_arena, chunk_fn fn, const chunk_io *io) {
    unsigned char *buf;
    CKRT_TRY(io_buffer(c, bytes, &buf));
    int rc = CKRT_OK;
    for (int64_t at = 0; !rc && at < bytes; at += CKRT_IO_CHUNK) {
        int64_t n = bytes - at < CKRT_IO_CHUNK ? bytes - at : CKRT_IO_CHUNK;
        if (!into_arena) rc = ckrt_arena_read(c, offset + at, buf, n);
        if (!rc) rc = fn(c, buf, n, io);
        if (!rc && into_arena) rc = ckrt_arena_write(c, offset + at, buf, n);
    }
    free(buf);
    return rc;
}

int ckrt_arena_checksum(ckrt_ctx *c, int64_t offset, int64_t bytes, uint64_t *sum) {
    *sum = CKRT_CHECKSUM_INIT;
    if (!c->be->read) {
        CKRT_TRY(check_range(c, offset, bytes));
        *sum = ckrt_checksum(c->arena + offset, (size_t)bytes);
        return CKRT_OK;
    }
    return chunked(c, offset, bytes, false, chunk_sum, &(chunk_io){.sum = sum});
}

int ckrt_arena_load(ckrt_ctx *c, int64_t offset, FILE *f, const char *path, int64_t bytes, uint64_t *sum) {
    CKRT_TRY(check_range(c, offset, bytes));
    *sum = CKRT_CHECKSUM_INIT;
    if (!c->be->write) { /* straight into the arena */
        if (fread(c->arena + offset, 1, (size_t)bytes, f) != (size_t)bytes) return ckrt_fail(c, CKRT_ERR_DATA, "'%s' is truncated", path);
        *sum = ckrt_checksum(c->arena + offset, (size_t)bytes);
        return CKRT_OK;
    }
    return chunked(c, offset, bytes, true, chunk_load, &(chunk_io){.f = f, .path = path, .sum = sum});
}

int ckrt_arena_save(ckrt_ctx *c, int64_t offset, FILE *f, const char *path, int64_t bytes) {
    CKRT_TRY(check_range(c, offset, bytes));
    if (!c->be->read) {
        if (fwrite(c->arena + offset, 1, (size_t)bytes, f) != (size_t)bytes)
            return ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        return CKRT_OK;
    }
    return chunked(c, offset, bytes, false, chunk_save, &(chunk_io){.f = f, .path = path});
}

int ckrt_arena_fetch(ckrt_ctx *c, int64_t offset, int64_t bytes, void **out) {
    *out = malloc((size_t)(bytes > 0 ? bytes : 1));
    if (!*out) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate %lld bytes to read the arena into", (long long)bytes);
    int rc = ckrt_arena_read(c, offset, *out, bytes);
    if (rc) {
        free(*out);
        *out = NULL;
        return rc;
    }
    c->readback += bytes;
    if (c->readback > c->readback_peak) c->readback_peak = c->readback;
    return CKRT_OK;
}

void ckrt_arena_release(ckrt_ctx *c, void *p, int64_t bytes) {
    if (!p) return;
    free(p);
    c->readback -= bytes;
}
