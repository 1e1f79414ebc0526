#!/usr/bin/python3
"""e2e_test.py — every sample model, compiled by ckptc and run, against PyTorch.

    /usr/bin/python3 tests/e2e_test.py CKPTC SAMPLES_DIR WORKDIR

The samples (samples/NAME.onnx, exported by samples/export.py) are real PyTorch models; NAME.json
lists their inputs and outputs, the symbolic dim bindings PyTorch ran with (`dims`) and the
reference files NAME.in.INPUT.npy / NAME.out.OUTPUT.npy: PyTorch's forward with dropout disabled
and BatchNorm in training mode. For every sample this checks, one counted check each:

  compile        `ckptc NAME.onnx --infer --disable-dropout --dim K=V... -o prog` exits 0
  reproducible   compiling again (same command line, another directory) writes byte-identical
                 model.c, weights.bin, plan.json and Makefile: generated code is reproducible
  make           `make -C DIR` builds the program, run from another working directory with a
                 relative DIR (the Makefile must not depend on where make is started)
  run            the program exits 0 on the reference inputs and writes every output
  matches torch  each output has PyTorch's dtype and shape and max |a-b| <= 1e-5 * max(1, max |b|)
                 (exact for integer and bool outputs)
  rerun          a second run writes byte-identical outputs
  threads        runs with OPENBLAS_NUM_THREADS=1 and =2 write byte-identical outputs, equal to the
                 first run's too (results must not depend on the thread count)
  report         --report JSON has 0 < measured_peak_bytes <= planned_peak_bytes, and the planned
                 peak is plan.json's arena_bytes (the runtime proves the compiler's plan)

When an early step fails, the checks that need its result are not run (said so, not counted).
Python: Debian's /usr/bin/python3, standard library + numpy. The last line is
`N passed, N failed`; exit status 1 if anything failed.
"""
import importlib.util
import os
import sys

if importlib.util.find_spec("numpy") is None and os.path.exists("/usr/bin/python3") and \
        os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
    os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)

import filecmp  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

import numpy as np  # noqa: E402

TIMEOUT_S = 300
GENERATED = ("model.c", "weights.bin", "plan.json", "Makefile")

passed, failed = 0, 0


