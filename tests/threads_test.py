#!/usr/bin/python3
"""threads_test.py — every thread count gives the same bits: --threads 1, 2 and 3 on every sample.

    threads_test.py CKPTC SAMPLES_DIR WORKDIR [--filter REGEX]

For every bundled sample: the training program (--checkpoint=none, 3 AdamW steps, dropout on,
--seed 7; the sample's recorded inputs, or seeded ones for a sample without a training
reference) and the inference program (--infer, --dump-outputs), each run with --threads 1, 2
and 3: the SHA-256 of every --dump-grads / --dump-params / --dump-outputs file and the losses'
bits must be the same for the three, and the report must say the count it ran with. Then the
order of precedence of the thread count (--threads, CKRT_NUM_THREADS, OMP_NUM_THREADS, the
affinity mask) and the one-line usage error for a bad variable. Ends with `N passed, N failed`.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("ckptc")
ap.add_argument("samples")
ap.add_argument("work")
ap.add_argument("--filter", default="")
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)

SAMPLES = ["mlp", "gpt", "bert", "resnet", "gpt_deep", "gpt4", "hardmlp", "padnet"]
passed = failed = 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what}: {detail}")


def run(cmd, env=None):
    e = dict(os.environ)
    for k in ["CKRT_NUM_THREADS", "OMP_NUM_THREADS"]:
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=e)


def build(sample, infer):
    ref = json.load(open(os.path.join(args.samples, f"{sample}.json")))
    d = os.path.join(args.work, f"{sample}-{'infer' if infer else 'train'}")
    cmd = [args.ckptc, os.path.join(args.samples, f"{sample}.onnx"), "-o", d]
    for k, v in ref.get("dims", {}).items():
        cmd += ["--dim", f"{k}={v}"]
    if infer:
        cmd.append("--infer")
    p = run(cmd)
    if p.returncode != 0:
        return None, None, "ckptc: " + p.stderr[:1500]
    p = run(["make", "-s", "-C", d])
    if p.returncode != 0:
        return None, None, "make: " + (p.stdout + p.stderr)[:1500]
    files = dict(ref["reference_files"]["inputs"]) if "train_reference" in ref else {}
    if files:
        files["labels"] = ref["train_reference"]["labels_file"]
    inp = []
    for k, f in files.items():
        if infer and k == "labels":
            continue
        inp += ["--input", f"{k}={os.path.join(args.samples, f)}"]
    return d, inp, ""


def one_run(d, inp, infer, n):
    """Runs the program with --threads n; returns ({file: sha256}, losses' bits, threads in the report) or an error."""
    out = os.path.join(d, f"t{n}")
    shutil.rmtree(out, ignore_errors=True)
    prog = os.path.join(d, "model" if infer else "trainer")
    cmd = [prog] + inp + ["--seed", "7", "--threads", str(n), "--report", f"{out}/report.json"]
    dirs = ["outputs"] if infer else ["grads", "params"]
    cmd += ["--dump-outputs", f"{out}/outputs"] if infer else ["--steps", "3", "--dump-grads", f"{out}/grads",
                                                               "--dump-params", f"{out}/params"]
    os.makedirs(out, exist_ok=True)
    p = run(cmd)
    if p.returncode != 0:
        return None, f"--threads {n}: exit {p.returncode}: {p.stderr[:800]}"
    rep = json.load(open(f"{out}/report.json"))
    got = {"threads": rep.get("threads"), "losses": [struct.pack("<d", x).hex() for x in rep.get("losses", [])], "files": {}}
    for sub in dirs:
        for f in sorted(os.listdir(os.path.join(out, sub))):
            got["files"][f"{sub}/{f}"] = hashlib.sha256(open(os.path.join(out, sub, f), "rb").read()).hexdigest()
    return got, ""


def sample_check(sample, infer):
    what = f"{sample} {'inference' if infer else 'training'}"
    d, inp, err = build(sample, infer)
    if d is None:
        check(what, False, err)
        return
    runs = {}
    for n in [1, 2, 3]:
        got, err = one_run(d, inp, infer, n)
        if got is None:
            check(what, False, err)
            return
        runs[n] = got
    problems = []
    for n in [1, 2, 3]:
        if runs[n]["threads"] != n:
            problems.append(f"--threads {n}: the report says threads {runs[n]['threads']}")
    if not runs[1]["files"]:
        problems.append("no files dumped")
    for n in [2, 3]:
        diff = sorted(k for k in set(runs[1]["files"]) | set(runs[n]["files"]) if runs[1]["files"].get(k) != runs[n]["files"].get(k))
        if diff:
            problems.append(f"--threads {n} vs 1: {len(diff)} files differ: {diff[:5]}")
        if runs[n]["losses"] != runs[1]["losses"]:
            problems.append(f"--threads {n} vs 1: losses {runs[n]['losses']} vs {runs[1]['losses']}")
    check(f"{what}: --threads 1, 2, 3 give the same bits ({len(runs[1]['files'])} files, "
          f"{len(runs[1]['losses'])} losses)", not problems, "; ".join(problems))


def precedence():
    """The thread count's sources in order, read back from the report; a bad variable is a usage error."""
    d = os.path.join(args.work, "mlp-infer")
    prog = os.path.join(d, "model")
    rep = os.path.join(d, "prec.json")
    cases = [([], {"CKRT_NUM_THREADS": "2", "OMP_NUM_THREADS": "3"}, 2), ([], {"OMP_NUM_THREADS": "3,2"}, 3),
             (["--threads", "1"], {"CKRT_NUM_THREADS": "3"}, 1), ([], {"CKRT_NUM_THREADS": "3"}, 3)]
    for flags, env, want in cases:
        p = run([prog, "--report", rep] + flags, env)
        got = json.load(open(rep)).get("threads") if p.returncode == 0 else f"exit {p.returncode}: {p.stderr[:300]}"
        check(f"threads from {' '.join(flags) or 'the environment'} {env}: {want}", got == want, f"got {got}")
    for var, val in [("CKRT_NUM_THREADS", "many"), ("OMP_NUM_THREADS", "0")]:
        p = run([prog], {var: val})
        # libgomp (loaded with oneDNN) prints its own complaint about a bad OMP_NUM_THREADS when it
        # loads, before main: that line is the library's, not ours
        lines = [ln for ln in p.stderr.splitlines() if ln.strip() and not ln.startswith("libgomp: ")]
        check(f"{var}={val}: exit 2 with one line naming it", p.returncode == 2 and len(lines) == 1 and var in lines[0],
              f"exit {p.returncode}, stderr {p.stderr[:300]!r}")
    p = run([prog, "--threads", "0"])
    check("--threads 0: exit 2 naming the flag", p.returncode == 2 and "--threads" in p.stderr, p.stderr[:300])


for s in SAMPLES:
    if not re.search(args.filter, s):
        continue
    for infer in [False, True]:
        sample_check(s, infer)
if re.search(args.filter, "mlp"):
    precedence()
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
