/* test_infer.c — shape and dtype inference (ir/infer.c), one or more cases per row of ops.def.
 *
 * Each test builds a tiny graph directly with the IR API (inputs, constants with arena data,
 * attributes), runs ck_infer_node on one node and asserts the output dtypes and dims, following
 * the ONNX operator spec (expected shapes were cross-checked with onnx.shape_inference where it
 * supports the case). Error cases assert a non-OK status and that the message names the node,
 * its op type and, for shape errors, the offending shapes. The last group checks the arity check
 * that ck_infer_node runs before any op's own function.
 */
#include "ck_ir.h"

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

/* A user-fed input of the given dtype and shape (IN0: a scalar). */
#define IN(name, dt, ...) ck_graph_add_value(G, name, dt, NDIMS(__VA_ARGS__), DIMS(__VA_ARGS__), CK_ROLE_INPUT)
#define IN0(name, dt) ck_graph_add_value(G, name, dt, 0, NULL, CK_ROLE_INPUT)

/* A constant with data copied into the graph's arena. */
static ck_value *konst(const char *name, ck_dtype dt, int rank, const int64_t *dims, const void *data) {
    ck_value *v = ck_graph_add_value(G, name, dt, rank, dims, CK_ROLE_CONST);
    v->data = ck_arena_alloc(G->arena, ck_value_bytes(v) + 1);
    ck_assert_ptr_nonnull(v->data);
    memcpy(v->data, data, ck_value_bytes(v));
    return v;
}

/* 1-D int64 constant holding the given values; scalar int64/float/bool constants. */
#define VEC(name, ...) konst(name, CK_I64, 1, DIMS(NDIMS(__VA_ARGS__)), DIMS(__VA_ARGS__))
static ck_value *scalar_i64(const char *name, int64_t x) { return konst(name, CK_I64, 0, NULL, &x); }
static ck_value *scalar_f32(const char *name, float x) { return konst(name, CK_F32, 0, NULL, &x); }
static ck_value *scalar_bool(const char *name, bool x) {
    uint8_t b = x;
    return konst(name, CK_BOOL, 0, NULL, &b);
}
/* An empty 1-D int64 constant (shape (0)). */
static ck_value *empty_vec(const char *name) {
    ck_value *v = ck_graph_add_value(G, name, CK_I64, 1, DIMS(0), CK_ROLE_CONST);
    v->data = ck_arena_alloc(G->arena, 8);
    return v;
}

/* NODE(op, name, n_out, inputs...): a node with fresh outputs. */
#define NODE(op, name, nout, ...)                                                                            \
    ck_graph_add_node(G, op, name, (int)(sizeof((ck_value *[]){__VA_ARGS__}) / sizeof(ck_value *)),       \
                      (ck_value *[]){__VA_ARGS__}, nout)

static void attr_int(ck_node *n, const char *name, int64_t x) {
    ck_node_add_attr(G, n, (ck_attr){.name = name, .kind = CK_ATTR_INT, .i = x});
}
static void attr_float(ck_node *n, const char *name, float x) {
    ck_node_add_attr(G, n, (ck_attr){.name = name, .kind = CK_ATTR_FLOAT, .f = x});
}
static void attr_str(ck_node *n, const char *name, const char *s) {
    ck_node_add_attr(G, n, (ck_attr){.name = name, .kind = CK_ATTR_STRING, .s = s});
}
static void attr_ints(ck_node *n, const char *name, int cnt, const int64_t *v) {
    int64_t *p = ck_arena_alloc(G->arena, sizeof(int64_t) * (size_t)(cnt + 1));
    memcpy(p, v, sizeof(int64_t) * (size_t)cnt);
    ck_node_add_attr(G, n, (ck_attr){.name = name, .kind = CK_ATTR_INTS, .n = cnt, .ints = p});
}
#define ATTR_INTS(n, name, ...) attr_ints(n, name, NDIMS(__VA_ARGS__), DIMS(__VA_ARGS__))
static void attr_tensor(ck_node *n, const char *name, ck_value *t) {
    ck_node_add_attr(G, n, (ck_attr){.name = name, .kind = CK_ATTR_TENSOR, .t = t});
}

/* All diagnostics joined by " | ", for assertions and failure messages. */
static const char *diag_text(void) {
    static char buf[8192];
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < D.n && k < sizeof buf; i++) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? " | " : "", D.msg[i]);
    return buf;
}

/* Runs inference and asserts success, printing the diagnostics otherwise. */
#define INFER_OK(n)                                                                                     \
    do {                                                                                                \
        ck_status st_ = ck_infer_node(n, &D);                                                           \
        ck_assert_msg(st_ == CK_OK, "inference of '%s' failed (%s): %s", (n)->name, ck_status_name(st_), \
                      diag_text());                                                                     \
    } while (0)

static bool shape_is(const ck_value *v, ck_dtype dt, int rank, const int64_t *dims, char *why, size_t len) {
    char got[CK_SHAPE_STR_MAX], want[CK_SHAPE_STR_MAX];
    ck_value w = {.dtype = dt, .rank = rank};
    for (int i = 0; i < rank; i++) w.dims[i] = dims[i];
    bool ok = v && v->dtype == dt && v->rank == rank;
    for (int i = 0; ok && i < rank; i++) ok = v->dims[i] == dims[i];
    if (!ok)
        snprintf(why, len, "got %s %s, want %s %s", v ? ck_dtype_name(v->dtype) : "(null)",
                 v ? ck_shape_str(v, got, sizeof got) : "", ck_dtype_name(dt), ck_shape_str(&w, want, sizeof want));
    return ok;
}

/* EXPECT(value, dtype, dims...) and EXPECT0(value, dtype) for a scalar. */
#define EXPECT(v, dt, ...)                                                                                 \
    do {                                                                                                   \
        char why_[512];                                                                                    \
        ck_assert_msg(shape_is(v, dt, NDIMS(__VA_ARGS__), DIMS(__VA_ARGS__), why_, sizeof why_), "%s: %s", \
                      #v, why_);                                                                           \
    } while (0)
#define EXPECT0(v, dt)                                                             \
    do {                                                                           \
        char why_[512];                                                            \
        ck_assert_msg(shape_is(v, dt, 0, NULL, why_, sizeof why_), "%s: %s", #v, why_); \
    } while (0)

/* Asserts inference fails with status want and a message naming the node, its op and every
 * needle (pass "" when there is nothing more to look for). */
static void expect_fail_at(ck_node *n, ck_status want, const char **needles, int nn, int line) {
    ck_diag_clear(&D);
    ck_status st = ck_infer_node(n, &D);
    ck_assert_msg(st != CK_OK, "line %d: inference of '%s' (%s) succeeded but should fail", line, n->name,
                  ck_ops[n->op].onnx_name);
    ck_assert_msg(st == want, "line %d: status %s, want %s: %s", line, ck_status_name(st), ck_status_name(want), diag_text());
    ck_assert_msg(D.n >= 1, "line %d: no diagnostic", line);
    const char *t = diag_text();
    ck_assert_msg(strstr(t, n->name), "line %d: message lacks the node name '%s': %s", line, n->name, t);
    ck_assert_msg(strstr(t, ck_ops[n->op].onnx_name), "line %d: message lacks the op '%s': %s", line,
                  ck_ops[n->op].onnx_name, t);
    for (int i = 0; i < nn; i++)
        ck_assert_msg(strstr(t, needles[i]), "line %d: message lacks '%s': %s", line, needles[i], t);
}
#define EXPECT_FAIL(n, want, ...)                                                                           \
    expect_fail_at(n, want, (const char *[]){__VA_ARGS__},                                                   \
                   (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), __LINE__)

/* ---------------------------------------------------------------- Gemm */

START_TEST(gemm_plain) {
    ck_node *n = NODE(CK_OP_GEMM, "/fc/Gemm", 1, IN("a", CK_F32, 3, 4), IN("b", CK_F32, 4, 5));
    INFER_OK(n);
    EXPECT(n->out[0], CK_F32, 3, 5);
}
END_TEST

START_TEST(gemm_trans_and_bias) {
    /* A^T: (4,3)->(3,4); B^T: (5,4)->(4,5); C (5) broadcasts to (3,5) */
    ck_node *n = NODE(CK_OP_GEMM, "/fc/Gemm", 1, IN("a", CK_F32, 4, 3), IN("b", CK_F32, 5, 4), IN("c", CK_F32, 5));
    attr_int(n, "transA", 1);
    attr_int(n, "transB", 1);
    INFER_OK(n);
    EXPECT(n->out[0], CK_F32, 3, 5);

    ck_node *m = NODE(CK_OP_GEMM, "/fc2/Gemm", 1, IN("a2", CK_F32, 3, 4), IN("b2", CK_F32, 5, 4), IN("c2", CK_F32, 3, 1));
    attr_int(m, "transB", 1);
    INFER_OK(m);
    EXPECT(m->out[0], CK_F32, 3, 5);

    ck_node *s = NODE(CK_OP_GEMM, "/fc3/Gemm", 1, IN("a3", CK_F32, 3, 4), IN("b3", CK_F32, 4, 5), IN0("c3", CK_F32));
    INFER_OK(s);
    EXPECT(s->out[0], CK_F32, 3, 5);
}
END_TEST

START_TEST(gemm_errors) {
    /* inner dims 4 vs 5 */
    ck_node *n = NODE(CK_OP_GEMM, "/bad/Gemm", 1, IN("a", CK_F32, 3, 4), IN("b", CK_F32, 5, 6));
    EXPECT_FAIL(n, CK_ERR_SHAPE, "(3,4)", "(5,6)");
    /* transA makes the inner dim 3, which no longer matches */
    ck_node *t = NODE(CK_OP_GEMM, "/badT/Gemm", 1, IN("a1", CK_F32, 3, 4), IN("b1", CK_F32, 4, 5));
    attr_int(t, "transA", 1);
    EXPECT_FAIL(t, CK_ERR_SHAPE, "(3,4)", "(4,5)");
    /* C (2,5) cannot broadcast to (3,5) */
    ck_node *c = NODE(CK_OP_GEMM, "/badC/Gemm", 1, IN("a2", CK_F32, 3, 4), IN("b2", CK_F32, 4, 5), IN("c2", CK_F32, 2, 5));
    EXPECT_FAIL(c, CK_ERR_SHAPE, "(2,5)", "(3,5)");
    /* C (4) does not match N=5 either */
    ck_node *c4 = NODE(CK_OP_GEMM, "/badC4/Gemm", 1, IN("a3", CK_F32, 3, 4), IN("b3", CK_F32, 4, 5), IN("c3", CK_F32, 4));
    EXPECT_FAIL(c4, CK_ERR_SHAPE, "(4)");
    /* A must be 2-D */
    ck_node *r = NODE(CK_OP_GEMM, "/rank/Gemm", 1, IN("a4", CK_F32, 2, 3, 4), IN("b4", CK_F32, 4, 5));
    EXPECT_FAIL(r, CK_ERR_SHAPE, "(2,3,4)");
}
END_TEST

/* ---------------------------------------------------------------- MatMul */

START_TEST(matmul_2d_and_batched) {
    ck_node *n = NODE(CK_OP_MATMUL, "/mm", 1, IN("a", CK_F32, 3, 4), IN("b", CK_F32, 4, 5));
    INFER_OK(n);
    EXPECT(n->out[0], CK_F32, 3, 5);

    ck_node *b = NODE(CK_OP_MATMUL, "/bmm", 1, IN("a1", CK_F32, 2, 1, 3, 4), IN("b1", CK_F32, 5, 4, 6));
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 2, 5, 3, 6);

    ck_node *c = NODE(CK_OP_MATMUL, "/bmm2", 1, IN("a2", CK_F32, 8, 3, 4), IN("b2", CK_F32, 4, 7));
    INFER_OK(c);
    EXPECT(c->out[0], CK_F32, 8, 3, 7);
}
END_TEST

START_TEST(matmul_1d_operands) {
    ck_node *vm = NODE(CK_OP_MATMUL, "/vm", 1, IN("v", CK_F32, 4), IN("m", CK_F32, 4, 5));
    INFER_OK(vm);
    EXPECT(vm->out[0], CK_F32, 5);

    ck_node *mv = NODE(CK_OP_MATMUL, "/mv", 1, IN("m1", CK_F32, 3, 4), IN("v1", CK_F32, 4));
    INFER_OK(mv);
    EXPECT(mv->out[0], CK_F32, 3);

    ck_node *vv = NODE(CK_OP_MATMUL, "/vv", 1, IN("v2", CK_F32, 4), IN("v3", CK_F32, 4));
    INFER_OK(vv);
    EXPECT0(vv->out[0], CK_F32);

    ck_node *vb = NODE(CK_OP_MATMUL, "/vb", 1, IN("v4", CK_F32, 4), IN("b4", CK_F32, 2, 4, 5));
    INFER_OK(vb);
    EXPECT(vb->out[0], CK_F32, 2, 5);
}
END_TEST

START_TEST(matmul_errors) {
    ck_node *n = NODE(CK_OP_MATMUL, "/mm/bad", 1, IN("a", CK_F32, 3, 4), IN("b", CK_F32, 5, 6));
    EXPECT_FAIL(n, CK_ERR_SHAPE, "(3,4)", "(5,6)");
    ck_node *b = NODE(CK_OP_MATMUL, "/bmm/bad", 1, IN("a1", CK_F32, 2, 3, 4), IN("b1", CK_F32, 3, 4, 5));
    EXPECT_FAIL(b, CK_ERR_SHAPE, "(2,3,4)", "(3,4,5)");
    ck_node *v = NODE(CK_OP_MATMUL, "/vv/bad", 1, IN("v", CK_F32, 4), IN("w", CK_F32, 3));
    EXPECT_FAIL(v, CK_ERR_SHAPE, "(4)", "(3)");
    ck_node *s = NODE(CK_OP_MATMUL, "/scalar/bad", 1, IN0("s", CK_F32), IN("w2", CK_F32, 3));
    EXPECT_FAIL(s, CK_ERR_SHAPE, "()");
}
END_TEST

/* ---------------------------------------------------------------- broadcasting binary ops */

START_TEST(binary_broadcast) {
    static const ck_op ops[] = {CK_OP_ADD, CK_OP_SUB, CK_OP_MUL, CK_OP_DIV};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "/bin%zu", i);
        ck_node *n = NODE(ops[i], nm, 1, IN("a", CK_F32, 2, 3, 4), IN("b", CK_F32, 3, 1));
        INFER_OK(n);
        EXPECT(n->out[0], CK_F32, 2, 3, 4);
    }
    ck_node *o = NODE(CK_OP_ADD, "/outer", 1, IN("c", CK_I64, 1, 3), IN("d", CK_I64, 4, 1));
    INFER_OK(o);
    EXPECT(o->out[0], CK_I64, 4, 3);
    ck_node *s = NODE(CK_OP_MUL, "/scalar", 1, IN0("e", CK_F32), IN("f", CK_F32, 2, 3));
    INFER_OK(s);
    EXPECT(s->out[0], CK_F32, 2, 3);
    ck_node *z = NODE(CK_OP_SUB, "/zero", 1, IN("g", CK_F32, 0, 3), IN("h", CK_F32, 1, 3));
    INFER_OK(z);
    EXPECT(z->out[0], CK_F32, 0, 3);
}
END_TEST

