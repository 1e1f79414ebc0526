/* core.c — libckrt's small shared pieces: dtypes, error recording, .npy files and
 * the CPU backend's memory and ordering hooks (plain malloc/memcpy; streams and events are
 * no-ops because the CPU runs everything in order).
 */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "ckrt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>

static const struct { const char *name; size_t size; const char *npy; } dtype_tab[] = {
    [CKRT_UNDEF] = {"undefined", 0, NULL}, [CKRT_F32] = {"float32", 4, "<f4"}, [CKRT_U8] = {"uint8", 1, "|u1"},
    [CKRT_I8] = {"int8", 1, "|i1"},        [CKRT_I16] = {"int16", 2, "<i2"},  [CKRT_I32] = {"int32", 4, "<i4"},
    [CKRT_I64] = {"int64", 8, "<i8"},      [CKRT_BOOL] = {"bool", 1, "|b1"},   [CKRT_F16] = {"float16", 2, "<f2"},
    [CKRT_F64] = {"float64", 8, "<f8"},
};

size_t ckrt_dtype_size(ckrt_dtype t) { return t < CKRT_DTYPE_COUNT ? dtype_tab[t].size : 0; }
const char *ckrt_dtype_name(ckrt_dtype t) { return t < CKRT_DTYPE_COUNT ? dtype_tab[t].name : "?"; }

int ckrt_fail(ckrt_ctx *c, int code, const char *fmt, ...) {
    char buf[sizeof c->msg - 200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (c->node) snprintf(c->msg, sizeof c->msg, "node '%.150s': %s", c->node, buf);
    else snprintf(c->msg, sizeof c->msg, "%s", buf);
    c->code = code;
    return code;
}

/* ---------------------------------------------------------------- CPU backend */

#define CKRT_HUGE_PAGE ((size_t)2 << 20)

static int cpu_arena_alloc(ckrt_ctx *c, int64_t bytes, unsigned char **out) {
    void *p = NULL;
    size_t n = (size_t)(bytes ? bytes : CKRT_ALIGN);
    size_t align = n >= CKRT_HUGE_PAGE ? CKRT_HUGE_PAGE : CKRT_ALIGN;
    n = (n + align - 1) / align * align;
    if (posix_memalign(&p, align, n) != 0)
        return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the arena: %lld bytes", (long long)bytes);
#ifdef MADV_HUGEPAGE
    if (align == CKRT_HUGE_PAGE && !getenv("CKRT_NO_HUGEPAGES")) (void)madvise(p, n, MADV_HUGEPAGE);
#endif
    *out = p;
    return CKRT_OK;
}
static void cpu_arena_free(ckrt_ctx *c, unsigned char *p) { (void)c, free(p); }
static int cpu_host_alloc(ckrt_ctx *c, int64_t bytes, void **out) {
    *out = malloc((size_t)(bytes ? bytes : 1));
    return *out ? CKRT_OK : ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate %lld host bytes", (long long)bytes);
}
static void cpu_host_free(ckrt_ctx *c, void *p) { (void)c, free(p); }
static int cpu_copy(ckrt_ctx *c, void *dst, const void *src, int64_t bytes, int stream) {
    (void)c, (void)stream;
    memcpy(dst, src, (size_t)bytes);
    return CKRT_OK;
}
static int cpu_noop2(ckrt_ctx *c, int a, int b) { (void)c, (void)a, (void)b; return CKRT_OK; }
static int cpu_sync(ckrt_ctx *c) { (void)c; return CKRT_OK; }

const ckrt_backend ckrt_cpu_backend = {
    .name = "cpu",
    .arena_alloc = cpu_arena_alloc,
    .arena_free = cpu_arena_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .copy_to_device = cpu_copy,
    .copy_to_host = cpu_copy,
    .event_record = cpu_noop2,
    .stream_wait = cpu_noop2,
    .synchronize = cpu_sync,
};

/* ---------------------------------------------------------------- .npy */

static ckrt_dtype npy_dtype(const char *descr) {
    for (int t = 1; t < CKRT_DTYPE_COUNT; t++)
        if (dtype_tab[t].npy && strcmp(dtype_tab[t].npy, descr) == 0) return (ckrt_dtype)t;
    if (strcmp(descr, "|i1") == 0) return CKRT_I8;
    return CKRT_UNDEF;
}

/* Finds 'key': in the header dict and returns a pointer just past the colon, or NULL. */
static const char *npy_key(const char *h, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "'%s':", key);
    const char *p = strstr(h, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    return p;
}

/* The header of an open .npy: dtype, rank and dims in *out (data NULL), *data_at the offset of the
 * data and *bytes its size. */
static int npy_header(ckrt_ctx *c, FILE *f, const char *path, ckrt_array *out, long *data_at, size_t *bytes) {
    unsigned char pre[10];
    int rc = CKRT_ERR_USAGE;
    char *hdr = NULL;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        ckrt_fail(c, rc, "'%s' is not a .npy file (bad magic)", path);
        goto fail;
    }
    size_t hlen;
    if (pre[6] == 1) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        unsigned char b[2];
        if (fread(b, 1, 2, f) != 2) {
            ckrt_fail(c, rc, "'%s' is truncated (header)", path);
            goto fail;
        }
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)b[0] << 16 | (size_t)b[1] << 24;
    } else {
        ckrt_fail(c, rc, "'%s': unsupported .npy version %d", path, pre[6]);
        goto fail;
    }
    if (hlen > (1u << 20)) {
        ckrt_fail(c, rc, "'%s': .npy header of %zu bytes is too large", path, hlen);
        goto fail;
    }
    hdr = malloc(hlen + 1);
    if (!hdr || fread(hdr, 1, hlen, f) != hlen) {
        ckrt_fail(c, rc, "'%s' is truncated (header)", path);
        goto fail;
    }
    hdr[hlen] = 0;
    const char *p = npy_key(hdr, "descr");
    char descr[16] = {0};
    if (!p || *p != '\'' || sscanf(p + 1, "%15[^']", descr) != 1) {
        ckrt_fail(c, rc, "'%s': .npy header has no descr", path);
        goto fail;
    }
    out->dtype = npy_dtype(descr);
    if (out->dtype == CKRT_UNDEF) {
        ckrt_fail(c, rc, "'%s': dtype '%s' is not supported (float32 <f4, float64 <f8, float16 <f2, int64 <i8, int32 <i4, "
                  "int16 <i2, int8 |i1, uint8 |u1, bool |b1)", path, descr);
        goto fail;
    }
    p = npy_key(hdr, "fortran_order");
    if (!p || strncmp(p, "False", 5) != 0) {
        ckrt_fail(c, rc, "'%s': Fortran-order arrays are not supported (save a C-contiguous array)", path);
        goto fail;
    }
    p = npy_key(hdr, "shape");
    if (!p || *p != '(') {
        ckrt_fail(c, rc, "'%s': .npy header has no shape", path);
        goto fail;
    }
    p++;
    int64_t numel = 1;
    while (*p && *p != ')') {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        char *end;
        long long d = strtoll(p, &end, 10);
        if (end == p || d < 0 || out->rank == CKRT_MAX_RANK || (d && numel > INT64_MAX / 16 / d)) {
            ckrt_fail(c, rc, "'%s': bad or too large shape in the .npy header", path);
            goto fail;
        }
        out->dims[out->rank++] = d;
        numel *= d;
        p = end;
    }
    *bytes = (size_t)numel * ckrt_dtype_size(out->dtype);
    *data_at = ftell(f);
    free(hdr);
    return CKRT_OK;
