/* codegen.c — writes DIR/model.c, DIR/weights.bin, DIR/plan.json and DIR/Makefile.
 *
 * model.c is meant to be read: a provenance header, then the step function in which each node
 * is a comment (name, op, shapes) plus one libckrt call on literal arena offsets, then the input
 * and output tables and main(). Everything shape-dependent was decided at compile time, so the
 * calls carry plain numbers. The per-op call is printed by the emitter named in the op's kernel
 * column of ops.def (emit_*.c); this file only does the frame.
 *
 * Reproducible by construction: no timestamps, no hash-order iteration, fixed number formats
 * (floats printed as exact hexadecimal literals).
 */
#include "emit.h"
#include "ckrt_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const ck_emit_fn emitters[CK_OP_COUNT] = {
#define CK_OP(e, onnx, in_min, in_max, out_min, out_max, flags, diff, infer, grad, kernel, ws, flops, fold, view, in_place) [CK_OP_##e] = ck_emit_##kernel,
#include "ops.def"
#undef CK_OP
};

/* ---------------------------------------------------------------- helpers for emitters */

void ck_emit_printf(ck_emit *e, const char *fmt, ...) {
    if (!e->f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(e->f, fmt, ap);
    va_end(ap);
}

void ck_emit_call(ck_emit *e, const char *entry) {
    ck_emit_printf(e, "    CKRT_TRY(ckrt_%s(c", entry);
    if (!e->calls) return;
    for (int i = 0; i < e->calls->n; i++)
        if (strcmp(e->calls->entry[i], entry) == 0) return;
    CK_ASSERT(e->calls->n < (int)(sizeof e->calls->entry / sizeof e->calls->entry[0]));
    e->calls->entry[e->calls->n++] = entry;
}

const char *ck_emit_ctype(ck_dtype t) {
    switch (t) {
    case CK_F32: return "float";
    case CK_F64: return "double";
    case CK_I64: return "int64_t";
    case CK_I32: return "int32_t";
    case CK_I16: return "int16_t";
    case CK_I8: return "int8_t";
    case CK_U8: case CK_BOOL: return "uint8_t";
    case CK_F16: return "uint16_t";
    default: return "void";
    }
}

const char *ck_emit_dtype(ck_dtype t) {
    static const char *names[] = {"CKRT_UNDEF", "CKRT_F32", "CKRT_U8", "CKRT_I8", "CKRT_I16", "CKRT_I32",
                                  "CKRT_I64", "CKRT_BOOL", "CKRT_F16", "CKRT_F64"};
    return t < CK_DTYPE_COUNT ? names[t] : "CKRT_UNDEF";
}

void ck_emit_ptr(ck_emit *e, const ck_value *v, bool is_const) {
    ck_emit_printf(e, "(%s%s *)(A + %lld)", is_const ? "const " : "", ck_emit_ctype(v->dtype), (long long)v->offset);
}

void ck_emit_i64s(ck_emit *e, int n, const int64_t *xs) {
    if (n == 0) {
        ck_emit_printf(e, "NULL");
        return;
    }
    ck_emit_printf(e, "(const int64_t[]){");
    for (int i = 0; i < n; i++) ck_emit_printf(e, i ? ", %lld" : "%lld", (long long)xs[i]);
    ck_emit_printf(e, "}");
}

void ck_emit_bcast_strides(const ck_value *v, int out_rank, const int64_t *out_dims, int64_t *strides) {
    int64_t s = 1;
    for (int k = out_rank - 1; k >= 0; k--) {
        int vk = k - (out_rank - v->rank);
        if (vk < 0 || v->dims[vk] == 1) {
            strides[k] = 0;
        } else {
            strides[k] = s;
        }
        if (vk >= 0) s *= v->dims[vk];
    }
    (void)out_dims;
}

ck_status ck_emit_unsupported(ck_emit *e, const ck_node *n, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ck_diag_add(e->d, "node '%s' (%s): %s", n->name, ck_ops[n->op].onnx_name, buf);
    return CK_ERR_UNSUPPORTED;
}

ck_status ck_emit_want_dtype(ck_emit *e, const ck_node *n, const ck_value *v, const char *what, const ck_dtype *ok) {
    char list[200] = "";
    for (int i = 0; ok[i] != CK_UNDEF; i++) {
        if (v->dtype == ok[i]) return CK_OK;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", ck_dtype_name(ok[i]));
    }
    return ck_emit_unsupported(e, n, "%s '%s' has dtype %s; ckptc supports %s here", what, v->name,
                               ck_dtype_name(v->dtype), list);
}

/* ---------------------------------------------------------------- frame */

static void c_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f) fprintf(f, "\\%03o", *p);
        else if (*p == '?' && p[1] == '?') fprintf(f, "?\"\"");  /* no trigraphs */
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* "layers.0/fc1" in a comment must not close it */
static void c_comment_text(FILE *f, const char *s) {
    for (const char *p = s; *p; p++) {
        if (p[0] == '*' && p[1] == '/') fputs("* /", f), p++;
        else if ((unsigned char)*p < 0x20) fputc(' ', f);
        else fputc(*p, f);
    }
}

/* NAME -> a file name: [A-Za-z0-9._-] kept, everything else '_'; never empty, never hidden. */
static void sanitize(const char *name, char *out, size_t n) {
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < n; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
                  ch == '_' || (ch == '.' && k > 0);
        out[k++] = ok ? ch : '_';
    }
    if (k == 0) out[k++] = '_';
    out[k] = 0;
}

