#!/usr/bin/python3
"""onnx_shapes.py — conformance of ckptc's loader + static shape inference against the official
ONNX backend node tests (a reference nobody on the team wrote).

    /usr/bin/python3 tests/onnx_shapes.py CKPTC_BINARY WORKDIR [--report FILE] [--jobs N]

For every node test (node/test_NAME/model.onnx with test_data_set_0/{input,output}_*.pb) this runs
`ckptc inspect model.onnx --json` and compares what ckptc inferred with the reference tensors:

  PASS  exit 0, every graph input and output has the dtype and shape of its .pb tensor
  FAIL  exit 0 but a dtype/shape differs, or ckptc crashed (exit not 0/2), timed out, or printed
        JSON we cannot read
  SKIP  exit 2: ckptc refused the model with a message (first error line kept as the reason).
        A refusal of a model whose ops are all in ir/ops.def (or Constant) is also counted as
        "rejected-supported-op": not a failure, but listed in the report for review (a missing
        feature, or a legitimate refusal such as a string dtype or a data-dependent shape).

Variants: the node tests feed shape-like inputs (Reshape's shape, Slice's starts, ...) at run time
and many are stamped with opsets below ckptc's lowest, which would leave Reshape/Slice/Conv/the
pools untested. When ckptc refuses an all-supported model only for those reasons, a variant with the
same meaning also runs ("NAME+opset13": re-stamped, when no op's schema changed in between;
"NAME+const": those inputs become initializers holding the test's data). Variants are tests of
their own in the counts.

Symbolic input dims (dim_param) are bound with `--dim NAME=N` from the shapes of the test's input
tensors (graph input i <-> input_i.pb); a test whose data cannot bind them consistently is SKIPped
as "dynamic" without running ckptc. Test data comes from Debian's python3-onnx: the installed
copy under onnx/backend/test/data/node when it exists, else `onnx.backend.test.cmd_tools
generate-data -o WORKDIR` (about 5 s; the generated data is never committed).

Writes a per-op table and the lists of failures and rejected-supported-op cases to
tests/onnx_node_tests.md (or --report FILE); the last stdout line is `N passed, N failed, N skipped`.
Exit status 1 if anything FAILed, else 0.
"""
import argparse
import collections
import datetime
import glob
import json
import multiprocessing
import os
import re
import subprocess
import sys

# onnx_common re-executes under Debian's python3 when needed and restores the NumPy aliases that
# python3-onnx 1.12 needs: it must be imported before onnx
from onnx_common import (ROOT, OLD_OPSET, RUNTIME_CONST, node_data_dir, promote_inputs, reason_group,  # noqa: E402
                         reference, restamp_opset, strip_error_prefix, supported_ops, walk_ops)
import onnx  # noqa: E402

TIMEOUT_S = 20


# ---------------------------------------------------------------- one test

