/* infer_rnn.c — shape inference and attribute checks of the ONNX recurrent ops LSTM, GRU and RNN.
 *
 * These nodes never reach a kernel: passes/lower_rnn.c unrolls each one, over its static sequence
 * length, into ops ckptc already runs and differentiates (Gemm, Split, Sigmoid, Tanh, Mul, ...).
 * So everything the lowering relies on is decided here, once, at load time: ck_rnn_params reads
 * the node (layout, direction, hidden size, activations, which optional inputs are there) into a
 * ck_rnn_info that both this file's inference and the lowering use. What the lowering cannot
 * express is refused here with the node's name: activations other than the ones PyTorch exports
 * (LSTM: Sigmoid/Tanh/Tanh, GRU: Sigmoid/Tanh, RNN: Tanh, Relu or Sigmoid), activation_alpha/beta,
 * clip, input_forget, and a sequence_lens input that is not a constant equal to the sequence
 * length for every batch entry (variable lengths would need masking at run time).
 *
 * Layouts (ONNX opset 14's `layout`; 0 is what PyTorch exports, with batch_first as Transposes):
 *   layout 0: X (T,B,I), Y (T,D,B,H), Y_h/Y_c/initial_h/initial_c (D,B,H)
 *   layout 1: X (B,T,I), Y (B,T,D,H), Y_h/Y_c/initial_h/initial_c (B,D,H)
 *   W (D,G*H,I), R (D,G*H,H), B (D,2*G*H), P (D,3H); G = 4 (LSTM, gates iofc), 3 (GRU, zrh), 1 (RNN)
 */
#include "ck_ir.h"

#include <stdio.h>
#include <string.h>

#define rnn_err ck_node_err

static const ck_value *opt_in(const ck_node *n, int i) { return i < n->n_in ? n->in[i] : NULL; }

/* An input's shape must be exactly `dims`. */
static ck_status want_shape(const ck_node *n, int i, const char *what, int rank, const int64_t *dims, ck_diag *d) {
    const ck_value *v = n->in[i];
    bool ok = v->rank == rank;
    for (int k = 0; ok && k < rank; k++) ok = v->dims[k] == dims[k];
    if (ok && v->dtype == n->in[0]->dtype) return CK_OK;
    char have[CK_SHAPE_STR_MAX], want[CK_SHAPE_STR_MAX];
    ck_value w = {.rank = rank};
    memcpy(w.dims, dims, sizeof(int64_t) * (size_t)rank);
    return rnn_err(d, n, CK_ERR_SHAPE, "input %d '%s' (%s) is %s %s; expected %s %s", i, v->name, what,
                   ck_dtype_name(v->dtype), ck_shape_str(v, have, sizeof have), ck_dtype_name(n->in[0]->dtype),
                   ck_shape_str(&w, want, sizeof want));
}

/* The activations attribute: absent, or per direction the defaults (RNN: any of Tanh, Relu,
 * Sigmoid, one per direction). */
static ck_status read_activations(const ck_node *n, ck_rnn_info *r, ck_diag *d) {
    static const char *lstm[] = {"Sigmoid", "Tanh", "Tanh"}, *gru[] = {"Sigmoid", "Tanh"};
    for (int k = 0; k < r->dirs; k++) r->act[k] = CK_RNN_TANH;
    const ck_attr *a = ck_attr_find(n, "activations");
    if (!a) return CK_OK;
    int per = r->kind == CK_RNN_LSTM ? 3 : r->kind == CK_RNN_GRU ? 2 : 1;
    if (a->kind != CK_ATTR_STRINGS || a->n != per * r->dirs)
        return rnn_err(d, n, CK_ERR_UNSUPPORTED, "attribute 'activations' must list %d activation names per direction (%d)",
                       per, r->dirs);
    for (int k = 0; k < a->n; k++) {
        const char *s = a->strs[k];
        if (r->kind == CK_RNN_LSTM && strcmp(s, lstm[k % 3]) == 0) continue;
        if (r->kind == CK_RNN_GRU && strcmp(s, gru[k % 2]) == 0) continue;
        if (r->kind == CK_RNN_PLAIN) {
            if (strcmp(s, "Tanh") == 0) continue;
            if (strcmp(s, "Relu") == 0) { r->act[k] = CK_RNN_RELU; continue; }
            if (strcmp(s, "Sigmoid") == 0) { r->act[k] = CK_RNN_SIGMOID; continue; }
        }
        return rnn_err(d, n, CK_ERR_UNSUPPORTED, "activation %d '%s' is not supported (supported: %s)", k, s,
                       r->kind == CK_RNN_LSTM ? "Sigmoid, Tanh, Tanh per direction"
                       : r->kind == CK_RNN_GRU ? "Sigmoid, Tanh per direction" : "Tanh, Relu or Sigmoid");
    }
    return CK_OK;
}

