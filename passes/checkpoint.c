/* checkpoint.c — activation checkpointing: segment the forward, then recompute inside segments.
 *
 * Segmenting (--checkpoint=POLICY) assigns each forward node to a segment or to none:
 *   blocks     repeated module scopes in node names: the first path component of the form
 *              NAME.NUMBER ("/layers.3/fc1/Gemm" -> "/layers.3", "/layer1/layer1.0/conv1/Conv"
 *              -> "/layer1/layer1.0"), or what --block-regex matches; runs of nodes with the same
 *              key form a segment; unscoped nodes between two nodes of one block join it. With no
 *              such names, it falls back to cut points (below), one segment between each pair.
 *              blocks_by_structure (the search's second try, search.c): the units the graph
 *              repeats (segment_structure), else sqrt.
 *   budget     the candidates are blocks' segments (by names or by structure, as the search
 *              chose for blocks), each recomputed or not as recompute_set says.
 *   every:K    a segment every K cut points of the forward graph.
 *   sqrt       about sqrt(n) segments of equal node counts, cut at cut points (Chen et al. 2016).
 *   nodes:RE   segment boundaries after the nodes whose names match RE.
 * A cut point is a node after which the only forward activation still needed later is its own
 * output: every path to the loss passes through it. ck_checkpoint_candidates segments without
 * rewriting: the budget search (search.c) weighs each segment's FLOPs against its bytes.
 *
 * Recompute: a segment's activations that the backward reads are not kept. Just before the
 * segment's first backward node, clones of the forward nodes producing them run again from the
 * segment's saved inputs; the backward reads the clones. Forward values then die at their last
 * forward use, which is where the memory goes. Clones keep everything that makes them compute the
 * same bits: attributes, the RNG key of Dropout and the random ops (the forward node's id), and
 * BatchNormalization is never run twice: its clone is ckptc.BatchNormApply, normalizing with the
 * batch statistics the forward saved, without touching the running statistics. The last segment is not recomputed:
 * its backward starts right after the forward, so its activations are still live (recomputing
 * them would cost time and save nothing).
 */
#include "ck_passes.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- segmenting */

/* "/layers.3/fc1/Gemm" -> length of "/layers.3"; 0 when no component looks like NAME.NUMBER */
static size_t scope_key(const char *name) {
    const char *p = name;
    while (*p) {
        const char *start = p + (*p == '/');
        const char *end = strchr(start, '/');
        if (!end) return 0; /* the last component is the op, not a module */
        const char *dot = NULL;
        for (const char *q = start; q < end; q++)
            if (*q == '.') dot = q;
        bool digits = dot && dot + 1 < end && dot > start;
        for (const char *q = dot ? dot + 1 : end; digits && q < end; q++) digits = *q >= '0' && *q <= '9';
        if (digits) return (size_t)(end - name);
        p = end;
    }
    return 0;
}

static bool is_forward(const ck_node *n) { return n->phase == CK_PHASE_FORWARD; }

/* After forward node i, is its output the only forward activation a later forward node still
 * reads? (Static values do not count.) One sweep, counting the open activations. */
static void cut_points(const ck_graph *g, int nf, bool *cut) {
    int nid = g->next_value_id;
    int *last = malloc(sizeof(int) * (size_t)(nid + 1));
    CK_ASSERT(last);
    for (int i = 0; i <= nid; i++) last[i] = -1;
    for (int i = 0; i < nf; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            if (g->nodes[i]->in[k]) last[g->nodes[i]->in[k]->id] = i;
    int open = 0;
    for (int i = 0; i < nf; i++) {
        ck_node *n = g->nodes[i];
        int own = 0;
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] && last[n->out[k]->id] > i) own++;
        open += own;
        for (int k = 0; k < n->n_in; k++) {
            ck_value *v = n->in[k];
            bool first = true; /* a value read twice by this node closes once */
            for (int q = 0; q < k; q++) first = first && n->in[q] != v;
            if (v && first && v->producer && last[v->id] == i) open--;
        }
        cut[i] = open == 1 && own == 1;
    }
    free(last);
}

/* blocks (and budget:SIZE): segments by module scope, or by what --block-regex matches. Returns
 * the count, or -1 when no name carries a key (the caller falls back to cut points). */
