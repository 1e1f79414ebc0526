/* lower.h — what the lowering pass's files share (passes/lower.c: Linear, GELU; passes/lower_rnn.c:
 * LSTM, GRU, RNN): the new schedule being built and the helpers that append nodes to it. Private to
 * passes/; the pass itself is ck_pass_lower in ck_passes.h. */
#ifndef CK_LOWER_H
#define CK_LOWER_H

#include "ck_passes.h"

typedef struct {
    ck_graph *g;
    int *uses;      /* per value id: how many node inputs and graph outputs read it */
    ck_node **out;  /* the new schedule */
    int n_out, cap_out;
} ck_lower;

/* Appends a new node with n_out fresh outputs to the new schedule (growing it). */
ck_node *ck_lower_emit(ck_lower *L, ck_op op, const char *name, int n_in, ck_value **in, int n_out);
void ck_lower_set_int(ck_lower *L, ck_node *n, const char *name, int64_t v);
/* A 1-D int64 constant holding dims[0..rank). */
ck_value *ck_lower_shape_const(ck_lower *L, int rank, const int64_t *dims);
/* Runs inference on n, then makes it produce `v` (an existing value of the same shape) instead
 * of its fresh output 0. */
ck_status ck_lower_adopt_output(ck_lower *L, ck_node *n, ck_value *v, ck_diag *d);
/* Reshape(x, dims) (a view), inferred; NULL on an inference error (in d). */
ck_value *ck_lower_reshape(ck_lower *L, const char *name, ck_value *x, int rank, const int64_t *dims, ck_diag *d);

/* LSTM, GRU, RNN node n -> its unrolled steps (lower_rnn.c). */
ck_status ck_lower_rnn(ck_lower *L, ck_node *n, ck_diag *d);

#endif