START_TEST(binary_errors) {
    ck_node *n = NODE(CK_OP_ADD, "/blk/Add", 1, IN("a", CK_F32, 2, 3), IN("b", CK_F32, 4, 5));
    EXPECT_FAIL(n, CK_ERR_SHAPE, "(2,3)", "(4,5)", "'a'", "'b'");
    ck_node *t = NODE(CK_OP_MUL, "/blk/Mul", 1, IN("c", CK_F32, 2, 3), IN("d", CK_I64, 2, 3));
    EXPECT_FAIL(t, CK_ERR_SHAPE, "float32", "int64");
}
END_TEST

START_TEST(pow_mixed_dtypes) {
    /* Pow's exponent may have another type; the result has the base's */
    ck_node *n = NODE(CK_OP_POW, "/pow", 1, IN("x", CK_F32, 2, 3), scalar_i64("e", 2));
    INFER_OK(n);
    EXPECT(n->out[0], CK_F32, 2, 3);
    ck_node *b = NODE(CK_OP_POW, "/pow2", 1, IN("y", CK_F32, 2, 1), IN("z", CK_F32, 5));
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 2, 5);
    ck_node *e = NODE(CK_OP_POW, "/pow/bad", 1, IN("p", CK_F32, 2, 3), IN("q", CK_F32, 2));
    EXPECT_FAIL(e, CK_ERR_SHAPE, "(2,3)", "(2)");
}
END_TEST

START_TEST(compare_to_bool) {
    static const ck_op ops[] = {CK_OP_EQUAL, CK_OP_LESS, CK_OP_GREATER};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "/cmp%zu", i);
        ck_node *n = NODE(ops[i], nm, 1, IN("a", CK_F32, 2, 1, 4), IN("b", CK_F32, 3, 1));
        INFER_OK(n);
        EXPECT(n->out[0], CK_BOOL, 2, 3, 4);
    }
    ck_node *e = NODE(CK_OP_EQUAL, "/eq64", 1, IN("c", CK_I64, 4), IN0("d", CK_I64));
    INFER_OK(e);
    EXPECT(e->out[0], CK_BOOL, 4);
    ck_node *bad = NODE(CK_OP_LESS, "/less/bad", 1, IN("f", CK_F32, 3), IN("g", CK_F32, 4));
    EXPECT_FAIL(bad, CK_ERR_SHAPE, "(3)", "(4)");
}
END_TEST

START_TEST(mod_fmod) {
    ck_node *a = NODE(CK_OP_MOD, "/mod/int", 1, IN("a", CK_I64, 2, 3), IN("b", CK_I64, 3));
    INFER_OK(a);
    EXPECT(a->out[0], CK_I64, 2, 3);
    ck_node *b = NODE(CK_OP_MOD, "/mod/float", 1, IN("a1", CK_F32, 4), IN("b1", CK_F32, 4));
    EXPECT_FAIL(b, CK_ERR_MODEL, "fmod=1");
    attr_int(b, "fmod", 1);
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 4);
}
END_TEST

START_TEST(where_three_way) {
    ck_node *n = NODE(CK_OP_WHERE, "/where", 1, IN("c", CK_BOOL, 2, 1, 1), IN("x", CK_F32, 3, 1), IN("y", CK_F32, 4));
    INFER_OK(n);
    EXPECT(n->out[0], CK_F32, 2, 3, 4);
    /* the condition alone may carry the broadcast */
    ck_node *m = NODE(CK_OP_WHERE, "/where2", 1, IN("c2", CK_BOOL, 5, 2), IN0("x2", CK_I64), IN0("y2", CK_I64));
    INFER_OK(m);
    EXPECT(m->out[0], CK_I64, 5, 2);
}
END_TEST

START_TEST(where_errors) {
    ck_node *n = NODE(CK_OP_WHERE, "/where/cond", 1, IN("c", CK_F32, 3), IN("x", CK_F32, 3), IN("y", CK_F32, 3));
    EXPECT_FAIL(n, CK_ERR_SHAPE, "bool");
    ck_node *m = NODE(CK_OP_WHERE, "/where/xy", 1, IN("c1", CK_BOOL, 3), IN("x1", CK_F32, 2), IN("y1", CK_F32, 3));
    EXPECT_FAIL(m, CK_ERR_SHAPE, "(2)", "(3)");
    ck_node *k = NODE(CK_OP_WHERE, "/where/cx", 1, IN("c2", CK_BOOL, 4, 1), IN("x2", CK_F32, 3, 2), IN("y2", CK_F32, 2));
    EXPECT_FAIL(k, CK_ERR_SHAPE, "(4,1)", "(3,2)");
    ck_node *t = NODE(CK_OP_WHERE, "/where/dt", 1, IN("c3", CK_BOOL, 3), IN("x3", CK_F32, 3), IN("y3", CK_I64, 3));
    EXPECT_FAIL(t, CK_ERR_SHAPE, "float32", "int64");
}
END_TEST

/* ---------------------------------------------------------------- unary */

START_TEST(unary_every_op) {
    static const ck_op ops[] = {CK_OP_SQRT, CK_OP_RECIPROCAL, CK_OP_NEG,  CK_OP_EXP,        CK_OP_LOG,
                                CK_OP_ABS,  CK_OP_TANH,       CK_OP_SIGMOID, CK_OP_RELU, CK_OP_LEAKY_RELU,
                                CK_OP_ERF,  CK_OP_GELU,       CK_OP_IDENTITY, CK_OP_CLIP};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        ck_node *n = NODE(ops[i], ck_ops[ops[i]].onnx_name, 1, IN("x", CK_F32, 2, 3, 4));
        INFER_OK(n);
        char why[512];
        ck_assert_msg(shape_is(n->out[0], CK_F32, 3, DIMS(2, 3, 4), why, sizeof why), "%s: %s", ck_ops[ops[i]].onnx_name, why);
    }
    /* dtype is carried through, e.g. Neg/Abs of int64 and Identity of a scalar */
    ck_node *ng = NODE(CK_OP_NEG, "/neg64", 1, IN("i", CK_I64, 5));
    INFER_OK(ng);
    EXPECT(ng->out[0], CK_I64, 5);
    ck_node *id = NODE(CK_OP_IDENTITY, "/id0", 1, IN0("s", CK_F64));
    INFER_OK(id);
    EXPECT0(id->out[0], CK_F64);
    ck_node *lr = NODE(CK_OP_LEAKY_RELU, "/lrelu", 1, IN("l", CK_F32, 7));
    attr_float(lr, "alpha", 0.2f);
    INFER_OK(lr);
    EXPECT(lr->out[0], CK_F32, 7);
}
END_TEST

START_TEST(not_and_gelu) {
    ck_node *n = NODE(CK_OP_NOT, "/not", 1, IN("b", CK_BOOL, 2, 2));
    INFER_OK(n);
    EXPECT(n->out[0], CK_BOOL, 2, 2);
    ck_node *bad = NODE(CK_OP_NOT, "/not/bad", 1, IN("f", CK_F32, 2, 2));
    EXPECT_FAIL(bad, CK_ERR_SHAPE, "(2,2)", "bool");

    ck_node *g = NODE(CK_OP_GELU, "/gelu", 1, IN("x", CK_F32, 3));
    attr_str(g, "approximate", "tanh");
    INFER_OK(g);
    EXPECT(g->out[0], CK_F32, 3);
    ck_node *gb = NODE(CK_OP_GELU, "/gelu/bad", 1, IN("y", CK_F32, 3));
    attr_str(gb, "approximate", "fast");
    EXPECT_FAIL(gb, CK_ERR_UNSUPPORTED, "fast");
}
END_TEST

START_TEST(clip_min_max) {
    ck_node *n = NODE(CK_OP_CLIP, "/clip", 1, IN("x", CK_F32, 2, 3), scalar_f32("lo", -1), scalar_f32("hi", 1));
    INFER_OK(n);
    EXPECT(n->out[0], CK_F32, 2, 3);
    /* min absent, max given */
    ck_node *m = NODE(CK_OP_CLIP, "/clip2", 1, IN("x2", CK_F32, 4), NULL, scalar_f32("hi2", 6));
    INFER_OK(m);
    EXPECT(m->out[0], CK_F32, 4);
    /* a one-element 1-D bound is accepted as a scalar */
    ck_node *o = NODE(CK_OP_CLIP, "/clip3", 1, IN("x3", CK_F32, 4), IN("lo3", CK_F32, 1));
    INFER_OK(o);
    EXPECT(o->out[0], CK_F32, 4);
    ck_node *bad = NODE(CK_OP_CLIP, "/clip/bad", 1, IN("x4", CK_F32, 4), IN("lo4", CK_F32, 2));
    EXPECT_FAIL(bad, CK_ERR_SHAPE, "(2)", "scalar");
}
END_TEST

START_TEST(cast_dtypes) {
    ck_node *a = NODE(CK_OP_CAST, "/cast/i64", 1, IN("x", CK_F32, 2, 3));
    attr_int(a, "to", 7);
    INFER_OK(a);
    EXPECT(a->out[0], CK_I64, 2, 3);
    ck_node *b = NODE(CK_OP_CAST, "/cast/f32", 1, IN("y", CK_I64, 4));
    attr_int(b, "to", 1);
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 4);
    ck_node *c = NODE(CK_OP_CAST, "/cast/bool", 1, IN0("z", CK_F32));
    attr_int(c, "to", 9);
    INFER_OK(c);
    EXPECT0(c->out[0], CK_BOOL);
    ck_node *h = NODE(CK_OP_CAST, "/cast/f16", 1, IN("w", CK_F32, 1, 2));
    attr_int(h, "to", 10);
    INFER_OK(h);
    EXPECT(h->out[0], CK_F16, 1, 2);
}
END_TEST

