/* compile.c — the whole compiler in one function, ck_compile: load -> passes -> codegen, and what
 * ckptc prints about the plan (--explain, --plan-only, the summary of what it wrote).
 *
 * The passes that no checkpoint, offload or bucket choice changes run once here; the plan search
 * (passes/search.c) takes the trained graph from there through the rest, once, or as many times
 * as its choices need, on clones. ckptc.c parses the flags and calls ck_compile.
 */
#include "cli.h"
#include "ck_frontend.h"

#include <sys/stat.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --explain: what happens to every forward activation the backward needs, and why. */
static void explain(const ck_graph *g) {
    int nid = g->next_value_id;
    /* per forward node id: its recompute clone, if any */
    const ck_node **clone = calloc((size_t)g->next_node_id + 1, sizeof *clone);
    int *readers = calloc((size_t)nid + 1, sizeof *readers), *clone_readers = calloc((size_t)nid + 1, sizeof *clone_readers);
    bool *offloaded = calloc((size_t)nid + 1, 1);
    if (!clone || !readers || !clone_readers || !offloaded) return;
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->recompute_of) clone[n->recompute_of - 1] = n;
        for (int k = 0; k < n->n_in; k++) {
            const ck_value *v = n->in[k];
            if (!v || n->phase == CK_PHASE_FORWARD) continue;
            if (n->op == CK_OP_RELOAD) continue;
            if (n->recompute_of) clone_readers[v->id]++;
            else readers[v->id]++;
        }
        if (n->op == CK_OP_OFFLOAD) offloaded[n->in[0]->id] = true;
    }
    printf("\n%-11s %12s  %-40s %s\n", "activation", "bytes", "tensor", "why");
    int64_t tot[4] = {0};
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->phase != CK_PHASE_FORWARD || n->recompute_of || n->op == CK_OP_OFFLOAD) continue;
        for (int k = 0; k < n->n_out; k++) {
            const ck_value *v = n->out[k];
            if (!v || v->alias) continue;
            const char *what;
            char why[600];
            int64_t b = (int64_t)ck_value_bytes(v);
            if (offloaded[v->id]) {
                what = "offloaded";
                snprintf(why, sizeof why, "a segment checkpoint: to the host pool after '%s', reloaded one segment ahead", n->name);
                tot[2] += b;
            } else if (clone_readers[v->id]) {
                what = "kept";
                snprintf(why, sizeof why, "a checkpoint: the recompute starts from it");
                tot[0] += b;
            } else if (readers[v->id]) {
                what = "kept";
                snprintf(why, sizeof why, "the backward reads it");
                tot[0] += b;
            } else if (clone[n->id]) {
                what = "recomputed";
                snprintf(why, sizeof why, "freed after its last forward use; '%s' reruns it before the backward reads it", clone[n->id]->name);
                tot[1] += b;
            } else {
                continue; /* the backward never needs it: freed at its last forward use */
            }
            printf("%-11s %12lld  %-40.40s %s\n", what, (long long)b, v->name, why);
        }
    }
    printf("total: kept %lld bytes, recomputed %lld bytes, offloaded %lld bytes\n", (long long)tot[0], (long long)tot[1],
           (long long)tot[2]);
    free(clone), free(readers), free(clone_readers), free(offloaded);
}

/* Fusion (passes/fuse.c): the chains, their ops and the bytes kept out of the plan; each chain
 * with --explain. */
