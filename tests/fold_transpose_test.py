#!/usr/bin/python3
"""fold_transpose_test.py — Transposes folded into the MatMuls next to them (passes/fold_transpose.c).

    fold_transpose_test.py CKPTC SAMPLES WORKDIR

1. Inference, against NumPy (float64 products, relative tolerance 2e-6): MatMuls whose operands
   come through one or two Transposes and whose result goes through one, over 3-D and 4-D
   shapes (attention's head split (B,T,H,D) -> (B,H,T,D), K^T, the merge back, a transposed
   batch axis, broadcast batches, a result whose rows (not columns) are contiguous after its
   Transpose, computed as b^T a^T). Where a fold is possible the program has no strided copy left;
   where it is not (no unit stride on a matrix axis, a transposed value also read by a Relu or
   also a graph output) the copies stay, and the output is right either way. Each plan's peak
   is at most the one with --no-fold-transposes.
2. Training, on the attention samples (gpt4, bert): with and without --no-fold-transposes, for
   none, blocks, sqrt, selective and blocks --offload: the folded program has fewer strided
   copies, plans a peak no higher, and its 3 steps' losses agree with the unfolded program's within 1e-6; every policy
   ends with the same loss bits as none, folded.
Ends with `N passed, N failed`.
"""
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from onnx_common import np, onnx  # noqa: E402  (NumPy aliases for python3-onnx 1.12, before onnx)
from onnx import TensorProto, helper  # noqa: E402

CKPTC, SAMPLES, WORK = sys.argv[1:4]
os.makedirs(WORK, exist_ok=True)
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    passed, failed = passed + bool(ok), failed + (not ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def copies(prog):
    """strided copies (Transpose kernels and the like) in the generated program"""
    return sum(open(f).read().count("ckrt_strided_copy(") for f in glob.glob(os.path.join(prog, "*.c")))


# ---------------------------------------------------------------- 1. inference against NumPy

def case(name, a_shape, a_perms, b_shape, b_perms, y_perm=None, extra=None):
    """a = chain of Transposes (a_perms) over input A; likewise b; y = a @ b, transposed by y_perm.
    extra: 'relu' (the first transposed A is also read by a Relu, an output) or 'output' (it is a
    graph output itself)."""
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    A = rng.standard_normal(a_shape).astype(np.float32)
    B = rng.standard_normal(b_shape).astype(np.float32)
    nodes, outs = [], []

    def chain(src, perms, tag):
        v, val = src, {"A": A, "B": B}[src].astype(np.float64)
        if extra == "relu" and src == "A":  # an intermediate source, which dies at its Transpose
            nodes.append(helper.make_node("Relu", ["A"], ["A_r"], name="/relu_a"))
            v, val = "A_r", np.maximum(val, 0)
        for i, p in enumerate(perms):
            o = "%s_t%d" % (tag, i)
            nodes.append(helper.make_node("Transpose", [v], [o], name="/" + o, perm=list(p)))
            v, val = o, np.transpose(val, p)
        return v, val

    a, av = chain("A", a_perms, "a")
    b, bv = chain("B", b_perms, "b")
    want = np.matmul(av, bv)
    y = "prod" if y_perm else "y"
    nodes.append(helper.make_node("MatMul", [a, b], [y], name="/mm"))
    if y_perm:
        nodes.append(helper.make_node("Transpose", ["prod"], ["y"], name="/ty", perm=list(y_perm)))
        want = np.transpose(want, y_perm)
    outs.append(("y", want))
    if extra == "relu":
        nodes.append(helper.make_node("Relu", ["a_t0"], ["r"], name="/relu"))
        outs.append(("r", np.transpose(np.maximum(A.astype(np.float64), 0), a_perms[0])))
    if extra == "output":
        outs.append(("a_t0", np.transpose(A.astype(np.float64), a_perms[0])))
    return run_model(name, nodes, {"A": A, "B": B}, outs)


def run_model(name, nodes, feeds, outs):
    """Compiles the graph (float inputs feeds {name: array}, outputs outs [(name, wanted array)])
    with --infer and runs it: (strided copies in the program, max relative error), or None after
    a failed check (it did not compile or run, an output's shape is wrong, or the plan's peak is
    above the unfolded plan's)."""
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in feeds.items()],
                          [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in outs])
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    prog = os.path.join(WORK, name)
    r = run([CKPTC, path, "--infer", "-o", prog])
    if r.returncode != 0:
        return check(name, False, "ckptc exit %d: %s" % (r.returncode, r.stderr.strip()[-400:]))
    r = run(["make", "-s", "-C", prog])
    if r.returncode != 0:
        return check(name, False, "make: " + (r.stdout + r.stderr)[-400:])
    cmd = [os.path.join(prog, "model")]
    for k, v in feeds.items():
        np.save(os.path.join(prog, k + ".npy"), v)
        cmd += ["--input", "%s=%s" % (k, os.path.join(prog, k + ".npy"))]
    out = os.path.join(prog, "out")
    os.makedirs(out, exist_ok=True)
    r = run(cmd + ["--dump-outputs", out, "--report", os.path.join(prog, "report.json")])
    if r.returncode != 0:
        return check(name, False, "program exit %d: %s" % (r.returncode, r.stderr.strip()[-400:]))
    files = json.load(open(os.path.join(prog, "report.json")))["outputs"]
    worst = 0.0
    for k, w in outs:
        got = np.load(os.path.join(out, files[k])).astype(np.float64)
        if got.shape != w.shape:
            return check(name, False, "%s: shape %s, want %s" % (k, got.shape, w.shape))
        if w.size:
            worst = max(worst, float(np.max(np.abs(got - w)) / (np.max(np.abs(w)) + 1e-30)))
    # the plan without the fold: the folded one's peak is no higher
    r = run([CKPTC, path, "--infer", "--plan-only", "--no-fold-transposes"])
    r2 = run([CKPTC, path, "--infer", "--plan-only"])
    peaks = [int(re.search(r"planned peak (\d+) bytes", x.stdout).group(1)) for x in (r2, r)]
    if peaks[0] > peaks[1]:
        return check(name, False, "planned peak %d folded, %d unfolded" % tuple(peaks))
    return copies(prog), worst