START_TEST(cast_errors) {
    ck_node *s = NODE(CK_OP_CAST, "/cast/str", 1, IN("x", CK_F32, 2));
    attr_int(s, "to", 8);
    EXPECT_FAIL(s, CK_ERR_UNSUPPORTED, "STRING");
    ck_node *m = NODE(CK_OP_CAST, "/cast/noto", 1, IN("y", CK_F32, 2));
    EXPECT_FAIL(m, CK_ERR_MODEL, "'to'");
}
END_TEST

/* ---------------------------------------------------------------- Softmax, norms, Dropout */

START_TEST(softmax_axes) {
    ck_node *n = NODE(CK_OP_SOFTMAX, "/sm", 1, IN("x", CK_F32, 2, 3, 4));
    INFER_OK(n);
    EXPECT(n->out[0], CK_F32, 2, 3, 4);
    ck_node *m = NODE(CK_OP_LOG_SOFTMAX, "/lsm", 1, IN("y", CK_F32, 2, 3, 4));
    attr_int(m, "axis", -3);
    INFER_OK(m);
    EXPECT(m->out[0], CK_F32, 2, 3, 4);
    ck_node *o = NODE(CK_OP_SOFTMAX, "/sm1", 1, IN("z", CK_F32, 5, 6));
    attr_int(o, "axis", 1);
    INFER_OK(o);
    EXPECT(o->out[0], CK_F32, 5, 6);
}
END_TEST

START_TEST(softmax_errors) {
    ck_node *n = NODE(CK_OP_SOFTMAX, "/sm/bad", 1, IN("x", CK_F32, 2, 3, 4));
    attr_int(n, "axis", 3);
    EXPECT_FAIL(n, CK_ERR_SHAPE, "axis 3", "rank 3");
    ck_node *m = NODE(CK_OP_LOG_SOFTMAX, "/lsm/bad", 1, IN("y", CK_F32, 2, 3, 4));
    attr_int(m, "axis", -4);
    EXPECT_FAIL(m, CK_ERR_SHAPE, "axis -4");
    ck_node *i = NODE(CK_OP_SOFTMAX, "/sm/int", 1, IN("z", CK_I64, 2, 3));
    EXPECT_FAIL(i, CK_ERR_UNSUPPORTED, "int64");
}
END_TEST

START_TEST(layer_norm_axes) {
    /* axis -1: Mean/InvStdDev keep the leading dims and put 1 over the normalized ones */
    ck_node *n = NODE(CK_OP_LAYER_NORM, "/ln", 3, IN("x", CK_F32, 2, 3, 4), IN("s", CK_F32, 4), IN("b", CK_F32, 4));
    INFER_OK(n);
    EXPECT(n->out[0], CK_F32, 2, 3, 4);
    EXPECT(n->out[1], CK_F32, 2, 3, 1);
    EXPECT(n->out[2], CK_F32, 2, 3, 1);
    /* axis 1: normalized shape (3,4) */
    ck_node *m = NODE(CK_OP_LAYER_NORM, "/ln1", 3, IN("x1", CK_F32, 2, 3, 4), IN("s1", CK_F32, 3, 4));
    attr_int(m, "axis", 1);
    INFER_OK(m);
    EXPECT(m->out[0], CK_F32, 2, 3, 4);
    EXPECT(m->out[1], CK_F32, 2, 1, 1);
    EXPECT(m->out[2], CK_F32, 2, 1, 1);
    /* one output only */
    ck_node *o = NODE(CK_OP_LAYER_NORM, "/ln2", 1, IN("x2", CK_F32, 8, 16), IN("s2", CK_F32, 16));
    INFER_OK(o);
    EXPECT(o->out[0], CK_F32, 8, 16);
}
END_TEST

START_TEST(layer_norm_errors) {
    ck_node *n = NODE(CK_OP_LAYER_NORM, "/ln/bad", 1, IN("x", CK_F32, 2, 3, 4), IN("s", CK_F32, 3));
    EXPECT_FAIL(n, CK_ERR_SHAPE, "(3)", "(4)");
    ck_node *b = NODE(CK_OP_LAYER_NORM, "/ln/badB", 1, IN("x1", CK_F32, 2, 3, 4), IN("s1", CK_F32, 4), IN("b1", CK_F32, 5));
    EXPECT_FAIL(b, CK_ERR_SHAPE, "(5)", "(4)");
    ck_node *a = NODE(CK_OP_LAYER_NORM, "/ln/axis", 1, IN("x2", CK_F32, 2, 3), IN("s2", CK_F32, 3));
    attr_int(a, "axis", 2);
    EXPECT_FAIL(a, CK_ERR_SHAPE, "axis 2", "(2,3)");
}
END_TEST

static ck_node *bn_node(const char *name, int n_out, int64_t c_stats) {
    char nm[5][64];
    const char *suffix[] = {"x", "scale", "bias", "mean", "var"};
    for (int i = 0; i < 5; i++) snprintf(nm[i], sizeof nm[i], "%s.%s", name, suffix[i]);
    ck_value *x = ck_graph_add_value(G, nm[0], CK_F32, 4, DIMS(2, 3, 4, 4), CK_ROLE_INPUT);
    ck_value *in[5] = {x};
    for (int i = 1; i < 5; i++)
        in[i] = ck_graph_add_value(G, nm[i], CK_F32, 1, DIMS(i == 3 ? c_stats : 3), i < 3 ? CK_ROLE_PARAM : CK_ROLE_BUFFER);
    return ck_graph_add_node(G, CK_OP_BATCH_NORM, name, 5, in, n_out);
}

START_TEST(batch_norm_modes) {
    ck_node *n = bn_node("/bn/eval", 1, 3);
    attr_int(n, "training_mode", 0);
    INFER_OK(n);
    EXPECT(n->out[0], CK_F32, 2, 3, 4, 4);
    ck_node *t = bn_node("/bn/train", 3, 3);
    attr_int(t, "training_mode", 1);
    INFER_OK(t);
    EXPECT(t->out[0], CK_F32, 2, 3, 4, 4);
    EXPECT(t->out[1], CK_F32, 3);
    EXPECT(t->out[2], CK_F32, 3);
}
END_TEST

START_TEST(batch_norm_errors) {
    ck_node *n = bn_node("/bn/chan", 1, 4); /* input_mean (4) vs 3 channels */
    EXPECT_FAIL(n, CK_ERR_SHAPE, "(4)", "(2,3,4,4)");
    ck_node *m = bn_node("/bn/outs", 3, 3); /* running stats requested without training_mode */
    EXPECT_FAIL(m, CK_ERR_MODEL, "training_mode");
}
END_TEST

START_TEST(dropout_forms) {
    ck_node *n = NODE(CK_OP_DROPOUT, "/drop", 1, IN("x", CK_F32, 2, 5));
    INFER_OK(n);
    EXPECT(n->out[0], CK_F32, 2, 5);
    ck_node *m = NODE(CK_OP_DROPOUT, "/drop/mask", 2, IN("y", CK_F32, 2, 5), scalar_f32("ratio", 0.1f),
                      scalar_bool("train", true));
    INFER_OK(m);
    EXPECT(m->out[0], CK_F32, 2, 5);
    EXPECT(m->out[1], CK_BOOL, 2, 5);
    /* ratio given as a run-time input is accepted */
    ck_node *r = NODE(CK_OP_DROPOUT, "/drop/rt", 2, IN("z", CK_F32, 3), IN0("r", CK_F32));
    INFER_OK(r);
    EXPECT(r->out[1], CK_BOOL, 3);
}
END_TEST

START_TEST(dropout_errors) {
    ck_node *n = NODE(CK_OP_DROPOUT, "/drop/ratio", 1, IN("x", CK_F32, 2), scalar_f32("ratio", 1.5f));
    EXPECT_FAIL(n, CK_ERR_MODEL, "1.5");
    ck_node *m = NODE(CK_OP_DROPOUT, "/drop/vec", 1, IN("y", CK_F32, 2), IN("r2", CK_F32, 2));
    EXPECT_FAIL(m, CK_ERR_SHAPE, "(2)", "scalar");
    ck_node *t = NODE(CK_OP_DROPOUT, "/drop/tm", 1, IN("z", CK_F32, 2), NULL, IN0("tm", CK_F32));
    EXPECT_FAIL(t, CK_ERR_SHAPE, "bool");
}
END_TEST

/* ---------------------------------------------------------------- random ops */

START_TEST(random_forms) {
    /* RandomUniform / RandomNormal: the shape attribute, float by default, dtype double */
    ck_node *u = ck_graph_add_node(G, CK_OP_RANDOM_UNIFORM, "/ru", 0, NULL, 1);
    ATTR_INTS(u, "shape", 2, 3, 4);
    INFER_OK(u);
    EXPECT(u->out[0], CK_F32, 2, 3, 4);
    ck_node *z = ck_graph_add_node(G, CK_OP_RANDOM_NORMAL, "/rn", 0, NULL, 1);
    ATTR_INTS(z, "shape", 5);
    attr_int(z, "dtype", 11);
    INFER_OK(z);
    EXPECT(z->out[0], CK_F64, 5);
    /* *Like: the input's shape; the input's dtype, or the attribute's (any input dtype then) */
    ck_node *ul = NODE(CK_OP_RANDOM_UNIFORM_LIKE, "/rul", 1, IN("x", CK_F64, 2, 7));
    INFER_OK(ul);
    EXPECT(ul->out[0], CK_F64, 2, 7);
    ck_node *zl = NODE(CK_OP_RANDOM_NORMAL_LIKE, "/rnl", 1, IN("i", CK_I64, 3));
    attr_int(zl, "dtype", 1);
    INFER_OK(zl);
    EXPECT(zl->out[0], CK_F32, 3);
    /* Bernoulli: the input's shape and dtype, or the attribute's (bool, ints too) */
    ck_node *b = NODE(CK_OP_BERNOULLI, "/bern", 1, IN("p", CK_F32, 2, 1, 1, 1));
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 2, 1, 1, 1);
    ck_node *bb = NODE(CK_OP_BERNOULLI, "/bern/bool", 1, IN("q", CK_F64, 4));
    attr_int(bb, "dtype", 9);
    INFER_OK(bb);
    EXPECT(bb->out[0], CK_BOOL, 4);
    ck_assert(ck_ops[CK_OP_BERNOULLI].flags & CK_OPF_RANDOM);
    ck_assert(ck_ops[CK_OP_RANDOM_UNIFORM_LIKE].diff_inputs == 0);
}
END_TEST

START_TEST(random_errors) {
    ck_node *u = ck_graph_add_node(G, CK_OP_RANDOM_UNIFORM, "/ru/noshape", 0, NULL, 1);
    EXPECT_FAIL(u, CK_ERR_MODEL, "shape");
    ck_node *neg = ck_graph_add_node(G, CK_OP_RANDOM_NORMAL, "/rn/neg", 0, NULL, 1);
    ATTR_INTS(neg, "shape", 2, -1);
    EXPECT_FAIL(neg, CK_ERR_SHAPE, "-1");
    ck_node *idt = ck_graph_add_node(G, CK_OP_RANDOM_NORMAL, "/rn/int", 0, NULL, 1);
    ATTR_INTS(idt, "shape", 2);
    attr_int(idt, "dtype", 7);
    EXPECT_FAIL(idt, CK_ERR_MODEL, "int64", "float");
    /* an int input without a dtype attribute: no float dtype to take */
    ck_node *ul = NODE(CK_OP_RANDOM_UNIFORM_LIKE, "/rul/int", 1, IN("i", CK_I64, 3));
    EXPECT_FAIL(ul, CK_ERR_MODEL, "'i'", "dtype");
    /* Bernoulli's probabilities must be floats */
    ck_node *b = NODE(CK_OP_BERNOULLI, "/bern/int", 1, IN("j", CK_I32, 3));
    EXPECT_FAIL(b, CK_ERR_MODEL, "'j'", "probabilities");
    ck_node *bad = NODE(CK_OP_BERNOULLI, "/bern/dt", 1, IN("k", CK_F32, 3));
    attr_int(bad, "dtype", 8); /* string */
    EXPECT_FAIL(bad, CK_ERR_UNSUPPORTED, "dtype");
}
END_TEST