/* sequence_lens, when given, must be a constant holding T for every batch entry. */
static ck_status check_seq_lens(const ck_node *n, const ck_rnn_info *r, ck_diag *d) {
    const ck_value *s = opt_in(n, 4);
    if (!s) return CK_OK;
    if (s->dtype != CK_I32 && s->dtype != CK_I64)
        return rnn_err(d, n, CK_ERR_SHAPE, "input 4 '%s' (sequence_lens) must be int32", s->name);
    if (s->rank != 1 || s->dims[0] != r->batch)
        return rnn_err(d, n, CK_ERR_SHAPE, "input 4 '%s' (sequence_lens) must have shape (%lld)", s->name, (long long)r->batch);
    char sh[CK_SHAPE_STR_MAX];
    if (!s->data)
        return rnn_err(d, n, CK_ERR_UNSUPPORTED,
                       "input 4 '%s' %s %s must be a constant known at compile time, but it is computed at run time "
                       "(sequence_lens: only the sequence length, %lld, for every batch entry is supported)", s->name,
                       ck_dtype_name(s->dtype), ck_shape_str(s, sh, sizeof sh), (long long)r->seq);
    for (int64_t b = 0; b < r->batch; b++)
        if (ck_value_get_i(s, b) != r->seq)
            return rnn_err(d, n, CK_ERR_UNSUPPORTED,
                           "sequence_lens[%lld] = %lld differs from the sequence length %lld; unequal lengths are not "
                           "supported (pad and mask instead)", (long long)b, (long long)ck_value_get_i(s, b), (long long)r->seq);
    return CK_OK;
}

/* Attributes ckptc does not implement. */
static ck_status check_unsupported_attrs(const ck_node *n, const ck_rnn_info *r, ck_diag *d) {
    if (ck_attr_find(n, "clip")) return rnn_err(d, n, CK_ERR_UNSUPPORTED, "attribute 'clip' (cell clipping) is not supported");
    if (ck_attr_find(n, "activation_alpha") || ck_attr_find(n, "activation_beta"))
        return rnn_err(d, n, CK_ERR_UNSUPPORTED, "attributes 'activation_alpha'/'activation_beta' are not supported");
    if (r->kind == CK_RNN_LSTM && ck_attr_int(n, "input_forget", 0) != 0)
        return rnn_err(d, n, CK_ERR_UNSUPPORTED, "attribute 'input_forget' (coupled input and forget gates) is not supported");
    return CK_OK;
}