static int segment_blocks(const ck_graph *g, const ck_options *o, int nf, int *seg, ck_diag *d, ck_status *st) {
    regex_t re;
    bool user = o->block_regex && *o->block_regex;
    if (user && regcomp(&re, o->block_regex, REG_EXTENDED) != 0) {
        ck_diag_add(d, "--block-regex '%s': not a valid regular expression", o->block_regex);
        *st = CK_ERR_USAGE;
        return 0;
    }
    const char **key = calloc((size_t)nf + 1, sizeof *key);
    size_t *klen = calloc((size_t)nf + 1, sizeof *klen);
    CK_ASSERT(key && klen);
    int keyed = 0, nseg = 0;
    for (int i = 0; i < nf; i++) {
        const char *nm = g->nodes[i]->name;
        if (user) {
            regmatch_t m;
            if (regexec(&re, nm, 1, &m, 0) == 0 && m.rm_eo > m.rm_so) key[i] = nm + m.rm_so, klen[i] = (size_t)(m.rm_eo - m.rm_so);
        } else if ((klen[i] = scope_key(nm)) > 0) {
            key[i] = nm;
        }
        keyed += key[i] != NULL;
    }
    if (user) regfree(&re);
    if (keyed == 0) {
        free(key), free(klen);
        return -1; /* names carry no structure */
    }
    /* unscoped nodes between two nodes of the same block join it (nearest keyed node after
     * each node found in one backward sweep, so a long unscoped run costs no rescans) */
    int *next_keyed = malloc(sizeof(int) * (size_t)(nf + 1));
    CK_ASSERT(next_keyed);
    next_keyed[nf] = nf;
    for (int i = nf - 1; i >= 0; i--) next_keyed[i] = key[i] ? i : next_keyed[i + 1];
    for (int i = 0, a = -1; i < nf; i++) {
        if (key[i]) {
            a = i;
            continue;
        }
        int b = next_keyed[i];
        if (a >= 0 && b < nf && klen[a] == klen[b] && strncmp(key[a], key[b], klen[a]) == 0) key[i] = key[a], klen[i] = klen[a];
    }
    free(next_keyed);
    for (int i = 0; i < nf; i++) {
        if (!key[i]) continue;
        bool same = i > 0 && key[i - 1] && klen[i - 1] == klen[i] && strncmp(key[i - 1], key[i], klen[i]) == 0;
        seg[i] = same ? seg[i - 1] : nseg++;
    }
    free(key), free(klen);
    return nseg;
}

/* nodes:REGEX: a boundary after each node whose name matches. */
static int segment_nodes(const ck_graph *g, const ck_options *o, int nf, int *seg, ck_diag *d, ck_status *st) {
    regex_t re;
    if (regcomp(&re, o->checkpoint_regex, REG_EXTENDED | REG_NOSUB) != 0) {
        ck_diag_add(d, "--checkpoint=nodes:'%s': not a valid regular expression", o->checkpoint_regex);
        *st = CK_ERR_USAGE;
        return 0;
    }
    int cur = 0;
    bool any = false;
    for (int i = 0; i < nf; i++) {
        seg[i] = cur;
        if (regexec(&re, g->nodes[i]->name, 0, NULL, 0) == 0) cur++, any = true;
    }
    regfree(&re);
    if (!any) {
        ck_diag_add(d, "--checkpoint=nodes:'%s': no node name matches", o->checkpoint_regex);
        *st = CK_ERR_USAGE;
    }
    return cur + 1;
}

/* every:K, sqrt, and blocks on names without blocks: a boundary every `every` cut points. */
static int segment_cuts(const ck_graph *g, const ck_options *o, int nf, int *seg) {
    bool *cut = calloc((size_t)nf + 1, 1);
    CK_ASSERT(cut);
    cut_points(g, nf, cut);
    int ncut = 0;
    for (int i = 0; i < nf; i++) ncut += cut[i];
    int every = o->checkpoint == CK_CKPT_EVERY ? o->checkpoint_k : 1;
    if (o->checkpoint == CK_CKPT_SQRT) { /* about sqrt(n) segments: a boundary every sqrt(ncut) cuts */
        int s = 1;
        while ((s + 1) * (s + 1) <= ncut) s++;
        every = s;
    }
    if (every < 1) every = 1;
    int cur = 0, seen = 0;
    for (int i = 0; i < nf; i++) {
        seg[i] = cur;
        if (cut[i] && ++seen % every == 0) cur++;
    }
    free(cut);
    return cur + 1;
}

/* blocks by structure: the forward cut at its cut points into chunks, each chunk's signature
 * the ops and output shapes of its nodes. A unit is a run of p consecutive chunks repeated right
 * after itself (the same signatures) at least twice; the longest such repetition (most nodes
 * covered; ties: the shorter period) is taken first, then the next among the chunks left, and so
 * on. Each repetition of a unit is a segment; the chunks no unit covers (glue: the stem, the
 * head, a block that is not repeated) join the segment before them (the first ones the one
 * after). Returns the count of segments, 0 when nothing repeats; *units: how many distinct
 * units were found. Bounded for large graphs: a unit is at most CK_UNIT_MAX_CHUNKS chunks, at
 * most CK_MAX_UNIT_KINDS units are taken, and each period's scan skips the starts inside a run
 * already found in their phase, so one scan of period p costs O(p x chunks). */
#define CK_UNIT_MAX_CHUNKS 64
#define CK_MAX_UNIT_KINDS 16
static uint64_t chunk_signature(const ck_graph *g, int from, int to) {
    uint64_t h = 1469598103934665603ull;
    for (int i = from; i < to; i++) {
        const ck_node *n = g->nodes[i];
        h = (h ^ (uint64_t)n->op) * 1099511628211ull;
        for (int k = 0; k < n->n_out; k++) {
            const ck_value *v = n->out[k];
            if (!v) continue;
            h = (h ^ (uint64_t)v->rank) * 1099511628211ull;
            for (int r = 0; r < v->rank; r++) h = (h ^ (uint64_t)v->dims[r]) * 1099511628211ull;
        }
    }
    return h;
}

