#!/usr/bin/python3
"""profile_test.py -- the trainer's --profile FILE (runtime/prof.c).

    profile_test.py CKPTC SAMPLES WORK [FAKECUDA_DIR]

gpt4 (batch 8, blocks + offload) trains 3 steps with --profile on the CPU, and, when FAKECUDA_DIR
holds the fake driver (tests/fake_cuda.c), on the CUDA backend (device events). Checks: the header
says 2 steps were summed (the first is left out) and gives a step time; the kinds' times add up to
it (within 1%); every node the report names is a node of trainer.c; the kinds a blocks + offload
GPT step must have are there (MatMul, MatMul/grad, a recompute, an offload, the optimizer update);
a profile leaves the losses' bits as they are without one.
"""
import json
import os
import re
import subprocess
import sys


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return r


def check(path, trainer_c, backend):
    text = open(path).read()
    head = text.splitlines()[0]
    m = re.match(r"# ckrt profile: backend (\w+), (\d+) step\(s\) summed .*?, ([0-9.]+) ms per step", head)
    if not m:
        raise SystemExit(f"FAIL: {path}: header {head!r}")
    if m.group(1) != backend or m.group(2) != "2":
        raise SystemExit(f"FAIL: {path}: expected backend {backend}, 2 steps summed: {head!r}")
    step = float(m.group(3))
    kinds, nodes, part = {}, [], None
    for line in text.splitlines()[1:]:
        if line.startswith("kind "):
            part = "kinds"
        elif line.startswith("node "):
            part = "nodes"
        elif line.strip() and not line.startswith("#"):
            f = line.split()
            if part == "kinds":
                kinds[" ".join(f[:-3])] = float(f[-3])
            elif part == "nodes":
                nodes.append(f[0])
    total = sum(kinds.values())
    if step <= 0 or abs(total - step) > 0.01 * step + 0.002:
        raise SystemExit(f"FAIL: {path}: the kinds add up to {total:.3f} ms, the step is {step:.3f} ms")
    src = open(trainer_c).read()
    for n in nodes:
        if f'"{n}"' not in src:
            raise SystemExit(f"FAIL: {path}: node {n!r} is not a node of {trainer_c}")
    want = ["MatMul", "MatMul/grad", "MatMul/recompute", "Add/offload", "optimizer update"]
    missing = [k for k in want if k not in kinds]
    if missing or not nodes:
        raise SystemExit(f"FAIL: {path}: kinds {missing} missing (have {sorted(kinds)}), {len(nodes)} nodes")
    print(f"ok: {backend}: {len(kinds)} kinds add up to the step ({total:.3f} of {step:.3f} ms), "
          f"top node {nodes[0]}")


def main():
    ckptc, samples, work = sys.argv[1:4]
    fake = sys.argv[4] if len(sys.argv) > 4 else ""
    os.makedirs(work, exist_ok=True)
    d = os.path.join(work, "gpt4")
    run([ckptc, os.path.join(samples, "gpt4.onnx"), "--dim", "batch=8", "--checkpoint=blocks", "--offload", "-o", d])
    run(["make", "-s", "-C", d])
    prog, tc = os.path.join(d, "trainer"), os.path.join(d, "trainer.c")
    runs = [("cpu", ["--device", "cpu", "--threads", "1"], None)]
    if fake and os.path.exists(os.path.join(fake, "libcuda.so.1")):
        env = dict(os.environ, CKRT_CUDA_DRIVER=os.path.join(fake, "libcuda.so.1"), CKRT_CUDA_LIBDIR=fake,
                   XDG_CACHE_HOME=os.path.join(work, "cache"))
        runs.append(("cuda", ["--device", "cuda"], env))
    else:
        print("note: no fake CUDA driver given: the CUDA backend's device-event marks are not checked")
    for backend, flags, env in runs:
        p = os.path.join(d, f"prof-{backend}.txt")
        run([prog, *flags, "--steps", "3", "--profile", p, "--report", p + ".json"], env)
        check(p, tc, backend)
        run([prog, *flags, "--steps", "3", "--report", p + ".plain.json"], env)
        a, b = json.load(open(p + ".json"))["losses"], json.load(open(p + ".plain.json"))["losses"]
        if a != b:
            raise SystemExit(f"FAIL: {backend}: the losses with --profile {a} differ from without {b}")
    r = subprocess.run([prog, "--steps", "1", "--profile", "/nonexistent-dir/p.txt"], capture_output=True, text=True)
    if r.returncode == 0 or "cannot write '/nonexistent-dir/p.txt'" not in r.stderr or "step 1/1" in r.stdout:
        raise SystemExit(f"FAIL: an unwritable --profile path: exit {r.returncode}, {r.stderr!r}")
    print("ok: an unwritable --profile path fails in one line, before the first step: " + r.stderr.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
