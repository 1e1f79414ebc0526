/* arena.c — the bump allocator that owns everything a compilation creates, plus the small
 * pieces every layer shares: diagnostics, the assert handler and a string map.
 *
 * One arena per graph: nodes, values, names, attribute arrays and constant tensors are carved
 * out of large blocks and never freed one by one, so passes can create freely and
 * ck_graph_free releases it all. Blocks grow geometrically; a request larger than a block gets a
 * block of its own, so big constant tensors do not waste the tail of a shared block.
 */
#include "ck_ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- diagnostics */

/* A broken file can cause an error per node or per input; past CK_DIAG_MAX lines one more says
 * the rest were dropped, bounding memory and the user's scrollback. */
#define CK_DIAG_MAX 1000

void ck_diag_add(ck_diag *d, const char *fmt, ...) {
    if (!d || d->n >= CK_DIAG_MAX) return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (d->n == CK_DIAG_MAX - 1) snprintf(buf, sizeof buf, "too many errors; the rest are not shown");
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 8;
        char **m = realloc(d->msg, (size_t)cap * sizeof *m);
        if (!m) return;
        d->msg = m;
        d->cap = cap;
    }
    char *s = strdup(buf);
    if (s) d->msg[d->n++] = s;
}

void ck_diag_clear(ck_diag *d) {
    for (int i = 0; i < d->n; i++) free(d->msg[i]);
    free(d->msg);
    d->msg = NULL;
    d->n = d->cap = 0;
}

const char *ck_status_name(ck_status s) {
    switch (s) {
    case CK_OK: return "ok";
    case CK_ERR_IO: return "io";
    case CK_ERR_PARSE: return "parse";
    case CK_ERR_MODEL: return "model";
    case CK_ERR_UNSUPPORTED: return "unsupported";
    case CK_ERR_SHAPE: return "shape";
    case CK_ERR_USAGE: return "usage";
    case CK_ERR_NOMEM: return "out of memory";
    }
    return "?";
}

void ck_assert_fail(const char *file, int line, const char *expr) {
    fprintf(stderr, "ckptc: internal error: %s:%d: assertion failed: %s\n", file, line, expr);
    abort();
}

/* ---------------------------------------------------------------- arena */

typedef struct ck_block {
    struct ck_block *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} ck_block;

struct ck_arena {
    ck_block *head;
    size_t total;
};

#define CK_BLOCK_MIN (64 * 1024)

ck_arena *ck_arena_new(void) { return calloc(1, sizeof(ck_arena)); }

void *ck_arena_alloc(ck_arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (size == 0) size = 16;
    ck_block *b = a->head;
    if (!b || b->size - b->used < size) {
        size_t bs = a->total < CK_BLOCK_MIN ? CK_BLOCK_MIN : a->total; /* doubles the arena */
        if (size > bs / 4) {
            /* large request: its own block, linked behind the head so the head keeps filling */
            ck_block *nb = calloc(1, sizeof(ck_block) + size);
            if (!nb) return NULL;
            nb->size = nb->used = size;
            a->total += size;
            if (b) {
                nb->next = b->next;
                b->next = nb;
            } else {
                a->head = nb;
            }
            return nb->data;
        }
        ck_block *nb = calloc(1, sizeof(ck_block) + bs);
        if (!nb) return NULL;
        nb->size = bs;
        nb->next = b;
        a->head = b = nb;
        a->total += bs;
    }
    void *p = b->data + b->used;
    b->used += size;
    return p;
}

char *ck_arena_strndup(ck_arena *a, const char *s, size_t n) {
    char *p = ck_arena_alloc(a, n + 1);
    if (p) {
        if (n) memcpy(p, s, n); /* s may be NULL when n is 0 (an empty protobuf bytes field) */
        p[n] = 0;
    }
    return p;
}

char *ck_arena_strdup(ck_arena *a, const char *s) { return ck_arena_strndup(a, s ? s : "", s ? strlen(s) : 0); }

size_t ck_arena_used(const ck_arena *a) { return a->total; }

void ck_arena_free(ck_arena *a) {
    if (!a) return;
    for (ck_block *b = a->head, *nx; b; b = nx) {
        nx = b->next;
        free(b);
    }
    free(a);
}

/* ---------------------------------------------------------------- string map (open addressing) */

struct ck_map {
    ck_arena *arena;
    const char **keys;
    void **vals;
    size_t cap, n;
};

static uint64_t ck_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

ck_map *ck_map_new(ck_arena *a, int expected) {
    ck_map *m = ck_arena_alloc(a, sizeof *m);
    if (!m) return NULL;
    size_t cap = 16;
    while (expected > 0 && cap < (size_t)expected * 2 && cap < ((size_t)1 << 40)) cap *= 2; /* a hint: the map grows */
    m->arena = a;
    m->cap = cap;
    m->keys = ck_arena_alloc(a, cap * sizeof *m->keys);
    m->vals = ck_arena_alloc(a, cap * sizeof *m->vals);
    CK_ASSERT(m->keys && m->vals);
    return m;
}

void *ck_map_get(const ck_map *m, const char *key) {
    for (size_t i = ck_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return NULL;
        if (strcmp(m->keys[i], key) == 0) return m->vals[i];
    }
}

static void ck_map_insert(const char **keys, void **vals, size_t cap, const char *key, void *val) {
    for (size_t i = ck_hash(key) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (!keys[i] || strcmp(keys[i], key) == 0) {
            keys[i] = key;
            vals[i] = val;
            return;
        }
    }
}

void ck_map_put(ck_map *m, const char *key, void *val) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap * 2;
        const char **keys = ck_arena_alloc(m->arena, cap * sizeof *keys);
        void **vals = ck_arena_alloc(m->arena, cap * sizeof *vals);
        CK_ASSERT(keys && vals);
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) ck_map_insert(keys, vals, cap, m->keys[i], m->vals[i]);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    if (!ck_map_get(m, key)) m->n++;
    ck_map_insert(m->keys, m->vals, m->cap, key, val);
}
