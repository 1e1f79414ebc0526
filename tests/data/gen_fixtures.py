#!/usr/bin/python3
# gen_fixtures.py - writes the small ONNX fixture files under tests/data/ that the loader unit
# tests (frontend) and the CLI bad-input tests read.
#
# Rerun from the repository root with Debian's Python (python3-onnx 1.12, python3-numpy):
#
#     /usr/bin/python3 tests/data/gen_fixtures.py
#
# The fixtures are committed, so the C build never needs Python. Every model is built by hand with
# onnx.helper / onnx.numpy_helper / raw protobuf messages -- never exported, never run through the
# checker or shape inference -- because several fixtures are deliberately broken (bad shapes,
# unsupported ops, short tensors, out-of-range opsets) and the checker would refuse them.
#
# Output is deterministic: no timestamps, fixed producer strings, explicit little-endian data,
# deterministic protobuf serialization, and hash-derived "random" bytes. Running the script twice
# gives byte-identical files. What each file holds and what the loader must do with it is listed
# in tests/data/FIXTURES.md; keep the two in sync.

import hashlib
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))

IR_VERSION = 8
OPSET = 17
PRODUCER = "ckptc-gen_fixtures"
FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64


# ----------------------------------------------------------------------------------------------
# helpers

def write_bytes(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def model_bytes(model):
    return model.SerializeToString(deterministic=True)


def save(name, model):
    write_bytes(name, model_bytes(model))


def make_model(graph, opset=OPSET, extra_opsets=(), ir_version=IR_VERSION):
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(graph, opset_imports=opsets, producer_name=PRODUCER,
                          producer_version="1")
    m.ir_version = ir_version
    return m


def vi(name, elem_type, shape):
    return helper.make_tensor_value_info(name, elem_type, shape)


def f32_bytes(vals):
    return np.asarray(vals, dtype="<f4").tobytes()


def i64_bytes(vals):
    return np.asarray(vals, dtype="<i8").tobytes()


def tensor_raw(name, data_type, dims, raw):
    t = TensorProto()
    t.name = name
    t.data_type = data_type
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def tensor_external(name, dims, entries):
    """Float tensor whose data lives in a side file; entries = [(key, value), ...] in order."""
    t = TensorProto()
    t.name = name
    t.data_type = FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in entries:
        e = t.external_data.add()
        e.key = k
        e.value = v
    return t


def add_xw_model(graph_name, w, wshape=(2, 3)):
    """y = Add(x, w), x: float input of wshape, w: the given initializer."""
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        graph_name,
        [vi("x", FLOAT, list(wshape))],
        [vi("y", FLOAT, list(wshape))],
        initializer=[w])
    return make_model(g)


def relu_model(graph_name, opset, shape=(2, 3)):
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        graph_name,
        [vi("x", FLOAT, list(shape))],
        [vi("y", FLOAT, list(shape))])
    return make_model(g, opset=opset)


def parses(data):
    """True if onnx's own parser accepts these bytes as a ModelProto."""
    try:
        onnx.load_model_from_string(data)
        return True
    except Exception:
        return False


# ----------------------------------------------------------------------------------------------
# valid fixtures: tensor encodings

W_HALVES = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]   # [1..6] * 0.5


