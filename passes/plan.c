/* plan.c — the memory planner: every byte the step touches gets an offset in one arena.
 *
 * Layout: [static region | dynamic region]. The static region holds what lives for the whole
 * program (params, buffers and constants loaded from weights.bin, then the user inputs), in value
 * order. The dynamic region holds activations and kernel workspace. Each dynamic buffer lives
 * from the step of the node that writes it to the step of its last reader (graph outputs: to the
 * end); a node's inputs and outputs are live together, so a kernel never overwrites what it reads,
 * except the ops that run in place by design (optimizer updates, the gradient all-reduce:
 * ck_node_inplace_input), whose outputs alias the input they overwrite.
 *
 * Offsets come from greedy best-fit placement: buffers in some order, each put in the smallest gap
 * between already placed buffers whose lifetimes overlap it, or above the highest of them. Four
 * orders are tried (size, size x lifetime, lifetime, program order) and the lowest peak kept:
 * no single order wins on every graph (size alone fragments residual MLPs). Not optimal in
 * general; the lower bound (max live bytes at any step) is reported next to the plan.
 * Views alias their input: they need no kernel and no bytes, and extend their root's lifetime.
 * ck_pass_plan runs in phases: aliases, lifetimes, the static region, the dynamic buffers and
 * their placement, the peak's accounting, then the host pool.
 *
 * Speed: a buffer is a rectangle (steps x addresses), and placing one needs the free gaps in the
 * union of the address ranges of the placed buffers whose lifetimes overlap its own. Collecting
 * and sorting those buffers one by one is O(n^2 log n) (minutes at 10k nodes: the saved
 * activations all overlap each other). Instead a segment tree over the steps keeps, per node, the
 * UNION of the address ranges stored there as a short sorted list of disjoint intervals (buffers
 * placed side by side merge into one); a query merges the O(log steps) lists that cover its
 * lifetime. Same gaps, same choices, so the same plan as the buffer-by-buffer search (kept as
 * place_direct() for the rare zero-byte host buffer, which splits gaps and cannot be merged).
 * A query still walks every free gap of its union, and deep residual stacks leave about one per
 * layer, so the four-order search stays super-linear: above PLAN_SEARCH_MAX buffers only program
 * order is placed, as a linear scan over the live buffers' gaps (place_linear(), O(n log n), the
 * same choices place() makes in that order), and compact() is skipped.
 */
#include "ck_passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct buf {
    int64_t bytes, offset;
    int64_t exact;         /* bytes actually used (bytes is that rounded up to the alignment) */
    int first, last;       /* inclusive step range */
    ck_value *v;           /* NULL for workspace */
    ck_node *ws_node;
    int order;             /* creation order, the tie-breaker that makes the plan deterministic */
    int64_t key;           /* the sort key of the placement order being tried (set_keys) */
} buf;

/* Up to this many buffers the plan is the best of the four orders, each placed with place() and
 * compact(); above it, program order alone with place_linear(). The search costs O(n x gaps) per
 * order (every query walks the free gaps of the union it reads, and residual stacks leave one per
 * layer): 8192 buffers plan in about a second. On our synthetic 10k-node stacks (~45k buffers)
 * program order came within 0.3% of the four-order search's peak, and was the best in 3 of 6. */
#define PLAN_SEARCH_MAX 8192

static int64_t align_up(int64_t x) { return (x + CK_ALIGN - 1) / CK_ALIGN * CK_ALIGN; }

double ck_dropout_ratio(const ck_node *n, const ck_options *o) {
    if (o && o->disable_dropout) return 0.0;
    const ck_value *mode = n->n_in > 2 ? n->in[2] : NULL, *ratio = n->n_in > 1 ? n->in[1] : NULL;
    if (!mode) return 0.0; /* ONNX: training_mode defaults to false */
    if (!mode->data) return -1.0;
    if (!ck_value_get_i(mode, 0)) return 0.0;
    if (!ratio) return 0.5;
    return ratio->data ? ck_value_get_f(ratio, 0) : -1.0;
}

/* The view and in-place columns of ops.def. A view's output 0 is its input 0's bytes
 * (view_always: Identity and the reshapes; view_dropout: Dropout when it drops nothing and no
 * mask is wanted). An in-place op's output k overwrites one of its inputs (inplace_optimizer: SGD
 * and AdamW update the parameter and their state in place; inplace_each: GradAllReduce averages
 * each gradient in place; inplace_attr: per the node's "ckptc.inplace" attribute, which passes/fuse.c
 * sets where an elementwise output takes over an input that dies there: a fused chain's, or a
 * single float elementwise node's). */
