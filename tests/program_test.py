#!/usr/bin/python3
"""program_test.py — what a user sees when they feed a generated program bad input.

    /usr/bin/python3 tests/program_test.py CKPTC SAMPLES_DIR WORKDIR

Compiles samples/mlp.onnx once (`--infer --dim batch=8`; input x float32 (8,64), output logits)
and runs the program the way a user would, with mistakes:

- bad command lines and input files: a missing .npy, an unknown input name, a wrong shape, a
  wrong dtype (float64 for a float32 input), a truncated .npy, a Fortran-order .npy, a file that
  is not .npy at all, a bad --seed (not a number, negative), an unknown flag, an --input without
  a file, a stray argument; a --dump-outputs directory that cannot be created (a new one is
  created: that is not an error);
- bad weights: a weights.bin with one payload byte flipped (next to the program, where it is
  found by default), weights from another model (a different one, and mlp with a parameter
  renamed: the same bytes in another layout), a truncated weights file, a file that is not a
  weights file, a missing one. Weights are matched by layout, not value: mlp's weights.bin with
  one value changed (what saving trained weights gives) must load, and change the output.

Each must exit 2 with exactly one line on stderr, `model: error: ...`, naming the problem (the
file, input, flag or value, and what is wrong with it), print nothing on stdout, and leave nothing
behind: no output file (nor *.tmp) in the --dump-outputs directory, no --report file (nor its
.tmp). A half-written output is worse than none: a script would read it.

Also: a good run exits 0 and writes the outputs and the report with no *.tmp left; inputs not
given are filled deterministically from --seed (same seed -> same output bytes, another seed ->
other outputs, no --seed = --seed 0); --help exits 0 with the usage on stdout.

Python: Debian's /usr/bin/python3 with numpy and onnx (to write the other models). The last line
is `N passed, N failed`; exit status 1 if anything failed.
"""
import filecmp
import glob
import os
import shutil
import struct
import subprocess
import sys

# onnx_common re-executes under Debian's python3 when needed and restores the NumPy aliases that
# python3-onnx 1.12 needs: it must be imported before onnx
from onnx_common import np, onnx  # noqa: E402
from onnx import helper, numpy_helper, TensorProto  # noqa: E402

TIMEOUT_S = 120
passed, failed = 0, 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   %s" % what)
    else:
        failed += 1
        print("FAIL %s%s" % (what, (": " + detail) if detail else ""))
    return ok


def run(cmd, cwd=None):
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return -1000, "", "timeout after %d s" % TIMEOUT_S
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def compile_model(ckptc, model, out, *flags):
    rc, _, err = run([ckptc, model, "--infer", *flags, "-o", out])
    if rc == 0:
        rc, o2, err = run(["make", "-s", "-C", out])
        err = o2 + err
    return rc, err


class Case:
    """A fresh directory for one run: out/ (for --dump-outputs) and the report path."""
    n = 0

    def __init__(self, work):
        Case.n += 1
        self.dir = os.path.join(work, "case%02d" % Case.n)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.out = os.path.join(self.dir, "out")
        os.makedirs(self.out)
        self.report = os.path.join(self.dir, "report.json")

    def leftovers(self):
        """Files the run left behind that an error must not leave."""
        left = [os.path.join("out", f) for f in sorted(os.listdir(self.out))] if os.path.isdir(self.out) else []
        left += [os.path.basename(p) for p in glob.glob(self.report + "*")]
        return left


def expect_error(what, prog, args, needles, work, dump=True):
    """Runs prog with args (+ --dump-outputs and --report into a fresh directory); a needle is a
    string the message must contain, or a tuple of which it must contain one."""
    c = Case(work)
    cmd = [prog, *args, "--report", c.report]
    if dump:
        cmd += ["--dump-outputs", c.out]
    rc, out, err = run(cmd)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    problems = []
    if rc != 2:
        problems.append("exit %d, expected 2" % rc)
    if len(lines) != 1 or not lines[0].startswith("model: error: "):
        problems.append("stderr should be one 'model: error: ...' line, got %r" % err[:500])
    msg = lines[0] if lines else ""
    for nd in needles:
        alts = nd if isinstance(nd, tuple) else (nd,)
        if not any(a in msg for a in alts):
            problems.append("the message does not say %s" % " or ".join(repr(a) for a in alts))
    # the one line allowed: which backend the program picked (`device: cpu (...)`), printed first
    rest = [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("device: ")]
    if rest:
        problems.append("stdout not empty: %r" % out[:200])
    left = c.leftovers()
    if left:
        problems.append("left behind: %s" % ", ".join(left))
    check(what, not problems, "; ".join(problems) + (" [%s]" % msg if msg and problems else ""))


def run_seeded(prog, work, *args):
    """Runs prog with no --input; returns (exit status, stderr, bytes of every output file)."""
    c = Case(work)
    rc, _, err = run([prog, *args, "--dump-outputs", c.out])
    outs = {}
    for f in sorted(os.listdir(c.out)):
        with open(os.path.join(c.out, f), "rb") as fh:
            outs[f] = fh.read()
    return rc, err.strip(), outs


