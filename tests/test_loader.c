/* test_loader.c — the ONNX loader against the fixtures in tests/data (see FIXTURES.md there):
 * every tensor encoding, external data, every Constant form, initializers listed as inputs,
 * symbolic dims, shape-subgraph folding, the opset range, and one test per bad-input class,
 * asserting the status and the words of the message a user will read.
 */
#include "ck_frontend.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ck_graph *load_ok(const char *file, const ck_load_options *o) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", CK_TEST_DATA, file);
    ck_diag d = {0};
    ck_graph *g = NULL;
    ck_status st = ck_frontend_load(path, o, &g, &d);
    if (st != CK_OK)
        for (int i = 0; i < d.n; i++) fprintf(stderr, "%s: %s\n", file, d.msg[i]);
    ck_assert_int_eq(st, CK_OK);
    ck_assert_ptr_nonnull(g);
    ck_diag_clear(&d);
    return g;
}

/* Loads a bad file; asserts the status and that some message contains every needle. */
static void load_bad(const char *file, ck_status want, const char *needle1, const char *needle2) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", CK_TEST_DATA, file);
    ck_diag d = {0};
    ck_graph *g = (ck_graph *)1;
    ck_status st = ck_frontend_load(path, NULL, &g, &d);
    ck_assert_msg(st == want, "%s: status %s, want %s", file, ck_status_name(st), ck_status_name(want));
    ck_assert_ptr_null(g);
    ck_assert_int_ge(d.n, 1);
    bool found = false;
    for (int i = 0; i < d.n; i++)
        if (strstr(d.msg[i], needle1) && (!needle2 || strstr(d.msg[i], needle2))) found = true;
    ck_assert_msg(found, "%s: no message with '%s' and '%s'; first: %s", file, needle1, needle2 ? needle2 : "", d.msg[0]);
    ck_diag_clear(&d);
}

static ck_value *find_value(ck_graph *g, const char *name) {
    for (int i = 0; i < g->n_values; i++)
        if (strcmp(g->values[i]->name, name) == 0) return g->values[i];
    return NULL;
}

static void assert_floats(const ck_value *v, const float *want, int n) {
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_nonnull(v->data);
    ck_assert_int_eq(ck_value_numel(v), n);
    for (int i = 0; i < n; i++) ck_assert_float_eq(((const float *)v->data)[i], want[i]);
}

/* ---------------------------------------------------------------- encodings */

START_TEST(raw_and_float_data) {
    static const float w[] = {0.5f, 1, 1.5f, 2, 2.5f, 3};
    const char *files[] = {"enc_raw.onnx", "enc_float_data.onnx", "input_is_init.onnx"};
    for (int k = 0; k < 3; k++) {
        ck_graph *g = load_ok(files[k], NULL);
        ck_value *v = find_value(g, "w");
        assert_floats(v, w, 6);
        ck_assert_int_eq(v->role, CK_ROLE_PARAM);
        ck_assert_int_eq(v->rank, 2);
        ck_assert_int_eq(g->n_inputs, 1); /* w listed as an input is still a parameter */
        ck_assert_str_eq(g->inputs[0]->name, "x");
        ck_assert_int_eq(g->n_outputs, 1);
        ck_assert_int_eq(g->outputs[0]->dims[0], 2);
        ck_assert_int_eq(g->outputs[0]->dims[1], 3);
        ck_assert_str_eq(g->producer_name, "ckptc-gen_fixtures");
        ck_assert_int_eq(g->opset, 17);
        ck_graph_free(g);
    }
}
END_TEST

START_TEST(int64_encodings) {
    const char *files[] = {"enc_int64_data.onnx", "enc_int64_raw.onnx"};
    for (int k = 0; k < 2; k++) {
        ck_graph *g = load_ok(files[k], NULL);
        ck_value *s = find_value(g, "s");
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(s->dtype, CK_I64);
        ck_assert_int_eq(s->role, CK_ROLE_CONST); /* integer initializers are constants */
        ck_assert_int_eq(ck_value_get_i(s, 0), 3);
        ck_assert_int_eq(ck_value_get_i(s, 1), 2);
        ck_assert_int_eq(g->outputs[0]->rank, 2);
        ck_assert_int_eq(g->outputs[0]->dims[0], 3);
        ck_assert_int_eq(g->outputs[0]->dims[1], 2);
        ck_graph_free(g);
    }
}
END_TEST

