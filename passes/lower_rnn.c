/* lower_rnn.c — ONNX LSTM, GRU and RNN, unrolled at compile time into ops ckptc already has.
 *
 * Why unroll rather than write recurrent kernels: ckptc's shapes are static, so the sequence
 * length is known when compiling, and every step of a recurrence is a handful of ops the compiler
 * already runs on both backends, differentiates, recomputes, offloads and plans (Gemm, Split,
 * Sigmoid, Tanh, Mul, Add, Concat, Reshape). Unrolled, an LSTM gets its backward (backpropagation
 * through time) from autodiff, checkpointing sees each time step as a repeated unit (the step
 * nodes are scoped NODE/step.T/..., which --checkpoint=blocks reads as blocks), and the memory plan
 * is exact, with no new kernel, CUDA wrapper or gradient rule to get wrong. The price is graph
 * size: about 12 nodes per step and direction in the forward (README: --plan-only times for long
 * sequences). Attributes the unrolling cannot express are refused when loading (ir/infer_rnn.c).
 *
 * Per direction (W, R, B, P of that direction; G gates of H units; rows of X in its layout):
 *   XW   = Gemm(X as (T*B, I), W, bias, transB=1)    one GEMM for the input projection of all steps
 *          bias = Wb + Rb (GRU with linear_before_reset: Wb; its Rb goes into the recurrent Gemm)
 *   xw_t = the step's (B, G*H) rows of XW, by a tree of Splits (at most 64 parts each) whose
 *          gradient is one Concat per Split, linear in T
 *   LSTM (gates iofc):  g = Gemm(h, R, xw_t, transB=1); i,o,f = Sigmoid(g[:3H]) (one node, no
 *          peepholes), c~ = Tanh(g[3H:]); c = f*c + i*c~; h = o*Tanh(c)
 *          with peepholes P = (Pi, Po, Pf): i = Sigmoid(g_i + Pi*c), f = Sigmoid(g_f + Pf*c),
 *          o = Sigmoid(g_o + Po*c_new)
 *   GRU (gates zrh), linear_before_reset=0: z,r = Sigmoid(Gemm(h, R_zr, xw_zr)),
 *          h~ = Tanh(Gemm(r*h, R_h, xw_h)); linear_before_reset=1 (PyTorch's):
 *          q = Gemm(h, R, Rb), z,r = Sigmoid(xw_zr + q_zr), h~ = Tanh(xw_h + r*q_h);
 *          then h = h~ + z*(h - h~)  (= (1-z)*h~ + z*h)
 *   RNN:   h = f(Gemm(h, R, xw_t, transB=1)), f = Tanh, Relu or Sigmoid
 * The reverse direction walks t = T-1 .. 0 (its nodes are scoped NODE/reverse.T). Y is a tree of
 * Concats of the steps' h (reshaped, a view, to Y's layout); Y_h and Y_c are the last step's. An
 * absent initial state (or one that is a constant zero) is a zero constant. The new nodes'
 * outputs are fresh values except the last, which produces the node's original output, so
 * everything downstream is unchanged.
 */
#include "lower.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTS 64 /* Split outputs and Concat inputs per node (ops.def) */

typedef struct {
    ck_lower *L;
    const ck_node *n;
    ck_rnn_info r;
    char scope[700];   /* the name prefix of the nodes being emitted */
} rnn;

/* Infers a node the lowering built from inputs ck_rnn_params has checked: cannot fail. */
static ck_node *done(ck_node *m) {
    ck_diag d = {0};
    ck_status st = ck_infer_node(m, &d);
    if (st && d.n) fprintf(stderr, "%s\n", d.msg[0]);
    CK_ASSERT(st == CK_OK);
    ck_diag_clear(&d);
    return m;
}

static ck_node *raw(rnn *c, ck_op op, const char *label, int n_in, ck_value **in, int n_out) {
    char name[800];
    snprintf(name, sizeof name, "%s/%s", c->scope, label);
    return ck_lower_emit(c->L, op, name, n_in, in, n_out);
}

static ck_value *op1(rnn *c, ck_op op, const char *label, ck_value *a) { return done(raw(c, op, label, 1, &a, 1))->out[0]; }

static ck_value *op2(rnn *c, ck_op op, const char *label, ck_value *a, ck_value *b) {
    return done(raw(c, op, label, 2, (ck_value *[]){a, b}, 1))->out[0];
}