def check(sample, what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   %s: %s" % (sample, what))
    else:
        failed += 1
        print("FAIL %s: %s%s" % (sample, what, (": " + detail) if detail else ""))
    return ok


def run(cmd, cwd=None, env=None):
    """(exit status, stdout, stderr); a timeout reads as status -1000."""
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return -1000, "", "timeout after %d s" % TIMEOUT_S
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def tail(text, n=6):
    return " | ".join([ln for ln in text.splitlines() if ln.strip()][-n:])


def compile_in(ckptc, model, flags, parent):
    """Compiles model into parent/prog, running ckptc in parent so that the command line (which the
    generated files record as provenance) is the same in every parent."""
    shutil.rmtree(parent, ignore_errors=True)
    os.makedirs(parent)
    return run([ckptc, model, "--infer", "--disable-dropout", *flags, "-o", "prog"], cwd=parent)


def run_program(prog, inputs, out_dir, report=None, env_extra=None):
    os.makedirs(out_dir, exist_ok=True)
    cmd = [os.path.join(prog, "model")]
    for name, path in inputs:
        cmd += ["--input", "%s=%s" % (name, path)]
    cmd += ["--dump-outputs", out_dir]
    if report:
        cmd += ["--report", report]
    env = dict(os.environ)
    env.update(env_extra or {})
    return run(cmd, env=env)


def same_files(a_dir, b_dir, names):
    """Names whose bytes differ (or that are missing) between the two directories."""
    return [n for n in names if not (os.path.exists(os.path.join(a_dir, n)) and os.path.exists(os.path.join(b_dir, n))
                                     and filecmp.cmp(os.path.join(a_dir, n), os.path.join(b_dir, n), shallow=False))]


def compare(got, ref):
    """(None when got matches PyTorch's ref, else why not; a note on the margin)."""
    if got.dtype != ref.dtype:
        return "dtype %s, PyTorch %s" % (got.dtype, ref.dtype), ""
    if got.shape != ref.shape:
        return "shape %s, PyTorch %s" % (got.shape, ref.shape), ""
    if got.size == 0:
        return None, "empty"
    if ref.dtype.kind not in "fc":
        n = int((got != ref).sum())
        return (None, "exact") if n == 0 else ("%d of %d values differ" % (n, got.size), "")
    g, r = got.astype(np.float64), ref.astype(np.float64)
    if not np.isfinite(g).all():
        return "%d non-finite values" % int((~np.isfinite(g)).sum()), ""
    diff = float(np.max(np.abs(g - r)))
    tol = 1e-5 * max(1.0, float(np.max(np.abs(r))))
    note = "max |diff| %.3g, tolerance %.3g" % (diff, tol)
    return (None, note) if diff <= tol else ("%s (at %s)" % (note.replace(",", " >"), np.unravel_index(
        int(np.argmax(np.abs(g - r))), g.shape)), "")


def test_sample(ckptc, samples, workdir, meta_path):
    with open(meta_path) as f:
        meta = json.load(f)
    name = meta["model"]
    model = os.path.join(samples, meta["file"])
    wdir = os.path.join(workdir, name)
    shutil.rmtree(wdir, ignore_errors=True)
    flags = []
    for k, v in sorted(meta.get("dims", {}).items()):
        flags += ["--dim", "%s=%d" % (k, v)]

    rc, out, err = compile_in(ckptc, model, flags, os.path.join(wdir, "a"))
    if not check(name, "compile", rc == 0, "ckptc exit %d: %s" % (rc, tail(err, 3))):
        print("     (the other checks of %s need a compiled program: not run)" % name)
        return
    prog = os.path.join(wdir, "a", "prog")

    rc2, _, err2 = compile_in(ckptc, model, flags, os.path.join(wdir, "b"))
    diff = same_files(prog, os.path.join(wdir, "b", "prog"), GENERATED) if rc2 == 0 else list(GENERATED)
    check(name, "reproducible compile (%s)" % ", ".join(GENERATED), rc2 == 0 and not diff,
          "second compile exit %d %s; differing: %s" % (rc2, tail(err2, 2), ", ".join(diff)))

    elsewhere = os.path.join(wdir, "elsewhere")
    os.makedirs(elsewhere, exist_ok=True)
    rel = os.path.relpath(prog, elsewhere)
    rc, out, err = run(["make", "-s", "-C", rel], cwd=elsewhere)
    ok = rc == 0 and os.access(os.path.join(prog, "model"), os.X_OK)
    if not check(name, "make -C %s from another directory" % rel, ok, "exit %d: %s" % (rc, tail(out + err))):
        print("     (the run checks of %s need the program: not run)" % name)
        return

    ins = [(i["name"], os.path.join(samples, meta["reference_files"]["inputs"][i["name"]])) for i in meta["inputs"]]
    refs = [(o["name"], os.path.join(samples, meta["reference_files"]["outputs"][o["name"]])) for o in meta["outputs"]]
    runs = {}
    report = os.path.join(wdir, "report.json")
    for key, env in (("run1", None), ("run2", None), ("threads1", {"OPENBLAS_NUM_THREADS": "1"}),
                     ("threads2", {"OPENBLAS_NUM_THREADS": "2"})):
        out_dir = os.path.join(wdir, key)
        runs[key] = (out_dir,) + run_program(prog, ins, out_dir, report if key == "run1" else None, env)
    out_dir, rc, out, err = runs["run1"]
    files = {}
    try:
        with open(report) as f:
            rep = json.load(f)
        files = rep.get("outputs", {})
    except (OSError, ValueError) as e:
        rep = None
        rep_err = str(e)
    missing = [o for o, _ in refs if o not in files or not os.path.exists(os.path.join(out_dir, files[o]))]
    if not check(name, "run on the reference inputs", rc == 0 and not missing,
                 "exit %d: %s%s" % (rc, tail(err, 3), "; missing outputs: " + ", ".join(missing) if missing else "")):
        print("     (the output checks of %s need the outputs: not run)" % name)
        return

    for oname, ref_path in refs:
        got = np.load(os.path.join(out_dir, files[oname]), allow_pickle=False)
        why, note = compare(got, np.load(ref_path, allow_pickle=False))
        check(name, "output '%s' matches PyTorch (1e-5 relative%s)" % (oname, ": " + note if note else ""),
              why is None, why)

    names = sorted(set(files.values()))
    for key, what in (("run2", "a second run"), ("threads1", "OPENBLAS_NUM_THREADS=1"),
                      ("threads2", "OPENBLAS_NUM_THREADS=2")):
        d, rc, _, err = runs[key]
        diff = same_files(out_dir, d, names) if rc == 0 else names
        check(name, "%s writes byte-identical outputs" % what, rc == 0 and not diff,
              "exit %d %s; differing: %s" % (rc, tail(err, 2), ", ".join(diff)))

    try:
        with open(os.path.join(prog, "plan.json")) as f:
            arena = json.load(f)["arena_bytes"]
    except (OSError, ValueError, KeyError) as e:
        arena = "unreadable plan.json: %s" % e
    if rep is None:
        check(name, "report", False, "unreadable --report: %s" % rep_err)
    else:
        planned, measured = rep.get("planned_peak_bytes"), rep.get("measured_peak_bytes")
        ok = isinstance(planned, int) and isinstance(measured, int) and 0 < measured <= planned and planned == arena
        check(name, "report: 0 < measured peak (%s) <= planned peak (%s) == plan.json arena_bytes (%s)" %
              (measured, planned, arena), ok)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: e2e_test.py CKPTC SAMPLES_DIR WORKDIR")
    ckptc, samples, workdir = (os.path.abspath(a) for a in sys.argv[1:])
    metas = sorted(glob.glob(os.path.join(samples, "*.json")))
    if not metas:
        sys.exit("e2e_test.py: no samples (*.json) in %s" % samples)
    os.makedirs(workdir, exist_ok=True)
    for m in metas:
        test_sample(ckptc, samples, workdir, m)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
