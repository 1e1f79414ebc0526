/* test_ir.c — the arena, the string map, graph construction, dead-code removal, the op table
 * and the verifier (each invariant broken on purpose must be reported); the utilities the IR
 * shares with libckrt (ckrt_util.h: sizes, checksum, shapes, the JSON writer).
 */
#include "ck_ir.h"
#include "ckrt_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool diag_has(const ck_diag *d, const char *needle) {
    for (int i = 0; i < d->n; i++)
        if (strstr(d->msg[i], needle)) return true;
    return false;
}

START_TEST(arena_alignment_and_growth) {
    ck_arena *a = ck_arena_new();
    ck_assert_ptr_nonnull(a);
    char *prev = NULL;
    for (int i = 1; i < 5000; i++) {
        char *p = ck_arena_alloc(a, (size_t)(i % 97) + 1);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq((uintptr_t)p % 16, 0);
        for (int k = 0; k < i % 97 + 1; k++) ck_assert_int_eq(p[k], 0); /* zeroed */
        memset(p, 0xff, (size_t)(i % 97) + 1);
        ck_assert_ptr_ne(p, prev);
        prev = p;
    }
    /* a large block of its own, then small allocations keep working */
    char *big = ck_arena_alloc(a, 10u << 20);
    ck_assert_ptr_nonnull(big);
    big[(10u << 20) - 1] = 1;
    char *s = ck_arena_strdup(a, "hello");
    ck_assert_str_eq(s, "hello");
    ck_assert_str_eq(ck_arena_strndup(a, "abcdef", 3), "abc");
    ck_assert_uint_ge(ck_arena_used(a), 10u << 20);
    ck_arena_free(a);
}
END_TEST

START_TEST(map_put_get_grow) {
    ck_arena *a = ck_arena_new();
    ck_map *m = ck_map_new(a, 2);
    char keys[3000][16];
    for (int i = 0; i < 3000; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        ck_map_put(m, keys[i], (void *)(intptr_t)(i + 1));
    }
    for (int i = 0; i < 3000; i++) ck_assert_int_eq((intptr_t)ck_map_get(m, keys[i]), i + 1);
    ck_assert_ptr_null(ck_map_get(m, "missing"));
    ck_map_put(m, keys[7], (void *)(intptr_t)42); /* overwrite */
    ck_assert_int_eq((intptr_t)ck_map_get(m, "k7"), 42);
    ck_arena_free(a);
}
END_TEST

START_TEST(dtypes_and_values) {
    ck_assert_int_eq(ck_dtype_from_onnx(1), CK_F32);
    ck_assert_int_eq(ck_dtype_from_onnx(7), CK_I64);
    ck_assert_int_eq(ck_dtype_from_onnx(9), CK_BOOL);
    ck_assert_int_eq(ck_dtype_from_onnx(8), CK_UNDEF); /* string */
    ck_assert_str_eq(ck_onnx_dtype_name(8), "STRING");
    ck_assert_uint_eq(ck_dtype_size(CK_F64), 8);
    ck_graph *g = ck_graph_new();
    ck_value *v = ck_graph_add_value(g, "v", CK_F16, 1, (int64_t[]){3}, CK_ROLE_CONST);
    uint16_t h[3] = {0x3c00, 0xc000, 0x0001}; /* 1.0, -2.0, smallest subnormal */
    v->data = h;
    ck_assert_double_eq(ck_value_get_f(v, 0), 1.0);
    ck_assert_double_eq(ck_value_get_f(v, 1), -2.0);
    ck_assert_double_eq_tol(ck_value_get_f(v, 2), 5.960464477539063e-08, 1e-15);
    char buf[CK_SHAPE_STR_MAX];
    ck_value *s = ck_graph_add_value(g, "s", CK_F32, 0, NULL, CK_ROLE_INPUT);
    ck_assert_str_eq(ck_shape_str(s, buf, sizeof buf), "()");
    ck_assert_int_eq(ck_value_numel(s), 1);
    ck_graph_free(g);
}
END_TEST