def folds(name, *args, **kw):
    """a case every Transpose of which folds: no strided copy left"""
    res = case(name, *args, **kw)
    if res is None:
        return
    n, worst = res
    check(name, n == 0 and worst <= 2e-6, "%d strided copies left, max relative error %.2e" % (n, worst))


def keeps(name, want_copies, *args, **kw):
    """a case whose Transposes (some or all) must stay: exactly want_copies strided copies"""
    res = case(name, *args, **kw)
    if res is None:
        return
    n, worst = res
    check(name, n == want_copies and worst <= 2e-6, "%d strided copies (want %d), max relative error %.2e" % (n, want_copies, worst))


# attention's shapes: q (B,T,H,D) -> (B,H,T,D); k -> (B,H,D,T); y (B,H,T,D) -> (B,T,H,D)
folds("scores", (2, 33, 3, 16), [(0, 2, 1, 3)], (2, 33, 3, 16), [(0, 2, 3, 1)])
folds("scores_two_steps", (2, 33, 3, 16), [(0, 2, 1, 3)], (2, 33, 3, 16), [(0, 2, 1, 3), (0, 1, 3, 2)])
folds("context_merge", (2, 3, 33, 33), [], (2, 33, 3, 16), [(0, 2, 1, 3)], y_perm=(0, 2, 1, 3))
folds("grad_like_nt", (2, 3, 20, 17), [], (2, 3, 24, 17), [(0, 1, 3, 2)])
folds("grad_like_tn", (2, 3, 17, 20), [(0, 1, 3, 2)], (2, 3, 17, 24), [])
folds("both_transposed", (4, 9, 7), [(0, 2, 1)], (4, 5, 9), [(0, 2, 1)])
folds("batch_axis_moved", (7, 4, 9), [(1, 0, 2)], (4, 9, 5), [])
folds("broadcast_b", (3, 2, 6, 8), [(0, 1, 3, 2)], (2, 6, 5), [])
folds("result_transposed_3d", (4, 6, 8), [], (4, 8, 5), [], y_perm=(1, 0, 2))
folds("one_row", (2, 1, 8), [(0, 2, 1)], (2, 1, 5), [(0, 1, 2)])
# no unit stride on either matrix axis of the operand: (B,T,H,D) -> (D,H,B,T)-like
keeps("no_unit_stride", 1, (3, 5, 4, 6), [(3, 1, 0, 2)], (6, 5, 4, 7), [])
# a result transposed so that its rows, not its columns, are contiguous: computed as b^T a^T
folds("result_rows_contiguous", (4, 6, 8), [], (4, 8, 5), [], y_perm=(0, 2, 1))
folds("result_rows_contiguous_4d", (2, 3, 20, 17), [(0, 1, 3, 2)], (2, 3, 20, 24), [], y_perm=(0, 3, 1, 2))
# a result transposed so that neither its rows nor its columns are contiguous: the Transpose stays
keeps("result_strided", 1, (4, 6, 8), [], (4, 8, 5), [], y_perm=(1, 2, 0))
# the transposed A is also read by a Relu: it must stay (else A, which dies at the Transpose,
# would live on beside it: the planned peak is checked against the unfolded plan's)
keeps("read_elsewhere", 1, (2, 33, 3, 16), [(0, 2, 1, 3)], (2, 3, 16, 7), [], extra="relu")
keeps("is_an_output", 1, (2, 33, 3, 16), [(0, 2, 1, 3)], (2, 3, 16, 7), [], extra="output")
# an empty inner dimension through a 1-D left operand (no fold; the layout of a plain MatMul)
folds("empty_inner_1d", (0,), [], (2, 0, 3), [])


