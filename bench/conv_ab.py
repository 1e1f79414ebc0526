#!/usr/bin/python3
"""conv_ab.py — one model's ckptc step, side by side, from two ckptc builds (issue 19: the CPU
convolutions through oneDNN vs im2col + OpenBLAS). The machine is shared: the builds' trainers
alternate, round after round, and the figure is each side's median step over all rounds; the
ratio is what to read, not the absolute times.

    bench/conv_ab.py BUILD_A BUILD_B [--model resnet18] [--rounds 5] [--steps 6]
                     [--policy none] [--out FILE.md]

(bench/export.py MODEL first; each build's ckptc and libckrt compile the model into
bench/work/conv_ab/<build name>.) Also checks the two runs' planned == measured peak.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("build_a")
ap.add_argument("build_b")
ap.add_argument("--model", default="resnet18")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--steps", type=int, default=6)
ap.add_argument("--policy", default="none")
ap.add_argument("--out")
args = ap.parse_args()

models = os.path.join(HERE, "models")
info = json.load(open(os.path.join(models, args.model + ".json")))
sides = []
for b in (args.build_a, args.build_b):
    name = os.path.basename(os.path.normpath(b))
    d = os.path.join(HERE, "work", "conv_ab", name)
    os.makedirs(os.path.dirname(d), exist_ok=True)
    subprocess.run([os.path.join(b, "ckptc"), os.path.join(models, args.model + ".onnx"), "-o", d, "--optimizer=sgd",
                    "--lr=0.01", "--checkpoint=" + args.policy], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["make", "-s", "-C", d], check=True)
    sides.append(dict(name=name, dir=d, steps=[], peaks=set()))

for r in range(args.rounds):
    for s in sides:
        rep = os.path.join(s["dir"], "report.json")
        subprocess.run([os.path.join(s["dir"], "trainer"), "--steps", str(args.steps),
                        "--input", "%s=%s" % (info["input"], os.path.join(models, "%s.in.%s.npy" % (args.model, info["input"]))),
                        "--input", "labels=" + os.path.join(models, args.model + ".in.labels.npy"), "--report", rep],
                       check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"))
        rr = json.load(open(rep))
        s["steps"] += rr["step_seconds"][1:]  # the first step faults the arena in
        s["peaks"].add((rr["planned_peak_bytes"], rr["measured_peak_bytes"]))
        s["loss"] = rr["losses"][-1]

lines = ["| build | median step (ms) | min step (ms) | steps | planned peak | measured peak | last loss |",
         "|---|---|---|---|---|---|---|"]
for s in sides:
    (pl, me), = s["peaks"] if len(s["peaks"]) == 1 else (("varies", "varies"),)
    lines.append("| %s | %.1f | %.1f | %d | %s | %s | %.6f |" % (s["name"], 1e3 * statistics.median(s["steps"]),
                                                               1e3 * min(s["steps"]), len(s["steps"]), pl, me, s["loss"]))
ratio = statistics.median(sides[1]["steps"]) / statistics.median(sides[0]["steps"])
lines.append("")
lines.append("model %s, --checkpoint=%s, %d rounds x %d steps, one thread: %s's median step is %.2fx %s's." %
             (args.model, args.policy, args.rounds, args.steps - 1, sides[1]["name"], ratio, sides[0]["name"]))
print("\n".join(lines))
if args.out:
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
bad = [s["name"] for s in sides if any(p != m for p, m in s["peaks"])]
sys.exit(1 if bad else 0)
