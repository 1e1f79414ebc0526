/* onnx_load.c — ModelProto (protobuf-c) -> ck_graph.
 *
 * The only file that sees protobuf types. It checks everything a malicious or broken file can
 * get wrong before trusting it: opset range, tensor data lengths against shapes (overflow-safe),
 * external data paths and sizes, references to undefined values, cycles, unsupported ops
 * (collected and reported all at once), attribute kinds, and, before protobuf-c sees the bytes,
 * message nesting depth (protobuf-c recurses without a limit). Data is checked against what the
 * file actually holds before anything is allocated for it. Nodes are emitted in a topological
 * order computed here, so a graph whose nodes are listed out of order still loads.
 *
 * Conversion keeps names: initializers keep their ONNX (= PyTorch parameter) names, nodes keep
 * their scope paths. Weight bytes are never copied where they can be used in place (a compile
 * needs memory for the graph, not for the weights): external data is mapped, embedded data stays
 * in the parsed message, which the graph then holds; otherwise the message is freed after
 * conversion. Then the folding/inference pass (fold.c) makes every shape static.
 */
#define _DEFAULT_SOURCE /* madvise (MADV_DONTNEED: posix_madvise's is a no-op in glibc) */
#include "ck_frontend.h"
#include "onnx.pb-c.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct loader {
    ck_graph *g;
    ck_diag *d;
    const ck_load_options *o;
    const char *base_dir;
    ck_map *names;        /* ONNX value name -> ck_value* */
    ck_map *maps;         /* external-data path -> ext_map* */
    bool keep_proto;      /* some value's data points into the parsed message */
    bool *dim_used;       /* per --dim binding */
    int errors;
    /* --export-onnx: the payloads' byte ranges (onnx_offsets.c); src NULL when not recorded */
    ck_source *src;
    ck_map *ranges;       /* initializer name -> its ck_payload in the walk */
    const char *abs_dir;  /* the model's directory, absolute (external data paths) */
    int cap_files;
} loader;

#define LERR(L, ...) (ck_diag_add((L)->d, __VA_ARGS__), (L)->errors++)

/* ---------------------------------------------------------------- tensors */

static const char *ext_key(const Onnx__TensorProto *t, const char *key) {
    for (size_t i = 0; i < t->n_external_data; i++)
        if (t->external_data[i]->key && strcmp(t->external_data[i]->key, key) == 0) return t->external_data[i]->value;
    return NULL;
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s) return false;
    for (const char *p = s; *p; p++) /* strtoull alone takes " -1" and "+1" */
        if (*p < '0' || *p > '9') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

/* Opens path read-only if it is a regular file. O_NONBLOCK keeps open() itself from waiting
 * forever on a FIFO; a directory, device or FIFO is refused after fstat. On failure returns -1
 * and *why is errno's text or "not a regular file". */
static int open_regular_fd(const char *path, uint64_t *size, const char **why) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *why = "not a regular file";
        close(fd);
        return -1;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}

/* ---------------------------------------------------------------- external data: mapped, not read
 *
 * An external-data file is mapped read-only once per load (the first tensor that names it) and
 * its tensors' data point into the mapping: loading, folding, planning and inspect never fault in
 * a weight page (folding reads only the small constants it folds), and codegen streams weights.bin
 * from the mapping, dropping each page once written (ck_graph_data_done). The graph holds the
 * mapping (ck_graph_hold); ck_graph_free unmaps it. A file truncated by someone else while
 * mapped faults (SIGBUS) when read, as with any mapping. */

typedef struct ext_map {
    const char *base;  /* NULL for an empty file */
    size_t size;
    bool failed;       /* the file could not be opened or mapped: said once, for its first tensor */
} ext_map;

static size_t page_size(void) {
    static size_t ps;
    if (!ps) {
        long p = sysconf(_SC_PAGESIZE);
        ps = p > 0 ? (size_t)p : 4096;
    }
    return ps;
}

/* madvise(MADV_DONTNEED) on a read-only file mapping unmaps pages from this process only: a later
 * read maps the same bytes again from the page cache. So a reader done with [p, p + n) can drop
 * more than that, and does: the kernel maps more than the page a read faults on (fault-around,
 * 64 KiB; a whole PMD, 2 MiB, of a large page-cache folio), so pages before p dropped earlier
 * come back with the next fault. Dropping DROP_MARGIN on both sides catches them: what streaming
 * a file leaves resident stays bounded by about the margin, not by the file's size. */
#define DROP_MARGIN ((uintptr_t)2 << 20)
static void drop_pages(void *ctx, const void *p, size_t n) {
    const ext_map *m = ctx;
    size_t ps = page_size();
    uintptr_t base = (uintptr_t)m->base, end = (base + m->size + ps - 1) & ~(uintptr_t)(ps - 1);
    uintptr_t a = (uintptr_t)p - base > DROP_MARGIN ? (uintptr_t)p - DROP_MARGIN : base;
    uintptr_t e = end - ((uintptr_t)p + n) > DROP_MARGIN ? (uintptr_t)p + n + DROP_MARGIN : end;
    a &= ~(uintptr_t)(ps - 1);
    e = (e + ps - 1) & ~(uintptr_t)(ps - 1);
    if (e > end) e = end;
    if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
}

/* Pages of [base, base + size) present in this process's page tables (/proc/self/pagemap's bit
 * 63, readable without privileges); -1 when pagemap cannot be read. */
static int64_t resident_bytes(const char *base, size_t size) {
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t ps = page_size(), np = (size_t)(size + ps - 1) / ps, first = (uintptr_t)base / ps;
    uint64_t e[512];
    int64_t res = 0;
    for (size_t i = 0; i < np;) {
        size_t k = np - i < 512 ? np - i : 512;
        ssize_t r = pread(fd, e, k * 8, (off_t)((first + i) * 8));
        if (r != (ssize_t)(k * 8)) {
            res = -1;
            break;
        }
        for (size_t j = 0; j < k; j++) res += (int64_t)(e[j] >> 63) * (int64_t)ps;
        i += k;
    }
    close(fd);
    return res;
}

static void unmap_ext(void *ctx) {
    ext_map *m = ctx;
    if (ck_stats.enabled) {
        int64_t r = resident_bytes(m->base, m->size);
        ck_stats.resident_bytes = r < 0 || ck_stats.resident_bytes < 0 ? -1 : ck_stats.resident_bytes + r;
    }
    munmap((void *)m->base, m->size);
}

/* A failed file, remembered (m: its entry, or NULL when none could be made) so that the tensors
 * after the first that name it fail without a message each (a model whose data file is missing
 * would otherwise print one line per initializer). */