static bool view_always(const ck_node *n, const ck_options *o) {
    (void)n, (void)o;
    return true;
}
static bool view_dropout(const ck_node *n, const ck_options *o) {
    return !(n->n_out > 1 && n->out[1]) && ck_dropout_ratio(n, o) == 0.0;
}
static int inplace_optimizer(const ck_node *n, int k) {
    (void)n;
    return k == 0 ? 0 : k + 1;
}
static int inplace_each(const ck_node *n, int k) {
    (void)n;
    return k;
}
/* an elementwise node (ckptc.Fused, the float elementwise ops, UnaryGrad): output k takes over the
 * bytes of input "ckptc.inplace"[k] (passes/fuse.c sets it; -1 or no attribute: none) */
static int inplace_attr(const ck_node *n, int k) {
    const ck_attr *a = ck_attr_find(n, CK_INPLACE_ATTR);
    return a && k < a->n ? (int)a->ints[k] : -1;
}

static bool (*const view_fns[CK_OP_COUNT])(const ck_node *n, const ck_options *o) = {
#define CK_OP(e, onnx, in_min, in_max, out_min, out_max, flags, diff, infer, grad, kernel, ws, flops, fold, view, in_place) \
    [CK_OP_##e] = view,
#include "ops.def"
#undef CK_OP
};
static int (*const inplace_fns[CK_OP_COUNT])(const ck_node *n, int k) = {
#define CK_OP(e, onnx, in_min, in_max, out_min, out_max, flags, diff, infer, grad, kernel, ws, flops, fold, view, in_place) \
    [CK_OP_##e] = in_place,
#include "ops.def"
#undef CK_OP
};

bool ck_node_is_view(const ck_node *n, const ck_options *o) { return view_fns[n->op] && view_fns[n->op](n, o); }

int ck_node_inplace_input(const ck_node *n, int k) { return inplace_fns[n->op] ? inplace_fns[n->op](n, k) : -1; }

static ck_value *root_of(ck_value *v) {
    while (v->alias) v = v->alias;
    return v;
}

/* Placement orders tried; the plan keeps the one with the lowest peak (ties: the first). Each
 * buffer's key for an order is set before sorting (set_keys): larger keys are placed first. */
enum { ORDER_SIZE, ORDER_AREA, ORDER_LIFETIME, ORDER_PROGRAM, N_ORDERS };
static void set_keys(buf *bufs, int nb, int order) {
    for (int i = 0; i < nb; i++) {
        buf *x = &bufs[i];
        switch (order) {
        case ORDER_SIZE: x->key = x->bytes; break;
        case ORDER_AREA: x->key = x->bytes * (x->last - x->first + 1); break;
        case ORDER_LIFETIME: x->key = x->last - x->first; break;
        default: x->key = -x->first; break;
        }
    }
}

static int cmp_buf(const void *a, const void *b) {
    const buf *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->order - y->order;
}

static void sort_bufs(buf *bufs, int nb, int order) {
    set_keys(bufs, nb, order);
    qsort(bufs, (size_t)nb, sizeof *bufs, cmp_buf);
}

static int cmp_off(const void *a, const void *b) {
    const buf *x = *(buf *const *)a, *y = *(buf *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* ---------------------------------------------------------------- the rectangle index */

/* A set of addresses: sorted, disjoint, non-touching [iv[2k], iv[2k+1]) intervals. */
typedef struct ivset {
    int64_t *iv;
    int n, cap;
} ivset;

static void ivset_add(ivset *s, int64_t lo, int64_t hi) {
    int a = 0, b = s->n, m;
    while (a < b) /* a: the first interval ending at or after lo (it touches or overlaps [lo, hi)) */
        if (s->iv[2 * (m = (a + b) / 2) + 1] < lo) a = m + 1;
        else b = m;
    int e = a;
    b = s->n;
    while (e < b) /* e: the first interval starting after hi */
        if (s->iv[2 * (m = (e + b) / 2)] <= hi) e = m + 1;
        else b = m;
    if (e > a) { /* merge a..e-1 with [lo, hi) into slot a */
        if (s->iv[2 * a] < lo) lo = s->iv[2 * a];
        if (s->iv[2 * (e - 1) + 1] > hi) hi = s->iv[2 * (e - 1) + 1];
        memmove(s->iv + 2 * (a + 1), s->iv + 2 * e, sizeof(int64_t) * 2 * (size_t)(s->n - e));
        s->n -= e - a - 1;
    } else {
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 4;
            s->iv = realloc(s->iv, sizeof(int64_t) * 2 * (size_t)s->cap);
            CK_ASSERT(s->iv);
        }
        memmove(s->iv + 2 * (a + 1), s->iv + 2 * a, sizeof(int64_t) * 2 * (size_t)(s->n - a));
        s->n++;
    }
    s->iv[2 * a] = lo, s->iv[2 * a + 1] = hi;
}

/* Placed rectangles, indexed by a segment tree over steps 0..size-1 (node v covers a step range;
 * leaves are size..2 size-1). A rectangle over steps [f, l] goes into cover[c] and sub[c] for the
 * canonical nodes c of [f, l] and into sub[v] for every v on the paths from leaves f and l to the
 * root. A query [f, l] reads sub[c] for its canonical nodes and cover[v] on its two paths: every
 * rectangle it reads overlaps [f, l], and every rectangle overlapping [f, l] is in one of them
 * (its canonical node on the path of a shared step is either an ancestor of the query's canonical
 * node there, so on the query's paths, or below it, so in its sub). */
typedef struct rect_index {
    int size;
    ivset *cover, *sub;
    int64_t *tmp; /* the query's intervals */
    int ntmp, captmp;
} rect_index;

static void index_init(rect_index *x, int steps) {
    memset(x, 0, sizeof *x);
    x->size = 1;
    while (x->size < steps) x->size *= 2;
    x->cover = calloc((size_t)(2 * x->size), sizeof *x->cover);
    x->sub = calloc((size_t)(2 * x->size), sizeof *x->sub);
    CK_ASSERT(x->cover && x->sub);
}

static void index_clear(rect_index *x) {
    for (int v = 0; v < 2 * x->size; v++) x->cover[v].n = x->sub[v].n = 0;
}

static void index_free(rect_index *x) {
    for (int v = 0; v < 2 * x->size; v++) free(x->cover[v].iv), free(x->sub[v].iv);
    free(x->cover), free(x->sub), free(x->tmp);
}

static void index_add(rect_index *x, int f, int l, int64_t lo, int64_t hi) {
    for (int a = f + x->size, b = l + x->size; a >= 1; a >>= 1, b >>= 1) {
        ivset_add(&x->sub[a], lo, hi);
        if (b != a) ivset_add(&x->sub[b], lo, hi);
    }
    for (int a = f + x->size, b = l + x->size + 1; a < b; a >>= 1, b >>= 1) {
        if (a & 1) ivset_add(&x->cover[a], lo, hi), ivset_add(&x->sub[a], lo, hi), a++;
        if (b & 1) --b, ivset_add(&x->cover[b], lo, hi), ivset_add(&x->sub[b], lo, hi);
    }
}

static void tmp_push(rect_index *x, const ivset *s) {
    if (!s->n) return;
    if (x->ntmp + s->n > x->captmp) {
        while (x->ntmp + s->n > x->captmp) x->captmp = x->captmp ? 2 * x->captmp : 256;
        x->tmp = realloc(x->tmp, sizeof(int64_t) * 2 * (size_t)x->captmp);
        CK_ASSERT(x->tmp);
    }
    memcpy(x->tmp + 2 * x->ntmp, s->iv, sizeof(int64_t) * 2 * (size_t)s->n);
    x->ntmp += s->n;
}

static int cmp_lo(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The address intervals of the placed rectangles overlapping steps [f, l], sorted by start (they
 * may overlap one another): x->tmp[0 .. 2 x->ntmp). */
static void index_query(rect_index *x, int f, int l) {
    x->ntmp = 0;
    for (int a = f + x->size, b = l + x->size; a >= 1; a >>= 1, b >>= 1) {
        tmp_push(x, &x->cover[a]);
        if (b != a) tmp_push(x, &x->cover[b]);
    }
    for (int a = f + x->size, b = l + x->size + 1; a < b; a >>= 1, b >>= 1) {
        if (a & 1) tmp_push(x, &x->sub[a++]);
        if (b & 1) tmp_push(x, &x->sub[--b]);
    }
    if (x->ntmp > 1) qsort(x->tmp, (size_t)x->ntmp, sizeof(int64_t) * 2, cmp_lo); /* tmp is NULL until the first push */
}

/* ---------------------------------------------------------------- placement */

/* Places bufs in array order, each at the best-fitting gap among already placed buffers whose
 * lifetimes overlap it (the smallest gap that holds it, the lowest of equal ones), or above the
 * highest of them; returns the peak. Leaves x holding the placement. */
static int64_t place(buf *bufs, int nb, rect_index *x) {
    int64_t peak = 0;
    index_clear(x);
    for (int i = 0; i < nb; i++) {
        buf *b = &bufs[i];
        index_query(x, b->first, b->last);
        int64_t best = -1, best_gap = INT64_MAX, cur = 0;
        for (int k = 0; k < x->ntmp; k++) {
            int64_t gap = x->tmp[2 * k] - cur;
            if (gap >= b->bytes && gap < best_gap) best = cur, best_gap = gap;
            if (x->tmp[2 * k + 1] > cur) cur = x->tmp[2 * k + 1];
        }
        b->offset = best >= 0 ? best : cur;
        index_add(x, b->first, b->last, b->offset, b->offset + b->bytes);
        if (b->offset + b->bytes > peak) peak = b->offset + b->bytes;
    }
    return peak;
}

/* place() buffer by buffer: for zero-byte buffers, whose zero-length ranges split the gaps
 * around them (the index merges ranges, so it cannot see that). O(n^2 log n). */
static int64_t place_direct(buf *bufs, int nb, buf **placed) {
    int64_t peak = 0;
    for (int i = 0; i < nb; i++) {
        buf *b = &bufs[i];
        int np = 0;
        for (int k = 0; k < i; k++)
            if (bufs[k].first <= b->last && b->first <= bufs[k].last) placed[np++] = &bufs[k];
        qsort(placed, (size_t)np, sizeof *placed, cmp_off);
        int64_t best = -1, best_gap = INT64_MAX, cur = 0;
        for (int k = 0; k < np; k++) {
            int64_t gap = placed[k]->offset - cur;
            if (gap >= b->bytes && gap < best_gap) best = cur, best_gap = gap;
            if (placed[k]->offset + placed[k]->bytes > cur) cur = placed[k]->offset + placed[k]->bytes;
        }
        b->offset = best >= 0 ? best : cur;
        if (b->offset + b->bytes > peak) peak = b->offset + b->bytes;
    }
    return peak;
}

/* ---------------------------------------------------------------- program order, O(n log n) */

/* A treap of (k1, k2) keys with a value, nodes in a pool (index 0: none). */
typedef struct tnode {
    int64_t k1, k2, v;
    uint32_t pri;
    int l, r;
} tnode;
typedef struct treap {
    tnode *n;
    int root, used, free_list;
    uint32_t seed;
} treap;

static bool key_less(const tnode *a, int64_t k1, int64_t k2) { return a->k1 < k1 || (a->k1 == k1 && a->k2 < k2); }

static void treap_split(tnode *n, int t, int64_t k1, int64_t k2, int *lo, int *hi) { /* lo: keys < (k1, k2) */
    if (!t) {
        *lo = *hi = 0;
        return;
    }
    if (key_less(&n[t], k1, k2)) {
        treap_split(n, n[t].r, k1, k2, &n[t].r, hi);
        *lo = t;
    } else {
        treap_split(n, n[t].l, k1, k2, lo, &n[t].l);
        *hi = t;
    }
}

static int treap_merge(tnode *n, int a, int b) {
    if (!a || !b) return a ? a : b;
    if (n[a].pri > n[b].pri) {
        n[a].r = treap_merge(n, n[a].r, b);
        return a;
    }
    n[b].l = treap_merge(n, a, n[b].l);
    return b;
}

static void treap_insert(treap *t, int64_t k1, int64_t k2, int64_t v) {
    int x = t->free_list ? t->free_list : ++t->used;
    if (t->free_list) t->free_list = t->n[x].l;
    t->seed ^= t->seed << 13, t->seed ^= t->seed >> 17, t->seed ^= t->seed << 5; /* xorshift: shape only */
    t->n[x] = (tnode){.k1 = k1, .k2 = k2, .v = v, .pri = t->seed};
    int lo, hi;
    treap_split(t->n, t->root, k1, k2, &lo, &hi);
    t->root = treap_merge(t->n, treap_merge(t->n, lo, x), hi);
}

static void treap_erase(treap *t, int64_t k1, int64_t k2) {
    int lo, mid, hi;
    treap_split(t->n, t->root, k1, k2, &lo, &hi);
    treap_split(t->n, hi, k1, k2 + 1, &mid, &hi);
    CK_ASSERT(mid && !t->n[mid].l && !t->n[mid].r);
    t->n[mid].l = t->free_list, t->free_list = mid;
    t->root = treap_merge(t->n, lo, hi);
}

static int treap_ceil(const treap *t, int64_t k1, int64_t k2) { /* the smallest key >= (k1, k2) */
    int best = 0;
    for (int x = t->root; x;)
        if (key_less(&t->n[x], k1, k2)) x = t->n[x].r;
        else best = x, x = t->n[x].l;
    return best;
}

static int treap_floor_below(const treap *t, int64_t k1, int64_t k2) { /* the largest key < (k1, k2) */
    int best = 0;
    for (int x = t->root; x;)
        if (key_less(&t->n[x], k1, k2)) best = x, x = t->n[x].r;
        else x = t->n[x].l;
    return best;
}

/* place() for buffers in program order (first step ascending), as a linear scan: the placed
 * buffers overlapping the next one are exactly those still live at its first step, so a sweep
 * keeps their gaps (free runs below the top of the live buffers) in two treaps, by address and
 * by (size, address), and takes the smallest gap that holds the buffer, the lowest of equal
 * ones, or the top: the same choice as place(), in O(n log n). */
static int64_t place_linear(buf *bufs, int nb) {
    treap by_addr = {.seed = 2463534242u}, by_size = {.seed = 88675123u};
    by_addr.n = calloc((size_t)nb + 2, sizeof(tnode));
    by_size.n = calloc((size_t)nb + 2, sizeof(tnode));
    int *heap = malloc(sizeof(int) * (size_t)(nb + 1)), nh = 0; /* live buffers, min-heap by last step */
    CK_ASSERT(by_addr.n && by_size.n && heap);
    int64_t top = 0, peak = 0;
    for (int i = 0; i < nb; i++) {
        buf *b = &bufs[i];
        while (nh && bufs[heap[0]].last < b->first) { /* free the buffers dead before b starts */
            const buf *d = &bufs[heap[0]];
            heap[0] = heap[--nh];
            for (int k = 0;;) { /* sift down */
                int c = 2 * k + 1;
                if (c >= nh) break;
                if (c + 1 < nh && bufs[heap[c + 1]].last < bufs[heap[c]].last) c++;
                if (bufs[heap[c]].last >= bufs[heap[k]].last) break;
                int t = heap[c];
                heap[c] = heap[k], heap[k] = t, k = c;
            }
            int64_t lo = d->offset, hi = d->offset + d->bytes;
            int q = treap_floor_below(&by_addr, lo, INT64_MIN);
            if (q && by_addr.n[q].v == lo) { /* a gap ends where d starts: merge */
                lo = by_addr.n[q].k1;
                treap_erase(&by_size, d->offset - lo, lo);
                treap_erase(&by_addr, lo, 0);
            }
            if (hi == top) { /* d was the highest: the top drops to the start of the free run */
                top = lo;
                continue;
            }
            q = treap_ceil(&by_addr, hi, INT64_MIN);
            if (q && by_addr.n[q].k1 == hi) { /* a gap starts where d ends: merge */
                int64_t end = by_addr.n[q].v;
                treap_erase(&by_size, end - hi, hi);
                treap_erase(&by_addr, hi, 0);
                hi = end;
            }
            treap_insert(&by_addr, lo, 0, hi);
            treap_insert(&by_size, hi - lo, lo, 0);
        }
        int q = treap_ceil(&by_size, b->bytes, INT64_MIN);
        if (q) {
            int64_t size = by_size.n[q].k1, at = by_size.n[q].k2;
            treap_erase(&by_size, size, at);
            treap_erase(&by_addr, at, 0);
            if (size > b->bytes) {
                treap_insert(&by_addr, at + b->bytes, 0, at + size);
                treap_insert(&by_size, size - b->bytes, at + b->bytes, 0);
            }
            b->offset = at;
        } else {
            b->offset = top;
            top += b->bytes;
        }
        if (b->offset + b->bytes > peak) peak = b->offset + b->bytes;
        heap[nh] = i; /* sift up */
        for (int k = nh++; k > 0 && bufs[heap[(k - 1) / 2]].last > bufs[heap[k]].last; k = (k - 1) / 2) {
            int t = heap[k];
            heap[k] = heap[(k - 1) / 2], heap[(k - 1) / 2] = t;
        }
    }
    free(by_addr.n), free(by_size.n), free(heap);
    return peak;
}

/* Moves buffers down: highest first, each to the lowest gap that holds it among the others whose
 * lifetimes overlap it, when that gap starts below it. Never raises a buffer, so the peak can
 * only drop. x holds the placement (from place()); a moved buffer is added at its new offset
 * and its old range stays in x: it lies at or above the offsets of all buffers still to be
 * moved, and below its own offset a buffer only looks at addresses under it. (A gap that
 * reaches the buffer's own offset always holds it: its own range is free of the others.) */
static int64_t compact(buf *bufs, int nb, rect_index *x) {
    buf **by = malloc(sizeof(buf *) * (size_t)(nb + 1));
    CK_ASSERT(by);
    for (int i = 0; i < nb; i++) by[i] = &bufs[i];
    qsort(by, (size_t)nb, sizeof *by, cmp_off);
    for (int i = nb - 1; i >= 0; i--) {
        buf *b = by[i];
        index_query(x, b->first, b->last);
        int64_t cur = 0, cap = b->offset;
        for (int k = 0; k < x->ntmp && cur < cap; k++) {
            if (x->tmp[2 * k] >= cap || x->tmp[2 * k] - cur >= b->bytes) break;
            if (x->tmp[2 * k + 1] > cur) cur = x->tmp[2 * k + 1];
        }
        if (cur < cap) {
            b->offset = cur;
            index_add(x, b->first, b->last, b->offset, b->offset + b->bytes);
        }
    }
    int64_t p = 0;
    for (int i = 0; i < nb; i++)
        if (bufs[i].offset + bufs[i].bytes > p) p = bufs[i].offset + bufs[i].bytes;
    free(by);
    return p;
}

/* ---------------------------------------------------------------- the pass, in phases */

/* Views and in-place updates first: their outputs alias the root of an input. */
static void set_aliases(ck_graph *g, const ck_options *o) {
    for (int i = 0; i < g->n_values; i++) g->values[i]->alias = NULL, g->values[i]->offset = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        ck_node *n = g->nodes[i];
        if (ck_node_is_view(n, o)) n->out[0]->alias = root_of(n->in[0]);
        for (int k = 0; k < n->n_out; k++) {
            int src = ck_node_inplace_input(n, k);
            if (src >= 0 && n->out[k]) n->out[k]->alias = root_of(n->in[src]);
        }
    }
}

/* first/last[root id]: the steps a root's bytes are live (-1: never), accumulated over its views;
 * graph outputs live to the end (step n_nodes). */
static void lifetimes(const ck_graph *g, int *first, int *last) {
    int nn = g->n_nodes;
    for (int i = 0; i <= g->next_value_id; i++) first[i] = -1, last[i] = -1;
    for (int i = 0; i < nn; i++) {
        const ck_node *n = g->nodes[i];
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k]) {
                ck_value *r = root_of(n->out[k]);
                if (first[r->id] < 0) first[r->id] = i;
                if (last[r->id] < i) last[r->id] = i;
            }
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]) {
                ck_value *r = root_of(n->in[k]);
                if (last[r->id] < i) last[r->id] = i;
            }
    }
    for (int i = 0; i < g->n_outputs; i++) last[root_of(g->outputs[i])->id] = nn;
}