/* a (M,K) times w (N,K) transposed, plus bias broadcast to (M,N) when given. */
static ck_value *gemm(rnn *c, const char *label, ck_value *a, ck_value *w, ck_value *bias) {
    ck_node *m = raw(c, CK_OP_GEMM, label, bias ? 3 : 2, (ck_value *[]){a, w, bias}, 1);
    ck_lower_set_int(c->L, m, "transB", 1);
    return done(m)->out[0];
}

static ck_value *reshape(rnn *c, const char *label, ck_value *x, int rank, const int64_t *dims) {
    char name[800];
    snprintf(name, sizeof name, "%s/%s", c->scope, label);
    ck_diag d = {0};
    ck_value *v = ck_lower_reshape(c->L, name, x, rank, dims, &d);
    CK_ASSERT(v);
    ck_diag_clear(&d);
    return v;
}

/* x split along axis into k parts of the given sizes. */
static void split(rnn *c, const char *label, ck_value *x, int axis, int k, const int64_t *sizes, ck_value **out) {
    ck_node *m = raw(c, CK_OP_SPLIT, label, 2, (ck_value *[]){x, ck_lower_shape_const(c->L, k, sizes)}, k);
    ck_lower_set_int(c->L, m, "axis", axis);
    done(m);
    for (int i = 0; i < k; i++) out[i] = m->out[i];
}

/* x split along axis into k equal parts. */
static void split_equal(rnn *c, const char *label, ck_value *x, int axis, int k, ck_value **out) {
    int64_t sizes[MAX_PARTS];
    for (int i = 0; i < k; i++) sizes[i] = x->dims[axis] / k;
    split(c, label, x, axis, k, sizes, out);
}

/* The len slices of x along axis, that axis dropped: out[0..len). A tree of Splits. */
static void split_seq(rnn *c, ck_value *x, int axis, int64_t len, ck_value **out) {
    if (len == 1) {
        int64_t dims[CK_MAX_RANK];
        int r = 0;
        for (int i = 0; i < x->rank; i++)
            if (i != axis) dims[r++] = x->dims[i];
        out[0] = reshape(c, "step", x, r, dims);
        return;
    }
    int64_t chunk = len <= MAX_PARTS ? 1 : (len + MAX_PARTS - 1) / MAX_PARTS, sizes[MAX_PARTS] = {0};
    int k = (int)((len + chunk - 1) / chunk);
    ck_value *parts[MAX_PARTS];
    for (int i = 0; i < k; i++) sizes[i] = len - chunk * i < chunk ? len - chunk * i : chunk;
    split(c, "XW/split", x, axis, k, sizes, parts);
    for (int i = 0; i < k; i++) split_seq(c, parts[i], axis, sizes[i], out + chunk * i);
}

/* parts[0..k) concatenated along axis. A tree of Concats. */
static ck_value *concat_seq(rnn *c, const char *label, ck_value **parts, int64_t k, int axis) {
    if (k == 1) return parts[0];
    if (k <= MAX_PARTS) {
        ck_node *m = raw(c, CK_OP_CONCAT, label, (int)k, parts, 1);
        ck_lower_set_int(c->L, m, "axis", axis);
        return done(m)->out[0];
    }
    int64_t chunk = (k + MAX_PARTS - 1) / MAX_PARTS, m = (k + chunk - 1) / chunk;
    ck_value *mid[MAX_PARTS];
    for (int64_t i = 0; i < m; i++) mid[i] = concat_seq(c, label, parts + chunk * i, k - chunk * i < chunk ? k - chunk * i : chunk, axis);
    return concat_seq(c, label, mid, m, axis);
}

static ck_value *zeros(rnn *c, int rank, const int64_t *dims) {
    ck_value *z = ck_graph_add_value(c->L->g, "zeros", c->n->in[0]->dtype, rank, dims, CK_ROLE_CONST);
    size_t bytes = ck_value_bytes(z);
    z->data = ck_arena_alloc(c->L->g->arena, bytes + 1);
    CK_ASSERT(z->data);
    memset(z->data, 0, bytes);
    return z;
}

/* Optional input i, NULL when absent or a constant of zeros (then it adds nothing). */
static ck_value *nonzero_in(const ck_node *n, int i) {
    ck_value *v = i < n->n_in ? n->in[i] : NULL;
    if (!v || v->role != CK_ROLE_CONST || !v->data) return v;
    for (int64_t k = 0, e = ck_value_numel(v); k < e; k++)
        if (ck_value_get_f(v, k) != 0.0) return v;
    return NULL;
}