def inspect(ckptc, model_path, ins, outs, dims, res):
    """Runs ckptc on one model and fills res's status/reason/details."""
    cmd = [ckptc, "inspect", model_path, "--json"]
    for k, v in sorted(dims.items()):
        cmd += ["--dim", "%s=%d" % (k, v)]
    res["cmd"] = " ".join(cmd)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        res.update(status="FAIL", reason="timeout after %d s" % TIMEOUT_S)
        return res
    except OSError as e:  # e.g. the binary is being relinked under us
        res.update(status="FAIL", reason="cannot run ckptc: %s" % e)
        return res
    err_lines = [ln for ln in p.stderr.decode(errors="replace").splitlines() if ln.strip()]
    if p.returncode == 2:
        first = next((ln for ln in err_lines if "ckptc: error:" in ln), err_lines[0] if err_lines else "(no message)")
        first = strip_error_prefix(first)  # so that reasons group across tests
        res.update(status="SKIP", reason=first)
        return res
    if p.returncode != 0:
        sig = " (signal %d)" % -p.returncode if p.returncode < 0 else ""
        res.update(status="FAIL", reason="crash: exit %d%s" % (p.returncode, sig), details=err_lines[-5:])
        return res
    try:
        j = json.loads(p.stdout.decode())
    except ValueError as e:
        res.update(status="FAIL", reason="exit 0 but unreadable JSON: %s" % e)
        return res
    diffs = []
    exp_in = [(name, ref) for name, ref, _ in ins]
    for what, exp, got in (("input", exp_in, j.get("inputs", [])), ("output", outs, j.get("outputs", []))):
        if len(exp) != len(got):
            diffs.append("%d graph %ss, ckptc reports %d" % (len(exp), what, len(got)))
        for (name, ref), v in zip(exp, got):
            if v.get("name") != name:
                diffs.append("%s '%s': ckptc reports '%s' at its position" % (what, name, v.get("name")))
            if ref is None:
                if what == "output":
                    diffs.append("output '%s' has no tensor reference, ckptc says %s %s" % (name, v.get("dtype"), v.get("shape")))
                continue
            if (v.get("dtype"), v.get("shape")) != ref:
                diffs.append("%s '%s': ckptc %s %s, expected %s %s" %
                             (what, name, v.get("dtype"), v.get("shape"), ref[0], ref[1]))
    if diffs:
        res.update(status="FAIL", reason=diffs[0], details=diffs)
    else:
        res.update(status="PASS")
    return res


# Variants. The node tests feed shape-like inputs (Reshape's shape, Slice's starts, Trilu's k, ...)
# as graph inputs, and many are stamped with opsets older than ckptc's lowest, so the official
# models leave much of the shape inference unexercised. When ckptc refuses a model whose ops are
# all supported for one of those two reasons only, the script also runs a variant with the same
# meaning: re-stamped with ckptc's lowest opset ("+opsetN", only when every op's schema at that
# opset is the one the model was written for), and/or with the refused inputs turned into
# initializers holding the test's data ("+const"). Variants are tests of their own in the counts.

def save_variant(model, workdir, name):
    vdir = os.path.join(workdir, "variants", name)
    os.makedirs(vdir, exist_ok=True)
    path = os.path.join(vdir, "model.onnx")
    onnx.save(model, path)
    return path


def run_variant(ckptc, model, res, ins, outs, dims, workdir):
    """res is a SKIP; returns the variant's result dict, or None when no variant applies."""
    name, changes, var = res["name"], [], None
    if OLD_OPSET.search(res["reason"]):
        target = restamp_opset(model, res["reason"])
        if target is None:
            return None
        name += "+opset%d" % target
        changes.append("opset %d" % target)
        var = dict(res, name=name, status=None, reason="", details=[])
        inspect(ckptc, save_variant(model, workdir, name), ins, outs, dims, var)
    promoted = []
    for _ in range(8):  # Slice has up to 4 such inputs; each run reports the first one
        cur = var or res
        m = RUNTIME_CONST.search(cur["reason"]) if cur["status"] == "SKIP" else None
        src = [x for x in ins if m and x[0] == m.group(1) and x[1] is not None]
        if not src:
            break
        ins = promote_inputs(model, ins, [src[0][0]])
        promoted.append(src[0][0])
        var = dict(res, name=name + "+const", status=None, reason="", details=[])
        inspect(ckptc, save_variant(model, workdir, name + "+const"), ins, outs, dims, var)
    if var is None:
        return None
    if promoted:
        changes.append("initializers: " + ", ".join(promoted))
    var["changes"] = "; ".join(changes)
    var["rejected_supported"] = var["status"] == "SKIP"
    return var