static ext_map *ext_failed(loader *L, const char *path) {
    ext_map *m = ck_arena_alloc(L->g->arena, sizeof *m);
    char *key = ck_arena_strdup(L->g->arena, path);
    if (m && key) {
        *m = (ext_map){.failed = true};
        ck_map_put(L->maps, key, m);
    }
    return NULL;
}

/* The mapping of path, made on first use. NULL (with an error reported for the first tensor that
 * names it) when the file cannot be opened or mapped. */
static ext_map *map_external(loader *L, const char *what, const char *path) {
    if (!L->maps) L->maps = ck_map_new(L->g->arena, 16);
    ext_map *m = ck_map_get(L->maps, path);
    if (m && m->failed) {
        L->errors++;
        return NULL;
    }
    if (m) return m;
    const char *why;
    uint64_t size;
    int fd = open_regular_fd(path, &size, &why);
    if (fd < 0) {
        LERR(L, "%s: cannot open external data file '%s': %s (the other initializers stored there fail too; "
                "said once)", what, path, why);
        return ext_failed(L, path);
    }
    const char *base = NULL;
    if (size && size <= SIZE_MAX && (base = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
        base = NULL;
    close(fd);
    if (size && !base) {
        LERR(L, "%s: cannot read external data file '%s' (the other initializers stored there fail too; said once)",
             what, path);
        return ext_failed(L, path);
    }
    m = ck_arena_alloc(L->g->arena, sizeof *m);
    char *key = ck_arena_strdup(L->g->arena, path);
    if (!m || !key) {
        if (base) munmap((void *)base, (size_t)size);
        LERR(L, "%s: out of memory", what);
        return NULL;
    }
    *m = (ext_map){.base = base, .size = (size_t)size};
    if (base) {
        ck_graph_hold(L->g, base, (size_t)size, drop_pages, unmap_ext, m);
        ck_stats.mapped_files++;
        ck_stats.mapped_bytes += (int64_t)size;
    }
    ck_map_put(L->maps, key, m);
    return m;
}

/* n bytes of path at off into dst, with pread: not through the mapping, whose neighbouring pages
 * a fault would map too (the kernel's fault-around). */
static bool read_at(const char *path, uint64_t off, void *dst, size_t n) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)dst + done, n - done, (off_t)(off + done));
        if (r <= 0 && !(r < 0 && errno == EINTR)) break;
        if (r > 0) done += (size_t)r;
    }
    close(fd);
    return done == n;
}

/* --export-onnx: the external data file at location loc (size bytes) in the source's file list,
 * once; returns its index (-1 when not recorded). */
static int note_external(loader *L, const char *loc, uint64_t size) {
    ck_source *s = L->src;
    if (!s) return -1;
    for (int k = 1; k < s->n_files; k++)
        if (strcmp(s->files[k].location, loc) == 0) return k;
    if (s->n_files == L->cap_files) {
        int cap = L->cap_files * 2 + 8;
        ck_source_file *f = ck_arena_alloc(L->g->arena, sizeof *f * (size_t)cap);
        CK_ASSERT(f);
        memcpy(f, s->files, sizeof *f * (size_t)s->n_files);
        s->files = f, L->cap_files = cap;
    }
    ck_source_file *f = &s->files[s->n_files];
    f->location = ck_arena_strdup(L->g->arena, loc);
    f->size = size;
    if (L->abs_dir) {
        size_t n = strlen(L->abs_dir) + strlen(loc) + 2;
        char *path = ck_arena_alloc(L->g->arena, n);
        CK_ASSERT(path);
        snprintf(path, n, "%s/%s", L->abs_dir, loc);
        f->path = path;
    }
    return s->n_files++;
}

/* --export-onnx: where initializer t's payload (bytes long) lies, appended to the source's list. */
static void note_payload(loader *L, const Onnx__TensorProto *t, const char *name, size_t bytes) {
    ck_source *s = L->src;
    if (!s) return;
    ck_payload *q = &s->payloads[s->n_payloads++];
    *q = (ck_payload){.name = name, .file = -1};
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        const char *loc = ext_key(t, "location"), *so = ext_key(t, "offset");
        uint64_t off = 0;
        if (loc && (!so || parse_u64(so, &off))) *q = (ck_payload){name, note_external(L, loc, 0), off, bytes};
        return;
    }
    const ck_payload *w = L->ranges ? ck_map_get(L->ranges, name) : NULL;
    if (w && w->file == 0 && w->length == bytes) *q = (ck_payload){name, 0, w->offset, w->length};
}

/* Points v's data at its bytes in the external file once the file is known to hold them. Data
 * at an offset not aligned to its element size (no exporter writes that; the file format allows
 * it) is read into the arena instead, since readers access elements through typed pointers. */
static bool read_external(loader *L, const char *what, const Onnx__TensorProto *t, ck_value *v, size_t bytes) {
    const char *loc = ext_key(t, "location");
    if (!loc || !*loc) {
        LERR(L, "%s: external data has no 'location'", what);
        return false;
    }
    if (!L->base_dir) {
        LERR(L, "%s: external data '%s' cannot be resolved for a model loaded from memory", what, loc);
        return false;
    }
    /* the location must stay inside the model's directory: relative, no '..' component */
    bool escape = loc[0] == '/';
    for (const char *p = loc; *p && !escape; p = strchr(p, '/') ? strchr(p, '/') + 1 : p + strlen(p))
        if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || p[2] == 0)) escape = true;
    if (escape) {
        LERR(L, "%s: external data location '%s' escapes the model directory (absolute paths and '..' are refused)", what, loc);
        return false;
    }
    uint64_t off = 0, len = bytes;
    const char *so = ext_key(t, "offset"), *sl = ext_key(t, "length");
    if (so && !parse_u64(so, &off)) {
        LERR(L, "%s: external data offset '%s' is not a number", what, so);
        return false;
    }
    if (sl && !parse_u64(sl, &len)) {
        LERR(L, "%s: external data length '%s' is not a number", what, sl);
        return false;
    }
    if (len != bytes) {
        LERR(L, "%s: external data length is %llu bytes but its shape needs %zu", what, (unsigned long long)len, bytes);
        return false;
    }
    size_t plen = strlen(L->base_dir) + strlen(loc) + 2;
    char *path = malloc(plen);
    if (!path) return false;
    snprintf(path, plen, "%s/%s", L->base_dir, loc);
    ext_map *m = map_external(L, what, path);
    if (m) note_external(L, loc, m->size);
    bool ok = false;
    size_t esz = ck_dtype_size(v->dtype);
    if (!m)
        ; /* reported */
    else if (m->size < off || m->size - off < len) /* overflow-safe: off + len could wrap */
        LERR(L, "%s: external data file '%s' is too short: %llu bytes needed at offset %llu but the file has %llu", what,
             path, (unsigned long long)len, (unsigned long long)off, (unsigned long long)m->size);
    else if (bytes == 0 || off % esz) {
        if (!(v->data = ck_arena_alloc(L->g->arena, bytes ? bytes : 1)))
            LERR(L, "%s: out of memory for %zu bytes", what, bytes);
        else if (bytes && !read_at(path, off, v->data, bytes))
            LERR(L, "%s: cannot read external data file '%s'", what, path);
        else {
            ck_stats.copied_bytes += (int64_t)bytes;
            ok = true;
        }
    } else {
        v->data = (void *)(uintptr_t)(m->base + off);
        ok = true;
    }
    free(path);
    return ok;
}

