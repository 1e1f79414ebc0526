#!/usr/bin/python3
"""grad_check.py — every gradient rule of passes/autodiff.c against a float64 PyTorch reference.

    /usr/bin/python3 tests/grad_check.py CKPTC WORKDIR [--filter REGEX] [--jobs N]

For each case this builds a tiny ONNX model (opset 17) with onnx.helper: the op under test applied
to float32 initializers (the parameters: random values from a generator seeded by the case name,
chosen away from the op's non-differentiable points), plus graph inputs for the operands that are
not differentiable (indices, conditions), plus Constant nodes for constant operands (shapes, axes,
exponents, bounds). The loss is

    loss = sum_k ReduceSum(Mul(out_k, R_k))

with R_k a fixed random float32 tensor of out_k's shape held by a Constant node (an initializer
would be a trainable parameter). The cross-entropy cases instead give logits to ckptc's own loss
(--loss=cross_entropy, int64 input 'labels').

Each case is compiled (`CKPTC model.onnx -o prog --loss=output --optimizer=sgd --lr 0`), built
(`make -s -C prog`) and run for one step with --dump-grads; every parameter's gradient (the file
named after the initializer, characters outside [A-Za-z0-9._-] replaced by '_') is compared with
torch.autograd on float64 copies of the same parameters computing the same function, written by
hand per case after the ONNX spec:

    max |ours - ref| <= 1e-4 * max(1, max |ref|)      per tensor (float32 against float64)

The loss the trainer reports (--report) is checked with the same tolerance, so that a wrong
forward is told apart from a wrong backward. A case
  PASSES  when the loss and every gradient match (and exactly the parameters are trained);
  FAILS   on a mismatch, a missing or unexpected gradient file, a compile failure (for an op ckptc
          claims differentiable), a build failure, a crash or a timeout;
  SKIPS   only when ckptc reports that a backward kernel is not written yet ("no kernel yet").
One line per case, then `N passed, N failed, N skipped`; exit status 1 if anything failed.

Python: Debian's /usr/bin/python3 with python3-torch, python3-onnx and numpy.
"""
import importlib.util
import os
import sys

if (importlib.util.find_spec("onnx") is None or importlib.util.find_spec("torch") is None) and \
        os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
    os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)

import warnings  # noqa: E402
warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)
import numpy as np  # noqa: E402
# Debian 12's python3-onnx 1.12 still uses aliases that numpy 1.24 removed.
for _alias, _typ in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if _alias not in np.__dict__:
        setattr(np, _alias, _typ)
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import argparse  # noqa: E402
import concurrent.futures  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402

torch.set_num_threads(1)
TIMEOUT_S = 300
RTOL = 1e-4
INT64_MAX = 2**63 - 1
INT64_MIN = -2**63
NP_TO_ONNX = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.int64: TensorProto.INT64,
              np.int32: TensorProto.INT32, np.bool_: TensorProto.BOOL}


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


# ---------------------------------------------------------------- case builder

class Case:
    """One model under construction. param() adds a trainable float32 initializer, buffer() a
    float initializer that must not be trained, input() a graph input, const() a Constant node;
    node() adds the op under test. ref(P, I) is the torch function: P maps parameter names to
    float64 leaves, I input names to tensors; it returns the tensors out(...) named, in order."""

    def __init__(self, name):
        self.name = name
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))
        self.nodes, self.params, self.buffers, self.inputs = [], {}, {}, {}
        self.outputs, self.ref, self.loss = [], None, "output"
        self.opset, self.raw_loss, self.n = 17, False, 0

    # values
    def normal(self, shape, scale=1.0):
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def uniform(self, shape, lo, hi):
        return self.rng.uniform(lo, hi, shape).astype(np.float32)

    def away(self, shape, lo=0.2, hi=2.0):
        """random sign, magnitude in [lo, hi]: away from 0"""
        sign = np.where(self.rng.random(shape) < 0.5, -1.0, 1.0)
        return (sign * self.rng.uniform(lo, hi, shape)).astype(np.float32)

    def avoid(self, shape, points, margin=0.1, scale=1.0):
        """normal values, none within margin of the given points"""
        x = self.rng.standard_normal(shape) * scale
        for _ in range(100):
            bad = np.zeros(np.shape(x), bool)
            for p in points:
                bad |= np.abs(x - p) < margin
            if not bad.any():
                break
            x = np.where(bad, self.rng.standard_normal(np.shape(x)) * scale, x)
        return np.asarray(x, np.float32)

    def param(self, name, value):
        self.params[name] = np.asarray(value, np.float32)
        return name

    def buffer(self, name, value):
        self.buffers[name] = np.asarray(value)
        return name

    def input(self, name, value):
        self.inputs[name] = np.asarray(value)
        return name

    def const(self, value, dtype=None):
        value = np.asarray(value, dtype) if dtype is not None else np.asarray(value)
        self.n += 1
        name = "const%d" % self.n
        self.nodes.append(helper.make_node("Constant", [], [name], name=name + "_node",
                                           value=numpy_helper.from_array(value, name + "_value")))
        return name

    def ints(self, values):
        return self.const(np.asarray(values, np.int64))

    def node(self, op, inputs, n_out=1, **attrs):
        self.n += 1
        outs = ["%s_%d_out%d" % (op.lower(), self.n, k) for k in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name="/%s_%d" % (op, self.n), **attrs))
        return outs[0] if n_out == 1 else outs

    def out(self, *names):
        self.outputs.extend(names)


CASES = []


def case(name):
    def register(fn):
        CASES.append((name, fn))
        return fn
    return register


def cases(names):
    """One builder for several cases: fn(c, key) for each (name, key)."""
    def register(fn):
        for name, key in names:
            CASES.append((name, lambda c, fn=fn, key=key: fn(c, key)))
        return fn
    return register


# ---------------------------------------------------------------- torch references of ONNX ops

def t_gemm(A, B, C, ta, tb, alpha, beta):
    A = A.t() if ta else A
    B = B.t() if tb else B
    y = alpha * (A @ B)
    return y if C is None else y + beta * C


def t_conv(x, w, b, pads, strides, dilations, group):
    nsp = x.dim() - 2
    fp = []
    for i in reversed(range(nsp)):
        fp += [pads[i], pads[nsp + i]]
    x = F.pad(x, fp)
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nsp]
    return conv(x, w, b, stride=strides, dilation=dilations, groups=group)


def pool_out(n_in, k, s, pb, pe, d, ceil):
    span = n_in + pb + pe - ((k - 1) * d + 1)
    if ceil:
        o = -(-span // s) + 1
        if (o - 1) * s >= n_in + pb:  # the last window must start inside (PyTorch, ckptc)
            o -= 1
        return o
    return span // s + 1


def t_pool(kind, x, k, strides, pads, dilations, ceil, count_include_pad):
    """ONNX MaxPool/AveragePool by explicit windows (asymmetric pads, dilations, ceil_mode).
    Average: the taps inside x summed, divided by their count, or with count_include_pad by the
    taps inside the padded input [-pad_begin, in + pad_end) (PyTorch's convention)."""
    nsp = x.dim() - 2
    ins = x.shape[2:]
    outs = [pool_out(ins[i], k[i], strides[i], pads[i], pads[nsp + i], dilations[i], ceil) for i in range(nsp)]
    res = []
    for o in itertools.product(*[range(n) for n in outs]):
        taps = [[o[i] * strides[i] - pads[i] + kk * dilations[i] for kk in range(k[i])] for i in range(nsp)]
        inside = [[p for p in t if 0 <= p < ins[i]] for i, t in enumerate(taps)]
        win = x
        for i in range(nsp):
            win = win.index_select(2 + i, torch.tensor(inside[i], dtype=torch.long))
        win = win.reshape(x.shape[0], x.shape[1], -1)
        if kind == "max":
            res.append(win.max(dim=2).values)
        else:
            if count_include_pad:
                div = 1
                for i in range(nsp):
                    div *= sum(1 for p in taps[i] if -pads[i] <= p < ins[i] + pads[nsp + i])
            else:
                div = win.shape[2]
            res.append(win.sum(dim=2) / div)
    return torch.stack(res, dim=2).reshape(list(x.shape[:2]) + outs)


def t_layer_norm(x, scale, bias, axis, eps):
    axis = axis % x.dim()
    dims = tuple(range(axis, x.dim()))
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps) * scale
    return y if bias is None else y + bias


def t_batch_norm(x, scale, bias, eps):
    dims = (0,) + tuple(range(2, x.dim()))
    shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * scale.reshape(shape) + bias.reshape(shape)


def t_gather(data, idx, axis):
    axis = axis % data.dim()
    idx = idx.clone()
    idx[idx < 0] += data.shape[axis]
    flat = data.index_select(axis, idx.reshape(-1))
    return flat.reshape(list(data.shape[:axis]) + list(idx.shape) + list(data.shape[axis + 1:]))