def gen_encodings():
    # float initializer as raw_data
    save("enc_raw.onnx", add_xw_model(
        "enc_raw", tensor_raw("w", FLOAT, [2, 3], f32_bytes(W_HALVES))))

    # float initializer as float_data
    w = TensorProto()
    w.name = "w"
    w.data_type = FLOAT
    w.dims.extend([2, 3])
    w.float_data.extend(W_HALVES)
    save("enc_float_data.onnx", add_xw_model("enc_float_data", w))

    # int64 initializer (Reshape target) as int64_data, then as raw_data
    def reshape_model(graph_name, s):
        g = helper.make_graph(
            [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")],
            graph_name,
            [vi("x", FLOAT, [2, 3])],
            [vi("y", FLOAT, [3, 2])],
            initializer=[s])
        return make_model(g)

    s = TensorProto()
    s.name = "s"
    s.data_type = INT64
    s.dims.extend([2])
    s.int64_data.extend([3, 2])
    save("enc_int64_data.onnx", reshape_model("enc_int64_data", s))
    save("enc_int64_raw.onnx", reshape_model(
        "enc_int64_raw", tensor_raw("s", INT64, [2], i64_bytes([3, 2]))))

    # int32 initializer in int32_data -> Cast to float -> Add
    k = TensorProto()
    k.name = "k"
    k.data_type = TensorProto.INT32
    k.dims.extend([3])
    k.int32_data.extend([7, -8, 9])
    g = helper.make_graph(
        [helper.make_node("Cast", ["k"], ["kf"], name="cast", to=FLOAT),
         helper.make_node("Add", ["x", "kf"], ["y"], name="add")],
        "enc_int32_data",
        [vi("x", FLOAT, [3])],
        [vi("y", FLOAT, [3])],
        initializer=[k])
    save("enc_int32_data.onnx", make_model(g))

    # double initializer in double_data -> Cast to float -> Add
    d = TensorProto()
    d.name = "d"
    d.data_type = TensorProto.DOUBLE
    d.dims.extend([2])
    d.double_data.extend([1.5, -2.25])
    g = helper.make_graph(
        [helper.make_node("Cast", ["d"], ["df"], name="cast", to=FLOAT),
         helper.make_node("Add", ["x", "df"], ["y"], name="add")],
        "enc_double_data",
        [vi("x", FLOAT, [2])],
        [vi("y", FLOAT, [2])],
        initializer=[d])
    save("enc_double_data.onnx", make_model(g))

    # bool initializer (stored in int32_data, as the spec says) -> Where
    c = TensorProto()
    c.name = "cond"
    c.data_type = TensorProto.BOOL
    c.dims.extend([3])
    c.int32_data.extend([1, 0, 1])
    g = helper.make_graph(
        [helper.make_node("Where", ["cond", "a", "b"], ["y"], name="where")],
        "enc_bool",
        [vi("a", FLOAT, [3]), vi("b", FLOAT, [3])],
        [vi("y", FLOAT, [3])],
        initializer=[c])
    save("enc_bool.onnx", make_model(g))


# ----------------------------------------------------------------------------------------------
# valid fixtures: external data

def gen_external_valid():
    w = tensor_external("w", [2, 3], [("location", "ext_data.bin"),
                                      ("offset", "16"),
                                      ("length", "24")])
    save("ext_data.onnx", add_xw_model("ext_data", w))
    write_bytes("ext_data.bin",
                b"\xab" * 16 + f32_bytes([10, 20, 30, 40, 50, 60]) + b"\xcd" * 8)

    w = tensor_external("w", [2, 3], [("location", "ext_data_nooffset.bin")])
    save("ext_data_nooffset.onnx", add_xw_model("ext_data_nooffset", w))
    write_bytes("ext_data_nooffset.bin", f32_bytes([1, 2, 3, 4, 5, 6]))


# ----------------------------------------------------------------------------------------------
# valid fixtures: graph forms

def gen_const_forms():
    nodes = [
        helper.make_node("Constant", [], ["c_value"], name="const_value",
                         value=helper.make_tensor("c_value_t", FLOAT, [2], [1.0, 2.0])),
        helper.make_node("Constant", [], ["c_float"], name="const_float", value_float=3.5),
        helper.make_node("Constant", [], ["c_floats"], name="const_floats",
                         value_floats=[1.0, 2.0, 3.0]),
        helper.make_node("Constant", [], ["c_int"], name="const_int", value_int=7),
        helper.make_node("Constant", [], ["c_ints"], name="const_ints", value_ints=[4, 5]),
        helper.make_node("Add", ["x", "c_value"], ["out_value"], name="add_value"),
        helper.make_node("Add", ["x", "c_float"], ["out_float"], name="add_float"),
        helper.make_node("Add", ["z", "c_floats"], ["out_floats"], name="add_floats"),
        helper.make_node("Cast", ["c_int"], ["c_int_f"], name="cast_int", to=FLOAT),
        helper.make_node("Add", ["x", "c_int_f"], ["out_int"], name="add_int"),
        helper.make_node("Cast", ["c_ints"], ["c_ints_f"], name="cast_ints", to=FLOAT),
        helper.make_node("Add", ["x", "c_ints_f"], ["out_ints"], name="add_ints"),
    ]
    g = helper.make_graph(
        nodes, "const_forms",
        [vi("x", FLOAT, [2]), vi("z", FLOAT, [3])],
        [vi("out_value", FLOAT, [2]), vi("out_float", FLOAT, [2]),
         vi("out_floats", FLOAT, [3]), vi("out_int", FLOAT, [2]),
         vi("out_ints", FLOAT, [2])])
    save("const_forms.onnx", make_model(g))


def gen_input_is_init():
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        "input_is_init",
        [vi("x", FLOAT, [2, 3]), vi("w", FLOAT, [2, 3])],
        [vi("y", FLOAT, [2, 3])],
        initializer=[tensor_raw("w", FLOAT, [2, 3], f32_bytes(W_HALVES))])
    save("input_is_init.onnx", make_model(g))