/* What segment_structure found for each segment it made (for --explain): its unit's kind (0, 1,
 * ...; -1: none), which repetition of how many, and the unit's length in chunks. */
typedef struct unit_info {
    int kind, rep, reps, chunks;
} unit_info;

static int segment_structure(const ck_graph *g, int nf, int *seg, int *units, unit_info *info) {
    bool *cut = calloc((size_t)nf + 1, 1);
    int *start = malloc(sizeof(int) * (size_t)(nf + 2)), *unit_seg = malloc(sizeof(int) * (size_t)(nf + 1));
    CK_ASSERT(cut && start && unit_seg);
    cut_points(g, nf, cut);
    int nch = 0;
    for (int i = 0; i < nf; i++) {
        if (i == 0 || cut[i - 1]) start[nch++] = i;
    }
    start[nch] = nf;
    uint64_t *sig = malloc(sizeof(uint64_t) * (size_t)(nch + 1));
    CK_ASSERT(sig);
    for (int c = 0; c < nch; c++) sig[c] = chunk_signature(g, start[c], start[c + 1]), unit_seg[c] = -1;
    int nseg = 0;
    *units = 0;
    /* per phase s0 % p of the period tried: where the run found from an earlier start of that
     * phase ends (a later start inside it only finds a suffix of that run) */
    int *run_end = malloc(sizeof(int) * (CK_UNIT_MAX_CHUNKS + 1));
    CK_ASSERT(run_end);
    while (*units < CK_MAX_UNIT_KINDS) {
        int best_s = -1, best_p = 0, best_r = 0, best_nodes = 0;
        for (int p = 1; p <= nch / 2 && p <= CK_UNIT_MAX_CHUNKS; p++) {
            for (int q = 0; q < p; q++) run_end[q] = 0;
            for (int s0 = 0; s0 + 2 * p <= nch; s0++) {
                if (s0 < run_end[s0 % p]) continue;
                bool free_run = true;
                for (int c = s0; free_run && c < s0 + p; c++) free_run = unit_seg[c] < 0;
                if (!free_run) continue;
                int r = 1;
                for (;;) {
                    int b = s0 + r * p;
                    bool same = b + p <= nch;
                    for (int c = 0; same && c < p; c++) same = unit_seg[b + c] < 0 && sig[b + c] == sig[s0 + c];
                    if (!same) break;
                    r++;
                }
                run_end[s0 % p] = s0 + r * p;
                int nodes = start[s0 + r * p] - start[s0];
                if (r >= 2 && nodes > best_nodes) best_s = s0, best_p = p, best_r = r, best_nodes = nodes;
            }
        }
        if (best_s < 0) break;
        for (int k = 0; k < best_r; k++, nseg++) {
            for (int c = 0; c < best_p; c++) unit_seg[best_s + k * best_p + c] = nseg;
            if (info && nseg < nf) info[nseg] = (unit_info){*units, k + 1, best_r, best_p};
        }
        (*units)++;
    }
    if (nseg > 0) {
        /* segment numbers in graph order, glue chunks to the segment before (the first ones after) */
        int *renum = malloc(sizeof(int) * (size_t)(nseg + 1)), next = 0, prev = -1;
        CK_ASSERT(renum);
        for (int k = 0; k < nseg; k++) renum[k] = -1;
        for (int c = 0; c < nch; c++)
            if (unit_seg[c] >= 0 && renum[unit_seg[c]] < 0) renum[unit_seg[c]] = next++;
        if (info) { /* into graph order too */
            unit_info *tmp = malloc(sizeof *tmp * (size_t)(nseg + 1));
            CK_ASSERT(tmp);
            for (int k = 0; k < nseg; k++) tmp[renum[k]] = info[k];
            memcpy(info, tmp, sizeof *tmp * (size_t)nseg);
            free(tmp);
        }
        int first_unit = -1;
        for (int c = 0; c < nch && first_unit < 0; c++)
            if (unit_seg[c] >= 0) first_unit = renum[unit_seg[c]];
        for (int c = 0; c < nch; c++) {
            int sgm = unit_seg[c] >= 0 ? renum[unit_seg[c]] : prev >= 0 ? prev : first_unit;
            prev = sgm;
            for (int i = start[c]; i < start[c + 1]; i++) seg[i] = sgm;
        }
        nseg = next;
        free(renum);
    }
    free(cut), free(start), free(unit_seg), free(sig), free(run_end);
    return nseg;
}

/* seg[i] for forward node i: segment number, or -1 (not checkpointed). Returns the count.
 * info[s] (room for nf): what segment_structure found, when it made the segments (kind -1
 * otherwise). */