static int64_t io_fill_hi(const ck_graph *g, const ck_value *v) {
    /* integer inputs used as Gather indices are drawn inside the gathered axis */
    int64_t hi = INT64_MAX;
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->op == CK_OP_CROSS_ENTROPY && n->in[1] == v) { /* labels: class indices */
            int64_t classes = n->in[0]->dims[n->in[0]->rank - 1];
            if (classes < hi) hi = classes;
        }
        if (n->op != CK_OP_GATHER || n->in[1] != v) continue;
        int64_t axis = ck_attr_int(n, "axis", 0);
        if (axis < 0) axis += n->in[0]->rank;
        if (n->in[0]->dims[axis] < hi) hi = n->in[0]->dims[axis];
    }
    return hi == INT64_MAX ? 10 : hi;
}

/* The start of a ckrt_io / ckrt_state entry: `    {"name", "file", CKRT_F32, rank, {dims}` */
static void emit_entry_head(FILE *f, const ck_value *v, const char *file) {
    fprintf(f, "    {");
    c_string(f, v->name);
    fprintf(f, ", ");
    c_string(f, file);
    fprintf(f, ", %s, %d, {", ck_emit_dtype(v->dtype), v->rank);
    for (int k = 0; k < v->rank; k++) fprintf(f, k ? ", %lld" : "%lld", (long long)v->dims[k]);
    fprintf(f, "}");
}

static void emit_io_table(FILE *f, const ck_graph *g, const char *cname, int n, ck_value *const *vs) {
    fprintf(f, "static const ckrt_io %s[] = {\n", cname);
    for (int i = 0; i < n; i++) {
        const ck_value *v = vs[i];
        char file[256];
        sanitize(v->name, file, sizeof file);
        /* two outputs sanitizing to the same name get an index suffix */
        for (int k = 0; k < i; k++) {
            char other[256];
            sanitize(vs[k]->name, other, sizeof other);
            if (strcmp(other, file) == 0) snprintf(file + strlen(file), sizeof file - strlen(file), "_%d", i);
        }
        emit_entry_head(f, v, file);
        fprintf(f, ", %lld, 0, %lld},\n", (long long)v->offset, (long long)(ck_dtype_is_int(v->dtype) ? io_fill_hi(g, v) : 0));
    }
    if (n == 0) fprintf(f, "    {0},\n");
    fprintf(f, "};\n\n");
}

static ck_status emit_node(ck_emit *e, const ck_node *n) {
    if (ck_node_is_view(n, e->o)) return CK_OK; /* shares its input's bytes */
    return emitters[n->op](e, n);
}

/* Runs every node's emitter without writing (checks what it can emit); records the entry points
 * the program will call in calls when not NULL. */
static ck_status check_nodes(const ck_graph *g, const ck_options *o, ck_diag *d, ck_emit_calls *calls) {
    ck_emit e = {.f = NULL, .g = g, .o = o, .d = d, .calls = calls};
    ck_status worst = CK_OK;
    for (int i = 0; i < g->n_nodes; i++) {
        ck_status st = emit_node(&e, g->nodes[i]);
        if (st) worst = st; /* report every node that cannot be emitted */
    }
    return worst;
}

ck_status ck_codegen_check(const ck_graph *g, const ck_options *o, ck_diag *d) { return check_nodes(g, o, d, NULL); }

/* The plan's side of the trainer's report, as JSON members: policy, breakdown at the peak,
 * FLOPs per phase, segments, and what holds the peak. */