START_TEST(int32_double_bool_encodings) {
    ck_graph *g = load_ok("enc_int32_data.onnx", NULL);
    /* k is int32 [7,-8,9], folded through Cast into a float constant */
    ck_value *k = find_value(g, "kf");
    static const float kw[] = {7, -8, 9};
    assert_floats(k, kw, 3);
    ck_graph_free(g);

    g = load_ok("enc_double_data.onnx", NULL);
    ck_value *dv = find_value(g, "d"); /* a float64 initializer is a parameter: its Cast stays */
    ck_assert_ptr_nonnull(dv);
    ck_assert_int_eq(dv->dtype, CK_F64);
    ck_assert_int_eq(dv->role, CK_ROLE_PARAM);
    ck_assert_double_eq(ck_value_get_f(dv, 0), 1.5);
    ck_assert_double_eq(ck_value_get_f(dv, 1), -2.25);
    ck_graph_free(g);

    g = load_ok("enc_bool.onnx", NULL);
    ck_value *c = find_value(g, "cond");
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->dtype, CK_BOOL);
    ck_assert_int_eq(ck_value_get_i(c, 0), 1);
    ck_assert_int_eq(ck_value_get_i(c, 1), 0);
    ck_assert_int_eq(ck_value_get_i(c, 2), 1);
    ck_assert_int_eq(g->n_nodes, 1);
    ck_assert_int_eq(g->nodes[0]->op, CK_OP_WHERE);
    ck_graph_free(g);
}
END_TEST

START_TEST(external_data) {
    static const float w1[] = {10, 20, 30, 40, 50, 60}, w2[] = {1, 2, 3, 4, 5, 6};
    ck_graph *g = load_ok("ext_data.onnx", NULL);
    assert_floats(find_value(g, "w"), w1, 6);
    ck_graph_free(g);
    g = load_ok("ext_data_nooffset.onnx", NULL);
    assert_floats(find_value(g, "w"), w2, 6);
    ck_graph_free(g);
}
END_TEST

/* Issue 23: no weight byte is copied where it can be used in place. External data is mapped, not
 * read (nothing copied; no page of it resident until a reader touches one: /proc/self/pagemap,
 * counted when the graph releases the mapping); raw_data, float_data, double_data and int64_data
 * stay in the parsed message; only int32_data's narrower types are converted. */
START_TEST(weights_used_in_place) {
    static const float w1[] = {10, 20, 30, 40, 50, 60};
    ck_stats = (ck_io_stats){.enabled = true};
    ck_graph *g = load_ok("ext_data.onnx", NULL);
    ck_assert_int_eq(ck_stats.copied_bytes, 0);
    ck_assert_int_eq(ck_stats.mapped_files, 1);
    ck_assert_int_eq(ck_stats.mapped_bytes, 48); /* the whole file: 16 + 24 + 8 bytes */
    ck_graph_free(g);
    ck_assert_int_eq(ck_stats.resident_bytes, 0); /* loading, folding and verifying read no weight */
    g = load_ok("ext_data.onnx", NULL);
    assert_floats(find_value(g, "w"), w1, 6); /* a reader faults its page in */
    ck_graph_free(g);
    ck_assert_int_ne(ck_stats.resident_bytes, 0); /* > 0, or -1 where pagemap cannot be read */

    const char *in_place[] = {"enc_raw.onnx", "enc_float_data.onnx", "enc_double_data.onnx", "enc_int64_data.onnx",
                              "enc_int64_raw.onnx"};
    for (int k = 0; k < 5; k++) {
        ck_stats = (ck_io_stats){.enabled = true};
        ck_graph_free(load_ok(in_place[k], NULL));
        ck_assert_msg(ck_stats.copied_bytes == 0, "%s: %lld bytes copied", in_place[k], (long long)ck_stats.copied_bytes);
        ck_assert_int_eq(ck_stats.mapped_files, 0);
    }
    ck_stats = (ck_io_stats){.enabled = true};
    ck_graph_free(load_ok("enc_int32_data.onnx", NULL));
    ck_assert_int_eq(ck_stats.copied_bytes, 12); /* int32 [7, -8, 9] from int32_data */
    ck_stats = (ck_io_stats){0};
}
END_TEST

