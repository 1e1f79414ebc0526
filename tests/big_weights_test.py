#!/usr/bin/python3
"""Compile memory proportional to the graph, not to the weights (issue 23).

    big_weights_test.py CKPTC WORKDIR

Writes two models that differ only in their weights' size (LAYERS x MatMul by a W x W float32
weight, Add of a W bias, Tanh, then a Reshape by an int64 shape): W = 256 (1.1 MB of weights)
and W = 2000 (64 MB), every initializer in one external-data file. The shape tensor sits at an
odd offset there, so it is the one tensor the loader must copy (8 bytes): readers access
elements through typed pointers. A third model is the large one with its weights embedded as
raw_data. Every run sets CKPTC_STATS=1, which makes ckptc print its weight-byte counters and its
own peak resident set (VmHWM) at exit; the test checks:

- `--plan-only` and `inspect` copy no weight byte but that shape (copied_bytes == 8), map the
  data file once (mapped_files == 1, mapped_bytes == its size) and leave none of it resident
  (resident_bytes == 0: /proc/self/pagemap, counted as the mappings are released: no weight page
  was ever faulted in);
- `--plan-only` and `-o DIR` peak within a quarter of the weights' difference of each other on the
  two models (the old loader, which read the weights into the heap, and the old weights.bin
  writer, which built the whole file in memory, peak 1x and 2x the weights higher);
- `-o DIR` streams the whole payload (streamed_bytes == the payload) through one bounded buffer
  and leaves under 1 MiB of the mapping resident;
- weights.bin's payload holds each tensor's bytes at the offset its table says, zeros between,
  and is byte-identical to the embedded model's; the generated trainer (built and run for one
  step) accepts it: its checksum and layout hash match.

Ends with `N passed, N failed`; exits 1 on any failure.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np

# Debian 12's python3-onnx (1.12) still uses aliases that numpy 1.24 removed.
for _alias, _typ in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if _alias not in np.__dict__:
        setattr(np, _alias, _typ)

from onnx import TensorProto, helper  # noqa: E402

LAYERS, BATCH = 4, 2
SMALL, LARGE = 256, 2000
SHAPE_AT = 5  # the int64 shape's offset in the data file: not a multiple of 8
passed, failed = 0, 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
        print("ok    " + what)
    else:
        failed += 1
        print("FAIL  " + what)


def write_model(path, width, external):
    """The model at PATH (and PATH.data when external); returns {name: bytes} of its initializers."""
    rng = np.random.default_rng(width)
    data_name = os.path.basename(path) + ".data"
    tensors, inits, nodes, names = {}, [], [], []
    blob = bytearray(b"\x7f" * SHAPE_AT)

    def add(name, arr, trainable=True):
        raw = arr.tobytes()
        tensors[name] = raw
        dt = TensorProto.FLOAT if arr.dtype == np.float32 else TensorProto.INT64
        t = TensorProto(name=name, data_type=dt, dims=list(arr.shape))
        if external:
            if arr.dtype == np.float32:
                blob.extend(b"\0" * (-len(blob) % 64))
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", data_name), ("offset", str(len(blob))), ("length", str(len(raw)))):
                e = t.external_data.add()
                e.key, e.value = k, v
            blob.extend(raw)
        else:
            t.raw_data = raw
        inits.append(t)
        if trainable:
            names.append(name)

    add("shape", np.array([BATCH * width], dtype=np.int64), trainable=False)
    h = "x"
    for i in range(LAYERS):
        add("layers.%d.weight" % i, (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32))
        add("layers.%d.bias" % i, rng.standard_normal(width).astype(np.float32))
        nodes.append(helper.make_node("MatMul", [h, "layers.%d.weight" % i], ["mm%d" % i], name="/layers.%d/MatMul" % i))
        nodes.append(helper.make_node("Add", ["mm%d" % i, "layers.%d.bias" % i], ["add%d" % i], name="/layers.%d/Add" % i))
        nodes.append(helper.make_node("Tanh", ["add%d" % i], ["h%d" % i], name="/layers.%d/Tanh" % i))
        h = "h%d" % i
    nodes.append(helper.make_node("Reshape", [h, "shape"], ["y"], name="/Reshape"))
    g = helper.make_graph(nodes, "bigweights", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [BATCH * width])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="big_weights_test")
    m.ir_version = 8
    helper.set_model_props(m, {"ckptc.trainable": json.dumps(names)})
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    if external:
        with open(os.path.join(os.path.dirname(path), data_name), "wb") as f:
            f.write(blob)
    return tensors


def ckptc(exe, args):
    """(exit status, stdout, stats dict) of one ckptc run with CKPTC_STATS=1."""
    p = subprocess.run([exe] + args, capture_output=True, text=True, env=dict(os.environ, CKPTC_STATS="1"))
    stats = {}
    for line in p.stderr.splitlines():
        if line.startswith("ckptc: stats:"):
            stats = {k: int(v) for k, v in (kv.split("=") for kv in line.split(":", 2)[2].split())}
    if p.returncode != 0 or not stats:
        print("ckptc %s: exit %d, stats %s\n%s%s" % (" ".join(args), p.returncode, stats, p.stdout, p.stderr))
    return p.returncode, p.stdout, stats


def read_weights_bin(path):
    """(payload bytes, [(name, offset, nbytes)]) of a weights.bin (runtime/ckrt.h's format)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"CKPTCWTS", "bad magic"
    _, ntens, nbytes, _, at, _ = struct.unpack_from("<IIQQQQ", data, 8)
    p, table = 56, []
    for _ in range(ntens):
        (nl,) = struct.unpack_from("<I", data, p)
        name = data[p + 4:p + 4 + nl].decode()
        p += 4 + nl
        _, _, rank = struct.unpack_from("<III", data, p)
        p += 12 + 8 * rank
        off, nb = struct.unpack_from("<QQ", data, p)
        p += 16
        table.append((name, off, nb))
    return data[at:at + nbytes], table


def main():
    exe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    models = {}
    for tag, width, ext in (("small", SMALL, True), ("large", LARGE, True), ("embedded", LARGE, False)):
        path = os.path.join(work, tag + ".onnx")
        models[tag] = (path, write_model(path, width, ext))
    weights = {t: sum(len(b) for b in models[t][1].values()) for t in models}
    delta = weights["large"] - weights["small"]
    flags = ["--loss=mse", "--optimizer=sgd"]
    shape_bytes = len(models["large"][1]["shape"])

    peak = {}
    for tag in ("small", "large"):
        path = models[tag][0]
        data_size = os.path.getsize(path + ".data")
        for cmd, args in (("--plan-only", [path] + flags + ["--plan-only"]), ("inspect", ["inspect", path])):
            rc, out, st = ckptc(exe, args)
            check(rc == 0 and st, "%s %s runs and prints its counters" % (tag, cmd))
            if not st:
                continue
            check(st["copied_bytes"] == shape_bytes,
                  "%s %s: copies only the misaligned shape (%d bytes copied, want %d)" % (tag, cmd, st["copied_bytes"], shape_bytes))
            check(st["mapped_files"] == 1 and st["mapped_bytes"] == data_size,
                  "%s %s: maps the data file once (%d files, %d bytes of %d)" % (tag, cmd, st["mapped_files"], st["mapped_bytes"], data_size))
            check(st["resident_bytes"] == 0, "%s %s: touches no weight page (%d bytes resident)" % (tag, cmd, st["resident_bytes"]))
            peak[tag, cmd] = st["peak_rss_kib"] * 1024
        out_dir = os.path.join(work, "out-" + tag)
        rc, out, st = ckptc(exe, [path] + flags + ["-o", out_dir])
        check(rc == 0 and st, "%s -o runs and prints its counters" % tag)
        if st:
            payload = read_weights_bin(os.path.join(out_dir, "weights.bin"))[0]
            check(st["streamed_bytes"] == len(payload), "%s -o: streams the payload (%d of %d bytes)" % (tag, st["streamed_bytes"], len(payload)))
            check(0 < st["stream_buffer"] <= 16 << 20, "%s -o: through a bounded buffer (%d bytes)" % (tag, st["stream_buffer"]))
            check(0 <= st["resident_bytes"] < 1 << 20, "%s -o: drops the mapped pages it wrote (%d bytes left resident)" % (tag, st["resident_bytes"]))
            peak[tag, "-o"] = st["peak_rss_kib"] * 1024
    for cmd in ("--plan-only", "inspect", "-o"):
        if ("small", cmd) in peak and ("large", cmd) in peak:
            d = peak["large", cmd] - peak["small", cmd]
            check(d < delta / 4, "%s: peak RSS %d -> %d bytes for weights %d -> %d: +%d, under a quarter of +%d" % (
                cmd, peak["small", cmd], peak["large", cmd], weights["small"], weights["large"], d, delta))

    # weights.bin: the tensors where the table says, zeros elsewhere; the embedded model's the same
    out_large = os.path.join(work, "out-large")
    if os.path.exists(os.path.join(out_large, "weights.bin")):
        payload, table = read_weights_bin(os.path.join(out_large, "weights.bin"))
        src = models["large"][1]
        covered = np.zeros(len(payload), dtype=bool)
        found = set()
        for name, off, nb in table:  # the initializers, and the constants the passes added (lr, ...)
            if name in src and payload[off:off + nb] == src[name]:
                found.add(name)
            covered[off:off + nb] = True
        gaps = np.frombuffer(payload, dtype=np.uint8)[~covered]
        check(len(found) == len(src) and not gaps.any(), "weights.bin: %d of %d initializers at their offsets (of %d "
              "tensors), %d gap bytes all zero" % (len(found), len(src), len(table), gaps.size))
        rc, out, st = ckptc(exe, [models["embedded"][0]] + flags + ["-o", os.path.join(work, "out-embedded")])
        check(rc == 0 and st.get("copied_bytes", -1) == 0 and st.get("mapped_files", -1) == 0,
              "embedded model: raw_data used where parsed (%s bytes copied)" % st.get("copied_bytes"))
        if rc == 0:
            with open(os.path.join(out_large, "weights.bin"), "rb") as a, open(os.path.join(work, "out-embedded", "weights.bin"), "rb") as b:
                check(a.read() == b.read(), "weights.bin from external data == weights.bin from raw_data")
        p = subprocess.run(["make", "-s", "-C", out_large], capture_output=True, text=True)
        check(p.returncode == 0, "the large model's trainer builds" + ("" if p.returncode == 0 else ":\n" + p.stdout + p.stderr))
        if p.returncode == 0:
            p = subprocess.run([os.path.join(out_large, "trainer"), "--steps", "1", "--device", "cpu"], capture_output=True, text=True)
            check(p.returncode == 0 and re.search(r"planned peak (\d+) bytes, measured \1 bytes", p.stdout) is not None,
                  "the trainer loads weights.bin (checksum, layout) and trains a step" + ("" if p.returncode == 0 else ":\n" + p.stdout + p.stderr))
    print("%d passed, %d failed" % (passed, failed))
    if not failed:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
