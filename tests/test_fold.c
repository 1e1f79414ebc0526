/* test_fold.c — ck_frontend_fold (frontend/fold.c) on hand-built graphs.
 *
 * Covers: the exporter's Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain collapsing to a
 * Reshape with a constant shape; Shape of inputs and of run-time values; the *values* the
 * evaluator computes for int64/float arithmetic, Cast, Equal/Greater + Where, Range,
 * ConstantOfShape, Slice (negative steps), Gather, Concat, Split, Expand, Transpose, Trilu and the
 * unary ops; what must not fold (Transpose/Add of a PARAM, Dropout, results over fold_max_elems,
 * integer division by zero, ops without an evaluator); dead-code removal; error propagation; and
 * that ck_graph_verify accepts every folded graph.
 */
#include "ck_frontend.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- fixture and helpers */

static ck_graph *G;
static ck_diag D;

static void setup(void) {
    G = ck_graph_new();
    ck_assert_ptr_nonnull(G);
    memset(&D, 0, sizeof D);
}

static void teardown(void) {
    ck_diag_clear(&D);
    ck_graph_free(G);
    G = NULL;
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define NDIMS(...) ((int)(sizeof(DIMS(__VA_ARGS__)) / sizeof(int64_t)))
#define IN(name, dt, ...) ck_graph_add_value(G, name, dt, NDIMS(__VA_ARGS__), DIMS(__VA_ARGS__), CK_ROLE_INPUT)

/* A value with data copied into the graph's arena (CONST, or PARAM for weights). */
static ck_value *with_data(const char *name, ck_dtype dt, int rank, const int64_t *dims, const void *data, ck_role role) {
    ck_value *v = ck_graph_add_value(G, name, dt, rank, dims, role);
    v->data = ck_arena_alloc(G->arena, ck_value_bytes(v) + 1);
    ck_assert_ptr_nonnull(v->data);
    memcpy(v->data, data, ck_value_bytes(v));
    return v;
}
#define CONST_I64(name, dims, ...) \
    with_data(name, CK_I64, (int)(sizeof(dims) / sizeof(int64_t)), dims, DIMS(__VA_ARGS__), CK_ROLE_CONST)
#define CONST_F32(name, dims, ...) \
    with_data(name, CK_F32, (int)(sizeof(dims) / sizeof(int64_t)), dims, (const float[]){__VA_ARGS__}, CK_ROLE_CONST)
/* 1-D int64 constant */
#define VEC(name, ...) with_data(name, CK_I64, 1, DIMS(NDIMS(__VA_ARGS__)), DIMS(__VA_ARGS__), CK_ROLE_CONST)
static ck_value *scalar_i64(const char *name, int64_t x) { return with_data(name, CK_I64, 0, NULL, &x, CK_ROLE_CONST); }
static ck_value *scalar_f32(const char *name, float x) { return with_data(name, CK_F32, 0, NULL, &x, CK_ROLE_CONST); }

#define NODE(op, name, nout, ...)                                                                      \
    ck_graph_add_node(G, op, name, (int)(sizeof((ck_value *[]){__VA_ARGS__}) / sizeof(ck_value *)), \
                      (ck_value *[]){__VA_ARGS__}, nout)

static void attr_int(ck_node *n, const char *name, int64_t x) {
    ck_node_add_attr(G, n, (ck_attr){.name = name, .kind = CK_ATTR_INT, .i = x});
}
static void attr_ints(ck_node *n, const char *name, int cnt, const int64_t *v) {
    int64_t *p = ck_arena_alloc(G->arena, sizeof(int64_t) * (size_t)(cnt + 1));
    memcpy(p, v, sizeof(int64_t) * (size_t)cnt);
    ck_node_add_attr(G, n, (ck_attr){.name = name, .kind = CK_ATTR_INTS, .n = cnt, .ints = p});
}
#define ATTR_INTS(n, name, ...) attr_ints(n, name, NDIMS(__VA_ARGS__), DIMS(__VA_ARGS__))

/* Declares the graph's outputs (what dead-code removal keeps). */
#define OUTPUTS(...) \
    ck_graph_set_outputs(G, (int)(sizeof((ck_value *[]){__VA_ARGS__}) / sizeof(ck_value *)), (ck_value *[]){__VA_ARGS__})
#define INPUTS(...) \
    ck_graph_set_inputs(G, (int)(sizeof((ck_value *[]){__VA_ARGS__}) / sizeof(ck_value *)), (ck_value *[]){__VA_ARGS__})

static const char *diag_text(void) {
    static char buf[8192];
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < D.n && k < sizeof buf; i++) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? " | " : "", D.msg[i]);
    return buf;
}

/* Folds with the given limit and asserts success, then runs the verifier. */
#define FOLD(max_elems)                                                                                 \
    do {                                                                                                \
        ck_status st_ = ck_frontend_fold(G, max_elems, &D);                                             \
        ck_assert_msg(st_ == CK_OK, "fold failed (%s): %s", ck_status_name(st_), diag_text());         \
        st_ = ck_graph_verify(G, &D);                                                                   \
        ck_assert_msg(st_ == CK_OK, "verify after fold failed: %s", diag_text());                      \
    } while (0)
#define BIG CK_DEFAULT_FOLD_ELEMS

static bool in_value_list(const ck_value *v) {
    for (int i = 0; i < G->n_values; i++)
        if (G->values[i] == v) return true;
    return false;
}