/* The static region: data-carrying values (weights.bin's image), optimizer state (zeroed at
 * start), then inputs, in value order. */
static void place_static(ck_graph *g, ck_mem_plan *p) {
    int64_t off = 0;
    for (int pass = 0; pass < 3; pass++) {
        for (int i = 0; i < g->n_values; i++) {
            ck_value *v = g->values[i];
            if (v->producer || v->alias) continue;
            int which = v->role == CK_ROLE_INPUT ? 2 : v->role == CK_ROLE_OPT_STATE ? 1 : 0;
            if (which != pass) continue;
            v->offset = off;
            int64_t b = align_up((int64_t)ck_value_bytes(v));
            off += b;
            p->bytes[which == 2 ? CK_MEM_INPUTS : which == 1 ? CK_MEM_OPT_STATE : CK_MEM_PARAMS] += b;
        }
        if (pass == 0) p->weights_bytes = off;
    }
    p->static_bytes = off;
}

/* The dynamic buffers: produced values on the device (not views), then kernel workspaces (which
 * also sets each node's ws_bytes and ws_last). Returns the count. */
static int dynamic_bufs(ck_graph *g, int *first, int *last, buf *bufs) {
    int nn = g->n_nodes, nb = 0;
    for (int i = 0; i < g->n_values; i++) {
        ck_value *v = g->values[i];
        if (!v->producer || v->alias || v->host) continue;
        if (first[v->id] < 0) first[v->id] = last[v->id] = 0; /* produced but never read: still written */
        bufs[nb] = (buf){.bytes = align_up((int64_t)ck_value_bytes(v)), .exact = (int64_t)ck_value_bytes(v), .first = first[v->id],
                         .last = last[v->id], .v = v, .order = nb};
        nb++;
    }
    for (int i = 0; i < nn; i++) {
        ck_node *n = g->nodes[i];
        n->ws_offset = -1;
        n->ws_bytes = ck_ops[n->op].workspace ? ck_ops[n->op].workspace(n) : 0;
        int until = i;
        for (int j = i + 1; n->ws_until && j < nn && until == i; j++)
            if (g->nodes[j] == n->ws_until) until = j;
        CK_ASSERT(!n->ws_until || until > i);
        n->ws_last = until;
        if (n->ws_bytes > 0) {
            bufs[nb] = (buf){.bytes = align_up(n->ws_bytes), .exact = n->ws_bytes, .first = i, .last = until, .ws_node = n, .order = nb};
            nb++;
        }
    }
    for (int i = 0; i < nb; i++)
        if (bufs[i].bytes == 0) bufs[i].bytes = CK_ALIGN; /* empty tensors still get a distinct address */
    return nb;
}

