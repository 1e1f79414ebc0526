/* prof.c — where a training step's time goes, per node (the trainer's --profile FILE).
 *
 * The generated code names every node before running it (CKRT_NODE). With a profile on, each of
 * those names also takes a time mark: the host clock on the CPU, where kernels run as they are
 * called; a timed event on the compute stream on a device backend (clock_mark / clock_read), so
 * that the marks measure the device's own timeline. A node's time is from its mark to the next
 * one; the step's first mark (its inputs) and an end mark after the step's last synchronization
 * close the list. On a device, a gap where the GPU waits for the host (the loss read after the
 * forward, a launch the host is slow to enqueue) counts for the node before it.
 *
 * Steps after the first are summed (the first loads kernels and warms caches), then FILE gets
 * the time per step by kind of node (the op type and what the node is: grad, recompute, fused,
 * offload...) and the nodes that take the most. Off (c->prof NULL), CKRT_NODE is one test more.
 */
#include "ckrt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PROF_MAX_MARKS = 1 << 16, PROF_SLOTS = 1 << 15, PROF_TOP = 40 };

typedef struct prof_ent {
    const char *name; /* the generated code's string: its address is the key */
    double ms;
    int64_t calls;
} prof_ent;

struct ckrt_prof {
    int n, overflow, steps;
    const char *names[PROF_MAX_MARKS + 1];
    double t[PROF_MAX_MARKS + 1]; /* host clock (CPU) or read back from the device, ms */
    prof_ent tab[PROF_SLOTS];
    int n_ent;
    double total_ms;
};

static double host_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int ckrt_prof_start(ckrt_ctx *c, const char *path) {
    FILE *f = fopen(path, "w"); /* a path that cannot be written fails now, not after the training */
    if (!f) return ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    fclose(f);
    if (!(c->prof = calloc(1, sizeof *c->prof))) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the profile");
    return CKRT_OK;
}

void ckrt_prof_stop(ckrt_ctx *c) {
    free(c->prof);
    c->prof = NULL;
}

static int mark(ckrt_ctx *c, const char *name) {
    struct ckrt_prof *p = c->prof;
    if (p->n > PROF_MAX_MARKS) {
        p->overflow = 1;
        return CKRT_OK;
    }
    p->names[p->n] = name;
    if (c->be->clock_mark) {
        int rc = c->be->clock_mark(c, p->n);
        if (rc) return rc;
    } else {
        p->t[p->n] = host_ms();
    }
    p->n++;
    return CKRT_OK;
}

int ckrt_prof_mark(ckrt_ctx *c) { return mark(c, c->node ? c->node : "(between nodes)"); }

int ckrt_prof_step_begin(ckrt_ctx *c) {
    c->prof->n = 0;
    return mark(c, "(step start: inputs)");
}

static prof_ent *slot(struct ckrt_prof *p, const char *name) {
    size_t h = ((uintptr_t)name >> 3) * 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < PROF_SLOTS; i++) {
        prof_ent *e = &p->tab[(h + i) & (PROF_SLOTS - 1)];
        if (e->name == name) return e;
        if (!e->name) {
            if (p->n_ent >= PROF_SLOTS / 2) return NULL; /* keep probing short; the rest is counted as overflow */
            p->n_ent++;
            e->name = name;
            return e;
        }
    }
    return NULL;
}

int ckrt_prof_step_end(ckrt_ctx *c, int keep) {
    struct ckrt_prof *p = c->prof;
    int n = p->n;
    CKRT_TRY(mark(c, NULL));
    CKRT_TRY(c->be->synchronize(c));
    if (p->n == n) return CKRT_OK; /* over the mark limit: nothing to attribute */
    if (c->be->clock_read) CKRT_TRY(c->be->clock_read(c, p->n, p->t));
    if (!keep) return CKRT_OK;
    for (int i = 0; i < n; i++) {
        prof_ent *e = slot(p, p->names[i]);
        if (!e) {
            p->overflow = 1;
            continue;
        }
        e->ms += p->t[i + 1] - p->t[i];
        e->calls++;
    }
    p->total_ms += p->t[n] - p->t[0];
    p->steps++;
    return CKRT_OK;
}

/* The kind of a node, from its name: the last op-like component (capitalised, its "_N" dropped)
 * and what follows it ("/blocks.0/attn/MatMul_1/grad" -> "MatMul/grad"); "/optimizer/..." ->
 * "optimizer update". */