/* Fills v (created by the caller with the right dtype and dims) with t's data, checked against
 * v's shape first: a tensor claiming 2^40 elements with 8 bytes of data is refused, never
 * allocated. raw_data, float_data, double_data and int64_data are used where protobuf-c unpacked
 * them (the graph holds the message, L->keep_proto); only the narrower integer types (stored as
 * int32_data) are converted into the arena. */
static bool tensor_data(loader *L, const char *what, const Onnx__TensorProto *t, ck_value *v) {
    int64_t numel = ck_value_numel(v);
    size_t esz = ck_dtype_size(v->dtype), bytes = (size_t)numel * esz;
    if (bytes > L->o->max_file_bytes) {
        LERR(L, "%s: %zu bytes exceeds the limit of %llu", what, bytes, (unsigned long long)L->o->max_file_bytes);
        return false;
    }
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return read_external(L, what, t, v, bytes);
    void *in_proto = NULL;
    if (t->has_raw_data) {
        if (t->raw_data.len != bytes) {
            LERR(L, "%s: raw_data has %zu bytes but shape %s of %s needs %zu", what, t->raw_data.len,
                 ck_shape_str(v, (char[CK_SHAPE_STR_MAX]){0}, CK_SHAPE_STR_MAX), ck_dtype_name(v->dtype), bytes);
            return false;
        }
        in_proto = t->raw_data.data; /* little-endian host, as ONNX stores it; malloc'd: aligned */
    } else {
        size_t have;
        const char *field;
        switch (v->dtype) {
        case CK_F32: have = t->n_float_data, field = "float_data", in_proto = t->float_data; break;
        case CK_F64: have = t->n_double_data, field = "double_data", in_proto = t->double_data; break;
        case CK_I64: have = t->n_int64_data, field = "int64_data", in_proto = t->int64_data; break;
        default: have = t->n_int32_data, field = "int32_data"; break; /* int32, int16, int8, uint8, bool, float16 bits */
        }
        if (have != (size_t)numel) {
            LERR(L, "%s: %s has %zu elements but shape %s needs %lld", what, field, have,
                 ck_shape_str(v, (char[CK_SHAPE_STR_MAX]){0}, CK_SHAPE_STR_MAX), (long long)numel);
            return false;
        }
    }
    if (bytes && in_proto) {
        v->data = in_proto;
        L->keep_proto = true;
        return true;
    }
    v->data = ck_arena_alloc(L->g->arena, bytes ? bytes : 1);
    if (!v->data) {
        LERR(L, "%s: out of memory for %zu bytes", what, bytes);
        return false;
    }
    ck_stats.copied_bytes += (int64_t)bytes;
    for (int64_t i = 0; i < numel; i++) {
        switch (v->dtype) {
        case CK_F16: ((uint16_t *)v->data)[i] = (uint16_t)t->int32_data[i]; break;
        default: ck_value_set_i(v, i, t->int32_data[i]); break;
        }
    }
    return true;
}

/* Builds a value from a TensorProto; detached (not in the graph's list) when detached is set. */
static ck_value *tensor_value(loader *L, const char *what, const char *name, const Onnx__TensorProto *t, ck_role role,
                              bool detached) {
    int32_t code = t->has_data_type ? t->data_type : 0;
    ck_dtype dt = ck_dtype_from_onnx(code);
    if (dt == CK_UNDEF) {
        LERR(L, "%s: dtype %s is not supported (supported: float32, float64, float16, int64, int32, int16, int8, uint8, bool)",
             what, ck_onnx_dtype_name(code));
        return NULL;
    }
    if (t->segment) {
        LERR(L, "%s: segmented tensors are not supported", what);
        return NULL;
    }
    if (t->n_dims > CK_MAX_RANK) {
        LERR(L, "%s: rank %zu exceeds the maximum of %d", what, t->n_dims, CK_MAX_RANK);
        return NULL;
    }
    if (!ck_shape_ok((int)t->n_dims, t->dims)) {
        LERR(L, "%s: dims are negative or have more than %lld elements", what, (long long)CK_MAX_NUMEL);
        return NULL;
    }
    if (role == CK_ROLE_PARAM && !ck_dtype_is_float(dt)) role = CK_ROLE_CONST;
    ck_value *v;
    if (detached) {
        v = ck_arena_alloc(L->g->arena, sizeof *v);
        v->id = -1;
        v->name = ck_arena_strdup(L->g->arena, name);
        v->dtype = dt;
        v->rank = (int)t->n_dims;
        for (size_t i = 0; i < t->n_dims; i++) v->dims[i] = t->dims[i];
        v->role = role;
    } else {
        v = ck_graph_add_value(L->g, name, dt, (int)t->n_dims, t->dims, role);
    }
    return tensor_data(L, what, t, v) ? v : NULL;
}

/* ---------------------------------------------------------------- graph inputs */

static ck_value *input_value(loader *L, const Onnx__ValueInfoProto *vi) {
    const char *name = vi->name ? vi->name : "";
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
        LERR(L, "graph input '%s': only tensor inputs are supported", name);
        return NULL;
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int32_t code = tt->has_elem_type ? tt->elem_type : 0;
    ck_dtype dt = ck_dtype_from_onnx(code);
    if (dt == CK_UNDEF) {
        LERR(L, "graph input '%s': dtype %s is not supported", name, ck_onnx_dtype_name(code));
        return NULL;
    }
    if (!tt->shape) {
        LERR(L, "graph input '%s': has no shape; ckptc needs static shapes", name);
        return NULL;
    }
    if (tt->shape->n_dim > CK_MAX_RANK) {
        LERR(L, "graph input '%s': rank %zu exceeds the maximum of %d", name, tt->shape->n_dim, CK_MAX_RANK);
        return NULL;
    }
    int64_t dims[CK_MAX_RANK];
    bool ok = true;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[i];
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dm->dim_value >= 0) {
            dims[i] = dm->dim_value;
        } else if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            LERR(L, "graph input '%s': dimension %zu has the negative size %lld", name, i, (long long)dm->dim_value);
            ok = false;
        } else if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param) {
            int k = 0;
            while (k < L->o->n_dims && strcmp(L->o->dims[k].name, dm->dim_param) != 0) k++;
            if (k == L->o->n_dims) {
                LERR(L, "graph input '%s': dimension %zu is the symbolic dim '%s'; bind it with --dim %s=N", name, i,
                     dm->dim_param, dm->dim_param);
                ok = false;
            } else if (L->o->dims[k].value < 0) {
                L->dim_used[k] = true;
                LERR(L, "--dim %s=%lld: a dimension cannot be negative", dm->dim_param, (long long)L->o->dims[k].value);
                ok = false;
            } else {
                L->dim_used[k] = true;
                dims[i] = L->o->dims[k].value;
            }
        } else {
            LERR(L, "graph input '%s': dimension %zu has neither a size nor a name; ckptc needs static shapes", name, i);
            ok = false;
        }
    }
    if (!ok) return NULL;
    if (!ck_shape_ok((int)tt->shape->n_dim, dims)) {
        LERR(L, "graph input '%s': its dims have more than %lld elements", name, (long long)CK_MAX_NUMEL);
        return NULL;
    }
    return ck_graph_add_value(L->g, name, dt, (int)tt->shape->n_dim, dims, CK_ROLE_INPUT);
}

