#!/usr/bin/env python3
"""The CUDA backend on the CPU: every sample's generated program runs its CUDA path (the op
layer runtime/cuda_ops.c, the emitted kernels.cu) with tests/cuda_emu.c standing in for the GPU,
and must match the CPU backend.

  cuda_emu_test.py CKPTC SAMPLES WORK LIBCKRT_EMU RUNTIME_DIR TESTS_DIR CXX|-

For each sample and variant (training; --checkpoint=blocks --offload; --infer; and on gpt and resnet
--grad-accum with --clip-grad-norm, trained with --grad-accum 2 and evaluated on the sample's batch,
the gradient norms and eval loss compared too): ckptc writes DIR;
DIR/kernels.cu is compiled by g++ as C++ with tests/cuda_emu_shim.h (-DCK_EMULATE) into
DIR/kernels_emu.so; the program is linked against libckrt_emu; it runs with --device cuda and
the emulation launches every kernel with the CUDA backend's grid and block sizes, checking that
each work item is visited exactly once. Losses, gradients (or outputs) must equal the CPU
backend's exactly, zero difference (the emulated cuBLAS is the CPU backend's GEMM, ckrt_dnnl.h, so every
difference is the CUDA path's own), planned peak must equal measured. One run caps the grid at two
blocks (CKRT_EMU_MAX_GRID=2) so that the grid-stride loop is exercised too. Exit 77 (skipped)
without a C++ compiler.
"""
import json
import os
import subprocess
import sys

SKIP = 77
SAMPLES = os.environ.get("CK_EMU_SAMPLES", "mlp gpt bert resnet gpt_deep gpt4 hardmlp padnet lstm").split()
VARIANTS = [("train", []), ("blocks+offload", ["--checkpoint=blocks", "--offload"]), ("infer", ["--infer"]),
            ("accum+clip+eval", ["--grad-accum", "--clip-grad-norm", "0.5"])]
# the trainer loop's device paths (accumulation, clipping, the gradient norm, eval mode) on two samples
LOOP_SAMPLES = ("gpt", "resnet")
TOL = 0.0  # exactly equal (see the top)


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r.stdout


def dims_of(samples, name):
    with open(os.path.join(samples, name + ".json")) as f:
        d = json.load(f).get("dims", {}) or {}
    return [x for k, v in d.items() for x in ("--dim", f"{k}={v}")]


def npys(d):
    import numpy as np
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}


def rel(a, b):
    import numpy as np
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    if b.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-6))


def main():
    ckptc, samples, work, lib, rt, tests, cxx = sys.argv[1:8]
    if cxx == "-":
        print("SKIP: no C++ compiler (g++): the emulation compiles kernels.cu as C++")
        return SKIP
    os.makedirs(work, exist_ok=True)
    extra = os.environ.get("CK_EMU_FLAGS", "").split()  # a sanitizer build's instrumentation
    rows, bad = [], 0
    for name in SAMPLES:
        for vname, flags in VARIANTS:
            if vname == "accum+clip+eval" and name not in LOOP_SAMPLES:
                continue
            d = os.path.join(work, f"{name}-{vname}")
            run([ckptc, os.path.join(samples, name + ".onnx"), *dims_of(samples, name), *flags, "-o", d])
            run(["make", "-s", "-C", d])
            prog = "model" if "--infer" in flags else "trainer"
            run([cxx, *extra, "-std=c++17", "-O1", "-shared", "-fPIC", "-DCK_EMULATE", "-I", tests, "-x", "c++",
                 os.path.join(d, "kernels.cu"), "-o", os.path.join(d, "kernels_emu.so")])
            run(["cc", *extra, "-std=c11", "-O1", "-I", rt, os.path.join(d, prog + ".c"), "-o", os.path.join(d, prog + "_emu"), lib,
                 "-lopenblas", *os.environ.get("CK_RT_LIBS", "").split(), "-lm", "-ldl", *extra])
            res = {}
            for dev, exe in (("cpu", prog), ("cuda", prog + "_emu")):
                out = os.path.join(d, "out-" + dev)
                rep = os.path.join(d, f"report-{dev}.json")
                args = [os.path.join(d, exe), "--device", dev, "--report", rep]
                args += ["--dump-outputs", out] if prog == "model" else ["--steps", "2", "--dump-grads", out]
                if vname == "accum+clip+eval":  # the sample's own batch as the eval data
                    ins = [f for f in sorted(os.listdir(samples)) if f.startswith(name + ".in.") and f.endswith(".npy")]
                    args += ["--grad-accum", "2", "--metrics", os.path.join(d, f"metrics-{dev}.jsonl")]
                    args += [a for f in ins for a in ("--eval-data", f"{f[len(name) + 4:-4]}={os.path.join(samples, f)}")]
                env = dict(os.environ)
                if dev == "cuda" and name == "gpt" and vname == "train":
                    env["CKRT_EMU_MAX_GRID"] = "2"
                stdout = run(args, env)
                first = stdout.splitlines()[0] if stdout else ""
                if not first.startswith(f"device: {dev}"):
                    raise SystemExit(f"FAIL: {name} {vname}: first line {first!r}, expected 'device: {dev} ...'")
                res[dev] = (json.load(open(rep)), npys(out))
            (rc, tc), (rg, tg) = res["cpu"], res["cuda"]
            seq = lambda r: [v for v in r.get("losses", []) + r.get("grad_norms", []) + [e["loss"] for e in r.get("evals", [])]
                             if v is not None]  # a norm is null when neither --metrics nor clipping takes it
            le = max([abs(a - b) / max(abs(b), 1e-6) for a, b in zip(seq(rg), seq(rc))] or [0.0])
            if vname == "accum+clip+eval" and not (len(rc["evals"]) == 1 and None not in rc["grad_norms"] + rg["grad_norms"]):
                le = float("inf")
            missing = sorted(set(tc) ^ set(tg))
            te = max([rel(tg[k], v) for k, v in tc.items() if k in tg] or [0.0])
            peak_ok = rg["planned_peak_bytes"] == rg["measured_peak_bytes"]
            ok = le <= TOL and te <= TOL and not missing and peak_ok and rg["backend"] == "cuda"
            bad += not ok
            rows.append((name, vname, len(tc), le, te, rg["planned_peak_bytes"], rg["measured_peak_bytes"],
                         "ok" if ok else "FAIL" + (f" missing {missing}" if missing else "")))
            print(f"{name:9s} {vname:15s} tensors {len(tc):3d}  loss rel {le:.1e}  tensors rel {te:.1e}  "
                  f"planned {rg['planned_peak_bytes']} measured {rg['measured_peak_bytes']}  {rows[-1][-1]}", flush=True)
    if bad:
        raise SystemExit(f"FAIL: {bad} of {len(rows)} emulated CUDA runs differ from the CPU")
    print(f"ok: {len(rows)} programs ran their CUDA path in the emulation, every launch's geometry covering each item "
          f"exactly once, results exactly equal to the CPU backend's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
