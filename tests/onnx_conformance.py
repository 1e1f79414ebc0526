#!/usr/bin/python3
"""onnx_conformance.py — the ONNX backend node tests run through ckptc's whole pipeline: compile,
build, run, compare. The node tests are a numerical reference nobody on the team wrote.

    /usr/bin/python3 tests/onnx_conformance.py CKPTC WORKDIR [--filter REGEX] [--jobs N] [--keep]
                                               [--report FILE]

For every node test (node/test_NAME/model.onnx with test_data_set_0/{input,output}_*.pb):

  1. `CKPTC model.onnx --infer -o DIR [--dim NAME=N]...` (symbolic input dims bound from the shapes
     of the test's input tensors),
  2. `make -s -C DIR` (generated code must always compile: -Wall -Wextra -Werror),
  3. every input_i.pb saved as .npy, then `DIR/model --input NAME=FILE.npy... --dump-outputs OUT
     --report OUT/report.json` (the report maps each output name to its file),
  4. every output compared with the reference: same dtype and shape, floats within rtol 1e-3 /
     atol 1e-7 of the expected value with NaNs at the same positions, everything else exact.

Outcomes:
  PASS  every output matches. For a test whose graph holds a random op (Bernoulli, RandomUniform
        [Like], RandomNormal[Like]), whose expected values NumPy's generator drew: every output has
        the expected dtype and shape, and where every expected value is 0 or 1 (Bernoulli and its
        expansion) so is every value produced; the report lists these apart ("random: values
        not compared").
  FAIL  a wrong value, shape or dtype; a missing output; a crash, abort or signal; a program that
        exits nonzero; a make failure; ckptc exiting with anything but 0 or 2; the per-test timeout
        (60 s for the whole test).
  SKIP  ckptc refused the model at compile time with exit 2 (its first error line is the reason:
        an op, dtype or attribute it does not support, a kernel not written yet, ...); or the
        runner did not run the test: symbolic dims the test data cannot bind ("dynamic"), or
        expected outputs drawn from NumPy's random generator, which no compiler can reproduce,
        from an op ckptc lacks (Multinomial) or Dropout in training mode with ratio > 0: reason
        "depends on numpy's RNG".

Variants (the idea of tests/onnx_shapes.py): node tests feed shape-like inputs (Reshape's shape,
Slice's starts, Trilu's k, Dropout's ratio...) as graph inputs, and many are stamped with opsets
below ckptc's lowest. When ckptc refuses a model whose ops are all in ir/ops.def only for those
reasons, a copy with the same meaning is compiled too: re-stamped with ckptc's lowest opset when
no op's schema changed in between ("NAME+opset13"), and/or with the refused inputs turned into
initializers holding the test's data ("NAME+const"). The original stays a SKIP; the variant is a
test of its own under its name.

Test data comes from Debian's python3-onnx, generated into WORKDIR/node when absent (never
committed). Each run builds in a fresh WORKDIR/conformance/run-PID-XXXX/ (runs sharing a WORKDIR
do not collide; nothing but the test data is reused across runs), one directory per test, deleted
after the test unless --keep. Tests run on a thread pool (--jobs, default 2: each compile runs gcc).

Unless --filter is given, writes tests/onnx_conformance.md (or --report FILE): counts, failures,
a per-op table, the supported ops (ir/ops.def) and every SKIP reason grouped with counts.
The last stdout line is `N passed, N failed, N skipped`; exit status 1 if anything FAILed.
"""
import argparse
import collections
import concurrent.futures
import datetime
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

# onnx_common re-executes under Debian's python3 when needed and restores the NumPy aliases that
# python3-onnx 1.12 needs: it must be imported before onnx
from onnx_common import (ROOT, OLD_OPSET, RUNTIME_CONST, load_array, node_data_dir, ops_def_rows,  # noqa: E402
                         promote_inputs, reason_group, reference, restamp_opset, strip_error_prefix,
                         supported_ops, walk_ops)
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.helper  # noqa: E402,F401