/* ---------------------------------------------------------------- Conv and pooling */

START_TEST(conv_2d) {
    /* x(1,4,7,7) w(8,2,3,3) group=2 stride 2 pad 1 -> (1,8,4,4) */
    ck_node *n = NODE(CK_OP_CONV, "/conv", 1, IN("x", CK_F32, 1, 4, 7, 7), IN("w", CK_F32, 8, 2, 3, 3), IN("b", CK_F32, 8));
    attr_int(n, "group", 2);
    ATTR_INTS(n, "strides", 2, 2);
    ATTR_INTS(n, "pads", 1, 1, 1, 1);
    ATTR_INTS(n, "kernel_shape", 3, 3);
    INFER_OK(n);
    EXPECT(n->out[0], CK_F32, 1, 8, 4, 4);
    /* no attributes: stride 1, no pad */
    ck_node *p = NODE(CK_OP_CONV, "/conv/plain", 1, IN("x1", CK_F32, 2, 3, 10, 9), IN("w1", CK_F32, 6, 3, 3, 2));
    INFER_OK(p);
    EXPECT(p->out[0], CK_F32, 2, 6, 8, 8);
    /* asymmetric pads and dilation: H 10+0+2-5+1=8, W 9+1+0-3+1=8 */
    ck_node *d = NODE(CK_OP_CONV, "/conv/dil", 1, IN("x2", CK_F32, 1, 3, 10, 9), IN("w2", CK_F32, 4, 3, 3, 3));
    ATTR_INTS(d, "dilations", 2, 1);
    ATTR_INTS(d, "pads", 0, 1, 2, 0);
    INFER_OK(d);
    EXPECT(d->out[0], CK_F32, 1, 4, 8, 8);
}
END_TEST

START_TEST(conv_auto_pad_and_1d) {
    ck_node *s = NODE(CK_OP_CONV, "/conv/same", 1, IN("x", CK_F32, 1, 3, 10, 9), IN("w", CK_F32, 8, 3, 3, 3));
    attr_str(s, "auto_pad", "SAME_UPPER");
    ATTR_INTS(s, "strides", 2, 2);
    INFER_OK(s);
    EXPECT(s->out[0], CK_F32, 1, 8, 5, 5);
    ck_node *v = NODE(CK_OP_CONV, "/conv/valid", 1, IN("x1", CK_F32, 1, 3, 10, 9), IN("w1", CK_F32, 8, 3, 3, 3));
    attr_str(v, "auto_pad", "VALID");
    ATTR_INTS(v, "strides", 2, 2);
    ATTR_INTS(v, "dilations", 1, 2);
    INFER_OK(v);
    EXPECT(v->out[0], CK_F32, 1, 8, 4, 3);
    ck_node *c1 = NODE(CK_OP_CONV, "/conv1d", 1, IN("x2", CK_F32, 2, 3, 10), IN("w2", CK_F32, 5, 3, 3));
    ATTR_INTS(c1, "dilations", 2);
    INFER_OK(c1);
    EXPECT(c1->out[0], CK_F32, 2, 5, 6);
    ck_node *c2 = NODE(CK_OP_CONV, "/conv1d/s", 1, IN("x3", CK_F32, 1, 2, 16), IN("w3", CK_F32, 4, 2, 4));
    ATTR_INTS(c2, "strides", 4);
    INFER_OK(c2);
    EXPECT(c2->out[0], CK_F32, 1, 4, 4);
}
END_TEST

START_TEST(conv_errors) {
    /* w(8,3,...) with group 2 needs x channels 6, not 4 */
    ck_node *g = NODE(CK_OP_CONV, "/conv/group", 1, IN("x", CK_F32, 1, 4, 7, 7), IN("w", CK_F32, 8, 3, 3, 3));
    attr_int(g, "group", 2);
    EXPECT_FAIL(g, CK_ERR_SHAPE, "(1,4,7,7)", "(8,3,3,3)");
    ck_node *b = NODE(CK_OP_CONV, "/conv/bias", 1, IN("x1", CK_F32, 1, 3, 5, 5), IN("w1", CK_F32, 8, 3, 3, 3), IN("b1", CK_F32, 4));
    EXPECT_FAIL(b, CK_ERR_SHAPE, "(4)");
    ck_node *k = NODE(CK_OP_CONV, "/conv/ks", 1, IN("x2", CK_F32, 1, 3, 5, 5), IN("w2", CK_F32, 8, 3, 3, 3));
    ATTR_INTS(k, "kernel_shape", 2, 2);
    EXPECT_FAIL(k, CK_ERR_SHAPE, "kernel_shape");
    ck_node *f = NODE(CK_OP_CONV, "/conv/fit", 1, IN("x3", CK_F32, 1, 3, 2, 2), IN("w3", CK_F32, 8, 3, 3, 3));
    EXPECT_FAIL(f, CK_ERR_SHAPE, "(1,3,2,2)");
    ck_node *r = NODE(CK_OP_CONV, "/conv/rank", 1, IN("x4", CK_F32, 1, 3, 5, 5), IN("w4", CK_F32, 8, 3, 3));
    EXPECT_FAIL(r, CK_ERR_SHAPE, "(1,3,5,5)", "(8,3,3)");
}
END_TEST

START_TEST(max_pool_modes) {
    ck_node *f = NODE(CK_OP_MAX_POOL, "/mp/floor", 2, IN("x", CK_F32, 1, 1, 32, 32));
    ATTR_INTS(f, "kernel_shape", 3, 3);
    ATTR_INTS(f, "strides", 2, 2);
    INFER_OK(f);
    EXPECT(f->out[0], CK_F32, 1, 1, 15, 15);
    EXPECT(f->out[1], CK_I64, 1, 1, 15, 15);
    ck_node *c = NODE(CK_OP_MAX_POOL, "/mp/ceil", 2, IN("x1", CK_F32, 1, 1, 32, 32));
    ATTR_INTS(c, "kernel_shape", 3, 3);
    ATTR_INTS(c, "strides", 2, 2);
    attr_int(c, "ceil_mode", 1);
    INFER_OK(c);
    EXPECT(c->out[0], CK_F32, 1, 1, 16, 16);
    EXPECT(c->out[1], CK_I64, 1, 1, 16, 16);
    ck_node *p = NODE(CK_OP_MAX_POOL, "/mp/pad", 1, IN("x2", CK_F32, 2, 3, 7, 8));
    ATTR_INTS(p, "kernel_shape", 3, 3);
    ATTR_INTS(p, "strides", 2, 2);
    ATTR_INTS(p, "pads", 1, 1, 1, 1);
    INFER_OK(p);
    EXPECT(p->out[0], CK_F32, 2, 3, 4, 4);
    /* ceil_mode on padded input: (4+2-2)/2 -> 3 (ceil of exact division) */
    ck_node *q = NODE(CK_OP_MAX_POOL, "/mp/ceilpad", 1, IN("x3", CK_F32, 1, 1, 4, 4));
    ATTR_INTS(q, "kernel_shape", 2, 2);
    ATTR_INTS(q, "strides", 2, 2);
    ATTR_INTS(q, "pads", 1, 1, 1, 1);
    attr_int(q, "ceil_mode", 1);
    INFER_OK(q);
    EXPECT(q->out[0], CK_F32, 1, 1, 3, 3);
    /* ceil_mode drops a window that would start in the right padding (ONNX >= 1.16 and PyTorch
     * rule): 4 wide, kernel 1, stride 3, end pad 1: ceil(4/3)+1 = 3 windows at 0, 3, 6; 6 >= 4 */
    ck_node *r = NODE(CK_OP_MAX_POOL, "/mp/ceildrop", 1, IN("x4", CK_F32, 1, 1, 4, 4));
    ATTR_INTS(r, "kernel_shape", 1, 1);
    ATTR_INTS(r, "strides", 3, 3);
    ATTR_INTS(r, "pads", 0, 0, 1, 1);
    attr_int(r, "ceil_mode", 1);
    INFER_OK(r);
    EXPECT(r->out[0], CK_F32, 1, 1, 2, 2);
}
END_TEST

START_TEST(pool_errors) {
    ck_node *k = NODE(CK_OP_MAX_POOL, "/mp/noks", 1, IN("x", CK_F32, 1, 1, 8, 8));
    EXPECT_FAIL(k, CK_ERR_MODEL, "kernel_shape");
    ck_node *s = NODE(CK_OP_MAX_POOL, "/mp/so", 2, IN("x1", CK_F32, 1, 1, 8, 8));
    ATTR_INTS(s, "kernel_shape", 2, 2);
    attr_int(s, "storage_order", 1);
    EXPECT_FAIL(s, CK_ERR_UNSUPPORTED, "storage_order");
    ck_node *r = NODE(CK_OP_AVG_POOL, "/ap/rank", 1, IN("x2", CK_F32, 4, 8));
    ATTR_INTS(r, "kernel_shape", 2);
    EXPECT_FAIL(r, CK_ERR_SHAPE, "(4,8)");
    ck_node *f = NODE(CK_OP_AVG_POOL, "/ap/fit", 1, IN("x3", CK_F32, 1, 1, 2, 8));
    ATTR_INTS(f, "kernel_shape", 3, 3);
    EXPECT_FAIL(f, CK_ERR_SHAPE, "(1,1,2,8)");
}
END_TEST

START_TEST(avg_and_global_pool) {
    ck_node *a = NODE(CK_OP_AVG_POOL, "/ap", 1, IN("x", CK_F32, 1, 2, 7, 7));
    ATTR_INTS(a, "kernel_shape", 3, 3);
    ATTR_INTS(a, "strides", 2, 2);
    ATTR_INTS(a, "pads", 1, 1, 1, 1);
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 1, 2, 4, 4);
    ck_node *a1 = NODE(CK_OP_AVG_POOL, "/ap1d", 1, IN("x1", CK_F32, 3, 4, 9));
    ATTR_INTS(a1, "kernel_shape", 3);
    INFER_OK(a1);
    EXPECT(a1->out[0], CK_F32, 3, 4, 7);
    ck_node *g = NODE(CK_OP_GLOBAL_AVG_POOL, "/gap", 1, IN("x2", CK_F32, 2, 3, 5, 7));
    INFER_OK(g);
    EXPECT(g->out[0], CK_F32, 2, 3, 1, 1);
    ck_node *g3 = NODE(CK_OP_GLOBAL_AVG_POOL, "/gap3", 1, IN("x3", CK_F32, 2, 3, 5, 7, 9));
    INFER_OK(g3);
    EXPECT(g3->out[0], CK_F32, 2, 3, 1, 1, 1);
    ck_node *gb = NODE(CK_OP_GLOBAL_AVG_POOL, "/gap/bad", 1, IN("x4", CK_F32, 2, 3));
    EXPECT_FAIL(gb, CK_ERR_SHAPE, "(2,3)");
}
END_TEST

/* ---------------------------------------------------------------- reductions */

START_TEST(reduce_axes_attribute) {
    ck_node *a = NODE(CK_OP_REDUCE_MEAN, "/rm", 1, IN("x", CK_F32, 2, 3, 4));
    ATTR_INTS(a, "axes", 1);
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 1, 4);
    ck_node *b = NODE(CK_OP_REDUCE_MEAN, "/rm/k0", 1, IN("x1", CK_F32, 2, 3, 4));
    ATTR_INTS(b, "axes", -1, 0);
    attr_int(b, "keepdims", 0);
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 3);
    /* no axes at all: reduce everything */
    ck_node *c = NODE(CK_OP_REDUCE_MEAN, "/rm/all", 1, IN("x2", CK_F32, 2, 3, 4));
    attr_int(c, "keepdims", 0);
    INFER_OK(c);
    EXPECT0(c->out[0], CK_F32);
    ck_node *d = NODE(CK_OP_REDUCE_SUM, "/rs/allk", 1, IN("x3", CK_F32, 2, 3, 4));
    INFER_OK(d);
    EXPECT(d->out[0], CK_F32, 1, 1, 1);
}
END_TEST