START_TEST(op_table) {
    ck_op op;
    ck_assert(ck_op_from_name("MatMul", &op));
    ck_assert_int_eq(op, CK_OP_MATMUL);
    ck_assert(!ck_op_from_name("LRN", &op));
    ck_assert(!ck_op_from_name("Constant", &op)); /* handled by the loader, not an IR op */
    for (int i = 0; i < CK_OP_COUNT; i++) {
        ck_assert_ptr_nonnull(ck_ops[i].onnx_name);
        ck_assert_ptr_nonnull(ck_ops[i].infer);
        ck_assert_int_le(ck_ops[i].in_min, ck_ops[i].in_max);
        ck_assert_int_le(ck_ops[i].out_min, ck_ops[i].out_max);
    }
    ck_assert(ck_ops[CK_OP_BATCH_NORM].flags & CK_OPF_STATEFUL);
    ck_assert(!(ck_ops[CK_OP_BATCH_NORM].flags & CK_OPF_RECOMPUTABLE));
    ck_assert(ck_ops[CK_OP_DROPOUT].flags & CK_OPF_RANDOM);
}
END_TEST

/* x -> Relu -> Relu -> y, plus a dead Neg branch */
static ck_graph *small_graph(ck_node **r1, ck_node **r2, ck_node **dead) {
    ck_graph *g = ck_graph_new();
    ck_value *x = ck_graph_add_value(g, "x", CK_F32, 2, (int64_t[]){2, 3}, CK_ROLE_INPUT);
    *r1 = ck_graph_add_node(g, CK_OP_RELU, "r1", 1, &x, 1);
    ck_assert_int_eq(ck_infer_node(*r1, NULL), CK_OK);
    *r2 = ck_graph_add_node(g, CK_OP_RELU, "r2", 1, (*r1)->out, 1);
    ck_assert_int_eq(ck_infer_node(*r2, NULL), CK_OK);
    *dead = ck_graph_add_node(g, CK_OP_NEG, "dead", 1, &x, 1);
    ck_assert_int_eq(ck_infer_node(*dead, NULL), CK_OK);
    ck_graph_set_inputs(g, 1, &x);
    ck_graph_set_outputs(g, 1, (*r2)->out);
    return g;
}

START_TEST(build_and_remove_dead) {
    ck_node *r1, *r2, *dead;
    ck_graph *g = small_graph(&r1, &r2, &dead);
    ck_assert_int_eq(g->n_nodes, 3);
    ck_assert_int_eq(r2->out[0]->dims[1], 3);
    ck_assert_ptr_eq(r2->out[0]->producer, r2);
    ck_diag d = {0};
    ck_assert_int_eq(ck_graph_verify(g, &d), CK_OK);
    ck_graph_remove_dead(g);
    ck_assert_int_eq(g->n_nodes, 2);
    ck_assert_int_eq(g->n_values, 3); /* x, r1's output, r2's output */
    ck_assert_int_eq(ck_graph_verify(g, &d), CK_OK);
    ck_assert_int_eq(d.n, 0);
    ck_graph_free(g);
}
END_TEST