START_TEST(constant_forms) {
    ck_graph *g = load_ok("const_forms.onnx", NULL);
    static const float cv[] = {1, 2}, cf[] = {3.5f}, cfs[] = {1, 2, 3};
    assert_floats(find_value(g, "c_value"), cv, 2);
    assert_floats(find_value(g, "c_float"), cf, 1);
    ck_assert_int_eq(find_value(g, "c_float")->rank, 0);
    assert_floats(find_value(g, "c_floats"), cfs, 3);
    /* the int constants are folded through their Casts; the casts' outputs carry the values */
    int found_int = 0;
    for (int i = 0; i < g->n_values; i++) {
        ck_value *v = g->values[i];
        if (v->role != CK_ROLE_CONST || v->dtype != CK_F32) continue;
        if (v->rank == 0 && ((float *)v->data)[0] == 7.0f) found_int |= 1;
        if (v->rank == 1 && v->dims[0] == 2 && ((float *)v->data)[0] == 4.0f && ((float *)v->data)[1] == 5.0f) found_int |= 2;
    }
    ck_assert_int_eq(found_int, 3);
    ck_assert_int_eq(g->n_outputs, 5);
    for (int i = 0; i < g->n_nodes; i++) ck_assert_int_eq(g->nodes[i]->op, CK_OP_ADD); /* only the Adds on inputs remain */
    ck_graph_free(g);
}
END_TEST

START_TEST(dim_param_binding) {
    ck_dim_binding b = {"batch", 5};
    ck_load_options o = {.dims = &b, .n_dims = 1};
    ck_graph *g = load_ok("dim_param.onnx", &o);
    ck_assert_int_eq(g->inputs[0]->dims[0], 5);
    ck_assert_int_eq(g->outputs[0]->dims[0], 5);
    ck_assert_int_eq(g->outputs[0]->dims[1], 4);
    ck_graph_free(g);
    load_bad("dim_param.onnx", CK_ERR_MODEL, "'batch'", "--dim batch=N");

    ck_dim_binding typo = {"bacth", 5};
    ck_load_options o2 = {.dims = &typo, .n_dims = 1};
    ck_diag d = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/dim_param.onnx", CK_TEST_DATA);
    ck_assert_int_ne(ck_frontend_load(path, &o2, &g, &d), CK_OK);
    bool typo_named = false;
    for (int i = 0; i < d.n; i++) typo_named |= strstr(d.msg[i], "bacth") != NULL;
    ck_assert(typo_named);
    ck_diag_clear(&d);
}
END_TEST

START_TEST(shape_subgraph_folds) {
    ck_graph *g = load_ok("shape_subgraph.onnx", NULL);
    for (int i = 0; i < g->n_nodes; i++) {
        ck_op op = g->nodes[i]->op;
        ck_assert_msg(op == CK_OP_RESHAPE || op == CK_OP_ADD || op == CK_OP_MUL, "unfolded %s", ck_ops[op].onnx_name);
    }
    ck_assert_int_eq(g->n_nodes, 3);
    ck_value *y1 = g->outputs[0], *y3 = g->outputs[2];
    ck_assert_int_eq(y1->rank, 2);
    ck_assert_int_eq(y1->dims[0], 2);
    ck_assert_int_eq(y1->dims[1], 12);
    ck_assert_int_eq(y3->rank, 3);
    /* the Mul's constant operand is the (3,4) table with rows [0,1,-1,3] */
    for (int i = 0; i < g->n_nodes; i++) {
        ck_node *n = g->nodes[i];
        if (n->op != CK_OP_MUL) continue;
        ck_value *m = n->in[0]->data ? n->in[0] : n->in[1];
        ck_assert_int_eq(ck_value_numel(m), 12);
        static const float row[] = {0, 1, -1, 3};
        for (int k = 0; k < 12; k++) ck_assert_float_eq(((float *)m->data)[k], row[k % 4]);
    }
    ck_assert_int_eq(ck_graph_verify(g, NULL), CK_OK);
    ck_graph_free(g);
}
END_TEST

