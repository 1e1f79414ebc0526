/* main_export.c — the trained weights back out: --export-onnx FILE (the source model with its
 * initializers' payloads replaced by the trained values) and --export-safetensors FILE.
 *
 * The trainer has no ONNX parser, and needs none: ckptc recorded, at compile time, where each
 * state tensor's payload lies in the source model (ckrt_program.source: the files, their sizes and
 * checksums, one byte range per state entry; frontend/onnx_offsets.c). A float32 payload of the
 * same element count has the same length, so the export is a copy of the source file with those
 * ranges overwritten: same graph, same names, same everything else, byte for byte. External data
 * files are copied next to FILE under the same relative locations (their state tensors patched
 * likewise), so FILE loads from its own directory; a destination that is one of the source's own
 * files is refused. The source must be the file ckptc compiled (size and checksum, checked before
 * anything is written and again while copying); --source-model PATH names a moved copy.
 *
 * safetensors (https://github.com/huggingface/safetensors, format described in its README): an
 * 8-byte little-endian header length N, N bytes of JSON {NAME: {"dtype", "shape",
 * "data_offsets": [begin, end]}, "__metadata__": {...}} padded with spaces so the data starts at a
 * multiple of 8, then the tensors' raw little-endian bytes, contiguous, offsets relative to the
 * data's start. Keys are the initializer names (PyTorch's state_dict names), sorted.
 *
 * Every file is written as FILE.tmp, flushed, fsync'ed and renamed (the directory fsync'ed): a
 * failure or a crash never leaves half a file under FILE. External data files are written before
 * the model that names them. Data parallel: rank 0 writes (main.c).
 */
#include "main.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_N 4200
#define COPY_CHUNK ((size_t)1 << 20) /* a multiple of 8: the checksum of the pieces is the file's */

/* ---------------------------------------------------------------- paths */

/* DIR of path ("." when it has no slash) into dir. */
static void dir_of(const char *path, char *dir, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, n, ".");
    else if (slash == path) snprintf(dir, n, "/");
    else snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

/* k == 0: file; else the external data file k (its location) in file's directory. Paths longer
 * than PATH_N are refused, never cut. */
static int file_k(run *r, const char *file, int k, char *out) {
    char dir[PATH_N];
    dir_of(file, dir, sizeof dir);
    int n = k ? snprintf(out, PATH_N, "%s/%s", dir, r->p->source->files[k].path) : snprintf(out, PATH_N, "%s", file);
    if (n < 0 || n >= PATH_N) return ckrt_fail(&r->c, CKRT_ERR_USAGE, "--export-onnx: the path of '%s' is too long", file);
    return CKRT_OK;
}

/* Source file k: the model (files[0], or --source-model), or an external data file next to it. */
static int source_path(run *r, int k, char *out) {
    return file_k(r, r->source_model ? r->source_model : r->p->source->files[0].path, k, out);
}

/* Where file k of the export goes: FILE, or its external data under FILE's directory. */
static int dest_path(run *r, int k, char *out) { return file_k(r, r->export_onnx, k, out); }

static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* FILE's directory exists and takes files; FILE itself is not a directory. */
static int check_dest(run *r, const char *flag, const char *path) {
    char dir[PATH_N];
    struct stat st;
    dir_of(path, dir, sizeof dir);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return ckrt_fail(&r->c, CKRT_ERR_USAGE, "%s '%s': the directory '%s' does not exist", flag, path, dir);
    if (access(dir, W_OK) != 0)
        return ckrt_fail(&r->c, CKRT_ERR_USAGE, "%s '%s': cannot write in '%s': %s", flag, path, dir, strerror(errno));
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return ckrt_fail(&r->c, CKRT_ERR_USAGE, "%s '%s' is a directory", flag, path);
    return CKRT_OK;
}

/* ---------------------------------------------------------------- checks before training */