def gen_dim_param():
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "dim_param",
        [vi("x", FLOAT, ["batch", 4])],
        [vi("y", FLOAT, ["batch", 4])])
    save("dim_param.onnx", make_model(g))


def gen_shape_subgraph():
    def const_i64(out, vals, scalar=False):
        dims = [] if scalar else [len(vals)]
        return helper.make_node("Constant", [], [out], name=out,
                                value=helper.make_tensor(out + "_t", INT64, dims, vals))

    def const_f32(out, vals, scalar=False):
        dims = [] if scalar else [len(vals)]
        return helper.make_node("Constant", [], [out], name=out,
                                value=helper.make_tensor(out + "_t", FLOAT, dims, vals))

    n = helper.make_node
    nodes = [
        # y1: the exporter's "x.view(x.size(0), -1)" pattern
        n("Shape", ["x"], ["shape"], name="/Shape"),
        const_i64("/Constant_idx0", [0], scalar=True),
        n("Gather", ["shape", "/Constant_idx0"], ["dim0"], name="/Gather", axis=0),
        const_i64("/Constant_axes0", [0]),
        n("Unsqueeze", ["dim0", "/Constant_axes0"], ["dim0_1d"], name="/Unsqueeze"),
        const_i64("/Constant_neg1", [-1]),
        n("Concat", ["dim0_1d", "/Constant_neg1"], ["target"], name="/Concat", axis=0),
        n("Reshape", ["x", "target"], ["y1"], name="/Reshape"),
        # y2: x + ones_like(x) via ConstantOfShape(Shape(x))
        n("ConstantOfShape", ["shape"], ["ones"], name="/ConstantOfShape",
          value=helper.make_tensor("one", FLOAT, [1], [1.0])),
        n("Add", ["x", "ones"], ["y2"], name="/Add"),
        # y3: a position-dependent scale built from the shape:
        #   r = arange(x.size(2)); m = where(r == 2, -1.0, float(r)); m.expand(x.shape[1:])
        const_i64("/Constant_idx2", [2], scalar=True),
        n("Gather", ["shape", "/Constant_idx2"], ["dim2"], name="/Gather_1", axis=0),
        const_i64("/Constant_start", [0], scalar=True),
        const_i64("/Constant_step", [1], scalar=True),
        n("Range", ["/Constant_start", "dim2", "/Constant_step"], ["r"], name="/Range"),
        n("Cast", ["r"], ["rf"], name="/Cast", to=FLOAT),
        const_i64("/Constant_two", [2], scalar=True),
        n("Equal", ["r", "/Constant_two"], ["is2"], name="/Equal"),
        const_f32("/Constant_m1", [-1.0], scalar=True),
        n("Where", ["is2", "/Constant_m1", "rf"], ["m"], name="/Where"),
        const_i64("/Constant_starts", [1]),
        const_i64("/Constant_ends", [3]),
        n("Slice", ["shape", "/Constant_starts", "/Constant_ends"], ["tail"], name="/Slice"),
        n("Expand", ["m", "tail"], ["m34"], name="/Expand"),
        n("Mul", ["x", "m34"], ["y3"], name="/Mul"),
    ]
    g = helper.make_graph(
        nodes, "shape_subgraph",
        [vi("x", FLOAT, [2, 3, 4])],
        [vi("y1", FLOAT, [2, 12]), vi("y2", FLOAT, [2, 3, 4]), vi("y3", FLOAT, [2, 3, 4])])
    save("shape_subgraph.onnx", make_model(g))


def gen_opsets():
    for v in (12, 13, 18, 19):
        save("opset%d.onnx" % v, relu_model("opset%d" % v, opset=v))


# ----------------------------------------------------------------------------------------------
# invalid fixtures: not a (usable) model file

GARBAGE_SEED = b"ckptc garbage 0"