/* ---------------------------------------------------------------- attributes and Constant */

/* n elements of size bytes from src, copied into the arena (one spare: never a zero-size block). */
static void *arena_copy(ck_arena *ar, const void *src, size_t n, size_t size) {
    void *p = ck_arena_alloc(ar, (n + 1) * size);
    if (p && n) memcpy(p, src, n * size);
    return p;
}

static bool convert_attr(loader *L, const Onnx__NodeProto *np, const Onnx__AttributeProto *ap, ck_attr *a) {
    ck_arena *ar = L->g->arena;
    const char *nn = np->name ? np->name : "";
    memset(a, 0, sizeof *a);
    a->name = ap->name ? ap->name : "";
    if (ap->ref_attr_name) {
        LERR(L, "node '%s' (%s): attribute '%s' refers to a function attribute; functions are not supported", nn,
             np->op_type, a->name);
        return false;
    }
    int type = ap->has_type ? (int)ap->type : 0;
    if (!type) { /* very old files omit the type; infer it from the field that is set */
        type = ap->has_i ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT
             : ap->has_f ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT
             : ap->has_s ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING
             : ap->t ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR
             : ap->n_ints ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS
             : ap->n_floats ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS : 0;
    }
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: a->kind = CK_ATTR_INT, a->i = ap->i; return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: a->kind = CK_ATTR_FLOAT, a->f = ap->f; return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        a->kind = CK_ATTR_STRING;
        a->s = ck_arena_strndup(ar, (const char *)ap->s.data, ap->s.data ? ap->s.len : 0);
        return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        if (ap->n_ints > INT_MAX / 16) break;
        a->kind = CK_ATTR_INTS, a->n = (int)ap->n_ints;
        a->ints = arena_copy(ar, ap->ints, ap->n_ints, sizeof *a->ints);
        return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        if (ap->n_floats > INT_MAX / 16) break;
        a->kind = CK_ATTR_FLOATS, a->n = (int)ap->n_floats;
        a->floats = arena_copy(ar, ap->floats, ap->n_floats, sizeof *a->floats);
        return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: /* LSTM/GRU/RNN's activations */
        if (ap->n_strings > INT_MAX / 16) break;
        a->kind = CK_ATTR_STRINGS, a->n = (int)ap->n_strings;
        a->strs = ck_arena_alloc(ar, sizeof *a->strs * (ap->n_strings + 1));
        if (!a->strs) break;
        for (size_t k = 0; k < ap->n_strings; k++)
            a->strs[k] = ck_arena_strndup(ar, (const char *)ap->strings[k].data, ap->strings[k].data ? ap->strings[k].len : 0);
        return true;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!ap->t) break;
        char what[600];
        snprintf(what, sizeof what, "node '%s' (%s): attribute '%s'", nn, np->op_type, a->name);
        a->kind = CK_ATTR_TENSOR;
        a->t = tensor_value(L, what, a->name, ap->t, CK_ROLE_CONST, true);
        return a->t != NULL;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
        LERR(L, "node '%s' (%s): attribute '%s' holds a subgraph; control flow and subgraphs are not supported", nn,
             np->op_type, a->name);
        return false;
    default: break;
    }
    LERR(L, "node '%s' (%s): attribute '%s' has an unsupported kind (%d)", nn, np->op_type, a->name, type);
    return false;
}

/* A Constant node becomes a CONST value named after its output. */
static bool load_constant(loader *L, const Onnx__NodeProto *np) {
    const char *nn = np->name ? np->name : "";
    if (np->n_output != 1 || np->n_attribute != 1) {
        LERR(L, "node '%s' (Constant): needs exactly one output and one attribute", nn);
        return false;
    }
    const Onnx__AttributeProto *ap = np->attribute[0];
    const char *an = ap->name ? ap->name : "";
    const char *out = np->output[0];
    if (!*out || ck_map_get(L->names, out)) {
        LERR(L, "node '%s' (Constant): output '%s' is empty or already defined", nn, out);
        return false;
    }
    ck_value *v = NULL;
    int64_t one = 1;
    if (strcmp(an, "value") == 0 && ap->t) {
        char what[600];
        snprintf(what, sizeof what, "node '%s' (Constant): tensor", nn);
        v = tensor_value(L, what, out, ap->t, CK_ROLE_CONST, false);
        if (v) v->role = CK_ROLE_CONST;
    } else if (strcmp(an, "value_float") == 0) {
        v = ck_graph_add_value(L->g, out, CK_F32, 0, NULL, CK_ROLE_CONST);
        v->data = ck_arena_alloc(L->g->arena, 4);
        ((float *)v->data)[0] = ap->f;
    } else if (strcmp(an, "value_int") == 0) {
        v = ck_graph_add_value(L->g, out, CK_I64, 0, NULL, CK_ROLE_CONST);
        v->data = ck_arena_alloc(L->g->arena, 8);
        ((int64_t *)v->data)[0] = ap->i;
    } else if (strcmp(an, "value_floats") == 0) {
        int64_t n = (int64_t)ap->n_floats;
        v = ck_graph_add_value(L->g, out, CK_F32, 1, &n, CK_ROLE_CONST);
        v->data = ck_arena_alloc(L->g->arena, (size_t)(n ? n : one) * 4);
        if (n) memcpy(v->data, ap->floats, (size_t)n * 4);
    } else if (strcmp(an, "value_ints") == 0) {
        int64_t n = (int64_t)ap->n_ints;
        v = ck_graph_add_value(L->g, out, CK_I64, 1, &n, CK_ROLE_CONST);
        v->data = ck_arena_alloc(L->g->arena, (size_t)(n ? n : one) * 8);
        if (n) memcpy(v->data, ap->ints, (size_t)n * 8);
    } else {
        LERR(L, "node '%s' (Constant): attribute '%s' is not supported (use value, value_float(s) or value_int(s))", nn, an);
        return false;
    }
    if (!v) return false;
    ck_map_put(L->names, v->name, v);
    return true;
}

