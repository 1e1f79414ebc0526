#!/usr/bin/python3
"""resume_test.py — checkpoints and --resume end with the bits of a run never stopped.

    resume_test.py CKPTC SAMPLES_DIR WORKDIR

The gpt sample (dropout on, AdamW) over a token dataset of 10 samples, batch 2, --shuffle,
--epochs 3 (15 steps), --save-every 3, is the reference run. Then:
1. SIGKILL in the middle of step 5 (after its forward; checkpoint 3 written), in the middle of
   writing checkpoint 6 (a half-written temporary file left behind), and in step 11 of a run that
   was itself resumed: each --resume ends with parameters and buffers bit-identical to the
   reference, and the losses of the steps it ran are the reference's.
2. A corrupted newest checkpoint: --resume warns, takes the previous one, same bits.
3. A kill before the first checkpoint, and a checkpoint of another model: --resume exits 2 with
   one line; --keep 2 leaves the two newest checkpoints.
4. SIGTERM during a long run (mlp, 6000 steps): the trainer finishes its step, writes a
   checkpoint, exits 1 with one line naming it; --resume from there ends bit-identical to the
   uninterrupted run.
Ends with `N passed, N failed`.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

CKPTC, SAMPLES, WORK = sys.argv[1:4]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def build(model, d, flags=()):
    p = run([CKPTC, os.path.join(SAMPLES, model), "-o", d, *flags])
    if p.returncode == 0:
        p = run(["make", "-s", "-C", d])
    if p.returncode != 0:
        raise SystemExit(f"FAIL: building {d}: {p.stdout}{p.stderr}")
    return os.path.join(d, "trainer")


def files(d):
    return {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))}


def main():
    rng = np.random.default_rng(11)
    idx = rng.integers(0, 97, (10, 16)).astype(np.int64)
    np.save(f"{WORK}/idx.npy", idx)
    np.save(f"{WORK}/labels.npy", np.roll(idx, -1, axis=1))
    gpt = build("gpt.onnx", f"{WORK}/gpt")
    flags = ["--data", f"idx={WORK}/idx.npy", "--data", f"labels={WORK}/labels.npy", "--shuffle", "--seed", "9", "--epochs", "3"]
    p = run([gpt] + flags + ["--dump-params", f"{WORK}/ref", "--report", f"{WORK}/ref.json"])
    if p.returncode != 0:
        raise SystemExit(f"FAIL: the reference run: {p.stderr}")
    ref_losses = json.load(open(f"{WORK}/ref.json"))["losses"]
    ref = files(f"{WORK}/ref")

    def resumed(tag, ck, extra_env=None):
        out = f"{WORK}/{tag}-params"
        p = run([gpt] + flags + ["--save-every", "3", "--ckpt-dir", ck, "--resume", ck, "--dump-params", out,
                                 "--report", f"{WORK}/{tag}.json"], extra_env)
        if p.returncode != 0:
            return p, None, None
        rep = json.load(open(f"{WORK}/{tag}.json"))
        return p, files(out), rep

    # 1. kills at several points
    for tag, kill, start in [("mid-step", "step:5", 3), ("mid-ckpt", "ckpt:6", 3)]:
        ck = f"{WORK}/ck-{tag}"
        p = run([gpt] + flags + ["--save-every", "3", "--ckpt-dir", ck], dict(os.environ, CKRT_DEBUG_KILL=kill))
        left = sorted(os.listdir(ck)) if os.path.isdir(ck) else []
        p2, got, rep = resumed(tag, ck)
        first = rep.get("first_step") if rep else None
        ok = p.returncode == -signal.SIGKILL and got == ref and first == start and rep["losses"] == ref_losses[start:]
        check(f"SIGKILL at {kill} (left {left}), --resume from step {first}: the same bits as the uninterrupted run", ok,
              f"kill exit {p.returncode}; resume exit {p2.returncode} {p2.stderr[-400:]}; first_step {first}; "
              f"{'params differ' if got != ref else ''}")
    check("the next checkpoint removes the temporary file the crash left",
          not glob.glob(f"{WORK}/ck-mid-ckpt/.ckpt-*.tmp"), str(os.listdir(f"{WORK}/ck-mid-ckpt")))
    ck = f"{WORK}/ck-twice"
    run([gpt] + flags + ["--save-every", "3", "--ckpt-dir", ck], dict(os.environ, CKRT_DEBUG_KILL="step:5"))
    p = run([gpt] + flags + ["--save-every", "3", "--ckpt-dir", ck, "--resume", ck], dict(os.environ, CKRT_DEBUG_KILL="step:11"))
    p2, got, rep = resumed("twice", ck)
    check("killed at step 5, resumed and killed at step 11, resumed again: the same bits", p.returncode == -signal.SIGKILL
          and got == ref and rep["first_step"] == 9, f"{p.returncode} {p2.stderr[-300:]}")

    # 2. a corrupted newest checkpoint
    ck = f"{WORK}/ck-corrupt"
    run([gpt] + flags + ["--save-every", "3", "--ckpt-dir", ck], dict(os.environ, CKRT_DEBUG_KILL="step:8"))
    newest = f"{ck}/ckpt-6.bin"
    b = bytearray(open(newest, "rb").read())
    b[len(b) // 2] ^= 0xFF
    open(newest, "wb").write(bytes(b))
    p2, got, rep = resumed("corrupt", ck)
    check("a corrupted newest checkpoint: a warning, the previous one taken, the same bits",
          got == ref and rep["first_step"] == 3 and "skipping" in p2.stderr and "corrupted" in p2.stderr, p2.stderr[-400:])

    # 3. nothing to resume from; another model's checkpoint; --keep
    ck = f"{WORK}/ck-early"
    run([gpt] + flags + ["--save-every", "3", "--ckpt-dir", ck], dict(os.environ, CKRT_DEBUG_KILL="step:2"))
    p = run([gpt] + flags + ["--resume", ck])
    lines = p.stderr.strip().splitlines()
    check("killed before the first checkpoint: --resume exits 2 in one line: " + (lines[-1] if lines else ""),
          p.returncode == 2 and len(lines) == 1 and "no usable checkpoint" in p.stderr, p.stderr)
    mlp = build("mlp.onnx", f"{WORK}/mlp", ["--dim", "batch=8"])
    run([mlp, "--steps", "2", "--save-every", "1", "--ckpt-dir", f"{WORK}/ck-mlp"])
    p = run([gpt] + flags + ["--resume", f"{WORK}/ck-mlp"])
    check("another model's checkpoints: exit 2 saying so", p.returncode == 2 and "another model" in p.stderr, p.stderr)
    run([gpt] + flags + ["--save-every", "3", "--keep", "2", "--ckpt-dir", f"{WORK}/ck-keep"])
    left = sorted(os.listdir(f"{WORK}/ck-keep"))
    check(f"--keep 2 keeps the two newest: {left}", left == ["ckpt-12.bin", "ckpt-15.bin"])
    # another run's later checkpoints in --ckpt-dir: --keep would delete this run's, --resume take theirs
    p = run([gpt] + flags + ["--save-every", "3", "--ckpt-dir", f"{WORK}/ck-keep"])
    lines = p.stderr.strip().splitlines()
    check("a --ckpt-dir holding a later run's checkpoints: exit 2 in one line, before the first step: " +
          (lines[-1] if lines else ""), p.returncode == 2 and len(lines) == 1 and "ckpt-15.bin" in p.stderr and
          "--resume" in p.stderr and "loss" not in p.stdout and sorted(os.listdir(f"{WORK}/ck-keep")) == left, p.stderr)
    p = run([gpt] + flags + ["--save-every", "3", "--ckpt-dir", f"{WORK}/ck-keep", "--resume", f"{WORK}/ck-keep"])
    check("... and resuming from that directory is what it suggests (exit 0)", p.returncode == 0, p.stderr[-300:])

    # 4. SIGTERM
    x = rng.standard_normal((24, 64)).astype(np.float32)
    np.save(f"{WORK}/x.npy", x)
    np.save(f"{WORK}/y.npy", rng.integers(0, 10, 24).astype(np.int64))
    mflags = ["--data", f"x={WORK}/x.npy", "--data", f"labels={WORK}/y.npy", "--shuffle", "--epochs", "2000"]
    run([mlp] + mflags + ["--dump-params", f"{WORK}/mref"])
    ck = f"{WORK}/ck-term"
    proc = subprocess.Popen([mlp] + mflags + ["--ckpt-dir", ck], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    lines = err.strip().splitlines()
    saved = glob.glob(f"{ck}/ckpt-*.bin")
    check("SIGTERM: the step finished, a checkpoint written, exit 1 in one line: " + (lines[-1] if lines else ""),
          proc.returncode == 1 and len(lines) == 1 and "error: stopped by signal 15" in err and len(saved) == 1 and saved[0] in err, err)
    p = run([mlp] + mflags + ["--ckpt-dir", ck, "--resume", ck, "--dump-params", f"{WORK}/mres"])
    check("... and --resume from it ends with the uninterrupted run's bits",
          p.returncode == 0 and os.path.isdir(f"{WORK}/mres") and files(f"{WORK}/mres") == files(f"{WORK}/mref"), p.stderr[-300:])
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
