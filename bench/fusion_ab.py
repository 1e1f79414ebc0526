#!/usr/bin/python3
"""fusion_ab.py — step time and planned peak with elementwise fusion vs --no-fuse, side by side.

    /usr/bin/python3 bench/fusion_ab.py [--models gpt4,mlp16] [--threads 1] [--rounds 5] [--steps 12]
                                        [--build build] [--out bench/results/fusion-ab.md]

Each model (bench/models/NAME.onnx, made by bench/export.py) is compiled twice with the settings of
bench/run.py's `none` variant (--optimizer=sgd --lr=0.01 --checkpoint=none), once with fusion (the
default) and once with --no-fuse, and the two trainers are run alternately (A, B, A, B, ...:
--rounds pairs, --steps steps each, --threads N) so that machine load hits both alike. Per
variant: the least user CPU time of a run (--steps steps plus start-up: less disturbed by other
processes than wall time), the fastest step over all its runs (first step of each run excluded: the least disturbed
one, the figure to read on a shared machine) and the median step, the median over rounds of the
per-round ratio of median steps, the planned and measured peak, and the fused chains (plan.json);
`uptime` before and after says how busy the machine was. Writes a Markdown table.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ap = argparse.ArgumentParser()
ap.add_argument("--models", default="gpt4,mlp16")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--out", default=os.path.join(HERE, "results", "fusion-ab.md"))
args = ap.parse_args()
WORK = os.path.join(HERE, "work", "fusion-ab")
MODELS = os.path.join(HERE, "models")
ENV = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads))


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[:600]}")
    return r.stdout


def build(name, tag, flags):
    d = os.path.join(WORK, name, tag)
    os.makedirs(os.path.dirname(d), exist_ok=True)
    sh([os.path.join(args.build, "ckptc"), os.path.join(MODELS, name + ".onnx"), "-o", d, "--optimizer=sgd", "--lr=0.01",
        "--checkpoint=none"] + flags)
    sh(["make", "-s", "-C", d])
    return d


def run(name, d):
    info = json.load(open(os.path.join(MODELS, name + ".json")))
    p = lambda s: os.path.join(MODELS, f"{name}.{s}")  # noqa: E731
    rep = os.path.join(d, "report.json")
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    sh([os.path.join(d, "trainer"), "--steps", str(args.steps), "--input", f"{info['input']}={p('in.%s.npy' % info['input'])}",
        "--input", f"labels={p('in.labels.npy')}", "--report", rep, "--threads", str(args.threads)])
    r = json.load(open(rep))
    r["user_seconds"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - u0
    steps = r["step_seconds"][1:] if isinstance(r["step_seconds"], list) else [r["step_seconds"]]
    return steps, r


load_before = sh(["uptime"]).strip()
rows = []
for name in args.models.split(","):
    dirs = {"fused": build(name, "fused", []), "no-fuse": build(name, "nofuse", ["--no-fuse"])}
    times = {k: [] for k in dirs}
    user = {k: [] for k in dirs}
    reps = {}
    for _ in range(args.rounds):
        for k, d in dirs.items():
            t, reps[k] = run(name, d)
            times[k].append(t)
            user[k].append(reps[k]["user_seconds"])
    plan = {k: json.load(open(os.path.join(d, "plan.json"))) for k, d in dirs.items()}
    same = reps["fused"]["losses"] == reps["no-fuse"]["losses"]
    med = {k: statistics.median([x for run in v for x in run]) for k, v in times.items()}
    best = {k: min(x for run in v for x in run) for k, v in times.items()}
    ratio = statistics.median(statistics.median(a) / statistics.median(b) for a, b in zip(times["fused"], times["no-fuse"]))
    fz = plan["fused"].get("fused", [])
    rows.append((name, med, best, ratio, times, reps, plan, same, len(fz), sum(len(f["ops"]) for f in fz),
                 sum(b["bytes"] for f in fz for b in f["fused_away"]), {k: min(v) for k, v in user.items()}))
load_after = sh(["uptime"]).strip()

with open(args.out, "w") as f:
    f.write("# Elementwise fusion: ckptc `none` step with fusion vs `--no-fuse`\n\n")
    f.write(f"`bench/fusion_ab.py --models {args.models} --threads {args.threads} --rounds {args.rounds} --steps {args.steps}`"
            f" ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); runs alternate fused / unfused; step times exclude "
            "each run's first step; fastest = the least disturbed step of all runs.\n\n")
    f.write(f"Load before: `{load_before}`  \nLoad after: `{load_after}`\n\n")
    f.write("| model | chains (ops) | intermediates fused away | fastest step fused / --no-fuse (ms) | ratio |"
            " median step fused / --no-fuse (ms) | median per-round ratio | planned peak fused | planned peak --no-fuse |"
            " measured == planned | same losses | least user CPU per run fused / --no-fuse (s) | ratio |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for name, med, best, ratio, times, reps, plan, same, nch, nops, away, usr in rows:
        meas = all(reps[k]["measured_peak_bytes"] == reps[k]["planned_peak_bytes"] for k in reps)
        f.write(f"| {name} | {nch} ({nops}) | {away / 2**20:.1f} MiB | {best['fused'] * 1e3:.1f} / {best['no-fuse'] * 1e3:.1f} | "
                f"{best['fused'] / best['no-fuse']:.3f} | {med['fused'] * 1e3:.1f} / {med['no-fuse'] * 1e3:.1f} | {ratio:.3f} | "
                f"{plan['fused']['arena_bytes']} | {plan['no-fuse']['arena_bytes']} | "
                f"{'yes' if meas else 'NO'} | {'yes' if same else 'NO'} | {usr['fused']:.2f} / {usr['no-fuse']:.2f} | "
                f"{usr['fused'] / usr['no-fuse']:.3f} |\n")
    f.write("\nPer-round median step (ms):\n\n")
    for name, med, best, ratio, times, *_ in rows:
        for k, v in times.items():
            f.write(f"- {name} {k}: {', '.join('%.1f' % (statistics.median(x) * 1e3) for x in v)}\n")
print(open(args.out).read())