def slice_indices(dim, start, end, step):
    """ONNX Slice along one axis (its clamping equals Python's slice.indices)."""
    return list(range(*slice(start, end, step).indices(dim)))


def t_slice(x, starts, ends, axes, steps):
    rank = x.dim()
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    for s, e, a, st in zip(starts, ends, axes, steps):
        a %= rank
        x = x.index_select(a, torch.tensor(slice_indices(x.shape[a], s, e, st), dtype=torch.long))
    return x


def t_gelu(x, tanh):
    if tanh:
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def bshape(*shapes):
    return tuple(np.broadcast_shapes(*shapes))


# ---------------------------------------------------------------- cases: unary

UNARY = {
    # op: (values, torch function, attrs)
    "Sqrt": (lambda c, s: c.uniform(s, 0.5, 2.0), torch.sqrt, {}),
    "Reciprocal": (lambda c, s: c.away(s, 0.5, 2.0), torch.reciprocal, {}),
    "Neg": (lambda c, s: c.normal(s), torch.neg, {}),
    "Exp": (lambda c, s: c.normal(s), torch.exp, {}),
    "Log": (lambda c, s: c.uniform(s, 0.5, 2.0), torch.log, {}),
    "Abs": (lambda c, s: c.away(s), torch.abs, {}),
    "Tanh": (lambda c, s: c.normal(s), torch.tanh, {}),
    "Sigmoid": (lambda c, s: c.normal(s, 2.0), torch.sigmoid, {}),
    "Relu": (lambda c, s: c.away(s), torch.relu, {}),
    "LeakyRelu": (lambda c, s: c.away(s), lambda x: F.leaky_relu(x, 0.01), {}),
    "LeakyRelu_alpha": (lambda c, s: c.away(s), lambda x: F.leaky_relu(x, 0.2), {"alpha": 0.2}),
    "Erf": (lambda c, s: c.normal(s), torch.erf, {}),
    "Gelu": (lambda c, s: c.normal(s, 1.5), lambda x: t_gelu(x, False), {}),
    "Gelu_tanh": (lambda c, s: c.normal(s, 1.5), lambda x: t_gelu(x, True), {"approximate": "tanh"}),
    # HardSigmoid (ONNX defaults alpha 0.2, beta 0.5; kinks at -2.5, 2.5) and HardSwish (kinks at -3, 3):
    # values on both flat parts and the slope, none near a kink
    "HardSigmoid": (lambda c, s: c.avoid(s, [-2.5, 2.5], 0.2, 2.5), lambda x: torch.clamp(0.2 * x + 0.5, 0, 1), {}),
    "HardSigmoid_alpha_beta": (lambda c, s: c.avoid(s, [-1.0, 1.5], 0.2, 2.0), lambda x: torch.clamp(0.4 * x + 0.4, 0, 1),
                               {"alpha": 0.4, "beta": 0.4}),
    "HardSwish": (lambda c, s: c.avoid(s, [-3.0, 3.0], 0.2, 3.0), F.hardswish, {}),
    "Identity": (lambda c, s: c.normal(s), lambda x: x, {}),
    "Cast": (lambda c, s: c.normal(s), lambda x: x, {"to": TensorProto.FLOAT}),
}


@cases([("unary_%s" % k, k) for k in UNARY])
def _unary(c, key):
    values, fn, attrs = UNARY[key]
    op = key.split("_")[0]
    x = c.param("x", values(c, (3, 4)))
    c.out(c.node(op, [x], **attrs))
    c.ref = lambda P, I: [fn(P["x"])]


@cases([("clip_min_max", "both"), ("clip_min_only", "min"), ("clip_max_only", "max"),
        ("clip_bounds_initializers", "init")])
def _clip(c, key):
    x = c.param("x", c.avoid((4, 5), [-0.5, 0.5], 0.1))
    if key == "init":
        lo, hi = c.buffer("lo", np.float32(-0.5)), c.buffer("hi", np.float32(0.5))
    else:
        lo = c.const(np.float32(-0.5)) if key in ("both", "min") else ""
        hi = c.const(np.float32(0.5)) if key in ("both", "max") else ""
    c.out(c.node("Clip", [x, lo, hi] if hi else [x, lo]))
    tlo = -0.5 if key != "max" else None
    thi = 0.5 if key != "min" else None
    c.ref = lambda P, I: [torch.clamp(P["x"], tlo, thi)]


# ---------------------------------------------------------------- cases: binary

BINARY_SHAPES = [("same", (3, 4), (3, 4)), ("col_row", (3, 1), (4,)), ("rank3_col", (2, 3, 4), (3, 1)),
                 ("row_rank3", (4,), (2, 3, 4)), ("scalar", (), (2, 3)), ("both_bcast", (1, 4), (3, 1))]
BINARY_FNS = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div}


@cases([("%s_%s" % (op.lower(), s[0]), (op, s)) for op in BINARY_FNS for s in BINARY_SHAPES])
def _binary(c, key):
    op, (_, sa, sb) = key
    a = c.param("a", c.normal(sa))
    b = c.param("b", c.away(sb, 0.5, 2.0) if op == "Div" else c.normal(sb))
    c.out(c.node(op, [a, b]))
    c.ref = lambda P, I: [BINARY_FNS[op](P["a"], P["b"])]


@cases([("mod_fmod_same", ((3, 4), (3, 4))), ("mod_fmod_bcast", ((2, 3, 4), (3, 1)))])
def _mod(c, shapes):  # float Mod (fmod=1): a = b * (q + f) keeps a / b away from integers
    sa, sb = shapes
    b = c.away(sb, 0.5, 2.0)
    q = c.rng.integers(-3, 4, sa) + np.where(c.rng.random(sa) < 0.5, -1, 1) * c.rng.uniform(0.2, 0.8, sa)
    a = c.param("a", np.broadcast_to(b, bshape(sa, sb)).reshape(sa) * q)
    b = c.param("b", b)
    c.out(c.node("Mod", [a, b], fmod=1))
    c.ref = lambda P, I: [torch.fmod(P["a"], P["b"])]


@case("mul_fanout_square")
def _(c):  # x * x + exp(x): three uses of one parameter accumulate
    x = c.param("x", c.normal((3, 4)))
    c.out(c.node("Add", [c.node("Mul", [x, x]), c.node("Exp", [x])]))
    c.ref = lambda P, I: [P["x"] * P["x"] + torch.exp(P["x"])]


@case("sub_same_param")
def _(c):  # x - x: the gradients cancel exactly
    x = c.param("x", c.normal((3, 4)))
    y = c.param("y", c.normal((3, 4)))
    c.out(c.node("Mul", [c.node("Sub", [x, x]), y]), c.node("Div", [y, c.node("Abs", [x])]))
    c.ref = lambda P, I: [(P["x"] - P["x"]) * P["y"], P["y"] / torch.abs(P["x"])]


@case("div_with_constant")
def _(c):  # only one operand trainable
    x = c.param("x", c.normal((3, 4)))
    k = c.const(np.asarray([0.5, -2.0, 3.0, 1.5], np.float32))
    c.out(c.node("Div", [k, c.node("Add", [x, c.const(np.float32(4.0))])]), c.node("Div", [x, k]))
    kt = torch.tensor([0.5, -2.0, 3.0, 1.5], dtype=torch.float64)
    c.ref = lambda P, I: [kt / (P["x"] + 4.0), P["x"] / kt]


@cases([("pow_both_params", "both"), ("pow_bcast_exponent", "bcast"), ("pow_const_3", "c3"),
        ("pow_const_half", "chalf"), ("pow_int64_exponent", "int")])
def _pow(c, key):
    if key == "both":
        a, b = c.param("a", c.uniform((3, 4), 0.5, 2.0)), c.param("b", c.normal((3, 4), 0.7))
    elif key == "bcast":
        a, b = c.param("a", c.uniform((3, 4), 0.5, 2.0)), c.param("b", c.normal((4,), 0.7))
    elif key == "c3":
        a, b = c.param("a", c.normal((3, 4))), c.const(np.float32(3.0))
    elif key == "chalf":
        a, b = c.param("a", c.uniform((3, 4), 0.5, 2.0)), c.const(np.float32(0.5))
    else:
        a, b = c.param("a", c.away((3, 4))), c.const(np.int64(2))
    c.out(c.node("Pow", [a, b]))
    exps = {"c3": 3.0, "chalf": 0.5, "int": 2.0}

    def ref(P, I):
        return [torch.pow(P["a"], P["b"] if key in ("both", "bcast") else exps[key])]
    c.ref = ref


@cases([("where_same", ((3, 4), (3, 4), (3, 4))), ("where_bcast_xy", ((3, 4), (3, 1), ())),
        ("where_bcast_cond", ((4,), (3, 4), (4,))), ("where_rank3", ((2, 1, 4), (3, 4), (2, 3, 1)))])