/* ---------------------------------------------------------------- nodes */

static bool is_default_domain(const char *dom) { return !dom || !*dom || strcmp(dom, "ai.onnx") == 0; }

/* ckptc.* rows of ops.def are built by the training passes, which trust their attributes: a
 * file must not be able to name them. */
static bool is_internal_op(const char *op_type) { return strncmp(op_type, "ckptc.", 6) == 0; }

/* ONNX ops have a handful of attributes; more than this is a broken or hostile file. */
#define CK_MAX_ATTRS 256

static int64_t domain_opset(const Onnx__ModelProto *m, const char *dom) {
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if (is_default_domain(dom) ? is_default_domain(d) : (d && strcmp(d, dom) == 0))
            return m->opset_import[i]->has_version ? m->opset_import[i]->version : 1;
    }
    return -1;
}

static bool load_node(loader *L, const Onnx__NodeProto *np, ck_op op) {
    const char *nn = np->name ? np->name : "";
    size_t n_in = np->n_input, n_out = np->n_output;
    while (n_in && !*np->input[n_in - 1]) n_in--;   /* trailing optional inputs */
    while (n_out && !*np->output[n_out - 1]) n_out--;
    if (n_in > 64 || n_out > 64 || np->n_attribute > CK_MAX_ATTRS) {
        LERR(L, "node '%s' (%s): too many inputs, outputs or attributes (%zu, %zu, %zu; at most 64, 64, %d)", nn,
             np->op_type, n_in, n_out, np->n_attribute, CK_MAX_ATTRS);
        return false;
    }
    ck_value *ins[64];
    for (size_t i = 0; i < n_in; i++) {
        ins[i] = NULL;
        if (!*np->input[i]) continue;
        ins[i] = ck_map_get(L->names, np->input[i]);
        CK_ASSERT(ins[i]); /* the topological sort checked every reference */
    }
    if (op == CK_OP_BATCH_NORM && n_out > 3) { /* outputs 3, 4 are ckptc's own */
        LERR(L, "node '%s' (BatchNormalization): has %zu outputs, expected at most 3", nn, n_out);
        return false;
    }
    ck_node *n = ck_graph_add_node(L->g, op, nn, (int)n_in, ins, (int)n_out);
    for (size_t k = 0; k < n_out; k++) {
        if (!*np->output[k]) {
            n->out[k] = NULL; /* the value created for it stays unused and is dropped later */
            continue;
        }
        n->out[k]->name = ck_arena_strdup(L->g->arena, np->output[k]);
        ck_map_put(L->names, n->out[k]->name, n->out[k]);
    }
    /* one array for all of them: ck_node_add_attr copies the array per call, quadratic in a
     * file's attribute count (the IR's passes add a few; a file can carry thousands) */
    n->attr = ck_arena_alloc(L->g->arena, (np->n_attribute + 1) * sizeof *n->attr);
    n->cap_attr = (int)np->n_attribute + 1;
    CK_ASSERT(n->attr);
    for (size_t i = 0; i < np->n_attribute; i++) {
        ck_attr a;
        if (!convert_attr(L, np, np->attribute[i], &a)) return false;
        if (!strncmp(a.name, "ckptc.", 6)) continue; /* the passes' own (ckptc.inplace): never a file's say */
        a.name = ck_arena_strdup(L->g->arena, a.name);
        n->attr[n->n_attr++] = a;
    }
    return true;
}

/* Orders node indices so every input is defined before use. Reports undefined inputs,
 * duplicate definitions and cycles. */
static bool is_constant(const Onnx__NodeProto *np) { return strcmp(np->op_type, "Constant") == 0; }

/* Constant nodes are already values (load_constant) and are left out of the order; *count
 * receives the number of ordered nodes. */
static int *topo_order(loader *L, const Onnx__GraphProto *gp, int *count) {
    size_t nn = gp->n_node;
    ck_map *producer = ck_map_new(L->g->arena, (int)(nn * 2 + 16));
    int *order = malloc((nn + 1) * sizeof *order);
    int *state = calloc(nn + 1, sizeof *state); /* 0 new, 1 on stack, 2 done */
    int *stack = malloc((nn + 1) * sizeof *stack), *pos = malloc((nn + 1) * sizeof *pos);
    if (!order || !state || !stack || !pos) goto fail;
    for (size_t i = 0; i < nn; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        if (is_constant(np)) {
            state[i] = 2;
            continue;
        }
        for (size_t k = 0; k < np->n_output; k++) {
            const char *o = np->output[k];
            if (!*o) continue;
            if (ck_map_get(L->names, o) || ck_map_get(producer, o)) {
                LERR(L, "node '%s' (%s): output '%s' is already defined by another node, an initializer or an input",
                     np->name ? np->name : "", np->op_type, o);
                continue;
            }
            ck_map_put(producer, o, (void *)(intptr_t)(i + 1));
        }
    }
    for (size_t i = 0; i < nn; i++)
        for (size_t k = 0; k < gp->node[i]->n_input; k++) {
            const char *in = gp->node[i]->input[k];
            if (*in && !ck_map_get(L->names, in) && !ck_map_get(producer, in))
                LERR(L, "node '%s' (%s): input %zu '%s' is not produced by any node, initializer or graph input",
                     gp->node[i]->name ? gp->node[i]->name : "", gp->node[i]->op_type, k, in);
        }
    if (L->errors) goto fail;
    int no = 0;
    for (size_t root = 0; root < nn; root++) {
        if (state[root]) continue;
        int sp = 0;
        stack[sp] = (int)root, pos[sp] = 0, sp++;
        state[root] = 1;
        while (sp) {
            int i = stack[sp - 1];
            const Onnx__NodeProto *np = gp->node[i];
            if ((size_t)pos[sp - 1] < np->n_input) {
                const char *in = np->input[pos[sp - 1]++];
                intptr_t p = *in ? (intptr_t)ck_map_get(producer, in) : 0;
                if (!p) continue;
                int j = (int)p - 1;
                if (state[j] == 1) {
                    LERR(L, "node '%s' (%s): the graph has a cycle through input '%s'", np->name ? np->name : "",
                         np->op_type, in);
                    goto fail;
                }
                if (state[j] == 0) {
                    state[j] = 1;
                    stack[sp] = j, pos[sp] = 0, sp++;
                }
            } else {
                state[i] = 2;
                order[no++] = i;
                sp--;
            }
        }
    }
    free(state), free(stack), free(pos);
    *count = no;
    return order;
fail:
    free(order), free(state), free(stack), free(pos);
    return NULL;
}

