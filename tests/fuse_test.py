#!/usr/bin/python3
"""fuse_test.py — elementwise fusion (passes/fuse.c) changes no bit and no byte for the worse.

    fuse_test.py CKPTC SAMPLES_DIR WORKDIR [--quick]

For a few bundled samples, the training program compiled twice, with fusion (the default) and
with --no-fuse, each run 2 AdamW steps (--seed 7, the sample's recorded inputs) at --threads 2:
the SHA-256 of every --dump-grads / --dump-params file and the losses' bits must be equal, the
planned peak with fusion must be <= without, and on the transformer samples fusion must have
happened (plan.json's "fused" list non-empty), so that the comparison compares something. gpt4 is
also compiled with --checkpoint=blocks (fusion on the recompute clones too) and must give the
bits of the unfused `none` program. --quick (the sanitized build): gpt4 and mlp only, no blocks.
Ends with `N passed, N failed`.
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

ckptc, samples, work = sys.argv[1:4]
quick = "--quick" in sys.argv[4:]
os.makedirs(work, exist_ok=True)
passed = failed = 0

# (sample, must fuse something)
SAMPLES = [("gpt4", True), ("bert", True), ("mlp", False), ("hardmlp", False), ("resnet", False)]
if quick:
    SAMPLES = [("gpt4", True), ("mlp", False)]


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what}: {detail}")


def run(cmd):
    e = {k: v for k, v in os.environ.items() if k not in ("CKRT_NUM_THREADS", "OMP_NUM_THREADS")}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=e)


def build_and_run(sample, tag, flags):
    """Compiles and runs one variant; returns (result dict, error)."""
    ref = json.load(open(os.path.join(samples, f"{sample}.json")))
    d = os.path.join(work, f"{sample}-{tag}")
    shutil.rmtree(d, ignore_errors=True)
    cmd = [ckptc, os.path.join(samples, f"{sample}.onnx"), "-o", d] + flags
    for k, v in ref.get("dims", {}).items():
        cmd += ["--dim", f"{k}={v}"]
    p = run(cmd)
    if p.returncode != 0:
        return None, "ckptc: " + p.stderr[:1500]
    p = run(["make", "-s", "-C", d])
    if p.returncode != 0:
        return None, "make: " + (p.stdout + p.stderr)[:1500]
    inp = []
    if "train_reference" in ref:
        files = dict(ref["reference_files"]["inputs"])
        files["labels"] = ref["train_reference"]["labels_file"]
        for k, f in files.items():
            inp += ["--input", f"{k}={os.path.join(samples, f)}"]
    out = os.path.join(d, "run")
    os.makedirs(out, exist_ok=True)
    p = run([os.path.join(d, "trainer")] + inp + ["--seed", "7", "--threads", "2", "--steps", "2", "--report", f"{out}/report.json",
                                                  "--dump-grads", f"{out}/grads", "--dump-params", f"{out}/params"])
    if p.returncode != 0:
        return None, f"trainer: exit {p.returncode}: {p.stderr[:800]}"
    rep = json.load(open(f"{out}/report.json"))
    plan = json.load(open(os.path.join(d, "plan.json")))
    got = {"losses": [struct.pack("<d", x).hex() for x in rep.get("losses", [])], "files": {}, "peak": plan["arena_bytes"],
           "fused": len(plan.get("fused", [])), "ops": sum(len(f["ops"]) for f in plan.get("fused", []))}
    for sub in ["grads", "params"]:
        for f in sorted(os.listdir(os.path.join(out, sub))):
            got["files"][f"{sub}/{f}"] = hashlib.sha256(open(os.path.join(out, sub, f), "rb").read()).hexdigest()
    return got, ""


def same_bits(what, a, b):
    diff = sorted(k for k in set(a["files"]) | set(b["files"]) if a["files"].get(k) != b["files"].get(k))
    problems = []
    if not a["files"]:
        problems.append("no files dumped")
    if diff:
        problems.append(f"{len(diff)} files differ: {diff[:5]}")
    if a["losses"] != b["losses"] or not a["losses"]:
        problems.append(f"losses {a['losses']} vs {b['losses']}")
    check(f"{what}: same bits ({len(a['files'])} files, {len(a['losses'])} losses)", not problems, "; ".join(problems))


for sample, must in SAMPLES:
    fused, err = build_and_run(sample, "fused", [])
    if fused is None:
        check(f"{sample} fused", False, err)
        continue
    plain, err = build_and_run(sample, "nofuse", ["--no-fuse"])
    if plain is None:
        check(f"{sample} --no-fuse", False, err)
        continue
    check(f"{sample}: --no-fuse fuses nothing", plain["fused"] == 0, f"{plain['fused']} chains")
    if must:
        check(f"{sample}: fusion happened ({fused['fused']} chains, {fused['ops']} ops)", fused["fused"] > 0)
    same_bits(f"{sample} fused vs --no-fuse", fused, plain)
    check(f"{sample}: planned peak fused {fused['peak']} <= unfused {plain['peak']}", fused["peak"] <= plain["peak"])
    if sample == "gpt4" and not quick:
        blocks, err = build_and_run(sample, "blocks-fused", ["--checkpoint=blocks"])
        if blocks is None:
            check("gpt4 blocks fused", False, err)
        else:
            same_bits("gpt4 --checkpoint=blocks fused vs none --no-fuse", blocks, plain)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
