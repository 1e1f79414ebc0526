#!/usr/bin/python3
"""random_ops_test.py — the random ops on the counter RNG (issue 16) and stochastic depth.

    random_ops_test.py CKPTC WORKDIR [--emu LIBCKRT_EMU RUNTIME_DIR TESTS_DIR CXX]

No reference can match a random draw value for value, so this checks what a draw must satisfy:
1. Statistics (one model, --infer, 65536 elements per op): RandomUniformLike(low -2, high 3) lies
   in [-2, 3) with the mean and variance of U(-2, 3) and about 1/5 of the draws in each unit
   interval; RandomNormalLike(mean 1, scale 2) and RandomNormal (shape attribute) have the mean,
   standard deviation and the 1- and 2-sigma fractions of N(1, 4); Bernoulli over a vector of
   probabilities gives 0/1 with each probability's frequency, p 0 never and p 1 always, as
   float64 when dtype says so; RandomUniform (shape attribute, dtype double) its dtype and shape.
   Every bound is 5 standard errors of the estimate (a false failure about once in 10^6 runs).
   The same --seed gives the same bits, another seed other values; two nodes with the same
   attributes draw different values (each node its own key); the `seed` attribute changes the
   draw.
2. Expectation: the same model compiled with --disable-dropout returns each op's mean
   ((low + high) / 2, mean, p).
3. Stochastic depth exported by python/ckptc_export.py (torchvision's ConvNeXt, narrow: widths 8
   and 16, two blocks a stage, stochastic_depth_prob 0.5, layer_scale 1, 32x32, batch 2): the graph holds ONNX
   Bernoulli nodes; it trains 3 SGD steps; every checkpoint policy (blocks, sqrt, every:2,
   blocks --offload) gives the parameters of `none` bit for bit; in the recomputing policies each
   Bernoulli's clone draws with its forward's key; another --seed changes the losses (the masks
   matter); eval (--eval-data, lr 0) equals PyTorch's model.eval() loss and --infer
   --disable-dropout its logits (stochastic depth is the identity there, as in PyTorch).
4. The dropped fraction: StochasticDepth(0.3, "row") exported by the helper on a (4096, 8) input:
   rows are either all 0 or all x / 0.7, and the dropped fraction is within 5 standard errors of
   0.3, for 4 seeds.
5. With --emu (ctest passes it when g++ is there): the CUDA path (runtime/cuda_ops.c's
   cu_random and the emitted kernels.cu, in tests/cuda_emu.c's emulation, as cuda_emu_test.py
   runs it) draws the same bits as the CPU backend for every op of part 1, and the ConvNeXt of
   part 3 trains to the CPU's losses (1e-5 relative) with --checkpoint=blocks.
Ends with `N passed, N failed`.
"""
import json
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
from onnx_common import np, onnx  # noqa: E402  (NumPy aliases for python3-onnx 1.12, before onnx)
from onnx import TensorProto, helper  # noqa: E402
import torch  # noqa: E402
import ckptc_export  # noqa: E402

CKPTC, WORK = sys.argv[1:3]
EMU = sys.argv[4:8] if len(sys.argv) >= 8 and sys.argv[3] == "--emu" and sys.argv[7] != "-" else None
os.makedirs(WORK, exist_ok=True)
passed = failed = 0
N = 65536


