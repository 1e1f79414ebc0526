#!/usr/bin/python3
"""ops_fold_test.py — Pad, Mod and ScatterND where models meet them: constant subgraphs folded at
compile time, run-time kernels against NumPy, and the errors a user gets.

    ops_fold_test.py CKPTC WORKDIR

1. Folding (Swin builds its shifted-window mask from constants; exporters write shape arithmetic
   with Mod): a model whose mask comes from ConstantOfShape -> ScatterND (region ids) -> Pad with
   pads from int64 Mod/Sub arithmetic, added to the input. `ckptc inspect --json` must show only
   the Add left (ScatterND, Mod, Pad, Sub folded away), and the compiled --infer program's output
   must equal the same mask built with NumPy (np.pad, Python's %, index assignment) plus x.
2. Run time: Mod of int64, int32 and float32 inputs by constants (fmod 0 and 1) against Python's
   % and math.fmod; Pad of an input in each mode against np.pad.
3. Errors (exit 2, one line naming the node): pads computed at run time, mode wrap (Pad-19), a
   float Mod with fmod=0, training through ScatterND with reduction mul.
Ends with `N passed, N failed`.
"""
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from onnx_common import np, onnx  # noqa: E402  (NumPy aliases for python3-onnx 1.12, before onnx)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

CKPTC, WORK = sys.argv[1:3]
os.makedirs(WORK, exist_ok=True)
passed = failed = 0
NP_TO_ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
              np.dtype(np.int32): TensorProto.INT32}


def check(name, ok, detail=""):
    global passed, failed
    passed, failed = passed + bool(ok), failed + (not ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))


def run(cmd, cwd=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=cwd)


def const(name, value):
    return helper.make_node("Constant", [], [name], name=name + "_node", value=numpy_helper.from_array(np.asarray(value), name))