/* ---------------------------------------------------------------- nesting depth */

/* protobuf-c unpacks nested messages recursively with no depth limit: 30 KB of graph attributes
 * nested 3000 deep overflow the stack. depth_ok walks the wire format first, descending only into
 * fields the schema declares as messages, and refuses nesting deeper than protobuf's own default
 * limit. Whatever else is malformed is left to protobuf-c, which rejects it. Linear in the input;
 * its own recursion is bounded by the limit. */
#define CK_MAX_PROTO_DEPTH 100

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

static bool depth_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *p, const uint8_t *end, int depth) {
    if (depth > CK_MAX_PROTO_DEPTH) return false;
    while (p < end) {
        uint64_t tag, len;
        if (!read_varint(&p, end, &tag)) return true;
        switch (tag & 7) {
        case 0: if (!read_varint(&p, end, &len)) return true; break;
        case 1: if (end - p < 8) return true; p += 8; break;
        case 5: if (end - p < 4) return true; p += 4; break;
        case 2: {
            if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p)) return true;
            const ProtobufCFieldDescriptor *f =
                tag >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(tag >> 3)) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && !depth_ok(f->descriptor, p, p + len, depth + 1)) return false;
            p += len;
            break;
        }
        default: return true; /* groups and bad wire types: protobuf-c refuses them */
        }
    }
    return true;
}

/* ---------------------------------------------------------------- model */

/* The model's envelope: a graph, provenance, the node limit, no sparse initializers. */
static ck_status load_header(loader *L, const Onnx__ModelProto *m) {
    ck_graph *g = L->g;
    /* a zero-length or foreign protobuf parses as an empty ModelProto: reject it by content */
    if (!m->graph && !m->n_opset_import) {
        LERR(L, "not an ONNX model: it has no graph and no opset_import");
        return CK_ERR_MODEL;
    }
    if (!m->graph) {
        LERR(L, "the model has no graph");
        return CK_ERR_MODEL;
    }
    const Onnx__GraphProto *gp = m->graph;
    g->onnx_nodes = (int)gp->n_node;
    g->ir_version = m->has_ir_version ? m->ir_version : 0;
    g->name = ck_arena_strdup(g->arena, gp->name);
    g->producer_name = ck_arena_strdup(g->arena, m->producer_name);
    g->producer_version = ck_arena_strdup(g->arena, m->producer_version);
    if ((int64_t)gp->n_node > L->o->max_nodes) {
        LERR(L, "the graph has %zu nodes, more than the limit of %lld", gp->n_node, (long long)L->o->max_nodes);
        return CK_ERR_MODEL;
    }
    if (gp->n_sparse_initializer) {
        LERR(L, "sparse initializers are not supported");
        return CK_ERR_UNSUPPORTED;
    }
    return CK_OK;
}

/* Unsupported ops first, all at once (nothing else is worth reporting before that), then the
 * default domain's opset. */
static ck_status check_ops(loader *L, const Onnx__ModelProto *m) {
    const Onnx__GraphProto *gp = m->graph;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        ck_op op;
        const char *dom = np->domain ? np->domain : "";
        if (!np->op_type) {
            LERR(L, "node '%s' has no op_type", np->name ? np->name : "");
            continue;
        }
        bool known = is_default_domain(dom) && (strcmp(np->op_type, "Constant") == 0 ||
                                                (ck_op_from_name(np->op_type, &op) && !is_internal_op(np->op_type)));
        if (!known)
            LERR(L, "node '%s': op %s (domain '%s', opset %lld) is not supported", np->name ? np->name : "", np->op_type,
                 is_default_domain(dom) ? "" : dom, (long long)domain_opset(m, dom));
    }
    if (L->errors) return CK_ERR_UNSUPPORTED;

    int64_t opset = domain_opset(m, "");
    if (opset < 0) {
        LERR(L, "the model imports no version of the default ONNX domain (opset_import)");
        return CK_ERR_MODEL;
    }
    if (opset < CK_OPSET_MIN || opset > CK_OPSET_MAX) {
        LERR(L, "opset %lld of the default domain is not supported (ckptc supports %d to %d); re-export with opset_version=17",
             (long long)opset, CK_OPSET_MIN, CK_OPSET_MAX);
        return CK_ERR_UNSUPPORTED;
    }
    L->g->opset = opset;
    return CK_OK;
}

/* Initializers, then the graph inputs that are not initializers (every --dim must name one). */
static ck_status load_inputs(loader *L, const Onnx__GraphProto *gp) {
    ck_graph *g = L->g;
    L->names = ck_map_new(g->arena, (int)(gp->n_initializer + gp->n_input + gp->n_node * 2 + 16));
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        const char *name = t->name ? t->name : "";
        char what[600];
        snprintf(what, sizeof what, "initializer '%s'", name);
        if (!*name) {
            LERR(L, "initializer %zu has no name", i);
            continue;
        }
        if (ck_map_get(L->names, name)) {
            LERR(L, "%s is defined twice", what);
            continue;
        }
        ck_value *v = tensor_value(L, what, name, t, CK_ROLE_PARAM, false);
        if (v) v->initializer = true, ck_map_put(L->names, v->name, v);
        if (v) note_payload(L, t, v->name, (size_t)ck_value_numel(v) * ck_dtype_size(v->dtype));
    }
    ck_value **ins = ck_arena_alloc(g->arena, (gp->n_input + 1) * sizeof *ins);
    int n_ins = 0;
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name = gp->input[i]->name ? gp->input[i]->name : "";
        if (ck_map_get(L->names, name)) continue; /* an initializer listed as input (old exports) */
        ck_value *v = input_value(L, gp->input[i]);
        if (v) {
            ck_map_put(L->names, v->name, v);
            ins[n_ins++] = v;
        }
    }
    for (int k = 0; k < L->o->n_dims; k++)
        if (!L->dim_used[k]) LERR(L, "--dim %s: no graph input has a dimension named '%s'", L->o->dims[k].name, L->o->dims[k].name);
    if (L->errors) return CK_ERR_MODEL;
    ck_graph_set_inputs(g, n_ins, ins);
    return CK_OK;
}

