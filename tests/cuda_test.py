#!/usr/bin/env python3
"""CUDA backend checks.

  cuda_test.py nvrtc CKPTC SAMPLES WORK NVRTC_COMPILE|-
      Compiles every sample (training; --infer; --checkpoint=blocks --offload), then compiles each
      DIR/kernels.cu with NVRTC (tests/nvrtc_compile.c: the trainer's own compile call) for sm_80
      and sm_90; any error or warning fails. Then builds the MLP trainer and runs it with
      --device cuda: with a GPU it must train; without one (or without a driver) it must exit 2
      with a message saying why. NVRTC_COMPILE '-' (no CUDA toolkit): checks that --device cuda
      is refused as "built without CUDA support", then reports the test as skipped (exit 77).

  cuda_test.py gpu CKPTC SAMPLES WORK
      Needs a GPU (skipped, exit 77, only when the trainer finds no driver or no device: any other
      failure of the first start is a FAIL with its message): every sample (plain and blocks+offload)
      runs with dropout on --device cuda and on --device cpu: the gradients of step 1 and the
      losses of 3 steps must agree within 1e-4 relative (max |a - b| / max(max |b|, 1e-6) per
      tensor). Prints a table, and writes each sample's row to WORK/parity.md as it finishes (a
      later failure keeps the earlier figures). Every command has a timeout (CK_GPU_CMD_TIMEOUT
      seconds, default 300). bench/gpu/run.sh runs it (on a fake driver with --emulate).
"""
import hashlib
import json
import os
import subprocess
import sys
import time

SKIP = 77
TIMEOUT = int(os.environ.get("CK_GPU_CMD_TIMEOUT", "300"))