START_TEST(opset_range) {
    ck_graph *g = load_ok("opset13.onnx", NULL);
    ck_assert_int_eq(g->opset, 13);
    ck_graph_free(g);
    g = load_ok("opset18.onnx", NULL);
    ck_assert_int_eq(g->opset, 18);
    ck_graph_free(g);
    load_bad("opset12.onnx", CK_ERR_UNSUPPORTED, "opset 12", "13 to 18");
    load_bad("opset19.onnx", CK_ERR_UNSUPPORTED, "opset 19", "13 to 18");
}
END_TEST

/* ---------------------------------------------------------------- bad input */

START_TEST(bad_files) {
    load_bad("does_not_exist.onnx", CK_ERR_IO, "cannot open", "does_not_exist.onnx");
    load_bad("empty.onnx", CK_ERR_PARSE, "empty", NULL);
    load_bad("garbage.onnx", CK_ERR_PARSE, "cannot parse", "ModelProto");
    load_bad("truncated.onnx", CK_ERR_PARSE, "cannot parse", NULL);
    load_bad("not_a_model.onnx", CK_ERR_MODEL, "not an ONNX model", NULL);
    load_bad("no_graph.onnx", CK_ERR_MODEL, "no graph", NULL);
    /* a directory is not a model */
    ck_diag d = {0};
    ck_graph *g;
    ck_assert_int_eq(ck_frontend_load(CK_TEST_DATA, NULL, &g, &d), CK_ERR_IO);
    ck_diag_clear(&d);
}
END_TEST

START_TEST(unsupported_ops_listed_at_once) {
    char path[1024];
    snprintf(path, sizeof path, "%s/unsupported_ops.onnx", CK_TEST_DATA);
    ck_diag d = {0};
    ck_graph *g;
    ck_assert_int_eq(ck_frontend_load(path, NULL, &g, &d), CK_ERR_UNSUPPORTED);
    ck_assert_int_eq(d.n, 3);
    ck_assert_ptr_nonnull(strstr(d.msg[0], "'my_lrn'"));
    ck_assert_ptr_nonnull(strstr(d.msg[0], "LRN"));
    ck_assert_ptr_nonnull(strstr(d.msg[0], "opset 17"));
    ck_assert_ptr_nonnull(strstr(d.msg[1], "'my_topk'"));
    ck_assert_ptr_nonnull(strstr(d.msg[1], "TopK"));
    ck_assert_ptr_nonnull(strstr(d.msg[2], "'custom_foo'"));
    ck_assert_ptr_nonnull(strstr(d.msg[2], "com.example"));
    ck_assert_ptr_nonnull(strstr(d.msg[2], "Foo"));
    for (int i = 0; i < d.n; i++) ck_assert_ptr_null(strstr(d.msg[i], "my_relu"));
    ck_diag_clear(&d);
}
END_TEST

START_TEST(bad_shapes) {
    load_bad("bad_shapes.onnx", CK_ERR_SHAPE, "node 'bad_add' (Add)", "(2,3)");
    load_bad("bad_shapes.onnx", CK_ERR_SHAPE, "'y' float32 (4,5)", "cannot be broadcast");
    load_bad("bad_matmul.onnx", CK_ERR_SHAPE, "node 'bad_mm' (MatMul)", "3 vs 4");
}
END_TEST

START_TEST(bad_tensor_data) {
    load_bad("init_len_mismatch.onnx", CK_ERR_MODEL, "initializer 'w'", "20 bytes");
    load_bad("init_len_mismatch.onnx", CK_ERR_MODEL, "initializer 'w'", "needs 24");
    load_bad("init_len_mismatch_typed.onnx", CK_ERR_MODEL, "initializer 'w'", "float_data has 4 elements");
    load_bad("ext_missing.onnx", CK_ERR_MODEL, "initializer 'w'", "does_not_exist.bin");
    load_bad("ext_short.onnx", CK_ERR_MODEL, "ext_short.bin", "24 bytes needed at offset 0 but the file has 10");
    load_bad("ext_escape.onnx", CK_ERR_MODEL, "initializer 'w'", "escapes the model directory");
}
END_TEST