/* Source file k is the one ckptc compiled: same size and checksum. */
static int check_source_file(run *r, int k) {
    const ckrt_model_file *f = &r->p->source->files[k];
    char path[PATH_N], dest[PATH_N];
    CKRT_TRY(source_path(r, k, path));
    CKRT_TRY(dest_path(r, k, dest));
    uint64_t size = 0, sum = 0;
    const char *what = k ? "the source model's external data" : "the source model";
    if (!ckrt_checksum_file(path, &size, &sum))
        return ckrt_fail(&r->c, CKRT_ERR_USAGE, "--export-onnx: cannot read %s '%s': %s (give the model's path with --source-model PATH)",
                         what, path, strerror(errno));
    if (size != f->size || sum != f->checksum)
        return ckrt_fail(&r->c, CKRT_ERR_USAGE, "--export-onnx: %s '%s' changed since ckptc compiled this program (%llu bytes, "
                         "checksum %016llx; compiled from %llu bytes, %016llx); give the original with --source-model PATH",
                         what, path, (unsigned long long)size, (unsigned long long)sum, (unsigned long long)f->size,
                         (unsigned long long)f->checksum);
    if (same_file(path, dest))
        return ckrt_fail(&r->c, CKRT_ERR_USAGE, "--export-onnx '%s': '%s' would replace %s itself; export into another directory",
                         r->export_onnx, dest, what);
    return CKRT_OK;
}

int ckrt_run_check_export(run *r) {
    const ckrt_program *p = r->p;
    if (r->source_model && !r->export_onnx) return ckrt_fail(&r->c, CKRT_ERR_USAGE, "--source-model: only with --export-onnx FILE");
    if (r->export_st) CKRT_TRY(check_dest(r, "--export-safetensors", r->export_st));
    if (!r->export_onnx) return CKRT_OK;
    if (!p->source)
        return ckrt_fail(&r->c, CKRT_ERR_USAGE, "--export-onnx: ckptc recorded no source model for this program (compiled from "
                         "memory, or the model file could not be read again); recompile it from the .onnx file");
    for (int i = 0; i < p->n_state; i++)
        if (p->source->ranges[i].file < 0)
            return ckrt_fail(&r->c, CKRT_ERR_USAGE, "--export-onnx: initializer '%s' is not stored as one byte range in the source "
                             "model (float_data unpacked or split); re-save the model with raw_data (onnx.save)", p->state[i].name);
    CKRT_TRY(check_dest(r, "--export-onnx", r->export_onnx));
    for (int k = 0; k < p->source->n_files; k++) CKRT_TRY(check_source_file(r, k));
    for (int k = 1; k < p->source->n_files; k++) /* one data file under two locations ("w.bin", "./w.bin") */
        for (int j = 1; j < k; j++) {
            char a[PATH_N], b[PATH_N];
            CKRT_TRY(source_path(r, j, a));
            CKRT_TRY(source_path(r, k, b));
            if (same_file(a, b))
                return ckrt_fail(&r->c, CKRT_ERR_USAGE, "--export-onnx: the source model names one external data file as '%s' and "
                                 "'%s'; give every tensor the same location", p->source->files[j].path, p->source->files[k].path);
        }
    return CKRT_OK;
}

/* ---------------------------------------------------------------- atomic files */