static void print_fused(const ck_graph *g, bool explain) {
    int chains = 0, ops = 0, away = 0;
    int64_t bytes = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->op != CK_OP_FUSED) continue;
        chains++, ops += n->n_fused, away += n->n_fused - n->n_out;
        for (int j = 0; j < n->n_fused; j++) {
            bool out = false;
            for (int k = 0; k < n->n_out; k++) out |= n->out[k] == n->fused[j]->out[0];
            if (!out) bytes += (int64_t)ck_value_bytes(n->fused[j]->out[0]);
        }
        if (!explain) continue;
        printf("fused      step %-5d", i);
        for (int j = 0; j < n->n_fused; j++) printf("%s%s (%s)", j ? " + " : " ", n->fused[j]->name, ck_ops[n->fused[j]->op].onnx_name);
        printf("\n");
    }
    if (chains)
        printf("fusion: %d elementwise chains of %d ops run as one loop each; %d intermediates (%lld bytes) need no memory\n",
               chains, ops, away, (long long)bytes);
    int singles = 0;
    int64_t over = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->op == CK_OP_FUSED || !ck_attr_find(n, CK_INPLACE_ATTR)) continue; /* not the optimizer or all-reduce */
        singles++, over += (int64_t)ck_value_bytes(n->out[0]);
    }
    if (singles)
        printf("in place: %d elementwise nodes write their output over an input that dies there (%lld bytes)\n", singles,
               (long long)over);
}

static void print_plan(const ck_graph *g, const ck_options *o, bool explain) {
    const ck_mem_plan *p = &g->plan;
    printf("planned peak %lld bytes (device); host pool %lld bytes\n", (long long)p->arena_bytes, (long long)p->host_bytes);
    for (int k = 0; k < CK_MEM_COUNT; k++)
        if (p->bytes[k]) printf("  %-18s %12lld\n", ck_mem_cat_name((ck_mem_cat)k), (long long)p->bytes[k]);
    printf("  at the peak: saved activations %lld, transient %lld\n", (long long)p->saved_bytes, (long long)p->transient_bytes);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == CK_OP_GRAD_ALLREDUCE) {
            int until = g->nodes[i]->ws_last;
            printf("data parallel: bucket %lld of %lld (%d gradients): all-reduce staging %lld bytes, steps %d..%d%s\n",
                   (long long)ck_attr_int(g->nodes[i], "bucket", 0), (long long)ck_attr_int(g->nodes[i], "buckets", 1),
                   g->nodes[i]->n_in, (long long)g->nodes[i]->ws_bytes, i, until,
                   i <= p->peak_step && p->peak_step <= until ? ", live at the peak" : "");
        }
    int n_up = 0, first_up = -1, last_bwd = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i]->phase == CK_PHASE_UPDATE) n_up++, first_up = first_up < 0 ? i : first_up;
        else if (g->nodes[i]->phase == CK_PHASE_BACKWARD) last_bwd = i;
    }
    if (n_up)
        printf("updates: %d, the first at step %d; %s\n", n_up, first_up,
               first_up < last_bwd ? "each right after its gradient is final" : "after the whole backward");
    if (g->n_nodes) {
        const ck_node *pn = g->nodes[p->peak_step];
        printf("peak at step %d of %d: '%s' (%s)\n", p->peak_step, g->n_nodes, pn->name, pn->recompute_of ? "recompute"
               : pn->phase == CK_PHASE_FORWARD ? "forward" : pn->phase == CK_PHASE_BACKWARD ? "backward" : "update");
    }
    if (g->recompute_flops || g->n_segments || g->n_selective) {
        int64_t fwd = ck_forward_flops(g), fl[CK_STEP_FLOPS];
        ck_step_flops(g, o, fl);
        int64_t step = fl[0] + fl[1] + fl[3]; /* the step without its recompute, as the trainer's report counts it */
        printf("recompute: %lld FLOPs per step (%.1f%% of the forward's %lld; the step's FLOPs %.2fx those without it): %d "
               "segments, %d activations op-level\n",
               (long long)g->recompute_flops, fwd ? 100.0 * (double)g->recompute_flops / (double)fwd : 0.0, (long long)fwd,
               step ? (double)(step + g->recompute_flops) / (double)step : 1.0, g->n_segments, g->n_selective);
    }
    for (int i = 0; i < g->n_segments; i++) {
        printf("segment %-16s %s .. %s, checkpoints %lld bytes\n", g->segments[i].name, g->segments[i].first_node,
               g->segments[i].last_node, (long long)g->segments[i].saved_bytes);
        if (explain && g->segments[i].why) printf("        %s\n", g->segments[i].why);
    }
    print_fused(g, explain);
}