START_TEST(verifier_catches_broken_invariants) {
    ck_node *r1, *r2, *dead;
    ck_diag d = {0};

    /* use before definition: swap the two nodes */
    ck_graph *g = small_graph(&r1, &r2, &dead);
    g->nodes[0] = r2, g->nodes[1] = r1;
    ck_assert_int_ne(ck_graph_verify(g, &d), CK_OK);
    ck_assert(diag_has(&d, "used before it is produced"));
    ck_diag_clear(&d);
    ck_graph_free(g);

    /* a value produced twice */
    g = small_graph(&r1, &r2, &dead);
    dead->out[0] = r1->out[0];
    ck_assert_int_ne(ck_graph_verify(g, &d), CK_OK);
    ck_assert(diag_has(&d, "produced more than once"));
    ck_diag_clear(&d);
    ck_graph_free(g);

    /* a stale shape: stored dims disagree with inference */
    g = small_graph(&r1, &r2, &dead);
    r2->out[0]->dims[1] = 4;
    ck_assert_int_ne(ck_graph_verify(g, &d), CK_OK);
    ck_assert(diag_has(&d, "inference gives float32 (2,3)"));
    ck_assert_int_eq(r2->out[0]->dims[1], 4); /* the verifier does not repair */
    ck_diag_clear(&d);
    ck_graph_free(g);

    /* a dangling edge: an input value that is not in the graph */
    g = small_graph(&r1, &r2, &dead);
    ck_value ghost = *r1->out[0];
    ghost.id = dead->out[0]->id; /* an id in range, of a value about to leave the graph */
    ghost.producer = NULL;
    ghost.role = CK_ROLE_ACTIVATION;
    r2->in[0] = &ghost;
    ck_graph_remove_dead(g); /* drops r1 and the dead Neg: nothing reads their outputs now */
    ck_assert_int_ne(ck_graph_verify(g, &d), CK_OK);
    ck_assert(diag_has(&d, "is not in the graph"));
    ck_diag_clear(&d);
    ck_graph_free(g);

    /* an activation nobody produces */
    g = small_graph(&r1, &r2, &dead);
    r1->out[0]->producer = NULL;
    ck_assert_int_ne(ck_graph_verify(g, &d), CK_OK);
    ck_assert(diag_has(&d, "no node produces it"));
    ck_diag_clear(&d);
    ck_graph_free(g);

    /* a constant without data */
    g = small_graph(&r1, &r2, &dead);
    ck_graph_add_value(g, "c", CK_F32, 0, NULL, CK_ROLE_CONST);
    ck_assert_int_ne(ck_graph_verify(g, &d), CK_OK);
    ck_assert(diag_has(&d, "constant 'c' has no data"));
    ck_diag_clear(&d);
    ck_graph_free(g);
}
END_TEST

START_TEST(attributes) {
    ck_node *r1, *r2, *dead;
    ck_graph *g = small_graph(&r1, &r2, &dead);
    int64_t ints[] = {1, 2, 3};
    ck_node_add_attr(g, r1, (ck_attr){.name = "k", .kind = CK_ATTR_INT, .i = 5});
    ck_node_add_attr(g, r1, (ck_attr){.name = "f", .kind = CK_ATTR_FLOAT, .f = 0.25f});
    ck_node_add_attr(g, r1, (ck_attr){.name = "s", .kind = CK_ATTR_STRING, .s = "SAME_UPPER"});
    ck_node_add_attr(g, r1, (ck_attr){.name = "v", .kind = CK_ATTR_INTS, .n = 3, .ints = ints});
    ck_assert_int_eq(ck_attr_int(r1, "k", 0), 5);
    ck_assert_int_eq(ck_attr_int(r1, "missing", -7), -7);
    ck_assert_int_eq(ck_attr_int(r1, "f", -1), -1); /* wrong kind falls back to the default */
    ck_assert_float_eq(ck_attr_float(r1, "f", 0), 0.25f);
    ck_assert_str_eq(ck_attr_str(r1, "s", ""), "SAME_UPPER");
    ck_assert_int_eq(ck_attr_find(r1, "v")->ints[2], 3);
    ck_graph_free(g);
}
END_TEST

