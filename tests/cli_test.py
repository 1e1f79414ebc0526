#!/usr/bin/python3
"""CLI tests: run the ckptc binary the way a user does and check what they see.

    cli_test.py CKPTC TEST_DATA_DIR SAMPLES_DIR

- every sample: `ckptc inspect --json` succeeds and its inputs/outputs have exactly the dtypes and
  shapes PyTorch saw (recorded by samples/export.py in samples/NAME.json);
- every bad-input class: exit status 2, only `ckptc: error:` lines on stderr, nothing on stdout,
  and the words a user needs (node name, op, shapes, file, limit) in the message;
- flags: --help, --version, unknown commands and options, bad --dim values;
- `ckptc compare` on reports written here: escapes and non-ASCII names kept, malformed reports,
  text after the JSON and members of the wrong type refused naming the file.

Standard library only. Ends with the line `N passed, N failed`.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
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

# ---------------------------------------------------------------- compare: reading reports
# Reports written here by hand: what `ckptc compare` must read (\u escapes, non-ASCII names, every
# JSON escape) and refuse (malformed JSON, text after the value, members of the wrong type) with
# one error line naming the file, exit 2.
tmp = tempfile.mkdtemp(prefix="ckptc-cli-")


def report(name, **over):
    r = {"planned_peak_bytes": 1000, "measured_peak_bytes": 1000, "policy": "none",
         "breakdown": {"params": 100, "grads": 100, "optimizer_state": 200, "saved_activations": 500,
                       "transient": 100, "workspace": 0},
         "step_time_ms": 2.0, "losses": [2.5, 2.25],
         "timeline": {"backward_step": 2, "update_step": 4, "recompute_steps": [3], "bytes": [10, 20, 30, 20, 10]}}
    r.update(over)
    return write_report(name, json.dumps(r))  # json.dumps: ASCII only, \uXXXX for the rest


def write_report(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


base = report("base.json")
half = report("half.json", planned_peak_bytes=500, policy="blocks")
rc, out, err = run("compare", base, half)
check("compare: ratios", rc == 0 and "planned peak (bytes)" in out and "500 (0.50x)" in out and "2.25" in out, out + err)
widths = {len(l) for l in out.splitlines()}
check("compare: one width", widths == {24 + 23 * 2}, out)

# non-ASCII names, written as \u escapes (one outside the BMP, as a surrogate pair): they survive,
# and the columns stay aligned (counted in characters, not bytes)
uni = report("uni.json", policy="blocks\u00e9\u4e2d\U0001f600")
rc, out, err = run("compare", base, uni)
lines = out.splitlines()
check("compare: \\u escapes survive", rc == 0 and "blocks\u00e9\u4e2d\U0001f600" in out, out + err)
check("compare: non-ASCII columns aligned", rc == 0 and len(lines[0]) == len(lines[1]), lines[:2])
raw = write_report("raw.json", open(uni, encoding="utf-8").read().replace("\\u00e9", "\u00e9"))
rc, out, err = run("compare", raw)
check("compare: raw UTF-8 name", rc == 0 and "blocks\u00e9" in out, out + err)
# every escape decoded: \r \b \f are control characters (shown escaped), not the letters r b f
esc = report("esc.json", policy="a\rb\bc\fd\\e\"f/g")
rc, out, err = run("compare", esc)
check("compare: escapes decoded", rc == 0 and "a\\rb\\x08c\\x0cd\\e\"f/g" in out and "arbbcfd" not in out, out + err)
svg = os.path.join(tmp, "t.svg")
xml = report("xml.json", policy="nodes:<a&b>\u00e9")
rc, out, err = run("compare", base, xml, "--timeline", svg)
ok = rc == 0 and os.path.exists(svg)
if ok:
    import xml.etree.ElementTree as ET
    try:
        texts = [t.text or "" for t in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}text")]
        ok = any(t.startswith("nodes:<a&b>\u00e9 (peak") for t in texts)
    except ET.ParseError as e:
        ok, texts = False, str(e)
check("compare: timeline SVG is XML with the names", ok, f"{out} {err} {texts if rc == 0 else ''}")

good = json.dumps({"planned_peak_bytes": 1000})
bad = {
    "trailing text": (good + " xyz", "unexpected text after the JSON value at line 1"),
    "two values": (good + "\n" + good, "unexpected text after the JSON value at line 2, column 1"),
    "truncated": ('{"planned_peak_bytes": 1000,\n  "policy": ', "not valid JSON at line 2"),
    "bad escape": ('{"planned_peak_bytes": 1000, "policy": "a\\qb"}', "not valid JSON"),
    "bare word": ('{"planned_peak_bytes": 1000, "policy": blocks}', "not valid JSON"),
    "empty": ("", "not valid JSON"),
    "not an object": ("[1, 2]", "not a trainer report"),
    "no peak": ('{"policy": "none"}', "not a trainer report"),
    "peak a string": ('{"planned_peak_bytes": "1000"}', '"planned_peak_bytes" is not a number'),
    "breakdown a list": ('{"planned_peak_bytes": 1, "breakdown": [1]}', '"breakdown" is not an object'),
    "param null": ('{"planned_peak_bytes": 1, "breakdown": {"params": null}}', '"breakdown.params" is not a number'),
    "policy a number": ('{"planned_peak_bytes": 1, "policy": 3}', '"policy" is not a string'),
    "losses strings": ('{"planned_peak_bytes": 1, "losses": ["2.5"]}', '"losses" is not an array of numbers'),
    "timeline bytes": ('{"planned_peak_bytes": 1, "timeline": {"bytes": 7}}', '"timeline.bytes" is not an array of numbers'),
}
for name, (text, needle) in bad.items():
    path = write_report(name.replace(" ", "_") + ".json", text)
    expect_error(f"compare: {name}", ["compare", base, path], needle, f"'{path}'")
expect_error("compare: missing file", ["compare", os.path.join(tmp, "nope.json")], "cannot open", "nope.json")

# -o DIR: the folders above DIR are made as needed (mkdir -p); a file in the way is named
nested = os.path.join(tmp, "out", "a", "b")
rc, out, err = run(os.path.join(SAMPLES, "mlp.onnx"), "--dim", "batch=2", "-o", nested)
check("-o makes the folders above DIR", rc == 0 and os.path.exists(os.path.join(nested, "trainer.c")), f"rc={rc} {err[:300]!r}")
blocker = write_report("a_file", "x")
rc, out, err = run(os.path.join(SAMPLES, "mlp.onnx"), "--dim", "batch=2", "-o", os.path.join(blocker, "sub"))
check("-o under a file", rc == 2 and f"ckptc: error: {os.path.join(SAMPLES, 'mlp.onnx')}: cannot create directory "
      f"'{os.path.join(blocker, 'sub')}': Not a directory" in err, f"rc={rc} {err[:400]!r}")
shutil.rmtree(tmp)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