def _where(c, key):
    sc, sx, sy = key
    cond = c.input("cond", c.rng.random(sc) < 0.5)
    x, y = c.param("x", c.normal(sx)), c.param("y", c.normal(sy))
    c.out(c.node("Where", [cond, x, y]))
    c.ref = lambda P, I: [torch.where(I["cond"], P["x"], P["y"])]


@case("where_one_branch_const")
def _(c):
    cond = c.input("cond", c.rng.random((3, 4)) < 0.5)
    x = c.param("x", c.normal((3, 4)))
    c.out(c.node("Where", [cond, c.const(np.float32(0.0)), x]))
    c.ref = lambda P, I: [torch.where(I["cond"], torch.zeros((), dtype=torch.float64), P["x"])]


# ---------------------------------------------------------------- cases: dense

MATMUL_SHAPES = [("2d", (3, 4), (4, 5)), ("batch", (2, 3, 4), (2, 4, 5)), ("batch_bcast", (2, 1, 3, 4), (5, 4, 2)),
                 ("batch_lhs_only", (2, 3, 4), (4, 5)), ("batch_rhs_only", (3, 4), (2, 4, 5)),
                 ("vec_mat", (4,), (4, 5)), ("mat_vec", (3, 4), (4,)), ("vec_vec", (4,), (4,)),
                 ("batch_vec", (2, 3, 4), (4,)), ("vec_batch", (4,), (2, 4, 5))]


@cases([("matmul_%s" % s[0], s) for s in MATMUL_SHAPES])
def _matmul(c, key):
    _, sa, sb = key
    a, b = c.param("A", c.normal(sa)), c.param("B", c.normal(sb))
    c.out(c.node("MatMul", [a, b]))
    c.ref = lambda P, I: [torch.matmul(P["A"], P["B"])]


# Einsum is lowered to ReduceSum/Transpose/Reshape/MatMul (passes/lower.c): the forward and both
# operands' gradients against torch.einsum, for maxvit's attention products, a contraction over
# two letters, free letters in a shuffled output, letters summed out of one operand, an inner and
# an outer product, the implicit output form, and one-operand transpose and reduction.
EINSUM = [("einsum_attn_qk", "BGHID,BGHJD->BGHIJ", [(2, 2, 2, 3, 4), (2, 2, 2, 5, 4)]),
          ("einsum_attn_pv", "BGHIJ,BGHJD->BGHID", [(2, 2, 2, 3, 5), (2, 2, 2, 5, 4)]),
          ("einsum_two_contracted", "bij k,bjkl->bli", [(2, 3, 4, 5), (2, 4, 5, 3)]),
          ("einsum_shuffled_out", "ik,kjb->jbi", [(3, 4), (4, 2, 5)]),
          ("einsum_summed_out", "ijx,jky->ki", [(3, 4, 2), (4, 5, 3)]),
          ("einsum_inner", "i,i->", [(6,), (6,)]),
          ("einsum_outer", "i,j->ij", [(3,), (4,)]),
          ("einsum_implicit", "ij,jk", [(3, 4), (4, 5)]),
          ("einsum_transpose", "ijk->kji", [(2, 3, 4)]),
          ("einsum_reduce", "ijk->j", [(2, 3, 4)])]


@cases([(e[0], e) for e in EINSUM])
def _einsum(c, key):
    _, eq, shapes = key
    names = [c.param("X%d" % i, c.normal(s)) for i, s in enumerate(shapes)]
    c.out(c.node("Einsum", names, equation=eq))
    c.ref = lambda P, I: [torch.einsum(eq.replace(" ", ""), *[P["X%d" % i] for i in range(len(shapes))])]


GEMM = [("gemm_nn_cvec", 0, 0, "vec", 0.7, 1.3), ("gemm_nt_cvec", 0, 1, "vec", 0.7, 1.3),
        ("gemm_tn_cvec", 1, 0, "vec", 0.7, 1.3), ("gemm_tt_cvec", 1, 1, "vec", 0.7, 1.3),
        ("gemm_nn_cfull", 0, 0, "full", 1.0, 1.0), ("gemm_tt_cfull", 1, 1, "full", -0.5, 2.0),
        ("gemm_nt_ccol", 0, 1, "col", 1.0, 0.5), ("gemm_tn_cscalar", 1, 0, "scalar", 2.0, -1.5),
        ("gemm_nn_noc", 0, 0, None, 1.0, 1.0), ("gemm_tt_noc_alpha", 1, 1, None, 0.25, 1.0),
        ("gemm_nt_crow", 0, 1, "row", 1.5, 0.75)]


@cases([(g[0], g[1:]) for g in GEMM])
def _gemm(c, key):
    ta, tb, ck, alpha, beta = key
    M, K, N = 3, 4, 5
    a = c.param("A", c.normal((K, M) if ta else (M, K)))
    b = c.param("B", c.normal((N, K) if tb else (K, N)))
    cshape = {"vec": (N,), "full": (M, N), "col": (M, 1), "scalar": (), "row": (1, N)}.get(ck)
    ins = [a, b] + ([c.param("C", c.normal(cshape))] if ck else [])
    attrs = {}
    if ta:
        attrs["transA"] = 1
    if tb:
        attrs["transB"] = 1
    if alpha != 1.0:
        attrs["alpha"] = alpha
    if beta != 1.0:
        attrs["beta"] = beta
    c.out(c.node("Gemm", ins, **attrs))
    c.ref = lambda P, I: [t_gemm(P["A"], P["B"], P.get("C"), ta, tb, alpha, beta)]


# ---------------------------------------------------------------- cases: softmax

@cases([("%s_axis%s" % (op.lower(), ax), (op, shape, ax)) for op in ("Softmax", "LogSoftmax")
        for shape, ax in (((3, 5), None), ((3, 5), 0), ((2, 3, 4), 1), ((2, 3, 4), -2))])
def _softmax(c, key):
    op, shape, ax = key
    x = c.param("x", c.normal(shape, 2.0))
    c.out(c.node(op, [x], **({} if ax is None else {"axis": ax})))
    fn = torch.softmax if op == "Softmax" else torch.log_softmax
    c.ref = lambda P, I: [fn(P["x"], -1 if ax is None else ax)]


# ---------------------------------------------------------------- cases: normalization

@cases([("layernorm_last", ((2, 3, 8), -1, True, 1e-5)), ("layernorm_axis1", ((2, 3, 4), 1, True, 1e-5)),
        ("layernorm_nobias", ((4, 6), -1, False, 1e-3)), ("layernorm_axis0_eps", ((3, 4), 0, True, 0.1))])
def _layer_norm(c, key):
    shape, axis, has_bias, eps = key
    x = c.param("x", c.normal(shape, 2.0))
    nshape = shape[axis % len(shape):]
    s = c.param("scale", c.normal(nshape) + 1.0)
    ins = [x, s] + ([c.param("bias", c.normal(nshape))] if has_bias else [])
    c.out(c.node("LayerNormalization", ins, axis=axis, epsilon=eps))
    c.ref = lambda P, I: [t_layer_norm(P["x"], P["scale"], P.get("bias"), axis, eps)]


@cases([("batchnorm_4d", ((4, 3, 2, 3), 1)), ("batchnorm_2d", ((6, 4), 1)),
        ("batchnorm_3d_all_outputs", ((3, 2, 5), 3))])
def _batch_norm(c, key):
    shape, n_out = key
    C = shape[1]
    x = c.param("x", c.normal(shape, 2.0) + 0.5)
    s, b = c.param("scale", c.normal((C,)) + 1.0), c.param("bias", c.normal((C,)))
    m, v = c.buffer("running_mean", c.normal((C,))), c.buffer("running_var", c.uniform((C,), 0.5, 1.5))
    outs = c.node("BatchNormalization", [x, s, b, m, v], n_out=n_out, epsilon=1e-3, momentum=0.8, training_mode=1)
    c.out(outs if n_out == 1 else outs[0])
    c.ref = lambda P, I: [t_batch_norm(P["x"], P["scale"], P["bias"], 1e-3)]


# ---------------------------------------------------------------- cases: dropout

@cases([("dropout_ratio0_training", "r0"), ("dropout_training_false", "tf"), ("dropout_no_mode", "none"),
        ("dropout_default", "default")])
def _dropout(c, key):
    x = c.param("x", c.normal((3, 4)))
    if key == "r0":
        ins = [x, c.const(np.float32(0.0)), c.const(np.bool_(True))]
    elif key == "tf":
        ins = [x, c.const(np.float32(0.5)), c.const(np.bool_(False))]
    elif key == "none":
        ins = [x, c.const(np.float32(0.3))]
    else:
        ins = [x]
    # a consumer after the dropout, so the gradient flows through something
    c.out(c.node("Tanh", [c.node("Dropout", ins)]))
    c.ref = lambda P, I: [torch.tanh(P["x"])]


# ---------------------------------------------------------------- cases: convolution and pooling

