/* compare.c — `ckptc compare A.json B.json ... [--timeline FILE.svg]`: trainer reports side by
 * side, each column with its ratio to the first, and optionally their memory timelines in one
 * picture.
 *
 * The reports are JSON written by libckrt; a small recursive-descent reader (objects, arrays,
 * strings, numbers, true/false/null) is all this needs, with depth and size limits so a hostile
 * file gets an error, not a crash.
 */
#include "compare.h"
#include "ckrt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jkind;

typedef struct jval {
    jkind kind;
    double num;
    char *str;
    int n;
    struct jval *items;  /* array items or object values */
    char **keys;         /* object keys */
} jval;

typedef struct jparser {
    const char *p, *end;
    int depth;
    const char *err;
} jparser;

static void jfree(jval *v) {
    free(v->str);
    for (int i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

static void ws(jparser *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')) j->p++;
}

static bool parse(jparser *j, jval *v);

static char *parse_str(jparser *j) {
    if (j->p >= j->end || *j->p != '"') return j->err = "expected a string", NULL;
    j->p++;
    size_t cap = 16, n = 0;
    char *s = malloc(cap);
    while (s && j->p < j->end && *j->p != '"') {
        char ch = *j->p++;
        if (ch == '\\' && j->p < j->end) {
            char e = *j->p++;
            ch = e == 'n' ? '\n' : e == 't' ? '\t' : e;
            if (e == 'u') { /* \uXXXX: keep ASCII, replace the rest */
                unsigned code = 0;
                for (int k = 0; k < 4 && j->p < j->end; k++, j->p++)
                    code = code * 16 + (unsigned)(*j->p <= '9' ? *j->p - '0' : (*j->p | 32) - 'a' + 10);
                ch = code < 128 ? (char)code : '?';
            }
        }
        if (n + 2 > cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) break;
            s = t;
        }
        s[n++] = ch;
    }
    if (!s || j->p >= j->end) {
        free(s);
        return j->err = "unterminated string", NULL;
    }
    j->p++;
    s[n] = 0;
    return s;
}

static bool parse_list(jparser *j, jval *v, bool obj) {
    j->p++;
    v->kind = obj ? J_OBJ : J_ARR;
    int cap = 0;
    ws(j);
    if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
        j->p++;
        return true;
    }
    for (;;) {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 8;
            jval *it = realloc(v->items, sizeof *it * (size_t)cap);
            char **ks = obj ? realloc(v->keys, sizeof *ks * (size_t)cap) : NULL;
            if (!it || (obj && !ks)) return j->err = "out of memory", false;
            v->items = it;
            if (obj) v->keys = ks;
        }
        ws(j);
        if (obj) {
            char *k = parse_str(j);
            if (!k) return false;
            v->keys[v->n] = k;
            ws(j);
            if (j->p >= j->end || *j->p != ':') {
                free(k);
                return j->err = "expected ':'", false;
            }
            j->p++;
        }
        memset(&v->items[v->n], 0, sizeof v->items[v->n]);
        if (!parse(j, &v->items[v->n])) {
            if (obj) free(v->keys[v->n]);
            jfree(&v->items[v->n]);
            return false;
        }
        v->n++;
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
            j->p++;
            return true;
        }
        return j->err = "expected ',' or a closing bracket", false;
    }
}

static bool parse(jparser *j, jval *v) {
    memset(v, 0, sizeof *v);
    if (++j->depth > 64) return j->err = "nested too deeply", false;
    ws(j);
    bool ok = true;
    if (j->p >= j->end) j->err = "unexpected end", ok = false;
    else if (*j->p == '{' || *j->p == '[') ok = parse_list(j, v, *j->p == '{');
    else if (*j->p == '"') ok = (v->kind = J_STR, (v->str = parse_str(j)) != NULL);
    else if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "false", 5)) {
        v->kind = J_BOOL, v->num = *j->p == 't';
        j->p += *j->p == 't' ? 4 : 5;
    } else if (!strncmp(j->p, "null", 4)) {
        j->p += 4;
    } else {
        char *e;
        v->num = strtod(j->p, &e);
        if (e == j->p) j->err = "unexpected character", ok = false;
        v->kind = J_NUM;
        j->p = e;
    }
    j->depth--;
    return ok;
}

static const jval *get(const jval *o, const char *key) {
    if (!o || o->kind != J_OBJ) return NULL;
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key)) return &o->items[i];
    return NULL;
}

static double num(const jval *o, const char *k1, const char *k2) {
    const jval *v = get(o, k1);
    if (k2) v = get(v, k2);
    return v && v->kind == J_NUM ? v->num : NAN;
}