static int segment(const ck_graph *g, const ck_options *o, int nf, int *seg, unit_info *info, ck_diag *d, ck_status *st) {
    for (int i = 0; i < nf; i++) seg[i] = -1, info[i] = (unit_info){-1, 0, 0, 0};
    *st = CK_OK;
    int nseg = 0;
    switch (o->checkpoint) {
    case CK_CKPT_NONE: break;
    case CK_CKPT_BLOCKS:
    case CK_CKPT_BUDGET: /* budget's segment candidates: blocks' segments (search.c, budget_segments) */
        if (o->blocks_by_structure) {
            int units = 0;
            nseg = segment_structure(g, nf, seg, &units, info);
            if (nseg == 0 || o->blocks_grouped) { /* nothing repeats, or single-layer units: sqrt */
                ck_options t = *o;
                t.checkpoint = CK_CKPT_SQRT;
                for (int i = 0; i < nf; i++) seg[i] = -1, info[i].kind = -1;
                nseg = segment_cuts(g, &t, nf, seg);
            }
            break;
        }
        nseg = segment_blocks(g, o, nf, seg, d, st);
        if (nseg < 0) nseg = segment_cuts(g, o, nf, seg);
        break;
    case CK_CKPT_NODES: nseg = segment_nodes(g, o, nf, seg, d, st); break;
    case CK_CKPT_EVERY:
    case CK_CKPT_SQRT: nseg = segment_cuts(g, o, nf, seg); break;
    }
    return nseg;
}

/* ---------------------------------------------------------------- recompute */

ck_node *ck_checkpoint_clone_node(ck_graph *g, const ck_node *n, ck_value **in) {
    ck_op op = n->op == CK_OP_BATCH_NORM ? CK_OP_BATCH_NORM_APPLY : n->op;
    char name[1100];
    snprintf(name, sizeof name, "%s/recompute", n->name);
    ck_node *c;
    if (op == CK_OP_BATCH_NORM_APPLY) {
        /* y = (x - saved_mean) * saved_inv_std * scale + bias: the forward's batch statistics */
        ck_value *ins[5] = {in[0], in[1], in[2], n->out[3], n->out[4]};
        c = ck_graph_add_node(g, op, name, 5, ins, 1);
    } else {
        c = ck_graph_add_node(g, op, name, n->n_in, in, n->n_out);
        for (int i = 0; i < n->n_attr; i++) ck_node_add_attr(g, c, n->attr[i]);
        for (int k = 0; k < n->n_out; k++)
            if (!n->out[k]) c->out[k] = NULL;
    }
    if ((ck_ops[n->op].flags & CK_OPF_RANDOM) && !ck_attr_find(n, "key")) /* Dropout, random ops: the forward's draw */
        ck_node_add_attr(g, c, (ck_attr){.name = "key", .kind = CK_ATTR_INT, .i = n->id});
    c->phase = CK_PHASE_BACKWARD;
    c->recompute_of = n->id + 1;
    ck_diag dd = {0};
    CK_ASSERT(ck_infer_node(c, &dd) == CK_OK);
    return c;
}

/* Notes segment s (its clones are clones[0..n); its first and last forward nodes) in
 * g->segments for the report; g->segments has room for every segment. stamp[value id] marks
 * the values already counted for this segment (stamped with s + 1). */
static void record_segment(ck_graph *g, const ck_node *first, const ck_node *last, int s, ck_node **clones, int n, int *stamp,
                           int nid) {
    ck_segment *sg = &g->segments[g->n_segments];
    memset(sg, 0, sizeof *sg);
    size_t k = first ? scope_key(first->name) : 0;
    char buf[64];
    snprintf(buf, sizeof buf, "segment %d", s);
    sg->name = k ? ck_arena_strndup(g->arena, first->name, k) : ck_arena_strdup(g->arena, buf);
    sg->first_node = first ? first->name : "";
    sg->last_node = last ? last->name : "";
    /* checkpoints: forward values the clones read that are not clones themselves (each once) */
    for (int i = 0; i < n; i++)
        for (int q = 0; q < clones[i]->n_in; q++) {
            const ck_value *v = clones[i]->in[q];
            if (!v || !v->producer || v->producer->recompute_of || v->producer->phase != CK_PHASE_FORWARD) continue;
            CK_ASSERT(v->id < nid); /* a forward value: older than the pass */
            if (stamp[v->id] == s + 1) continue;
            stamp[v->id] = s + 1;
            sg->saved_bytes += (int64_t)ck_value_bytes(v);
        }
    g->n_segments++;
}

/* ---------------------------------------------------------------- offload */

static ck_node *copy_node(ck_graph *g, ck_op op, const char *base, ck_value *x, ck_phase phase) {
    char name[1100];
    snprintf(name, sizeof name, "%s/%s", base, op == CK_OP_OFFLOAD ? "offload" : "reload");
    ck_node *n = ck_graph_add_node(g, op, name, 1, &x, 1);
    g->n_nodes--; /* placed by the caller */
    n->phase = phase;
    ck_diag dd = {0};
    CK_ASSERT(ck_infer_node(n, &dd) == CK_OK);
    n->out[0]->host = op == CK_OP_OFFLOAD;
    return n;
}