CONV = [  # name, x, w, bias, pads, strides, dilations, group
    ("conv2d_basic", (2, 3, 5, 5), (4, 3, 3, 3), True, [1, 1, 1, 1], [1, 1], [1, 1], 1),
    ("conv2d_stride_asym_pads", (1, 2, 6, 5), (3, 2, 3, 2), False, [1, 0, 0, 1], [2, 2], [1, 1], 1),
    ("conv2d_dilation", (1, 2, 7, 7), (2, 2, 3, 3), True, [2, 2, 2, 2], [1, 1], [2, 2], 1),
    ("conv2d_group2", (2, 4, 5, 5), (4, 2, 3, 3), True, [1, 1, 1, 1], [1, 1], [1, 1], 2),
    ("conv2d_depthwise", (1, 3, 4, 4), (3, 1, 3, 3), False, [0, 0, 0, 0], [1, 1], [1, 1], 3),
    ("conv2d_1x1", (2, 3, 3, 4), (5, 3, 1, 1), True, [0, 0, 0, 0], [1, 1], [1, 1], 1),
    ("conv2d_stride3_rect", (1, 2, 8, 7), (2, 2, 2, 3), True, [0, 1, 1, 0], [3, 2], [1, 1], 1),
    ("conv1d", (2, 3, 8), (4, 3, 3), True, [1, 1], [2], [1], 1),
    ("conv3d", (1, 2, 4, 4, 3), (2, 2, 2, 2, 2), True, [0, 0, 1, 1, 1, 0], [1, 2, 1], [1, 1, 1], 1),
]


@cases([(k[0], k[1:]) for k in CONV])
def _conv(c, key):
    sx, sw, has_b, pads, strides, dil, group = key
    x, w = c.param("X", c.normal(sx)), c.param("W", c.normal(sw, 0.5))
    ins = [x, w] + ([c.param("B", c.normal((sw[0],)))] if has_b else [])
    ks = {} if len(sx) == 5 else {"kernel_shape": list(sw[2:])}  # conv3d: the kernel shape comes from W
    c.out(c.node("Conv", ins, pads=pads, strides=strides, dilations=dil, group=group, **ks))
    c.ref = lambda P, I: [t_conv(P["X"], P["W"], P.get("B"), pads, strides, dil, group)]