static int fsync_dir_of(const char *path) {
    char dir[PATH_N];
    dir_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Flushes, fsyncs and closes f (tmp), then renames it to path; on any failure tmp is removed. */
static int commit(ckrt_ctx *c, FILE *f, int rc, const char *tmp, const char *path) {
    if (!rc && (fflush(f) != 0 || fsync(fileno(f)) != 0)) rc = ckrt_fail(c, CKRT_ERR_USAGE, "cannot write '%s': %s", tmp, strerror(errno));
    if (fclose(f) != 0 && !rc) rc = ckrt_fail(c, CKRT_ERR_USAGE, "cannot write '%s': %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) != 0) rc = ckrt_fail(c, CKRT_ERR_USAGE, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (rc) {
        remove(tmp);
        return rc;
    }
    fsync_dir_of(path);
    return CKRT_OK;
}

static FILE *open_tmp(ckrt_ctx *c, const char *path, char *tmp, size_t n, int *rc) {
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    *rc = f ? CKRT_OK : ckrt_fail(c, CKRT_ERR_USAGE, "cannot write '%s': %s", tmp, strerror(errno));
    return f;
}

/* Arena bytes of state entry i written to f at its current position. */
static int write_state_bytes(run *r, int i, FILE *f, const char *path) {
    const ckrt_state *s = &r->p->state[i];
    int64_t bytes = ckrt_numel(s->rank, s->dims) * (int64_t)ckrt_dtype_size(s->dtype);
    void *buf;
    CKRT_TRY(ckrt_arena_fetch(&r->c, s->offset, bytes, &buf));
    int rc = fwrite(buf, 1, (size_t)bytes, f) == (size_t)bytes ? CKRT_OK
                                                                 : ckrt_fail(&r->c, CKRT_ERR_USAGE, "cannot write '%s': %s", path, strerror(errno));
    ckrt_arena_release(&r->c, buf, bytes);
    return rc;
}

/* ---------------------------------------------------------------- --export-onnx */

/* The source file src copied to f, checked against the size and checksum ckptc recorded. */
static int copy_source(run *r, int k, const char *src, FILE *f, const char *tmp) {
    const ckrt_model_file *sf = &r->p->source->files[k];
    FILE *in = fopen(src, "rb");
    unsigned char *buf = malloc(COPY_CHUNK);
    int rc = in && buf ? CKRT_OK : ckrt_fail(&r->c, CKRT_ERR_USAGE, "--export-onnx: cannot read '%s': %s", src, strerror(errno));
    uint64_t sum = CKRT_CHECKSUM_INIT, size = 0;
    size_t n;
    while (!rc && (n = fread(buf, 1, COPY_CHUNK, in)) > 0) {
        sum = ckrt_checksum_update(sum, buf, n);
        size += n;
        if (fwrite(buf, 1, n, f) != n) rc = ckrt_fail(&r->c, CKRT_ERR_USAGE, "cannot write '%s': %s", tmp, strerror(errno));
    }
    if (!rc && ferror(in)) rc = ckrt_fail(&r->c, CKRT_ERR_USAGE, "--export-onnx: cannot read '%s'", src);
    if (!rc && (size != sf->size || sum != sf->checksum))
        rc = ckrt_fail(&r->c, CKRT_ERR_USAGE, "--export-onnx: '%s' changed while it was being copied; nothing was exported", src);
    if (in) fclose(in);
    free(buf);
    return rc;
}

/* File k of the export: the source copied, then every state tensor stored in it overwritten. */
static int export_file(run *r, int k) {
    const ckrt_program *p = r->p;
    char src[PATH_N], dest[PATH_N], tmp[PATH_N + 8];
    CKRT_TRY(source_path(r, k, src));
    CKRT_TRY(dest_path(r, k, dest));
    if (k) { /* a location "sub/w.bin": its directories under FILE's */
        for (char *s = strchr(dest + strlen(dest) - strlen(p->source->files[k].path), '/'); s; s = strchr(s + 1, '/')) {
            *s = 0;
            int ok = mkdir(dest, 0777) == 0 || errno == EEXIST;
            *s = '/';
            if (!ok) return ckrt_fail(&r->c, CKRT_ERR_USAGE, "--export-onnx: cannot create the directory of '%s': %s", dest, strerror(errno));
        }
    }
    int rc;
    FILE *f = open_tmp(&r->c, dest, tmp, sizeof tmp, &rc);
    if (!f) return rc;
    rc = copy_source(r, k, src, f, tmp);
    for (int i = 0; !rc && i < p->n_state; i++) {
        const ckrt_model_range *q = &p->source->ranges[i];
        if (q->file != k) continue;
        if (fseek(f, (long)q->offset, SEEK_SET) != 0) rc = ckrt_fail(&r->c, CKRT_ERR_USAGE, "cannot write '%s': %s", tmp, strerror(errno));
        else rc = write_state_bytes(r, i, f, tmp);
    }
    return commit(&r->c, f, rc, tmp, dest);
}

static int export_onnx(run *r) {
    const ckrt_model_source *s = r->p->source;
    for (int k = 1; k < s->n_files; k++) CKRT_TRY(export_file(r, k)); /* the data before the model that names it */
    return export_file(r, 0);
}

/* ---------------------------------------------------------------- --export-safetensors */

static const char *st_dtype(ckrt_dtype t) {
    switch (t) {
    case CKRT_F32: return "F32";
    case CKRT_F64: return "F64";
    case CKRT_F16: return "F16";
    case CKRT_I64: return "I64";
    case CKRT_I32: return "I32";
    case CKRT_I16: return "I16";
    case CKRT_I8: return "I8";
    case CKRT_U8: return "U8";
    case CKRT_BOOL: return "BOOL";
    default: return "?";
    }
}

static const ckrt_state *sort_states;
static int by_name(const void *a, const void *b) {
    return strcmp(sort_states[*(const int *)a].name, sort_states[*(const int *)b].name);
}

/* The JSON header for the state entries in order (malloc'ed, *n bytes, padded to a multiple of 8). */
static char *st_header(const ckrt_program *p, const int *order, size_t *n) {
    char *text = NULL;
    size_t len = 0;
    FILE *h = open_memstream(&text, &len);
    if (!h) return NULL;
    fputs("{\"__metadata__\":{\"format\":\"pt\",\"producer\":", h);
    ckrt_json_str(h, p->name);
    fputs("}", h);
    int64_t at = 0;
    for (int j = 0; j < p->n_state; j++) {
        const ckrt_state *s = &p->state[order[j]];
        int64_t bytes = ckrt_numel(s->rank, s->dims) * (int64_t)ckrt_dtype_size(s->dtype);
        ckrt_json_key(h, ",", s->name);
        fprintf(h, "{\"dtype\":\"%s\",\"shape\":", st_dtype(s->dtype));
        ckrt_json_i64s(h, s->rank, s->dims, ",");
        fprintf(h, ",\"data_offsets\":[%lld,%lld]}", (long long)at, (long long)(at + bytes));
        at += bytes;
    }
    fputs("}", h);
    while (ftell(h) % 8) fputc(' ', h);
    if (fclose(h) != 0) {
        free(text);
        return NULL;
    }
    *n = len;
    return text;
}

static int export_safetensors(run *r) {
    const ckrt_program *p = r->p;
    int *order = malloc(sizeof *order * (size_t)(p->n_state + 1));
    if (!order) return ckrt_fail(&r->c, CKRT_ERR_NOMEM, "--export-safetensors: out of memory");
    for (int i = 0; i < p->n_state; i++) order[i] = i;
    sort_states = p->state;
    qsort(order, (size_t)p->n_state, sizeof *order, by_name);
    size_t n = 0;
    char *header = st_header(p, order, &n);
    char tmp[PATH_N + 8];
    int rc = header ? CKRT_OK : ckrt_fail(&r->c, CKRT_ERR_NOMEM, "--export-safetensors: out of memory");
    FILE *f = rc ? NULL : open_tmp(&r->c, r->export_st, tmp, sizeof tmp, &rc);
    if (f) {
        unsigned char len8[8];
        for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)n >> (8 * b)); /* little-endian */
        if (fwrite(len8, 1, 8, f) != 8 || fwrite(header, 1, n, f) != n)
            rc = ckrt_fail(&r->c, CKRT_ERR_USAGE, "cannot write '%s': %s", tmp, strerror(errno));
        for (int j = 0; !rc && j < p->n_state; j++) rc = write_state_bytes(r, order[j], f, tmp);
        rc = commit(&r->c, f, rc, tmp, r->export_st);
    }
    free(header);
    free(order);
    return rc;
}

int ckrt_run_export(run *r) {
    if (r->export_onnx) CKRT_TRY(export_onnx(r));
    if (r->export_st) CKRT_TRY(export_safetensors(r));
    return CKRT_OK;
}
