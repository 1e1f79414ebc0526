/* fuzz_regress.c — replays the fuzzing corpus and regressions through the loader, no libFuzzer.
 *
 *   fuzz_regress DIR... [--dims DIR...]
 *
 * Every file of every DIR goes through ck_frontend_load_buffer with the options the fuzz harness
 * used (fuzz/fuzz_opts.h); files of the DIRs after --dims, and files named *.dims, start with
 * fuzz_load_dims' two-byte header. Any status is fine: what is checked is that the call returns
 * and keeps the contract (a graph exactly on success, a message on failure), and under
 * CK_SANITIZE that it does so without a sanitizer report. Then inputs too large or too odd to keep
 * as files are built here: a file over max_file_bytes, a graph over max_nodes, a node with 10^5
 * inputs, messages nested 10^5 deep, FIFOs where a model or its external data should be, and
 * external data offsets that overflow. An alarm turns a hang into a failure.
 */
#include "fuzz_opts.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

#define FAIL(...) (fprintf(stderr, "fuzz_regress: FAIL: " __VA_ARGS__), fputc('\n', stderr), failures++)

/* Checks the loader's contract; want (if not CK_OK) and needle (if set) pin the outcome. */
static void check(const char *what, ck_status st, ck_graph *g, ck_diag *d, ck_status want, const char *needle) {
    const char *msg = d->n ? d->msg[0] : "";
    if ((st == CK_OK) != (g != NULL) || (st != CK_OK && d->n == 0))
        FAIL("%s: status %s but graph %p and %d messages", what, ck_status_name(st), (void *)g, d->n);
    if (want != CK_OK && st != want) FAIL("%s: status %s, expected %s (%s)", what, ck_status_name(st), ck_status_name(want), msg);
    if (needle && !strstr(msg, needle)) FAIL("%s: message '%s' does not say '%s'", what, msg, needle);
    ck_graph_free(g);
    ck_diag_clear(d);
}

static void run_buffer(const char *what, const uint8_t *data, size_t size, bool dims) {
    ck_load_options o;
    ck_dim_binding b[CK_FUZZ_NAMES];
    ck_fuzz_options(&data, &size, dims, &o, b);
    ck_graph *g = NULL;
    ck_diag d = {0};
    ck_status st = ck_frontend_load_buffer(data, size, NULL, &o, &g, &d);
    check(what, st, g, &d, CK_OK, NULL);
}

static int run_dir(const char *dir, bool dims) {
    DIR *dp = opendir(dir);
    if (!dp) {
        FAIL("cannot open directory '%s'", dir);
        return 0;
    }
    int count = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || e->d_name[0] == '.' || strstr(e->d_name, ".md")) continue;
        FILE *f = fopen(path, "rb");
        uint8_t *buf = malloc((size_t)st.st_size + 1);
        if (!f || !buf || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) FAIL("cannot read '%s'", path);
        else run_buffer(path, buf, (size_t)st.st_size, dims || strstr(e->d_name, ".dims")), count++;
        if (f) fclose(f);
        free(buf);
    }
    closedir(dp);
    return count;
}

/* ---------------------------------------------------------------- a tiny protobuf writer */

typedef struct pb {
    uint8_t *p;
    size_t n, cap;
} pb;