static void kind_of(const char *name, char *out, size_t cap) {
    if (strncmp(name, "/optimizer/", 11) == 0) {
        snprintf(out, cap, "optimizer update");
        return;
    }
    const char *comp[64];
    size_t len[64];
    int k = 0;
    for (const char *s = name; *s && k < 64;) {
        while (*s == '/') s++;
        if (!*s) break;
        const char *e = strchr(s, '/');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        comp[k] = s;
        len[k++] = l;
        s += l;
    }
    int op = k - 1;
    while (op > 0 && !(comp[op][0] >= 'A' && comp[op][0] <= 'Z')) op--;
    out[0] = 0;
    size_t w = 0;
    for (int i = op < 0 ? 0 : op; i < k && w + 1 < cap; i++) {
        size_t l = len[i];
        while (l > 1 && comp[i][l - 1] >= '0' && comp[i][l - 1] <= '9') l--;
        if (l < len[i] && comp[i][l - 1] == '_') l--;
        else l = len[i];
        int m = snprintf(out + w, cap - w, "%s%.*s", i > op && op >= 0 ? "/" : "", (int)l, comp[i]);
        if (m < 0) break;
        w += (size_t)m;
    }
}

static int by_ms(const void *a, const void *b) {
    double x = ((const prof_ent *)a)->ms, y = ((const prof_ent *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

int ckrt_prof_write(ckrt_ctx *c, const char *path) {
    struct ckrt_prof *p = c->prof;
    FILE *f = fopen(path, "w");
    if (!f) return ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    prof_ent *ents = calloc((size_t)p->n_ent + 1, sizeof *ents), *kinds = calloc((size_t)p->n_ent + 1, sizeof *kinds);
    char (*kname)[96] = calloc((size_t)p->n_ent + 1, sizeof *kname);
    if (!ents || !kinds || !kname) {
        free(ents), free(kinds), free(kname), fclose(f);
        return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the profile's report");
    }
    int ne = 0, nk = 0;
    for (int i = 0; i < PROF_SLOTS; i++)
        if (p->tab[i].name) ents[ne++] = p->tab[i];
    for (int i = 0; i < ne; i++) {
        char kb[96];
        kind_of(ents[i].name, kb, sizeof kb);
        int j = 0;
        while (j < nk && strcmp(kname[j], kb) != 0) j++;
        if (j == nk) {
            snprintf(kname[nk], sizeof kname[nk], "%s", kb);
            kinds[nk++].name = kname[j];
        }
        kinds[j].ms += ents[i].ms;
        kinds[j].calls += ents[i].calls;
    }
    qsort(ents, (size_t)ne, sizeof *ents, by_ms);
    qsort(kinds, (size_t)nk, sizeof *kinds, by_ms);
    int s = p->steps ? p->steps : 1;
    double step = p->total_ms / s;
    fprintf(f, "# ckrt profile: backend %s, %d step(s) summed (the first is left out when there are more), "
               "%.3f ms per step%s\n", c->be->name, p->steps, step,
            p->overflow ? "; SOME MARKS WERE DROPPED (over the limit): the figures are partial" : "");
    fprintf(f, "# time from a node's mark to the next one%s\n\n",
            c->be->clock_mark ? " on the device's timeline (device events): a gap where the device waits for the host counts "
                                "for the node before it" : " (host clock)");
    fprintf(f, "%-44s %12s %7s %10s\n", "kind", "ms/step", "share", "calls/step");
    for (int i = 0; i < nk; i++)
        fprintf(f, "%-44s %12.3f %6.1f%% %10.1f\n", kinds[i].name, kinds[i].ms / s, step > 0 ? 100.0 * kinds[i].ms / s / step : 0.0,
                (double)kinds[i].calls / s);
    fprintf(f, "\n%-64s %12s %7s\n", "node (the most time)", "ms/step", "share");
    for (int i = 0; i < ne && i < PROF_TOP; i++)
        fprintf(f, "%-64s %12.3f %6.1f%%\n", ents[i].name, ents[i].ms / s, step > 0 ? 100.0 * ents[i].ms / s / step : 0.0);
    free(ents), free(kinds), free(kname);
    if (fclose(f) != 0) return ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return CKRT_OK;
}
