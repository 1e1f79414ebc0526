#!/usr/bin/python3
"""train_test.py — the generated trainers against PyTorch, and checkpointing against no checkpointing.

    train_test.py CKPTC SAMPLES_DIR WORKDIR [--filter REGEX]

1. PyTorch parity (samples/export.py recorded, for a fixed input and fixed labels, PyTorch's
   cross-entropy loss and every parameter's gradient with dropout off; for mlp/gpt the parameters
   after one SGD step with lr 0.1; for resnet BatchNorm's running stats after the step):
   compile with --disable-dropout --optimizer=sgd --lr 0.1, run one step, and compare
   - the loss: relative error <= 1e-5,
   - every gradient: max |ours - torch| <= 1e-4 * max |torch| (per tensor),
   - the updated parameters: max |ours - torch| <= 1e-6 * max(1, max |torch|),
   - BatchNorm running mean/var: max |ours - torch| <= 1e-5 * max(1, max |torch|),
   - where the sample records them (lstm: "sgd_losses"), the losses of 3 SGD steps on the same
     batch: relative error <= 1e-5 each.
2. Checkpointing changes nothing but memory: for every sample, every policy (blocks, sqrt,
   every:2, blocks --offload) with dropout ON and AdamW, three steps give losses, gradients,
   parameters and buffers (BatchNorm running stats) bit-identical to --checkpoint=none, and each
   run's measured peak equals its planned peak. The same for the updates' order: none and
   blocks --offload with --update-at-end (every update after the whole backward) are
   bit-identical too, and the default (early updates) never plans a higher peak than them.
3. Learning: 100 AdamW steps on a fixed batch at least halve the loss (mlp, gpt).

Prints the per-sample max relative gradient error; ends with `N passed, N failed`.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("ckptc")
ap.add_argument("samples")
ap.add_argument("work")
ap.add_argument("--filter", default="")
ap.add_argument("--jobs", type=int, default=2)
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)
results = []


def check(name, ok, detail=""):
    results.append((name, ok, detail))
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)


def sanitize(name):
    s = "".join(ch if ch.isalnum() or ch in "-_" or (ch == "." and i > 0) else "_" for i, ch in enumerate(name))
    return s or "_"


def build(model, outdir, flags, dims):
    cmd = [args.ckptc, model, "-o", outdir] + flags
    for k, v in dims.items():
        cmd += ["--dim", f"{k}={v}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return p.stderr
    p = subprocess.run(["make", "-s", "-C", outdir], capture_output=True, text=True)
    return None if p.returncode == 0 else p.stdout + p.stderr


def run(outdir, extra):
    p = subprocess.run([os.path.join(outdir, "trainer")] + extra, capture_output=True, text=True, timeout=600)
    return p


def inputs_for(name, ref):
    files = dict(ref["reference_files"]["inputs"])
    files["labels"] = ref["train_reference"]["labels_file"]
    out = []
    for k, f in files.items():
        out += ["--input", f"{k}={os.path.join(args.samples, f)}"]
    return out


def rel_err(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))) / max(float(np.max(np.abs(b))), 1e-30))


SAMPLES = [s for s in ["mlp", "gpt", "bert", "resnet", "gpt4", "hardmlp", "padnet", "lstm"] if re.search(args.filter, s)]


def parity(name):
    ref = json.load(open(os.path.join(args.samples, f"{name}.json")))
    tr = ref["train_reference"]
    d = os.path.join(args.work, f"{name}-parity")
    err = build(os.path.join(args.samples, f"{name}.onnx"), d, ["--disable-dropout", "--optimizer=sgd", "--lr", "0.1"],
                ref.get("dims", {}))
    if err:
        check(f"{name}: builds", False, err[:2000])
        return
    p = run(d, inputs_for(name, ref) + ["--steps", "1", "--dump-grads", f"{d}/grads", "--dump-params", f"{d}/params",
                                         "--report", f"{d}/report.json"])
    if p.returncode != 0:
        check(f"{name}: trains", False, p.stderr[:2000])
        return
    rep = json.load(open(f"{d}/report.json"))
    loss = rep["losses"][0]
    check(f"{name}: loss {loss:.7f} vs torch {tr['loss']:.7f}", abs(loss - tr["loss"]) <= 1e-5 * abs(tr["loss"]))
    check(f"{name}: measured peak == planned peak", rep["measured_peak_bytes"] == rep["planned_peak_bytes"],
          f"{rep['measured_peak_bytes']} vs {rep['planned_peak_bytes']}")
    gdir = os.path.join(args.samples, tr["grads_dir"])
    worst, worst_name, n = 0.0, "", 0
    for f in sorted(os.listdir(gdir)):
        want = np.load(os.path.join(gdir, f))
        pname = f[:-4]
        path = os.path.join(d, "grads", sanitize(pname) + ".npy")
        if not os.path.exists(path):
            check(f"{name}: gradient of {pname} dumped", False, path)
            continue
        got = np.load(path)
        if got.shape != want.shape:
            check(f"{name}: gradient of {pname} shape", False, f"{got.shape} vs {want.shape}")
            continue
        e = rel_err(got, want)
        n += 1
        if e > worst:
            worst, worst_name = e, pname
        if e > 1e-4:
            check(f"{name}: gradient of {pname}", False, f"max relative error {e:.3g}")
    check(f"{name}: {n} gradients within 1e-4 (max relative error {worst:.2e} in {worst_name})", worst <= 1e-4 and n > 0)
    print(f"  {name}: max relative gradient error {worst:.3e} ({worst_name})")
    if "sgd_step_dir" in tr or os.path.isdir(os.path.join(args.samples, f"{name}.sgd_step")):
        sdir = os.path.join(args.samples, tr.get("sgd_step_dir", f"{name}.sgd_step"))
        bad = []
        for f in sorted(os.listdir(sdir)):
            want = np.load(os.path.join(sdir, f))
            got = np.load(os.path.join(d, "params", sanitize(f[:-4]) + ".npy"))
            e = float(np.max(np.abs(got.astype(np.float64) - want))) / max(1.0, float(np.max(np.abs(want))))
            if e > 1e-6:
                bad.append(f"{f}: {e:.3g}")
        check(f"{name}: parameters after one SGD step match torch.optim.SGD", not bad, "; ".join(bad[:5]))
    if "sgd_losses" in tr:
        sgd_losses(name, ref, tr["sgd_losses"])
    adir = os.path.join(args.samples, f"{name}.after_step")
    if os.path.isdir(adir):
        bad = []
        for f in sorted(os.listdir(adir)):
            want = np.load(os.path.join(adir, f))
            path = os.path.join(d, "params", sanitize(f[:-4]) + ".npy")
            if not os.path.exists(path):
                bad.append(f"{f}: not dumped")
                continue
            got = np.load(path)
            e = float(np.max(np.abs(got.astype(np.float64) - want))) / max(1.0, float(np.max(np.abs(want))))
            if e > 1e-5:
                bad.append(f"{f}: {e:.3g}")
        check(f"{name}: BatchNorm running stats after one step match PyTorch", not bad, "; ".join(bad[:5]))


def sgd_losses(name, ref, want):
    """The losses of len(want) SGD steps (lr 0.1, dropout off) on the sample's batch against PyTorch's."""
    d = os.path.join(args.work, f"{name}-sgd{len(want)}")
    err = build(os.path.join(args.samples, f"{name}.onnx"), d, ["--disable-dropout", "--optimizer=sgd", "--lr", "0.1"],
                ref.get("dims", {}))
    p = None if err else run(d, inputs_for(name, ref) + ["--steps", str(len(want)), "--report", f"{d}/report.json"])
    if err or p.returncode != 0:
        check(f"{name}: {len(want)} SGD steps run", False, (err or p.stderr)[:2000])
        return
    got = json.load(open(f"{d}/report.json"))["losses"]
    errs = [abs(a - b) / abs(b) for a, b in zip(got, want)]
    check(f"{name}: {len(want)} SGD steps' losses {got} vs torch {want} (max relative error {max(errs):.2e})",
          len(got) == len(want) and max(errs) <= 1e-5)


def files_of(d):
    out = {}
    for sub in ["grads", "params"]:
        for f in sorted(os.listdir(os.path.join(d, sub))):
            out[f"{sub}/{f}"] = open(os.path.join(d, sub, f), "rb").read()
    return out


def policies(name):
    ref = json.load(open(os.path.join(args.samples, f"{name}.json")))
    base, peaks = None, {}
    for pol in ["none", "blocks", "sqrt", "every:2", "blocks --offload", "none --update-at-end", "blocks --offload --update-at-end"]:
        d = os.path.join(args.work, f"{name}-{pol.replace(':', '').replace(' --', '-')}")
        err = build(os.path.join(args.samples, f"{name}.onnx"), d, [f"--checkpoint={pol.split()[0]}"] + pol.split()[1:],
                    ref.get("dims", {}))
        if err:
            check(f"{name} --checkpoint={pol}: builds", False, err[:2000])
            return
        p = run(d, inputs_for(name, ref) + ["--steps", "3", "--dump-grads", f"{d}/grads", "--dump-params", f"{d}/params",
                                             "--report", f"{d}/report.json", "--seed", "7"])
        if p.returncode != 0:
            check(f"{name} --checkpoint={pol}: trains", False, p.stderr[:2000])
            return
        rep = json.load(open(f"{d}/report.json"))
        check(f"{name} --checkpoint={pol}: measured peak == planned peak ({rep['planned_peak_bytes']})",
              rep["measured_peak_bytes"] == rep["planned_peak_bytes"], f"{rep['measured_peak_bytes']} vs {rep['planned_peak_bytes']}")
        got = (rep["losses"], files_of(d), rep["planned_peak_bytes"])
        peaks[pol] = got[2]
        if pol.endswith(" --update-at-end"):
            early = pol[: -len(" --update-at-end")]
            check(f"{name} --checkpoint={early}: early updates plan {peaks[early]} bytes, at the end {got[2]}", peaks[early] <= got[2])
        if base is None:
            base = got
            continue
        same = got[0] == base[0] and got[1] == base[1]
        diff = [k for k in base[1] if got[1].get(k) != base[1][k]]
        check(f"{name} --checkpoint={pol}: 3 steps bit-identical to none (peak {got[2]} vs {base[2]})", same,
              f"losses {got[0]} vs {base[0]}; differing files {diff[:5]}")


def learns(name):
    ref = json.load(open(os.path.join(args.samples, f"{name}.json")))
    d = os.path.join(args.work, f"{name}-learn")
    err = build(os.path.join(args.samples, f"{name}.onnx"), d, ["--optimizer=adamw", "--lr", "3e-3"], ref.get("dims", {}))
    if err:
        check(f"{name}: learning build", False, err[:2000])
        return
    p = run(d, inputs_for(name, ref) + ["--steps", "100", "--report", f"{d}/report.json"])
    if p.returncode != 0:
        check(f"{name}: 100 steps", False, p.stderr[:2000])
        return
    losses = json.load(open(f"{d}/report.json"))["losses"]
    check(f"{name}: 100 AdamW steps take the loss from {losses[0]:.4f} to {losses[-1]:.4f}", losses[-1] <= losses[0] / 2)


with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
    jobs = [ex.submit(parity, s) for s in SAMPLES] + [ex.submit(policies, s) for s in SAMPLES]
    jobs += [ex.submit(learns, s) for s in ["mlp", "gpt"] if s in SAMPLES]
    for j in jobs:
        j.result()

failed = sum(1 for r in results if not r[1])
print(f"{len(results) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