static void pb_raw(pb *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void pb_varint(pb *b, uint64_t v) {
    do {
        uint8_t c = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
        pb_raw(b, &c, 1);
        v >>= 7;
    } while (v);
}

static void pb_int(pb *b, unsigned field, uint64_t v) { pb_varint(b, field << 3), pb_varint(b, v); }
static void pb_bytes(pb *b, unsigned field, const void *d, size_t n) {
    pb_varint(b, field << 3 | 2), pb_varint(b, n), pb_raw(b, d, n);
}
static void pb_str(pb *b, unsigned field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
/* appends m as a submessage and frees it */
static void pb_msg(pb *b, unsigned field, pb *m) { pb_bytes(b, field, m->p, m->n), free(m->p), *m = (pb){0}; }

/* ModelProto{ir_version 8, opset_import{version 17}, graph} */
static pb model_of(pb *graph) {
    pb m = {0}, op = {0};
    pb_int(&m, 1, 8);
    pb_int(&op, 2, 17);
    pb_msg(&m, 8, &op);
    pb_msg(&m, 7, graph);
    return m;
}

/* TensorProto float32 (1) named name with external data at location/offset/length */
static void pb_ext_tensor(pb *g, const char *name, const char *loc, const char *off, const char *len) {
    pb t = {0}, e = {0};
    pb_int(&t, 1, 1);
    pb_int(&t, 2, 1);
    pb_str(&t, 8, name);
    const char *kv[][2] = {{"location", loc}, {"offset", off}, {"length", len}};
    for (int i = 0; i < 3; i++) {
        if (!kv[i][1]) continue;
        pb_str(&e, 1, kv[i][0]), pb_str(&e, 2, kv[i][1]);
        pb_msg(&t, 13, &e);
    }
    pb_int(&t, 14, 1); /* EXTERNAL */
    pb_msg(g, 5, &t);
}

static void load_built(const char *what, pb *m, uint64_t max_file, ck_status want, const char *needle) {
    ck_load_options o = {.max_file_bytes = max_file, .max_nodes = 5000, .fold_max_elems = 1 << 16};
    ck_graph *g = NULL;
    ck_diag d = {0};
    ck_status st = ck_frontend_load_buffer(m->p, m->n, NULL, &o, &g, &d);
    check(what, st, g, &d, want, needle);
    free(m->p);
}

static void load_path(const char *what, const char *path, uint64_t max_file, ck_status want, const char *needle) {
    ck_load_options o = {.max_file_bytes = max_file};
    ck_graph *g = NULL;
    ck_diag d = {0};
    ck_status st = ck_frontend_load(path, &o, &g, &d);
    check(what, st, g, &d, want, needle);
}

static void write_file(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n) FAIL("cannot write '%s'", path);
    if (f) fclose(f);
}

static int built_checks(void) {
    int count = 0;
    /* a graph with more nodes than max_nodes */
    pb g = {0}, n = {0};
    for (int i = 0; i < 5001; i++) {
        pb_str(&n, 4, "Relu");
        pb_msg(&g, 1, &n);
    }
    pb m = model_of(&g);
    load_built("5001 nodes", &m, 1 << 20, CK_ERR_MODEL, "more than the limit");
    count++;

    /* one node with 10^5 inputs, all defined (an initializer x) */
    pb t = {0}, vi = {0};
    pb_int(&t, 1, 1), pb_int(&t, 2, 1), pb_str(&t, 8, "x"), pb_bytes(&t, 9, "\0\0\0\0", 4);
    pb_msg(&g, 5, &t);
    for (int i = 0; i < 100000; i++) pb_str(&n, 1, "x");
    pb_str(&n, 2, "y"), pb_str(&n, 4, "Concat");
    pb_msg(&g, 1, &n);
    pb_str(&vi, 1, "y");
    pb_msg(&g, 12, &vi);
    m = model_of(&g);
    load_built("10^5 inputs", &m, 1 << 20, CK_ERR_MODEL, "too many inputs");
    count++;

    /* GraphProto.node -> NodeProto.attribute -> AttributeProto.g, 10^5 times (protobuf-c
     * recursion: a stack overflow without the depth check). Only headers: their lengths are
     * computed inside out, then written outside in. */
    enum { LEVELS = 3 * 100000 };
    static uint64_t len[LEVELS + 1];
    static const unsigned field[3] = {6, 5, 1}; /* AttributeProto.g, NodeProto.attribute, GraphProto.node */
    pb tmp = {0};
    for (int i = 0; i < LEVELS; i++) {
        tmp.n = 0;
        pb_varint(&tmp, field[i % 3] << 3 | 2), pb_varint(&tmp, len[i]);
        len[i + 1] = len[i] + tmp.n;
    }
    pb graph = {0};
    for (int i = LEVELS - 1; i >= 0; i--) pb_varint(&graph, field[i % 3] << 3 | 2), pb_varint(&graph, len[i]);
    free(tmp.p);
    m = model_of(&graph);
    load_built("nesting 10^5 deep", &m, 64 << 20, CK_ERR_PARSE, "nested");
    count++;

    /* files: over the size limit, FIFOs, external data whose offset + length overflows */
    char dir[] = "/tmp/ck_fuzz_regress.XXXXXX", path[256], fifo[256], bin[256];
    if (!mkdtemp(dir)) {
        FAIL("mkdtemp");
        return count;
    }
    snprintf(path, sizeof path, "%s/big.onnx", dir);
    char *zeros = calloc(1, (1 << 20) + 1);
    write_file(path, zeros, (1 << 20) + 1);
    free(zeros);
    load_path("file over max_file_bytes", path, 1 << 20, CK_ERR_IO, "more than the limit");
    unlink(path);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    if (mkfifo(fifo, 0600) != 0) FAIL("mkfifo");
    load_path("a FIFO as the model", fifo, 0, CK_ERR_IO, "not a regular file");
    snprintf(bin, sizeof bin, "%s/w.bin", dir);
    write_file(bin, "\0\0\0\0\0\0\0\0", 8);
    static const struct { const char *loc, *off, *len, *needle; } ext[] = {
        {"fifo", NULL, NULL, "not a regular file"},
        {"w.bin", "18446744073709551615", "4", "too short"},
        {"w.bin", "18446744073709551616", "4", "not a number"},
        {"w.bin", " -1", "4", "not a number"},
        {"w.bin", "6", "4", "too short"},
        {"w.bin", "4", "18446744073709551615", "shape needs 4"},
        {"../w.bin", NULL, NULL, "escapes"},
    };
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
        pb_ext_tensor(&g, "w", ext[i].loc, ext[i].off, ext[i].len);
        pb_str(&vi, 1, "w");
        pb_msg(&g, 12, &vi);
        m = model_of(&g);
        snprintf(path, sizeof path, "%s/ext.onnx", dir);
        write_file(path, m.p, m.n);
        free(m.p);
        char what[128];
        snprintf(what, sizeof what, "external data %s offset %s length %s", ext[i].loc, ext[i].off, ext[i].len);
        load_path(what, path, 0, CK_ERR_MODEL, ext[i].needle);
        count++;
    }
    unlink(path), unlink(fifo), unlink(bin), rmdir(dir);
    return count + 2;
}

int main(int argc, char **argv) {
    alarm(600); /* a hang fails the test instead of stalling ctest */
    bool dims = false;
    int files = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dims") == 0) dims = true;
        else files += run_dir(argv[i], dims);
    }
    int built = built_checks();
    printf("fuzz_regress: %d files and %d built inputs, %d failures\n", files, built, failures);
    return failures ? 1 : 0;
}