TIMEOUT_S = 60
RTOL, ATOL = 1e-3, 1e-7
RNG_REASON = "depends on numpy's RNG"
RNG_OPS = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
# the random ops ckptc runs (its own counter RNG): their tests check dtype, shape and support, not values
RNG_RUN = {"Bernoulli", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
RANDOM_NOTE = "random: values not compared (dtype, shape and the 0/1 support checked)"


# ---------------------------------------------------------------- processes

class Timeout(Exception):
    pass


def run_cmd(cmd, deadline, cwd=None, env=None):
    """Runs cmd in its own process group, killed whole (make's gcc included) at the deadline.
    Returns (exit status, stdout, stderr); a negative status is the signal that killed it."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise Timeout()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=left)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        raise Timeout()
    return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def status_text(rc):
    if rc < 0:
        try:
            return "killed by signal %d (%s)" % (-rc, signal.Signals(-rc).name)
        except ValueError:
            return "killed by signal %d" % -rc
    return "exit %d" % rc


def lines(text):
    return [ln for ln in text.splitlines() if ln.strip()]


# ---------------------------------------------------------------- random tests

def const_value(model, ins, name):
    """The value of tensor `name` when the test fixes it (initializer, Constant node or graph input
    with test data); None when unknown."""
    g = model.graph
    for t in g.initializer:
        if t.name == name:
            return onnx.numpy_helper.to_array(t)
    for n in g.node:
        if n.op_type == "Constant" and name in n.output:
            for a in n.attribute:
                if a.name == "value":
                    return onnx.numpy_helper.to_array(a.t)
                if a.name in ("value_float", "value_int"):
                    return np.array(onnx.helper.get_attribute_value(a))
            return None
    for iname, ref, pb in ins:
        if iname == name and ref is not None:
            return load_array(pb)
    return None


def rng_dependence(model, ins):
    """Why the expected outputs come from NumPy's random generator (ckptc draws from its own
    counter-based generator, so they cannot match), or None."""
    ops = walk_ops(model.graph, set()) & RNG_OPS
    if ops:
        return "random op %s" % ", ".join(sorted(ops))
    opset = max([imp.version for imp in model.opset_import if imp.domain in ("", "ai.onnx")] or [0])
    for n in model.graph.node:
        if n.op_type != "Dropout" or n.domain not in ("", "ai.onnx") or opset < 12:
            continue  # before opset 12 a node test's Dropout runs in inference: the identity
        ins_ = list(n.input) + ["", ""]
        training = const_value(model, ins, ins_[2]) if ins_[2] else np.array(False)
        ratio = const_value(model, ins, ins_[1]) if ins_[1] else np.array(0.5)
        if training is None or bool(np.asarray(training).reshape(-1)[0]):
            if ratio is None or float(np.asarray(ratio).reshape(-1)[0]) > 0:
                return "Dropout '%s' in training mode with ratio %s" % (
                    n.name, "unknown" if ratio is None else float(np.asarray(ratio).reshape(-1)[0]))
    return None


# ---------------------------------------------------------------- one test

def compare(name, got, exp):
    """A list of differences between output `name` as produced (got) and expected (exp)."""
    if got.dtype != exp.dtype:
        return ["output '%s': dtype %s, expected %s" % (name, got.dtype, exp.dtype)]
    if got.shape != exp.shape:
        return ["output '%s': shape %s, expected %s" % (name, got.shape, exp.shape)]
    if got.size == 0:
        return []
    if exp.dtype.kind in "fc":
        g64, e64 = got.astype(np.float64), exp.astype(np.float64)
        nan_g, nan_e = np.isnan(g64), np.isnan(e64)
        if (nan_g != nan_e).any():
            k = tuple(int(i) for i in np.argwhere(nan_g != nan_e)[0])
            return ["output '%s': %d NaN position(s) differ, first at %s: got %r, expected %r" %
                    (name, int((nan_g != nan_e).sum()), k, got[k].item(), exp[k].item())]
        with np.errstate(invalid="ignore", over="ignore"):
            ok = np.isclose(g64, e64, rtol=RTOL, atol=ATOL, equal_nan=True)
        if ok.all():
            return []
        bad = ~ok
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.where(bad, np.abs(g64 - e64), 0)
        k = tuple(int(i) for i in np.argwhere(bad)[0])
        w = np.unravel_index(int(np.nanargmax(err)), err.shape) if err.ndim else ()
        return ["output '%s': %d of %d values differ (rtol %g, atol %g); first at %s: got %r, expected %r; "
                "largest |diff| %.3g at %s" % (name, int(bad.sum()), got.size, RTOL, ATOL, k, got[k].item(),
                                               exp[k].item(), float(err[w]), tuple(int(i) for i in w))]
    if not np.array_equal(got, exp):
        bad = got != exp
        k = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
        return ["output '%s': %d of %d values differ; first at %s: got %r, expected %r" %
                (name, int(bad.sum()), got.size, k, got[k].item(), exp[k].item())]
    return []


def compare_random(name, got, exp):
    """A random op's output against NumPy's draw: the same dtype and shape and, when every expected
    value is 0 or 1 (a Bernoulli), every value produced 0 or 1."""
    if got.dtype != exp.dtype or got.shape != exp.shape:
        return ["output '%s': %s %s, expected %s %s" % (name, got.dtype, got.shape, exp.dtype, exp.shape)]
    if exp.size and np.isin(exp, [0, 1]).all() and not np.isin(got, [0, 1]).all():
        return ["output '%s': values other than 0 and 1 (%r), expected a 0/1 draw" %
                (name, sorted(set(got.reshape(-1).tolist()) - {0, 1})[:4])]
    return []


def compile_model(ckptc, model_path, dims, prog, deadline, res):
    """Step 1: ckptc. Fills res with SKIP/FAIL and returns False when there is nothing to build."""
    cmd = [ckptc, model_path, "--infer", "-o", prog]
    for k, v in sorted(dims.items()):
        cmd += ["--dim", "%s=%d" % (k, v)]
    res["cmd"] = " ".join(cmd)
    shutil.rmtree(prog, ignore_errors=True)
    rc, _, err = run_cmd(cmd, deadline)
    errs = lines(err)
    if rc == 2:
        first = next((ln for ln in errs if "ckptc: error:" in ln), errs[0] if errs else "(no message)")
        res.update(status="SKIP", reason=strip_error_prefix(first), errors=[strip_error_prefix(e) for e in errs])
        return False
    if rc != 0:
        res.update(status="FAIL", reason="ckptc %s" % status_text(rc), details=errs[-6:])
        return False
    return True


def build_and_run(model, ins, outs, tdir, wdir, prog, deadline, res):
    """Steps 2-4: make, run, compare. Fills res."""
    try:
        with open(os.path.join(prog, "model.c")) as f:
            res["kernels"] = f.read().count("CKRT_NODE(")  # 0: all folded at compile time, or views
    except OSError:
        pass
    rc, out, err = run_cmd(["make", "-s", "-C", prog], deadline)
    if rc != 0:
        res.update(status="FAIL", reason="make failed (%s): the generated code does not compile" % status_text(rc),
                   details=([ln for ln in lines(out) + lines(err) if "error" in ln][:4] or lines(out + err)[-6:]))
        return
    # the program runs in wdir with relative paths: short commands in the report
    os.makedirs(os.path.join(wdir, "in"), exist_ok=True)
    os.makedirs(os.path.join(wdir, "out"), exist_ok=True)
    cmd = [os.path.join(".", os.path.relpath(prog, wdir), "model")]
    for i, (name, ref, pb) in enumerate(ins):
        if ref is None:
            continue
        np.save(os.path.join(wdir, "in", "input_%d.npy" % i), load_array(pb))
        cmd += ["--input", "%s=in/input_%d.npy" % (name, i)]
    cmd += ["--dump-outputs", "out", "--report", "report.json"]
    out_dir, report = os.path.join(wdir, "out"), os.path.join(wdir, "report.json")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # the pool already keeps the cores busy
    rc, out, err = run_cmd(cmd, deadline, cwd=wdir, env=env)
    if rc != 0:
        res.update(status="FAIL", reason="the program failed: %s" % status_text(rc),
                   details=lines(err)[-6:] + ["command: " + " ".join(cmd)])
        return
    try:
        with open(report) as f:
            files = json.load(f)["outputs"]
    except (OSError, ValueError, KeyError) as e:
        res.update(status="FAIL", reason="the program's --report is unreadable: %s" % e)
        return
    diffs = []
    ds = os.path.join(tdir, "test_data_set_0")
    for i, (name, ref) in enumerate(outs):
        if name not in files:
            diffs.append("output '%s' is missing from the program's report" % name)
            continue
        try:
            got = np.load(os.path.join(out_dir, files[name]), allow_pickle=False)
        except (OSError, ValueError) as e:
            diffs.append("output '%s': cannot read %s: %s" % (name, files[name], e))
            continue
        if ref is None:
            diffs.append("output '%s' has no tensor reference" % name)
            continue
        exp = load_array(os.path.join(ds, "output_%d.pb" % i))
        diffs += compare_random(name, got, exp) if res.get("random") else compare(name, got, exp)
    if diffs:
        res.update(status="FAIL", reason=diffs[0], details=diffs[1:])
    else:
        res.update(status="PASS", reason=RANDOM_NOTE if res.get("random") else "")


def run_model(ckptc, model, model_path, ins, outs, dims, tdir, wdir, res):
    """Compiles, builds, runs and compares one model; fills res. The timeout covers all steps."""
    deadline = time.monotonic() + TIMEOUT_S
    prog = os.path.join(wdir, "prog")
    step = "ckptc"
    try:
        if compile_model(ckptc, model_path, dims, prog, deadline, res):
            step = "make/run"
            build_and_run(model, ins, outs, tdir, wdir, prog, deadline, res)
    except Timeout:
        res.update(status="FAIL", reason="timeout: more than %d s (in %s)" % (TIMEOUT_S, step))
    res["seconds"] = round(TIMEOUT_S - (deadline - time.monotonic()), 2)
    return res


def new_result(name, ops, dims):
    return {"name": name, "ops": ops, "status": None, "reason": "", "details": [], "errors": [],
            "bound": dict(dims), "all_supported": False}


def run_variant(ckptc, model, res, ins, outs, dims, tdir, workdir, wdirs):
    """res is a SKIP of a model whose ops are all supported; returns the variant's result, or None
    when no variant applies (see the module docstring). Appends the directories used to wdirs."""
    name, changes, promoted = res["name"], [], []

    def wanted(r):  # the graph inputs ckptc wants as constants, that the test has data for
        found = [m.group(1) for e in (r["errors"] or [r["reason"]]) for m in [RUNTIME_CONST.search(e)] if m]
        return [w for w in dict.fromkeys(found) if w not in promoted and any(x[0] == w and x[1] for x in ins)]

    if OLD_OPSET.search(res["reason"]):
        target = restamp_opset(model, res["reason"])
        if target is None:
            return None
        name += "+opset%d" % target
        changes.append("opset %d" % target)
    else:
        want = wanted(res)
        if not want:
            return None
        ins = promote_inputs(model, ins, want)
        promoted += want
    for _ in range(8):  # Slice has up to 4 such inputs; ckptc may report one at a time
        vname = name + ("+const" if promoted else "")
        wdir = os.path.join(workdir, vname)
        wdirs.append(wdir)
        os.makedirs(wdir, exist_ok=True)
        path = os.path.join(wdir, "model.onnx")
        onnx.save(model, path)
        var = new_result(vname, res["ops"], dims)
        var["all_supported"] = True
        run_model(ckptc, model, path, ins, outs, dims, tdir, wdir, var)
        want = wanted(var) if var["status"] == "SKIP" else []
        if not want:
            break
        ins = promote_inputs(model, ins, want)
        promoted += want
    if promoted:
        changes.append("initializers: " + ", ".join(promoted))
    var["changes"] = "; ".join(changes)
    return var


def run_test(job):
    """One node test: returns its result, then its variant's when one applies."""
    ckptc, tdir, supported, workdir, keep = job
    name = os.path.basename(tdir)
    model = onnx.load(os.path.join(tdir, "model.onnx"))
    ops = sorted(walk_ops(model.graph, set()))
    ins, outs, dims, problems = reference(tdir, model.graph)
    res = new_result(name, ops, dims)
    res["all_supported"] = all(op in supported for op in ops)
    if problems:  # symbolic dims the test data cannot bind consistently: nothing to compare with
        res.update(status="SKIP", reason="dynamic: " + "; ".join(problems))
        return [res]
    why = rng_dependence(model, ins)
    if why and set(ops) & RNG_OPS and set(ops) & RNG_OPS <= RNG_RUN and res["all_supported"]:
        res["random"] = True  # run: dtype, shape and support checked, not values
    elif why:
        res.update(status="SKIP", reason=RNG_REASON, details=[why])
        return [res]
    wdir = os.path.join(workdir, name)
    os.makedirs(wdir, exist_ok=True)
    run_model(ckptc, model, os.path.join(tdir, "model.onnx"), ins, outs, dims, tdir, wdir, res)
    out, wdirs = [res], [wdir]
    if res["status"] == "SKIP" and res["all_supported"] and \
            (OLD_OPSET.search(res["reason"]) or any(RUNTIME_CONST.search(e) for e in res["errors"])):
        var = run_variant(ckptc, model, res, ins, outs, dims, tdir, workdir, wdirs)
        if var:
            out.append(var)
    if not keep:
        for d in wdirs:
            shutil.rmtree(d, ignore_errors=True)
    return out