static char *report_members(const ck_graph *g, const ck_options *o) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    const ck_mem_plan *p = &g->plan;
    char policy[256];
    snprintf(policy, sizeof policy, "%s%s", o->policy_name ? o->policy_name : "none", p->host_bytes ? "+offload" : "");
    fprintf(f, "\"policy\": ");
    ckrt_json_str(f, policy);
    fprintf(f, ",\n  \"breakdown\": {\"params\": %lld, \"inputs\": %lld, \"grads\": %lld, \"optimizer_state\": %lld, "
               "\"saved_activations\": %lld, \"transient\": %lld, \"workspace\": %lld},\n",
            (long long)p->bytes[CK_MEM_PARAMS], (long long)p->bytes[CK_MEM_INPUTS], (long long)p->bytes[CK_MEM_GRADS],
            (long long)p->bytes[CK_MEM_OPT_STATE], (long long)p->saved_bytes, (long long)p->transient_bytes,
            (long long)p->bytes[CK_MEM_WORKSPACE]);
    fprintf(f, "  \"host_offload_peak_bytes\": %lld,\n  \"offload_bytes_per_step\": %lld,\n", (long long)p->host_bytes,
            (long long)p->offload_bytes);
    int64_t fl[CK_STEP_FLOPS]; /* forward, backward, recompute, update */
    ck_step_flops(g, o, fl);
    fprintf(f, "  \"forward_flops\": %lld,\n  \"backward_flops\": %lld,\n  \"recompute_flops\": %lld,\n  \"update_flops\": %lld,\n",
            (long long)fl[0], (long long)fl[1], (long long)fl[2], (long long)fl[3]);
    fprintf(f, "  \"segments\": [");
    for (int i = 0; i < g->n_segments; i++) {
        const ck_segment *sg = &g->segments[i];
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        ckrt_json_str(f, sg->name);
        fprintf(f, ", \"first_node\": ");
        ckrt_json_str(f, sg->first_node);
        fprintf(f, ", \"last_node\": ");
        ckrt_json_str(f, sg->last_node);
        fprintf(f, ", \"saved_bytes\": %lld}", (long long)sg->saved_bytes);
    }
    fprintf(f, "%s],\n", g->n_segments ? "\n  " : "");
    const ck_node *pn = g->n_nodes ? g->nodes[p->peak_step] : NULL;
    static const char *phase[] = {"forward", "backward", "update"};
    fprintf(f, "  \"peak\": {\"step\": %d, \"node\": ", p->peak_step);
    ckrt_json_str(f, pn ? pn->name : "");
    fprintf(f, ", \"phase\": \"%s\", \"top\": [", pn ? (pn->recompute_of ? "recompute" : phase[pn->phase]) : "");
    /* the five largest buffers live at the peak */
    const ck_value *top[5] = {0};
    for (int i = 0; i < g->n_values; i++) {
        const ck_value *v = g->values[i];
        if (!v->producer || v->alias || v->host || v->live_first > p->peak_step || v->live_last < p->peak_step) continue;
        for (int k = 0; k < 5; k++)
            if (!top[k] || ck_value_bytes(v) > ck_value_bytes(top[k])) {
                memmove(&top[k + 1], &top[k], sizeof *top * (size_t)(4 - k));
                top[k] = v;
                break;
            }
    }
    for (int k = 0; k < 5 && top[k]; k++) {
        fprintf(f, "%s{\"name\": ", k ? ", " : "");
        ckrt_json_str(f, top[k]->name);
        fprintf(f, ", \"bytes\": %lld, \"produced_by\": ", (long long)ck_value_bytes(top[k]));
        ckrt_json_str(f, top[k]->producer->name);
        fprintf(f, "}");
    }
    fprintf(f, "]}");
    /* --data-parallel: the communication buffers in the plan, one staging per bucket, each live
     * from its GradAllReduce to its GradAllReduceWait (ws_last) */
    int nb = 0, ng = 0, live_peak = 0;
    int64_t tot = 0, bucket = 0, most = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->op != CK_OP_GRAD_ALLREDUCE) continue;
        int64_t w = ck_attr_int(n, "staging_floats", 1), live = 0; /* stagings live with this one at its start */
        for (int j = 0; j <= i; j++)
            if (g->nodes[j]->op == CK_OP_GRAD_ALLREDUCE && g->nodes[j]->ws_last >= i) live += g->nodes[j]->ws_bytes;
        fprintf(f, nb ? ",\n    " : ",\n  \"data_parallel_plan\": {\"stagings\": [\n    ");
        fprintf(f, "{\"bucket\": %d, \"gradients\": %d, \"step\": %d, \"until_step\": %d, \"offset\": %lld, \"bytes\": %lld}", nb, n->n_in,
                i, n->ws_last, (long long)n->ws_offset, (long long)n->ws_bytes);
        nb++, ng += n->n_in;
        tot = ck_attr_int(n, "gradient_floats", 0);
        if (4 * w > bucket) bucket = 4 * w;
        if (live > most) most = live;
        if (i <= p->peak_step && p->peak_step <= n->ws_last) live_peak = 1;
    }
    if (nb)
        fprintf(f, "],\n    \"gradients\": %d, \"gradient_bytes\": %lld, \"bucket_bytes\": %lld, \"buckets\": %d, "
                   "\"staging_bytes\": %lld, \"staging_live_at_peak\": %s, \"gradients_averaged_in_place\": true}",
                ng, (long long)tot * 4, (long long)bucket, nb, (long long)most, live_peak ? "true" : "false");
    fclose(f);
    return buf;
}

/* The generated file's opening: provenance and the plan's figures in a comment, the includes. */
static void write_prologue(const ck_graph *g, const ck_codegen_options *co, FILE *f) {
    const ck_mem_plan *p = &g->plan;
    fprintf(f, "/* Generated by ckptc %s. Do not edit.\n *\n * command:  ", CK_VERSION);
    c_comment_text(f, co->command_line);
    fprintf(f, "\n * model:    producer ");
    c_comment_text(f, *g->producer_name ? g->producer_name : "(none)");
    fprintf(f, " ");
    c_comment_text(f, g->producer_version);
    fprintf(f, ", ir_version %lld, opset %lld, graph ", (long long)g->ir_version, (long long)g->opset);
    c_comment_text(f, g->name);
    fprintf(f, "\n * memory:   arena %lld bytes planned: static %lld (params %lld, inputs %lld), peak activations %lld,"
               "\n *           workspace %lld\n */\n",
            (long long)p->arena_bytes, (long long)p->static_bytes, (long long)p->bytes[CK_MEM_PARAMS],
            (long long)p->bytes[CK_MEM_INPUTS], (long long)p->bytes[CK_MEM_ACTIVATIONS], (long long)p->bytes[CK_MEM_WORKSPACE]);
    fprintf(f, "#include \"ckrt.h\"\n\n#include <stddef.h>\n#include <stdint.h>\n\n");
}

/* Step i of the schedule, in phase function ph: a comment with its shapes, then its kernel call
 * (none for a view). train_ix: per parameter value id, its index in g->train_params. */
