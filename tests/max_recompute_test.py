#!/usr/bin/python3
"""max_recompute_test.py — --max-recompute X: the lowest planned peak that recomputes at most X of
the forward's FLOPs (passes/search.c: fit_cap fits each plan the policy could take to the cap).

    max_recompute_test.py CKPTC SAMPLES_DIR WORKDIR

- On the resnet, gpt4, mlp, lstm and bert samples and a 24-layer residual MLP exported here (the bench's
  mlpL shape, small), under blocks, sqrt, every:2 and blocks,selective, for caps from 90% down to
  5%: the plan's recompute FLOPs (the `recompute:` line) are within the cap and no note says the cap
  was missed; a cap at or above the uncapped plan's recompute changes nothing (same peak, same
  FLOPs).
- The residual MLP at 75%: blocks' grouped runs, over the cap as they stand, come within it with
  segments kept, at a peak below one segment per layer (--block-regex); the note says so.
- gpt and bert at 10%: blocks,selective plans no higher than selective alone.
- Two SGD steps of the resnet and gpt4 samples under capped blocks end with the bits of none
  (--dump-params).
- Bad values (0, 30 without %, 150%) and combinations (budget:SIZE, --infer, pareto) exit 2 with
  one `ckptc: error:` line.

Ends with `N passed, N failed`.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

CKPTC, SAMPLES, WORK = sys.argv[1:4]
os.makedirs(WORK, exist_ok=True)
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail[-1500:]), flush=True)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def dims(name):
    path = os.path.join(SAMPLES, name + ".json")
    if not os.path.exists(path):
        return []
    return [a for k, v in json.load(open(path)).get("dims", {}).items() for a in ("--dim", f"{k}={v}")]


def plan(path, args):
    """(peak, recompute FLOPs, forward FLOPs, stdout) of a --plan-only run."""
    p = run([CKPTC, path, "--optimizer=sgd", "--plan-only", *args])
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {path} {args}: {p.stdout}{p.stderr}")
    peak = int(re.search(r"^planned peak (\d+) bytes", p.stdout, re.M).group(1))
    m = re.search(r"recompute: (\d+) FLOPs per step \([0-9.]+% of the forward's (\d+)[;)]", p.stdout)
    return peak, int(m.group(1)) if m else 0, int(m.group(2)) if m else 0, p.stdout


def export_resmlp(path):
    import torch
    from torch import nn

    class ResMLP(nn.Module):  # the bench's mlpL: x = x + fc2(relu(fc1(x))), 24 layers
        def __init__(self, d=64, n=24):
            super().__init__()
            self.layers = nn.ModuleList([nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d)) for _ in range(n)])
            self.head = nn.Linear(d, 10)

        def forward(self, x):
            for layer in self.layers:
                x = x + layer(x)
            return self.head(x)

    torch.manual_seed(0)
    torch.onnx.export(ResMLP(), (torch.randn(32, 64),), path, input_names=["x"], output_names=["logits"],
                      opset_version=17, do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)


def train(path, args, d, inputs):
    p = run([CKPTC, path, "--optimizer=sgd", "--lr=0.01", "-o", d, *args])
    if p.returncode == 0:
        p = run(["make", "-s", "-C", d])
    if p.returncode == 0:
        p = run([f"{d}/trainer", "--steps", "2", "--dump-params", f"{d}/params", *inputs])
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {path} {args}: {p.stdout[-800:]}{p.stderr}")
    return {f: np.load(os.path.join(d, "params", f)) for f in sorted(os.listdir(f"{d}/params"))}


def main():
    models = [(os.path.join(SAMPLES, n + ".onnx"), dims(n)) for n in ("resnet", "gpt4", "mlp", "lstm", "bert")]
    resmlp = os.path.join(WORK, "resmlp24.onnx")
    try:
        export_resmlp(resmlp)
        models.append((resmlp, []))
    except ImportError as e:
        print(f"(no torch: the residual MLP is left out: {e})")
        resmlp = None

    for path, dm in models:
        name = os.path.basename(path)
        for pol in ("blocks", "sqrt", "every:2", "blocks,selective"):
            peak0, fl0, fwd, _ = plan(path, [f"--checkpoint={pol}", *dm])
            for cap in (0.9, 0.6, 0.3, 0.05):
                peak, fl, fwd2, out = plan(path, [f"--checkpoint={pol}", f"--max-recompute={cap:g}", *dm])
                within = fl <= cap * (fwd2 or fwd)
                check(f"{name} {pol} --max-recompute={cap:g}: recompute {fl} <= {cap:g} x {fwd2 or fwd} "
                      f"(uncapped {fl0}, peak {peak0} -> {peak})", within and "not met" not in out, out)
                if fl0 <= cap * fwd:
                    check(f"{name} {pol} --max-recompute={cap:g}: the uncapped plan is within the cap, so it is the plan",
                          (peak, fl) == (peak0, fl0), out)

    if resmlp:
        peak0, fl0, fwd, out0 = plan(resmlp, ["--checkpoint=blocks"])
        peak, fl, _, out = plan(resmlp, ["--checkpoint=blocks", "--max-recompute=75%"])
        unit, flu, _, _ = plan(resmlp, ["--checkpoint=blocks", r"--block-regex=/layers\.[0-9]+/"])
        check(f"resmlp24: uncapped blocks groups runs ({100 * fl0 / fwd:.1f}% of the forward) over 75%",
              fl0 > 0.75 * fwd and "grouped into about sqrt(n) runs" in out0, out0)
        check(f"resmlp24 --max-recompute=75%: grouped runs with segments kept ({100 * fl / fwd:.1f}%), peak {peak} between "
              f"the uncapped {peak0} and one segment per layer {unit} ({100 * flu / fwd:.1f}%)",
              fl <= 0.75 * fwd and peak0 <= peak < unit and "within the cap: grouped runs" in out, out)

    # POLICY,selective fitted to a cap never plans above selective alone under it: keeping every
    # segment is one of the plans it weighs (the segments' recompute is what goes over first)
    for n in ("gpt", "bert"):
        path = os.path.join(SAMPLES, n + ".onnx")
        both = plan(path, ["--checkpoint=blocks,selective", "--max-recompute=0.1", *dims(n)])
        alone = plan(path, ["--checkpoint=selective", "--max-recompute=0.1", *dims(n)])
        check(f"{n} --max-recompute=0.1: blocks,selective peak {both[0]} <= selective's {alone[0]}, both within",
              both[0] <= alone[0] and both[1] <= 0.1 * both[2] and alone[1] <= 0.1 * (alone[2] or both[2]), both[3])

    for n, args in (("resnet", ["--checkpoint=blocks", "--max-recompute=0.5"]),
                    ("gpt4", ["--checkpoint=blocks", "--max-recompute=30%"])):
        path = os.path.join(SAMPLES, n + ".onnx")
        inputs = [a for f in sorted(os.listdir(SAMPLES)) if f.startswith(n + ".in.")
                  for a in ("--input", f"{f[len(n) + 4:-4]}={os.path.join(SAMPLES, f)}")]
        a = train(path, dims(n), f"{WORK}/{n}-none", inputs)
        b = train(path, [*args, *dims(n)], f"{WORK}/{n}-capped", inputs)
        check(f"{n}: two SGD steps under blocks {args[1]} end with the bits of none",
              a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a))

    mlp = os.path.join(SAMPLES, "mlp.onnx")
    for args, needle in ((["--checkpoint=blocks", "--max-recompute=0"], "expected a fraction"),
                         (["--checkpoint=blocks", "--max-recompute=abc"], "expected a fraction"),
                         (["--checkpoint=blocks", "--max-recompute=-0.5"], "expected a fraction"),
                         (["--checkpoint=blocks", "--max-recompute=%"], "expected a fraction"),
                         (["--checkpoint=blocks", "--max-recompute=30"], "in (0, 1]"),
                         (["--checkpoint=blocks", "--max-recompute=150%"], "in (0, 1]"),
                         (["--checkpoint=budget:1MiB", "--max-recompute=0.5"], "budget:SIZE"),
                         (["--infer", "--max-recompute=0.5"], "training programs")):
        p = run([CKPTC, mlp, "--plan-only", *args, *dims("mlp")])
        lines = [l for l in p.stderr.splitlines() if l]
        check(f"{' '.join(args)}: exit 2, one error line with '{needle}'",
              p.returncode == 2 and len(lines) == 1 and lines[0].startswith("ckptc: error: ") and needle in lines[0],
              f"rc {p.returncode} {p.stderr}")

    p = run([CKPTC, "pareto", mlp, "--checkpoint=blocks", "--max-recompute=0.5", *dims("mlp")])
    check("pareto --max-recompute: exit 2, the cap picks one plan where pareto shows them all",
          p.returncode == 2 and "ckptc pareto shows the whole trade-off" in p.stderr, p.stderr)

    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