def sh(cmd):
    """Runs cmd with the timeout; a hang is a FAIL naming the command, not a lost GPU slot."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"FAIL: timed out after {TIMEOUT} s: {' '.join(cmd)}")
SAMPLES = ["mlp", "gpt", "bert", "resnet", "gpt_deep", "gpt4", "hardmlp", "padnet"]
VARIANTS = [("train", []), ("infer", ["--infer"]), ("blocks+offload", ["--checkpoint=blocks", "--offload"])]


def dims_of(samples, name):
    with open(os.path.join(samples, name + ".json")) as f:
        d = json.load(f).get("dims", {}) or {}
    out = []
    for k, v in d.items():
        out += ["--dim", f"{k}={v}"]
    return out


def compile_sample(ckptc, samples, work, name, flags):
    tag = "-".join([name] + [f.strip("-").replace("=", "_") for f in flags]) or name
    out = os.path.join(work, tag)
    cmd = [ckptc, os.path.join(samples, name + ".onnx"), *dims_of(samples, name), *flags, "-o", out]
    r = sh(cmd)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return out


def build(d):
    r = sh(["make", "-s", "-C", d])
    if r.returncode != 0:
        raise SystemExit(f"FAIL: make -C {d}\n{r.stdout}{r.stderr}")
    return os.path.join(d, "model" if os.path.exists(os.path.join(d, "model")) else "trainer")


def program_of(d):
    for p in ("trainer", "model"):
        if os.path.exists(os.path.join(d, p)):
            return os.path.join(d, p)
    raise SystemExit(f"FAIL: no program in {d}")


def no_gpu_reason(msg):
    keys = ("no CUDA driver", "no usable CUDA device", "no CUDA device", "does not exist", "without CUDA support")
    return any(k in msg for k in keys)


def nvrtc(ckptc, samples, work, nvrtc_compile):
    os.makedirs(work, exist_ok=True)
    if nvrtc_compile == "-":
        d = compile_sample(ckptc, samples, work, "mlp", [])
        prog = build(d)
        r = subprocess.run([prog, "--device", "cuda"], capture_output=True, text=True)
        if r.returncode != 2 or "without CUDA support" not in r.stderr:
            raise SystemExit(f"FAIL: --device cuda without CUDA support: exit {r.returncode}\n{r.stderr}")
        print("ok: --device cuda is refused (exit 2): " + r.stderr.strip())
        print("SKIP: no CUDA toolkit in /usr/local/cuda: the NVRTC compile checks need libnvrtc")
        return SKIP
    files = {}  # hash -> (path, [tags])
    for name in SAMPLES:
        for vname, flags in VARIANTS:
            d = compile_sample(ckptc, samples, work, name, flags)
            src = open(os.path.join(d, "kernels.cu"), "rb").read()
            h = hashlib.sha256(src).hexdigest()
            files.setdefault(h, (os.path.join(d, "kernels.cu"), []))[1].append(f"{name}/{vname}")
            n = src.count(b"__global__ void")
            print(f"{name:9s} {vname:15s} kernels.cu: {n:2d} wrappers, {len(src)} bytes, sha256 {h[:12]}")
    unique = [p for p, _ in files.values()]
    print(f"{len(SAMPLES) * len(VARIANTS)} programs, {len(unique)} distinct kernels.cu files")
    bad = 0
    for sm in (80, 90):
        r = subprocess.run([nvrtc_compile, str(sm), *unique], capture_output=True, text=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            print(r.stderr, end="")
            bad += 1
    if bad:
        raise SystemExit("FAIL: NVRTC compile errors or warnings (above)")
    print(f"ok: {len(unique)} kernels.cu x 2 architectures (sm_80, sm_90) compiled by NVRTC with an empty log")
    # the backend links; without a GPU --device cuda is a clear error, with one it trains
    prog = build(os.path.join(work, "mlp"))
    r = subprocess.run([prog, "--device", "cuda", "--steps", "2"], capture_output=True, text=True)
    if r.returncode == 0:
        first = r.stdout.splitlines()[0] if r.stdout else ""
        if not first.startswith("device: cuda"):
            raise SystemExit(f"FAIL: first line should name the device: {first!r}")
        print("ok: a GPU is present; mlp trained on it: " + first)
    elif r.returncode == 2 and no_gpu_reason(r.stderr):
        print("ok: --device cuda without a usable GPU fails with exit 2: " + r.stderr.strip())
    else:
        raise SystemExit(f"FAIL: --device cuda: exit {r.returncode}\n{r.stdout}{r.stderr}")
    r = subprocess.run([prog, "--steps", "1"], capture_output=True, text=True)
    first = r.stdout.splitlines()[0] if r.stdout else ""
    if r.returncode != 0 or not first.startswith("device: "):
        raise SystemExit(f"FAIL: default device: exit {r.returncode}, first line {first!r}\n{r.stderr}")
    print("ok: default device line: " + first)
    return 0


def load_npys(d):
    import numpy as np
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}


def rel_err(a, b):
    import numpy as np
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))) if b.size else 0.0, 1e-6)) if b.size else 0.0


def gpu(ckptc, samples, work, tol=1e-4):
    import numpy as np
    os.makedirs(work, exist_ok=True)
    d = compile_sample(ckptc, samples, work, "mlp", [])
    prog = build(d)
    r = sh([prog, "--device", "cuda", "--steps", "1"])
    if r.returncode == 2 and no_gpu_reason(r.stderr):
        print("SKIP: no GPU: " + r.stderr.strip())
        return SKIP
    if r.returncode != 0:
        raise SystemExit(f"FAIL: the first start on the GPU: exit {r.returncode}\n{r.stdout}{r.stderr}")
    print("first start: " + r.stdout.splitlines()[0])
    table = open(os.path.join(work, "parity.md"), "w")
    table.write("| sample | variant | loss cpu | loss cuda | loss rel | grad rel | cuda bits == train | planned | measured | cuda ms | cpu ms | "
                "conv calls cuDNN / im2col | |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    table.flush()
    rows = []
    for name in SAMPLES:
        for vname, flags in [("train", []), ("blocks+offload", ["--checkpoint=blocks", "--offload"])]:
            d = compile_sample(ckptc, samples, work, name, flags)
            prog = build(d)
            res = {}
            for dev in ("cpu", "cuda"):
                # gradients of step 1 (the same parameters on both devices: the backward's parity);
                # losses over 3 steps (the optimizer included; AdamW's first steps are sign-like, so
                # later gradients would also measure how tiny gradient differences steer updates)
                gd = os.path.join(d, "grads-" + dev)
                rep = os.path.join(d, f"report-{dev}.json")
                t0 = time.time()
                for args in (["--steps", "1", "--dump-grads", gd], ["--steps", "3", "--report", rep]):
                    r = sh([prog, "--device", dev, *args])
                    if r.returncode != 0:
                        raise SystemExit(f"FAIL: {name} {vname} --device {dev}: exit {r.returncode}\n{r.stdout}{r.stderr}")
                res[dev] = (json.load(open(rep)), load_npys(gd), time.time() - t0)
            lc, lg = res["cpu"][0]["losses"], res["cuda"][0]["losses"]
            le = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(lg, lc))
            ge = max(rel_err(res["cuda"][1][k], v) for k, v in res["cpu"][1].items())
            ok = le <= tol and ge <= tol
            rep = res["cuda"][0]
            ok = ok and rep.get("planned_peak_bytes") == rep.get("measured_peak_bytes")
            # every policy computes the same bits as none on the GPU too (losses and step-1 gradients)
            if vname == "train":
                plain = res["cuda"]
                same = "-"
            else:
                same = plain[0]["losses"] == rep["losses"] and set(plain[1]) == set(res["cuda"][1]) and \
                    all(np.array_equal(plain[1][k], res["cuda"][1][k]) for k in plain[1])
                ok = ok and same
                same = "yes" if same else "NO"
            dev = rep.get("device", {})
            convs = f"{dev.get('conv_cudnn_calls', 0)} / {dev.get('conv_im2col_calls', 0)}"
            rows.append((name, vname, lc[-1], lg[-1], le, ge, same, rep.get("planned_peak_bytes"), rep.get("measured_peak_bytes"),
                         rep.get("step_time_ms"), res["cpu"][0].get("step_time_ms"), convs, "ok" if ok else "FAIL"))
            table.write("| " + " | ".join(str(x) if not isinstance(x, float) else f"{x:.6g}" for x in rows[-1]) + " |\n")
            table.flush()
    print(f"{'sample':9s} {'variant':15s} {'loss cpu':>10s} {'loss cuda':>10s} {'loss rel':>9s} {'grad rel':>9s} {'bits':>4s} "
          f"{'planned':>10s} {'measured':>10s} {'cuda ms':>8s} {'cpu ms':>8s} {'convs cuDNN/im2col':>18s}")
    for r in rows:
        print(f"{r[0]:9s} {r[1]:15s} {r[2]:10.6f} {r[3]:10.6f} {r[4]:9.2e} {r[5]:9.2e} {r[6]:>4s} {r[7]:10d} {r[8]:10d} "
              f"{r[9]:8.2f} {r[10]:8.2f} {r[11]:>18s} {r[12]}")
    bad = sum(r[-1] != "ok" for r in rows)
    if bad:
        raise SystemExit(f"FAIL: {bad} run(s) differ from the CPU by more than {tol} relative, from train's bits on the GPU, "
                         "or measured a peak other than planned")
    print(f"ok: CUDA matches the CPU within {tol} relative on every sample")
    return 0


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "nvrtc":
        return nvrtc(*args)
    if mode == "gpu":
        return gpu(*args)
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