START_TEST(util_parse_size) {
    static const struct { const char *s; int64_t want; } ok[] = {
        {"1", 1},           {"1000000", 1000000},       {"512B", 512},          {"1KiB", 1024},
        {"1.5KiB", 1536},   {"512MiB", 512ll << 20},     {"2GiB", 2ll << 30},    {"2TiB", 2ll << 40},
        {"1KB", 1000},      {"25MB", 25000000},          {"2GB", 2000000000},    {"3TB", 3000000000000ll},
        {"0.5", 0},         {"1.9", 1},                  {"1e6", 1000000},       {"2.5e-1KiB", 256}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t v = -1;
        bool good = ckrt_parse_size(ok[i].s, &v);
        ck_assert_msg(good == (ok[i].want > 0), "%s", ok[i].s); /* "0.5": under one byte */
        if (good) ck_assert_msg(v == ok[i].want, "%s: %lld", ok[i].s, (long long)v);
    }
    static const char *bad[] = {"", "0", "-1", "+1", " 1", "1 ", "1e", "0x10", "1.2.3", ".5GiB", "1kib", "1KIB",
                                "1Mib", "1 MiB", "1MiBx", "1PB", "inf", "nan", "9000000TB", "MiB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = 42;
        ck_assert_msg(!ckrt_parse_size(bad[i], &v), "'%s' accepted", bad[i]);
        ck_assert_int_eq(v, 42);
    }
}
END_TEST

START_TEST(util_checksum_streams) {
    unsigned char buf[77];
    for (int i = 0; i < 77; i++) buf[i] = (unsigned char)(i * 37 + 11);
    uint64_t whole = ckrt_checksum(buf, sizeof buf);
    ck_assert(whole != ckrt_checksum(buf, sizeof buf - 1));
    ck_assert(ckrt_checksum(NULL, 0) == CKRT_CHECKSUM_INIT);
    /* pieces of whole words, then the rest: the same as one call */
    uint64_t h = ckrt_checksum_update(CKRT_CHECKSUM_INIT, buf, 16);
    h = ckrt_checksum_update(h, buf + 16, 40);
    ck_assert(ckrt_checksum_update(h, buf + 56, 21) == whole);
    /* one byte: (INIT ^ 'a') * the FNV prime, the value weights.bin files were written with */
    ck_assert(ckrt_checksum("a", 1) == 0x44bd8ad473cd9906ull);
}
END_TEST

START_TEST(util_shapes) {
    char b[64];
    int64_t dims[3] = {2, 30, 400};
    ck_assert_str_eq(ckrt_shape_str(b, sizeof b, 3, dims), "(2,30,400)");
    ck_assert_str_eq(ckrt_shape_str(b, sizeof b, 0, dims), "()");
    ck_assert_str_eq(ckrt_shape_str(b, 6, 3, dims), "(2,30"); /* cut to fit */
    ck_assert_int_eq(ckrt_numel(3, dims), 24000);
    ck_assert_int_eq(ckrt_numel(0, dims), 1);
}
END_TEST

START_TEST(util_json_writer) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    int64_t v[3] = {1, -2, 3000000000000ll};
    fputc('{', f);
    ckrt_json_key(f, "", "a\"b\\c");
    ckrt_json_str(f, "x\n\ty\x01\x1f\x7f\xc3\xa9/");
    ckrt_json_key(f, ", ", "v");
    ckrt_json_i64s(f, 3, v, ", ");
    ckrt_json_key(f, ", ", "w");
    ckrt_json_i64s(f, 0, v, ",");
    ckrt_json_key(f, ", ", "n");
    ckrt_json_str(f, NULL);
    fputc('}', f);
    fclose(f);
    ck_assert_str_eq(text, "{\"a\\\"b\\\\c\": \"x\\u000a\\u0009y\\u0001\\u001f\x7f\xc3\xa9/\", "
                           "\"v\": [1, -2, 3000000000000], \"w\": [], \"n\": null}");
    free(text);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ir");
    TCase *tc = tcase_create("ir");
    tcase_add_test(tc, arena_alignment_and_growth);
    tcase_add_test(tc, map_put_get_grow);
    tcase_add_test(tc, dtypes_and_values);
    tcase_add_test(tc, op_table);
    tcase_add_test(tc, build_and_remove_dead);
    tcase_add_test(tc, verifier_catches_broken_invariants);
    tcase_add_test(tc, attributes);
    tcase_add_test(tc, util_parse_size);
    tcase_add_test(tc, util_checksum_streams);
    tcase_add_test(tc, util_shapes);
    tcase_add_test(tc, util_json_writer);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