def run_one(job):
    """Runs ckptc on one test directory; returns a list of result dicts: the test itself, then its
    variant when one applies."""
    ckptc, tdir, supported, workdir = job
    name = os.path.basename(tdir)
    model = onnx.load(os.path.join(tdir, "model.onnx"))
    ops = sorted(walk_ops(model.graph, set()))
    ins, outs, dims, problems = reference(tdir, model.graph)
    res = {"name": name, "ops": ops, "status": None, "reason": "", "details": [], "rejected_supported": False,
           "bound": dict(dims)}
    if problems:  # symbolic dims the test data cannot bind consistently: nothing to compare with
        res.update(status="SKIP", reason="dynamic: " + "; ".join(problems))
        return [res]
    inspect(ckptc, os.path.join(tdir, "model.onnx"), ins, outs, dims, res)
    if res["status"] != "SKIP":
        return [res]
    res["rejected_supported"] = all(op in supported for op in ops)
    var = run_variant(ckptc, model, res, ins, outs, dims, workdir) if res["rejected_supported"] else None
    return [res] + ([var] if var else [])


# ---------------------------------------------------------------- report

def write_report(path, results, supported, data_dir, ckptc):
    counts = collections.Counter(r["status"] for r in results)
    rej = [r for r in results if r["rejected_supported"]]
    fails = [r for r in results if r["status"] == "FAIL"]
    by_op = collections.defaultdict(collections.Counter)
    for r in results:
        for op in r["ops"]:
            by_op[op][r["status"]] += 1
            if r["rejected_supported"]:
                by_op[op]["REJ"] += 1
    L = []
    L.append("# ONNX backend node tests: ckptc loader + static shape inference\n")
    L.append("Generated by `tests/onnx_shapes.py` on %s from the node tests of ONNX %s (`%s`), "
             "running `%s inspect MODEL --json` on each and comparing the graph inputs' and outputs' "
             "dtypes and shapes with `test_data_set_0/{input,output}_*.pb`. Symbolic input dims are bound "
             "with `--dim` from the input tensors. Do not edit by hand: rerun the script.\n" %
             (datetime.date.today().isoformat(), onnx.__version__,
              data_dir, os.path.relpath(ckptc, ROOT) if ckptc.startswith(ROOT) else ckptc))
    L.append("- PASS: exit 0 and every input/output dtype and shape match the reference.")
    L.append("- FAIL: exit 0 with a mismatch, or a crash (exit neither 0 nor 2), a timeout (%d s) or bad JSON." % TIMEOUT_S)
    L.append("- SKIP: exit 2, ckptc refused the model with a message. *rejected-supported-op* is the subset "
             "of SKIPs whose ops are all in `ir/ops.def` (or Constant): to review, not failures.\n")
    n_var = sum("changes" in r for r in results)
    L.append("**%d tests (%d node tests + %d variants): %d passed, %d failed, %d skipped "
             "(%d of them rejected-supported-op).**\n" % (len(results), len(results) - n_var, n_var, counts["PASS"],
                                                          counts["FAIL"], counts["SKIP"], len(rej)))

    L.append("## Failures\n")
    if not fails:
        L.append("None.\n")
    for r in sorted(fails, key=lambda r: r["name"]):
        L.append("- `%s` (%s): %s" % (r["name"], ", ".join(r["ops"]), r["reason"]))
        for dl in r["details"][1:]:
            L.append("  - %s" % dl)
    L.append("")

    L.append("## Rejected although every op is supported (%d)\n" % len(rej))
    groups = collections.defaultdict(list)
    variant_of = {r["name"].split("+")[0]: r for r in results if "changes" in r}
    for r in rej:
        groups[reason_group(r["reason"])].append(r)
    for key, rs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        L.append("### %s (%d)\n" % (key, len(rs)))
        for r in sorted(rs, key=lambda r: r["name"]):
            v = variant_of.get(r["name"])
            L.append("- `%s`: %s%s" % (r["name"], r["reason"],
                                       " — variant `%s`: %s" % (v["name"], v["status"]) if v else ""))
        L.append("")

    var = [r for r in results if "changes" in r]
    L.append("## Variants (%d)\n" % len(var))
    L.append("Official models that ckptc refused only because they are stamped with an older opset (whose "
             "ops did not change since) or because they feed shape-like inputs at run time, re-run with "
             "the same meaning: re-stamped with ckptc's lowest opset and/or with those inputs turned into "
             "initializers holding the test's data (models under WORKDIR/variants/). Each counts as a "
             "test of its own.\n")
    for r in sorted(var, key=lambda r: r["name"]):
        L.append("- `%s`: %s (%s)%s" % (r["name"], r["status"], r["changes"],
                                        (": " + r["reason"]) if r["status"] != "PASS" else ""))
    L.append("")

    L.append("## Per op\n")
    L.append("A test counts once for every distinct op in its model (expanded function tests use many ops). "
             "`rej` is the rejected-supported-op part of `skip`.\n")
    L.append("| op | in ops.def | pass | fail | skip | rej |")
    L.append("|---|---|---:|---:|---:|---:|")
    order = sorted(by_op, key=lambda op: (op not in supported, op.lower()))
    for op in order:
        c = by_op[op]
        L.append("| %s | %s | %d | %d | %d | %d |" % (op, "yes" if op in supported else "", c["PASS"], c["FAIL"],
                                                      c["SKIP"], c["REJ"]))
    L.append("")

    L.append("## Skip reasons (all skips, grouped)\n")
    sk = collections.Counter()
    for r in results:
        if r["status"] == "SKIP":
            m = re.search(r"op (\S+) \(domain '[^']*', opset \d+\) is not supported", r["reason"])
            sk["op not supported: " + m.group(1) if m else reason_group(r["reason"])] += 1
    L.append("| count | reason |")
    L.append("|---:|---|")
    for k, v in sorted(sk.items(), key=lambda kv: (-kv[1], kv[0])):
        L.append("| %d | %s |" % (v, k.replace("|", "\\|")))
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ckptc", help="path to the ckptc binary")
    ap.add_argument("workdir", help="where test data is generated when it is not installed")
    ap.add_argument("--report", default=None, help="markdown report (default: tests/onnx_node_tests.md, "
                    "none with -k)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-k", dest="filter", default=None, help="only tests whose name contains this")
    a = ap.parse_args()
    if a.report is None and not a.filter:
        a.report = os.path.join(ROOT, "tests", "onnx_node_tests.md")
    ckptc = os.path.abspath(a.ckptc)
    if not os.access(ckptc, os.X_OK):
        sys.exit("onnx_shapes.py: %s is not an executable" % ckptc)
    workdir = os.path.abspath(a.workdir)
    data = node_data_dir(workdir)
    tests = sorted(d for d in glob.glob(os.path.join(data, "test_*")) if os.path.exists(os.path.join(d, "model.onnx")))
    if a.filter:
        tests = [t for t in tests if a.filter in os.path.basename(t)]
    if not tests:
        sys.exit("onnx_shapes.py: no node tests found under %s" % data)
    sup = supported_ops()
    with multiprocessing.Pool(a.jobs) as pool:
        per_test = pool.map(run_one, [(ckptc, t, sup, workdir) for t in tests], chunksize=8)
    results = [r for rs in per_test for r in rs]

    for r in results:
        if r["status"] == "FAIL":
            print("FAIL %s: %s" % (r["name"], r["reason"]))
            for dl in r["details"][1:]:
                print("     %s" % dl)
    rej = [r for r in results if r["rejected_supported"]]
    if rej:
        print("\nrejected although every op is supported (%d; counted as skipped, see the report):" % len(rej))
        for r in rej:
            print("  %s: %s" % (r["name"], r["reason"]))
    c = collections.Counter(r["status"] for r in results)
    if a.report:
        write_report(a.report, results, sup, data, ckptc)
        print("\nreport: %s" % a.report)
    print("rejected-supported-op: %d (included in skipped)" % len(rej))
    print("%d passed, %d failed, %d skipped" % (c["PASS"], c["FAIL"], c["SKIP"]))
    return 1 if c["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