/* Constants, then the other nodes in topological order, then the graph outputs. */
static ck_status load_nodes(loader *L, const Onnx__GraphProto *gp) {
    ck_graph *g = L->g;
    for (size_t i = 0; i < gp->n_node; i++)
        if (is_constant(gp->node[i])) load_constant(L, gp->node[i]);
    if (L->errors) return CK_ERR_MODEL;

    int n_order;
    int *order = topo_order(L, gp, &n_order);
    if (!order) return CK_ERR_MODEL;
    for (int i = 0; i < n_order; i++) {
        const Onnx__NodeProto *np = gp->node[order[i]];
        ck_op op;
        CK_ASSERT(ck_op_from_name(np->op_type, &op));
        if (!load_node(L, np, op)) break; /* its outputs are not defined: later nodes would read them */
    }
    free(order);
    if (L->errors) return CK_ERR_MODEL;

    ck_value **outs = ck_arena_alloc(g->arena, (gp->n_output + 1) * sizeof *outs);
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name ? gp->output[i]->name : "";
        outs[i] = ck_map_get(L->names, name);
        if (!outs[i]) LERR(L, "graph output '%s' is not produced by any node, initializer or input", name);
    }
    if (!gp->n_output) LERR(L, "the graph has no outputs");
    if (L->errors) return CK_ERR_MODEL;
    ck_graph_set_outputs(g, (int)gp->n_output, outs);
    return CK_OK;
}

/* ---------------------------------------------------------------- trainable initializers
 *
 * ONNX does not say which initializers are parameters: PyTorch exports its buffers (attention
 * masks, RoPE tables, BatchNorm's running statistics) as initializers too. A model may say it in
 * metadata_props: CK_TRAINABLE_KEY, a JSON array of initializer names (python/ckptc_export.py
 * writes it from named_parameters()). Then exactly those float initializers stay PARAMs and every
 * other becomes a CONST (folded where it feeds a foldable subgraph, never given a gradient).
 * Without it every float initializer stays a PARAM (the default rule; ckptc warns about it).
 * BatchNormalization's running statistics are BUFFERs either way: the step updates them. */

/* The entry's value, NULL when absent; a key given twice is an error. */
static const char *trainable_entry(loader *L, const Onnx__ModelProto *m) {
    const char *json = NULL;
    for (size_t i = 0; i < m->n_metadata_props; i++) {
        const Onnx__StringStringEntryProto *e = m->metadata_props[i];
        if (!e->key || strcmp(e->key, CK_TRAINABLE_KEY) != 0) continue;
        if (json) LERR(L, "metadata_props entry '%s' is given twice", CK_TRAINABLE_KEY);
        json = e->value ? e->value : "";
    }
    return json;
}

/* The float initializer the entry names, or NULL with the reason reported. */
static ck_value *listed_param(loader *L, const char *name) {
    ck_value *v = ck_map_get(L->names, name);
    if (!v || !v->initializer)
        LERR(L, "metadata_props entry '%s' names '%s', which is not an initializer of the graph", CK_TRAINABLE_KEY, name);
    else if (v->role == CK_ROLE_BUFFER)
        LERR(L, "metadata_props entry '%s' names '%s', a BatchNormalization running statistic (a buffer the step updates, never trained)",
             CK_TRAINABLE_KEY, name);
    else if (!ck_dtype_is_float(v->dtype))
        LERR(L, "metadata_props entry '%s' names '%s', an initializer of dtype %s: only float initializers are trained",
             CK_TRAINABLE_KEY, name, ck_dtype_name(v->dtype));
    else
        return v;
    return NULL;
}

static ck_status apply_trainable(loader *L, const Onnx__ModelProto *m) {
    const char *json = trainable_entry(L, m);
    if (!json || L->errors) return L->errors ? CK_ERR_MODEL : CK_OK;
    cJSON *a = cJSON_ParseWithOpts(json, NULL, true);
    if (!cJSON_IsArray(a)) {
        LERR(L, "metadata_props entry '%s' is not a JSON array of initializer names (e.g. [\"fc.weight\", \"fc.bias\"]): '%.80s%s'",
             CK_TRAINABLE_KEY, json, strlen(json) > 80 ? "..." : "");
        cJSON_Delete(a);
        return CK_ERR_MODEL;
    }
    ck_graph *g = L->g;
    bool *listed = calloc((size_t)g->next_value_id + 1, 1);
    if (!listed) {
        cJSON_Delete(a);
        LERR(L, "out of memory");
        return CK_ERR_NOMEM;
    }
    int k = 0;
    for (const cJSON *e = a->child; e; e = e->next, k++) {
        ck_value *v = NULL;
        if (!cJSON_IsString(e))
            LERR(L, "metadata_props entry '%s': element %d is not a string (expected an array of initializer names)", CK_TRAINABLE_KEY, k);
        else if ((v = listed_param(L, e->valuestring)))
            listed[v->id] = true;
    }
    cJSON_Delete(a);
    for (int i = 0; i < g->n_values && !L->errors; i++)
        if (g->values[i]->role == CK_ROLE_PARAM && !listed[g->values[i]->id]) g->values[i]->role = CK_ROLE_CONST;
    free(listed);
    g->trainable_declared = true;
    return L->errors ? CK_ERR_MODEL : CK_OK;
}

static ck_status load_model(loader *L, const Onnx__ModelProto *m) {
    ck_status st = load_header(L, m);
    if (!st) st = check_ops(L, m);
    if (!st) st = load_inputs(L, m->graph);
    if (!st) st = load_nodes(L, m->graph);
    if (st) return st;
    /* BatchNormalization's running statistics are step-updated state, not trainable params */
    ck_graph *g = L->g;
    for (int i = 0; i < g->n_nodes; i++) {
        ck_node *n = g->nodes[i];
        if (n->op != CK_OP_BATCH_NORM) continue;
        for (int k = 3; k < 5 && k < n->n_in; k++)
            if (n->in[k] && n->in[k]->role == CK_ROLE_PARAM) n->in[k]->role = CK_ROLE_BUFFER;
    }
    return apply_trainable(L, m);
}

static void free_proto(void *ctx) { onnx__model_proto__free_unpacked(ctx, NULL); }

/* ---------------------------------------------------------------- source payloads (--export-onnx)
 *
 * The wire walk (onnx_offsets.c) runs on the file's bytes before they go; its results live in
 * their own arena, which the graph then holds. The graph's ck_source lists the model (files[0]:
 * its absolute path, NULL for a model loaded from memory) and its external data files, and one
 * payload range per initializer. */
typedef struct walked {
    ck_arena *a;
    ck_payload *p;
    int n;
    const char *path, *dir; /* the model's absolute path and directory; NULL from memory */
    uint64_t size;
} walked;

static void free_walk_arena(void *ctx) { ck_arena_free(ctx); }

static void walk_payloads(const void *buf, size_t len, walked *w) {
    w->a = ck_arena_new();
    if (w->a && ck_onnx_payload_ranges(buf, len, w->a, &w->p, &w->n) != CK_OK) {
        ck_arena_free(w->a);
        w->a = NULL;
    }
}