/* Checks X, W, R, hidden_size, direction and layout; fills r's sizes. */
static ck_status read_core(const ck_node *n, ck_rnn_info *r, ck_diag *d) {
    const ck_value *x = n->in[0], *w = n->in[1], *rr = n->in[2];
    char sh[CK_SHAPE_STR_MAX];
    if (x->dtype != CK_F32) /* the Gemm the lowering runs on is float32 only */
        return rnn_err(d, n, CK_ERR_UNSUPPORTED, "input 0 '%s' is %s; only float32 is supported", x->name,
                       ck_dtype_name(x->dtype));
    r->layout = (int)ck_attr_int(n, "layout", 0);
    if (r->layout != 0 && r->layout != 1) return rnn_err(d, n, CK_ERR_MODEL, "attribute 'layout' must be 0 or 1");
    if (x->rank != 3)
        return rnn_err(d, n, CK_ERR_SHAPE, "input 0 '%s' %s must be 3-D (%s)", x->name, ck_shape_str(x, sh, sizeof sh),
                       r->layout ? "batch, seq, input" : "seq, batch, input");
    r->seq = x->dims[r->layout ? 1 : 0];
    r->batch = x->dims[r->layout ? 0 : 1];
    r->input = x->dims[2];
    const char *dir = ck_attr_str(n, "direction", "forward");
    r->reverse = strcmp(dir, "reverse") == 0;
    r->dirs = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    if (r->dirs == 1 && !r->reverse && strcmp(dir, "forward") != 0)
        return rnn_err(d, n, CK_ERR_MODEL, "attribute 'direction' is '%s'; expected forward, reverse or bidirectional", dir);
    if (rr->rank != 3)
        return rnn_err(d, n, CK_ERR_SHAPE, "input 2 '%s' (R) %s must be 3-D", rr->name, ck_shape_str(rr, sh, sizeof sh));
    r->hidden = ck_attr_int(n, "hidden_size", rr->dims[2]);
    if (r->hidden <= 0 || r->seq <= 0)
        return rnn_err(d, n, CK_ERR_UNSUPPORTED, "hidden size %lld and sequence length %lld must be positive",
                       (long long)r->hidden, (long long)r->seq);
    int64_t gh = r->gates * r->hidden;
    ck_status st = want_shape(n, 1, "W", 3, (int64_t[]){r->dirs, gh, r->input}, d);
    if (!st) st = want_shape(n, 2, "R", 3, (int64_t[]){r->dirs, gh, r->hidden}, d);
    (void)w;
    return st;
}

ck_status ck_rnn_params(const ck_node *n, ck_rnn_info *r, ck_diag *d) {
    memset(r, 0, sizeof *r);
    r->kind = n->op == CK_OP_LSTM ? CK_RNN_LSTM : n->op == CK_OP_GRU ? CK_RNN_GRU : CK_RNN_PLAIN;
    r->gates = r->kind == CK_RNN_LSTM ? 4 : r->kind == CK_RNN_GRU ? 3 : 1;
    r->linear_before_reset = r->kind == CK_RNN_GRU && ck_attr_int(n, "linear_before_reset", 0) != 0;
    ck_status st = read_core(n, r, d);
    if (!st) st = check_unsupported_attrs(n, r, d);
    if (!st) st = read_activations(n, r, d);
    if (!st) st = check_seq_lens(n, r, d);
    if (st) return st;
    int64_t state[3] = {r->dirs, r->batch, r->hidden};
    if (r->layout) state[0] = r->batch, state[1] = r->dirs;
    if (opt_in(n, 3)) st = want_shape(n, 3, "B", 2, (int64_t[]){r->dirs, 2 * r->gates * r->hidden}, d);
    if (!st && opt_in(n, 5)) st = want_shape(n, 5, "initial_h", 3, state, d);
    if (!st && opt_in(n, 6)) st = want_shape(n, 6, "initial_c", 3, state, d);
    if (!st && opt_in(n, 7)) st = want_shape(n, 7, "P", 2, (int64_t[]){r->dirs, 3 * r->hidden}, d);
    return st;
}

/* LSTM, GRU, RNN: Y, Y_h (and LSTM's Y_c), each optional. */
ck_status ck_infer_rnn(ck_node *n, ck_diag *d) {
    ck_rnn_info r;
    ck_status st = ck_rnn_params(n, &r, d);
    if (st) return st;
    int64_t y[4] = {r.seq, r.dirs, r.batch, r.hidden}, h[3] = {r.dirs, r.batch, r.hidden};
    if (r.layout) {
        y[0] = r.batch, y[1] = r.seq, y[2] = r.dirs;
        h[0] = r.batch, h[1] = r.dirs;
    }
    for (int k = 0; k < n->n_out; k++) {
        ck_value *o = n->out[k];
        if (!o) continue;
        o->dtype = n->in[0]->dtype;
        o->rank = k == 0 ? 4 : 3;
        memcpy(o->dims, k == 0 ? y : h, sizeof(int64_t) * (size_t)o->rank);
    }
    return CK_OK;
}