/* Where the generated Makefile finds libckrt: this build tree when ckptc runs from it, else the
 * prefix ckptc is installed under (PREFIX/bin/ckptc -> PREFIX/lib, PREFIX/include/ckptc), else
 * the configured install prefix. */
void ckrt_paths(char *inc, char *lib, size_t n) {
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[k > 0 ? k : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    char probe[4200];
    struct stat st;
    snprintf(probe, sizeof probe, "%s/runtime/libckrt.a", exe);
    if (k > 0 && strcmp(exe, CK_BINARY_DIR) == 0 && stat(probe, &st) == 0) {
        snprintf(inc, n, "%s/runtime", CK_SOURCE_DIR);
        snprintf(lib, n, "%s/runtime", CK_BINARY_DIR);
        return;
    }
    slash = strrchr(exe, '/');
    if (k > 0 && slash) {
        *slash = 0; /* PREFIX */
        snprintf(probe, sizeof probe, "%s/lib/libckrt.a", exe);
        if (stat(probe, &st) == 0) {
            snprintf(inc, n, "%s/include/ckptc", exe);
            snprintf(lib, n, "%s/lib", exe);
            return;
        }
    }
    snprintf(inc, n, "%s/include/ckptc", CK_INSTALL_PREFIX);
    snprintf(lib, n, "%s/lib", CK_INSTALL_PREFIX);
}

/* After -o DIR: what was written and the planned peak by category. */
static void print_summary(const ck_graph *g, const ck_codegen_options *co) {
    const int64_t *b = g->plan.bytes;
    printf("ckptc: wrote %s/{%s.c,weights.bin,plan.json,Makefile}: %d nodes", co->out_dir, co->program_name, g->n_nodes);
    if (g->loss) printf(", %d trainable parameters, %d segments recomputed", g->n_train, g->n_segments);
    printf("\n       planned peak %lld bytes: params %lld, inputs %lld, activations %lld, workspace %lld", (long long)g->plan.arena_bytes,
           (long long)b[CK_MEM_PARAMS], (long long)b[CK_MEM_INPUTS], (long long)b[CK_MEM_ACTIVATIONS], (long long)b[CK_MEM_WORKSPACE]);
    if (g->loss) printf(", grads %lld, optimizer state %lld", (long long)b[CK_MEM_GRADS], (long long)b[CK_MEM_OPT_STATE]);
    if (g->plan.host_bytes) printf("; host pool %lld bytes (%lld offloaded per step)", (long long)g->plan.host_bytes, (long long)g->plan.offload_bytes);
    printf("\n");
}

ck_status ck_compile(const char *path, const ck_load_options *lo, const ck_options *o, const ck_codegen_options *co, ck_diag *d) {
    ck_graph *g = NULL;
    ck_diag notes = {0}; /* what the plan search chose */
    ck_status st = ck_frontend_load(path, lo, &g, d);
    if (!st) st = ck_pass_lower(g, o, d);
    if (!st && !o->infer) st = ck_pass_loss(g, o, d);
    if (!st && !o->infer) st = ck_pass_autodiff(g, o, d);
    char warning[2048];
    if (!st && !o->infer && ck_trainable_warning(g, warning, sizeof warning)) fprintf(stderr, "ckptc: warning: %s\n", warning);
    if (!st && !o->infer) st = ck_pass_optimizer(g, o, d);
    if (!st) st = ck_pass_fold_transposes(g, o, d);
    /* checkpoint -> data_parallel -> early_update -> codegen check -> plan, once or per try */
    if (!st) st = ck_plan_search(&g, o, ck_codegen_check, &notes, d);
    for (int i = 0; i < notes.n; i++) printf("%s\n", notes.msg[i]);
    if (!st && co->explain) explain(g);
    if (!st && co->plan_only) print_plan(g, o, co->explain);
    else if (!st) st = ck_codegen(g, o, co, d);
    if (!st && !co->plan_only) print_summary(g, co);
    ck_diag_clear(&notes);
    ck_graph_free(g);
    return st;
}