/* Offsets for the dynamic buffers (relative to the region): the best of the four orders, or
 * program order alone above PLAN_SEARCH_MAX buffers. x is initialized when the search runs. */
static void place_dynamic(buf *bufs, int nb, int steps, rect_index *x) {
    int64_t *best_off = malloc(sizeof(int64_t) * (size_t)(nb + 1));
    CK_ASSERT(best_off);
    bool search = nb <= PLAN_SEARCH_MAX;
    if (search) index_init(x, steps);
    int64_t dyn_peak = INT64_MAX;
    for (int order = search ? ORDER_SIZE : ORDER_PROGRAM; order < N_ORDERS; order++) {
        sort_bufs(bufs, nb, order);
        int64_t peak;
        if (search) {
            place(bufs, nb, x);
            peak = compact(bufs, nb, x);
        } else {
            peak = place_linear(bufs, nb);
        }
        if (peak < dyn_peak) {
            dyn_peak = peak;
            for (int i = 0; i < nb; i++) best_off[bufs[i].order] = bufs[i].offset;
        }
    }
    for (int i = 0; i < nb; i++) bufs[i].offset = best_off[bufs[i].order];
    free(best_off);
}

/* Writes the dynamic offsets back; fills the plan's peak, its step, what holds it (saved vs
 * transient activations, workspace, gradients), the timeline and the arena size. */