START_TEST(reduce_axes_input) {
    ck_node *a = NODE(CK_OP_REDUCE_SUM, "/rs", 1, IN("x", CK_F32, 2, 3, 4), VEC("ax", 1));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 1, 4);
    ck_node *b = NODE(CK_OP_REDUCE_MEAN, "/rm18", 1, IN("x1", CK_F32, 2, 3, 4), VEC("ax1", 0, 2));
    attr_int(b, "keepdims", 0);
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 3);
    /* empty axes input: reduce all, unless noop_with_empty_axes */
    ck_node *c = NODE(CK_OP_REDUCE_SUM, "/rs/empty", 1, IN("x2", CK_F32, 2, 3, 4), empty_vec("ax2"));
    INFER_OK(c);
    EXPECT(c->out[0], CK_F32, 1, 1, 1);
    ck_node *d = NODE(CK_OP_REDUCE_SUM, "/rs/noop", 1, IN("x3", CK_F32, 2, 3, 4), empty_vec("ax3"));
    attr_int(d, "noop_with_empty_axes", 1);
    INFER_OK(d);
    EXPECT(d->out[0], CK_F32, 2, 3, 4);
    ck_node *e = NODE(CK_OP_REDUCE_SUM, "/rs/noop2", 1, IN("x4", CK_I64, 5));
    attr_int(e, "noop_with_empty_axes", 1);
    attr_int(e, "keepdims", 0);
    INFER_OK(e);
    EXPECT(e->out[0], CK_I64, 5);
}
END_TEST

START_TEST(reduce_errors) {
    ck_node *a = NODE(CK_OP_REDUCE_MEAN, "/rm/range", 1, IN("x", CK_F32, 2, 3));
    ATTR_INTS(a, "axes", 2);
    EXPECT_FAIL(a, CK_ERR_SHAPE, "axis 2", "(2,3)");
    ck_node *b = NODE(CK_OP_REDUCE_SUM, "/rs/rt", 1, IN("x1", CK_F32, 2, 3), IN("ax", CK_I64, 1));
    EXPECT_FAIL(b, CK_ERR_UNSUPPORTED, "'ax'", "compile time");
    ck_node *c = NODE(CK_OP_REDUCE_SUM, "/rs/rep", 1, IN("x2", CK_F32, 2, 3), VEC("ax2", 1, -1));
    EXPECT_FAIL(c, CK_ERR_SHAPE, "repeated");
}
END_TEST

/* ---------------------------------------------------------------- Flatten, Reshape, Transpose */

START_TEST(flatten_axes) {
    static const struct { int64_t axis; int64_t d0, d1; } cases[] = {{0, 1, 24}, {1, 2, 12}, {-1, 6, 4}, {3, 24, 1}, {-3, 1, 24}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ck_node *n = NODE(CK_OP_FLATTEN, "/flat", 1, IN("x", CK_F32, 2, 3, 4));
        attr_int(n, "axis", cases[i].axis);
        INFER_OK(n);
        char why[512];
        ck_assert_msg(shape_is(n->out[0], CK_F32, 2, DIMS(cases[i].d0, cases[i].d1), why, sizeof why), "axis %lld: %s",
                      (long long)cases[i].axis, why);
    }
    ck_node *d = NODE(CK_OP_FLATTEN, "/flat/default", 1, IN("y", CK_I64, 5, 2, 2));
    INFER_OK(d);
    EXPECT(d->out[0], CK_I64, 5, 4);
    ck_node *bad = NODE(CK_OP_FLATTEN, "/flat/bad", 1, IN("z", CK_F32, 2, 3, 4));
    attr_int(bad, "axis", 4);
    EXPECT_FAIL(bad, CK_ERR_SHAPE, "axis 4", "(2,3,4)");
}
END_TEST

START_TEST(reshape_ok) {
    ck_node *a = NODE(CK_OP_RESHAPE, "/rs/copy", 1, IN("x", CK_F32, 2, 3, 4), VEC("s", 0, -1, 2));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 6, 2);
    ck_node *b = NODE(CK_OP_RESHAPE, "/rs/flat", 1, IN("x1", CK_F32, 2, 3, 4), VEC("s1", -1));
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 24);
    ck_node *c = NODE(CK_OP_RESHAPE, "/rs/up", 1, IN("x2", CK_I64, 6), VEC("s2", 1, 2, 1, 3));
    INFER_OK(c);
    EXPECT(c->out[0], CK_I64, 1, 2, 1, 3);
    ck_node *s = NODE(CK_OP_RESHAPE, "/rs/scalar", 1, IN("x3", CK_F32, 1, 1), empty_vec("s3"));
    INFER_OK(s);
    EXPECT0(s->out[0], CK_F32);
    /* allowzero=1: 0 is a real zero-sized dim, not "copy" */
    ck_node *z = NODE(CK_OP_RESHAPE, "/rs/az", 1, IN("x4", CK_F32, 0, 4), VEC("s4", 0, 2, 2));
    attr_int(z, "allowzero", 1);
    INFER_OK(z);
    EXPECT(z->out[0], CK_F32, 0, 2, 2);
    /* the same shape without allowzero copies dim 0 of the input (3) */
    ck_node *w = NODE(CK_OP_RESHAPE, "/rs/nz", 1, IN("x5", CK_F32, 3, 4), VEC("s5", 0, 2, 2));
    INFER_OK(w);
    EXPECT(w->out[0], CK_F32, 3, 2, 2);
}
END_TEST

START_TEST(reshape_errors) {
    ck_node *a = NODE(CK_OP_RESHAPE, "/rs/count", 1, IN("x", CK_F32, 2, 3, 4), VEC("s", 5, 5));
    EXPECT_FAIL(a, CK_ERR_SHAPE, "(2,3,4)", "(5,5)", "24", "25");
    ck_node *b = NODE(CK_OP_RESHAPE, "/rs/two", 1, IN("x1", CK_F32, 2, 3, 4), VEC("s1", -1, 2, -1));
    EXPECT_FAIL(b, CK_ERR_SHAPE, "-1");
    ck_node *c = NODE(CK_OP_RESHAPE, "/rs/rt", 1, IN("x2", CK_F32, 2, 3, 4), IN("s2", CK_I64, 2));
    EXPECT_FAIL(c, CK_ERR_UNSUPPORTED, "'s2'", "compile time");
    /* allowzero=1 makes 0 literal, so (2,0) has 0 elements, not 6 */
    ck_node *d = NODE(CK_OP_RESHAPE, "/rs/az", 1, IN("x3", CK_F32, 2, 3), VEC("s3", 2, 0));
    attr_int(d, "allowzero", 1);
    EXPECT_FAIL(d, CK_ERR_SHAPE, "(2,3)", "(2,0)");
    ck_node *e = NODE(CK_OP_RESHAPE, "/rs/div", 1, IN("x4", CK_F32, 2, 3, 4), VEC("s4", 5, -1));
    EXPECT_FAIL(e, CK_ERR_SHAPE, "(2,3,4)");
    ck_node *f = NODE(CK_OP_RESHAPE, "/rs/neg", 1, IN("x5", CK_F32, 6), VEC("s5", -2, -3));
    EXPECT_FAIL(f, CK_ERR_SHAPE, "negative");
    ck_node *g = NODE(CK_OP_RESHAPE, "/rs/copyout", 1, IN("x6", CK_F32, 6), VEC("s6", 6, 0));
    EXPECT_FAIL(g, CK_ERR_SHAPE, "rank 1");
}
END_TEST

START_TEST(transpose_perm) {
    ck_node *a = NODE(CK_OP_TRANSPOSE, "/tr", 1, IN("x", CK_F32, 2, 3, 4));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 4, 3, 2);
    ck_node *b = NODE(CK_OP_TRANSPOSE, "/tr/perm", 1, IN("x1", CK_F32, 2, 3, 4, 5));
    ATTR_INTS(b, "perm", 0, 2, 1, 3);
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 2, 4, 3, 5);
    ck_node *c = NODE(CK_OP_TRANSPOSE, "/tr/perm2", 1, IN("x2", CK_I64, 2, 3, 4));
    ATTR_INTS(c, "perm", 1, 2, 0);
    INFER_OK(c);
    EXPECT(c->out[0], CK_I64, 3, 4, 2);
    ck_node *d = NODE(CK_OP_TRANSPOSE, "/tr/dup", 1, IN("x3", CK_F32, 2, 3, 4));
    ATTR_INTS(d, "perm", 0, 0, 1);
    EXPECT_FAIL(d, CK_ERR_SHAPE, "perm", "(2,3,4)");
    ck_node *e = NODE(CK_OP_TRANSPOSE, "/tr/len", 1, IN("x4", CK_F32, 2, 3, 4));
    ATTR_INTS(e, "perm", 1, 0);
    EXPECT_FAIL(e, CK_ERR_SHAPE, "perm", "rank 3");
}
END_TEST

/* ---------------------------------------------------------------- Concat, Split, Slice */

START_TEST(concat_axes) {
    ck_node *a = NODE(CK_OP_CONCAT, "/cat", 1, IN("a", CK_F32, 2, 3), IN("b", CK_F32, 2, 5));
    attr_int(a, "axis", -1);
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 8);
    ck_node *b = NODE(CK_OP_CONCAT, "/cat0", 1, IN("c", CK_I64, 1), IN("d", CK_I64, 2), IN("e", CK_I64, 3));
    attr_int(b, "axis", 0);
    INFER_OK(b);
    EXPECT(b->out[0], CK_I64, 6);
    ck_node *c = NODE(CK_OP_CONCAT, "/cat1", 1, IN("f", CK_F32, 2, 3, 4));
    attr_int(c, "axis", 1);
    INFER_OK(c);
    EXPECT(c->out[0], CK_F32, 2, 3, 4);
}
END_TEST

START_TEST(concat_errors) {
    ck_node *a = NODE(CK_OP_CONCAT, "/cat/bad", 1, IN("a", CK_F32, 2, 3), IN("b", CK_F32, 3, 3));
    attr_int(a, "axis", 1);
    EXPECT_FAIL(a, CK_ERR_SHAPE, "(2,3)", "(3,3)");
    ck_node *b = NODE(CK_OP_CONCAT, "/cat/noaxis", 1, IN("c", CK_F32, 2), IN("d", CK_F32, 2));
    EXPECT_FAIL(b, CK_ERR_MODEL, "axis");
    ck_node *c = NODE(CK_OP_CONCAT, "/cat/range", 1, IN("e", CK_F32, 2), IN("f", CK_F32, 2));
    attr_int(c, "axis", 1);
    EXPECT_FAIL(c, CK_ERR_SHAPE, "axis 1");
    ck_node *d = NODE(CK_OP_CONCAT, "/cat/rank", 1, IN("g", CK_F32, 2, 3), IN("h", CK_F32, 2, 3, 1));
    attr_int(d, "axis", 0);
    EXPECT_FAIL(d, CK_ERR_SHAPE, "(2,3,1)");
    ck_node *e = NODE(CK_OP_CONCAT, "/cat/dtype", 1, IN("i", CK_F32, 2), IN("j", CK_I64, 2));
    attr_int(e, "axis", 0);
    EXPECT_FAIL(e, CK_ERR_SHAPE, "int64");
}
END_TEST

START_TEST(split_forms) {
    ck_node *a = NODE(CK_OP_SPLIT, "/split/in", 2, IN("x", CK_F32, 7, 4), VEC("s", 2, 5));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 4);
    EXPECT(a->out[1], CK_F32, 5, 4);
    ck_node *b = NODE(CK_OP_SPLIT, "/split/attr", 2, IN("x1", CK_F32, 7, 3));
    attr_int(b, "axis", -1);
    ATTR_INTS(b, "split", 1, 2);
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 7, 1);
    EXPECT(b->out[1], CK_F32, 7, 2);
    ck_node *c = NODE(CK_OP_SPLIT, "/split/eq", 3, IN("x2", CK_F32, 6, 4));
    INFER_OK(c);
    for (int i = 0; i < 3; i++) EXPECT(c->out[i], CK_F32, 2, 4);
    /* opset 18: num_outputs with an uneven last chunk, 7 into 3 -> 3,3,1 */
    ck_node *d = NODE(CK_OP_SPLIT, "/split/num", 3, IN("x3", CK_F32, 7, 2));
    attr_int(d, "num_outputs", 3);
    INFER_OK(d);
    EXPECT(d->out[0], CK_F32, 3, 2);
    EXPECT(d->out[1], CK_F32, 3, 2);
    EXPECT(d->out[2], CK_F32, 1, 2);
    ck_node *e = NODE(CK_OP_SPLIT, "/split/num4", 4, IN("x4", CK_F32, 3, 10));
    attr_int(e, "num_outputs", 4);
    attr_int(e, "axis", 1);
    INFER_OK(e);
    EXPECT(e->out[0], CK_F32, 3, 3);
    EXPECT(e->out[2], CK_F32, 3, 3);
    EXPECT(e->out[3], CK_F32, 3, 1);
}
END_TEST

