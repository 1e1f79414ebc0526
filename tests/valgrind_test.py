#!/usr/bin/python3
"""valgrind_test.py — Valgrind memcheck over ckptc compiles and trainer runs.

    valgrind_test.py CKPTC SAMPLES_DIR WORKDIR

Every command runs under `valgrind --error-exitcode=99 --leak-check=full` with definite, indirect
and possible leaks counted as errors; each must exit with its usual status (0, or 2 for the bad
inputs) and memcheck must report nothing:

  - ckptc compiling samples/mlp.onnx (AdamW) and samples/gpt4.onnx (--checkpoint=blocks --offload)
  - each trainer running (2 steps of mlp with --report, 1 step of gpt4 with its host pool), its
    GEMMs through OpenBLAS (CKRT_GEMM=openblas: oneDNN's JIT kernels read past their own buffers)
  - the error paths: ckptc on a missing file and on a bad flag, a trainer given a wrong-shape
    input and a --mem-limit under its plan (exit 2, nothing leaked)

This complements the AddressSanitizer run (`scripts/test.sh --sanitize`): memcheck sees the
uninstrumented, optimized binaries as users build them, including uninitialised reads that ASan
does not look for. Exit status 77 (ctest: skipped) when valgrind is not installed. Ends with
`N passed, N failed`.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

if len(sys.argv) != 4:
    sys.exit("usage: valgrind_test.py CKPTC SAMPLES_DIR WORKDIR")
CKPTC, SAMPLES, WORK = (os.path.abspath(a) for a in sys.argv[1:])
VALGRIND = shutil.which("valgrind")
if not VALGRIND:
    print("valgrind not installed (apt-get install valgrind): skipped")
    sys.exit(77)
VG = [VALGRIND, "-q", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect,possible",
      "--show-leak-kinds=definite,indirect,possible", "--track-origins=yes"]
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + name)
    else:
        failed += 1
        print("FAIL " + name + ": " + detail)
    return ok


def memcheck(name, cmd, want_rc=0, cwd=None):
    # GEMMs through OpenBLAS: oneDNN's JIT kernels read up to 32 bytes past their own packing
    # buffers (runtime/ckrt_dnnl.h), which memcheck reports in code it has no symbols for
    p = subprocess.run(VG + cmd, capture_output=True, text=True, timeout=900, cwd=cwd, env=dict(os.environ, CKRT_GEMM="openblas"))
    reports = [l for l in p.stderr.splitlines() if l.startswith("==")]
    check(f"{name}: exit {want_rc}, memcheck clean", p.returncode == want_rc and not reports,
          f"exit {p.returncode}; " + "\n".join(reports[:60] or p.stderr.splitlines()[-20:]))
    return p.returncode == want_rc


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
mlp, gpt4 = os.path.join(SAMPLES, "mlp.onnx"), os.path.join(SAMPLES, "gpt4.onnx")
memcheck("ckptc: a missing file", [CKPTC, os.path.join(WORK, "nope.onnx"), "-o", f"{WORK}/x"], 2)
memcheck("ckptc: a bad flag", [CKPTC, mlp, "--dim", "batch=4", "--checkpoint=lots", "-o", f"{WORK}/x"], 2)
for name, model, flags, run_flags in [
        ("mlp", mlp, ["--dim", "batch=4"], ["--steps", "2", "--report", f"{WORK}/mlp.json"]),
        ("gpt4 blocks+offload", gpt4, ["--dim", "batch=2", "--checkpoint=blocks", "--offload"], ["--steps", "1"])]:
    d = os.path.join(WORK, name.split()[0])
    if not memcheck(f"ckptc {name}", [CKPTC, model, *flags, "-o", d]):
        continue
    p = subprocess.run(["make", "-s", "-C", d], capture_output=True, text=True, timeout=600)
    if not check(f"{name}: make", p.returncode == 0, p.stderr[-2000:]):
        continue
    memcheck(f"{name} trainer", [os.path.join(d, "trainer"), *run_flags])
    if name == "mlp":
        gemm = json.load(open(f"{WORK}/mlp.json")).get("gemm") if os.path.exists(f"{WORK}/mlp.json") else None
        check(f"CKRT_GEMM=openblas: the report's gemm is {gemm!r}", gemm == "OpenBLAS")
        np.save(f"{WORK}/x_bad.npy", np.zeros((3, 64), dtype=np.float32))
        memcheck("mlp trainer: a wrong-shape input", [os.path.join(d, "trainer"), "--input", f"x={WORK}/x_bad.npy"], 2)
        memcheck("mlp trainer: --mem-limit under the plan", [os.path.join(d, "trainer"), "--mem-limit", "1KiB"], 2)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