/* Asserts v was folded: a CONST without producer, with data, of dtype dt and shape dims. */
static void expect_const_at(const ck_value *v, ck_dtype dt, int rank, const int64_t *dims, int line) {
    char sh[CK_SHAPE_STR_MAX];
    ck_assert_msg(v->role == CK_ROLE_CONST, "line %d: '%s' has role %s, want const", line, v->name, ck_role_name(v->role));
    ck_assert_msg(v->producer == NULL, "line %d: folded '%s' still has a producer", line, v->name);
    ck_assert_msg(v->data != NULL, "line %d: folded '%s' has no data", line, v->name);
    ck_assert_msg(v->dtype == dt, "line %d: '%s' is %s, want %s", line, v->name, ck_dtype_name(v->dtype), ck_dtype_name(dt));
    bool ok = v->rank == rank;
    for (int i = 0; ok && i < rank; i++) ok = v->dims[i] == dims[i];
    ck_assert_msg(ok, "line %d: '%s' has shape %s", line, v->name, ck_shape_str(v, sh, sizeof sh));
    ck_assert_msg(in_value_list(v), "line %d: '%s' is not in the graph's value list", line, v->name);
}

static void expect_ints_at(const ck_value *v, const int64_t *want, int n, int line) {
    ck_assert_msg(ck_value_numel(v) == n, "line %d: '%s' has %lld elements, want %d", line, v->name,
                  (long long)ck_value_numel(v), n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(ck_value_get_i(v, i) == want[i], "line %d: '%s'[%d] = %lld, want %lld", line, v->name, i,
                      (long long)ck_value_get_i(v, i), (long long)want[i]);
}

static void expect_floats_at(const ck_value *v, const double *want, int n, int line) {
    ck_assert_msg(ck_value_numel(v) == n, "line %d: '%s' has %lld elements, want %d", line, v->name,
                  (long long)ck_value_numel(v), n);
    for (int i = 0; i < n; i++)
        ck_assert_msg(ck_value_get_f(v, i) == want[i], "line %d: '%s'[%d] = %g, want %g", line, v->name, i,
                      ck_value_get_f(v, i), want[i]);
}

/* CONST_SHAPE(v, dtype, dims...) then VALUES_I/VALUES_F(v, values...) */
#define CONST_SHAPE(v, dt, ...) expect_const_at(v, dt, NDIMS(__VA_ARGS__), DIMS(__VA_ARGS__), __LINE__)
#define CONST_SCALAR(v, dt) expect_const_at(v, dt, 0, NULL, __LINE__)
#define VALUES_I(v, ...) expect_ints_at(v, DIMS(__VA_ARGS__), NDIMS(__VA_ARGS__), __LINE__)
#define VALUES_F(v, ...) \
    expect_floats_at(v, (const double[]){__VA_ARGS__}, (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)), __LINE__)

/* Asserts v is still computed at run time by a node that survived folding. */
static void expect_runtime_at(const ck_value *v, ck_op op, int line) {
    ck_assert_msg(v->role == CK_ROLE_ACTIVATION, "line %d: '%s' has role %s, want activation", line, v->name,
                  ck_role_name(v->role));
    ck_assert_msg(v->data == NULL, "line %d: run-time '%s' has data", line, v->name);
    ck_assert_msg(v->producer != NULL && v->producer->op == op, "line %d: '%s' is not produced by a %s node", line, v->name,
                  ck_ops[op].onnx_name);
    bool kept = false;
    for (int i = 0; i < G->n_nodes; i++) kept |= G->nodes[i] == v->producer;
    ck_assert_msg(kept, "line %d: the producer of '%s' is not in the graph", line, v->name);
}
#define RUNTIME(v, op) expect_runtime_at(v, op, __LINE__)

/* ---------------------------------------------------------------- shape subgraphs */

START_TEST(reshape_chain_folds) {
    /* x.view(B, T, 2, -1) as PyTorch exports it */
    ck_value *x = IN("x", CK_F32, 2, 3, 8);
    ck_node *shape = NODE(CK_OP_SHAPE, "/Shape", 1, x);
    ck_node *g0 = NODE(CK_OP_GATHER, "/Gather", 1, shape->out[0], scalar_i64("i0", 0));
    ck_node *g1 = NODE(CK_OP_GATHER, "/Gather_1", 1, shape->out[0], scalar_i64("i1", 1));
    ck_value *ax = VEC("axes0", 0);
    ck_node *u0 = NODE(CK_OP_UNSQUEEZE, "/Unsqueeze", 1, g0->out[0], ax);
    ck_node *u1 = NODE(CK_OP_UNSQUEEZE, "/Unsqueeze_1", 1, g1->out[0], ax);
    ck_node *cat = NODE(CK_OP_CONCAT, "/Concat", 1, u0->out[0], u1->out[0], VEC("tail", 2, -1));
    attr_int(cat, "axis", 0);
    ck_node *rs = NODE(CK_OP_RESHAPE, "/Reshape", 1, x, cat->out[0]);
    ck_value *y = rs->out[0];
    INPUTS(x);
    OUTPUTS(y);
    FOLD(BIG);

    ck_assert_int_eq(G->n_nodes, 1);
    ck_assert_ptr_eq(G->nodes[0], rs);
    ck_assert_int_eq(rs->op, CK_OP_RESHAPE);
    ck_assert_ptr_eq(rs->in[0], x);
    CONST_SHAPE(rs->in[1], CK_I64, 4);
    VALUES_I(rs->in[1], 2, 3, 2, -1);
    ck_assert_int_eq(y->rank, 4);
    ck_assert_int_eq(y->dims[0], 2);
    ck_assert_int_eq(y->dims[1], 3);
    ck_assert_int_eq(y->dims[2], 2);
    ck_assert_int_eq(y->dims[3], 4);
    RUNTIME(y, CK_OP_RESHAPE);
    /* the intermediate values and the constants only they used are gone: x, shape, y remain */
    ck_assert_int_eq(G->n_values, 3);
    ck_assert(!in_value_list(shape->out[0]));
    ck_assert(!in_value_list(ax));
}
END_TEST