def shared_intermediate():
    """x = Relu(A); y1 = x^T (per batch); y2 = y1 with its batch and row axes swapped. MatMul(y2, W)
    cannot read x (no unit stride on a matrix axis of the composed permutation), so it reads y1:
    y1's Transpose must stay, and then the MatMul(y1, W2) must read y1 too, not x (x would live
    on beside y1: the peak rose 22% before that was caught)."""
    rng = np.random.default_rng(7)
    A = rng.standard_normal((32, 48, 40)).astype(np.float32)
    C = rng.standard_normal((64, 64)).astype(np.float32)
    W = rng.standard_normal((40, 48, 3)).astype(np.float32)
    W2 = rng.standard_normal((32, 48, 3)).astype(np.float32)
    nodes = [helper.make_node("Relu", ["A"], ["x"], name="/relu"),
             helper.make_node("Transpose", ["x"], ["y1"], name="/t1", perm=[0, 2, 1]),
             helper.make_node("Relu", ["C"], ["c"], name="/relu_c"),
             helper.make_node("ReduceSum", ["c"], ["s"], name="/sum", keepdims=0),
             helper.make_node("Transpose", ["y1"], ["y2"], name="/t2", perm=[1, 0, 2]),
             helper.make_node("MatMul", ["y2", "W"], ["p"], name="/mm"),
             helper.make_node("MatMul", ["y1", "W2"], ["q"], name="/mm2")]
    x = np.maximum(A.astype(np.float64), 0)
    y1 = np.transpose(x, (0, 2, 1))
    outs = [("p", np.matmul(np.transpose(y1, (1, 0, 2)), W)), ("q", np.matmul(y1, W2)),
            ("s", np.array(np.maximum(C.astype(np.float64), 0).sum()))]
    res = run_model("shared_intermediate", nodes, {"A": A, "C": C, "W": W, "W2": W2}, outs)
    if res is not None:
        check("shared_intermediate", res[1] <= 2e-6, "max relative error %.2e" % res[1])


shared_intermediate()


# ---------------------------------------------------------------- 2. training the attention samples

def train(model, prog, flags):
    dims = []
    for k, v in json.load(open(os.path.join(SAMPLES, model + ".json"))).get("dims", {}).items():
        dims += ["--dim", "%s=%s" % (k, v)]
    r = run([CKPTC, os.path.join(SAMPLES, model + ".onnx"), "-o", prog, "--optimizer=sgd", "--lr=0.1",
             "--disable-dropout"] + dims + flags)
    if r.returncode != 0:
        return "ckptc exit %d: %s" % (r.returncode, r.stderr.strip()[-400:])
    r = run(["make", "-s", "-C", prog])
    if r.returncode != 0:
        return "make: " + (r.stdout + r.stderr)[-400:]
    cmd = [os.path.join(prog, "trainer"), "--steps", "3", "--threads", "2", "--report", os.path.join(prog, "r.json")]
    for f in sorted(os.listdir(SAMPLES)):
        if f.startswith(model + ".in.") and f.endswith(".npy"):
            cmd += ["--input", "%s=%s" % (f[len(model) + 4:-4], os.path.join(SAMPLES, f))]
    r = run(cmd)
    if r.returncode != 0:
        return "trainer exit %d: %s" % (r.returncode, r.stderr.strip()[-400:])
    return json.load(open(os.path.join(prog, "r.json")))


for model in ("gpt4", "bert"):
    none_losses = None
    for pol in ("none", "blocks", "sqrt", "selective", "blocks --offload"):
        tag = "%s %s" % (model, pol)
        flags = ["--checkpoint=" + pol.split()[0]] + pol.split()[1:]
        d = os.path.join(WORK, model + "_" + pol.replace(" --", "_"))
        folded = train(model, d + "_fold", flags)
        plain = train(model, d + "_copy", flags + ["--no-fold-transposes"])
        if isinstance(folded, str) or isinstance(plain, str):
            check(tag, False, folded if isinstance(folded, str) else plain)
            continue
        cf, cp = copies(d + "_fold"), copies(d + "_copy")
        lf, lp = folded["losses"], plain["losses"]  # 9 digits: a float32's exact value
        rel = max(abs(a - b) / abs(b) for a, b in zip(lf, lp))
        check(tag + ": fewer copies", cf < cp, "%d strided copies folded, %d unfolded" % (cf, cp))
        check(tag + ": peak no higher", folded["planned_peak_bytes"] <= plain["planned_peak_bytes"] and
              folded["planned_peak_bytes"] == folded["measured_peak_bytes"],
              "planned %d folded (measured %d), %d unfolded" % (folded["planned_peak_bytes"], folded["measured_peak_bytes"],
                                                                plain["planned_peak_bytes"]))
        check(tag + ": losses as unfolded", rel <= 1e-6, "max relative difference %.2e" % rel)
        if pol == "none":
            none_losses = lf
        else:
            check(tag + ": bits of none", lf == none_losses, "%r vs none's %r" % (lf, none_losses))

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