POOL = [  # name, kind, x, kernel, strides, pads, dilations, ceil_mode, count_include_pad
    ("maxpool2d_k2s2", "max", (2, 3, 4, 4), [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], 0, 0),
    ("maxpool2d_k3s2_pads", "max", (1, 2, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 0, 0),
    ("maxpool2d_overlap_s1", "max", (1, 2, 4, 5), [3, 2], [1, 1], [0, 0, 0, 0], [1, 1], 0, 0),
    ("maxpool2d_ceil", "max", (1, 2, 6, 6), [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], 1, 0),
    ("maxpool2d_asym_pads", "max", (1, 2, 5, 4), [2, 2], [2, 1], [0, 1, 1, 0], [1, 1], 0, 0),
    ("maxpool2d_dilation", "max", (1, 2, 6, 6), [2, 2], [1, 1], [0, 0, 0, 0], [2, 2], 0, 0),
    ("maxpool1d", "max", (2, 3, 9), [3], [2], [1, 0], [1], 0, 0),
    ("avgpool2d_k2s2", "avg", (2, 3, 4, 4), [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], 0, 0),
    ("avgpool2d_pads_exclude", "avg", (1, 2, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 0, 0),
    ("avgpool2d_pads_include", "avg", (1, 2, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 0, 1),
    ("avgpool2d_ceil_exclude", "avg", (1, 2, 6, 6), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 1, 0),
    ("avgpool2d_ceil_include", "avg", (1, 2, 6, 6), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 1, 1),
    ("avgpool2d_overlap_asym", "avg", (1, 1, 5, 6), [2, 3], [1, 2], [1, 0, 0, 1], [1, 1], 0, 1),
    ("avgpool1d", "avg", (2, 2, 7), [3], [2], [1, 1], [1], 0, 0),
]


@cases([(p[0], p[1:]) for p in POOL])
def _pool(c, key):
    kind, sx, k, strides, pads, dil, ceil, cip = key
    x = c.param("X", c.normal(sx))
    attrs = {"kernel_shape": k, "strides": strides, "pads": pads}
    if ceil:
        attrs["ceil_mode"] = 1
    if kind == "max":
        if dil != [1] * len(k):
            attrs["dilations"] = dil
        c.out(c.node("MaxPool", [x], **attrs))
    else:
        attrs["count_include_pad"] = cip
        c.out(c.node("AveragePool", [x], **attrs))
    c.ref = lambda P, I: [t_pool(kind, P["X"], k, strides, pads, dil, ceil, cip)]


@cases([("globalavgpool_2d", (2, 3, 4, 5)), ("globalavgpool_1d", (2, 3, 5)), ("globalavgpool_3d", (1, 2, 2, 3, 2))])
def _gap(c, shape):
    x = c.param("X", c.normal(shape))
    c.out(c.node("GlobalAveragePool", [x]))
    c.ref = lambda P, I: [P["X"].mean(dim=tuple(range(2, len(shape))), keepdim=True)]


# ---------------------------------------------------------------- cases: reductions

@cases([("%s_%s" % (op.lower(), k[0]), (op,) + k[1:]) for op in ("ReduceSum", "ReduceMean", "ReduceL1", "ReduceL2", "ReduceSumSquare") for k in (
    ("axis1_keep", (2, 3, 4), [1], 1), ("axes02_drop", (2, 3, 4), [0, 2], 0), ("all_drop", (3, 4), None, 0),
    ("all_keep", (2, 3, 4), None, 1), ("negative_axis", (2, 3, 4), [-1], 0), ("default_keepdims", (3, 4), [0], None))])
def _reduce(c, key):
    op, shape, axes, keep = key
    x = c.param("x", c.normal(shape))
    attrs = {} if keep is None else {"keepdims": keep}
    if op == "ReduceSum":  # opset 13+: axes is an input
        c.out(c.node(op, [x] + ([c.ints(axes)] if axes is not None else []), **attrs))
    else:  # ReduceMean and the rest in opset 17: axes is an attribute
        c.out(c.node(op, [x], **(dict(attrs, axes=axes) if axes is not None else attrs)))
    keepdim = keep is None or keep == 1
    dims = tuple(range(len(shape))) if axes is None else tuple(axes)
    fn = {"ReduceSum": torch.sum, "ReduceMean": torch.mean,
          "ReduceL1": lambda x, dim, keepdim: torch.sum(torch.abs(x), dim=dim, keepdim=keepdim),
          "ReduceL2": lambda x, dim, keepdim: torch.sqrt(torch.sum(x * x, dim=dim, keepdim=keepdim)),
          "ReduceSumSquare": lambda x, dim, keepdim: torch.sum(x * x, dim=dim, keepdim=keepdim)}[op]
    if op == "ReduceL1":  # away from Abs's kink at 0
        c.params["x"] = c.away(shape)
    c.ref = lambda P, I: [fn(P["x"], dim=dims, keepdim=keepdim)]


@case("reducesum_noop_empty_axes")
def _(c):
    x = c.param("x", c.normal((3, 4)))
    c.out(c.node("ReduceSum", [x], noop_with_empty_axes=1))
    c.ref = lambda P, I: [P["x"]]


# ---------------------------------------------------------------- cases: layout

@cases([("reshape_merge", ((2, 3, 4), [6, 4])), ("reshape_zero_minus1", ((2, 3, 4), [0, -1])),
        ("reshape_split", ((6, 4), [2, 3, 2, 2]))])
def _reshape(c, key):
    shape, target = key
    x = c.param("x", c.normal(shape))
    c.out(c.node("Tanh", [c.node("Reshape", [x, c.ints(target)])]))
    out_shape = [shape[i] if t == 0 else t for i, t in enumerate(target)]
    c.ref = lambda P, I: [torch.tanh(P["x"].reshape(out_shape))]


@cases([("flatten_axis1", ((2, 3, 4), 1)), ("flatten_axis0", ((2, 3, 4), 0)), ("flatten_axis2", ((2, 3, 2, 2), 2)),
        ("flatten_axis_neg", ((2, 3, 4), -1)), ("flatten_default", ((2, 3, 2), None))])
def _flatten(c, key):
    shape, axis = key
    x = c.param("x", c.normal(shape))
    c.out(c.node("Flatten", [x], **({} if axis is None else {"axis": axis})))
    a = 1 if axis is None else axis % len(shape) if axis < 0 else axis
    out_shape = [int(np.prod(shape[:a])), int(np.prod(shape[a:]))]
    c.ref = lambda P, I: [P["x"].reshape(out_shape)]


@cases([("squeeze_axis", ((3, 1, 4), [1], (3, 4))), ("squeeze_all", ((1, 3, 1, 4), None, (3, 4))),
        ("squeeze_neg_axis", ((3, 4, 1), [-1], (3, 4))), ("unsqueeze_axes", ((3, 4), [0, 3], (1, 3, 4, 1))),
        ("unsqueeze_neg", ((3, 4), [-1], (3, 4, 1)))])
def _squeeze(c, key):
    shape, axes, out_shape = key
    op = "Squeeze" if len(out_shape) < len(shape) else "Unsqueeze"
    x = c.param("x", c.normal(shape))
    c.out(c.node("Exp", [c.node(op, [x] + ([c.ints(axes)] if axes is not None else []))]))
    c.ref = lambda P, I: [torch.exp(P["x"].reshape(out_shape))]


@cases([("transpose_perm201", ((2, 3, 4), [2, 0, 1])), ("transpose_default", ((2, 3, 4), None)),
        ("transpose_2d", ((3, 5), [1, 0])), ("transpose_nhwc", ((2, 3, 2, 4), [0, 2, 3, 1]))])
def _transpose(c, key):
    shape, perm = key
    x = c.param("x", c.normal(shape))
    c.out(c.node("Transpose", [x], **({} if perm is None else {"perm": perm})))
    p = list(reversed(range(len(shape)))) if perm is None else perm
    c.ref = lambda P, I: [P["x"].permute(p)]


@cases([("concat_axis1", ([(2, 1, 4), (2, 3, 4), (2, 2, 4)], 1)), ("concat_axis_neg", ([(3, 2), (3, 4)], -1)),
        ("concat_axis0", ([(1, 4), (2, 4)], 0))])
def _concat(c, key):
    shapes, axis = key
    names = [c.param("p%d" % i, c.normal(s)) for i, s in enumerate(shapes)]
    c.out(c.node("Concat", names, axis=axis))
    c.ref = lambda P, I: [torch.cat([P[n] for n in names], dim=axis)]


@case("concat_same_param_twice")
def _(c):
    x, y = c.param("x", c.normal((2, 3))), c.param("y", c.normal((2, 2)))
    c.out(c.node("Concat", [x, y, x], axis=1))
    c.ref = lambda P, I: [torch.cat([P["x"], P["y"], P["x"]], dim=1)]


@case("concat_with_constant")
def _(c):
    x = c.param("x", c.normal((2, 3)))
    k = c.const(np.ones((2, 2), np.float32))
    c.out(c.node("Concat", [k, x], axis=1))
    c.ref = lambda P, I: [torch.cat([torch.ones((2, 2), dtype=torch.float64), P["x"]], dim=1)]


@cases([("split_sizes_axis1", ((2, 5, 3), 1, [2, 3], [0, 1])), ("split_equal_one_unused", ((6, 4), 0, None, [0, 2])),
        ("split_neg_axis", ((3, 6), -1, [1, 2, 3], [0, 1, 2])), ("split_only_last_used", ((4, 6), 1, [4, 2], [1]))])
def _split(c, key):
    shape, axis, sizes, used = key
    n_out = 3 if sizes is None else len(sizes)
    x = c.param("x", c.normal(shape))
    outs = c.node("Split", [x] + ([c.ints(sizes)] if sizes is not None else []), n_out=n_out, axis=axis)
    c.out(*[outs[k] for k in used])
    ax = axis % len(shape)
    sz = sizes if sizes is not None else [shape[ax] // n_out] * n_out

    def ref(P, I):
        parts = torch.split(P["x"], sz, dim=ax)
        return [parts[k] for k in used]
    c.ref = ref


SLICES = [  # name, shape, starts, ends, axes, steps
    ("slice_basic", (5, 4), [1], [3], [0], None),
    ("slice_two_axes_step2", (6, 7), [0, 1], [6, 7], [0, 1], [2, 3]),
    ("slice_reverse", (5, 4), [-1], [INT64_MIN], [0], [-1]),
    ("slice_neg_step2_clamped", (4, 7), [100, 2], [-100, 0], [1, 0], [-2, -1]),
    ("slice_default_axes", (4, 5), [1, -3], [3, 100], None, None),
    ("slice_end_past_dim", (3, 6), [2], [INT64_MAX], [1], None),
    ("slice_neg_axis_rank3", (2, 5, 4), [-4, 1], [-1, 4], [-2, 2], [1, 2]),
]


@cases([(s[0], s[1:]) for s in SLICES])
def _slice(c, key):
    shape, starts, ends, axes, steps = key
    x = c.param("x", c.normal(shape))
    ins = [x, c.ints(starts), c.ints(ends)]
    if axes is not None or steps is not None:
        ins.append(c.ints(axes if axes is not None else list(range(len(starts)))))
    if steps is not None:
        ins.append(c.ints(steps))
    c.out(c.node("Slice", ins))
    c.ref = lambda P, I: [t_slice(P["x"], starts, ends, axes, steps)]


GATHERS = [  # name, data shape, indices, axis
    ("gather_axis0_dups", (5, 4), [3, 0, 3], 0),
    ("gather_axis1_2d_neg", (3, 5), [[4, -1], [0, 2]], 1),
    ("gather_scalar_index", (5, 4), 2, 0),
    ("gather_embedding", (10, 6), [[1, 7, 1], [9, 0, 7]], 0),
    ("gather_axis_neg_rank3", (2, 3, 4), [3, 0], -1),
]


@cases([(g[0], g[1:]) for g in GATHERS])
def _gather(c, key):
    shape, idx, axis = key
    x = c.param("data", c.normal(shape))
    i = c.input("indices", np.asarray(idx, np.int64))
    c.out(c.node("Gather", [x, i], axis=axis))
    c.ref = lambda P, I: [t_gather(P["data"], I["indices"], axis)]


def t_pad(x, pads, mode, value=0.0, axes=None):
    """ONNX Pad: per axis, source indices from numpy's pad of an index range (reflect mirrors
    periodically, edge repeats; a negative pad crops), or the constant outside the input."""
    rank = x.dim()
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    for k, a in enumerate(axes):
        pb, pe, n = pads[k], pads[k + len(axes)], x.shape[a]
        if mode == "constant":
            src = np.arange(-max(pb, 0), n + max(pe, 0))
        else:
            src = np.pad(np.arange(n), (max(pb, 0), max(pe, 0)), mode=mode)
        src = src[max(-pb, 0):len(src) - max(-pe, 0)]
        inside = torch.tensor((src >= 0) & (src < n))
        got = x.index_select(a, torch.tensor(np.clip(src, 0, n - 1), dtype=torch.long))
        shape = [1] * rank
        shape[a] = len(src)
        x = torch.where(inside.reshape(shape), got, torch.full_like(got, value))
    return x


PADS = [  # name, shape, pads, mode, constant value, axes
    ("pad_constant_zero_nchw", (2, 3, 4, 5), [0, 0, 1, 2, 0, 0, 2, 1], "constant", None, None),
    ("pad_constant_value_crop", (3, 6), [2, -1, -2, 3], "constant", 1.5, None),
    ("pad_reflect_hw", (2, 2, 4, 5), [0, 0, 2, 3, 0, 0, 3, 1], "reflect", None, None),
    ("pad_reflect_longer_than_axis", (2, 3), [4, 5, 3, 2], "reflect", None, None),
    ("pad_reflect_len1_axis", (1, 4), [2, 1, 1, 2], "reflect", None, None),
    ("pad_edge_hw", (2, 3, 4), [0, 3, 1, 0, 2, 4], "edge", None, None),
    ("pad_edge_crop", (4, 5), [-1, 2, 3, -2], "edge", None, None),
    ("pad_reflect_axes_opset18", (2, 3, 5), [2, 1, 1, 3], "reflect", None, [-1, 1]),
]


@cases([(p[0], p[1:]) for p in PADS])
def _pad(c, key):
    shape, pads, mode, value, axes = key
    x = c.param("x", c.normal(shape))
    ins = [x, c.ints(pads)]
    if value is not None or axes is not None:
        ins.append(c.const(np.float32(value or 0.0)) if value is not None else "")
    if axes is not None:
        ins.append(c.ints(axes))
        c.opset = 18
    c.out(c.node("Pad", ins, mode=mode))
    c.ref = lambda P, I: [t_pad(P["x"], pads, mode, value or 0.0, axes)]


def t_rnn(kind, X, W, R, B, h0, c0, P, direction, layout, lbr, act):
    """ONNX LSTM/GRU/RNN written from the operator spec's equations, one step at a time (gates
    iofc / zrh; Y (T,D,B,H) or, layout 1, (B,T,D,H); Y_h, Y_c (D,B,H) or (B,D,H))."""
    if layout:
        X = X.transpose(0, 1)
        h0 = None if h0 is None else h0.transpose(0, 1)
        c0 = None if c0 is None else c0.transpose(0, 1)
    T, Bn = X.shape[0], X.shape[1]
    D, H = W.shape[0], R.shape[2]
    f = {"Tanh": torch.tanh, "Relu": torch.relu, "Sigmoid": torch.sigmoid}[act]
    ys, hs, cs = [], [], []
    for d in range(D):
        h = h0[d] if h0 is not None else torch.zeros(Bn, H, dtype=X.dtype)
        c = c0[d] if c0 is not None else torch.zeros(Bn, H, dtype=X.dtype)
        wb, rb = (B[d][:B.shape[1] // 2], B[d][B.shape[1] // 2:]) if B is not None else (0, 0)
        out = [None] * T
        rev = direction == "reverse" or d == 1
        for t in (reversed(range(T)) if rev else range(T)):
            xw = X[t] @ W[d].T + wb
            if kind == "LSTM":
                g = xw + h @ R[d].T + rb
                gi, go, gf, gc = g.split(H, dim=1)
                pi, po, pf = P[d].split(H) if P is not None else (0, 0, 0)
                i, fg = torch.sigmoid(gi + pi * c), torch.sigmoid(gf + pf * c)
                c = fg * c + i * torch.tanh(gc)
                h = torch.sigmoid(go + po * c) * torch.tanh(c)
            elif kind == "GRU":
                xz, xr, xh = xw.split(H, dim=1)
                Rz, Rr, Rh = R[d].split(H, dim=0)
                rbz, rbr, rbh = rb.split(H) if B is not None else (0, 0, 0)
                z = torch.sigmoid(xz + h @ Rz.T + rbz)
                r = torch.sigmoid(xr + h @ Rr.T + rbr)
                hh = torch.tanh(xh + r * (h @ Rh.T + rbh)) if lbr else torch.tanh(xh + (r * h) @ Rh.T + rbh)
                h = (1 - z) * hh + z * h
            else:
                h = f(xw + h @ R[d].T + rb)
            out[t] = h
        ys.append(torch.stack(out))
        hs.append(h)
        cs.append(c)
    Y, Yh, Yc = torch.stack(ys, 1), torch.stack(hs), torch.stack(cs)
    if layout:
        Y, Yh, Yc = Y.permute(2, 0, 1, 3), Yh.transpose(0, 1), Yc.transpose(0, 1)
    return Y, Yh, Yc


RNNS = [  # name, op, T, B, I, H, direction, layout, bias, initial states, peepholes, GRU lbr, RNN activation
    ("lstm_forward_bias_h0", "LSTM", 4, 2, 3, 5, "forward", 0, True, True, False, 0, None),
    ("lstm_bidirectional_peepholes", "LSTM", 3, 2, 3, 4, "bidirectional", 0, True, True, True, 0, None),
    ("lstm_reverse_layout1_nobias", "LSTM", 4, 3, 2, 3, "reverse", 1, False, False, False, 0, None),
    ("gru_bidirectional_lbr0", "GRU", 4, 2, 3, 4, "bidirectional", 0, True, True, False, 0, None),
    ("gru_layout1_lbr1_h0", "GRU", 3, 2, 3, 5, "forward", 1, True, True, False, 1, None),
    ("rnn_reverse_relu", "RNN", 4, 2, 3, 4, "reverse", 0, True, True, False, 0, "Relu"),
    ("rnn_bidirectional_layout1_tanh", "RNN", 3, 3, 2, 4, "bidirectional", 1, True, False, False, 0, None),
]


@cases([(r[0], r[1:]) for r in RNNS])
def _rnn(c, key):
    op, T, Bn, I, H, direction, layout, bias, states, peep, lbr, act = key
    D, G = (2 if direction == "bidirectional" else 1), {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    x = c.param("x", c.normal((Bn, T, I) if layout else (T, Bn, I)))
    w, r = c.param("w", c.normal((D, G * H, I), 0.5)), c.param("r", c.normal((D, G * H, H), 0.5))
    st = (Bn, D, H) if layout else (D, Bn, H)
    ins = [x, w, r, c.param("b", c.normal((D, 2 * G * H), 0.5)) if bias else "", ""]
    ins += [c.param("h0", c.normal(st)) if states else ""]
    if op == "LSTM":
        ins += [c.param("c0", c.normal(st)) if states else "", c.param("p", c.normal((D, 3 * H), 0.5)) if peep else ""]
    while ins[-1] == "":
        ins.pop()
    attrs = dict(hidden_size=H, direction=direction, layout=layout)
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    if act:
        attrs["activations"] = [act] * D
    outs = c.node(op, ins, n_out=3 if op == "LSTM" else 2, **attrs)
    c.out(*outs)
    c.ref = lambda P, I: list(t_rnn(op, P["x"], P["w"], P["r"], P.get("b"), P.get("h0"), P.get("c0"), P.get("p"),
                                    direction, layout, lbr, act or "Tanh"))[:len(outs)]


def t_scatter_nd(data, idx, upd, reduction):
    k = idx.shape[-1]
    cols = tuple(torch.tensor(c, dtype=torch.long) for c in idx.reshape(-1, k).T)
    return data.index_put(cols, upd.reshape((-1,) + tuple(data.shape[k:])), accumulate=reduction == "add")


SCATTERS = [  # name, data shape, indices, updates shape, reduction
    ("scatternd_rows", (5, 3), [[4], [0], [2]], (3, 3), "none"),
    ("scatternd_elements_neg", (3, 4), [[[0, 1], [2, -1]], [[1, 0], [-3, 3]]], (2, 2), "none"),
    ("scatternd_add_dups", (4, 2, 3), [[1], [3], [1]], (3, 2, 3), "add"),
]


@cases([(s[0], s[1:]) for s in SCATTERS])
def _scatter_nd(c, key):
    shape, idx, ushape, red = key
    x = c.param("data", c.normal(shape))
    u = c.param("updates", c.normal(ushape))
    i = c.ints(idx)
    c.out(c.node("ScatterND", [x, i, u], **({} if red == "none" else {"reduction": red})))
    c.ref = lambda P, I: [t_scatter_nd(P["data"], np.asarray(idx), P["updates"], red)]


@cases([("gathernd_rows_dups", ((5, 3), [[4], [0], [4]])), ("gathernd_elements", ((3, 4, 2), [[[0, 1], [2, 3]], [[2, 0], [1, 1]]]))])
def _gather_nd(c, key):
    shape, idx = key
    x = c.param("data", c.normal(shape))
    i = c.input("indices", np.asarray(idx, np.int64))
    c.out(c.node("GatherND", [x, i]))
    k = np.asarray(idx).shape[-1]
    c.ref = lambda P, I: [P["data"][tuple(torch.as_tensor(I["indices"][..., t]) for t in range(k))]]


@cases([("expand_col_to_rank3", ((3, 1), [2, 3, 4])), ("expand_row", ((4,), [3, 4])),
        ("expand_shape_smaller", ((2, 3, 1), [3, 4])), ("expand_ones_in_shape", ((3, 4), [2, 1, 1])),
        ("expand_scalar", ((), [2, 3]))])
def _expand(c, key):
    shape, target = key
    x = c.param("x", c.normal(shape))
    c.out(c.node("Expand", [x, c.ints(target)]))
    out_shape = bshape(shape, tuple(target))
    c.ref = lambda P, I: [torch.broadcast_to(P["x"], out_shape)]


@cases([("trilu_upper_default", ((4, 5), None, None)), ("trilu_lower_k_neg1", ((2, 4, 5), 0, -1)),
        ("trilu_upper_k2", ((5, 4), 1, 2)), ("trilu_lower_batch", ((2, 3, 3), 0, None))])
def _trilu(c, key):
    shape, upper, k = key
    x = c.param("x", c.normal(shape))
    ins = [x] + ([c.ints(k)] if k is not None else [])
    c.out(c.node("Trilu", ins, **({} if upper is None else {"upper": upper})))
    kk = 0 if k is None else k
    fn = torch.tril if upper == 0 else torch.triu
    c.ref = lambda P, I: [fn(P["x"], kk)]


# ---------------------------------------------------------------- cases: the internal loss

@case("cross_entropy_2d")
def _(c):
    c.loss = "cross_entropy"
    x, w, b = c.param("x", c.normal((4, 3))), c.param("W", c.normal((3, 5))), c.param("b", c.normal((5,)))
    c.input("labels", np.asarray([0, 4, 2, 4], np.int64))
    c.out(c.node("Add", [c.node("MatMul", [x, w]), b]))
    c.ref = lambda P, I: [F.cross_entropy(P["x"] @ P["W"] + P["b"], I["labels"])]


@case("cross_entropy_3d_gpt")
def _(c):
    c.loss = "cross_entropy"
    h, w = c.param("h", c.normal((2, 3, 4))), c.param("W", c.normal((4, 7)))
    c.input("labels", np.asarray([[0, 6, 2], [3, 3, 1]], np.int64))
    c.out(c.node("MatMul", [h, w]))
    c.ref = lambda P, I: [F.cross_entropy((P["h"] @ P["W"]).reshape(-1, 7), I["labels"].reshape(-1))]


@case("cross_entropy_logits_param")
def _(c):
    c.loss = "cross_entropy"
    z = c.param("z", c.normal((3, 6), 3.0))
    c.input("labels", np.asarray([5, 0, 2], np.int64))
    c.out(c.node("Mul", [z, c.const(np.float32(1.0))]))
    c.ref = lambda P, I: [F.cross_entropy(P["z"], I["labels"])]


# ---------------------------------------------------------------- cases: composites

@case("mlp_relu_softmax")
def _(c):
    x = c.input("x", c.normal((4, 6)))
    w1, b1 = c.param("fc1.weight", c.normal((5, 6), 0.5)), c.param("fc1.bias", c.normal((5,)))
    w2, b2 = c.param("fc2.weight", c.normal((3, 5), 0.5)), c.param("fc2.bias", c.normal((3,)))
    h = c.node("Relu", [c.node("Gemm", [x, w1, b1], transB=1)])
    c.out(c.node("Softmax", [c.node("Gemm", [h, w2, b2], transB=1)]))

    def ref(P, I):
        h = torch.relu(I["x"] @ P["fc1.weight"].t() + P["fc1.bias"])
        return [torch.softmax(h @ P["fc2.weight"].t() + P["fc2.bias"], -1)]
    c.ref = ref


@case("odd_param_names_sanitized")
def _(c):
    a, b = c.param("layer.0/weight:0", c.normal((3, 4))), c.param("layer 0#bias", c.normal((4,)))
    c.out(c.node("Tanh", [c.node("Add", [a, b])]))
    c.ref = lambda P, I: [torch.tanh(P["layer.0/weight:0"] + P["layer 0#bias"])]


@case("attention_causal")
def _(c):
    x = c.input("x", c.normal((2, 4, 6)))
    wq, wk, wv = (c.param(n, c.normal((6, 6), 0.4)) for n in ("wq", "wk", "wv"))
    q, k, v = (c.node("MatMul", [x, w]) for w in (wq, wk, wv))
    kt = c.node("Transpose", [k], perm=[0, 2, 1])
    s = c.node("Div", [c.node("MatMul", [q, kt]), c.const(np.float32(math.sqrt(6)))])
    mask = c.input("mask", np.tril(np.ones((4, 4), bool)))
    s = c.node("Where", [mask, s, c.const(np.float32(-1e4))])
    c.out(c.node("MatMul", [c.node("Softmax", [s]), v]))

    def ref(P, I):
        q, k, v = I["x"] @ P["wq"], I["x"] @ P["wk"], I["x"] @ P["wv"]
        s = (q @ k.transpose(1, 2)) / math.sqrt(6)
        s = torch.where(I["mask"], s, torch.tensor(-1e4, dtype=torch.float64))
        return [torch.softmax(s, -1) @ v]
    c.ref = ref


@case("tied_embedding")
def _(c):
    emb = c.param("emb", c.normal((7, 4)))
    ids = c.input("ids", np.asarray([[1, 6, 1], [0, 3, 2]], np.int64))
    h = c.node("Tanh", [c.node("Gather", [emb, ids])])
    c.out(c.node("MatMul", [h, c.node("Transpose", [emb], perm=[1, 0])]))
    c.ref = lambda P, I: [torch.tanh(t_gather(P["emb"], I["ids"], 0)) @ P["emb"].t()]


@case("convnet_bn_pool")
def _(c):
    x = c.input("x", c.normal((2, 2, 6, 6)))
    w = c.param("conv.weight", c.normal((3, 2, 3, 3), 0.4))
    s, b = c.param("bn.weight", c.normal((3,)) + 1.0), c.param("bn.bias", c.normal((3,)))
    m, v = c.buffer("bn.running_mean", np.zeros(3, np.float32)), c.buffer("bn.running_var", np.ones(3, np.float32))
    h = c.node("Conv", [x, w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    h = c.node("Relu", [c.node("BatchNormalization", [h, s, b, m, v], training_mode=1)])
    h = c.node("GlobalAveragePool", [c.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])])
    c.out(c.node("Flatten", [h]))

    def ref(P, I):
        h = t_conv(I["x"], P["conv.weight"], None, [1, 1, 1, 1], [1, 1], [1, 1], 1)
        h = torch.relu(t_batch_norm(h, P["bn.weight"], P["bn.bias"], 1e-5))
        h = t_pool("max", h, [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], 0, 0)
        return [h.mean(dim=(2, 3))]
    c.ref = ref


# ---------------------------------------------------------------- cases: corners of the pass itself

@case("matmul_same_param_both_sides")
def _(c):
    x = c.param("x", c.normal((4, 4), 0.7))
    c.out(c.node("MatMul", [x, x]))
    c.ref = lambda P, I: [P["x"] @ P["x"]]


@case("where_same_param_both_branches")
def _(c):
    cond = c.input("cond", c.rng.random((3, 4)) < 0.5)
    x = c.param("x", c.normal((3, 4)))
    c.out(c.node("Where", [cond, x, c.node("Neg", [x])]))
    c.ref = lambda P, I: [torch.where(I["cond"], P["x"], -P["x"])]


@case("pow_constant_base")
def _(c):
    x = c.param("x", c.normal((3, 4)))
    c.out(c.node("Pow", [c.const(np.float32(2.5)), x]))
    c.ref = lambda P, I: [torch.pow(torch.tensor(2.5, dtype=torch.float64), P["x"])]


@case("pow_exponent_initializer")
def _(c):  # Pow's exponent is a differentiable slot: a float initializer there is trained
    a = c.param("a", c.uniform((3, 4), 0.5, 2.0))
    e = c.param("e", np.float32(1.7))
    c.out(c.node("Pow", [a, e]))
    c.ref = lambda P, I: [torch.pow(P["a"], P["e"])]


@case("cast_chain")
def _(c):
    x = c.param("x", c.normal((3, 4)))
    c.out(c.node("Cast", [c.node("Exp", [c.node("Cast", [x], to=TensorProto.FLOAT)])], to=TensorProto.FLOAT))
    c.ref = lambda P, I: [torch.exp(P["x"])]


@case("loss_is_reducesum_of_param")
def _(c):  # the loss gradient reaches the parameter through one ReduceSum: d = ones
    c.raw_loss = True
    x = c.param("x", c.normal((3, 4)))
    c.out(c.node("ReduceSum", [x], keepdims=0))
    c.ref = lambda P, I: [P["x"].sum()]


@case("loss_is_scalar_param_times_const")
def _(c):  # the parameter's gradient is a constant of the backward graph
    c.raw_loss = True
    x = c.param("x", np.float32(0.75))
    c.out(c.node("Mul", [x, c.const(np.float32(3.0))]))
    c.ref = lambda P, I: [P["x"] * 3.0]


@case("add_grad_shared_by_two_params")
def _(c):  # da = db = the same upstream gradient: two gradient files from one value
    a, b = c.param("a", c.normal((3, 4))), c.param("b", c.normal((3, 4)))
    c.out(c.node("Add", [a, b]))
    c.ref = lambda P, I: [P["a"] + P["b"]]


@cases([("dropout_inference_mask_output", ("none", 0.5)), ("dropout_training_false_mask_output", ("false", 0.5)),
        ("dropout_ratio0_mask_output", ("true", 0.0))])
def _dropout_mask(c, key):
    mode, ratio = key
    x = c.param("x", c.normal((3, 4)))
    ins = [x, c.const(np.float32(ratio))]
    if mode != "none":
        ins.append(c.const(np.bool_(mode == "true")))
    y, _mask = c.node("Dropout", ins, n_out=2)  # the mask output exists but nothing reads it
    c.out(c.node("Tanh", [y]))
    c.ref = lambda P, I: [torch.tanh(P["x"])]


@case("reducemean_opset18_axes_input")
def _(c):
    c.opset = 18
    x = c.param("x", c.normal((2, 3, 4)))
    c.out(c.node("ReduceMean", [x, c.ints([0, 2])], keepdims=1))
    c.ref = lambda P, I: [P["x"].mean(dim=(0, 2), keepdim=True)]


@case("split_opset18_num_outputs_uneven")
def _(c):
    c.opset = 18
    x = c.param("x", c.normal((7, 2)))
    outs = c.node("Split", [x], n_out=3, axis=0, num_outputs=3)
    c.out(*outs)

    def ref(P, I):
        return list(torch.split(P["x"], [3, 3, 1], dim=0))
    c.ref = ref


def same_pads(n_in, k, s, d, upper):
    out = -(-n_in // s)
    total = max(0, (out - 1) * s + (k - 1) * d + 1 - n_in)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


@cases([("conv2d_same_upper", "SAME_UPPER"), ("conv2d_same_lower", "SAME_LOWER"), ("conv2d_valid", "VALID")])
def _conv_auto(c, ap):
    x, w = c.param("X", c.normal((1, 2, 5, 6))), c.param("W", c.normal((3, 2, 2, 3), 0.5))
    c.out(c.node("Conv", [x, w], auto_pad=ap, strides=[2, 2]))
    if ap == "VALID":
        pads = [0, 0, 0, 0]
    else:
        (b0, e0), (b1, e1) = (same_pads(n, k, 2, 1, ap == "SAME_UPPER") for n, k in ((5, 2), (6, 3)))
        pads = [b0, b1, e0, e1]
    c.ref = lambda P, I: [t_conv(P["X"], P["W"], None, pads, [2, 2], [1, 1], 1)]


@cases([("maxpool2d_same_upper", ("max", "SAME_UPPER")), ("avgpool2d_same_lower", ("avg", "SAME_LOWER"))])
def _pool_auto(c, key):
    kind, ap = key
    x = c.param("X", c.normal((1, 2, 5, 5)))
    c.out(c.node("MaxPool" if kind == "max" else "AveragePool", [x], kernel_shape=[2, 3], strides=[2, 2], auto_pad=ap))
    (b0, e0), (b1, e1) = (same_pads(5, k, 2, 1, ap == "SAME_UPPER") for k in (2, 3))
    pads = [b0, b1, e0, e1]
    c.ref = lambda P, I: [t_pool(kind, P["X"], [2, 3], [2, 2], pads, [1, 1], 0, 0)]


# ---------------------------------------------------------------- running a case

def tensor_of(a, grad):
    if a.dtype == np.float32 or a.dtype == np.float64:
        return torch.tensor(a.astype(np.float64), requires_grad=grad)
    return torch.tensor(a)


def build(name, fn):
    """-> (Case with its model, reference loss, reference gradients) or raises."""
    c = Case(name)
    fn(c)
    P = {k: tensor_of(v, True) for k, v in c.params.items()}
    I = {k: tensor_of(v, False) for k, v in c.inputs.items()}
    ys = c.ref(P, I)
    if c.raw_loss:  # the case's one output is the loss itself
        loss = ys[0]
        c.nodes.append(helper.make_node("Identity", [c.outputs[0]], ["loss"], name="/loss"))
        graph_out = [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])]
        graph_inputs = c.inputs
    elif c.loss == "cross_entropy":
        loss = ys[0]
        graph_out = [helper.make_tensor_value_info(c.outputs[0], TensorProto.FLOAT, None)]
        graph_inputs = {k: v for k, v in c.inputs.items() if k != "labels"}
    else:
        if len(ys) != len(c.outputs):
            raise RuntimeError("the reference returns %d tensors for %d outputs" % (len(ys), len(c.outputs)))
        terms = []
        loss = torch.zeros((), dtype=torch.float64)
        for k, (o, y) in enumerate(zip(c.outputs, ys)):
            R = c.normal(tuple(y.shape))
            r = c.const(R)
            terms.append(c.node("ReduceSum", [c.node("Mul", [o, r])], keepdims=0))
            loss = loss + (y * torch.tensor(R.astype(np.float64))).sum()
        total = terms[0]
        for t in terms[1:]:
            total = c.node("Add", [total, t])
        c.nodes.append(helper.make_node("Identity", [total], ["loss"], name="/loss"))
        graph_out = [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])]
        graph_inputs = c.inputs
    params = list(P)
    grads = torch.autograd.grad(loss, [P[k] for k in params], allow_unused=True)
    ref_grads = {k: (g.detach().numpy() if g is not None else np.zeros(c.params[k].shape))
                 for k, g in zip(params, grads)}
    vi = [helper.make_tensor_value_info(k, NP_TO_ONNX[v.dtype.type], list(v.shape))
          for k, v in graph_inputs.items()]
    inits = [numpy_helper.from_array(v, k) for k, v in list(c.params.items()) + list(c.buffers.items())]
    graph = helper.make_graph(c.nodes, name, vi, graph_out, inits)
    c.model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", c.opset)], producer_name="grad_check.py")
    c.model.ir_version = 8
    return c, float(loss.detach()), ref_grads


def run(cmd, cwd=None):
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return -1000, "", "timeout after %d s" % TIMEOUT_S
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def tail(text, n=4):
    return " | ".join([ln.strip() for ln in text.splitlines() if ln.strip()][-n:])


def close(ours, ref):
    err = float(np.max(np.abs(ours.astype(np.float64) - ref))) if ref.size else 0.0
    bound = RTOL * max(1.0, float(np.max(np.abs(ref))) if ref.size else 0.0)
    return err <= bound, err, bound


def check(ckptc, workdir, item):
    """-> (status, detail): status PASS, FAIL or SKIP."""
    name, c, ref_loss, ref_grads = item
    d = os.path.join(workdir, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "grads"))
    onnx.save(c.model, os.path.join(d, "model.onnx"))
    cmd = [ckptc, "model.onnx", "-o", "prog", "--loss=" + c.loss, "--optimizer=sgd", "--lr", "0"]
    rc, out, err = run(cmd, cwd=d)
    if rc != 0:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if rc == 2 and lines and all(ln.endswith("no kernel yet") for ln in lines):  # and nothing else wrong
            reasons = sorted(set(re.findall(r"\((ckptc\.\w+)\): no kernel yet", err))) or [tail(err, 1)]
            return "SKIP", "no kernel yet: " + ", ".join(reasons)
        what = "compile refused (exit 2)" if rc == 2 else "ckptc crashed (exit %d)" % rc
        return "FAIL", "%s: %s" % (what, tail(err))
    rc, out, err = run(["make", "-s", "-C", "prog"], cwd=d)
    if rc != 0:
        errors = [ln.strip() for ln in (out + err).splitlines() if "error" in ln]
        return "FAIL", "build failed (exit %d): %s" % (rc, " | ".join(errors[:2]) or tail(out + err))
    feed = []
    for k, v in c.inputs.items():
        path = "in_%s.npy" % sanitize(k)
        np.save(os.path.join(d, path), v)
        feed += ["--input", "%s=%s" % (k, path)]
    rc, out, err = run(["prog/trainer", "--steps", "1", "--dump-grads", "grads", "--report", "report.json"] + feed,
                       cwd=d)
    if rc != 0:
        return "FAIL", "trainer failed (exit %d): %s" % (rc, tail(err or out))
    problems, worst = [], 0.0
    try:
        with open(os.path.join(d, "report.json")) as f:
            loss = float(json.load(f)["losses"][0])
        ok, e, b = close(np.asarray(loss), np.asarray(ref_loss))
        if not ok:
            problems.append("forward: loss %.7g, torch %.7g" % (loss, ref_loss))
    except (OSError, ValueError, KeyError, IndexError) as ex:
        problems.append("no loss in report.json (%s)" % ex)
    files = set(os.listdir(os.path.join(d, "grads")))
    want = {sanitize(k) + ".npy": k for k in ref_grads}
    for f in sorted(files - set(want)):
        problems.append("unexpected gradient %s (a constant was trained)" % f)
    for f, k in sorted(want.items()):
        if f not in files:
            problems.append("no gradient for '%s'" % k)
            continue
        g = np.load(os.path.join(d, "grads", f))
        r = ref_grads[k]
        if g.shape != r.shape:
            problems.append("d%s has shape %s, expected %s" % (k, g.shape, r.shape))
            continue
        ok, e, b = close(g, r)
        worst = max(worst, e / b * RTOL)
        if not ok:
            at = np.unravel_index(np.argmax(np.abs(g - r)), r.shape) if r.size else ()
            problems.append("d%s: max err %.3g > %.3g (at %s: ours %.6g, torch %.6g)" % (
                k, e, b, tuple(int(i) for i in at), float(g[at]), float(r[at])))
    if problems:
        return "FAIL", "; ".join(problems)
    return "PASS", "max rel err %.1e" % worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ckptc")
    ap.add_argument("workdir")
    ap.add_argument("--filter", default=None, help="only the cases whose name matches this regex (re.search)")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    ckptc = os.path.abspath(a.ckptc)
    workdir = os.path.abspath(a.workdir)
    os.makedirs(workdir, exist_ok=True)
    t0 = time.time()
    items, early = [], {}
    names = [n for n, _ in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    for name, fn in CASES:
        if a.filter and not re.search(a.filter, name):
            continue
        try:
            items.append((name,) + build(name, fn))
        except Exception as ex:  # a bug in the case itself: reported, never hidden
            early[name] = ("FAIL", "the case could not be built: %s: %s" % (type(ex).__name__, ex))
            items.append((name, None, None, None))
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}

    def job(item):
        if item[0] in early:
            return early[item[0]]
        try:
            return check(ckptc, workdir, item)
        except Exception as ex:
            return "FAIL", "harness error: %s: %s" % (type(ex).__name__, ex)

    with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        for item, (status, detail) in zip(items, pool.map(job, items)):
            counts[status] += 1
            print("%-4s %s: %s" % (status, item[0], detail), flush=True)
    print("(%d cases in %.1f s)" % (len(items), time.time() - t0))
    print("%d passed, %d failed, %d skipped" % (counts["PASS"], counts["FAIL"], counts["SKIP"]))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