/* The checkpoints of recomputed segments (forward activations a group of clones reads) go to the
 * host pool right after they are produced and come back once, one group early: a checkpoint that
 * group k reads first is reloaded at the start of group k-1 in backward order (prefetch; group
 * 0's at the start of the backward), and every later backward read uses the reloaded copy. Both
 * device copies live inside the span the checkpoint would have occupied without offload, so the
 * live set at every step can only shrink. A checkpoint the backward reads before the first group
 * stays on the device: it is needed there anyway.
 * g->nodes is [forward (nf nodes) | backward with recompute groups starting at gpos[]]. */
static void offload(ck_graph *g, int nf, int nid, const int *gpos, int ng) {
    int nn = g->n_nodes;
    int *grp = malloc(sizeof(int) * (size_t)(nn + 1)), *first = malloc(sizeof(int) * (size_t)(nid + 1));
    bool *cand = calloc((size_t)nid + 1, 1);
    CK_ASSERT(grp && cand && first);
    for (int i = 0, k = -1; i < nn; i++) {
        while (k + 1 < ng && gpos[k + 1] <= i) k++;
        grp[i] = i < nf ? -1 : k;
    }
    enum { UNREAD = -2 }; /* first[]: no backward read yet; -1: first read before any group */
    for (int i = 0; i <= nid; i++) first[i] = UNREAD;
    for (int i = nf; i < nn; i++) {
        ck_node *c = g->nodes[i];
        for (int q = 0; q < c->n_in; q++) {
            ck_value *v = c->in[q];
            if (!v || v->id >= nid) continue;
            if (c->recompute_of && v->producer && v->producer->phase == CK_PHASE_FORWARD && !v->producer->recompute_of && !v->alias)
                cand[v->id] = true;
            if (first[v->id] == UNREAD) first[v->id] = grp[i]; /* the first group reading it (-1: before any) */
        }
    }
    for (int i = 0; i <= nid; i++)
        if (first[i] < 0) cand[i] = false; /* read before the first group (or never): it stays */
    for (int k = 0; k < g->n_outputs; k++)
        if (g->outputs[k]->id < nid) cand[g->outputs[k]->id] = false;
    ck_node **host_of = calloc((size_t)nid + 1, sizeof *host_of), **reload = calloc((size_t)nid + 1, sizeof *reload);
    CK_ASSERT(host_of && reload);
    for (int i = nf; i < nn; i++) {
        ck_node *c = g->nodes[i];
        for (int q = 0; q < c->n_in; q++) {
            ck_value *v = c->in[q];
            if (!v || v->id >= nid || !cand[v->id]) continue;
            if (!host_of[v->id]) {
                host_of[v->id] = copy_node(g, CK_OP_OFFLOAD, v->producer->name, v, CK_PHASE_FORWARD);
                reload[v->id] = copy_node(g, CK_OP_RELOAD, v->producer->name, host_of[v->id]->out[0], CK_PHASE_BACKWARD);
            }
            c->in[q] = reload[v->id]->out[0];
        }
    }
    /* lay out: each Offload right after its checkpoint's producer, each Reload at the start of
     * the group before the first group that reads it */
    ck_node **out = malloc(sizeof(ck_node *) * (size_t)(nn * 3 + 16));
    int no = 0, *at = malloc(sizeof(int) * (size_t)(ng + 1));
    ck_node ***due = calloc((size_t)nn + 1, sizeof *due); /* by position: reloads to issue there */
    int *ndue = calloc((size_t)nn + 1, sizeof *ndue);
    CK_ASSERT(out && at && due && ndue);
    for (int k = 0; k < ng; k++) at[k] = k == 0 ? nf : gpos[k - 1];
    for (int id = 0; id < nid; id++) {
        if (!reload[id]) continue;
        int pos = at[first[id]];
        due[pos] = realloc(due[pos], sizeof(ck_node *) * (size_t)(ndue[pos] + 1));
        due[pos][ndue[pos]++] = reload[id];
    }
    for (int i = 0; i < nn; i++) {
        ck_node *n = g->nodes[i];
        for (int k = 0; k < ndue[i]; k++) out[no++] = due[i][k];
        out[no++] = n;
        for (int r = 0; i < nf && r < n->n_out; r++)
            if (n->out[r] && n->out[r]->id < nid && host_of[n->out[r]->id]) out[no++] = host_of[n->out[r]->id];
    }
    ck_graph_set_nodes(g, no, out);
    for (int i = 0; i <= nn; i++) free(due[i]);
    free(due), free(ndue), free(at), free(reload), free(host_of), free(out), free(grp), free(cand), free(first);
}

/* ---------------------------------------------------------------- the pass */

/* What the rewrite knows about the forward: its segments, which segment produced each value,
 * and which values are read outside their segment (those are kept, never recomputed). */
typedef struct fwd_segments {
    int nf, nid, nseg, last_seg; /* last_seg: its backward comes first: left alone (-1: none) */
    int *seg;                    /* per forward node: segment, or -1 */
    int *vseg;                   /* per value id: the segment of its producer, or -1 */
    bool *read_outside;          /* per value id */
    int *seg_at, *seg_nodes;     /* segment s's forward nodes in order: seg_nodes[seg_at[s] .. seg_at[s + 1]) */
    unit_info *info;             /* per segment: its structural unit (kind -1: none) */
} fwd_segments;