START_TEST(from_memory) {
    /* the buffer entry point (used by the fuzzer) refuses external data it cannot resolve */
    char path[1024];
    snprintf(path, sizeof path, "%s/ext_data.onnx", CK_TEST_DATA);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_diag d = {0};
    ck_graph *g;
    ck_assert_int_ne(ck_frontend_load_buffer(buf, n, NULL, NULL, &g, &d), CK_OK);
    ck_assert_ptr_nonnull(strstr(d.msg[0], "loaded from memory"));
    ck_diag_clear(&d);
    ck_assert_int_eq(ck_frontend_load_buffer(buf, n, CK_TEST_DATA, NULL, &g, &d), CK_OK);
    ck_graph_free(g);
}
END_TEST

START_TEST(samples_load) {
    /* the committed PyTorch exports load, and fold to the documented size */
    static const struct { const char *file; int nodes_in_file; } s[] = {
        {"mlp.onnx", 17}, {"gpt.onnx", 199}, {"bert.onnx", 211}, {"resnet.onnx", 37}, {"gpt_deep.onnx", 1149}};
    ck_dim_binding b = {"batch", 8};
    for (int i = 0; i < 5; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", CK_SAMPLES, s[i].file);
        ck_load_options o = {.dims = &b, .n_dims = i == 0};
        ck_diag d = {0};
        ck_graph *g;
        ck_status st = ck_frontend_load(path, &o, &g, &d);
        ck_assert_msg(st == CK_OK, "%s: %s", s[i].file, d.n ? d.msg[0] : "");
        ck_assert_int_eq(g->onnx_nodes, s[i].nodes_in_file);
        ck_assert_int_lt(g->n_nodes, s[i].nodes_in_file + 1);
        for (int k = 0; k < g->n_nodes; k++) ck_assert_int_ne(g->nodes[k]->op, CK_OP_SHAPE); /* all folded */
        ck_graph_free(g);
    }
}
END_TEST

/* ---------------------------------------------------------------- payload ranges (--export-onnx)
 *
 * The wire walker (frontend/onnx_offsets.c) against a ModelProto encoded here by hand, field by
 * field, from the protobuf encoding rules: each initializer's range must hold exactly its payload. */

typedef struct wbuf {
    uint8_t b[1024];
    size_t n;
} wbuf;

