#!/usr/bin/python3
"""train_errors_test.py — training's bad inputs and the memory promises of the budget and offload.

    train_errors_test.py CKPTC SAMPLES_DIR TEST_DATA_DIR WORKDIR

Compile time (exit 2, one `ckptc: error:` line per problem naming what was expected): a model with
no float parameters, a loss that does not fit the output, an unknown --output, bad flag values, a
budget below what any plan reaches (with the smallest reachable peak in the message).
Run time (exit 2, `trainer: error:`): labels out of range (the offending value and position), a
NaN loss (the step and the first node producing a non-finite value; --allow-nonfinite goes on).
Memory: --checkpoint=budget:X never plans or measures above X; --offload never raises the planned
device peak; the trainer's --mem-limit SIZE refuses (exit 2, need and limit named) a plan whose
arena + host pool is over SIZE, accepts one at or under it in every unit, and an arena malloc
cannot give (a 24 TiB plan) is exit 2 naming the need and what limited it. Ends with `N passed, N failed`.
"""
import json
import os
import re
import subprocess
import sys

# onnx_common re-executes under Debian's python3 when needed and restores the NumPy aliases that
# python3-onnx 1.12 needs: it must be imported before onnx
from onnx_common import np, onnx  # noqa: E402
from onnx import helper, numpy_helper, TensorProto  # noqa: E402

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
    # the samples declare no trainable initializers: errors found after autodiff (the budget) follow
    # the one warning about that
    lines = [l for l in p.stderr.splitlines() if l and not (l.startswith("ckptc: warning: ") and "'ckptc.trainable'" in l)]
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
    r = run([f"{d}/trainer", "--input", f"x={WORK}/nan_x.npy", "--steps", "2", "--allow-nonfinite", "--report", f"{WORK}/nan.json"])
    try:
        nan_losses = json.loads(open(f"{WORK}/nan.json").read())["losses"] if r.returncode == 0 else None
    except ValueError as e:
        nan_losses = str(e)
    check("... and its report is strict JSON: a non-finite loss is null", nan_losses == [None, None], f"{nan_losses}")

    # a NaN born inside a checkpointed, offloaded model is named at the node that made it, not at an
    # Offload (whose output lives in the host pool: checking its offset in the arena read whatever
    # lies there, here the head's weight, the first parameter in the layout, holding the NaN)
    B, F = 4, 16
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(np.full((F, 10), np.nan, np.float32), "head.weight")]
    nodes, h = [], "x"
    for i in range(3):
        inits += [numpy_helper.from_array(rng.standard_normal((F, F)).astype(np.float32) * 0.3, f"layers.{i}.weight"),
                  numpy_helper.from_array(np.zeros(F, np.float32), f"layers.{i}.bias")]
        nodes += [helper.make_node("Gemm", [h, f"layers.{i}.weight", f"layers.{i}.bias"], [f"g{i}"], name=f"/layers.{i}/Gemm"),
                  helper.make_node("Tanh", [f"g{i}"], [f"t{i}"], name=f"/layers.{i}/Tanh"),
                  helper.make_node("Add", [f"t{i}", h], [f"h{i}"], name=f"/layers.{i}/Add")]
        h = f"h{i}"
    nodes.append(helper.make_node("MatMul", [h, "head.weight"], ["logits"], name="/head/MatMul"))
    graph = helper.make_graph(nodes, "nan_in_head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, F])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, 10])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, f"{WORK}/nan_head.onnx")
    nd = f"{WORK}/nan_head"
    p = run([CKPTC, f"{WORK}/nan_head.onnx", "--checkpoint=blocks", "--offload", "--optimizer=sgd", "-o", nd])
    p2 = run(["make", "-s", "-C", nd]) if p.returncode == 0 else p
    offloads = open(f"{nd}/trainer.c").read().count("ckrt_offload(c, H + 0,") if p2.returncode == 0 else 0
    r = run([f"{nd}/trainer", "--steps", "1"]) if p2.returncode == 0 else p2
    check("a NaN in an offloaded, checkpointed model is named at its producer, not at an Offload",
          offloads == 1 and r.returncode == 2 and "first non-finite tensor: node '/head/MatMul'" in r.stderr
          and r.stderr.count("/head/MatMul") == 1, f"offloads at H+0: {offloads}; "
          f"rc={r.returncode} {r.stderr!r}")

    # --mem-limit SIZE: the planned arena (+ host pool) against SIZE before anything is allocated
    arena = json.load(open(f"{d}/plan.json"))["arena_bytes"]
    half = arena // 2048  # KiB
    if os.path.exists(f"{WORK}/r2.json"):
        os.remove(f"{WORK}/r2.json")
    r = run([f"{d}/trainer", "--mem-limit", f"{half}KiB", "--report", f"{WORK}/r2.json"])
    check(f"--mem-limit {half}KiB below the plan ({arena} bytes): exit 2 naming the need and the limit, no report",
          r.returncode == 2 and f"the plan needs {arena} bytes" in r.stderr and f"over --mem-limit {half * 1024} bytes (" in r.stderr
          and not os.path.exists(f"{WORK}/r2.json"), f"rc={r.returncode} {r.stderr!r}")
    for lim in [f"{arena}", f"{arena}B", "2MiB", "0.5GiB", "1.1MB", "1GB", "3KiB" if arena <= 3072 else "1TiB"]:
        r = run([f"{d}/trainer", "--mem-limit", lim])
        check(f"--mem-limit {lim} at or above the plan ({arena} bytes) runs", r.returncode == 0, f"rc={r.returncode} {r.stderr!r}")
    r = run([f"{d}/trainer", "--mem-limit", f"{arena - 1}"])
    check("--mem-limit one byte below the plan is refused", r.returncode == 2 and "over --mem-limit" in r.stderr, f"rc={r.returncode} {r.stderr!r}")
    for bad in ["12XB", "-5MiB", "0", "MiB", "1e400", "nan", ""]:
        r = run([f"{d}/trainer", "--mem-limit", bad])
        check(f"--mem-limit '{bad}': usage error naming the flag", r.returncode == 2 and f"--mem-limit '{bad}'" in r.stderr,
              f"rc={r.returncode} {r.stderr!r}")
    r = run([f"{d}/trainer", "--mem-limit"])
    check("--mem-limit without a value", r.returncode == 2 and "'--mem-limit' needs a value" in r.stderr, f"rc={r.returncode} {r.stderr!r}")

# --mem-limit counts the host pool of --offload too (batch 64: at batch 8 offloading the mlp's
# checkpoints would raise its device peak, so ckptc keeps them on the device and plans no pool)
d = f"{WORK}/mlp-offload"
p = run([CKPTC, MLP, "--dim", "batch=64", "--checkpoint=blocks", "--offload", "-o", d])
p2 = run(["make", "-s", "-C", d])
if p.returncode or p2.returncode:
    check("mlp offload trainer builds", False, p.stderr + p2.stderr)
else:
    r = run([f"{d}/trainer", "--report", f"{d}/r.json"])
    rep = json.load(open(f"{d}/r.json")) if r.returncode == 0 else {}
    arena, host = rep.get("planned_peak_bytes", 0), rep.get("host_offload_peak_bytes", 0)
    r = run([f"{d}/trainer", "--mem-limit", str(arena)])
    check(f"--mem-limit {arena}: the arena fits, not with the host pool ({host} bytes)",
          host > 0 and r.returncode == 2 and f"the plan needs {arena + host} bytes" in r.stderr
          and f"arena {arena} + host pool {host} bytes" in r.stderr, f"rc={r.returncode} {r.stderr!r}")
    r = run([f"{d}/trainer", "--mem-limit", str(arena + host)])
    check("--mem-limit arena + host pool runs", r.returncode == 0, f"rc={r.returncode} {r.stderr!r}")

# an arena the system cannot give (24 TiB planned; no --mem-limit): exit 2 naming the need and
# what limited it. Sanitizer builds: ASan must return NULL, as malloc does, not abort.
g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"], name="mul")], "huge",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1024])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1024])],
                      [numpy_helper.from_array(np.ones(1024, dtype=np.float32), "w")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="train_errors_test"), f"{WORK}/huge.onnx")