static void account_dynamic(ck_graph *g, ck_mem_plan *p, buf *bufs, int nb) {
    int nn = g->n_nodes;
    int64_t *live = calloc((size_t)nn + 2, sizeof *live), *live_ws = calloc((size_t)nn + 2, sizeof *live_ws);
    int64_t *live_gr = calloc((size_t)nn + 2, sizeof *live_gr);
    CK_ASSERT(live && live_ws && live_gr);
    for (int i = 0; i < nb; i++) {
        buf *b = &bufs[i];
        if (b->v) b->v->offset = p->static_bytes + b->offset;
        else b->ws_node->ws_offset = p->static_bytes + b->offset;
        /* differences at first and last + 1, summed below: O(n + steps), not O(n x lifetime) */
        int64_t *add = !b->v ? live_ws : b->v->role == CK_ROLE_GRAD ? live_gr : NULL;
        live[b->first] += b->bytes, live[b->last + 1] -= b->bytes;
        if (add) add[b->first] += b->bytes, add[b->last + 1] -= b->bytes;
    }
    for (int t = 1; t <= nn + 1; t++) live[t] += live[t - 1], live_ws[t] += live_ws[t - 1], live_gr[t] += live_gr[t - 1];
    int tmax = 0;
    for (int t = 0; t <= nn; t++)
        if (live[t] > live[tmax]) tmax = t;
    /* what holds the peak: forward activations kept for the backward vs everything transient */
    int first_bwd = nn;
    for (int i = 0; i < nn; i++)
        if (g->nodes[i]->phase != CK_PHASE_FORWARD) {
            first_bwd = i;
            break;
        }
    p->peak_step = tmax < nn ? tmax : nn - 1;
    for (int i = 0; i < nb; i++) {
        buf *b = &bufs[i];
        if (!b->v || b->v->role == CK_ROLE_GRAD || b->first > tmax || b->last < tmax) continue;
        bool saved = b->v->producer->phase == CK_PHASE_FORWARD && b->last >= first_bwd;
        if (saved) p->saved_bytes += b->bytes;
        else p->transient_bytes += b->bytes;
    }
    p->timeline = ck_arena_alloc(g->arena, sizeof(int64_t) * (size_t)(nn + 1));
    p->n_timeline = nn + 1;
    for (int t = 0; t <= nn; t++) p->timeline[t] = p->static_bytes + live[t];
    p->dynamic_lower_bound = live[tmax];
    p->bytes[CK_MEM_ACTIVATIONS] = live[tmax] - live_ws[tmax] - live_gr[tmax];
    p->bytes[CK_MEM_WORKSPACE] = live_ws[tmax];
    p->bytes[CK_MEM_GRADS] = live_gr[tmax];
    /* the planned peak is the last byte any buffer uses, not its aligned end: that is what the
     * runtime's high-water mark can observe */
    int64_t exact_end = 0;
    for (int i = 0; i < nb; i++)
        if (bufs[i].offset + bufs[i].exact > exact_end) exact_end = bufs[i].offset + bufs[i].exact;
    p->arena_bytes = p->static_bytes + exact_end;
    p->n_buffers = nb;
    p->done = true;
    free(live), free(live_ws), free(live_gr);
}