static ck_status write_node(ck_emit *e, int i, int ph, const int *train_ix) {
    const ck_graph *g = e->g;
    FILE *f = e->f;
    bool train = g->loss != NULL;
    const ck_node *n = g->nodes[i];
    char sh[CK_SHAPE_STR_MAX];
    fprintf(f, "\n    /* %d: ", i);
    c_comment_text(f, n->name);
    fprintf(f, " (%s)", ck_ops[n->op].onnx_name);
    for (int k = 0; k < n->n_in; k++) {
        if (!n->in[k]) continue;
        fprintf(f, "%s%s", k ? ", " : " ", ck_shape_str(n->in[k], sh, sizeof sh));
    }
    fprintf(f, " ->");
    for (int k = 0; k < n->n_out; k++)
        if (n->out[k]) fprintf(f, " %s", ck_shape_str(n->out[k], sh, sizeof sh));
    if (ck_node_is_view(n, e->o)) {
        fprintf(f, ": a view, no kernel */\n");
        return CK_OK;
    }
    fprintf(f, " */\n    CKRT_NODE(c, ");
    c_string(f, n->name);
    fprintf(f, ");\n");
    if (n->phase == CK_PHASE_UPDATE) { /* --dump-grads, --metrics: the gradient is final, its update comes next */
        fprintf(f, "    CKRT_GRAD_READY(c, %d, (const float *)(A + %lld), ", train_ix[n->in[0]->id], (long long)n->in[1]->offset);
        if (ck_attr_int(n, "accum", 0)) fprintf(f, "(const float *)(A + %lld)", (long long)n->in[n->n_in - 1]->offset);
        else fprintf(f, "NULL");
        fprintf(f, ", %lld);\n", (long long)ck_value_bytes(n->in[1]));
    }
    ck_status st = emitters[n->op](e, n);
    if (st) return st;
    /* to name the first NaN when a loss goes non-finite; not an offloaded copy (it lives in
     * the host pool, not at its offset in the arena, and its source was checked) */
    if (train && ph == CK_PHASE_FORWARD)
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k] && n->out[k]->dtype == CK_F32 && !n->out[k]->host &&
                (n->op != CK_OP_BATCH_NORM || ck_emit_batch_norm_writes(e, n, k)))
                fprintf(f, "    CKRT_CHECK_FINITE(c, (const float *)(A + %lld), %lld);\n", (long long)n->out[k]->offset,
                        (long long)ck_value_numel(n->out[k]));
    return CK_OK;
}

/* The step functions: step() for --infer; for training forward() (the forward nodes, a prefix:
 * the loss is known when it returns), update() (the updates after the last other node) and
 * backward() (everything in between, the updates ck_pass_early_update moved included; with
 * --update-at-end every update is in update()). */
static ck_status write_steps(const ck_graph *g, const ck_options *o, FILE *f, ck_diag *d) {
    bool train = g->loss != NULL;
    static const char *phase_fn[] = {"forward", "backward", "update"};
    ck_emit e = {.f = f, .g = g, .o = o, .d = d};
    int nn = g->n_nodes, end[3] = {nn, nn, nn}, *train_ix = calloc((size_t)g->next_value_id + 1, sizeof *train_ix);
    CK_ASSERT(train_ix);
    for (int k = 0; k < g->n_train; k++) train_ix[g->train_params[k]->id] = k;
    if (train) {
        end[0] = 0;
        while (end[0] < nn && g->nodes[end[0]]->phase == CK_PHASE_FORWARD) end[0]++;
        while (end[1] > end[0] && g->nodes[end[1] - 1]->phase == CK_PHASE_UPDATE) end[1]--;
    }
    for (int ph = 0; ph < (train ? 3 : 1); ph++) {
        fprintf(f, "static int %s(ckrt_ctx *c) {\n    unsigned char *A = c->arena;\n", train ? phase_fn[ph] : "step");
        fprintf(f, "    unsigned char *H = c->host;\n    (void)A, (void)H;\n");
        for (int i = ph ? end[ph - 1] : 0; i < end[ph]; i++) {
            ck_status st = write_node(&e, i, ph, train_ix);
            if (st) {
                free(train_ix);
                return st;
            }
        }
        fprintf(f, "    return CKRT_OK;\n}\n\n");
    }
    free(train_ix);
    return CK_OK;
}

/* Training: the state table, trainable parameters with their gradients, then buffers (BatchNorm
 * running stats). Returns its length. */
static int write_state(const ck_graph *g, FILE *f) {
    int n_state = 0;
    /* per parameter value id: its --grad-accum accumulator's offset + 1 (0: none) */
    int64_t *acc = calloc((size_t)g->next_value_id + 1, sizeof *acc);
    CK_ASSERT(acc);
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->phase == CK_PHASE_UPDATE && ck_attr_int(n, "accum", 0)) acc[n->in[0]->id] = n->in[n->n_in - 1]->offset + 1;
    }
    fprintf(f, "static const ckrt_state state[] = {\n");
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < (pass ? g->n_values : g->n_train); i++) {
            const ck_value *v = pass ? g->values[i] : g->train_params[i];
            if (pass && v->role != CK_ROLE_BUFFER) continue;
            char file[256];
            sanitize(v->name, file, sizeof file);
            emit_entry_head(f, v, file);
            fprintf(f, ", %lld, %lld, %lld},\n", (long long)v->offset, (long long)(pass ? -1 : g->train_grads[i]->offset),
                    (long long)(pass ? -1 : acc[v->id] - 1));
            n_state++;
        }
    free(acc);
    if (!n_state) fprintf(f, "    {0},\n");
    fprintf(f, "};\n\n");
    return n_state;
}

/* Training, --export-onnx: the source model's files (path, size, checksum now) and, per state
 * entry in write_state's order, where its payload lies in them. Nothing when the model came from
 * memory or a file cannot be read now (the trainer then says it cannot export). Returns whether
 * the table was written. */