static void fwd_segments_free(fwd_segments *f) {
    free(f->seg), free(f->vseg), free(f->read_outside), free(f->seg_at), free(f->seg_nodes), free(f->info);
}

/* Segments g's forward (the nodes before the first backward node, as autodiff leaves them). */
static ck_status fwd_segments_init(fwd_segments *f, const ck_graph *g, const ck_options *o, ck_diag *d) {
    memset(f, 0, sizeof *f);
    int nn = g->n_nodes, nf = 0, nid = g->next_value_id;
    while (nf < nn && is_forward(g->nodes[nf])) nf++;
    for (int i = nf; i < nn; i++) CK_ASSERT(!is_forward(g->nodes[i])); /* forward first, as autodiff leaves it */
    f->nf = nf, f->nid = nid;
    f->seg = malloc(sizeof(int) * (size_t)(nf + 1));
    f->info = malloc(sizeof *f->info * (size_t)(nf + 1));
    CK_ASSERT(f->seg && f->info);
    ck_status st;
    f->nseg = segment(g, o, nf, f->seg, f->info, d, &st);
    if (st) return st;
    f->vseg = malloc(sizeof(int) * (size_t)(nid + 1));
    f->read_outside = calloc((size_t)nid + 1, 1);
    CK_ASSERT(f->vseg && f->read_outside);
    for (int i = 0; i <= nid; i++) f->vseg[i] = -1;
    for (int i = 0; i < nf; i++)
        for (int k = 0; k < g->nodes[i]->n_out; k++)
            if (g->nodes[i]->out[k]) f->vseg[g->nodes[i]->out[k]->id] = f->seg[i];
    for (int i = 0; i < nf; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++) {
            const ck_value *v = g->nodes[i]->in[k];
            if (v && v->id < nid && f->vseg[v->id] >= 0 && f->vseg[v->id] != f->seg[i]) f->read_outside[v->id] = true;
        }
    for (int k = 0; k < g->n_outputs; k++) f->read_outside[g->outputs[k]->id] = true;
    f->last_seg = -1;
    for (int i = nf - 1; i >= 0 && f->last_seg < 0; i--) f->last_seg = f->seg[i];
    int nseg = f->nseg;
    f->seg_at = calloc((size_t)nseg + 2, sizeof *f->seg_at);
    f->seg_nodes = malloc(sizeof(int) * (size_t)(nf + 1));
    int *fill = malloc(sizeof(int) * (size_t)(nseg + 1));
    CK_ASSERT(f->seg_at && f->seg_nodes && fill);
    for (int i = 0; i < nf; i++)
        if (f->seg[i] >= 0) f->seg_at[f->seg[i] + 1]++;
    for (int k = 0; k < nseg; k++) f->seg_at[k + 1] += f->seg_at[k];
    memcpy(fill, f->seg_at, sizeof(int) * (size_t)(nseg + 1));
    for (int i = 0; i < nf; i++)
        if (f->seg[i] >= 0) f->seg_nodes[fill[f->seg[i]]++] = i;
    free(fill);
    return CK_OK;
}

int ck_checkpoint_units(const ck_graph *g) {
    int nf = 0, units = 0;
    while (nf < g->n_nodes && is_forward(g->nodes[nf])) nf++;
    int *seg = malloc(sizeof(int) * (size_t)(nf + 1));
    CK_ASSERT(seg);
    segment_structure(g, nf, seg, &units, NULL);
    free(seg);
    return units;
}

ck_status ck_checkpoint_candidates(const ck_graph *g, const ck_options *o, ck_ckpt_candidates *c, ck_diag *d) {
    memset(c, 0, sizeof *c);
    if (o->infer || o->checkpoint == CK_CKPT_NONE) return CK_OK;
    fwd_segments f;
    ck_status st = fwd_segments_init(&f, g, o, d);
    if (!st) {
        c->n = f.nseg, c->n_ids = g->next_node_id;
        c->flops = calloc((size_t)f.nseg + 1, sizeof *c->flops);
        c->bytes = calloc((size_t)f.nseg + 1, sizeof *c->bytes);
        c->node_seg = malloc(sizeof(int) * ((size_t)c->n_ids + 1));
        CK_ASSERT(c->flops && c->bytes && c->node_seg);
        for (int i = 0; i < c->n_ids; i++) c->node_seg[i] = -1;
        for (int i = 0; i < f.nf; i++) {
            const ck_node *n = g->nodes[i];
            if (n->id < c->n_ids) c->node_seg[n->id] = f.seg[i];
            if (f.seg[i] < 0) continue;
            c->flops[f.seg[i]] += ck_node_flops(n);
            for (int k = 0; k < n->n_out; k++)
                if (n->out[k]) c->bytes[f.seg[i]] += (int64_t)ck_value_bytes(n->out[k]);
        }
        if (f.last_seg >= 0) c->bytes[f.last_seg] = 0; /* never recomputed */
    }
    fwd_segments_free(&f);
    return st;
}

void ck_checkpoint_candidates_free(ck_ckpt_candidates *c) {
    free(c->flops), free(c->bytes), free(c->node_seg);
    memset(c, 0, sizeof *c);
}