START_TEST(split_errors) {
    ck_node *a = NODE(CK_OP_SPLIT, "/split/uneven", 3, IN("x", CK_F32, 7, 2));
    EXPECT_FAIL(a, CK_ERR_SHAPE, "(7,2)");
    ck_node *b = NODE(CK_OP_SPLIT, "/split/sum", 2, IN("x1", CK_F32, 7, 2), VEC("s1", 3, 3));
    EXPECT_FAIL(b, CK_ERR_SHAPE, "(7,2)", "6");
    ck_node *c = NODE(CK_OP_SPLIT, "/split/count", 2, IN("x2", CK_F32, 7, 2), VEC("s2", 3, 3, 1));
    EXPECT_FAIL(c, CK_ERR_SHAPE, "3 sizes", "2 outputs");
    ck_node *d = NODE(CK_OP_SPLIT, "/split/numout", 2, IN("x3", CK_F32, 8));
    attr_int(d, "num_outputs", 4);
    EXPECT_FAIL(d, CK_ERR_MODEL, "num_outputs");
}
END_TEST

START_TEST(slice_basic) {
    /* negative starts/ends: x[-3:-1] of 10 -> 2 */
    ck_node *a = NODE(CK_OP_SLICE, "/sl/neg", 1, IN("x", CK_F32, 10), VEC("s", -3), VEC("e", -1));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2);
    /* axes subset (axis 1 only), INT64_MAX end: x[:, 2:] */
    ck_node *b = NODE(CK_OP_SLICE, "/sl/axes", 1, IN("x1", CK_F32, 4, 10, 6), VEC("s1", 2), VEC("e1", INT64_MAX), VEC("a1", 1));
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 4, 8, 6);
    /* out-of-range values clamp: [-100:100] keeps everything, [7:100] of 5 is empty */
    ck_node *c = NODE(CK_OP_SLICE, "/sl/clamp", 1, IN("x2", CK_F32, 5, 3), VEC("s2", -100, 7), VEC("e2", 100, 100));
    INFER_OK(c);
    EXPECT(c->out[0], CK_F32, 5, 0);
    /* steps: axis 1 from -8 (=2) to the end by 3 -> 2,5,8; axis -1 from 100 (=5) down to -100 by -2 -> 5,3,1 */
    ck_node *d = NODE(CK_OP_SLICE, "/sl/steps", 1, IN("x3", CK_F32, 4, 10, 6), VEC("s3", -8, 100), VEC("e3", INT64_MAX, -100),
                      VEC("a3", 1, -1), VEC("t3", 3, -2));
    INFER_OK(d);
    EXPECT(d->out[0], CK_F32, 4, 3, 3);
    /* full reverse: [-1::-1] with INT64_MIN end */
    ck_node *e = NODE(CK_OP_SLICE, "/sl/rev", 1, IN("x4", CK_I64, 5), VEC("s4", -1), VEC("e4", INT64_MIN), VEC("a4", 0),
                      VEC("t4", -1));
    INFER_OK(e);
    EXPECT(e->out[0], CK_I64, 5);
    /* reverse with a step of -2 from the end: 4, 2, 0 */
    ck_node *f = NODE(CK_OP_SLICE, "/sl/rev2", 1, IN("x5", CK_I64, 5), VEC("s5", INT64_MAX), VEC("e5", INT64_MIN), NULL,
                      VEC("t5", -2));
    INFER_OK(f);
    EXPECT(f->out[0], CK_I64, 3);
    /* int32 starts/ends are accepted */
    ck_value *s32 = konst("s6", CK_I32, 1, DIMS(1), (const int32_t[]){1});
    ck_value *e32 = konst("e6", CK_I32, 1, DIMS(1), (const int32_t[]){3});
    ck_node *g = NODE(CK_OP_SLICE, "/sl/i32", 1, IN("x6", CK_F32, 4, 4), s32, e32);
    INFER_OK(g);
    EXPECT(g->out[0], CK_F32, 2, 4);
}
END_TEST

START_TEST(slice_negative_step_start_clamp) {
    /* ONNX spec: for negative steps, starts clamp into [0, dim-1] and ends into [-1, dim-1].
     * x[-10:-20:-1] of 5: start -10+5=-5 clamps to 0, end -20+5=-15 clamps to -1 -> 1 element
     * (onnx.shape_inference agrees: (1)). */
    ck_node *a = NODE(CK_OP_SLICE, "/sl/negclamp", 1, IN("x", CK_F32, 5), VEC("s", -10), VEC("e", -20), VEC("a", 0), VEC("t", -1));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 1);
}
END_TEST

START_TEST(slice_errors) {
    ck_node *a = NODE(CK_OP_SLICE, "/sl/step0", 1, IN("x", CK_F32, 5), VEC("s", 0), VEC("e", 5), VEC("a", 0), VEC("t", 0));
    EXPECT_FAIL(a, CK_ERR_SHAPE, "step");
    ck_node *b = NODE(CK_OP_SLICE, "/sl/axis", 1, IN("x1", CK_F32, 5), VEC("s1", 0), VEC("e1", 5), VEC("a1", 1));
    EXPECT_FAIL(b, CK_ERR_SHAPE, "axis 1", "(5)");
    ck_node *c = NODE(CK_OP_SLICE, "/sl/len", 1, IN("x2", CK_F32, 5, 5), VEC("s2", 0, 0), VEC("e2", 5));
    EXPECT_FAIL(c, CK_ERR_SHAPE, "starts");
    ck_node *d = NODE(CK_OP_SLICE, "/sl/rt", 1, IN("x3", CK_F32, 5), IN("s3", CK_I64, 1), VEC("e3", 5));
    EXPECT_FAIL(d, CK_ERR_UNSUPPORTED, "'s3'");
    ck_node *e = NODE(CK_OP_SLICE, "/sl/rep", 1, IN("x4", CK_F32, 5, 5), VEC("s4", 0, 0), VEC("e4", 2, 2), VEC("a4", 0, -2));
    EXPECT_FAIL(e, CK_ERR_SHAPE, "repeated");
}
END_TEST

/* ---------------------------------------------------------------- Pad, ScatterND, GatherND */

START_TEST(pad_forms) {
    /* pads (begin..., end...) over every axis; a negative pad crops */
    ck_node *a = NODE(CK_OP_PAD, "/pad/all", 1, IN("x", CK_F32, 2, 3, 4), VEC("p", 0, 1, -1, 0, 2, 3));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 6, 6);
    /* opset 18 axes (negative allowed), constant_value of the data's dtype; reflect past the axis */
    ck_node *b = NODE(CK_OP_PAD, "/pad/axes", 1, IN("x1", CK_I64, 2, 3), VEC("p1", 4, 5), scalar_i64("v1", 7), VEC("a1", -1));
    INFER_OK(b);
    EXPECT(b->out[0], CK_I64, 2, 12);
    ck_node *c = NODE(CK_OP_PAD, "/pad/reflect", 1, IN("x2", CK_F32, 3, 2), VEC("p2", 5, 0, 0, 5));
    attr_str(c, "mode", "reflect");
    INFER_OK(c);
    EXPECT(c->out[0], CK_F32, 8, 7);
    int64_t begin[CK_MAX_RANK], end[CK_MAX_RANK];
    int mode;
    ck_assert_int_eq(ck_pad_params(c, begin, end, &mode, NULL), CK_OK);
    ck_assert(mode == CK_PAD_REFLECT && begin[0] == 5 && begin[1] == 0 && end[0] == 0 && end[1] == 5);
}
END_TEST

START_TEST(pad_errors) {
    ck_node *a = NODE(CK_OP_PAD, "/pad/rt", 1, IN("x", CK_F32, 2, 3), IN("p", CK_I64, 4));
    EXPECT_FAIL(a, CK_ERR_UNSUPPORTED, "pads", "'p'", "compile time");
    ck_node *b = NODE(CK_OP_PAD, "/pad/wrap", 1, IN("x1", CK_F32, 2, 3), VEC("p1", 1, 1, 1, 1));
    attr_str(b, "mode", "wrap");
    EXPECT_FAIL(b, CK_ERR_UNSUPPORTED, "wrap");
    ck_node *c = NODE(CK_OP_PAD, "/pad/count", 1, IN("x2", CK_F32, 2, 3), VEC("p2", 1, 1));
    EXPECT_FAIL(c, CK_ERR_SHAPE, "2 x 2");
    ck_node *d = NODE(CK_OP_PAD, "/pad/neg", 1, IN("x3", CK_F32, 2, 3), VEC("p3", 0, -2, 0, -2));
    EXPECT_FAIL(d, CK_ERR_SHAPE, "negative size");
    ck_node *e = NODE(CK_OP_PAD, "/pad/empty", 1, IN("x4", CK_F32, 0, 3), VEC("p4", 1, 0, 0, 0));
    attr_str(e, "mode", "edge");
    EXPECT_FAIL(e, CK_ERR_SHAPE, "empty");
    ck_node *f = NODE(CK_OP_PAD, "/pad/value", 1, IN("x5", CK_F32, 2), VEC("p5", 1, 1), scalar_i64("v5", 0));
    EXPECT_FAIL(f, CK_ERR_SHAPE, "float32");
}
END_TEST

START_TEST(nd_forms) {
    /* indices (2, 3, 1) address rows of data (5, 4): updates/output (2, 3, 4) */
    ck_node *a = NODE(CK_OP_GATHER_ND, "/gnd/rows", 1, IN("x", CK_F32, 5, 4), IN("i", CK_I64, 2, 3, 1));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 3, 4);
    ck_node *b = NODE(CK_OP_SCATTER_ND, "/snd/elems", 1, IN("x1", CK_F32, 5, 4), IN("i1", CK_I64, 3, 2), IN("u1", CK_F32, 3));
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 5, 4);
    ck_node *c = NODE(CK_OP_SCATTER_ND, "/snd/shape", 1, IN("x2", CK_F32, 5, 4), IN("i2", CK_I64, 3, 1), IN("u2", CK_F32, 3));
    EXPECT_FAIL(c, CK_ERR_SHAPE, "updates");
    ck_node *d = NODE(CK_OP_GATHER_ND, "/gnd/range", 1, IN("x3", CK_F32, 5, 4), konst("i3", CK_I64, 2, DIMS(1, 2), DIMS(1, 4)));
    EXPECT_FAIL(d, CK_ERR_SHAPE, "index 4");
    ck_node *e = NODE(CK_OP_SCATTER_ND, "/snd/max", 1, IN("x4", CK_F32, 5), IN("i4", CK_I64, 1, 1), IN("u4", CK_F32, 1));
    attr_str(e, "reduction", "max");
    EXPECT_FAIL(e, CK_ERR_UNSUPPORTED, "max");
}
END_TEST

/* ---------------------------------------------------------------- Gather, (Un)Squeeze, Expand, Trilu */

START_TEST(gather_axes) {
    ck_node *a = NODE(CK_OP_GATHER, "/ga/0", 1, IN("x", CK_F32, 5, 4), IN("i", CK_I64, 2, 3));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 3, 4);
    ck_node *b = NODE(CK_OP_GATHER, "/ga/1", 1, IN("x1", CK_F32, 5, 4, 2), IN("i1", CK_I32, 3));
    attr_int(b, "axis", 1);
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 5, 3, 2);
    /* scalar index drops the axis */
    ck_node *c = NODE(CK_OP_GATHER, "/ga/scalar", 1, IN("x2", CK_I64, 3), scalar_i64("i2", -3));
    INFER_OK(c);
    EXPECT0(c->out[0], CK_I64);
    ck_node *d = NODE(CK_OP_GATHER, "/ga/neg", 1, IN("x3", CK_F32, 5, 4), scalar_i64("i3", 3));
    attr_int(d, "axis", -1);
    INFER_OK(d);
    EXPECT(d->out[0], CK_F32, 5);
}
END_TEST

