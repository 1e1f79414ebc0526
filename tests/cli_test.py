#!/usr/bin/python3
"""CLI tests: run the ckptc binary the way a user does and check what they see.

    cli_test.py CKPTC TEST_DATA_DIR SAMPLES_DIR

- every sample: `ckptc inspect --json` succeeds and its inputs/outputs have exactly the dtypes and
  shapes PyTorch saw (recorded by samples/export.py in samples/NAME.json);
- every bad-input class: exit status 2, only `ckptc: error:` lines on stderr, nothing on stdout,
  and the words a user needs (node name, op, shapes, file, limit) in the message;
- flags: --help, --version, unknown commands and options, bad --dim values.

Standard library only. Ends with the line `N passed, N failed`.
"""
import json
import os
import subprocess
import sys
import time

CKPTC, DATA, SAMPLES = sys.argv[1], sys.argv[2], sys.argv[3]
passed, failed = 0, 0


def run(*args):
    p = subprocess.run([CKPTC, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {detail}")


def expect_error(name, args, *needles):
    rc, out, err = run(*args)
    lines = [l for l in err.splitlines() if l]
    ok = rc == 2 and out == "" and lines and all(l.startswith("ckptc: error: ") for l in lines)
    ok = ok and all(any(n in l for l in lines) for n in needles)
    check(name, ok, f"rc={rc} stdout={out[:200]!r} stderr={err[:600]!r} want {needles}")


# ---------------------------------------------------------------- flags
rc, out, err = run("--help")
check("help", rc == 0 and "usage: ckptc" in out and "inspect" in out, out)
rc, out, err = run("--version")
check("version", rc == 0 and out.startswith("ckptc ") and "opsets 13-18" in out, out)
rc, out, err = run("inspect", "--help")
check("inspect help", rc == 0 and "--dim NAME=N" in out, out)
rc, out, err = run()
check("no args", rc == 2 and "usage" in err, err)
expect_error("unknown command", ["frobnicate"], "unknown command 'frobnicate'")
expect_error("unknown option", ["--frob"], "unknown option '--frob'")
expect_error("unknown inspect option", ["inspect", f"{SAMPLES}/mlp.onnx", "--frob"], "unknown option '--frob'")
expect_error("missing model", ["inspect"], "missing MODEL.onnx")
expect_error("dim without value", ["inspect", f"{SAMPLES}/mlp.onnx", "--dim"], "needs a value")
for bad in ["batch", "batch=", "batch=0", "batch=-3", "batch=x", "=4", "batch=99999999999999999999"]:
    expect_error(f"bad --dim {bad}", ["inspect", f"{SAMPLES}/mlp.onnx", "--dim", bad], f"--dim '{bad}'")
expect_error("dim twice", ["inspect", f"{SAMPLES}/mlp.onnx", "--dim", "batch=2", "--dim", "batch=3"], "given twice")
expect_error("dim unknown name", ["inspect", f"{SAMPLES}/gpt.onnx", "--dim", "batch=2"], "no graph input has a dimension named 'batch'")
expect_error("two models", ["inspect", f"{SAMPLES}/gpt.onnx", f"{SAMPLES}/mlp.onnx"], "unexpected argument")

# ---------------------------------------------------------------- bad inputs
d = DATA
expect_error("missing file", ["inspect", f"{d}/nope.onnx"], "cannot open", "nope.onnx")
expect_error("directory", ["inspect", d], "not a regular file")
expect_error("empty file", ["inspect", f"{d}/empty.onnx"], "empty")
expect_error("garbage", ["inspect", f"{d}/garbage.onnx"], "cannot parse", "garbage.onnx")
expect_error("truncated", ["inspect", f"{d}/truncated.onnx"], "cannot parse")
expect_error("not a model", ["inspect", f"{d}/not_a_model.onnx"], "not an ONNX model")
expect_error("no graph", ["inspect", f"{d}/no_graph.onnx"], "no graph")
expect_error("opset 12", ["inspect", f"{d}/opset12.onnx"], "opset 12", "13 to 18")
expect_error("opset 19", ["inspect", f"{d}/opset19.onnx"], "opset 19")
expect_error("unsupported ops", ["inspect", f"{d}/unsupported_ops.onnx"],
             "node 'my_lrn': op LRN", "node 'my_topk': op TopK", "node 'custom_foo': op Foo (domain 'com.example'")
rc, out, err = run("inspect", f"{d}/unsupported_ops.onnx")
check("unsupported ops: one line each", len(err.splitlines()) == 3 and "my_relu" not in err, err)
expect_error("bad shapes", ["inspect", f"{d}/bad_shapes.onnx"], "node 'bad_add' (Add)", "(2,3)", "(4,5)")
expect_error("bad matmul", ["inspect", f"{d}/bad_matmul.onnx"], "node 'bad_mm' (MatMul)", "3 vs 4")
expect_error("initializer length", ["inspect", f"{d}/init_len_mismatch.onnx"], "initializer 'w'", "20 bytes")
expect_error("initializer typed length", ["inspect", f"{d}/init_len_mismatch_typed.onnx"], "initializer 'w'", "4 elements")
expect_error("external missing", ["inspect", f"{d}/ext_missing.onnx"], "does_not_exist.bin")
expect_error("external short", ["inspect", f"{d}/ext_short.onnx"], "too short")
expect_error("external escape", ["inspect", f"{d}/ext_escape.onnx"], "escapes the model directory")
expect_error("unbound dim", ["inspect", f"{d}/dim_param.onnx"], "'batch'", "--dim batch=N")

# ---------------------------------------------------------------- samples vs PyTorch's shapes
for name in ["mlp", "gpt", "bert", "resnet", "gpt_deep"]:
    ref = json.load(open(os.path.join(SAMPLES, f"{name}.json")))
    args = ["inspect", os.path.join(SAMPLES, f"{name}.onnx"), "--json"]
    for k, v in ref.get("dims", {}).items():
        args += ["--dim", f"{k}={v}"]
    t0 = time.perf_counter()
    rc, out, err = run(*args)
    dt = time.perf_counter() - t0
    if rc != 0:
        check(f"sample {name} loads", False, err)
        continue
    got = json.loads(out)
    for kind in ["inputs", "outputs"]:
        want = [(x["name"], x["dtype"], x["shape"]) for x in ref[kind]]
        have = [(x["name"], x["dtype"], x["shape"]) for x in got[kind]]
        check(f"sample {name} {kind}", want == have, f"want {want} have {have}")
    check(f"sample {name} node count", got["onnx_nodes"] == ref["node_count"], f"{got['onnx_nodes']} vs {ref['node_count']}")
    check(f"sample {name} no Shape left", "Shape" not in got["op_histogram"], got["op_histogram"])
    rc, text, err = run(*[a for a in args if a != "--json"])
    check(f"sample {name} text", rc == 0 and "opset 17" in text and len(text.splitlines()) > got["nodes_after_folding"], err)
    print(f"  {name}: {got['onnx_nodes']} nodes in the file, {got['nodes_after_folding']} after folding, "
          f"inspect --json took {dt * 1000:.1f} ms (process included)")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
