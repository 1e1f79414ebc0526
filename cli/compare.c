/* compare.c — `ckptc compare A.json B.json ... [--timeline FILE.svg]`: trainer reports side by
 * side, each column with its ratio to the first, and optionally their memory timelines in one
 * picture.
 *
 * The reports are JSON written by libckrt; they are read with cJSON (Debian libcjson-dev), the
 * only thing the CLI links that generated programs do not. A report is checked before anything
 * is printed: one JSON value and nothing after it, an object with a numeric planned_peak_bytes,
 * and every member the table or the picture reads of the type it needs. Anything else is one
 * `ckptc: error:` line naming the file (exit 2). Names (the policy, e.g. nodes:REGEX) keep every
 * character: \u escapes are decoded to UTF-8 and the columns are counted in characters.
 */
#include "compare.h"
#include "ckrt.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COL 22 /* characters per column */

typedef enum { T_NUM, T_STR, T_OBJ, T_NUMS } jtype; /* T_NUMS: an array of numbers */

/* The table's rows: numbers, ratios to the first report's. */
static const struct { const char *label, *k1, *k2; bool bytes; } rows[] = {
    {"planned peak (bytes)", "planned_peak_bytes", NULL, true},
    {"measured peak (bytes)", "measured_peak_bytes", NULL, true},
    {"  params", "breakdown", "params", true},
    {"  grads", "breakdown", "grads", true},
    {"  optimizer state", "breakdown", "optimizer_state", true},
    {"  saved activations", "breakdown", "saved_activations", true},
    {"  transient", "breakdown", "transient", true},
    {"  workspace", "breakdown", "workspace", true},
    {"host offload pool", "host_offload_peak_bytes", NULL, true},
    {"offloaded per step", "offload_bytes_per_step", NULL, true},
    {"forward FLOPs", "forward_flops", NULL, false},
    {"recompute FLOPs", "recompute_flops", NULL, false},
    {"backward FLOPs", "backward_flops", NULL, false},
    {"step time (ms, median)", "step_time_ms", NULL, false},
    /* data-parallel reports (docs/data-parallel.md): shown when a report has them */
    {"ranks (data parallel)", "data_parallel", "ranks", false},
    {"comm staging (bytes)", "data_parallel_plan", "staging_bytes", true},
    {"comm time (ms, median)", "data_parallel", "comm_time_ms", false},
};
#define N_ROWS (sizeof rows / sizeof rows[0])

/* The other members read (the column names, the final loss, the picture) and their types. */
static const struct { const char *k1, *k2; jtype type; } others[] = {
    {"policy", NULL, T_STR}, {"losses", NULL, T_NUMS}, {"timeline", NULL, T_OBJ},
    {"timeline", "bytes", T_NUMS}, {"timeline", "recompute_steps", T_NUMS}, {"timeline", "backward_step", T_NUM}};
#define N_OTHERS (sizeof others / sizeof others[0])

static const cJSON *member(const cJSON *o, const char *k1, const char *k2) {
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k1) : NULL;
    return k2 ? (cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, k2) : NULL) : v;
}

