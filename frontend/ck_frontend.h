/* ck_frontend.h — ONNX file -> ck_graph with static shapes.
 *
 *   ck_load_options o = {.dims = binds, .n_dims = 1};      // e.g. {"batch", 8}
 *   ck_diag d = {0};
 *   ck_graph *g;
 *   if (ck_frontend_load("model.onnx", &o, &g, &d) != CK_OK) { print d.msg[i] ...; }
 *
 * Loading parses the ModelProto with protobuf-c, converts it into the IR, folds the shape
 * subgraphs PyTorch's exporter emits into constants, infers every shape, drops dead code and runs
 * the verifier. No protobuf type leaves frontend/. Weights are not copied: external data is
 * mapped read-only and embedded data stays in the parsed message; the graph holds both
 * (ck_graph_hold) and ck_graph_free releases them, so every reader of a value's data (codegen)
 * must run before it.
 */
#ifndef CK_FRONTEND_H
#define CK_FRONTEND_H

#include "ck_ir.h"

typedef struct ck_dim_binding {
    const char *name;
    int64_t value;
} ck_dim_binding;

typedef struct ck_load_options {
    const ck_dim_binding *dims; /* --dim NAME=N */
    int n_dims;
    uint64_t max_file_bytes;    /* 0: CK_DEFAULT_MAX_FILE */
    int64_t max_nodes;          /* 0: CK_DEFAULT_MAX_NODES */
    int64_t fold_max_elems;     /* 0: CK_DEFAULT_FOLD_ELEMS; larger results stay run-time nodes,
                                   and so does all folding past 64 times this in total */
} ck_load_options;

#define CK_DEFAULT_MAX_FILE (4ull << 30)
#define CK_DEFAULT_MAX_NODES 1000000
#define CK_DEFAULT_FOLD_ELEMS (1 << 20)
#define CK_OPSET_MIN 13
#define CK_OPSET_MAX 18

/* Reads, converts, folds, infers and verifies. On failure *out is NULL and d holds one line
 * per problem. */
ck_status ck_frontend_load(const char *path, const ck_load_options *o, ck_graph **out, ck_diag *d);
/* The same from memory; external data is resolved against base_dir (NULL: refused). */
ck_status ck_frontend_load_buffer(const void *buf, size_t len, const char *base_dir, const ck_load_options *o,
                                  ck_graph **out, ck_diag *d);

/* Shape inference in execution order, folding every foldable node whose inputs are constants
 * (not params), then dead-code removal. Run by the loader; exposed for tests. */
ck_status ck_frontend_fold(ck_graph *g, int64_t fold_max_elems, ck_diag *d);

/* Each initializer of the serialized ModelProto buf, in file order (onnx_offsets.c): its name and
 * where its raw payload lies in buf (file 0, offset, length: raw_data, or a packed float_data /
 * double_data), file -1 when the payload is not one byte range (float_data unpacked or split),
 * file -2 for external data. Allocated in a. CK_ERR_PARSE on malformed wire format. The loader
 * records the result in ck_graph.source (the trainer's --export-onnx); exposed for tests. */
ck_status ck_onnx_payload_ranges(const void *buf, size_t len, ck_arena *a, ck_payload **out, int *n);

#endif
