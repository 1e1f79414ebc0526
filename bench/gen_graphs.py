#!/usr/bin/python3
# bench/gen_graphs.py -- synthetic ONNX graphs for timing the planner (ckptc --plan-only).
#
#     /usr/bin/python3 bench/gen_graphs.py OUTDIR KIND NODES     # e.g. bench/work/graphs mlp 100000
#
# KIND mlp: a deep residual MLP, 4 ONNX nodes per layer:
#     x = x + Gemm(Relu(Gemm(x, W1, b1, transB=1)), W2, b2, transB=1)      x: (64, 16)
#   then a head Gemm to 10 classes.
# KIND tf: a transformer-like stack, 26 ONNX nodes per layer (pre-LN attention with 2 heads and a
#   ReLU MLP), x: (2, 16, 16), names as PyTorch's exporter scopes them, then LayerNorm and a
#   MatMul head to 16 classes.
# Node names are scoped like PyTorch's exports (/layers.N/fc1/Gemm, /layers.N/attn/MatMul_1, ...)
# and initializers named like parameters (layers.N.fc1.weight), so --checkpoint=blocks finds the
# layers. Widths are tiny on purpose: the planner's work depends on the number of nodes and
# buffers, not on their sizes, and the files stay small (100k nodes: ~20 MB). Weights are
# seeded random numbers. Prints the file name, the layer count and the ONNX node count.
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class G:
    def __init__(self, seed=0):
        self.nodes, self.inits = [], []
        self.rs = np.random.RandomState(seed)

    def init(self, name, shape, scale=0.1, dtype=np.float32, value=None):
        a = np.asarray(value, dtype=dtype) if value is not None else (self.rs.randn(*shape) * scale).astype(dtype)
        self.inits.append(numpy_helper.from_array(a, name))
        return name

    def node(self, op, name, inputs, n_out=1, **attrs):
        outs = [name + "_output_%d" % i for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs


def mlp(layers, d=16, batch=64, classes=10):
    g = G()
    x = "x"
    for i in range(layers):
        s = "/layers.%d" % i
        p = "layers.%d" % i
        h = g.node("Gemm", s + "/fc1/Gemm", [x, g.init(p + ".fc1.weight", (d, d)), g.init(p + ".fc1.bias", (d,))],
                   transB=1)
        h = g.node("Relu", s + "/Relu", [h])
        h = g.node("Gemm", s + "/fc2/Gemm", [h, g.init(p + ".fc2.weight", (d, d)), g.init(p + ".fc2.bias", (d,))],
                   transB=1)
        x = g.node("Add", s + "/Add", [x, h])
    y = g.node("Gemm", "/head/Gemm", [x, g.init("head.weight", (classes, d)), g.init("head.bias", (classes,))],
               transB=1)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, d])]
    return g, y, inputs, [batch, classes]


def tf(layers, d=16, heads=2, T=16, batch=2, classes=16):
    g = G()
    hd = d // heads
    x = "x"
    g.init("shape_bthd", None, dtype=np.int64, value=[batch, T, heads, hd])
    g.init("shape_btc", None, dtype=np.int64, value=[batch, T, d])
    g.init("scale", None, value=1.0 / np.sqrt(hd))
    for i in range(layers):
        s = "/layers.%d" % i
        p = "layers.%d" % i
        ln = g.node("LayerNormalization", s + "/ln1/LayerNormalization",
                    [x, g.init(p + ".ln1.weight", (d,), value=np.ones(d)), g.init(p + ".ln1.bias", (d,), value=np.zeros(d))],
                    axis=-1, epsilon=1e-5)
        qkv = []
        for j, nm in enumerate("qkv"):
            t = g.node("MatMul", s + "/attn/%s/MatMul" % nm, [ln, g.init(p + ".attn.%s.weight" % nm, (d, d))])
            t = g.node("Add", s + "/attn/%s/Add" % nm, [t, g.init(p + ".attn.%s.bias" % nm, (d,))])
            t = g.node("Reshape", s + "/attn/Reshape_%d" % j, [t, "shape_bthd"])
            perm = [0, 2, 3, 1] if nm == "k" else [0, 2, 1, 3]
            qkv.append(g.node("Transpose", s + "/attn/Transpose_%d" % j, [t], perm=perm))
        a = g.node("MatMul", s + "/attn/MatMul", [qkv[0], qkv[1]])          # (B, H, T, T)
        a = g.node("Mul", s + "/attn/Mul", [a, "scale"])
        a = g.node("Softmax", s + "/attn/Softmax", [a], axis=-1)
        o = g.node("MatMul", s + "/attn/MatMul_1", [a, qkv[2]])             # (B, H, T, hd)
        o = g.node("Transpose", s + "/attn/Transpose_3", [o], perm=[0, 2, 1, 3])
        o = g.node("Reshape", s + "/attn/Reshape_3", [o, "shape_btc"])
        o = g.node("MatMul", s + "/attn/proj/MatMul", [o, g.init(p + ".attn.proj.weight", (d, d))])
        x = g.node("Add", s + "/Add", [x, o])
        ln = g.node("LayerNormalization", s + "/ln2/LayerNormalization",
                    [x, g.init(p + ".ln2.weight", (d,), value=np.ones(d)), g.init(p + ".ln2.bias", (d,), value=np.zeros(d))],
                    axis=-1, epsilon=1e-5)
        h = g.node("MatMul", s + "/mlp/fc/MatMul", [ln, g.init(p + ".mlp.fc.weight", (d, 2 * d))])
        h = g.node("Add", s + "/mlp/fc/Add", [h, g.init(p + ".mlp.fc.bias", (2 * d,))])
        h = g.node("Relu", s + "/mlp/Relu", [h])
        h = g.node("MatMul", s + "/mlp/proj/MatMul", [h, g.init(p + ".mlp.proj.weight", (2 * d, d))])
        x = g.node("Add", s + "/Add_1", [x, h])
    x = g.node("LayerNormalization", "/ln_f/LayerNormalization",
               [x, g.init("ln_f.weight", (d,), value=np.ones(d)), g.init("ln_f.bias", (d,), value=np.zeros(d))],
               axis=-1, epsilon=1e-5)
    y = g.node("MatMul", "/lm_head/MatMul", [x, g.init("lm_head.weight", (d, classes))])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, T, d])]
    return g, y, inputs, [batch, T, classes]


PER_LAYER = {"mlp": 4, "tf": 26}


def generate(outdir, kind, nodes):
    layers = max(1, round(nodes / PER_LAYER[kind]))
    g, y, inputs, out_shape = (mlp if kind == "mlp" else tf)(layers)
    g.nodes[-1].output[0] = "logits"
    graph = helper.make_graph(g.nodes, "%s_%d" % (kind, layers), inputs,
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, out_shape)],
                              initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="bench/gen_graphs.py")
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "%s_%d.onnx" % (kind, nodes))
    onnx.save(model, path)
    return path, layers, len(g.nodes)


def main(argv):
    if len(argv) != 3 or argv[1] not in PER_LAYER:
        print("usage: gen_graphs.py OUTDIR mlp|tf NODES", file=sys.stderr)
        return 2
    path, layers, n = generate(argv[0], argv[1], int(argv[2]))
    print("%s %d layers %d nodes" % (path, layers, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
