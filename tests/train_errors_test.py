#!/usr/bin/python3
"""train_errors_test.py — training's bad inputs and the memory promises of the budget and offload.

    train_errors_test.py CKPTC SAMPLES_DIR TEST_DATA_DIR WORKDIR

Compile time (exit 2, one `ckptc: error:` line per problem naming what was expected): a model with
no float parameters, a loss that does not fit the output, an unknown --output, bad flag values, a
budget below what any plan reaches (with the smallest reachable peak in the message).
Run time (exit 2, `trainer: error:`): labels out of range (the offending value and position), a
NaN loss (the step and the first node producing a non-finite value; --allow-nonfinite goes on).
Memory: --checkpoint=budget:X never plans or measures above X; --offload never raises the planned
device peak. Ends with `N passed, N failed`.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

CKPTC, SAMPLES, DATA, WORK = sys.argv[1:5]
os.makedirs(WORK, exist_ok=True)
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + name)
    else:
        failed += 1
        print("FAIL " + name + ": " + detail)


def run(cmd, timeout=300):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def expect_compile_error(name, args, *needles):
    p = run([CKPTC] + args)
    lines = [l for l in p.stderr.splitlines() if l]
    ok = p.returncode == 2 and lines and all(l.startswith("ckptc: error: ") for l in lines)
    ok = ok and all(any(n in l for l in lines) for n in needles)
    check(name, ok, f"rc={p.returncode} stderr={p.stderr[:800]!r}")


MLP = os.path.join(SAMPLES, "mlp.onnx")
expect_compile_error("no trainable parameters", [os.path.join(DATA, "dim_param.onnx"), "--dim", "batch=2", "-o", f"{WORK}/x"],
                     "no trainable parameters")
expect_compile_error("--loss=output on a non-scalar output", [MLP, "--dim", "batch=8", "--loss=output", "-o", f"{WORK}/x"],
                     "--loss=output needs a float scalar output", "(8,10)")
expect_compile_error("unknown --output", [MLP, "--dim", "batch=8", "--output", "nope", "-o", f"{WORK}/x"],
                     "no output of that name", "'logits'")
expect_compile_error("bad --checkpoint", [MLP, "--dim", "batch=8", "--checkpoint=lots", "-o", f"{WORK}/x"], "--checkpoint 'lots'")
expect_compile_error("bad budget size", [MLP, "--dim", "batch=8", "--checkpoint=budget:12XB", "-o", f"{WORK}/x"], "budget:SIZE")
expect_compile_error("bad --optimizer", [MLP, "--dim", "batch=8", "--optimizer=lion", "-o", f"{WORK}/x"], "--optimizer 'lion'")
expect_compile_error("negative --lr", [MLP, "--dim", "batch=8", "--lr", "-1", "-o", f"{WORK}/x"], "--lr '-1'")
expect_compile_error("--offload without a policy", [MLP, "--dim", "batch=8", "--offload", "-o", f"{WORK}/x"], "--offload")
expect_compile_error("bad --freeze regex", [MLP, "--dim", "batch=8", "--freeze", "(", "-o", f"{WORK}/x"], "--freeze '('")
expect_compile_error("budget below the reachable minimum", [MLP, "--dim", "batch=8", "--checkpoint=budget:1000", "-o", f"{WORK}/x"],
                     "cannot be met", "smallest planned peak")

# ---------------------------------------------------------------- run time
d = f"{WORK}/mlp"
p = run([CKPTC, MLP, "--dim", "batch=8", "-o", d, "--optimizer=sgd"])
p2 = run(["make", "-s", "-C", d])
if p.returncode or p2.returncode:
    check("mlp trainer builds", False, p.stderr + p2.stderr)
else:
    labels = np.array([0, 1, 2, 12, 4, 5, 6, 7], dtype=np.int64)
    np.save(f"{WORK}/bad_labels.npy", labels)
    r = run([f"{d}/trainer", "--input", f"labels={WORK}/bad_labels.npy", "--report", f"{WORK}/r1.json"])
    check("labels out of range: exit 2 naming the label and position",
          r.returncode == 2 and "label 12 at position 3 is out of range [0, 10)" in r.stderr and not os.path.exists(f"{WORK}/r1.json"),
          f"rc={r.returncode} {r.stderr!r}")
    x = np.load(os.path.join(SAMPLES, "mlp.in.x.npy"))
    x[2, 5] = np.nan
    np.save(f"{WORK}/nan_x.npy", x)
    r = run([f"{d}/trainer", "--input", f"x={WORK}/nan_x.npy", "--steps", "3"])
    check("NaN loss: stops at step 1 naming the first node",
          r.returncode == 2 and "step 1: the loss is nan" in r.stderr and "/layers.0/fc1/Gemm" in r.stderr,
          f"rc={r.returncode} {r.stderr!r}")
    r = run([f"{d}/trainer", "--input", f"x={WORK}/nan_x.npy", "--steps", "2", "--allow-nonfinite"])
    check("--allow-nonfinite goes on", r.returncode == 0 and "step 2/2" in r.stdout, f"rc={r.returncode} {r.stderr!r}")


# ---------------------------------------------------------------- memory promises
def plan_peak(args):
    p = run([CKPTC] + args + ["--plan-only"])
    m = re.search(r"planned peak (\d+) bytes", p.stdout)
    return int(m.group(1)) if p.returncode == 0 and m else None


for name, dims in [("mlp", ["--dim", "batch=256"]), ("gpt", []), ("bert", []), ("resnet", []), ("gpt4", ["--dim", "batch=8"])]:
    model = os.path.join(SAMPLES, f"{name}.onnx")
    base = plan_peak([model] + dims + ["--checkpoint=blocks"])
    off = plan_peak([model] + dims + ["--checkpoint=blocks", "--offload"])
    check(f"{name}: --offload never raises the device peak ({off} <= {base})", base is not None and off is not None and off <= base,
          f"{off} vs {base}")
    none = plan_peak([model] + dims + ["--checkpoint=none"])
    if none is None:
        check(f"{name}: plans", False, "")
        continue
    budget = int(none * 0.8)
    bd = f"{WORK}/{name}-budget"
    p = run([CKPTC, model] + dims + [f"--checkpoint=budget:{budget}", "-o", bd])
    if p.returncode == 2 and "cannot be met" in p.stderr:
        check(f"{name}: budget:{budget} refused with the reachable minimum", "smallest planned peak" in p.stderr, p.stderr)
        continue
    p2 = run(["make", "-s", "-C", bd])
    r = run([f"{bd}/trainer", "--steps", "1", "--report", f"{bd}/r.json"]) if p.returncode == 0 and p2.returncode == 0 else None
    if not r or r.returncode:
        check(f"{name}: budget:{budget} builds and trains", False, (p.stderr + p2.stderr + (r.stderr if r else ""))[:1500])
        continue
    rep = json.load(open(f"{bd}/r.json"))
    check(f"{name}: budget:{budget} plans {rep['planned_peak_bytes']} and measures {rep['measured_peak_bytes']}, both <= budget",
          rep["planned_peak_bytes"] <= budget and rep["measured_peak_bytes"] <= budget, json.dumps(rep)[:500])

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