/* v's slice of each direction along axis, reshaped to dims: out[0..dirs). */
static void per_dir(rnn *c, const char *label, ck_value *v, int axis, int rank, const int64_t *dims, ck_value **out) {
    if (c->r.dirs == 1) {
        out[0] = reshape(c, label, v, rank, dims);
        return;
    }
    ck_value *parts[2];
    split_equal(c, label, v, axis, 2, parts);
    for (int k = 0; k < 2; k++) out[k] = reshape(c, label, parts[k], rank, dims);
}

/* ---------------------------------------------------------------- one step */

typedef struct {
    ck_value *R, *R_zr, *R_h;   /* recurrent weights (GH,H); GRU lbr=0: its zr and h rows */
    ck_value *rbias;            /* GRU lbr=1: Rb (GH) */
    ck_value *P[3];             /* LSTM peepholes Pi, Po, Pf (H), or NULL */
    ck_rnn_act act;             /* RNN */
} dir_weights;

static void lstm_step(rnn *c, const dir_weights *w, ck_value *xw, ck_value **h, ck_value **cell) {
    int64_t H = c->r.hidden;
    ck_value *g = gemm(c, "Gemm", *h, w->R, xw), *i, *o, *f, *ct, *cn;
    if (!w->P[0]) {
        ck_value *part[2], *iof[3];
        split(c, "Split", g, 1, 2, (int64_t[]){3 * H, H}, part);
        split_equal(c, "Split_iof", op1(c, CK_OP_SIGMOID, "Sigmoid", part[0]), 1, 3, iof);
        i = iof[0], o = iof[1], f = iof[2];
        ct = op1(c, CK_OP_TANH, "Tanh", part[1]);
        cn = op2(c, CK_OP_ADD, "Add_c", op2(c, CK_OP_MUL, "Mul_f", f, *cell), op2(c, CK_OP_MUL, "Mul_i", i, ct));
    } else {
        ck_value *q[4];
        split_equal(c, "Split", g, 1, 4, q);
        i = op1(c, CK_OP_SIGMOID, "Sigmoid_i", op2(c, CK_OP_ADD, "Add_pi", q[0], op2(c, CK_OP_MUL, "Mul_pi", w->P[0], *cell)));
        f = op1(c, CK_OP_SIGMOID, "Sigmoid_f", op2(c, CK_OP_ADD, "Add_pf", q[2], op2(c, CK_OP_MUL, "Mul_pf", w->P[2], *cell)));
        ct = op1(c, CK_OP_TANH, "Tanh", q[3]);
        cn = op2(c, CK_OP_ADD, "Add_c", op2(c, CK_OP_MUL, "Mul_f", f, *cell), op2(c, CK_OP_MUL, "Mul_i", i, ct));
        o = op1(c, CK_OP_SIGMOID, "Sigmoid_o", op2(c, CK_OP_ADD, "Add_po", q[1], op2(c, CK_OP_MUL, "Mul_po", w->P[1], cn)));
    }
    *cell = cn;
    *h = op2(c, CK_OP_MUL, "Mul_h", o, op1(c, CK_OP_TANH, "Tanh_c", cn));
}

static void gru_step(rnn *c, const dir_weights *w, ck_value *xw, ck_value **h) {
    int64_t H = c->r.hidden;
    ck_value *x[2], *zr[2], *hh;
    split(c, "Split_x", xw, 1, 2, (int64_t[]){2 * H, H}, x);
    if (c->r.linear_before_reset) {
        ck_value *q[2];
        split(c, "Split_q", gemm(c, "Gemm", *h, w->R, w->rbias), 1, 2, (int64_t[]){2 * H, H}, q);
        split_equal(c, "Split_zr", op1(c, CK_OP_SIGMOID, "Sigmoid", op2(c, CK_OP_ADD, "Add_zr", x[0], q[0])), 1, 2, zr);
        hh = op1(c, CK_OP_TANH, "Tanh", op2(c, CK_OP_ADD, "Add_h", x[1], op2(c, CK_OP_MUL, "Mul_r", zr[1], q[1])));
    } else {
        split_equal(c, "Split_zr", op1(c, CK_OP_SIGMOID, "Sigmoid", gemm(c, "Gemm_zr", *h, w->R_zr, x[0])), 1, 2, zr);
        hh = op1(c, CK_OP_TANH, "Tanh", gemm(c, "Gemm_h", op2(c, CK_OP_MUL, "Mul_r", zr[1], *h), w->R_h, x[1]));
    }
    ck_value *dz = op2(c, CK_OP_MUL, "Mul_z", zr[0], op2(c, CK_OP_SUB, "Sub_h", *h, hh));
    *h = op2(c, CK_OP_ADD, "Add_out", hh, dz);
}