# ---------------------------------------------------------------- report

def skip_key(reason):
    m = re.search(r"op (\S+) \(domain '[^']*', opset \d+\) is not supported", reason)
    return "op not supported: " + m.group(1) if m else reason_group(reason)


def write_report(path, results, data_dir, ckptc, jobs, seconds):
    rows = ops_def_rows()
    counts = collections.Counter(r["status"] for r in results)
    n_var = sum("changes" in r for r in results)
    by_op = collections.defaultdict(collections.Counter)
    for r in results:
        for op in r["ops"]:
            by_op[op][r["status"]] += 1
    rel = os.path.relpath(ckptc, ROOT) if ckptc.startswith(ROOT + os.sep) else ckptc
    L = ["# ONNX backend node tests: compiled, built and run by ckptc\n"]
    L.append("Generated by `tests/onnx_conformance.py` on %s from the node tests of ONNX %s (generated into `%s`, "
             "never committed) with `%s`: each model is compiled with `ckptc model.onnx --infer -o DIR` (symbolic "
             "dims bound with `--dim` from the input tensors), built with `make -C DIR`, run on "
             "`test_data_set_0`'s inputs, and every output is compared with `output_*.pb`: same dtype and shape, "
             "floats within rtol %g / atol %g with NaNs at the same positions, other dtypes exact. "
             "%d tests took %.0f s with `--jobs %d` on %d CPUs. Do not edit by hand: rerun "
             "`/usr/bin/python3 tests/onnx_conformance.py build/ckptc WORKDIR`.\n" %
             (datetime.date.today().isoformat(), onnx.__version__, data_dir, rel, RTOL, ATOL, len(results), seconds,
              jobs, os.cpu_count() or 1))
    L.append("- PASS: every output matches; for the random ops ckptc runs (Bernoulli, RandomUniform[Like], "
             "RandomNormal[Like]) the dtype, shape and 0/1 support only, listed below under \"Random ops\".")
    L.append("- FAIL: a wrong value, shape or dtype, a missing output, a crash or signal, a program exiting nonzero, "
             "a make failure (generated code must always compile), ckptc exiting with neither 0 nor 2, or a "
             "timeout (%d s per test)." % TIMEOUT_S)
    L.append("- SKIP: ckptc refused the model at compile time (exit 2; its first error line is the reason), or the "
             "runner did not run it: symbolic dims the test data cannot bind (`dynamic`), or expected outputs "
             "drawn from NumPy's random generator by an op ckptc lacks or by Dropout in training mode with ratio "
             "> 0 (`%s`), which ckptc's own generator cannot reproduce.\n" % RNG_REASON)
    L.append("**%d tests (%d node tests + %d variants): %d passed, %d failed, %d skipped.**\n" %
             (len(results), len(results) - n_var, n_var, counts["PASS"], counts["FAIL"], counts["SKIP"]))

    L.append("## Failures\n")
    fails = sorted((r for r in results if r["status"] == "FAIL"), key=lambda r: r["name"])
    if not fails:
        L.append("None.\n")
    for r in fails:
        L.append("- `%s` (%s): %s" % (r["name"], ", ".join(r["ops"]), r["reason"]))
        for dl in r["details"]:
            L.append("  - %s" % dl)
    L.append("")

    var = sorted((r for r in results if "changes" in r), key=lambda r: r["name"])
    L.append("## Variants (%d)\n" % len(var))
    L.append("Node tests that ckptc refused only because they are stamped with an older opset (whose ops did not "
             "change since) or because they feed shape-like inputs at run time, compiled again with the same "
             "meaning: re-stamped with ckptc's lowest opset (`+opsetN`) and/or with those inputs turned into "
             "initializers holding the test's data (`+const`). The original counts as a SKIP, the variant as a "
             "test of its own.\n")
    for r in var:
        L.append("- `%s`: %s (%s)%s%s" % (r["name"], r["status"], r["changes"],
                                          (": " + r["reason"]) if r["status"] != "PASS" else "",
                                          " — no kernel ran" if r.get("kernels") == 0 else ""))
    L.append("")
    rnd = sorted(r["name"] for r in results if r.get("random"))
    L.append("### Random ops (%d)\n" % len(rnd))
    L.append("Tests of Bernoulli and the Random* ops: ckptc draws from its own counter-based generator, so the values "
             "cannot equal NumPy's; checked are the dtype, the shape and, where NumPy's draw is all 0/1, that ckptc's "
             "is too. Their statistics are checked by `tests/random_ops_test.py`: %s\n" %
             (", ".join("`%s` %s" % (r["name"], r["status"]) for r in results if r.get("random")) or "none"))
    nok = sorted(r["name"] for r in results if r["status"] == "PASS" and r.get("kernels") == 0)
    L.append("### Passes that ran no kernel (%d)\n" % len(nok))
    L.append("The generated step has no kernel call: ckptc computed the outputs at compile time (constant "
             "folding, e.g. a `+const` variant whose inputs all became constants) or every node is a view. They "
             "check the folder and the program frame, not a kernel: %s\n" % (", ".join("`%s`" % n for n in nok) or "none"))

    L.append("## Per op\n")
    L.append("A test counts once for every distinct op in its model (the `_expanded` function tests use several "
             "ops); variants count too. `family` is the op's kernel family in `ir/ops.def` (blank: not supported).\n")
    L.append("| op | family | pass | fail | skip |")
    L.append("|---|---|---:|---:|---:|")
    sup = supported_ops()
    for op in sorted(set(by_op) | set(rows), key=lambda op: (op not in sup, op.lower())):
        c = by_op[op]
        L.append("| %s | %s | %d | %d | %d |" % (op, rows.get(op, "(loader)" if op == "Constant" else ""),
                                                 c["PASS"], c["FAIL"], c["SKIP"]))
    L.append("")

    L.append("## Supported ops (%d rows of `ir/ops.def`, plus Constant)\n" % len(rows))
    L.append(", ".join("%s (%s)" % (op, fam) for op, fam in rows.items()) + "\n")

    skips = [r for r in results if r["status"] == "SKIP"]
    groups = collections.defaultdict(list)
    for r in skips:
        groups[skip_key(r["reason"])].append(r)
    order = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    L.append("## Skip reasons (%d skips, %d reasons)\n" % (len(skips), len(groups)))
    L.append("Reasons are ckptc's first error line with names, numbers and shapes abstracted away.\n")
    L.append("| count | reason |")
    L.append("|---:|---|")
    for k, rs in order:
        L.append("| %d | %s |" % (len(rs), k.replace("|", "\\|")))
    L.append("")
    L.append("### Tests per reason\n")
    for k, rs in order:
        L.append("- **%s** (%d): %s" % (k.replace("|", "\\|"), len(rs),
                                       ", ".join("`%s`" % r["name"] for r in sorted(rs, key=lambda r: r["name"]))))
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