START_TEST(gather_errors) {
    ck_node *a = NODE(CK_OP_GATHER, "/ga/oor", 1, IN("x", CK_F32, 5, 4), VEC("i", 0, 5));
    EXPECT_FAIL(a, CK_ERR_SHAPE, "index 5", "(5,4)");
    ck_node *b = NODE(CK_OP_GATHER, "/ga/oorneg", 1, IN("x1", CK_F32, 5, 4), scalar_i64("i1", -5));
    attr_int(b, "axis", 1);
    EXPECT_FAIL(b, CK_ERR_SHAPE, "index -5");
    ck_node *c = NODE(CK_OP_GATHER, "/ga/ftype", 1, IN("x2", CK_F32, 5), IN("i2", CK_F32, 2));
    EXPECT_FAIL(c, CK_ERR_SHAPE, "float32");
    ck_node *d = NODE(CK_OP_GATHER, "/ga/axis", 1, IN("x3", CK_F32, 5), IN("i3", CK_I64, 2));
    attr_int(d, "axis", 1);
    EXPECT_FAIL(d, CK_ERR_SHAPE, "axis 1");
}
END_TEST

START_TEST(unsqueeze_forms) {
    ck_node *a = NODE(CK_OP_UNSQUEEZE, "/unsq/attr", 1, IN("x", CK_F32, 3, 4));
    ATTR_INTS(a, "axes", 0);
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 1, 3, 4);
    ck_node *b = NODE(CK_OP_UNSQUEEZE, "/unsq/in", 1, IN("x1", CK_F32, 3, 4), VEC("a1", -1, 0));
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 1, 3, 4, 1);
    ck_node *c = NODE(CK_OP_UNSQUEEZE, "/unsq/scalar", 1, IN0("x2", CK_I64), VEC("a2", 0));
    INFER_OK(c);
    EXPECT(c->out[0], CK_I64, 1);
    ck_node *d = NODE(CK_OP_UNSQUEEZE, "/unsq/mid", 1, IN("x3", CK_F32, 3, 4), VEC("a3", 1, 3));
    INFER_OK(d);
    EXPECT(d->out[0], CK_F32, 3, 1, 4, 1);
    ck_node *e = NODE(CK_OP_UNSQUEEZE, "/unsq/rep", 1, IN("x4", CK_F32, 3), VEC("a4", 0, -3));
    EXPECT_FAIL(e, CK_ERR_SHAPE, "repeated");
    ck_node *f = NODE(CK_OP_UNSQUEEZE, "/unsq/none", 1, IN("x5", CK_F32, 3));
    EXPECT_FAIL(f, CK_ERR_MODEL, "axes");
}
END_TEST

START_TEST(squeeze_forms) {
    ck_node *a = NODE(CK_OP_SQUEEZE, "/sq/all", 1, IN("x", CK_F32, 1, 3, 1, 4));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 3, 4);
    ck_node *b = NODE(CK_OP_SQUEEZE, "/sq/attr", 1, IN("x1", CK_F32, 1, 3, 1, 4));
    ATTR_INTS(b, "axes", -2);
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 1, 3, 4);
    ck_node *c = NODE(CK_OP_SQUEEZE, "/sq/in", 1, IN("x2", CK_F32, 1, 3, 1, 4), VEC("a2", 0));
    INFER_OK(c);
    EXPECT(c->out[0], CK_F32, 3, 1, 4);
    ck_node *d = NODE(CK_OP_SQUEEZE, "/sq/scalar", 1, IN("x3", CK_I64, 1), VEC("a3", 0));
    INFER_OK(d);
    EXPECT0(d->out[0], CK_I64);
    ck_node *e = NODE(CK_OP_SQUEEZE, "/sq/bad", 1, IN("x4", CK_F32, 1, 3, 1, 4), VEC("a4", 1));
    EXPECT_FAIL(e, CK_ERR_SHAPE, "(1,3,1,4)", "axis 1");
    ck_node *f = NODE(CK_OP_SQUEEZE, "/sq/range", 1, IN("x5", CK_F32, 1, 3));
    ATTR_INTS(f, "axes", 2);
    EXPECT_FAIL(f, CK_ERR_SHAPE, "axis 2");
}
END_TEST

START_TEST(expand_bidirectional) {
    ck_node *a = NODE(CK_OP_EXPAND, "/exp", 1, IN("x", CK_F32, 3, 1), VEC("s", 2, 1, 6));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 3, 6);
    /* target smaller than input: the input's dims win */
    ck_node *b = NODE(CK_OP_EXPAND, "/exp/small", 1, IN("x1", CK_I64, 2, 3), VEC("s1", 1));
    INFER_OK(b);
    EXPECT(b->out[0], CK_I64, 2, 3);
    ck_node *c = NODE(CK_OP_EXPAND, "/exp/bad", 1, IN("x2", CK_F32, 3, 4), VEC("s2", 2, 3));
    EXPECT_FAIL(c, CK_ERR_SHAPE, "(3,4)");
    ck_node *d = NODE(CK_OP_EXPAND, "/exp/rt", 1, IN("x3", CK_F32, 3), IN("s3", CK_I64, 2));
    EXPECT_FAIL(d, CK_ERR_UNSUPPORTED, "'s3'");
}
END_TEST

START_TEST(trilu_forms) {
    ck_node *a = NODE(CK_OP_TRILU, "/tri", 1, IN("x", CK_F32, 2, 3, 4));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 3, 4);
    ck_node *b = NODE(CK_OP_TRILU, "/tri/k", 1, IN("x1", CK_I64, 4, 4), scalar_i64("k", -1));
    attr_int(b, "upper", 0);
    INFER_OK(b);
    EXPECT(b->out[0], CK_I64, 4, 4);
    ck_node *c = NODE(CK_OP_TRILU, "/tri/rank", 1, IN("x2", CK_F32, 4));
    EXPECT_FAIL(c, CK_ERR_SHAPE, "(4)");
    ck_node *d = NODE(CK_OP_TRILU, "/tri/krt", 1, IN("x3", CK_F32, 4, 4), IN0("k3", CK_I64));
    EXPECT_FAIL(d, CK_ERR_UNSUPPORTED, "'k3'");
}
END_TEST

START_TEST(einsum_forms) {
    ck_node *a = NODE(CK_OP_EINSUM, "/ein/attn", 1, IN("q", CK_F32, 2, 3, 4, 5), IN("k", CK_F32, 2, 3, 6, 5));
    attr_str(a, "equation", "B H I D, B H J D -> B H I J");
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 3, 4, 6);
    ck_node *b = NODE(CK_OP_EINSUM, "/ein/implicit", 1, IN("a", CK_F32, 3, 4), IN("b", CK_F32, 4, 5));
    attr_str(b, "equation", "ij,jk");
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 3, 5);
    ck_node *c = NODE(CK_OP_EINSUM, "/ein/inner", 1, IN("u", CK_F32, 7), IN("v", CK_F32, 7));
    attr_str(c, "equation", "i,i->");
    INFER_OK(c);
    EXPECT0(c->out[0], CK_F32);
    ck_node *e = NODE(CK_OP_EINSUM, "/ein/one", 1, IN("t", CK_F32, 2, 3, 4));
    attr_str(e, "equation", "ijk->kj");
    INFER_OK(e);
    EXPECT(e->out[0], CK_F32, 4, 3);
}
END_TEST

START_TEST(einsum_errors) {
    static const struct { const char *eq; ck_status st; const char *msg; } bad[] = {
        {"...ij,...jk->...ik", CK_ERR_UNSUPPORTED, "ellipsis"},
        {"ii,ij->ij", CK_ERR_UNSUPPORTED, "repeats within one term"},
        {"ij,jk,kl->il", CK_ERR_UNSUPPORTED, "more than two operands"},
        {"ij->ik", CK_ERR_UNSUPPORTED, "'k' is in no operand"},
        {"ij,jk->ik", CK_ERR_UNSUPPORTED, "operand(s) but the node has 1"},
        {"ijk->i", CK_ERR_SHAPE, "has rank 2"},
        {"i1->i", CK_ERR_UNSUPPORTED, "unexpected character '1'"},
        {"ij-ji", CK_ERR_UNSUPPORTED, "expected '->'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "/ein/bad%zu", i);
        ck_node *n = NODE(CK_OP_EINSUM, ck_arena_strdup(G->arena, nm), 1, IN("x", CK_F32, 3, 3));
        attr_str(n, "equation", bad[i].eq);
        EXPECT_FAIL(n, bad[i].st, bad[i].msg);
    }
    ck_node *m = NODE(CK_OP_EINSUM, "/ein/size", 1, IN("p", CK_F32, 3, 4), IN("r", CK_F32, 5, 2));
    attr_str(m, "equation", "ij,jk->ik");
    EXPECT_FAIL(m, CK_ERR_UNSUPPORTED, "'j' is 4 in input 0 but 5 in input 1");
    ck_node *f = NODE(CK_OP_EINSUM, "/ein/f64", 1, IN("h", CK_F64, 3, 4));
    attr_str(f, "equation", "ij->ji");
    EXPECT_FAIL(f, CK_ERR_UNSUPPORTED, "dtype float64");
    ck_node *g = NODE(CK_OP_EINSUM, "/ein/noeq", 1, IN("w", CK_F32, 3, 4));
    EXPECT_FAIL(g, CK_ERR_SHAPE, "'equation' is missing");
}
END_TEST

/* ---------------------------------------------------------------- Shape, ConstantOfShape, Range */

START_TEST(shape_ranges) {
    ck_node *a = NODE(CK_OP_SHAPE, "/shape", 1, IN("x", CK_F32, 2, 3, 4, 5));
    INFER_OK(a);
    EXPECT(a->out[0], CK_I64, 4);
    ck_node *b = NODE(CK_OP_SHAPE, "/shape/se", 1, IN("x1", CK_F32, 2, 3, 4, 5));
    attr_int(b, "start", 1);
    attr_int(b, "end", -1);
    INFER_OK(b);
    EXPECT(b->out[0], CK_I64, 2);
    ck_node *c = NODE(CK_OP_SHAPE, "/shape/clamp", 1, IN("x2", CK_F32, 2, 3, 4, 5));
    attr_int(c, "start", -10);
    attr_int(c, "end", 10);
    INFER_OK(c);
    EXPECT(c->out[0], CK_I64, 4);
    ck_node *d = NODE(CK_OP_SHAPE, "/shape/empty", 1, IN("x3", CK_F32, 2, 3, 4, 5));
    attr_int(d, "start", 3);
    attr_int(d, "end", 1);
    INFER_OK(d);
    EXPECT(d->out[0], CK_I64, 0);
    ck_node *e = NODE(CK_OP_SHAPE, "/shape/scalar", 1, IN0("x4", CK_F32));
    INFER_OK(e);
    EXPECT(e->out[0], CK_I64, 0);
}
END_TEST

START_TEST(constant_of_shape) {
    ck_node *a = NODE(CK_OP_CONSTANT_OF_SHAPE, "/cos", 1, VEC("s", 2, 3));
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 2, 3);
    /* the attribute's tensor is a detached constant, not in the graph's value list */
    ck_value *seven = ck_arena_alloc(G->arena, sizeof *seven);
    *seven = (ck_value){.name = "seven", .dtype = CK_I64, .rank = 1, .dims = {1}, .role = CK_ROLE_CONST};
    seven->data = ck_arena_alloc(G->arena, 8);
    *(int64_t *)seven->data = 7;
    ck_node *b = NODE(CK_OP_CONSTANT_OF_SHAPE, "/cos/i64", 1, VEC("s1", 4, 1, 2));
    attr_tensor(b, "value", seven);
    INFER_OK(b);
    EXPECT(b->out[0], CK_I64, 4, 1, 2);
    ck_node *c = NODE(CK_OP_CONSTANT_OF_SHAPE, "/cos/scalar", 1, empty_vec("s2"));
    INFER_OK(c);
    EXPECT0(c->out[0], CK_F32);
    ck_node *d = NODE(CK_OP_CONSTANT_OF_SHAPE, "/cos/neg", 1, VEC("s3", 2, -1));
    EXPECT_FAIL(d, CK_ERR_SHAPE, "-1");
    ck_node *e = NODE(CK_OP_CONSTANT_OF_SHAPE, "/cos/rt", 1, IN("s4", CK_I64, 2));
    EXPECT_FAIL(e, CK_ERR_UNSUPPORTED, "'s4'");
}
END_TEST