def check(name, ok, detail=""):
    global passed, failed
    passed, failed = passed + bool(ok), failed + (not ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def build(model, d, flags):
    p = run([CKPTC, model, *flags, "-o", d])
    if p.returncode:
        return p.stderr
    p = run(["make", "-s", "-C", d])
    return p.stderr if p.returncode else None


def infer(d, inputs, out, seed=0):
    cmd = [f"{d}/model", "--seed", str(seed), "--dump-outputs", out]
    for k, v in inputs.items():
        cmd += ["--input", f"{k}={v}"]
    p = run(cmd)
    if p.returncode:
        return p.stderr
    return None


# ---------------------------------------------------------------- 1, 2: statistics, expectation

P_VALUES = np.array([0.0, 0.1, 0.5, 0.9, 1.0], np.float32)


def stats_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [N])
    p = helper.make_tensor_value_info("p", TensorProto.FLOAT, [5, N // 8])
    outs = [("u", TensorProto.FLOAT, [N]), ("u2", TensorProto.FLOAT, [N]), ("us", TensorProto.FLOAT, [N]),
            ("z", TensorProto.FLOAT, [N]), ("zs", TensorProto.FLOAT, [4, N // 4]), ("b", TensorProto.FLOAT, [5, N // 8]),
            ("b64", TensorProto.DOUBLE, [5, N // 8]), ("ud", TensorProto.DOUBLE, [3, 7])]
    nodes = [
        helper.make_node("RandomUniformLike", ["x"], ["u"], name="/u", low=-2.0, high=3.0),
        helper.make_node("RandomUniformLike", ["x"], ["u2"], name="/u2", low=-2.0, high=3.0),
        helper.make_node("RandomUniformLike", ["x"], ["us"], name="/us", low=-2.0, high=3.0, seed=5.0),
        helper.make_node("RandomNormalLike", ["x"], ["z"], name="/z", mean=1.0, scale=2.0),
        helper.make_node("RandomNormal", [], ["zs"], name="/zs", mean=1.0, scale=2.0, shape=[4, N // 4]),
        helper.make_node("Bernoulli", ["p"], ["b"], name="/b"),
        helper.make_node("Bernoulli", ["p"], ["b64"], name="/b64", dtype=TensorProto.DOUBLE),
        helper.make_node("RandomUniform", [], ["ud"], name="/ud", shape=[3, 7], dtype=TensorProto.DOUBLE),
    ]
    g = helper.make_graph(nodes, "random", [x, p], [helper.make_tensor_value_info(n, t, s) for n, t, s in outs])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def uniform_ok(name, u, lo, hi):
    n = u.size
    mean, var = (lo + hi) / 2, (hi - lo) ** 2 / 12
    hist = np.histogram(u, bins=int(hi - lo), range=(lo, hi))[0] / n
    se_bin = math.sqrt(0.2 * 0.8 / n)
    check(f"{name}: in [{lo}, {hi})", u.min() >= lo and u.max() < hi, f"range [{u.min()}, {u.max()}]")
    check(f"{name}: mean {u.mean():.4f} within 5 s.e. of {mean}", abs(u.mean() - mean) < 5 * math.sqrt(var / n))
    # the variance of the sample variance of U: (mu4 - var^2) / n, mu4 = (hi - lo)^4 / 80
    se_var = math.sqrt(((hi - lo) ** 4 / 80 - var ** 2) / n)
    check(f"{name}: variance {u.var():.4f} within 5 s.e. of {var:.4f}", abs(u.var() - var) < 5 * se_var)
    check(f"{name}: each unit interval holds 1/5 (within 5 s.e.)", np.all(np.abs(hist - 0.2) < 5 * se_bin), str(hist))


def normal_ok(name, z, mean, sd):
    n = z.size
    check(f"{name}: mean {z.mean():.4f} within 5 s.e. of {mean}", abs(z.mean() - mean) < 5 * sd / math.sqrt(n))
    se_sd = sd / math.sqrt(2 * n)
    check(f"{name}: sd {z.std():.4f} within 5 s.e. of {sd}", abs(z.std() - sd) < 5 * se_sd)
    for k, want in ((1, 0.682689492), (2, 0.954499736)):
        f = float(np.mean(np.abs(z - mean) < k * sd))
        check(f"{name}: {f:.4f} within {k} sd (N: {want:.4f}, 5 s.e.)", abs(f - want) < 5 * math.sqrt(want * (1 - want) / n))


def part_stats():
    model = f"{WORK}/stats.onnx"
    stats_model(model)
    d = f"{WORK}/stats"
    err = build(model, d, ["--infer"])
    check("the random-op model compiles and builds", err is None, str(err)[-2000:])
    if err:
        return
    np.save(f"{WORK}/x.npy", np.zeros(N, np.float32))
    np.save(f"{WORK}/p.npy", np.repeat(P_VALUES[:, None], N // 8, axis=1))
    ins = {"x": f"{WORK}/x.npy", "p": f"{WORK}/p.npy"}
    outs = {}
    for seed in (0, 0, 1):
        o = f"{d}/out-{seed}-{len(outs)}"
        err = infer(d, ins, o, seed)
        check(f"the program runs (--seed {seed})", err is None, str(err)[-2000:])
        if err:
            return
        outs.setdefault(seed, []).append({k: np.load(f"{o}/{k}.npy") for k in ("u", "u2", "us", "z", "zs", "b", "b64", "ud")})
    a, a2, b = outs[0][0], outs[0][1], outs[1][0]
    check("the same --seed gives the same bits", all(np.array_equal(a[k], a2[k]) for k in a))
    check("another --seed draws other values", all(not np.array_equal(a[k], b[k]) for k in ("u", "z", "zs", "b", "ud")))
    check("two nodes with the same attributes draw different values", not np.array_equal(a["u"], a["u2"]))
    check("the seed attribute changes the draw", not np.array_equal(a["u"], a["us"]))
    check("dtypes and shapes: float32, float64 where dtype says so",
          a["u"].dtype == np.float32 and a["b64"].dtype == np.float64 and a["ud"].dtype == np.float64
          and a["zs"].shape == (4, N // 4) and a["ud"].shape == (3, 7), str({k: (v.dtype, v.shape) for k, v in a.items()}))
    uniform_ok("RandomUniformLike(-2, 3)", a["u"].astype(np.float64), -2.0, 3.0)
    uniform_ok("RandomUniformLike(-2, 3, seed 5)", a["us"].astype(np.float64), -2.0, 3.0)
    check("RandomUniform(dtype double) in [0, 1)", a["ud"].min() >= 0 and a["ud"].max() < 1)
    normal_ok("RandomNormalLike(1, 2)", a["z"].astype(np.float64), 1.0, 2.0)
    normal_ok("RandomNormal(1, 2, shape)", a["zs"].astype(np.float64), 1.0, 2.0)
    bern = a["b"]
    check("Bernoulli: only 0 and 1", set(np.unique(bern).tolist()) <= {0.0, 1.0})
    for r, p in enumerate(P_VALUES.tolist()):
        f, n = float(bern[r].mean()), bern.shape[1]
        ok = f == p if p in (0.0, 1.0) else abs(f - p) < 5 * math.sqrt(p * (1 - p) / n)
        check(f"Bernoulli: p {p:g} -> frequency {f:.4f}", ok)
    b64 = a["b64"]
    ok = set(np.unique(b64).tolist()) <= {0.0, 1.0} and all(
        float(b64[r].mean()) == p if p in (0.0, 1.0) else abs(float(b64[r].mean()) - p) < 5 * math.sqrt(p * (1 - p) / b64.shape[1])
        for r, p in enumerate(P_VALUES.tolist()))
    check("Bernoulli with dtype double: 0 and 1 in float64, each p's frequency", ok)

    de = f"{WORK}/stats-expect"
    err = build(model, de, ["--infer", "--disable-dropout"])
    err = err or infer(de, ins, f"{de}/out")
    check("--disable-dropout: compiles and runs", err is None, str(err)[-2000:])
    if err:
        return
    e = {k: np.load(f"{de}/out/{k}.npy") for k in ("u", "z", "zs", "b", "b64", "ud")}
    check("--disable-dropout: each op returns its expectation ((low + high) / 2, mean, p)",
          np.all(e["u"] == 0.5) and np.all(e["z"] == 1.0) and np.all(e["zs"] == 1.0) and np.all(e["ud"] == 0.5)
          and np.array_equal(e["b"], np.repeat(P_VALUES[:, None], N // 8, axis=1))
          and np.array_equal(e["b64"], e["b"].astype(np.float64)))


# ---------------------------------------------------------------- 3: ConvNeXt with stochastic depth

def convnext():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    torch.manual_seed(0)
    # layer_scale 1 (not torchvision's 1e-6): the residual branches, and so their masks, move the loss
    return ConvNeXt([CNBlockConfig(8, 16, 2), CNBlockConfig(16, None, 2)], stochastic_depth_prob=0.5, layer_scale=1.0,
                    num_classes=5)


def train(d, flags=(), steps=3, seed=0):
    cmd = [f"{d}/trainer", "--input", f"x={WORK}/cx.npy", "--input", f"labels={WORK}/cl.npy", "--steps", str(steps),
           "--seed", str(seed), "--report", f"{d}/r-{seed}.json", "--dump-params", f"{d}/params-{seed}", *flags]
    p = run(cmd)
    if p.returncode:
        return None, p.stderr
    return json.load(open(f"{d}/r-{seed}.json")), None


def params(d, seed=0):
    pd = f"{d}/params-{seed}"
    return {f: open(os.path.join(pd, f), "rb").read() for f in sorted(os.listdir(pd))}


def keys(d):
    """The key argument (last) of every ckrt_random call in the generated trainer."""
    src = open(f"{d}/trainer.c").read()
    return [int(k) for k in re.findall(r"ckrt_random\([^;]*, (\d+)\)\);", src)]


def part_convnext():
    model = convnext()
    x, labels = torch.randn(2, 3, 32, 32), torch.tensor([1, 3])
    np.save(f"{WORK}/cx.npy", x.numpy())
    np.save(f"{WORK}/cl.npy", labels.numpy())
    path = f"{WORK}/convnext.onnx"
    ckptc_export.export(model, (x,), path, input_names=["x"], output_names=["logits"])
    ops = [n.op_type for n in onnx.load(path).graph.node]
    check(f"the helper exports stochastic depth as Bernoulli ({ops.count('Bernoulli')} nodes; the first block's p is 0)",
          ops.count("Bernoulli") == 3, str(sorted(set(ops))))
    import torchvision.ops.stochastic_depth  # noqa: F401
    sd = sys.modules["torchvision.ops.stochastic_depth"]
    check("the helper puts torchvision's stochastic_depth back", sd.stochastic_depth.__code__.co_filename == sd.__file__)
    base = ["--optimizer=sgd", "--lr", "0.1"]
    ref = None
    for pol in ("none", "blocks", "sqrt", "every:2", "blocks --offload"):
        d = f"{WORK}/cn-{pol.replace(' ', '').replace(':', '')}"
        err = build(path, d, base + [f"--checkpoint={pol.split()[0]}"] + pol.split()[1:])
        r, err2 = (None, None) if err else train(d)
        check(f"convnext, --checkpoint={pol}: compiles and trains 3 steps", not err and not err2, str(err or err2)[-2000:])
        if err or err2:
            continue
        if pol == "none":
            ref = (d, r["losses"])
            check("none: no Bernoulli drawn twice", len(keys(d)) == 3, str(keys(d)))
            r1, err = train(d, seed=1)
            check("another --seed draws other masks: other losses", not err and r1["losses"] != r["losses"], str(err))
            continue
        same = ref and params(d) == params(ref[0]) and r["losses"] == ref[1]
        check(f"convnext, --checkpoint={pol}: losses and parameters bit-identical to none", same)
        ks = keys(d)
        if "offload" not in pol:
            check(f"{pol}: every recomputed Bernoulli draws with its forward's key ({len(ks)} draws)",
                  len(ks) > 3 and all(ks.count(k) in (1, 2) for k in ks) and len(set(ks)) == 3, str(ks))

    # eval: lr 0, PyTorch's model.eval() loss; --infer --disable-dropout: its logits
    model.eval()
    with torch.no_grad():
        logits = model(x)
        want = torch.nn.functional.cross_entropy(logits, labels).item()
    d = f"{WORK}/cn-eval"
    err = build(path, d, ["--optimizer=sgd", "--lr", "0"])
    r, err2 = (None, None) if err else train(d, ["--eval-data", f"x={WORK}/cx.npy", "--eval-data", f"labels={WORK}/cl.npy"],
                                           steps=1)
    check("eval (--eval-data) runs", not err and not err2, str(err or err2)[-2000:])
    if r:
        got = r["evals"][0]["loss"] if isinstance(r["evals"][0], dict) else r["evals"][0]
        check(f"eval loss {got:.7f} = PyTorch's model.eval() loss {want:.7f} (1e-5 relative)",
              abs(got - want) <= 1e-5 * abs(want), json.dumps(r["evals"]))
        check(f"training loss {r['losses'][0]:.7f} (masks drawn) differs from the eval loss", r["losses"][0] != got)
    d = f"{WORK}/cn-infer"
    err = build(path, d, ["--infer", "--disable-dropout"])
    err = err or infer(d, {"x": f"{WORK}/cx.npy"}, f"{d}/out")
    check("--infer --disable-dropout runs", err is None, str(err)[-2000:])
    if not err:
        got = np.load(f"{d}/out/logits.npy")
        diff = float(np.abs(got - logits.numpy()).max())
        check(f"--infer --disable-dropout logits = PyTorch's eval logits (max |diff| {diff:.2e} <= 1e-5)", diff <= 1e-5)


# ---------------------------------------------------------------- 4: the dropped fraction

def part_fraction():
    from torchvision.ops import StochasticDepth
    rows, p = 4096, 0.3
    path = f"{WORK}/sd.onnx"
    x = torch.ones(rows, 8)
    ckptc_export.export(StochasticDepth(p, "row"), (x,), path, input_names=["x"], output_names=["y"])
    np.save(f"{WORK}/ones.npy", x.numpy())
    d = f"{WORK}/sd"
    err = build(path, d, ["--infer"])
    check("StochasticDepth(0.3, row) compiles", err is None, str(err)[-2000:])
    if err:
        return
    seen = []
    for seed in range(4):
        err = infer(d, {"x": f"{WORK}/ones.npy"}, f"{d}/out{seed}", seed)
        if err:
            check(f"--seed {seed} runs", False, err[-2000:])
            return
        y = np.load(f"{d}/out{seed}/y.npy")
        kept = np.float32(1) / np.float32(1 - p)
        rows_ok = all(np.all(r == 0) or np.all(r == kept) for r in y)
        f = float(np.mean(y[:, 0] == 0))
        se = math.sqrt(p * (1 - p) / rows)
        check(f"--seed {seed}: rows all 0 or all 1/0.7; dropped fraction {f:.4f} within 5 s.e. ({5 * se:.4f}) of {p}",
              rows_ok and abs(f - p) < 5 * se)
        seen.append(y[:, 0].tobytes())
    check("the 4 seeds draw 4 different masks", len(set(seen)) == 4)


# ---------------------------------------------------------------- 5: the CUDA path, emulated

def emu_build(d, prog):
    lib, rt, tests, cxx = EMU
    extra = os.environ.get("CK_EMU_FLAGS", "").split()  # a sanitizer build's instrumentation
    p = run([cxx, *extra, "-std=c++17", "-O1", "-shared", "-fPIC", "-DCK_EMULATE", "-I", tests, "-x", "c++", f"{d}/kernels.cu",
             "-o", f"{d}/kernels_emu.so"])
    if p.returncode == 0:  # CK_RT_LIBS: what libckrt needs beyond OpenBLAS (oneDNN)
        p = run(["cc", *extra, "-std=c11", "-O1", "-I", rt, f"{d}/{prog}.c", "-o", f"{d}/{prog}_emu", lib, "-lopenblas",
                 *os.environ.get("CK_RT_LIBS", "").split(), "-lm", "-ldl", *extra])
    return None if p.returncode == 0 else p.stderr[-2000:]


def part_emu():
    d = f"{WORK}/stats"
    err = emu_build(d, "model")
    check("the random-op model builds against the CUDA emulation", err is None, str(err))
    if err:
        return
    outs = {}
    for dev, exe in (("cpu", "model"), ("cuda", "model_emu")):
        p = run([f"{d}/{exe}", "--device", dev, "--input", f"x={WORK}/x.npy", "--input", f"p={WORK}/p.npy", "--dump-outputs",
                 f"{d}/emu-{dev}"])
        if p.returncode or not p.stdout.startswith(f"device: {dev}"):
            check(f"--device {dev} runs", False, (p.stdout + p.stderr)[-2000:])
            return
        outs[dev] = {k: np.load(f"{d}/emu-{dev}/{k}.npy") for k in ("u", "u2", "us", "z", "zs", "b", "b64", "ud")}
    same = [k for k in outs["cpu"] if np.array_equal(outs["cpu"][k], outs["cuda"][k])]
    check(f"emulated CUDA draws the CPU's bits ({len(same)} of {len(outs['cpu'])} outputs)", len(same) == len(outs["cpu"]),
          str(sorted(set(outs["cpu"]) - set(same))))
    d = f"{WORK}/cn-blocks"
    err = emu_build(d, "trainer")
    check("the ConvNeXt (blocks) builds against the CUDA emulation", err is None, str(err))
    if err:
        return
    losses = {}
    for dev, exe in (("cpu", "trainer"), ("cuda", "trainer_emu")):
        p = run([f"{d}/{exe}", "--device", dev, "--input", f"x={WORK}/cx.npy", "--input", f"labels={WORK}/cl.npy", "--steps", "3",
                 "--report", f"{d}/emu-{dev}.json"])
        if p.returncode:
            check(f"ConvNeXt --device {dev} trains", False, (p.stdout + p.stderr)[-2000:])
            return
        losses[dev] = json.load(open(f"{d}/emu-{dev}.json"))["losses"]
    err = max(abs(a - b) / abs(b) for a, b in zip(losses["cuda"], losses["cpu"]))
    check(f"ConvNeXt, blocks: emulated CUDA losses = CPU losses (max rel {err:.1e} <= 1e-5)", err <= 1e-5, str(losses))


part_stats()
part_convnext()
part_fraction()
if EMU:
    part_emu()
else:
    print("(no --emu: the emulated CUDA path is not run)")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