# ---------------------------------------------------------------- main

def fresh_build_dir(parent):
    """A new directory for this run's builds: PARENT/run-PID-XXXX. Runs sharing a WORKDIR (several
    engineers, or CI jobs) never see each other's files, and nothing is reused across runs; the
    directories of runs whose process is gone are removed."""
    os.makedirs(parent, exist_ok=True)
    for d in glob.glob(os.path.join(parent, "run-*")):
        m = re.match(r"run-(\d+)-", os.path.basename(d))
        if m and int(m.group(1)) != os.getpid():
            try:
                os.kill(int(m.group(1)), 0)
            except ProcessLookupError:
                shutil.rmtree(d, ignore_errors=True)
            except PermissionError:
                pass
    return tempfile.mkdtemp(prefix="run-%d-" % os.getpid(), dir=parent)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ckptc", help="path to the ckptc binary")
    ap.add_argument("workdir", help="where test data is generated (once) and tests are built")
    ap.add_argument("--filter", default=None, metavar="REGEX", help="only tests whose name matches (re.search)")
    ap.add_argument("--jobs", type=int, default=2, help="tests run at once (default 2)")
    ap.add_argument("--keep", action="store_true", help="keep each test's build directory (under "
                    "WORKDIR/conformance/run-PID-*/)")
    ap.add_argument("--report", default=None, help="markdown report (default: tests/onnx_conformance.md; "
                    "none with --filter)")
    a = ap.parse_args()
    if a.report is None and not a.filter:
        a.report = os.path.join(ROOT, "tests", "onnx_conformance.md")
    ckptc = os.path.abspath(a.ckptc)
    if not os.access(ckptc, os.X_OK) or os.path.isdir(ckptc):
        sys.exit("onnx_conformance.py: %s is not an executable" % ckptc)
    if a.jobs < 1:
        sys.exit("onnx_conformance.py: --jobs must be at least 1")
    try:
        pat = re.compile(a.filter) if a.filter else None
    except re.error as e:
        sys.exit("onnx_conformance.py: --filter: %s" % e)
    t0 = time.monotonic()
    workdir = os.path.abspath(a.workdir)
    data = node_data_dir(workdir)
    tests = sorted(d for d in glob.glob(os.path.join(data, "test_*")) if os.path.exists(os.path.join(d, "model.onnx")))
    if pat:
        tests = [t for t in tests if pat.search(os.path.basename(t))]
    if not tests:
        sys.exit("onnx_conformance.py: no node tests%s under %s" % (" match the filter" if pat else "", data))
    build = fresh_build_dir(os.path.join(workdir, "conformance"))
    sup = supported_ops()
    results = []
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futs = {pool.submit(run_test, (ckptc, t, sup, build, a.keep)): t for t in tests}
        for k, f in enumerate(concurrent.futures.as_completed(futs), 1):
            try:
                results += f.result()
            except Exception as e:  # a bug of this script: say so, count it, go on
                results.append(dict(new_result(os.path.basename(futs[f]), [], {}), status="FAIL",
                                    reason="the runner itself failed: %s: %s" % (type(e).__name__, e),
                                    details=traceback.format_exc().splitlines()[-6:]))
            if k % 100 == 0 or k == len(futs):
                print("%d/%d node tests done (%.0f s)" % (k, len(futs), time.monotonic() - t0), flush=True)
    results.sort(key=lambda r: r["name"])
    if a.keep:
        print("build directories kept in %s" % build)
    else:
        shutil.rmtree(build, ignore_errors=True)
    seconds = time.monotonic() - t0

    for r in results:
        if r["status"] == "FAIL":
            print("FAIL %s: %s" % (r["name"], r["reason"]))
            for dl in r["details"]:
                print("     %s" % dl)
    c = collections.Counter(r["status"] for r in results)
    if a.report:
        write_report(a.report, results, data, ckptc, a.jobs, seconds)
        print("report: %s" % a.report)
    if a.filter:  # a focused run: say why each test was skipped
        for r in results:
            if r["status"] == "SKIP":
                print("SKIP %s: %s" % (r["name"], r["reason"]))
    print("%.0f s with --jobs %d" % (seconds, a.jobs))
    print("%d passed, %d failed, %d skipped" % (c["PASS"], c["FAIL"], c["SKIP"]))
    return 1 if c["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