/* --explain: which unit segment s is and why it ends where it ends, in g's arena. */
static const char *describe(ck_graph *g, const ck_options *o, const fwd_segments *f, int s) {
    int li = f->seg_nodes[f->seg_at[s + 1] - 1], nodes = f->seg_at[s + 1] - f->seg_at[s];
    const ck_node *first = g->nodes[f->seg_nodes[f->seg_at[s]]], *next = li + 1 < f->nf ? g->nodes[li + 1] : NULL;
    const unit_info *u = &f->info[s];
    char unit[400], end[700];
    size_t k = scope_key(first->name);
    bool blockwise = o->checkpoint == CK_CKPT_BLOCKS || o->checkpoint == CK_CKPT_BUDGET;
    bool by_names = blockwise && !o->blocks_by_structure;
    if (u->kind >= 0)
        snprintf(unit, sizeof unit, "unit %c that the graph repeats (%d chunk%s between cut points), repetition %d of %d, %d nodes",
                 'A' + u->kind % 26, u->chunks, u->chunks == 1 ? "" : "s", u->rep, u->reps, nodes);
    else if (blockwise && o->blocks_by_structure)
        snprintf(unit, sizeof unit, "about sqrt(n) cut points, %d nodes (%s)", nodes,
                 o->blocks_grouped ? "layers grouped into runs: lower than one segment per repeated unit"
                                   : "the graph repeats no unit");
    else if (by_names && k)
        snprintf(unit, sizeof unit, "module scope '%.*s' (%s), %d nodes", (int)k, first->name,
                 o->block_regex && *o->block_regex ? "--block-regex" : "node names", nodes);
    else if (o->checkpoint == CK_CKPT_NODES)
        snprintf(unit, sizeof unit, "the nodes up to one whose name nodes:%s matches, %d nodes", o->checkpoint_regex, nodes);
    else
        snprintf(unit, sizeof unit, "%s cut points, %d nodes", o->checkpoint == CK_CKPT_EVERY ? "every:K" : "about sqrt(n)", nodes);
    if (!next) {
        snprintf(end, sizeof end, "the forward ends");
    } else if (u->kind >= 0 && s + 1 < f->nseg && f->info[s + 1].kind == u->kind && f->info[s + 1].rep == u->rep + 1) {
        snprintf(end, sizeof end, "the next repetition of unit %c starts at '%s'", 'A' + u->kind % 26, next->name);
    } else if (u->kind >= 0) {
        snprintf(end, sizeof end, "the run of unit %c ends (nodes after it that no unit covers joined it); '%s' starts %s",
                 'A' + u->kind % 26, next->name, s + 1 < f->nseg && f->info[s + 1].kind >= 0 ? "another unit" : "the rest");
    } else if (by_names && k && scope_key(next->name) && (scope_key(next->name) != k || strncmp(next->name, first->name, k))) {
        snprintf(end, sizeof end, "'%s' belongs to another scope", next->name);
    } else {
        snprintf(end, sizeof end, "a cut point: after '%s' only its output is live, and '%s' starts the next segment",
                 g->nodes[li]->name, next->name);
    }
    char *why = ck_arena_alloc(g->arena, strlen(unit) + strlen(end) + 16);
    sprintf(why, "%s; ends: %s", unit, end);
    return why;
}

/* The rewrite in progress: the new schedule, the clones made so far and the recompute groups. */
typedef struct rewrite {
    ck_graph *g;
    const ck_options *o;
    const fwd_segments *f;
    ck_node **clone;   /* by forward node id: its clone */
    ck_node **out;     /* the new schedule: out[0 .. no) */
    int no;
    int *gpos, ng;     /* recompute groups in backward order: where each starts in out */
    bool *done_seg;    /* per segment: cloned already */
    int *stamp;        /* record_segment's marks, by value id */
} rewrite;

/* Clones segment s's forward nodes (in forward order) at the end of the schedule, each reading
 * the clones of its producers inside the segment; unused clones are dropped as dead code. */
static void clone_segment(rewrite *r, int s) {
    const fwd_segments *f = r->f;
    ck_graph *g = r->g;
    r->done_seg[s] = true;
    r->gpos[r->ng++] = r->no;
    for (int jj = f->seg_at[s]; jj < f->seg_at[s + 1]; jj++) {
        ck_node *fn = g->nodes[f->seg_nodes[jj]];
        bool stateful = ck_ops[fn->op].flags & CK_OPF_STATEFUL;
        if (stateful && fn->op != CK_OP_BATCH_NORM) continue; /* kept, never rerun */
        if (fn->op == CK_OP_BATCH_NORM && (fn->n_out < 5 || !fn->out[3] || !fn->out[4])) continue; /* no saved stats */
        ck_value *in[64];
        for (int q = 0; q < fn->n_in; q++) {
            ck_value *u = fn->in[q];
            in[q] = u;
            if (!u || !u->producer || u->id >= f->nid || f->vseg[u->id] != s || f->read_outside[u->id]) continue;
            ck_node *pc = r->clone[u->producer->id];
            for (int k = 0; pc && k < u->producer->n_out && k < pc->n_out; k++)
                if (u->producer->out[k] == u && pc->out[k]) in[q] = pc->out[k];
        }
        ck_node *c = ck_checkpoint_clone_node(g, fn, in);
        g->n_nodes--; /* ck_graph_add_node appended it; we place it here instead */
        r->clone[fn->id] = c;
        r->out[r->no++] = c;
    }
    int at = r->gpos[r->ng - 1];
    record_segment(g, g->nodes[f->seg_nodes[f->seg_at[s]]], g->nodes[f->seg_nodes[f->seg_at[s + 1] - 1]], s, r->out + at,
                   r->no - at, r->stamp, f->nid);
    g->segments[g->n_segments - 1].why = describe(g, r->o, f, s);
}