def save(name, nodes, inputs, outputs, opset=17, inits=()):
    """inputs/outputs: (name, numpy dtype, shape); inits: (name, array) initializers"""
    vi = [helper.make_tensor_value_info(n, NP_TO_ONNX[np.dtype(t)], s) for n, t, s in inputs]
    vo = [helper.make_tensor_value_info(n, NP_TO_ONNX[np.dtype(t)], s) for n, t, s in outputs]
    graph = helper.make_graph(nodes, name, vi, vo, initializer=[numpy_helper.from_array(v, k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(model, path)
    return path


def infer(name, path, feeds):
    """Compiles path with --infer, runs it on feeds {name: array}; returns {output: array} or an error string."""
    prog = os.path.join(WORK, name)
    r = run([CKPTC, path, "--infer", "-o", prog])
    if r.returncode != 0:
        return "ckptc exit %d: %s" % (r.returncode, r.stderr.strip()[-500:])
    r = run(["make", "-s", "-C", prog])
    if r.returncode != 0:
        return "make failed: " + (r.stdout + r.stderr)[-500:]
    cmd = [os.path.join(prog, "model")]
    for k, v in feeds.items():
        np.save(os.path.join(prog, k + ".npy"), v)
        cmd += ["--input", "%s=%s" % (k, os.path.join(prog, k + ".npy"))]
    out = os.path.join(prog, "out")
    os.makedirs(out, exist_ok=True)
    r = run(cmd + ["--dump-outputs", out, "--report", os.path.join(prog, "report.json")])
    if r.returncode != 0:
        return "program exit %d: %s" % (r.returncode, r.stderr.strip()[-500:])
    files = json.load(open(os.path.join(prog, "report.json")))["outputs"]
    return {k: np.load(os.path.join(out, f)) for k, f in files.items()}


def same(got, want):
    return isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape and \
        np.array_equal(got, want)


# ---------------------------------------------------------------- 1. folding

H, W, WIN, SHIFT = 6, 7, 4, 2


def mask_model():
    regions = [(slice(0, H - WIN), slice(0, W - WIN)), (slice(H - WIN, H - SHIFT), slice(W - WIN, W - SHIFT)),
               (slice(H - SHIFT, H), slice(W - SHIFT, W))]
    idx, ids = [], []
    for r, (hs, ws) in enumerate(regions):
        for h in range(H)[hs]:
            for w in range(W)[ws]:
                idx.append([h, w])
                ids.append(r + 1)
    idx, ids = np.asarray(idx, np.int64), np.asarray(ids, np.float32)
    nodes = [const("shape", np.asarray([H, W], np.int64)),
             helper.make_node("ConstantOfShape", ["shape"], ["zeros"], name="/zeros",
                              value=numpy_helper.from_array(np.zeros(1, np.float32), "v")),
             const("idx", idx), const("ids", ids),
             helper.make_node("ScatterND", ["zeros", "idx", "ids"], ["regions"], name="/mask/ScatterND"),
             # pad_b = (WIN - H % WIN) % WIN, pad_r likewise: int64 shape arithmetic
             const("win", np.asarray([WIN, WIN], np.int64)),
             helper.make_node("Mod", ["shape", "win"], ["rem"], name="/pads/Mod"),
             helper.make_node("Sub", ["win", "rem"], ["short"], name="/pads/Sub"),
             helper.make_node("Mod", ["short", "win"], ["tail"], name="/pads/Mod_1"),
             const("head", np.zeros(2, np.int64)),
             helper.make_node("Concat", ["head", "tail"], ["pads"], name="/pads/Concat", axis=0),
             helper.make_node("Pad", ["regions", "pads"], ["mask"], name="/mask/Pad", mode="reflect"),
             helper.make_node("Add", ["x", "mask"], ["y"], name="/Add")]
    ph, pw = (WIN - H % WIN) % WIN, (WIN - W % WIN) % WIN
    ref = np.zeros((H, W), np.float32)
    ref[idx[:, 0], idx[:, 1]] = ids
    ref = np.pad(ref, ((0, ph), (0, pw)), mode="reflect")
    return save("mask", nodes, [("x", np.float32, ref.shape)], [("y", np.float32, ref.shape)]), ref


path, mask_ref = mask_model()
r = run([CKPTC, "inspect", "--json", path])
hist = json.loads(r.stdout).get("op_histogram", {}) if r.returncode == 0 else {}
check("mask: ScatterND, Mod, Sub and Pad on constants are folded, only the Add runs", hist == {"Add": 1},
      "inspect exit %d, ops %s %s" % (r.returncode, hist, r.stderr[-300:]))
x = np.random.default_rng(0).standard_normal(mask_ref.shape).astype(np.float32)
got = infer("mask", path, {"x": x})
check("mask: the folded mask equals NumPy's", isinstance(got, dict) and same(got.get("y"), x + mask_ref),
      str(got)[:500])

# ---------------------------------------------------------------- 2. run time


def py_mod(a, b, fmod):
    if fmod:
        return math.fmod(a, b) if isinstance(a, float) else int(math.fmod(a, b))
    return a % b


for dt in (np.int64, np.int32, np.float32):
    for fmod in ((0, 1) if dt != np.float32 else (1,)):
        a = np.asarray([[7, -7, 7, -7, 0, 5], [13, -13, 3, -2, 9, -9]], dt)
        b = np.asarray([3, 3, -3, -3, 4, -5], dt)
        name = "mod_%s_fmod%d" % (np.dtype(dt).name, fmod)
        path = save(name, [const("b", b), helper.make_node("Mod", ["a", "b"], ["y"], name="/Mod", fmod=fmod)],
                    [("a", dt, a.shape)], [("y", dt, a.shape)])
        want = np.asarray([[py_mod(a.item(i, j), b.item(j), fmod) for j in range(a.shape[1])] for i in range(a.shape[0])], dt)
        got = infer(name, path, {"a": a})
        check("%s: the kernel gives %s" % (name, "math.fmod" if fmod else "Python's %"),
              isinstance(got, dict) and same(got.get("y"), want), "%s vs %s" % (got, want.tolist()))

for mode in ("constant", "reflect", "edge"):
    a = np.random.default_rng(1).standard_normal((2, 3, 5)).astype(np.float32)
    pads = [0, 2, 3, 1, 1, 4]
    name = "pad_" + mode
    nodes = [const("pads", np.asarray(pads, np.int64))]
    ins = ["a", "pads"]
    if mode == "constant":
        nodes.append(const("cv", np.float32(-1.5)))
        ins.append("cv")
    nodes.append(helper.make_node("Pad", ins, ["y"], name="/Pad", mode=mode))
    width = [(pads[k], pads[k + 3]) for k in range(3)]
    want = np.pad(a, width, mode=mode, **({"constant_values": -1.5} if mode == "constant" else {}))
    got = infer(name, save(name, nodes, [("a", np.float32, a.shape)], [("y", np.float32, want.shape)]), {"a": a})
    check("%s: the kernel equals np.pad" % name, isinstance(got, dict) and same(got.get("y"), want), str(got)[:300])

# ---------------------------------------------------------------- 3. errors


def refused(name, nodes, inputs, outputs, needles, flags=("--infer",), inits=()):
    path = save(name, nodes, inputs, outputs, inits=inits)
    r = run([CKPTC, path, "-o", os.path.join(WORK, name)] + list(flags))
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("ckptc: error:")]
    ok = r.returncode == 2 and len(err) == 1 and all(s in err[0] for s in needles)
    check("%s: exit 2, one line naming %s" % (name, ", ".join(needles)), ok, "exit %d: %s" % (r.returncode, r.stderr[-400:]))


refused("computed_p", [helper.make_node("Pad", ["a", "p"], ["y"], name="/swin/Pad")],
        [("a", np.float32, [2, 3]), ("p", np.int64, [4])], [("y", np.float32, None)],
        ["/swin/Pad", "pads, input 1 'p'", "compile time"])
refused("pad_wrap", [const("pads", np.asarray([1, 1, 1, 1], np.int64)),
                     helper.make_node("Pad", ["a", "pads"], ["y"], name="/wrap/Pad", mode="wrap")],
        [("a", np.float32, [2, 3])], [("y", np.float32, None)], ["/wrap/Pad", "wrap"])
refused("mod_float_fmod0", [const("b", np.float32(2.0)), helper.make_node("Mod", ["a", "b"], ["y"], name="/f/Mod")],
        [("a", np.float32, [3])], [("y", np.float32, [3])], ["/f/Mod", "fmod=1"])
refused("scatternd_mul_training",
        [const("i", np.asarray([[1]], np.int64)),
         helper.make_node("ScatterND", ["w", "i", "u"], ["s"], name="/s/ScatterND", reduction="mul"),
         helper.make_node("ReduceSum", ["s"], ["y"], name="/sum", keepdims=0)],
        [], [("y", np.float32, [])], ["/s/ScatterND", "mul"], flags=("--loss=output",),
        inits=[("w", np.ones((3, 2), np.float32)), ("u", np.full((1, 2), 2.0, np.float32))])

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