static double num(const cJSON *o, const char *k1, const char *k2) {
    const cJSON *v = member(o, k1, k2);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static bool has_type(const cJSON *v, jtype t) {
    const cJSON *e;
    switch (t) {
    case T_NUM: return cJSON_IsNumber(v);
    case T_STR: return cJSON_IsString(v);
    case T_OBJ: return cJSON_IsObject(v);
    case T_NUMS:
        if (!cJSON_IsArray(v)) return false;
        cJSON_ArrayForEach(e, v) if (!cJSON_IsNumber(e)) return false;
        return true;
    }
    return false;
}

/* The whole file, NUL-terminated; NULL with a message in err. */
static char *read_file(const char *path, size_t *len, char *err, size_t errn) {
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(err, errn, "cannot open '%s': %s", path, strerror(errno)), NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *t = realloc(buf, cap *= 2);
        if (!t) free(buf);
        buf = t;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf) return snprintf(err, errn, "'%s': out of memory", path), NULL;
    if (bad) return free(buf), snprintf(err, errn, "cannot read '%s'", path), NULL;
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Line and column (from 1) of byte at in buf. */
static void where(const char *buf, const char *at, int *line, int *col) {
    *line = 1, *col = 1;
    for (const char *p = buf; p < at; p++) *p == '\n' ? (*line += 1, *col = 1) : (*col += 1);
}

static const char *type_name(jtype t) {
    return t == T_NUM ? "a number" : t == T_STR ? "a string" : t == T_OBJ ? "an object" : "an array of numbers";
}

/* Where root has k1 (.k2), it is of type t (and k1 an object); false with a message in err. */
static bool member_ok(const cJSON *root, const char *k1, const char *k2, jtype t, const char *path, char *err, size_t errn) {
    const cJSON *parent = member(root, k1, NULL), *v = member(root, k1, k2);
    if (k2 && parent && !cJSON_IsObject(parent))
        return snprintf(err, errn, "'%s': \"%s\" is not %s", path, k1, type_name(T_OBJ)), false;
    if (v && !has_type(v, t))
        return snprintf(err, errn, "'%s': \"%s%s%s\" is not %s", path, k1, k2 ? "." : "", k2 ? k2 : "", type_name(t)), false;
    return true;
}

/* One report, checked; NULL with a message naming the file in err. */
static cJSON *load(const char *path, char *err, size_t errn) {
    size_t n = 0;
    char *buf = read_file(path, &n, err, errn);
    if (!buf) return NULL;
    const char *end = NULL;
    int line, col;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, n, &end, false);
    if (!root) {
        where(buf, end ? end : buf + n, &line, &col);
        snprintf(err, errn, "'%s': not valid JSON at line %d, column %d", path, line, col);
        return free(buf), NULL;
    }
    while (end < buf + n && (*end == ' ' || *end == '\n' || *end == '\t' || *end == '\r')) end++;
    if (end < buf + n) {
        where(buf, end, &line, &col);
        snprintf(err, errn, "'%s': unexpected text after the JSON value at line %d, column %d", path, line, col);
        return free(buf), cJSON_Delete(root), NULL;
    }
    free(buf);
    if (!cJSON_IsObject(root) || !member(root, "planned_peak_bytes", NULL)) {
        snprintf(err, errn, "'%s': not a trainer report (no planned_peak_bytes)", path);
        return cJSON_Delete(root), NULL;
    }
    for (size_t k = 0; k < N_ROWS + N_OTHERS; k++) {
        bool row = k < N_ROWS;
        const char *k1 = row ? rows[k].k1 : others[k - N_ROWS].k1, *k2 = row ? rows[k].k2 : others[k - N_ROWS].k2;
        if (!member_ok(root, k1, k2, row ? T_NUM : others[k - N_ROWS].type, path, err, errn)) return cJSON_Delete(root), NULL;
    }
    return root;
}

/* s right-aligned in COL characters (UTF-8: bytes 10xxxxxx do not count), cut to COL; control
 * characters shown as \n, \r, \t or \xHH rather than moving the cursor. */
static void name_cell(const char *s) {
    char out[8 * COL + 1];
    size_t n = 0;
    int chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p & 0xc0) == 0x80) { /* the rest of a character already counted */
            if (n + 1 < sizeof out) out[n++] = (char)*p;
            continue;
        }
        char esc[8] = {(char)*p, 0};
        if (*p < 0x20) snprintf(esc, sizeof esc, *p == '\n' ? "\\n" : *p == '\r' ? "\\r" : *p == '\t' ? "\\t" : "\\x%02x", *p);
        size_t k = strlen(esc);
        if (chars + (int)k > COL || n + k >= sizeof out) break;
        memcpy(out + n, esc, k);
        n += k, chars += (int)k;
    }
    out[n] = 0;
    printf(" %*s%s", COL - chars, "", out);
}

static void cell(double v, double base, bool bytes) {
    char b[40];
    if (isnan(v)) {
        printf(" %22s", "-");
        return;
    }
    if (bytes) snprintf(b, sizeof b, "%.0f", v);
    else snprintf(b, sizeof b, "%.4g", v);
    if (!isnan(base) && base != 0) {
        char r[64];
        snprintf(r, sizeof r, "%s (%.2fx)", b, v / base);
        printf(" %22s", r);
    } else {
        printf(" %22s", b);
    }
}

static const char *policy_or(const cJSON *r, const char *path) {
    const cJSON *pol = member(r, "policy", NULL);
    return cJSON_IsString(pol) ? pol->valuestring : path;
}