def other_models(samples, work):
    """Models derived from mlp: (label, path, --dim flags, whether mlp's program must refuse their
    weights.bin). Weights are matched by layout (the tensor table: names, dtypes, shapes, offsets),
    not by value, so that weights saved after training load into the same program."""
    base = onnx.load(os.path.join(samples, "mlp.onnx"))
    batch = ["--dim", "batch=8"]

    m = onnx.ModelProto()
    m.CopyFrom(base)
    t = m.graph.initializer[0]
    a = numpy_helper.to_array(t).copy()
    a.flat[0] += 1.0
    t.CopyFrom(numpy_helper.from_array(a, t.name))
    changed = os.path.join(work, "mlp_changed.onnx")
    onnx.save(m, changed)

    m = onnx.ModelProto()
    m.CopyFrom(base)
    t = m.graph.initializer[0]
    old_name, t.name = t.name, t.name + "_renamed"
    for n in m.graph.node:
        for i, x in enumerate(n.input):
            if x == old_name:
                n.input[i] = t.name
    renamed = os.path.join(work, "mlp_renamed.onnx")
    onnx.save(m, renamed)

    g = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["y"], name="add")], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])],
        [numpy_helper.from_array(np.arange(64, dtype=np.float32), "b")])
    tiny = os.path.join(work, "tiny.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="program_test"), tiny)
    return [("a one-Add model", tiny, [], True),
            ("mlp with a parameter renamed: same bytes, another layout", renamed, batch, True),
            ("mlp with one weight value changed: same layout", changed, batch, False)]


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: program_test.py CKPTC SAMPLES_DIR WORKDIR")
    ckptc, samples, work = (os.path.abspath(a) for a in sys.argv[1:])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    prog_dir = os.path.join(work, "mlp")
    rc, err = compile_model(ckptc, os.path.join(samples, "mlp.onnx"), prog_dir, "--dim", "batch=8")
    if not check("compile and build samples/mlp.onnx --dim batch=8", rc == 0, err.strip()[-600:]):
        print("%d passed, %d failed" % (passed, failed))
        return 1
    prog = os.path.join(prog_dir, "model")
    weights = os.path.join(prog_dir, "weights.bin")

    # ---- input files
    good = os.path.join(work, "x.npy")
    np.save(good, np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32))
    c = Case(work)
    rc, out, err = run([prog, "--input", "x=" + good, "--dump-outputs", c.out, "--report", c.report])
    left = c.leftovers()
    check("a good run exits 0 and writes out/logits.npy and the report, no *.tmp",
          rc == 0 and left == ["out/logits.npy", "report.json"], "exit %d, files %s, stderr %r" % (rc, left, err))

    missing = os.path.join(work, "no_such_input.npy")
    expect_error("missing .npy file", prog, ["--input", "x=" + missing], [missing], work)
    expect_error("unknown input name", prog, ["--input", "nosuch=" + good], ["'nosuch'"], work)
    shape = os.path.join(work, "x_shape.npy")
    np.save(shape, np.zeros((4, 64), np.float32))
    expect_error("wrong shape (4,64) for x (8,64)", prog, ["--input", "x=" + shape],
                 ["'x'", "(4,64)", "(8,64)"], work)
    f64 = os.path.join(work, "x_f64.npy")
    np.save(f64, np.zeros((8, 64), np.float64))
    expect_error("wrong dtype: float64 array for the float32 input", prog, ["--input", "x=" + f64],
                 ["'x'", "float64", "float32"], work)
    trunc = os.path.join(work, "x_trunc.npy")
    with open(good, "rb") as f:
        data = f.read()
    with open(trunc, "wb") as f:
        f.write(data[:-100])
    expect_error("truncated .npy", prog, ["--input", "x=" + trunc], [trunc, "truncated"], work)
    trunc_h = os.path.join(work, "x_trunc_header.npy")
    with open(trunc_h, "wb") as f:
        f.write(data[:40])
    expect_error("truncated .npy header", prog, ["--input", "x=" + trunc_h], [trunc_h, "truncated"], work)
    fort = os.path.join(work, "x_fortran.npy")
    np.save(fort, np.asfortranarray(np.zeros((8, 64), np.float32)))
    with open(fort, "rb") as f:
        assert b"'fortran_order': True" in f.read(128)
    expect_error("Fortran-order .npy", prog, ["--input", "x=" + fort], [fort, ("Fortran", "fortran")], work)
    text = os.path.join(work, "x.txt")
    with open(text, "w") as f:
        f.write("1 2 3\n")
    expect_error("a file that is not .npy", prog, ["--input", "x=" + text], [text, "npy"], work)
    expect_error("--input without a file", prog, ["--input", "x="], ["--input", "NAME=FILE"], work)

    # ---- flags
    expect_error("bad --seed (not a number)", prog, ["--seed", "abc"], ["--seed", "abc"], work)
    expect_error("bad --seed (negative)", prog, ["--seed", "-1"], ["--seed", "-1"], work)
    expect_error("bad --seed (too large)", prog, ["--seed", "99999999999999999999999"],
                 ["--seed", "99999999999999999999999"], work)
    expect_error("unknown flag", prog, ["--frob"], ["--frob"], work)
    expect_error("--seed without a value", prog, ["--input", "x=" + good, "--seed"], ["--seed"], work, dump=False)
    expect_error("stray argument", prog, ["extra"], ["extra"], work)
    newdir = os.path.join(work, "new_out_dir")
    rc, out, err = run([prog, "--input", "x=" + good, "--dump-outputs", newdir])
    check("--dump-outputs into a new directory: created, outputs written",
          rc == 0 and os.path.exists(os.path.join(newdir, "logits.npy")), "exit %d %s" % (rc, err.strip()))
    nodir = os.path.join(work, "no_such_parent", "out")
    c = Case(work)
    rc, out, err = run([prog, "--input", "x=" + good, "--dump-outputs", nodir, "--report", c.report])
    lines = [ln for ln in err.splitlines() if ln.strip()]
    ok = rc in (1, 2) and len(lines) == 1 and lines[0].startswith("model: error: ") and nodir in lines[0] and \
        not c.leftovers() and not os.path.exists(nodir)
    check("--dump-outputs into a directory that cannot be created: an error naming it, nothing written", ok,
          "exit %d, stderr %r, left behind %s" % (rc, err.strip(), c.leftovers()))

    # ---- weights
    with open(weights, "rb") as f:
        wdata = bytearray(f.read())
    payload_at = struct.unpack_from("<Q", wdata, 32)[0] if len(wdata) >= 40 else 0
    if not 40 <= payload_at < len(wdata):
        payload_at = len(wdata) // 2
    corrupt_dir = os.path.join(work, "corrupt")
    os.makedirs(corrupt_dir)
    shutil.copy2(prog, corrupt_dir)
    bad = bytearray(wdata)
    bad[payload_at + (len(bad) - payload_at) // 2] ^= 0x01
    cw = os.path.join(corrupt_dir, "weights.bin")
    with open(cw, "wb") as f:
        f.write(bad)
    expect_error("weights.bin with a flipped payload byte (found next to the program)",
                 os.path.join(corrupt_dir, "model"), ["--input", "x=" + good],
                 [cw, ("corrupt", "checksum")], work)
    base_run = Case(work)
    run([prog, "--input", "x=" + good, "--dump-outputs", base_run.out])
    for label, model, flags, refuse in other_models(samples, work):
        d = os.path.join(work, os.path.basename(model)[:-5])
        rc, err = compile_model(ckptc, model, d, *flags)
        if not check("compile %s" % label, rc == 0, err.strip()[-400:]):
            continue
        w = os.path.join(d, "weights.bin")
        if refuse:
            expect_error("--weights from another model (%s)" % label, prog,
                         ["--input", "x=" + good, "--weights", w], [w], work)
            continue
        c = Case(work)
        rc, out, err = run([prog, "--input", "x=" + good, "--weights", w, "--dump-outputs", c.out])
        differ = rc == 0 and not filecmp.cmp(os.path.join(c.out, "logits.npy"),
                                             os.path.join(base_run.out, "logits.npy"), shallow=False)
        check("--weights from %s loads, and its values are used" % label, differ,
              "exit %d %s (outputs %s)" % (rc, err.strip(), "differ" if differ else "identical or missing"))
    tw = os.path.join(work, "weights_truncated.bin")
    with open(tw, "wb") as f:
        f.write(wdata[:len(wdata) - 64])
    expect_error("truncated weights file", prog, ["--input", "x=" + good, "--weights", tw],
                 [tw, "truncated"], work)
    expect_error("--weights naming a file that is not a weights file", prog,
                 ["--input", "x=" + good, "--weights", good], [good], work)
    nw = os.path.join(work, "no_such_weights.bin")
    expect_error("--weights naming a missing file", prog, ["--input", "x=" + good, "--weights", nw], [nw], work)

    # ---- seeds
    r1, r1b, r2, r0, rd = (run_seeded(prog, work, *a) for a in
                           (["--seed", "1"], ["--seed", "1"], ["--seed", "2"], ["--seed", "0"], []))
    ok = all(r[0] == 0 and r[2] for r in (r1, r1b, r2, r0, rd))
    check("runs with inputs filled from --seed exit 0 with outputs", ok,
          "; ".join("exit %d %s" % (r[0], r[1]) for r in (r1, r1b, r2, r0, rd)))
    check("same --seed, same output bytes", ok and r1[2] == r1b[2])
    check("different --seed, different outputs", ok and r1[2] != r2[2])
    check("no --seed is --seed 0", ok and r0[2] == rd[2])

    # ---- help
    rc, out, err = run([prog, "--help"])
    check("--help exits 0 with the usage on stdout", rc == 0 and "usage:" in out and "--input" in out and not err,
          "exit %d stdout %r stderr %r" % (rc, out[:200], err[:200]))

    leftover_tmp = [p for p in glob.glob(os.path.join(work, "**", "*.tmp"), recursive=True)]
    check("no *.tmp anywhere under WORKDIR", not leftover_tmp, ", ".join(leftover_tmp))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