fail:
    free(hdr);
    return rc;
}

/* path opened and its header read: *f stays open on success (closed on failure). */
static int npy_open(ckrt_ctx *c, const char *path, ckrt_array *out, FILE **f, long *at, size_t *bytes) {
    memset(out, 0, sizeof *out);
    *f = fopen(path, "rb");
    if (!*f) return ckrt_fail(c, CKRT_ERR_USAGE, "cannot open '%s': %s", path, strerror(errno));
    int rc = npy_header(c, *f, path, out, at, bytes);
    if (rc) fclose(*f);
    return rc;
}

int ckrt_npy_read(ckrt_ctx *c, const char *path, ckrt_array *out) {
    FILE *f;
    long at;
    size_t bytes;
    CKRT_TRY(npy_open(c, path, out, &f, &at, &bytes));
    int rc = CKRT_OK;
    if (!(out->data = malloc(bytes ? bytes : 1))) rc = ckrt_fail(c, CKRT_ERR_NOMEM, "'%s': cannot allocate %zu bytes", path, bytes);
    if (!rc && fread(out->data, 1, bytes, f) != bytes) {
        rc = ckrt_fail(c, CKRT_ERR_USAGE, "'%s' is truncated: %zu data bytes expected", path, bytes);
        free(out->data);
        out->data = NULL;
    }
    fclose(f);
    return rc;
}

int ckrt_npy_map(ckrt_ctx *c, const char *path, ckrt_npy_mapping *m) {
    memset(m, 0, sizeof *m);
    FILE *f;
    long at;
    size_t bytes;
    struct stat st;
    CKRT_TRY(npy_open(c, path, &m->a, &f, &at, &bytes));
    int rc = CKRT_OK;
    if ((fstat(fileno(f), &st) != 0 || (uint64_t)st.st_size < (uint64_t)at + bytes))
        rc = ckrt_fail(c, CKRT_ERR_USAGE, "'%s' is truncated: %zu data bytes expected after its %ld-byte header", path, bytes, at);
    if (!rc) {
        m->bytes = (size_t)at + bytes;
        m->base = mmap(NULL, m->bytes ? m->bytes : 1, PROT_READ, MAP_PRIVATE, fileno(f), 0);
        if (m->base == MAP_FAILED) {
            m->base = NULL;
            rc = ckrt_fail(c, CKRT_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
        } else {
            m->a.data = (unsigned char *)m->base + at;
        }
    }
    fclose(f);
    return rc;
}

void ckrt_npy_unmap(ckrt_npy_mapping *m) {
    if (m->base) munmap(m->base, m->bytes ? m->bytes : 1);
    memset(m, 0, sizeof *m);
}

int ckrt_npy_write(ckrt_ctx *c, const char *path, ckrt_dtype dt, int rank, const int64_t *dims, const void *data) {
    if (!dtype_tab[dt].npy) return ckrt_fail(c, CKRT_ERR_INTERNAL, "cannot write dtype %s to .npy", ckrt_dtype_name(dt));
    char shape[256] = "(";
    size_t k = 1;
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) {
        k += (size_t)snprintf(shape + k, sizeof shape - k, "%lld%s", (long long)dims[i], rank == 1 ? "," : i + 1 < rank ? ", " : "");
        numel *= dims[i];
    }
    snprintf(shape + k, sizeof shape - k, ")");
    char hdr[512];
    int hl = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", dtype_tab[dt].npy, shape);
    int total = 10 + hl + 1, pad = (64 - total % 64) % 64;
    for (int i = 0; i < pad; i++) hdr[hl++] = ' ';
    hdr[hl++] = '\n';
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
    size_t bytes = (size_t)numel * ckrt_dtype_size(dt);
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)hl, f) == (size_t)hl &&
              fwrite(data, 1, bytes, f) == bytes;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    return CKRT_OK;
}