static bool write_source(const ck_graph *g, FILE *f) {
    const ck_source *src = g->source;
    if (!src || !src->files[0].path) return false;
    uint64_t *sums = calloc((size_t)src->n_files, sizeof *sums), size = 0;
    bool ok = sums != NULL;
    for (int k = 0; ok && k < src->n_files; k++)
        ok = src->files[k].path && ckrt_checksum_file(src->files[k].path, &size, &sums[k]) && size == src->files[k].size;
    ck_map *by_name = ok ? ck_map_new(g->arena, src->n_payloads + 16) : NULL;
    if (!by_name) ok = false;
    for (int i = 0; ok && i < src->n_payloads; i++) ck_map_put(by_name, src->payloads[i].name, &src->payloads[i]);
    if (ok) {
        fprintf(f, "static const ckrt_model_file source_files[] = {\n");
        for (int k = 0; k < src->n_files; k++) {
            fprintf(f, "    {");
            c_string(f, k ? src->files[k].location : src->files[k].path);
            fprintf(f, ", %lluull, 0x%016llxull},\n", (unsigned long long)src->files[k].size, (unsigned long long)sums[k]);
        }
        fprintf(f, "};\n\nstatic const ckrt_model_range source_ranges[] = {\n");
        int n = 0;
        for (int pass = 0; pass < 2; pass++) /* write_state's order */
            for (int i = 0; i < (pass ? g->n_values : g->n_train); i++) {
                const ck_value *v = pass ? g->values[i] : g->train_params[i];
                if (pass && v->role != CK_ROLE_BUFFER) continue;
                const ck_payload *q = ck_map_get(by_name, v->name);
                /* the loaded initializer itself (not a value a pass made under its name), whole */
                bool fits = q && v->initializer && q->file >= 0 && q->length == (uint64_t)ck_value_numel(v) * ck_dtype_size(v->dtype);
                fprintf(f, "    {%d, %lld, %lld},\n", fits ? q->file : -1, fits ? (long long)q->offset : 0LL,
                        fits ? (long long)q->length : 0LL);
                n++;
            }
        if (!n) fprintf(f, "    {0, 0, 0},\n");
        fprintf(f, "};\n\nstatic const ckrt_model_source source = {%d, source_files, source_ranges};\n\n", src->n_files);
    }
    free(sums);
    return ok;
}

/* Training: the program's report members, policy and planned timeline (phase and segment starts
 * marked, for --timeline). */
static void write_train_members(const ck_graph *g, const ck_options *o, FILE *f) {
    const ck_mem_plan *p = &g->plan;
    char *rep = report_members(g, o);
    char policy[256];
    snprintf(policy, sizeof policy, "%s%s", o->policy_name ? o->policy_name : "none", g->plan.host_bytes ? "+offload" : "");
    fprintf(f, "    .policy = ");
    c_string(f, policy);
    fprintf(f, ",\n    .lr = %a", (double)(float)o->lr);
    fprintf(f, ",\n    .report_json = ");
    c_string(f, rep ? rep : "");
    fprintf(f, ",\n");
    free(rep);
    /* the planned live memory per step, for --timeline: phase starts (the backward's first
     * node, the first update) and segment starts marked */
    int fb = g->n_nodes, fu = g->n_nodes;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        if (g->nodes[i]->phase != CK_PHASE_FORWARD) fb = i;
        if (g->nodes[i]->phase == CK_PHASE_UPDATE) fu = i;
    }
    fprintf(f, "    .n_timeline = %d,\n    .timeline = (const int64_t[]){", p->n_timeline);
    for (int i = 0; i < p->n_timeline; i++) fprintf(f, "%s%lld", i ? (i % 16 ? ", " : ",\n        ") : "", (long long)p->timeline[i]);
    fprintf(f, "},\n    .backward_step = %d,\n    .update_step = %d,\n    .peak_step = %d,\n", fb, fu, p->peak_step);
    int nrs = 0;
    fprintf(f, "    .recompute_steps = (const int[]){");
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->recompute_of && (i == 0 || !g->nodes[i - 1]->recompute_of)) fprintf(f, "%s%d", nrs++ ? ", " : "", i);
    fprintf(f, "%s},\n    .n_recompute_steps = %d,\n", nrs ? "" : "0", nrs);
}

static ck_status write_model_c(const ck_graph *g, const ck_options *o, const ck_codegen_options *co, uint64_t weights_layout,
                               int64_t weights_bytes, FILE *f, ck_diag *d) {
    const ck_mem_plan *p = &g->plan;
    bool train = g->loss != NULL;
    write_prologue(g, co, f);
    ck_status st = write_steps(g, o, f, d);
    if (st) return st;
    emit_io_table(f, g, "inputs", g->n_inputs, g->inputs);
    emit_io_table(f, g, "outputs", g->n_outputs, g->outputs);
    int n_state = train ? write_state(g, f) : 0;
    bool source = train && write_source(g, f); /* --export-onnx */
    fprintf(f, "static const ckrt_program program = {\n    .name = ");
    c_string(f, co->program_name);
    fprintf(f, ",\n    .provenance = ");
    char prov[4096];
    snprintf(prov, sizeof prov, "ckptc %s: %s", CK_VERSION, co->command_line);
    c_string(f, prov);
    fprintf(f, ",\n    .arena_bytes = %lld,\n    .static_bytes = %lld,\n    .weights_bytes = %lld,\n",
            (long long)p->arena_bytes, (long long)p->static_bytes, (long long)weights_bytes);
    fprintf(f, "    .weights_layout = 0x%016llxull,\n", (unsigned long long)weights_layout);
    fprintf(f, "    .planned_bytes = {");
    for (int k = 0; k < CK_MEM_COUNT; k++) fprintf(f, "%s%lld", k ? ", " : "", (long long)p->bytes[k]);
    fprintf(f, "},\n");
    fprintf(f, "    .n_inputs = %d,\n    .n_outputs = %d,\n    .inputs = inputs,\n    .outputs = outputs,\n", g->n_inputs,
            g->n_outputs);
    if (train) write_train_members(g, o, f);
    if (train)
        fprintf(f, "    .forward = forward,\n    .backward = backward,\n    .update = update,\n    .loss_offset = %lld,\n"
                   "    .n_state = %d,\n    .state = state,\n    .host_bytes = %lld,\n    .offload_bytes = %lld,\n",
                (long long)g->loss->offset, n_state, (long long)p->host_bytes, (long long)p->offload_bytes);
    else
        fprintf(f, "    .step = step,\n");
    if (train && o->grad_accum) fprintf(f, "    .grad_accum = 1,\n");
    bool at_end = true; /* no update before the last other node: update() holds them all */
    for (int i = 0, seen_update = 0; train && i < g->n_nodes; i++) {
        if (g->nodes[i]->phase == CK_PHASE_UPDATE) seen_update = 1;
        else if (seen_update) at_end = false;
    }
    if (train && at_end) fprintf(f, "    .updates_at_end = 1,\n");
    if (train && o->clip_grad_norm > 0) fprintf(f, "    .clip_grad_norm = %a,\n", o->clip_grad_norm);
    if (train && o->data_parallel) fprintf(f, "    .comm_init = ckrt_mpi_comm_init, /* --data-parallel: mpirun -np N */\n");
    if (source) fprintf(f, "    .source = &source, /* --export-onnx */\n");
    fprintf(f, "};\n\nint main(int argc, char **argv) { return ckrt_main(&program, argc, argv); }\n");
    return CK_OK;
}