static void print_table(int n, cJSON **r, char **paths) {
    printf("%-24s", "");
    for (int i = 0; i < n; i++) name_cell(policy_or(r[i], paths[i]));
    printf("\n");
    for (size_t k = 0; k < N_ROWS; k++) {
        bool any = strcmp(rows[k].k1, "data_parallel") && strcmp(rows[k].k1, "data_parallel_plan");
        for (int i = 0; i < n && !any; i++) any = !isnan(num(r[i], rows[k].k1, rows[k].k2));
        if (!any) continue;
        printf("%-24s", rows[k].label);
        double base = num(r[0], rows[k].k1, rows[k].k2);
        for (int i = 0; i < n; i++) cell(num(r[i], rows[k].k1, rows[k].k2), i ? base : NAN, rows[k].bytes);
        printf("\n");
    }
    printf("%-24s", "final loss");
    for (int i = 0; i < n; i++) {
        const cJSON *l = member(r[i], "losses", NULL);
        int len = cJSON_GetArraySize(l);
        cell(len ? cJSON_GetArrayItem(l, len - 1)->valuedouble : NAN, NAN, false);
    }
    printf("\n%-24s", "");
    for (int i = 0; i < n; i++) name_cell(paths[i]);
    printf("\n");
}

/* A checked array of numbers (T_NUMS, or NULL: empty) as int64_t / int, in a new buffer. */
static int64_t *to_i64s(const cJSON *arr) {
    int64_t *out = malloc(sizeof *out * (size_t)(cJSON_GetArraySize(arr) + 1)), *o = out;
    const cJSON *e;
    if (out) cJSON_ArrayForEach(e, arr) *o++ = (int64_t)e->valuedouble;
    return out;
}

static int *to_ints(const cJSON *arr) {
    int *out = malloc(sizeof *out * (size_t)(cJSON_GetArraySize(arr) + 1)), *o = out;
    const cJSON *e;
    if (out) cJSON_ArrayForEach(e, arr) *o++ = (int)e->valuedouble;
    return out;
}

static int write_timeline(int n, cJSON **r, char **paths, const char *svg) {
    ckrt_curve *cv = calloc((size_t)n, sizeof *cv);
    int64_t **bytes = calloc((size_t)n, sizeof *bytes);
    int **marks = calloc((size_t)n, sizeof *marks);
    int nc = 0, rc = 0;
    for (int i = 0; cv && bytes && marks && i < n; i++) {
        const cJSON *t = member(r[i], "timeline", NULL), *b = member(t, "bytes", NULL), *rs = member(t, "recompute_steps", NULL);
        if (!b) {
            fprintf(stderr, "ckptc: warning: '%s' has no timeline; left out of the picture\n", paths[i]);
            continue;
        }
        bytes[nc] = to_i64s(b), marks[nc] = to_ints(rs);
        if (!bytes[nc] || !marks[nc]) break;
        cv[nc] = (ckrt_curve){policy_or(r[i], paths[i]), cJSON_GetArraySize(b), bytes[nc], (int)num(t, "backward_step", NULL),
                              cJSON_GetArraySize(rs), marks[nc]};
        nc++;
    }
    ckrt_ctx c = {0};
    if (nc && ckrt_timeline_svg(&c, svg, nc, cv)) {
        fprintf(stderr, "ckptc: error: %s\n", c.msg);
        rc = 2;
    } else if (nc) {
        printf("timeline: %s\n", svg);
    }
    for (int i = 0; bytes && marks && i < n; i++) free(bytes[i]), free(marks[i]);
    free(cv), free(bytes), free(marks);
    return rc;
}

int ck_compare(int n, char **paths, const char *timeline_svg) {
    cJSON **r = calloc((size_t)n, sizeof *r);
    if (!r) return 1;
    char err[1200];
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        if (!(r[i] = load(paths[i], err, sizeof err))) {
            fprintf(stderr, "ckptc: error: %s\n", err);
            rc = 2;
        }
    if (!rc) print_table(n, r, paths);
    if (!rc && timeline_svg) rc = write_timeline(n, r, paths, timeline_svg);
    for (int i = 0; i < n; i++) cJSON_Delete(r[i]);
    free(r);
    return rc;
}