static void rnn_step(rnn *c, const dir_weights *w, ck_value *xw, ck_value **h) {
    static const ck_op ops[] = {[CK_RNN_TANH] = CK_OP_TANH, [CK_RNN_RELU] = CK_OP_RELU, [CK_RNN_SIGMOID] = CK_OP_SIGMOID};
    *h = op1(c, ops[w->act], "Act", gemm(c, "Gemm", *h, w->R, xw));
}

/* ---------------------------------------------------------------- one direction */

typedef struct {
    ck_value *W, *R, *B, *h0, *c0, *P; /* this direction's, reshaped: (GH,I), (GH,H), (2GH), (B,H), (B,H), (3H) */
} dir_inputs;

/* The recurrent side's weights of direction k (names scoped under the node). */
static void prepare_weights(rnn *c, int k, const dir_inputs *in, dir_weights *w, ck_value **xbias) {
    int64_t H = c->r.hidden;
    memset(w, 0, sizeof *w);
    w->R = in->R;
    w->act = c->r.act[k];
    *xbias = NULL;
    if (in->B) {
        ck_value *wr[2];
        split_equal(c, "B/split", in->B, 0, 2, wr);
        if (c->r.linear_before_reset) *xbias = wr[0], w->rbias = wr[1];
        else *xbias = op2(c, CK_OP_ADD, "B/add", wr[0], wr[1]);
    }
    if (c->r.kind == CK_RNN_GRU && !c->r.linear_before_reset) {
        ck_value *rr[2];
        split(c, "R/split", in->R, 0, 2, (int64_t[]){2 * H, H}, rr);
        w->R_zr = rr[0], w->R_h = rr[1];
    }
    if (in->P) split_equal(c, "P/split", in->P, 0, 3, w->P);
}

/* Runs direction k over the sequence: hs[t] is h after step t (in time order); *h_last, *c_last
 * the state after the last step processed. */
static void run_direction(rnn *c, int k, ck_value *x_rows, const dir_inputs *in, ck_value **hs, ck_value **h_last,
                          ck_value **c_last) {
    const ck_rnn_info *r = &c->r;
    int64_t T = r->seq, H = r->hidden, GH = r->gates * H;
    snprintf(c->scope, sizeof c->scope, "%s%s", c->n->name, k ? "/reverse" : "");
    dir_weights w;
    ck_value *xbias;
    prepare_weights(c, k, in, &w, &xbias);
    ck_value *xw = gemm(c, "XW", x_rows, in->W, xbias);
    int64_t d3[3] = {T, r->batch, GH};
    if (r->layout) d3[0] = r->batch, d3[1] = T;
    xw = reshape(c, "XW/seq", xw, 3, d3);
    ck_value **steps = malloc(sizeof *steps * (size_t)T);
    CK_ASSERT(steps);
    split_seq(c, xw, r->layout ? 1 : 0, T, steps);
    int64_t bh[2] = {r->batch, H};
    ck_value *h = in->h0 ? in->h0 : zeros(c, 2, bh), *cell = in->c0 ? in->c0 : zeros(c, 2, bh);
    bool rev = r->reverse || k == 1;
    for (int64_t s = 0; s < T; s++) {
        int64_t t = rev ? T - 1 - s : s;
        snprintf(c->scope, sizeof c->scope, "%s/%s.%lld", c->n->name, rev ? "reverse" : "step", (long long)t);
        if (r->kind == CK_RNN_LSTM) lstm_step(c, &w, steps[t], &h, &cell);
        else if (r->kind == CK_RNN_GRU) gru_step(c, &w, steps[t], &h);
        else rnn_step(c, &w, steps[t], &h);
        hs[t] = h;
    }
    free(steps);
    *h_last = h;
    *c_last = cell;
}

/* ---------------------------------------------------------------- the node */

/* Makes v's producer (a node just built) produce the node's original output `orig` instead. */
static void bind(ck_value *v, ck_value *orig) {
    ck_node *p = v->producer;
    CK_ASSERT(p && p->out[0] == v && v->dtype == orig->dtype && v->rank == orig->rank &&
              memcmp(v->dims, orig->dims, sizeof(int64_t) * (size_t)v->rank) == 0);
    v->producer = NULL;
    p->out[0] = orig;
    orig->producer = p;
}

static bool wanted(const rnn *c, int k) {
    const ck_value *o = k < c->n->n_out ? c->n->out[k] : NULL;
    return o && c->L->uses[o->id] > 0;
}