/* The host pool: offloaded tensors, placed the same way over their own lifetimes (bufs has room
 * for them). x is the dynamic search's index, or uninitialized (size 0). */
static void place_host(ck_graph *g, ck_mem_plan *p, const int *first, const int *last, buf *bufs, rect_index *x) {
    int nh = 0, nn = g->n_nodes;
    for (int i = 0; i < g->n_values; i++) {
        ck_value *v = g->values[i];
        if (!v->host) continue;
        bufs[nh] = (buf){.bytes = align_up((int64_t)ck_value_bytes(v)), .exact = (int64_t)ck_value_bytes(v),
                         .first = first[v->id] < 0 ? 0 : first[v->id], .last = last[v->id] < 0 ? 0 : last[v->id], .v = v, .order = nh};
        p->offload_bytes += (int64_t)ck_value_bytes(v);
        nh++;
    }
    if (!nh) return;
    bool empty = false;
    for (int i = 0; i < nh; i++) empty |= bufs[i].bytes == 0;
    int order = nh <= PLAN_SEARCH_MAX || empty ? ORDER_SIZE : ORDER_PROGRAM;
    sort_bufs(bufs, nh, order);
    if (empty) {
        buf **hp = malloc(sizeof(buf *) * (size_t)(nh + 1));
        CK_ASSERT(hp);
        p->host_bytes = place_direct(bufs, nh, hp);
        free(hp);
    } else if (order == ORDER_SIZE) {
        if (!x->size) index_init(x, nn + 1);
        p->host_bytes = place(bufs, nh, x);
    } else {
        p->host_bytes = place_linear(bufs, nh);
    }
    for (int i = 0; i < nh; i++) bufs[i].v->offset = bufs[i].offset;
}