START_TEST(range_counts) {
    ck_node *a = NODE(CK_OP_RANGE, "/range/int", 1, scalar_i64("s", 0), scalar_i64("l", 10), scalar_i64("d", 3));
    INFER_OK(a);
    EXPECT(a->out[0], CK_I64, 4);
    ck_node *b = NODE(CK_OP_RANGE, "/range/neg", 1, scalar_i64("s1", 10), scalar_i64("l1", 4), scalar_i64("d1", -3));
    INFER_OK(b);
    EXPECT(b->out[0], CK_I64, 2);
    ck_node *c = NODE(CK_OP_RANGE, "/range/f", 1, scalar_f32("s2", 0.5f), scalar_f32("l2", 2.0f), scalar_f32("d2", 0.5f));
    INFER_OK(c);
    EXPECT(c->out[0], CK_F32, 3);
    ck_node *d = NODE(CK_OP_RANGE, "/range/fneg", 1, scalar_f32("s3", 1.0f), scalar_f32("l3", -1.0f), scalar_f32("d3", -0.75f));
    INFER_OK(d);
    EXPECT(d->out[0], CK_F32, 3);
    ck_node *e = NODE(CK_OP_RANGE, "/range/empty", 1, scalar_i64("s4", 5), scalar_i64("l4", 5), scalar_i64("d4", 1));
    INFER_OK(e);
    EXPECT(e->out[0], CK_I64, 0);
    ck_node *f = NODE(CK_OP_RANGE, "/range/wrongway", 1, scalar_i64("s5", 0), scalar_i64("l5", 5), scalar_i64("d5", -1));
    INFER_OK(f);
    EXPECT(f->out[0], CK_I64, 0);
}
END_TEST

START_TEST(range_errors) {
    ck_node *a = NODE(CK_OP_RANGE, "/range/d0", 1, scalar_i64("s", 0), scalar_i64("l", 10), scalar_i64("d", 0));
    EXPECT_FAIL(a, CK_ERR_SHAPE, "delta");
    ck_node *b = NODE(CK_OP_RANGE, "/range/rt", 1, scalar_i64("s1", 0), IN0("l1", CK_I64), scalar_i64("d1", 1));
    EXPECT_FAIL(b, CK_ERR_UNSUPPORTED, "'l1'");
    ck_node *c = NODE(CK_OP_RANGE, "/range/dt", 1, scalar_i64("s2", 0), scalar_f32("l2", 3), scalar_i64("d2", 1));
    EXPECT_FAIL(c, CK_ERR_SHAPE, "'l2'");
    ck_node *e = NODE(CK_OP_RANGE, "/range/vec", 1, VEC("s3", 0, 1), scalar_i64("l3", 3), scalar_i64("d3", 1));
    EXPECT_FAIL(e, CK_ERR_SHAPE, "scalar");
}
END_TEST

/* ---------------------------------------------------------------- arity */

START_TEST(arity_checks) {
    ck_node *a = NODE(CK_OP_GEMM, "/arity/few", 1, IN("a", CK_F32, 2, 2));
    EXPECT_FAIL(a, CK_ERR_MODEL, "1 inputs", "2 to 3");
    ck_node *b = NODE(CK_OP_RELU, "/arity/many", 1, IN("b", CK_F32, 2), IN("c", CK_F32, 2));
    EXPECT_FAIL(b, CK_ERR_MODEL, "2 inputs", "1 to 1");
    ck_node *c = NODE(CK_OP_RELU, "/arity/outs", 2, IN("d", CK_F32, 2));
    EXPECT_FAIL(c, CK_ERR_MODEL, "2 outputs");
    ck_node *d = NODE(CK_OP_MATMUL, "/arity/null", 1, IN("e", CK_F32, 2, 2), NULL);
    EXPECT_FAIL(d, CK_ERR_MODEL, "input 1");
    ck_node *e = ck_graph_add_node(G, CK_OP_LAYER_NORM, "/arity/noout", 2,
                                   (ck_value *[]){IN("f", CK_F32, 2, 2), IN("g", CK_F32, 2)}, 0);
    EXPECT_FAIL(e, CK_ERR_MODEL, "0 outputs");
    ck_node *f = NODE(CK_OP_CONCAT, "/arity/none", 1, IN("h", CK_F32, 2));
    f->n_in = 0;
    EXPECT_FAIL(f, CK_ERR_MODEL, "0 inputs");
    /* an absent optional output is fine as long as output 0 exists */
    ck_node *g = NODE(CK_OP_DROPOUT, "/arity/optout", 2, IN("i", CK_F32, 2));
    g->out[1] = NULL;
    INFER_OK(g);
    EXPECT(g->out[0], CK_F32, 2);
    ck_node *h = NODE(CK_OP_DROPOUT, "/arity/out0", 2, IN("j", CK_F32, 2));
    h->out[0] = NULL;
    EXPECT_FAIL(h, CK_ERR_MODEL, "output 0");
}
END_TEST

/* ---------------------------------------------------------------- recurrent (ir/infer_rnn.c) */

static void attr_strs(ck_node *n, const char *name, int cnt, const char **v) {
    const char **p = ck_arena_alloc(G->arena, sizeof *p * (size_t)(cnt + 1));
    memcpy(p, v, sizeof *p * (size_t)cnt);
    ck_node_add_attr(G, n, (ck_attr){.name = name, .kind = CK_ATTR_STRINGS, .n = cnt, .strs = p});
}

START_TEST(rnn_layouts) {
    /* LSTM, bidirectional, layout 0: X (T=5,B=2,I=3), H=4 -> Y (5,2,2,4), Y_h = Y_c = (2,2,4) */
    ck_node *a = NODE(CK_OP_LSTM, "/lstm", 3, IN("x", CK_F32, 5, 2, 3), IN("w", CK_F32, 2, 16, 3), IN("r", CK_F32, 2, 16, 4),
                      IN("b", CK_F32, 2, 32), NULL, IN("h0", CK_F32, 2, 2, 4), IN("c0", CK_F32, 2, 2, 4), IN("p", CK_F32, 2, 12));
    attr_str(a, "direction", "bidirectional");
    attr_strs(a, "activations", 6, (const char *[]){"Sigmoid", "Tanh", "Tanh", "Sigmoid", "Tanh", "Tanh"});
    INFER_OK(a);
    EXPECT(a->out[0], CK_F32, 5, 2, 2, 4);
    EXPECT(a->out[1], CK_F32, 2, 2, 4);
    EXPECT(a->out[2], CK_F32, 2, 2, 4);
    /* GRU, layout 1: X (B=2,T=5,I=3), H from hidden_size=6 -> Y (2,5,1,6), Y_h (2,1,6); sequence_lens all 5 */
    int32_t lens[2] = {5, 5};
    ck_node *b = NODE(CK_OP_GRU, "/gru", 2, IN("x1", CK_F32, 2, 5, 3), IN("w1", CK_F32, 1, 18, 3), IN("r1", CK_F32, 1, 18, 6),
                      NULL, konst("lens", CK_I32, 1, DIMS(2), lens), IN("h1", CK_F32, 2, 1, 6));
    attr_int(b, "layout", 1);
    attr_int(b, "hidden_size", 6);
    attr_int(b, "linear_before_reset", 1);
    INFER_OK(b);
    EXPECT(b->out[0], CK_F32, 2, 5, 1, 6);
    EXPECT(b->out[1], CK_F32, 2, 1, 6);
    /* RNN, reverse, Relu; only Y_h wanted (Y empty) */
    ck_node *c = NODE(CK_OP_RNN, "/rnn", 2, IN("x2", CK_F32, 7, 3, 2), IN("w2", CK_F32, 1, 5, 2), IN("r2", CK_F32, 1, 5, 5));
    attr_str(c, "direction", "reverse");
    attr_strs(c, "activations", 1, (const char *[]){"Relu"});
    c->out[0] = NULL;
    INFER_OK(c);
    EXPECT(c->out[1], CK_F32, 1, 3, 5);
    ck_rnn_info r;
    ck_assert_int_eq(ck_rnn_params(c, &r, &D), CK_OK);
    ck_assert(r.reverse && r.dirs == 1 && r.act[0] == CK_RNN_RELU && r.seq == 7 && r.batch == 3 && r.hidden == 5);
}
END_TEST

START_TEST(rnn_errors) {
#define LSTM_NODE(name, ...) NODE(CK_OP_LSTM, name, 3, IN("x", CK_F32, 5, 2, 3), IN("w", CK_F32, 1, 16, 3), IN("r", CK_F32, 1, 16, 4), ##__VA_ARGS__)
    ck_node *a = LSTM_NODE("/clip");
    attr_float(a, "clip", 3.0f);
    EXPECT_FAIL(a, CK_ERR_UNSUPPORTED, "clip");
    ck_node *b = LSTM_NODE("/forget");
    attr_int(b, "input_forget", 1);
    EXPECT_FAIL(b, CK_ERR_UNSUPPORTED, "input_forget");
    ck_node *c = LSTM_NODE("/acts");
    attr_strs(c, "activations", 3, (const char *[]){"Sigmoid", "Relu", "Tanh"});
    EXPECT_FAIL(c, CK_ERR_UNSUPPORTED, "'Relu'");
    ck_node *d = LSTM_NODE("/lens_runtime", NULL, IN("lens", CK_I32, 2));
    EXPECT_FAIL(d, CK_ERR_UNSUPPORTED, "sequence_lens", "compile time");
    int32_t lens[2] = {5, 3};
    ck_node *e = LSTM_NODE("/lens_unequal", NULL, konst("lens2", CK_I32, 1, DIMS(2), lens));
    EXPECT_FAIL(e, CK_ERR_UNSUPPORTED, "sequence_lens[1] = 3");
    ck_node *f = NODE(CK_OP_LSTM, "/w_shape", 3, IN("x3", CK_F32, 5, 2, 3), IN("w3", CK_F32, 1, 12, 3), IN("r3", CK_F32, 1, 16, 4));
    EXPECT_FAIL(f, CK_ERR_SHAPE, "(1,12,3)", "(1,16,3)");
    ck_node *g = LSTM_NODE("/dir");
    attr_str(g, "direction", "sideways");
    EXPECT_FAIL(g, CK_ERR_MODEL, "sideways");
    ck_node *h = NODE(CK_OP_GRU, "/f64", 2, IN("x4", CK_F64, 5, 2, 3), IN("w4", CK_F64, 1, 12, 3), IN("r4", CK_F64, 1, 12, 4));
    EXPECT_FAIL(h, CK_ERR_UNSUPPORTED, "float32");
    ck_node *i = NODE(CK_OP_RNN, "/alpha", 2, IN("x5", CK_F32, 5, 2, 3), IN("w5", CK_F32, 1, 4, 3), IN("r5", CK_F32, 1, 4, 4));
    attr_float(i, "activation_alpha", 0.1f);
    EXPECT_FAIL(i, CK_ERR_UNSUPPORTED, "activation_alpha");
#undef LSTM_NODE
}
END_TEST

/* ---------------------------------------------------------------- suite */

static Suite *infer_suite(void) {
    Suite *s = suite_create("infer");
    struct { const char *name; const TTest *tests[12]; } groups[] = {
        {"dense", {gemm_plain, gemm_trans_and_bias, gemm_errors, matmul_2d_and_batched, matmul_1d_operands, matmul_errors}},
        {"elementwise", {binary_broadcast, binary_errors, pow_mixed_dtypes, compare_to_bool, where_three_way, where_errors,
                         unary_every_op, not_and_gelu, clip_min_max, cast_dtypes, cast_errors, mod_fmod}},
        {"norm", {softmax_axes, softmax_errors, layer_norm_axes, layer_norm_errors, batch_norm_modes, batch_norm_errors,
                  dropout_forms, dropout_errors}},
        {"conv", {conv_2d, conv_auto_pad_and_1d, conv_errors, max_pool_modes, pool_errors, avg_and_global_pool}},
        {"reduce", {reduce_axes_attribute, reduce_axes_input, reduce_errors}},
        {"layout", {flatten_axes, reshape_ok, reshape_errors, transpose_perm, concat_axes, concat_errors, split_forms,
                    split_errors}},
        {"index", {slice_basic, slice_negative_step_start_clamp, slice_errors, gather_axes, gather_errors, unsqueeze_forms,
                   squeeze_forms, expand_bidirectional, trilu_forms, pad_forms, pad_errors, nd_forms}},
        {"shape", {shape_ranges, constant_of_shape, range_counts, range_errors}},
        {"recurrent", {rnn_layouts, rnn_errors}},
        {"arity", {arity_checks}},
        {"einsum", {einsum_forms, einsum_errors}},

        {"random", {random_forms, random_errors}},
    };
    for (size_t i = 0; i < sizeof groups / sizeof *groups; i++) {
        TCase *tc = tcase_create(groups[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        for (int k = 0; k < 12 && groups[i].tests[k]; k++) tcase_add_test(tc, groups[i].tests[k]);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(infer_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