/* Y (k = 0) from hs[dir][t], or Y_h / Y_c (k = 1, 2) from last[dir]. */
static void build_output(rnn *c, int k, ck_value ***hs, ck_value **last) {
    const ck_rnn_info *r = &c->r;
    int64_t B = r->batch, H = r->hidden, T = r->seq;
    ck_value *per[2];
    snprintf(c->scope, sizeof c->scope, "%s", c->n->name);
    const char *label = k == 0 ? "Y" : k == 1 ? "Y_h" : "Y_c";
    for (int d = 0; d < r->dirs; d++) {
        if (k == 0) {
            int64_t dims[4] = {1, 1, B, H};
            if (r->layout) dims[0] = B, dims[2] = 1;
            ck_value **parts = malloc(sizeof *parts * (size_t)T);
            CK_ASSERT(parts);
            for (int64_t t = 0; t < T; t++) parts[t] = reshape(c, "Y/step", hs[d][t], 4, dims);
            per[d] = concat_seq(c, label, parts, T, r->layout ? 1 : 0);
            free(parts);
        } else {
            int64_t dims[3] = {1, B, H};
            if (r->layout) dims[0] = B, dims[1] = 1;
            per[d] = reshape(c, label, last[d], 3, dims);
        }
    }
    int axis = k == 0 ? (r->layout ? 2 : 1) : (r->layout ? 1 : 0);
    ck_value *v = r->dirs == 2 ? concat_seq(c, label, per, 2, axis) : per[0];
    bind(v, c->n->out[k]);
}

/* The per-direction inputs: W, R, B, initial_h, initial_c, P split by direction and reshaped. */
static void split_inputs(rnn *c, dir_inputs *in) {
    const ck_rnn_info *r = &c->r;
    const ck_node *n = c->n;
    int64_t H = r->hidden, GH = r->gates * H, B = r->batch;
    int state_axis = r->layout ? 1 : 0;
    ck_value *v[2];
    per_dir(c, "W", n->in[1], 0, 2, (int64_t[]){GH, r->input}, v);
    for (int d = 0; d < r->dirs; d++) in[d].W = v[d];
    per_dir(c, "R", n->in[2], 0, 2, (int64_t[]){GH, H}, v);
    for (int d = 0; d < r->dirs; d++) in[d].R = v[d];
    struct { int i; const char *label; int axis, rank; int64_t dims[2]; size_t off; } opt[] = {
        {3, "B", 0, 1, {2 * GH}, offsetof(dir_inputs, B)},
        {5, "initial_h", state_axis, 2, {B, H}, offsetof(dir_inputs, h0)},
        {6, "initial_c", state_axis, 2, {B, H}, offsetof(dir_inputs, c0)},
        {7, "P", 0, 1, {3 * H}, offsetof(dir_inputs, P)},
    };
    for (size_t k = 0; k < sizeof opt / sizeof opt[0]; k++) {
        ck_value *x = nonzero_in(n, opt[k].i);
        if (!x) continue;
        per_dir(c, opt[k].label, x, opt[k].axis, opt[k].rank, opt[k].dims, v);
        for (int d = 0; d < r->dirs; d++) *(ck_value **)((char *)&in[d] + opt[k].off) = v[d];
    }
}

ck_status ck_lower_rnn(ck_lower *L, ck_node *n, ck_diag *d) {
    rnn c = {.L = L, .n = n};
    ck_status st = ck_rnn_params(n, &c.r, d);
    if (st) return st;
    snprintf(c.scope, sizeof c.scope, "%s", n->name);
    int64_t T = c.r.seq;
    dir_inputs in[2] = {{0}};
    split_inputs(&c, in);
    ck_value *x_rows = reshape(&c, "X/rows", n->in[0], 2, (int64_t[]){T * c.r.batch, c.r.input});
    ck_value **hs[2] = {NULL, NULL}, *h_last[2], *c_last[2];
    for (int k = 0; k < c.r.dirs; k++) {
        hs[k] = malloc(sizeof *hs[k] * (size_t)T);
        CK_ASSERT(hs[k]);
        run_direction(&c, k, x_rows, &in[k], hs[k], &h_last[k], &c_last[k]);
    }
    if (wanted(&c, 0)) build_output(&c, 0, hs, NULL);
    if (wanted(&c, 1)) build_output(&c, 1, NULL, h_last);
    if (c.r.kind == CK_RNN_LSTM && wanted(&c, 2)) build_output(&c, 2, NULL, c_last);
    free(hs[0]), free(hs[1]);
    return CK_OK;
}