static bool in_weights(const ck_value *v) { return !v->producer && !v->alias && v->data && v->role != CK_ROLE_INPUT; }

static void put(unsigned char **p, const void *src, size_t n) {
    memcpy(*p, src, n);
    *p += n;
}

#define WEIGHTS_CHUNK ((size_t)4 << 20) /* a multiple of 8: every piece but the last checksums whole words */

/* The payload goes out in WEIGHTS_CHUNK pieces, checksummed on the way: whole chunks of a
 * tensor straight from its data (a file mapping, the parsed protobuf, the arena), the rest
 * (tensor edges, alignment zeros) gathered in one chunk buffer. Each piece written is handed back
 * to the graph (ck_graph_data_done), which drops mapped pages: the writer's memory is the buffer,
 * whatever the weights weigh. */
typedef struct wstream {
    const ck_graph *g;
    FILE *f;
    unsigned char *buf;
    size_t fill;
    uint64_t sum;
    bool ok;
} wstream;

static void ws_write(wstream *w, const void *p, size_t n) {
    w->sum = ckrt_checksum_update(w->sum, p, n);
    if (w->ok && fwrite(p, 1, n, w->f) != n) w->ok = false;
}

static void ws_flush(wstream *w) {
    if (w->fill) ws_write(w, w->buf, w->fill);
    w->fill = 0;
}

static void ws_put(wstream *w, const unsigned char *p, size_t n) { /* p NULL: zeros */
    while (n) {
        if (p && !w->fill && n >= WEIGHTS_CHUNK) {
            ws_write(w, p, WEIGHTS_CHUNK);
            ck_graph_data_done(w->g, p, WEIGHTS_CHUNK);
            p += WEIGHTS_CHUNK, n -= WEIGHTS_CHUNK;
            continue;
        }
        size_t k = n < WEIGHTS_CHUNK - w->fill ? n : WEIGHTS_CHUNK - w->fill;
        if (p) {
            memcpy(w->buf + w->fill, p, k);
            ck_graph_data_done(w->g, p, k);
            p += k;
        } else {
            memset(w->buf + w->fill, 0, k);
        }
        w->fill += k, n -= k;
        if (w->fill == WEIGHTS_CHUNK) ws_flush(w);
    }
}

static int by_offset(const void *pa, const void *pb) {
    const ck_value *a = *(const ck_value *const *)pa, *b = *(const ck_value *const *)pb;
    return a->offset < b->offset ? -1 : a->offset > b->offset ? 1 : a->id - b->id;
}

/* weights.bin (see runtime/ckrt_util.h): header, tensor table, payload = the arena's
 * [0, weights_bytes). *layout receives the hash of the table, which the program checks. The
 * header, written last, carries the payload's checksum. */