static void put_varint(wbuf *w, uint64_t v) {
    do {
        w->b[w->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}
static void put_len(wbuf *w, int field, const void *p, size_t n) { /* wire type 2 */
    put_varint(w, (uint64_t)field << 3 | 2);
    put_varint(w, n);
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void put_int(wbuf *w, int field, uint64_t v) { /* wire type 0 */
    put_varint(w, (uint64_t)field << 3);
    put_varint(w, v);
}
static void put_fixed32(wbuf *w, int field, float f) { /* wire type 5: one unpacked float */
    put_varint(w, (uint64_t)field << 3 | 5);
    memcpy(w->b + w->n, &f, 4);
    w->n += 4;
}

static const ck_payload *payload_named(const ck_payload *p, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(p[i].name, name) == 0) return &p[i];
    return NULL;
}

static void assert_range(const wbuf *m, const ck_payload *p, int n, const char *name, const void *want, size_t len) {
    const ck_payload *q = payload_named(p, n, name);
    ck_assert_msg(q != NULL, "no payload for '%s'", name);
    ck_assert_int_eq(q->file, 0);
    ck_assert_uint_eq(q->length, len);
    ck_assert_uint_le(q->offset + q->length, m->n);
    ck_assert_msg(memcmp(m->b + q->offset, want, len) == 0, "'%s': the range does not hold the payload", name);
}

START_TEST(payload_ranges) {
    static const float a[] = {1, 2}, b[] = {3, 4, 5}, e1[] = {6}, e2[] = {7}, f[] = {8, 9};
    static const double g2[] = {0.25, 0.5};
    wbuf t[7] = {{{0}, 0}}, g1 = {{0}, 0}, g2b = {{0}, 0}, m = {{0}, 0};
    put_len(&t[0], 9, a, sizeof a), put_int(&t[0], 2, 1), put_len(&t[0], 8, "a", 1);   /* raw_data before the name */
    put_len(&t[1], 8, "b", 1), put_int(&t[1], 2, 1), put_len(&t[1], 4, b, sizeof b);   /* float_data, packed */
    put_len(&t[2], 8, "c", 1), put_int(&t[2], 2, 1), put_fixed32(&t[2], 4, 1), put_fixed32(&t[2], 4, 2); /* unpacked */
    put_len(&t[3], 8, "d", 1), put_int(&t[3], 2, 1), put_int(&t[3], 14, 1);            /* external */
    put_len(&t[4], 8, "e", 1), put_len(&t[4], 9, e1, 4), put_len(&t[4], 9, e2, 4);     /* the last raw_data wins */
    put_len(&t[5], 8, "f", 1), put_int(&t[5], 2, 1), put_len(&t[5], 9, f, sizeof f);
    put_len(&t[6], 8, "g", 1), put_int(&t[6], 2, 11), put_len(&t[6], 10, g2, sizeof g2); /* double_data, packed */
    put_len(&g1, 2, "graph", 5);
    for (int i = 0; i < 5; i++) put_len(&g1, 5, t[i].b, t[i].n);
    put_len(&g2b, 5, t[5].b, t[5].n), put_len(&g2b, 5, t[6].b, t[6].n);
    put_int(&m, 1, 8), put_len(&m, 7, g1.b, g1.n), put_len(&m, 7, g2b.b, g2b.n);       /* the graph twice: merged */
    ck_arena *ar = ck_arena_new();
    ck_payload *p = NULL;
    int n = 0;
    ck_assert_int_eq(ck_onnx_payload_ranges(m.b, m.n, ar, &p, &n), CK_OK);
    ck_assert_int_eq(n, 7);
    assert_range(&m, p, n, "a", a, sizeof a);
    assert_range(&m, p, n, "b", b, sizeof b);
    assert_range(&m, p, n, "e", e2, 4);
    assert_range(&m, p, n, "f", f, sizeof f);
    assert_range(&m, p, n, "g", g2, sizeof g2);
    ck_assert_int_eq(payload_named(p, n, "c")->file, -1);
    ck_assert_int_eq(payload_named(p, n, "d")->file, -2);
    ck_assert_int_eq(ck_onnx_payload_ranges(m.b, m.n - 3, ar, &p, &n), CK_ERR_PARSE); /* truncated */
    ck_arena_free(ar);

    /* through the loader: the graph's source names the file and each initializer's bytes */
    ck_graph *gr = load_ok("enc_raw.onnx", NULL);
    ck_assert_ptr_nonnull(gr->source);
    ck_assert_int_eq(gr->source->n_files, 1);
    ck_assert_int_eq(gr->source->files[0].path[0], '/');
    ck_assert_int_eq(gr->source->n_payloads, 1);
    const ck_payload *q = &gr->source->payloads[0];
    ck_assert_str_eq(q->name, "w");
    ck_assert_int_eq(q->file, 0);
    ck_assert_uint_eq(q->length, 24);
    FILE *fp = fopen(gr->source->files[0].path, "rb");
    float w[6];
    ck_assert(fp && fseek(fp, (long)q->offset, SEEK_SET) == 0 && fread(w, 4, 6, fp) == 6);
    fclose(fp);
    assert_floats(find_value(gr, "w"), w, 6);
    ck_graph_free(gr);
    gr = load_ok("ext_data.onnx", NULL);
    ck_assert_int_eq(gr->source->n_files, 2);
    q = &gr->source->payloads[0];
    ck_assert_int_eq(q->file, 1);
    ck_assert_ptr_nonnull(gr->source->files[1].location);
    ck_assert_uint_eq(q->length, 24);
    ck_graph_free(gr);
}
END_TEST

int main(void) {
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, raw_and_float_data);
    tcase_add_test(tc, int64_encodings);
    tcase_add_test(tc, int32_double_bool_encodings);
    tcase_add_test(tc, external_data);
    tcase_add_test(tc, weights_used_in_place);
    tcase_add_test(tc, constant_forms);
    tcase_add_test(tc, dim_param_binding);
    tcase_add_test(tc, shape_subgraph_folds);
    tcase_add_test(tc, opset_range);
    tcase_add_test(tc, bad_files);
    tcase_add_test(tc, unsupported_ops_listed_at_once);
    tcase_add_test(tc, bad_shapes);
    tcase_add_test(tc, bad_tensor_data);
    tcase_add_test(tc, from_memory);
    tcase_add_test(tc, samples_load);
    tcase_add_test(tc, payload_ranges);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