/* Backward node b: before it, the clones of every segment it is the first to read a recomputed
 * value of (not the last segment, nor one left out of o->recompute_set); then b reads clones. */
static void rewrite_backward(rewrite *r, ck_node *b, const bool *skip) {
    const fwd_segments *f = r->f;
    for (int k = 0; k < b->n_in; k++) {
        const ck_value *v = b->in[k];
        if (!v || v->id >= f->nid || !v->producer || !is_forward(v->producer)) continue;
        int s = f->vseg[v->id];
        if (s < 0 || s == f->last_seg || r->done_seg[s] || skip[s] || f->read_outside[v->id]) continue;
        clone_segment(r, s);
    }
    for (int k = 0; k < b->n_in; k++) {
        ck_value *v = b->in[k];
        if (!v || v->id >= f->nid || !v->producer || !is_forward(v->producer) || f->read_outside[v->id]) continue;
        ck_node *c = r->clone[v->producer->id];
        if (!c) continue;
        for (int q = 0; q < v->producer->n_out && q < c->n_out; q++)
            if (v->producer->out[q] == v && c->out[q]) b->in[k] = c->out[q];
    }
    r->out[r->no++] = b;
}

int64_t ck_forward_flops(const ck_graph *g) {
    int64_t f = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->phase == CK_PHASE_FORWARD && !g->nodes[i]->recompute_of) f += ck_node_flops(g->nodes[i]);
    return f;
}

void ck_step_flops(const ck_graph *g, const ck_options *o, int64_t fl[CK_STEP_FLOPS]) {
    for (int k = 0; k < CK_STEP_FLOPS; k++) fl[k] = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (ck_node_is_view(n, o)) continue;
        int k = n->recompute_of ? 2 : n->phase == CK_PHASE_FORWARD ? 0 : n->phase == CK_PHASE_BACKWARD ? 1 : 3;
        fl[k] += ck_node_flops(n);
    }
}

/* Sums the FLOPs of every recompute clone into g->recompute_flops. */
static void count_recompute(ck_graph *g) {
    g->recompute_flops = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->recompute_of) g->recompute_flops += ck_node_flops(g->nodes[i]);
}

ck_status ck_pass_checkpoint(ck_graph *g, const ck_options *o, ck_diag *d) {
    g->n_segments = 0, g->n_selective = 0, g->recompute_flops = 0;
    if (o->infer) return CK_OK;
    ck_status st = ck_pass_selective(g, o, d); /* op-level first: its clones are backward nodes below */
    if (st || o->checkpoint == CK_CKPT_NONE) {
        count_recompute(g);
        return st;
    }
    fwd_segments f;
    st = fwd_segments_init(&f, g, o, d);
    if (st) {
        fwd_segments_free(&f);
        return st;
    }
    int nn = g->n_nodes, nseg = f.nseg;
    bool *skip = calloc((size_t)nseg + 1, 1); /* segments the budget search leaves out */
    CK_ASSERT(skip);
    for (int k = 0; k < nseg; k++) skip[k] = o->recompute_set && (k >= o->n_recompute_set || !o->recompute_set[k]);
    rewrite r = {.g = g, .o = o, .f = &f};
    r.clone = calloc((size_t)g->next_node_id + 1, sizeof *r.clone);
    r.out = malloc(sizeof(ck_node *) * (size_t)(nn * 3 + 16));
    r.gpos = malloc(sizeof(int) * (size_t)(nseg + 1));
    r.done_seg = calloc((size_t)nseg + 1, 1);
    r.stamp = calloc((size_t)f.nid + 1, sizeof *r.stamp);
    CK_ASSERT(r.clone && r.out && r.gpos && r.done_seg && r.stamp);
    g->segments = ck_arena_alloc(g->arena, sizeof(ck_segment) * (size_t)(nseg + 1));
    for (int i = 0; i < f.nf; i++) r.out[r.no++] = g->nodes[i];
    for (int i = f.nf; i < nn; i++) rewrite_backward(&r, g->nodes[i], skip);
    ck_graph_set_nodes(g, r.no, r.out);
    ck_graph_remove_dead(g);
    if (o->offload && r.ng > 0) offload(g, f.nf, f.nid, r.gpos, r.ng);
    free(skip), free(r.clone), free(r.out), free(r.gpos), free(r.done_seg), free(r.stamp);
    fwd_segments_free(&f);
    count_recompute(g);
    return ck_graph_verify(g, d);
}