d = f"{WORK}/huge"
p = run([CKPTC, f"{WORK}/huge.onnx", "--dim", f"N={1 << 30}", "--loss=mse", "-o", d])
p2 = run(["make", "-s", "-C", d])
if p.returncode or p2.returncode:
    check("a 24 TiB plan compiles", False, p.stderr + p2.stderr)
else:
    arena = json.load(open(f"{d}/plan.json"))["arena_bytes"]
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":allocator_may_return_null=1").lstrip(":")
    if os.path.exists(f"{WORK}/r3.json"):
        os.remove(f"{WORK}/r3.json")
    r = subprocess.run([f"{d}/trainer", "--report", f"{WORK}/r3.json"], capture_output=True, text=True, timeout=300, env=env)
    check(f"an arena malloc cannot give ({arena} bytes): exit 2 naming the need and the limit",
          arena > 1 << 44 and r.returncode == 2 and f"cannot allocate the arena in cpu memory: the plan needs {arena} bytes" in r.stderr
          and ("available" in r.stderr or "ulimit -v" in r.stderr) and not os.path.exists(f"{WORK}/r3.json"),
          f"rc={r.returncode} {r.stderr!r}")
    r = run([f"{d}/trainer", "--mem-limit", "16GiB"])
    check("the 24 TiB plan against --mem-limit 16GiB", r.returncode == 2 and "over --mem-limit 17179869184 bytes (16.0 GiB)" in r.stderr,
          f"rc={r.returncode} {r.stderr!r}")


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