START_TEST(shape_folds_to_dims) {
    ck_value *x = IN("x", CK_F32, 2, 3, 8);
    ck_node *s = NODE(CK_OP_SHAPE, "/Shape", 1, x);
    ck_node *s2 = NODE(CK_OP_SHAPE, "/Shape_tail", 1, x);
    attr_int(s2, "start", 1);
    /* Shape of a run-time value folds too (its shape is static); the Relu then becomes dead */
    ck_node *r = NODE(CK_OP_RELU, "/Relu", 1, x);
    ck_node *s3 = NODE(CK_OP_SHAPE, "/Shape_head", 1, r->out[0]);
    attr_int(s3, "end", -1);
    INPUTS(x);
    OUTPUTS(s->out[0], s2->out[0], s3->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(s->out[0], CK_I64, 3);
    VALUES_I(s->out[0], 2, 3, 8);
    CONST_SHAPE(s2->out[0], CK_I64, 2);
    VALUES_I(s2->out[0], 3, 8);
    CONST_SHAPE(s3->out[0], CK_I64, 2);
    VALUES_I(s3->out[0], 2, 3);
    ck_assert(!in_value_list(r->out[0]));
    ck_assert(in_value_list(x)); /* graph inputs stay declared */
}
END_TEST

/* ---------------------------------------------------------------- elementwise evaluation */

START_TEST(int64_arithmetic) {
    ck_value *a = VEC("a", 6, -7, 9), *b = scalar_i64("b", 2);
    ck_node *mul = NODE(CK_OP_MUL, "/Mul", 1, a, b);
    ck_node *dv = NODE(CK_OP_DIV, "/Div", 1, a, b);
    ck_node *add = NODE(CK_OP_ADD, "/Add", 1, a, b);
    ck_node *sub = NODE(CK_OP_SUB, "/Sub", 1, a, b);
    ck_node *chain = NODE(CK_OP_MUL, "/Mul_chain", 1, add->out[0], sub->out[0]);
    ck_node *outer = NODE(CK_OP_ADD, "/Add_outer", 1, CONST_I64("col", DIMS(2, 1), 10, 20), a);
    ck_node *pw = NODE(CK_OP_POW, "/Pow", 1, a, b);
    OUTPUTS(mul->out[0], dv->out[0], add->out[0], sub->out[0], chain->out[0], outer->out[0], pw->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(mul->out[0], CK_I64, 3);
    VALUES_I(mul->out[0], 12, -14, 18);
    CONST_SHAPE(dv->out[0], CK_I64, 3);
    VALUES_I(dv->out[0], 3, -3, 4); /* integer division truncates toward zero */
    VALUES_I(add->out[0], 8, -5, 11);
    VALUES_I(sub->out[0], 4, -9, 7);
    VALUES_I(chain->out[0], 32, 45, 77);
    CONST_SHAPE(outer->out[0], CK_I64, 2, 3);
    VALUES_I(outer->out[0], 16, 3, 19, 26, 13, 29);
    VALUES_I(pw->out[0], 36, 49, 81);
}
END_TEST

START_TEST(float_arithmetic_and_unary) {
    ck_value *f = CONST_F32("f", DIMS(3), 1.0f, 4.0f, 9.0f);
    ck_node *dv = NODE(CK_OP_DIV, "/Div", 1, f, scalar_f32("two", 2.0f));
    ck_node *sq = NODE(CK_OP_SQRT, "/Sqrt", 1, f);
    ck_node *rc = NODE(CK_OP_RECIPROCAL, "/Reciprocal", 1, f);
    ck_node *ng = NODE(CK_OP_NEG, "/Neg", 1, VEC("i", 3, -4));
    ck_node *ab = NODE(CK_OP_ABS, "/Abs", 1, ng->out[0]);
    ck_node *eq = NODE(CK_OP_EQUAL, "/Equal", 1, VEC("p", 1, 2), VEC("q", 1, 5));
    ck_node *nt = NODE(CK_OP_NOT, "/Not", 1, eq->out[0]);
    ck_node *id = NODE(CK_OP_IDENTITY, "/Identity", 1, f);
    OUTPUTS(dv->out[0], sq->out[0], rc->out[0], ng->out[0], ab->out[0], nt->out[0], id->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(dv->out[0], CK_F32, 3);
    VALUES_F(dv->out[0], 0.5, 2.0, 4.5);
    VALUES_F(sq->out[0], 1.0, 2.0, 3.0);
    VALUES_F(rc->out[0], 1.0, 0.25, (double)(float)(1.0 / 9.0));
    VALUES_I(ng->out[0], -3, 4);
    VALUES_I(ab->out[0], 3, 4);
    CONST_SHAPE(nt->out[0], CK_BOOL, 2);
    VALUES_I(nt->out[0], 0, 1);
    VALUES_F(id->out[0], 1.0, 4.0, 9.0);
}
END_TEST

START_TEST(cast_values) {
    ck_value *f = CONST_F32("f", DIMS(4), 1.7f, -2.5f, 0.0f, 3.99f);
    ck_node *to_i = NODE(CK_OP_CAST, "/Cast_i64", 1, f);
    attr_int(to_i, "to", 7);
    ck_value *i = VEC("i", 0, 3, -1);
    ck_node *to_b = NODE(CK_OP_CAST, "/Cast_bool", 1, i);
    attr_int(to_b, "to", 9);
    ck_node *to_f = NODE(CK_OP_CAST, "/Cast_f32", 1, i);
    attr_int(to_f, "to", 1);
    ck_node *b_to_i = NODE(CK_OP_CAST, "/Cast_back", 1, to_b->out[0]);
    attr_int(b_to_i, "to", 7);
    ck_node *f_to_b = NODE(CK_OP_CAST, "/Cast_fb", 1, f);
    attr_int(f_to_b, "to", 9);
    ck_node *to_i32 = NODE(CK_OP_CAST, "/Cast_i32", 1, i);
    attr_int(to_i32, "to", 6);
    OUTPUTS(to_i->out[0], to_f->out[0], b_to_i->out[0], f_to_b->out[0], to_i32->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(to_i->out[0], CK_I64, 4);
    VALUES_I(to_i->out[0], 1, -2, 0, 3); /* truncation toward zero */
    CONST_SHAPE(to_f->out[0], CK_F32, 3);
    VALUES_F(to_f->out[0], 0.0, 3.0, -1.0);
    CONST_SHAPE(b_to_i->out[0], CK_I64, 3);
    VALUES_I(b_to_i->out[0], 0, 1, 1);
    CONST_SHAPE(f_to_b->out[0], CK_BOOL, 4);
    VALUES_I(f_to_b->out[0], 1, 1, 0, 1);
    CONST_SHAPE(to_i32->out[0], CK_I32, 3);
    VALUES_I(to_i32->out[0], 0, 3, -1);
}
END_TEST

START_TEST(equal_where_values) {
    ck_node *eq = NODE(CK_OP_EQUAL, "/Equal", 1, VEC("a", 1, 2, 3), VEC("b", 1, 0, 3));
    ck_node *w = NODE(CK_OP_WHERE, "/Where", 1, eq->out[0], VEC("x", 10, 20, 30), scalar_i64("y", -1));
    /* broadcasting condition: (2,1) against (3) */
    ck_node *gt = NODE(CK_OP_GREATER, "/Greater", 1, CONST_I64("c", DIMS(2, 1), 1, 5), scalar_i64("three", 3));
    ck_node *w2 = NODE(CK_OP_WHERE, "/Where_1", 1, gt->out[0], VEC("x2", 1, 2, 3), scalar_i64("zero", 0));
    ck_node *ls = NODE(CK_OP_LESS, "/Less", 1, CONST_F32("fa", DIMS(2), 0.5f, 2.0f), scalar_f32("one", 1.0f));
    OUTPUTS(w->out[0], w2->out[0], ls->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(w->out[0], CK_I64, 3);
    VALUES_I(w->out[0], 10, -1, 30);
    CONST_SHAPE(w2->out[0], CK_I64, 2, 3);
    VALUES_I(w2->out[0], 0, 0, 0, 1, 2, 3);
    CONST_SHAPE(ls->out[0], CK_BOOL, 2);
    VALUES_I(ls->out[0], 1, 0);
    ck_assert(!in_value_list(eq->out[0])); /* only used by the folded Where */
}
END_TEST

/* ---------------------------------------------------------------- generators */

START_TEST(range_values) {
    ck_node *a = NODE(CK_OP_RANGE, "/Range", 1, scalar_i64("s", 10), scalar_i64("l", 4), scalar_i64("d", -3));
    ck_node *b = NODE(CK_OP_RANGE, "/Range_f", 1, scalar_f32("sf", 0.5f), scalar_f32("lf", 2.0f), scalar_f32("df", 0.5f));
    ck_node *c = NODE(CK_OP_RANGE, "/Range_up", 1, scalar_i64("s2", 0), scalar_i64("l2", 10), scalar_i64("d2", 3));
    ck_node *e = NODE(CK_OP_RANGE, "/Range_fneg", 1, scalar_f32("s3", 1.0f), scalar_f32("l3", -1.0f), scalar_f32("d3", -0.75f));
    OUTPUTS(a->out[0], b->out[0], c->out[0], e->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(a->out[0], CK_I64, 2);
    VALUES_I(a->out[0], 10, 7);
    CONST_SHAPE(b->out[0], CK_F32, 3);
    VALUES_F(b->out[0], 0.5, 1.0, 1.5);
    CONST_SHAPE(c->out[0], CK_I64, 4);
    VALUES_I(c->out[0], 0, 3, 6, 9);
    CONST_SHAPE(e->out[0], CK_F32, 3);
    VALUES_F(e->out[0], 1.0, 0.25, -0.5);
}
END_TEST

START_TEST(constant_of_shape_values) {
    /* the attribute's tensor is a detached constant, not in the graph's value list */
    ck_value *seven = ck_arena_alloc(G->arena, sizeof *seven);
    *seven = (ck_value){.name = "seven", .dtype = CK_I64, .rank = 1, .dims = {1}, .role = CK_ROLE_CONST};
    seven->data = ck_arena_alloc(G->arena, 8);
    *(int64_t *)seven->data = 7;
    ck_node *a = NODE(CK_OP_CONSTANT_OF_SHAPE, "/ConstantOfShape", 1, VEC("s", 2, 3));
    ck_node_add_attr(G, a, (ck_attr){.name = "value", .kind = CK_ATTR_TENSOR, .t = seven});
    ck_node *b = NODE(CK_OP_CONSTANT_OF_SHAPE, "/ConstantOfShape_f", 1, VEC("s2", 2));
    /* ConstantOfShape fed by a folded Shape, as exporters emit it */
    ck_value *x = IN("x", CK_F32, 4, 1);
    ck_node *sh = NODE(CK_OP_SHAPE, "/Shape", 1, x);
    ck_node *c = NODE(CK_OP_CONSTANT_OF_SHAPE, "/ConstantOfShape_x", 1, sh->out[0]);
    ck_node_add_attr(G, c, (ck_attr){.name = "value", .kind = CK_ATTR_TENSOR, .t = seven});
    INPUTS(x);
    OUTPUTS(a->out[0], b->out[0], c->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(a->out[0], CK_I64, 2, 3);
    VALUES_I(a->out[0], 7, 7, 7, 7, 7, 7);
    CONST_SHAPE(b->out[0], CK_F32, 2);
    VALUES_F(b->out[0], 0.0, 0.0);
    CONST_SHAPE(c->out[0], CK_I64, 4, 1);
    VALUES_I(c->out[0], 7, 7, 7, 7);
}
END_TEST

/* ---------------------------------------------------------------- indexing and layout */

START_TEST(slice_values) {
    /* x[-2::-3] of 0..9 -> 8, 5, 2 */
    ck_value *x = VEC("x", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9);
    ck_node *a = NODE(CK_OP_SLICE, "/Slice", 1, x, VEC("s", -2), VEC("e", INT64_MIN), VEC("a", 0), VEC("t", -3));
    /* m[0::2, 3:0:-2] of a 3x4 iota -> rows 0,2; cols 3,1 */
    ck_value *m = CONST_I64("m", DIMS(3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    ck_node *b = NODE(CK_OP_SLICE, "/Slice_1", 1, m, VEC("s1", 0, -1), VEC("e1", INT64_MAX, 0), VEC("a1", 0, 1), VEC("t1", 2, -2));
    /* positive step on axis -1 only, out-of-range end: m[:, 1:100] */
    ck_node *c = NODE(CK_OP_SLICE, "/Slice_2", 1, m, VEC("s2", 1), VEC("e2", 100), VEC("a2", -1));
    /* full reverse */
    ck_node *d = NODE(CK_OP_SLICE, "/Slice_3", 1, VEC("x3", 1, 2, 3), VEC("s3", -1), VEC("e3", INT64_MIN), VEC("a3", 0),
                      VEC("t3", -1));
    OUTPUTS(a->out[0], b->out[0], c->out[0], d->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(a->out[0], CK_I64, 3);
    VALUES_I(a->out[0], 8, 5, 2);
    CONST_SHAPE(b->out[0], CK_I64, 2, 2);
    VALUES_I(b->out[0], 3, 1, 11, 9);
    CONST_SHAPE(c->out[0], CK_I64, 3, 3);
    VALUES_I(c->out[0], 1, 2, 3, 5, 6, 7, 9, 10, 11);
    CONST_SHAPE(d->out[0], CK_I64, 3);
    VALUES_I(d->out[0], 3, 2, 1);
}
END_TEST

START_TEST(gather_values) {
    ck_value *data = CONST_I64("data", DIMS(3, 2), 0, 1, 2, 3, 4, 5);
    ck_node *a = NODE(CK_OP_GATHER, "/Gather", 1, data, VEC("i", 2, -3));
    ck_node *b = NODE(CK_OP_GATHER, "/Gather_1", 1, data, scalar_i64("j", 1));
    attr_int(b, "axis", 1);
    ck_node *c = NODE(CK_OP_GATHER, "/Gather_2", 1, VEC("v", 10, 20, 30), scalar_i64("k", -1));
    ck_value *i32 = with_data("i32", CK_I32, 2, DIMS(2, 1), (const int32_t[]){1, 0}, CK_ROLE_CONST);
    ck_node *d = NODE(CK_OP_GATHER, "/Gather_3", 1, data, i32);
    attr_int(d, "axis", -1);
    OUTPUTS(a->out[0], b->out[0], c->out[0], d->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(a->out[0], CK_I64, 2, 2);
    VALUES_I(a->out[0], 4, 5, 0, 1);
    CONST_SHAPE(b->out[0], CK_I64, 3);
    VALUES_I(b->out[0], 1, 3, 5);
    CONST_SCALAR(c->out[0], CK_I64);
    VALUES_I(c->out[0], 30);
    CONST_SHAPE(d->out[0], CK_I64, 3, 2, 1);
    VALUES_I(d->out[0], 1, 0, 3, 2, 5, 4);
}
END_TEST

START_TEST(concat_split_values) {
    ck_node *cat = NODE(CK_OP_CONCAT, "/Concat", 1, CONST_I64("a", DIMS(2, 1), 1, 2), CONST_I64("b", DIMS(2, 2), 3, 4, 5, 6));
    attr_int(cat, "axis", -1);
    ck_node *cat0 = NODE(CK_OP_CONCAT, "/Concat_0", 1, VEC("c", 1), VEC("d", 2, 3), VEC("e", 4));
    attr_int(cat0, "axis", 0);
    /* axis 0 of 2-D inputs: whole rows are copied */
    ck_node *rows = NODE(CK_OP_CONCAT, "/Concat_rows", 1, CONST_I64("r1", DIMS(1, 2), 1, 2), CONST_I64("r2", DIMS(2, 2), 3, 4, 5, 6));
    attr_int(rows, "axis", 0);
    ck_node *sp = NODE(CK_OP_SPLIT, "/Split", 2, CONST_I64("m", DIMS(2, 3), 1, 2, 3, 4, 5, 6), VEC("sizes", 1, 2));
    attr_int(sp, "axis", 1);
    ck_node *sp0 = NODE(CK_OP_SPLIT, "/Split_0", 3, VEC("v", 1, 2, 3, 4, 5, 6, 7));
    attr_int(sp0, "num_outputs", 3);
    OUTPUTS(cat->out[0], cat0->out[0], rows->out[0], sp->out[0], sp->out[1], sp0->out[0], sp0->out[1], sp0->out[2]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(cat->out[0], CK_I64, 2, 3);
    VALUES_I(cat->out[0], 1, 3, 4, 2, 5, 6);
    CONST_SHAPE(cat0->out[0], CK_I64, 4);
    VALUES_I(cat0->out[0], 1, 2, 3, 4);
    CONST_SHAPE(rows->out[0], CK_I64, 3, 2);
    VALUES_I(rows->out[0], 1, 2, 3, 4, 5, 6);
    CONST_SHAPE(sp->out[0], CK_I64, 2, 1);
    VALUES_I(sp->out[0], 1, 4);
    CONST_SHAPE(sp->out[1], CK_I64, 2, 2);
    VALUES_I(sp->out[1], 2, 3, 5, 6);
    CONST_SHAPE(sp0->out[2], CK_I64, 1);
    VALUES_I(sp0->out[0], 1, 2, 3);
    VALUES_I(sp0->out[1], 4, 5, 6);
    VALUES_I(sp0->out[2], 7);
}
END_TEST

START_TEST(expand_values) {
    ck_node *a = NODE(CK_OP_EXPAND, "/Expand", 1, VEC("v", 1, 2, 3), VEC("s", 2, 3));
    ck_node *b = NODE(CK_OP_EXPAND, "/Expand_1", 1, CONST_I64("c", DIMS(2, 1), 5, 6), VEC("s1", 2, 3));
    ck_node *c = NODE(CK_OP_EXPAND, "/Expand_2", 1, CONST_I64("c2", DIMS(3, 1), 1, 2, 3), VEC("s2", 2, 1, 2));
    OUTPUTS(a->out[0], b->out[0], c->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(a->out[0], CK_I64, 2, 3);
    VALUES_I(a->out[0], 1, 2, 3, 1, 2, 3);
    CONST_SHAPE(b->out[0], CK_I64, 2, 3);
    VALUES_I(b->out[0], 5, 5, 5, 6, 6, 6);
    CONST_SHAPE(c->out[0], CK_I64, 2, 3, 2);
    VALUES_I(c->out[0], 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3);
}
END_TEST

START_TEST(transpose_values) {
    ck_node *a = NODE(CK_OP_TRANSPOSE, "/Transpose", 1, CONST_I64("m", DIMS(2, 3), 0, 1, 2, 3, 4, 5));
    ck_node *b = NODE(CK_OP_TRANSPOSE, "/Transpose_1", 1,
                      CONST_I64("t", DIMS(2, 3, 2), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    ATTR_INTS(b, "perm", 1, 2, 0);
    ck_node *c = NODE(CK_OP_TRANSPOSE, "/Transpose_f", 1, CONST_F32("f", DIMS(2, 2), 1.5f, 2.5f, 3.5f, 4.5f));
    OUTPUTS(a->out[0], b->out[0], c->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(a->out[0], CK_I64, 3, 2);
    VALUES_I(a->out[0], 0, 3, 1, 4, 2, 5);
    /* out[i,j,k] = t[k,i,j] */
    CONST_SHAPE(b->out[0], CK_I64, 3, 2, 2);
    VALUES_I(b->out[0], 0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11);
    CONST_SHAPE(c->out[0], CK_F32, 2, 2);
    VALUES_F(c->out[0], 1.5, 3.5, 2.5, 4.5);
}
END_TEST

START_TEST(trilu_values) {
    static const int64_t iota[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    ck_value *m = with_data("m", CK_I64, 2, DIMS(3, 3), iota, CK_ROLE_CONST);
    ck_node *up = NODE(CK_OP_TRILU, "/Trilu_up", 1, m);
    ck_node *lo = NODE(CK_OP_TRILU, "/Trilu_lo", 1, m);
    attr_int(lo, "upper", 0);
    ck_node *up1 = NODE(CK_OP_TRILU, "/Trilu_up1", 1, m, scalar_i64("k1", 1));
    attr_int(up1, "upper", 1);
    ck_node *lom1 = NODE(CK_OP_TRILU, "/Trilu_lom1", 1, m, scalar_i64("km1", -1));
    attr_int(lom1, "upper", 0);
    /* non-square and batched: (2,2,3), lower with k=1 */
    ck_value *b = with_data("b", CK_I64, 3, DIMS(2, 2, 3), (const int64_t[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
                            CK_ROLE_CONST);
    ck_node *bl = NODE(CK_OP_TRILU, "/Trilu_batch", 1, b, scalar_i64("k2", 1));
    attr_int(bl, "upper", 0);
    OUTPUTS(up->out[0], lo->out[0], up1->out[0], lom1->out[0], bl->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(up->out[0], CK_I64, 3, 3);
    VALUES_I(up->out[0], 1, 2, 3, 0, 5, 6, 0, 0, 9);
    VALUES_I(lo->out[0], 1, 0, 0, 4, 5, 0, 7, 8, 9);
    VALUES_I(up1->out[0], 0, 2, 3, 0, 0, 6, 0, 0, 0);
    VALUES_I(lom1->out[0], 0, 0, 0, 4, 0, 0, 7, 8, 0);
    CONST_SHAPE(bl->out[0], CK_I64, 2, 2, 3);
    VALUES_I(bl->out[0], 1, 2, 0, 4, 5, 6, 7, 8, 0, 10, 11, 12);
}
END_TEST

START_TEST(reshape_family_copies_data) {
    ck_value *v = VEC("v", 1, 2, 3, 4, 5, 6);
    ck_node *rs = NODE(CK_OP_RESHAPE, "/Reshape", 1, v, VEC("s", 2, -1));
    ck_node *un = NODE(CK_OP_UNSQUEEZE, "/Unsqueeze", 1, rs->out[0], VEC("ax", 1));
    ck_node *sq = NODE(CK_OP_SQUEEZE, "/Squeeze", 1, un->out[0], VEC("ax2", 1));
    ck_node *fl = NODE(CK_OP_FLATTEN, "/Flatten", 1, un->out[0]);
    attr_int(fl, "axis", 2);
    OUTPUTS(sq->out[0], fl->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(sq->out[0], CK_I64, 2, 3);
    VALUES_I(sq->out[0], 1, 2, 3, 4, 5, 6);
    CONST_SHAPE(fl->out[0], CK_I64, 2, 3);
    VALUES_I(fl->out[0], 1, 2, 3, 4, 5, 6);
}
END_TEST

/* ---------------------------------------------------------------- what must not fold */

START_TEST(param_is_not_folded) {
    static const float w_data[] = {1, 2, 3, 4, 5, 6};
    ck_value *w = with_data("fc.weight", CK_F32, 2, DIMS(2, 3), w_data, CK_ROLE_PARAM);
    ck_node *t = NODE(CK_OP_TRANSPOSE, "/fc/Transpose", 1, w);
    ck_node *a = NODE(CK_OP_ADD, "/fc/Add", 1, w, scalar_f32("one", 1.0f));
    /* but Shape of a parameter is static and folds */
    ck_node *s = NODE(CK_OP_SHAPE, "/fc/Shape", 1, w);
    OUTPUTS(t->out[0], a->out[0], s->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 2);
    ck_assert_ptr_eq(G->nodes[0], t);
    ck_assert_ptr_eq(G->nodes[1], a);
    RUNTIME(t->out[0], CK_OP_TRANSPOSE);
    ck_assert_int_eq(t->out[0]->rank, 2);
    ck_assert_int_eq(t->out[0]->dims[0], 3);
    ck_assert_int_eq(t->out[0]->dims[1], 2);
    RUNTIME(a->out[0], CK_OP_ADD);
    ck_assert_int_eq(w->role, CK_ROLE_PARAM);
    ck_assert(in_value_list(w));
    CONST_SHAPE(s->out[0], CK_I64, 2);
    VALUES_I(s->out[0], 2, 3);
}
END_TEST

/* Bernoulli of a constant (the stochastic-depth probabilities) and a RandomUniform with no input
 * at all stay run-time draws; the Shape of a draw still folds. */
START_TEST(random_never_folds) {
    ck_node *b = NODE(CK_OP_BERNOULLI, "/Bernoulli", 1, CONST_F32("p", DIMS(2), 0.5f, 0.5f));
    ck_node *u = ck_graph_add_node(G, CK_OP_RANDOM_UNIFORM, "/RandomUniform", 0, NULL, 1);
    int64_t sh[1] = {3};
    ck_node_add_attr(G, u, (ck_attr){.name = "shape", .kind = CK_ATTR_INTS, .n = 1, .ints = sh});
    ck_assert_int_eq(ck_infer_node(u, &D), CK_OK);
    ck_node *s = NODE(CK_OP_SHAPE, "/Shape", 1, b->out[0]);
    OUTPUTS(b->out[0], u->out[0], s->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 2);
    RUNTIME(b->out[0], CK_OP_BERNOULLI);
    RUNTIME(u->out[0], CK_OP_RANDOM_UNIFORM);
    CONST_SHAPE(s->out[0], CK_I64, 1);
    VALUES_I(s->out[0], 2);
}
END_TEST

START_TEST(dropout_never_folds) {
    ck_node *d = NODE(CK_OP_DROPOUT, "/Dropout", 2, CONST_F32("c", DIMS(4), 1, 2, 3, 4), scalar_f32("ratio", 0.5f));
    ck_node *s = NODE(CK_OP_SHAPE, "/Shape", 1, d->out[0]);
    OUTPUTS(d->out[0], d->out[1], s->out[0]);
    FOLD(BIG);
    ck_assert(ck_ops[CK_OP_DROPOUT].flags & CK_OPF_RANDOM);
    ck_assert_int_eq(G->n_nodes, 1);
    ck_assert_ptr_eq(G->nodes[0], d);
    RUNTIME(d->out[0], CK_OP_DROPOUT);
    RUNTIME(d->out[1], CK_OP_DROPOUT);
    ck_assert_int_eq(d->out[1]->dtype, CK_BOOL);
    CONST_SHAPE(s->out[0], CK_I64, 1);
    VALUES_I(s->out[0], 4);
}
END_TEST

/* Builds ConstantOfShape(4,4) -> Shape and Range(0,100,1); returns the three nodes. */
static void build_big(ck_node **cos, ck_node **sh, ck_node **rg) {
    *cos = NODE(CK_OP_CONSTANT_OF_SHAPE, "/ConstantOfShape", 1, VEC("s", 4, 4));
    *sh = NODE(CK_OP_SHAPE, "/Shape", 1, (*cos)->out[0]);
    *rg = NODE(CK_OP_RANGE, "/Range", 1, scalar_i64("a", 0), scalar_i64("b", 100), scalar_i64("c", 1));
    OUTPUTS((*cos)->out[0], (*sh)->out[0], (*rg)->out[0]);
}

START_TEST(fold_max_elems_limit) {
    ck_node *cos, *sh, *rg;
    build_big(&cos, &sh, &rg);
    FOLD(15); /* 16 and 100 elements: both stay nodes; the 2-element Shape still folds */
    ck_assert_int_eq(G->n_nodes, 2);
    RUNTIME(cos->out[0], CK_OP_CONSTANT_OF_SHAPE);
    RUNTIME(rg->out[0], CK_OP_RANGE);
    ck_assert_int_eq(rg->out[0]->dims[0], 100);
    CONST_SHAPE(sh->out[0], CK_I64, 2);
    VALUES_I(sh->out[0], 4, 4);

    teardown();
    setup();
    build_big(&cos, &sh, &rg);
    FOLD(16); /* exactly at the limit folds; 100 does not */
    ck_assert_int_eq(G->n_nodes, 1);
    ck_assert_ptr_eq(G->nodes[0], rg);
    CONST_SHAPE(cos->out[0], CK_F32, 4, 4);
    ck_assert_double_eq(ck_value_get_f(cos->out[0], 15), 0.0);

    teardown();
    setup();
    build_big(&cos, &sh, &rg);
    FOLD(100);
    ck_assert_int_eq(G->n_nodes, 0);
    CONST_SHAPE(rg->out[0], CK_I64, 100);
    ck_assert_int_eq(ck_value_get_i(rg->out[0], 0), 0);
    ck_assert_int_eq(ck_value_get_i(rg->out[0], 99), 99);
}
END_TEST

START_TEST(unevaluable_nodes_stay) {
    /* integer division by zero is left to run time, and so is everything downstream */
    ck_node *dv = NODE(CK_OP_DIV, "/Div", 1, VEC("a", 4, 6), VEC("z", 2, 0));
    ck_node *ad = NODE(CK_OP_ADD, "/Add", 1, dv->out[0], scalar_i64("one", 1));
    /* ReduceSum is foldable in principle but has no evaluator: it stays, its input stays const */
    ck_value *c = VEC("c", 1, 2, 3);
    ck_node *rs = NODE(CK_OP_REDUCE_SUM, "/ReduceSum", 1, c);
    /* Sqrt of an integer tensor is not evaluated either */
    ck_node *sq = NODE(CK_OP_SQRT, "/Sqrt", 1, VEC("d", 4, 9));
    OUTPUTS(ad->out[0], rs->out[0], sq->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 4);
    RUNTIME(dv->out[0], CK_OP_DIV);
    RUNTIME(ad->out[0], CK_OP_ADD);
    RUNTIME(rs->out[0], CK_OP_REDUCE_SUM);
    RUNTIME(sq->out[0], CK_OP_SQRT);
    ck_assert_int_eq(rs->out[0]->rank, 1);
    ck_assert_int_eq(rs->out[0]->dims[0], 1);
    ck_assert_int_eq(c->role, CK_ROLE_CONST);
    ck_assert(in_value_list(c));
}
END_TEST

/* ---------------------------------------------------------------- dead code, errors */

START_TEST(dead_nodes_removed) {
    ck_value *x = IN("x", CK_F32, 4);
    ck_value *unused_in = IN("unused", CK_F32, 2);
    ck_node *r = NODE(CK_OP_RELU, "/Relu", 1, x);
    ck_node *e = NODE(CK_OP_EXP, "/Exp", 1, x);
    ck_value *k = scalar_f32("k", 2.0f);
    ck_node *m = NODE(CK_OP_MUL, "/Mul", 1, e->out[0], k);
    ck_node *t = NODE(CK_OP_TANH, "/Tanh", 1, r->out[0]);
    INPUTS(x, unused_in);
    OUTPUTS(t->out[0]);
    FOLD(BIG);
    ck_assert_int_eq(G->n_nodes, 2);
    ck_assert_ptr_eq(G->nodes[0], r);
    ck_assert_ptr_eq(G->nodes[1], t);
    ck_assert(!in_value_list(e->out[0]));
    ck_assert(!in_value_list(m->out[0]));
    ck_assert(!in_value_list(k));
    ck_assert(in_value_list(x));
    ck_assert(in_value_list(unused_in));
    ck_assert(in_value_list(r->out[0]));
    ck_assert_int_eq(G->n_values, 4); /* x, unused, relu, tanh */
    ck_assert_int_eq(t->out[0]->dtype, CK_F32);
    ck_assert_int_eq(t->out[0]->dims[0], 4);
}
END_TEST

START_TEST(inference_error_propagates) {
    ck_value *x = IN("x", CK_F32, 2, 3);
    ck_node *sh = NODE(CK_OP_SHAPE, "/Shape", 1, x);
    ck_node *mul = NODE(CK_OP_MUL, "/Mul", 1, sh->out[0], scalar_i64("two", 2)); /* (4,6) */
    ck_node *rs = NODE(CK_OP_RESHAPE, "/blk/Reshape", 1, x, mul->out[0]);
    INPUTS(x);
    OUTPUTS(rs->out[0]);
    ck_status st = ck_frontend_fold(G, BIG, &D);
    ck_assert_int_eq(st, CK_ERR_SHAPE);
    const char *t = diag_text();
    ck_assert_msg(strstr(t, "/blk/Reshape") && strstr(t, "Reshape") && strstr(t, "(2,3)") && strstr(t, "(4,6)"),
                  "unexpected message: %s", t);
}
END_TEST

/* ---------------------------------------------------------------- suite */

static Suite *fold_suite(void) {
    Suite *s = suite_create("fold");
    struct { const char *name; const TTest *tests[10]; } groups[] = {
        {"shape", {reshape_chain_folds, shape_folds_to_dims}},
        {"elementwise", {int64_arithmetic, float_arithmetic_and_unary, cast_values, equal_where_values}},
        {"generators", {range_values, constant_of_shape_values}},
        {"layout", {slice_values, gather_values, concat_split_values, expand_values, transpose_values, trilu_values,
                    reshape_family_copies_data}},
        {"keep", {param_is_not_folded, dropout_never_folds, random_never_folds, fold_max_elems_limit, unevaluable_nodes_stay}},
        {"graph", {dead_nodes_removed, inference_error_propagates}},
    };
    for (size_t i = 0; i < sizeof groups / sizeof *groups; i++) {
        TCase *tc = tcase_create(groups[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        for (int k = 0; k < 10 && groups[i].tests[k]; k++) tcase_add_test(tc, groups[i].tests[k]);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(fold_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