ck_status ck_pass_plan(ck_graph *g, const ck_options *o, ck_diag *d) {
    int nn = g->n_nodes, nid = g->next_value_id;
    int *first = malloc(sizeof(int) * (size_t)(nid + 1)), *last = malloc(sizeof(int) * (size_t)(nid + 1));
    buf *bufs = calloc((size_t)(g->n_values + nn + 1), sizeof *bufs);
    CK_ASSERT(first && last && bufs);
    ck_mem_plan *p = &g->plan;
    set_aliases(g, o);
    lifetimes(g, first, last);
    memset(p, 0, sizeof *p);
    place_static(g, p);
    int nb = dynamic_bufs(g, first, last, bufs);
    rect_index x = {0};
    place_dynamic(bufs, nb, nn + 1, &x); /* steps 0..nn: graph outputs live to nn */
    account_dynamic(g, p, bufs, nb);
    place_host(g, p, first, last, bufs, &x);
    if (x.size) index_free(&x);
    for (int i = 0; i < g->n_values; i++) { /* views share their root's offset; lifetimes for reports */
        ck_value *v = g->values[i];
        ck_value *r = root_of(v);
        if (v->alias) v->offset = r->offset;
        bool dyn = r->producer != NULL;
        v->live_first = dyn ? (first[r->id] < 0 ? 0 : first[r->id]) : -1;
        v->live_last = dyn ? (last[r->id] < 0 ? 0 : last[r->id]) : -1;
        CK_ASSERT(v->offset >= 0);
    }
    free(first), free(last), free(bufs);
    (void)d;
    return CK_OK;
}