static bool load(const char *path, jval *out, char *err, size_t errn) {
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(err, errn, "cannot open '%s': %s", path, strerror(errno)), false;
    char *buf = malloc(64u << 20);
    size_t n = buf ? fread(buf, 1, 64u << 20, f) : 0;
    fclose(f);
    if (!buf) return snprintf(err, errn, "out of memory"), false;
    jparser j = {buf, buf + n, 0, NULL};
    bool ok = parse(&j, out);
    if (ok && (out->kind != J_OBJ || !get(out, "planned_peak_bytes"))) {
        ok = false;
        j.err = "not a trainer report (no planned_peak_bytes)";
        jfree(out);
    }
    if (!ok) snprintf(err, errn, "'%s': %s", path, j.err ? j.err : "invalid JSON");
    free(buf);
    return ok;
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

int ck_compare(int n, char **paths, const char *timeline_svg) {
    jval *r = calloc((size_t)n, sizeof *r);
    if (!r) return 1;
    char err[1200];
    for (int i = 0; i < n; i++)
        if (!load(paths[i], &r[i], err, sizeof err)) {
            fprintf(stderr, "ckptc: error: %s\n", err);
            for (int k = 0; k < i; k++) jfree(&r[k]);
            free(r);
            return 2;
        }
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
    printf("%-24s", "");
    for (int i = 0; i < n; i++) {
        const jval *pol = get(&r[i], "policy");
        const char *nm = pol && pol->kind == J_STR ? pol->str : paths[i];
        printf(" %22.22s", nm);
    }
    printf("\n");
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        bool any = strcmp(rows[k].k1, "data_parallel") && strcmp(rows[k].k1, "data_parallel_plan");
        for (int i = 0; i < n && !any; i++) any = !isnan(num(&r[i], rows[k].k1, rows[k].k2));
        if (!any) continue;
        printf("%-24s", rows[k].label);
        double base = num(&r[0], rows[k].k1, rows[k].k2);
        for (int i = 0; i < n; i++) cell(num(&r[i], rows[k].k1, rows[k].k2), i ? base : NAN, rows[k].bytes);
        printf("\n");
    }
    printf("%-24s", "final loss");
    for (int i = 0; i < n; i++) {
        const jval *l = get(&r[i], "losses");
        cell(l && l->kind == J_ARR && l->n ? l->items[l->n - 1].num : NAN, NAN, false);
    }
    printf("\n%-24s", "");
    for (int i = 0; i < n; i++) printf(" %22.22s", paths[i]);
    printf("\n");
    int rc = 0;
    if (timeline_svg) {
        ckrt_curve *cv = calloc((size_t)n, sizeof *cv);
        int64_t **bytes = calloc((size_t)n, sizeof *bytes);
        int **marks = calloc((size_t)n, sizeof *marks);
        int nc = 0;
        for (int i = 0; cv && bytes && marks && i < n; i++) {
            const jval *t = get(&r[i], "timeline"), *b = get(t, "bytes"), *rs = get(t, "recompute_steps");
            if (!b || b->kind != J_ARR) {
                fprintf(stderr, "ckptc: warning: '%s' has no timeline; left out of the picture\n", paths[i]);
                continue;
            }
            bytes[nc] = malloc(sizeof(int64_t) * (size_t)(b->n + 1));
            marks[nc] = malloc(sizeof(int) * (size_t)((rs ? rs->n : 0) + 1));
            if (!bytes[nc] || !marks[nc]) break;
            for (int k = 0; k < b->n; k++) bytes[nc][k] = (int64_t)b->items[k].num;
            for (int k = 0; rs && k < rs->n; k++) marks[nc][k] = (int)rs->items[k].num;
            const jval *pol = get(&r[i], "policy");
            cv[nc] = (ckrt_curve){pol && pol->kind == J_STR ? pol->str : paths[i], b->n, bytes[nc],
                                  (int)num(t, "backward_step", NULL), rs ? rs->n : 0, marks[nc]};
            nc++;
        }
        ckrt_ctx c = {0};
        if (nc && ckrt_timeline_svg(&c, timeline_svg, nc, cv)) {
            fprintf(stderr, "ckptc: error: %s\n", c.msg);
            rc = 2;
        } else if (nc) {
            printf("timeline: %s\n", timeline_svg);
        }
        for (int i = 0; i < nc; i++) free(bytes[i]), free(marks[i]);
        free(cv), free(bytes), free(marks);
    }
    for (int i = 0; i < n; i++) jfree(&r[i]);
    free(r);
    return rc;
}
