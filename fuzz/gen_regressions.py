#!/usr/bin/python3
"""gen_regressions.py — writes the hand-made inputs of fuzz/regressions/ (Debian's python3-onnx).

Each model targets one bug found while fuzzing the frontend or reviewing it for the fuzzer: the
file name says which. Most crashed, hung, ran out of memory or hit undefined behaviour before
their fix; the others pin down refusals the fixes rely on (negative sizes, data shorter than its
shape, shapes past 2^51 elements). Each must now be refused (or loaded) with a status and a
message. Inputs libFuzzer found itself are kept as it wrote them (*-libfuzzer.onnx), not generated
here; inputs too large to keep (10^5 levels of nesting, 10^5 inputs) are built by
tests/fuzz_regress.c. Nothing in the build runs this; rerun it by hand after changing it:

    /usr/bin/python3 fuzz/gen_regressions.py
"""
import os

import numpy as np
import onnx
from google.protobuf.internal import encoder
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regressions")
I64_MAX, I64_MIN = 2**63 - 1, -2**63


def model(nodes, inputs=(), inits=(), outputs=("y",), opset=17):
    g = helper.make_graph(nodes, "g", list(inputs), [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                          list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="ckptc-fuzz")
    m.ir_version = 8
    return m


def i64(name, vals):
    return numpy_helper.from_array(np.array(vals, dtype=np.int64), name)


def f32(name, vals):
    return numpy_helper.from_array(np.array(vals, dtype=np.float32), name)


def empty(name, dims, dtype=TensorProto.FLOAT):
    """A tensor of raw bytes that need not match its dims (a zero dim: no data, any other dims)."""
    return raw(name, dims, b"", dtype)


def raw(name, dims, data, dtype=TensorProto.FLOAT):
    t = TensorProto(name=name, data_type=dtype, dims=dims)
    t.raw_data = data
    return t


def const(t):
    """A Constant node: float initializers are parameters and never folded, constants are."""
    return helper.make_node("Constant", [], [t.name], value=t)


def inp(name, dims, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, dims)


def save(name, m):
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


def main():
    os.makedirs(OUT, exist_ok=True)
    N = helper.make_node

    # ---- overflow of dims products (signed-integer-overflow under UBSan)
    # ConstantOfShape to (2^40, 2^40): the element count of the result overflowed
    save("dims-overflow-constant-of-shape", model([N("ConstantOfShape", ["s"], ["y"])], inits=[i64("s", [2**40, 2**40])]))
    # Expand to (2^40, 2^40)
    save("dims-overflow-expand", model([N("Expand", ["x", "s"], ["y"])], inits=[f32("x", [1.0]), i64("s", [2**40, 2**40])]))
    # Reshape's product of the target shape
    save("dims-overflow-reshape", model([N("Reshape", ["x", "s"], ["y"], allowzero=1)],
                                        inits=[empty("x", [0]), i64("s", [2**40, 2**40, 0])]))
    # a zero dim first let the loader accept (0, 2^40, 2^40); Flatten then multiplied 2^40 * 2^40
    save("dims-overflow-zero-first-flatten", model([N("Flatten", ["x"], ["y"], axis=1)], inits=[empty("x", [0, 2**40, 2**40])]))
    # Split sizes summed
    save("dims-overflow-split-sum", model([N("Split", ["x", "s"], ["y", "y2", "y3"])],
                                          inits=[f32("x", [1, 2]), i64("s", [I64_MAX, I64_MAX, 4])]))
    # Conv: weight channels * group
    save("dims-overflow-conv-group", model([N("Conv", ["x", "w"], ["y"], group=I64_MAX)], inputs=[inp("x", [1, 0, 5, 5])],
                                           inits=[empty("w", [0, 2, 3, 3])]))
    # pooling windows: dilated kernel, pads, strides
    save("dims-overflow-pool-dilation", model([N("MaxPool", ["x"], ["y"], kernel_shape=[3], dilations=[2**62])],
                                              inputs=[inp("x", [1, 1, 8])]))
    save("dims-overflow-pool-pads", model([N("AveragePool", ["x"], ["y"], kernel_shape=[1], pads=[I64_MAX, I64_MAX])],
                                          inputs=[inp("x", [1, 1, 8])]))
    save("dims-overflow-pool-strides", model([N("MaxPool", ["x"], ["y"], kernel_shape=[2], strides=[I64_MAX], ceil_mode=1)],
                                             inputs=[inp("x", [1, 1, 8])]))
    # Slice counts with extreme steps
    save("dims-overflow-slice-step-max", model([N("Slice", ["x", "b", "e", "a", "st"], ["y"])],
                                               inits=[f32("x", range(10)), i64("b", [0]), i64("e", [10]), i64("a", [0]),
                                                      i64("st", [I64_MAX])]))
    save("dims-overflow-slice-step-min", model([N("Slice", ["x", "b", "e", "a", "st"], ["y"])],
                                               inits=[f32("x", range(10)), i64("b", [9]), i64("e", [-11]), i64("a", [0]),
                                                      i64("st", [I64_MIN])]))
    # Range: limit - start, and a float count far beyond int64
    save("dims-overflow-range-int", model([N("Range", ["s", "l", "d"], ["y"])],
                                          inits=[i64("s", I64_MIN), i64("l", I64_MAX), i64("d", 1)]))
    save("dims-overflow-range-float", model([N("Range", ["s", "l", "d"], ["y"])],
                                            inits=[f32("s", 0.0), f32("l", 1e30), f32("d", 1e-30)]))

    # ---- float -> int conversions out of range (float-cast-overflow under UBSan)
    save("fold-pow-int-overflow", model([const(f32("b", [100.0])), N("Pow", ["a", "b"], ["y"])], inits=[i64("a", [10])]))
    save("fold-trilu-float-k", model([const(f32("x", np.ones((2, 2)))), const(f32("k", 1e30)), N("Trilu", ["x", "k"], ["y"])]))

    # ---- folding loops over outer dims of an empty result: 2^40 iterations (timeout)
    x = const(empty("x", [2**40, 0], TensorProto.INT64))
    save("fold-hang-concat-empty", model([x, N("Concat", ["x", "x"], ["y"], axis=1)]))
    save("fold-hang-split-empty", model([x, N("Split", ["x"], ["y", "y2"], axis=1)]))
    save("fold-hang-gather-empty", model([x, N("Gather", ["x", "i"], ["y"], axis=1)], inits=[empty("i", [0], TensorProto.INT64)]))

    # ---- Transpose with perm of the wrong kind (INT, not INTS): NULL dereference when folded
    save("fold-transpose-perm-int", model([N("Transpose", ["x"], ["y"], perm=1)], inits=[i64("x", np.ones((2, 3)))]))

    # ---- a model naming an internal op: its shape inference asserts on the attributes passes set
    m = model([N("SliceGrad", ["x"], ["y"])], inputs=[inp("x", [2])])
    m.graph.node[0].op_type = "ckptc.SliceGrad"
    save("internal-op-slice-grad", m)

    # ---- string attribute without its bytes: memcpy from NULL
    m = model([N("Gelu", ["x"], ["y"])], inputs=[inp("x", [2])])
    a = m.graph.node[0].attribute.add()
    a.name, a.type = "approximate", onnx.AttributeProto.STRING
    save("attr-string-without-bytes", m)

    # ---- data claimed but absent: refused before anything is allocated
    t = raw("w", [2**18], b"\0" * 8)
    save("data-claims-1mib-has-8-bytes", model([N("Relu", ["w"], ["y"])], inits=[t]))
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**30, 2**30], float_data=[1.0])
    save("data-claims-2p60-elements", model([N("Relu", ["w"], ["y"])], inits=[t]))

    # ---- negative sizes
    save("input-negative-dim", model([N("Relu", ["x"], ["y"])], inputs=[inp("x", [2, -3])]))
    save("const-of-shape-negative", model([N("ConstantOfShape", ["s"], ["y"])], inits=[i64("s", [2, -1])]))

    # ---- one large constant shared by thousands of nodes: work (and memory) per node times the
    # constant's size. Before the fold budget and the bounded index check, in the fuzz limits:
    # Gather range checks 10 s, folded Adds 44 s and 3 GB, Pow exponent copies 13 s and 1.5 GB.
    big = [const(i64("s", [65536])), N("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.array([0]), "v"))]
    x = [inp("x", [65536])]
    save("timeout-gather-shared-index", model(big + [N("Gather", ["x", "c"], ["g%d" % k]) for k in range(4900)], x, outputs=["g0"]))
    save("oom-fold-shared-constant", model(big + [N("Add", ["c", "c"], ["a%d" % k]) for k in range(4900)], x, outputs=["a0"]))
    save("oom-pow-shared-exponent", model(big + [N("Pow", ["x", "c"], ["p%d" % k]) for k in range(4900)], x, outputs=["p0"]))

    # ---- GraphProto.node -> NodeProto.attribute -> AttributeProto.g, 3000 deep: protobuf-c
    # recursed until the stack overflowed (30 KB of input; the gcc build segfaulted too)
    def field(num, payload):
        return encoder._VarintBytes(num << 3 | 2) + encoder._VarintBytes(len(payload)) + payload
    g = b""
    for _ in range(3000):
        g = field(1, field(5, field(6, g)))
    with open(os.path.join(OUT, "deep-nesting-3000-levels.onnx"), "wb") as f:
        f.write(field(7, g) + field(8, bytes([0x10, 17])))  # graph, opset_import {version: 17}

    # ---- fuzz_load_dims: --dim batch=-3 (header: mask bit 0 = batch, value -3) on the dim_param fixture
    fixture = os.path.join(os.path.dirname(OUT), "..", "tests", "data", "dim_param.onnx")
    with open(os.path.join(OUT, "dim-binding-negative.dims"), "wb") as f:
        f.write(bytes([1, 0xFD]) + open(fixture, "rb").read())

    # ---- many attributes on one node: appended one at a time, quadratic memory (3.6 GB for 10000)
    m = model([N("Relu", ["x"], ["y"])], inputs=[inp("x", [2])])
    m.graph.node[0].attribute.extend([helper.make_attribute("a", 1)] * 10000)
    save("node-10000-attributes", m)


if __name__ == "__main__":
    main()