/* The graph's ck_source, filled as the initializers load (note_payload, note_external). */
static void start_source(loader *L, const Onnx__ModelProto *m, walked *w) {
    ck_graph *g = L->g;
    if (!w->a) return;
    ck_graph_hold(g, NULL, 0, NULL, free_walk_arena, w->a);
    size_t n_init = m->graph ? m->graph->n_initializer : 0;
    ck_source *s = ck_arena_alloc(g->arena, sizeof *s);
    L->cap_files = 8;
    s->files = ck_arena_alloc(g->arena, sizeof *s->files * (size_t)L->cap_files);
    s->payloads = ck_arena_alloc(g->arena, sizeof *s->payloads * (n_init + 1));
    L->ranges = ck_map_new(g->arena, w->n + 16);
    CK_ASSERT(s && s->files && s->payloads && L->ranges);
    for (int i = 0; i < w->n; i++) ck_map_put(L->ranges, w->p[i].name, &w->p[i]);
    s->files[0] = (ck_source_file){.path = w->path ? ck_arena_strdup(g->arena, w->path) : NULL, .size = w->size};
    s->n_files = 1;
    L->abs_dir = w->dir;
    L->src = s;
    g->source = s;
}

/* The parse: size checks, the nesting depth, then protobuf-c, which copies every bytes field out
 * of buf (buf is not needed afterwards). NULL with the message in d on failure. */
static Onnx__ModelProto *unpack_model(const void *buf, size_t len, const ck_load_options *opts, ck_diag *d,
                                      ck_status *st, walked *w) {
    *st = CK_ERR_PARSE;
    if (len == 0) {
        ck_diag_add(d, "not an ONNX model: the file is empty");
        return NULL;
    }
    if (len > opts->max_file_bytes) {
        ck_diag_add(d, "the model is %zu bytes, more than the limit of %llu", len, (unsigned long long)opts->max_file_bytes);
        *st = CK_ERR_IO;
        return NULL;
    }
    if (!depth_ok(&onnx__model_proto__descriptor, buf, (const uint8_t *)buf + len, 0)) {
        ck_diag_add(d, "cannot parse the file as an ONNX ModelProto: messages are nested more than %d deep",
                    CK_MAX_PROTO_DEPTH);
        return NULL;
    }
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
    if (!m) ck_diag_add(d, "cannot parse the file as an ONNX ModelProto (truncated, corrupt or not ONNX)");
    else walk_payloads(buf, len, w);
    return m;
}

/* Converts, folds and verifies the parsed message. Initializer data may stay in m (raw_data
 * and friends): then the graph holds m and frees it with itself; otherwise m is freed here. */
static ck_status load_parsed(Onnx__ModelProto *m, const char *base_dir, const ck_load_options *opts, ck_graph **out,
                             ck_diag *d, walked *w) {
    loader L = {.d = d, .o = opts, .base_dir = base_dir};
    L.g = ck_graph_new();
    if (L.g) start_source(&L, m, w);
    else if (w->a) ck_arena_free(w->a);
    L.dim_used = calloc((size_t)opts->n_dims + 1, sizeof *L.dim_used);
    ck_status st = L.g && L.dim_used ? load_model(&L, m) : CK_ERR_NOMEM;
    if (st == CK_ERR_NOMEM) ck_diag_add(d, "out of memory");
    if (L.g && L.keep_proto) ck_graph_hold(L.g, NULL, 0, NULL, free_proto, m);
    else onnx__model_proto__free_unpacked(m, NULL);
    free(L.dim_used);
    if (st == CK_OK && L.errors) st = CK_ERR_MODEL;
    if (st == CK_OK) st = ck_frontend_fold(L.g, opts->fold_max_elems, d);
    if (st == CK_OK) st = ck_graph_verify(L.g, d);
    if (st != CK_OK) {
        ck_graph_free(L.g);
        return st;
    }
    *out = L.g;
    return CK_OK;
}

static ck_load_options with_defaults(const ck_load_options *o) {
    ck_load_options opts = o ? *o : (ck_load_options){0};
    if (!opts.max_file_bytes) opts.max_file_bytes = CK_DEFAULT_MAX_FILE;
    if (!opts.max_nodes) opts.max_nodes = CK_DEFAULT_MAX_NODES;
    if (!opts.fold_max_elems) opts.fold_max_elems = CK_DEFAULT_FOLD_ELEMS;
    return opts;
}

ck_status ck_frontend_load_buffer(const void *buf, size_t len, const char *base_dir, const ck_load_options *o,
                                  ck_graph **out, ck_diag *d) {
    ck_load_options opts = with_defaults(o);
    *out = NULL;
    ck_status st;
    walked w = {0};
    Onnx__ModelProto *m = unpack_model(buf, len, &opts, d, &st, &w);
    return m ? load_parsed(m, base_dir, &opts, out, d, &w) : st;
}

/* The file is mapped, not read into the heap: protobuf-c copies what it keeps, and the mapping
 * goes as soon as the message is parsed. */
ck_status ck_frontend_load(const char *path, const ck_load_options *o, ck_graph **out, ck_diag *d) {
    *out = NULL;
    ck_load_options opts = with_defaults(o);
    const char *why;
    uint64_t size;
    int fd = open_regular_fd(path, &size, &why);
    if (fd < 0) {
        ck_diag_add(d, "cannot %s '%s': %s", strcmp(why, "not a regular file") ? "open" : "read", path, why);
        return CK_ERR_IO;
    }
    if (size > opts.max_file_bytes) {
        ck_diag_add(d, "'%s' is %llu bytes, more than the limit of %llu", path, (unsigned long long)size,
                    (unsigned long long)opts.max_file_bytes);
        close(fd);
        return CK_ERR_IO;
    }
    size_t len = (size_t)size;
    void *buf = NULL;
    if (len && (buf = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
        ck_diag_add(d, "cannot read '%s': %s", path, strerror(errno));
        close(fd);
        return CK_ERR_IO;
    }
    close(fd);
    if (buf) madvise(buf, len, MADV_SEQUENTIAL);
    ck_status st;
    char *abs = realpath(path, NULL), *abs_dir = abs ? strdup(abs) : NULL;
    char *abs_slash = abs_dir ? strrchr(abs_dir, '/') : NULL;
    if (abs_slash) *abs_slash = 0;
    walked w = {.path = abs, .dir = abs_slash ? abs_dir : NULL, .size = size};
    Onnx__ModelProto *m = unpack_model(buf ? buf : "", len, &opts, d, &st, &w);
    if (buf) munmap(buf, len);
    if (m) {
        /* external data is resolved relative to the model's directory */
        char *dir = strdup(path);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        if (slash) *slash = 0;
        st = load_parsed(m, slash ? (dir[0] ? dir : "/") : ".", &opts, out, d, &w);
        free(dir);
    }
    free(abs), free(abs_dir);
    return st;
}