static bool write_weights(const ck_graph *g, const char *path, uint64_t *layout) {
    int64_t bytes = g->plan.weights_bytes;
    size_t tsize = 0;
    uint32_t ntens = 0;
    for (int i = 0; i < g->n_values; i++)
        if (in_weights(g->values[i])) {
            tsize += 4 + strlen(g->values[i]->name) + 12 + 8 * (size_t)g->values[i]->rank + 16;
            ntens++;
        }
    size_t payload_at = (CKRT_WEIGHTS_HEADER + tsize + 63) / 64 * 64;
    unsigned char *head = calloc(payload_at, 1);
    const ck_value **ws = malloc(((size_t)ntens + 1) * sizeof *ws);
    wstream w = {.g = g, .buf = malloc(WEIGHTS_CHUNK), .sum = CKRT_CHECKSUM_INIT, .ok = true};
    bool ok = false;
    if (!head || !ws || !w.buf) goto done;
    unsigned char *t = head + CKRT_WEIGHTS_HEADER;
    uint32_t nw = 0;
    for (int i = 0; i < g->n_values; i++) {
        const ck_value *v = g->values[i];
        if (!in_weights(v)) continue;
        uint32_t nl = (uint32_t)strlen(v->name), dt = (uint32_t)v->dtype, rk = (uint32_t)v->rank, role = (uint32_t)v->role;
        uint64_t off = (uint64_t)v->offset, nb = ck_value_bytes(v);
        put(&t, &nl, 4), put(&t, v->name, nl), put(&t, &dt, 4), put(&t, &role, 4), put(&t, &rk, 4);
        put(&t, v->dims, 8 * (size_t)v->rank), put(&t, &off, 8), put(&t, &nb, 8);
        CK_ASSERT(v->offset >= 0 && (int64_t)(off + nb) <= bytes);
        ws[nw++] = v;
    }
    *layout = ckrt_checksum(head + CKRT_WEIGHTS_HEADER, tsize) ^ (uint64_t)bytes;
    qsort(ws, nw, sizeof *ws, by_offset);
    if (!(w.f = fopen(path, "wb"))) goto done;
    w.ok = fwrite(head, 1, payload_at, w.f) == payload_at; /* the header is rewritten once the checksum is known */
    int64_t at = 0;
    for (uint32_t i = 0; i < nw && w.ok; i++) {
        const ck_value *v = ws[i];
        CK_ASSERT(v->offset >= at); /* the planner lays the static region out without overlap */
        ws_put(&w, NULL, (size_t)(v->offset - at));
        ws_put(&w, v->data, ck_value_bytes(v));
        at = v->offset + (int64_t)ck_value_bytes(v);
    }
    ws_put(&w, NULL, (size_t)(bytes - at));
    ws_flush(&w);
    uint32_t version = CKRT_WEIGHTS_VERSION;
    uint64_t b = (uint64_t)bytes, sum = w.sum, pa = payload_at;
    unsigned char *h = head;
    put(&h, CKRT_WEIGHTS_MAGIC, 8), put(&h, &version, 4), put(&h, &ntens, 4), put(&h, &b, 8), put(&h, &sum, 8), put(&h, &pa, 8);
    put(&h, layout, 8);
    ok = w.ok && fseeko(w.f, 0, SEEK_SET) == 0 && fwrite(head, 1, CKRT_WEIGHTS_HEADER, w.f) == CKRT_WEIGHTS_HEADER;
    ok = (fclose(w.f) == 0) && ok;
    ck_stats.streamed_bytes += bytes;
    if (ck_stats.stream_buffer < (int64_t)WEIGHTS_CHUNK) ck_stats.stream_buffer = (int64_t)WEIGHTS_CHUNK;
done:
    free(head), free(ws), free(w.buf);
    return ok;
}

/* "fused": per ckptc.Fused node (passes/fuse.c) its step, name, members (ops in program order)
 * and the member results it keeps out of memory. */
static void write_fused_json(const ck_graph *g, FILE *f) {
    fprintf(f, "  \"fused\": [");
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->op != CK_OP_FUSED) continue;
        fprintf(f, "%s\n    {\"step\": %d, \"node\": ", k++ ? "," : "", i);
        ckrt_json_str(f, n->name);
        fprintf(f, ", \"ops\": [");
        for (int j = 0; j < n->n_fused; j++) {
            fprintf(f, "%s{\"node\": ", j ? ", " : "");
            ckrt_json_str(f, n->fused[j]->name);
            fprintf(f, ", \"op\": \"%s\"}", ck_ops[n->fused[j]->op].onnx_name);
        }
        fprintf(f, "], \"fused_away\": [");
        int a = 0;
        for (int j = 0; j < n->n_fused; j++) {
            const ck_value *v = n->fused[j]->out[0];
            bool out = false;
            for (int o = 0; o < n->n_out; o++) out |= n->out[o] == v;
            if (out) continue;
            fprintf(f, "%s{\"name\": ", a++ ? ", " : "");
            ckrt_json_str(f, v->name);
            fprintf(f, ", \"bytes\": %lld}", (long long)ck_value_bytes(v));
        }
        fprintf(f, "]}");
    }
    fprintf(f, "%s]\n", k ? "\n  " : "");
}

static void write_plan_json(const ck_graph *g, FILE *f) {
    const ck_mem_plan *p = &g->plan;
    fprintf(f, "{\n  \"arena_bytes\": %lld,\n  \"static_bytes\": %lld,\n  \"dynamic_lower_bound\": %lld,\n",
            (long long)p->arena_bytes, (long long)p->static_bytes, (long long)p->dynamic_lower_bound);
    fprintf(f, "  \"bytes\": {");
    for (int k = 0; k < CK_MEM_COUNT; k++) fprintf(f, "%s\"%s\": %lld", k ? ", " : "", ck_mem_cat_name((ck_mem_cat)k), (long long)p->bytes[k]);
    fprintf(f, "},\n");
    fprintf(f, "  \"buffers\": [\n");
    bool first = true;
    for (int i = 0; i < g->n_values; i++) {
        const ck_value *v = g->values[i];
        const char *cat = v->role == CK_ROLE_INPUT ? "inputs" : v->role == CK_ROLE_OPT_STATE ? "optimizer_state"
                        : v->role == CK_ROLE_GRAD ? "grads" : v->producer ? "activations" : "params";
        fprintf(f, "%s    {\"name\": ", first ? "" : ",\n");
        first = false;
        ckrt_json_str(f, v->name);
        fprintf(f, ", \"category\": \"%s\", \"offset\": %lld, \"bytes\": %lld, \"first\": %d, \"last\": %d%s", cat,
                (long long)v->offset, (long long)ck_value_bytes(v), v->live_first, v->live_last, v->host ? ", \"host\": true" : "");
        if (v->alias) fprintf(f, ", \"view_of\": %d", v->alias->id);
        fprintf(f, ", \"id\": %d}", v->id);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ck_node *n = g->nodes[i];
        if (n->ws_bytes <= 0) continue;
        fprintf(f, ",\n    {\"name\": \"%s of node %d\", \"category\": \"workspace\", \"offset\": %lld, \"bytes\": %lld, "
                   "\"steps\": [%d, %d]}",
                n->op == CK_OP_GRAD_ALLREDUCE ? "communication staging" : "workspace", i, (long long)n->ws_offset, (long long)n->ws_bytes,
                i, n->ws_last);
    }
    fprintf(f, "\n  ],\n");
    write_fused_json(g, f);
    fprintf(f, "}\n");
}