def gen_bad_files():
    write_bytes("empty.onnx", b"")

    # 256 bytes from a SHA-256 counter stream: deterministic everywhere, no RNG library involved
    garbage = b"".join(hashlib.sha256(GARBAGE_SEED + bytes([i])).digest() for i in range(8))
    assert len(garbage) == 256
    assert not parses(garbage), "garbage.onnx parses as a ModelProto; change GARBAGE_SEED"
    write_bytes("garbage.onnx", garbage)

    # first half of enc_raw.onnx
    with open(os.path.join(HERE, "enc_raw.onnx"), "rb") as f:
        full = f.read()
    cut = len(full) // 2
    while parses(full[:cut]):
        cut -= 1
    write_bytes("truncated.onnx", full[:cut])

    # A serialized TensorProto. Its fields were chosen so that the bytes also parse cleanly as a
    # ModelProto in every protobuf implementation: TensorProto.dims (field 1, varint) lands on
    # ModelProto.ir_version (field 1, varint; the last one wins -> 8), TensorProto.raw_data
    # (field 9) is an unknown field of ModelProto and is skipped. data_type (field 2, varint)
    # is left out on purpose: it would collide with ModelProto.producer_name (field 2, string)
    # and protobuf-c rejects a wire-type mismatch while the C++/Python parsers skip it.
    # Result: "a model" with ir_version 8, no graph and no opset_import.
    t = TensorProto()
    t.dims.extend([1, 8])
    t.raw_data = f32_bytes([0, 1, 2, 3, 4, 5, 6, 7])
    write_bytes("not_a_model.onnx", t.SerializeToString(deterministic=True))

    # A proper ModelProto header without a graph
    m = onnx.ModelProto()
    m.ir_version = IR_VERSION
    m.producer_name = PRODUCER
    m.producer_version = "1"
    m.opset_import.extend([helper.make_opsetid("", OPSET)])
    save("no_graph.onnx", m)


# ----------------------------------------------------------------------------------------------
# invalid fixtures: well-formed files the compiler must refuse

def gen_bad_graphs():
    n = helper.make_node
    g = helper.make_graph(
        [n("Relu", ["x"], ["r"], name="my_relu"),
         n("LRN", ["r"], ["l"], name="my_lrn", size=3),
         n("TopK", ["l", "k"], ["vals", "idx"], name="my_topk", axis=-1),
         n("Foo", ["vals"], ["y"], name="custom_foo", domain="com.example")],
        "unsupported_ops",
        [vi("x", FLOAT, [1, 3, 4, 4])],
        [vi("y", FLOAT, [1, 3, 4, 2]), vi("idx", INT64, [1, 3, 4, 2])],
        initializer=[tensor_raw("k", INT64, [1], i64_bytes([2]))])
    save("unsupported_ops.onnx", make_model(g, extra_opsets=[("com.example", 1)]))

    # The only defect is the node: outputs carry a declared shape (what an exporter would write)
    # so the file passes onnx's checker and the error can only come from inferring the node.
    g = helper.make_graph(
        [n("Add", ["x", "y"], ["z"], name="bad_add")],
        "bad_shapes",
        [vi("x", FLOAT, [2, 3]), vi("y", FLOAT, [4, 5])],
        [vi("z", FLOAT, [2, 3])])
    save("bad_shapes.onnx", make_model(g))

    g = helper.make_graph(
        [n("MatMul", ["a", "b"], ["c"], name="bad_mm")],
        "bad_matmul",
        [vi("a", FLOAT, [2, 3]), vi("b", FLOAT, [4, 5])],
        [vi("c", FLOAT, [2, 5])])
    save("bad_matmul.onnx", make_model(g))

    # dims (2,3) = 6 elements, raw_data holds only 5 floats (20 bytes)
    save("init_len_mismatch.onnx", add_xw_model(
        "init_len_mismatch", tensor_raw("w", FLOAT, [2, 3], f32_bytes([1, 2, 3, 4, 5]))))

    # dims (2,3) = 6 elements, float_data holds only 4 values (helper.make_tensor would refuse)
    w = TensorProto()
    w.name = "w"
    w.data_type = FLOAT
    w.dims.extend([2, 3])
    w.float_data.extend([1.0, 2.0, 3.0, 4.0])
    save("init_len_mismatch_typed.onnx", add_xw_model("init_len_mismatch_typed", w))

    w = tensor_external("w", [2, 3], [("location", "does_not_exist.bin")])
    save("ext_missing.onnx", add_xw_model("ext_missing", w))

    w = tensor_external("w", [2, 3], [("location", "ext_short.bin"),
                                      ("offset", "0"),
                                      ("length", "24")])
    save("ext_short.onnx", add_xw_model("ext_short", w))
    write_bytes("ext_short.bin", bytes(range(10)))

    w = tensor_external("w", [2, 3], [("location", "../../etc/passwd")])
    save("ext_escape.onnx", add_xw_model("ext_escape", w))


def main():
    gen_encodings()
    gen_external_valid()
    gen_const_forms()
    gen_input_is_init()
    gen_dim_param()
    gen_shape_subgraph()
    gen_opsets()
    gen_bad_files()
    gen_bad_graphs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