static ck_status write_file(const char *dir, const char *name, ck_diag *d, FILE **out) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *out = fopen(path, "w");
    if (!*out) {
        ck_diag_add(d, "cannot write '%s': %s", path, strerror(errno));
        return CK_ERR_IO;
    }
    return CK_OK;
}

#ifndef CK_CKRT_EXTRA_LIBS
#define CK_CKRT_EXTRA_LIBS ""
#endif

/* DIR/kernels.cu (emit_cuda.c): the CUDA wrappers of the entry points the program's C calls,
 * which the emitters record as they run over the graph. */
static ck_status write_kernels_cu(const ck_graph *g, const ck_options *o, const ck_codegen_options *co, ck_diag *d) {
    ck_emit_calls calls = {0};
    ck_status st = check_nodes(g, o, d, &calls); /* the same calls write_model_c emitted */
    FILE *f;
    if (!st) st = write_file(co->out_dir, "kernels.cu", d, &f);
    if (!st) {
        st = ck_codegen_kernels_cu(f, co->program_name, &calls);
        if (fclose(f) != 0 && !st) st = CK_ERR_IO;
        if (st) ck_diag_add(d, "cannot write '%s/kernels.cu'", co->out_dir);
    }
    return st;
}

/* dir and the folders above it that do not exist yet (as mkdir -p); false with a message naming
 * the folder that could not be made */
static bool make_dirs(const char *dir, ck_diag *d) {
    char p[4096];
    size_t n = strlen(dir);
    if (n >= sizeof p) {
        ck_diag_add(d, "output directory path too long (%zu bytes)", n);
        return false;
    }
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != 0) continue;
        if (p[i - 1] == '/') continue; /* "a//b", a trailing '/' */
        char keep = p[i];
        p[i] = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            ck_diag_add(d, "cannot create directory '%s': %s", p, strerror(errno));
            return false;
        }
        p[i] = keep;
    }
    return true;
}

ck_status ck_codegen(const ck_graph *g, const ck_options *o, const ck_codegen_options *co, ck_diag *d) {
    CK_ASSERT(g->plan.done);
    ck_status st = ck_codegen_check(g, o, d);
    if (st) return st;
    if (!make_dirs(co->out_dir, d)) return CK_ERR_IO;
    uint64_t layout = 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/weights.bin", co->out_dir);
    if (!write_weights(g, path, &layout)) {
        ck_diag_add(d, "cannot write '%s': %s", path, strerror(errno));
        return CK_ERR_IO;
    }
    FILE *f;
    char src[300];
    snprintf(src, sizeof src, "%s.c", co->program_name);
    if ((st = write_file(co->out_dir, src, d, &f))) return st;
    st = write_model_c(g, o, co, layout, g->plan.weights_bytes, f, d);
    if (fclose(f) != 0 && !st) st = CK_ERR_IO;
    if (st) return st;
    if ((st = write_kernels_cu(g, o, co, d))) return st;
    if ((st = write_file(co->out_dir, "plan.json", d, &f))) return st;
    write_plan_json(g, f);
    fclose(f);
    if ((st = write_file(co->out_dir, "Makefile", d, &f))) return st;
    fprintf(f, "# Generated by ckptc %s: `make -C DIR` builds DIR/%s against libckrt (override CKRT_INCLUDE and\n"
               "# CKRT_LIB to use another build or installation).\n", CK_VERSION, co->program_name);
    fprintf(f, "CC ?= cc\nCKRT_INCLUDE ?= %s\nCKRT_LIB ?= %s\n", co->ckrt_include, co->ckrt_lib);
    /* what libckrt links beyond OpenBLAS: oneDNN (CPU convolutions), -ldl for the CUDA backend */
    fprintf(f, "CKRT_LIBS ?= %s\n", CK_CKRT_EXTRA_LIBS);
    fprintf(f, "CFLAGS ?= -O2\nCFLAGS += -std=c11 -Wall -Wextra -Werror\n");
    if (o->data_parallel && g->loss) /* an MPI program: MPI's compiler wrapper, and the MPI transport */
        fprintf(f, "# --data-parallel: run it with mpirun -np N ./%s ...\nMPICC ?= mpicc\nCC = $(MPICC)\n"
                   "LDFLAGS += $(CKRT_LIB)/libckrt_mpi.a\n", co->program_name);
#ifdef CK_SANITIZED
    /* this ckptc and its libckrt were built with CK_SANITIZE: programs linking that libckrt need
     * the sanitizers' instrumentation and runtimes too (and are checked by them) */
    fprintf(f, "# libckrt was built with AddressSanitizer + UndefinedBehaviorSanitizer (CK_SANITIZE=ON)\n"
               "CKRT_SANITIZE ?= -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all\n"
               "CFLAGS += $(CKRT_SANITIZE)\nLDFLAGS += $(CKRT_SANITIZE)\n");
#endif
    fprintf(f, "\n");
    fprintf(f, "%s: %s.c $(CKRT_LIB)/libckrt.a\n", co->program_name, co->program_name);
    fprintf(f, "\t$(CC) $(CFLAGS) -I$(CKRT_INCLUDE) %s.c -o $@ $(CKRT_LIB)/libckrt.a -lopenblas -lm -lpthread $(CKRT_LIBS) $(LDFLAGS)\n\n",
            co->program_name);
    fprintf(f, "clean:\n\trm -f %s\n\n.PHONY: clean\n", co->program_name);
    fclose(f);
    return CK_OK;
}
