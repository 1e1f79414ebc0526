#!/usr/bin/python3
"""export_test.py — the trainer's --export-onnx FILE and --export-safetensors FILE (issue 18).

    export_test.py CKPTC SAMPLES_DIR WORKDIR

For the mlp sample, the resnet sample (BatchNorm: its running statistics are state too), the gpt
sample (token input, constant initializers outside the state) and the
mlp with its initializers as packed float_data, the mlp saved with external data (location weights/mlp.data, a subdirectory; layers.1 frozen, so
its initializers are constants outside the state), each trained 3 AdamW
steps with --export-onnx, --export-safetensors and --dump-params:
1. onnx.checker passes on the exported model (by path: external data included).
2. every initializer of the state table (the --dump-params files) equals its .npy bit for bit,
   and training moved it away from the source's value for at least one;
3. everything else is unchanged: the protos with the state initializers' payloads removed are
   equal, the file has the source's size, and, where the source re-serializes to its own bytes
   with Python's protobuf, the export is byte for byte the source with those payloads replaced by
   the --dump-params values;
4. `ckptc EXPORTED --infer` compiles and, on the same input, its outputs are bit-identical to those
   of the expectation built in Python (the source model with numpy_helper.from_array of the
   --dump-params files), compiled the same way;
5. the safetensors file, read by a reader written here from the format's description (8-byte
   little-endian header length, JSON header, data; json + numpy only): header a multiple of 8,
   names sorted, offsets contiguous from 0 to the end of the file, dtype and shape as the state,
   values bit for bit the --dump-params files;
6. torch: the safetensors values load into the PyTorch module that was exported
   (samples/export.py's ResidualMLP / ResNet, load_state_dict(strict=False): nothing missing but
   num_batches_tracked, nothing unexpected) and its forward (in training mode, as the samples were
   exported: BatchNorm normalizes with the batch's statistics) is within 1e-5 of the exported
   model's --infer output.
Then the errors, each exit 2 with one line, before any step, leaving no FILE and no FILE.tmp: the
source model changed since compiling (and --source-model pointing at an unchanged copy exports),
the source model missing, FILE in a missing directory, FILE a directory, FILE whose external data
would replace the source's own, one external data file under two locations, --export-safetensors in a missing directory, --source-model
without --export-onnx, --export-onnx on an inference program.
Data parallel (with mpirun): 2 ranks, rank 0 writes both files, equal to its --dump-params.
Ends with `N passed, N failed`.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

CKPTC, SAMPLES, WORK = sys.argv[1:4]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
sys.path.insert(0, SAMPLES)
results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + str(detail)[:1500]), flush=True)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def build(model, d, flags):
    p = run([CKPTC, model, "-o", d] + flags)
    if p.returncode == 0:
        p = run(["make", "-s", "-C", d])
    if p.returncode != 0:
        raise SystemExit(f"FAIL: building {d}: {p.stdout}{p.stderr}")
    return os.path.join(d, "model" if "--infer" in flags else "trainer")


# ---------------------------------------------------------------- an independent safetensors reader

ST_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """(header, {name: array}, the header's keys in file order) from the format's description;
    raises ValueError if the file is malformed."""
    data = open(path, "rb").read()
    if len(data) < 8:
        raise ValueError("shorter than the 8-byte header length")
    n = struct.unpack("<Q", data[:8])[0]
    if 8 + n > len(data):
        raise ValueError(f"header length {n} past the end of the file")
    text = data[8:8 + n].decode("utf-8")
    if (8 + n) % 8:
        raise ValueError(f"the data starts at byte {8 + n}, not a multiple of 8")
    header = json.loads(text.rstrip(" "))  # only spaces may follow the JSON object (padding)
    body = data[8 + n:]
    meta = header.pop("__metadata__", {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise ValueError("__metadata__ is not a map of strings")
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    at = 0
    for b, e, k in spans:
        if b != at or e < b:
            raise ValueError(f"'{k}': data_offsets [{b}, {e}) do not follow the previous tensor's end {at}")
        at = e
    if at != len(body):
        raise ValueError(f"the tensors end at {at}, the data has {len(body)} bytes")
    out = {}
    for k, v in header.items():
        b, e = v["data_offsets"]
        dt = np.dtype(ST_DTYPES[v["dtype"]]).newbyteorder("<")
        a = np.frombuffer(body[b:e], dtype=dt)
        if a.size != int(np.prod(v["shape"], dtype=np.int64)):
            raise ValueError(f"'{k}': {e - b} bytes for shape {v['shape']} of {v['dtype']}")
        out[k] = a.reshape(v["shape"])
    return header, out, list(json.loads(text.rstrip(" ")).keys())


# ---------------------------------------------------------------- one model

def without_state_payloads(proto, state):
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    for t in m.graph.initializer:
        if t.name in state:
            t.ClearField("raw_data")
            del t.float_data[:]
    return m.SerializeToString()


def replaced_in_place(proto, params):
    """The source proto with each state payload replaced in its own encoding (raw_data or float_data)."""
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    for t in m.graph.initializer:
        if t.name not in params:
            continue
        if t.HasField("raw_data"):
            t.raw_data = params[t.name].tobytes()
        else:
            del t.float_data[:]
            t.float_data.extend(params[t.name].flatten().tolist())
    return m.SerializeToString()


def expected_model(src_path, params, out_path):
    """The source with its state initializers replaced by the --dump-params values (Python's view)."""
    m = onnx.load(src_path)
    for t in m.graph.initializer:
        if t.name in params:
            t.CopyFrom(numpy_helper.from_array(params[t.name], t.name))
    onnx.save(m, out_path)
    return m


def infer_outputs(model, d, dims, x_name, x):
    prog = build(model, d, ["--infer"] + dims)
    np.save(f"{d}-x.npy", x)
    p = run([prog, "--input", f"{x_name}={d}-x.npy", "--dump-outputs", f"{d}-out"])
    if p.returncode != 0:
        return None, p.stderr
    return {f: np.load(f"{d}-out/{f}") for f in sorted(os.listdir(f"{d}-out"))}, ""


def check_external(tag, src, onnx_out, params):
    """The exported external data: same locations, offsets and lengths; the state tensors' bytes the
    --dump-params values, every other byte the source data file's."""
    a, b = onnx.load(src, load_external_data=False), onnx.load(onnx_out, load_external_data=False)
    files = {}
    ok = True
    for ts, te in zip(a.graph.initializer, b.graph.initializer):
        es, ee = {e.key: e.value for e in ts.external_data}, {e.key: e.value for e in te.external_data}
        ok &= es == ee and ts.name == te.name
        if ts.name in params and "location" in es:
            off = int(es.get("offset", 0))
            files.setdefault(es["location"], []).append((off, params[ts.name].tobytes()))
    for loc, spans in files.items():
        want = bytearray(open(os.path.join(os.path.dirname(src), loc), "rb").read())
        for off, raw in spans:
            want[off:off + len(raw)] = raw
        path = os.path.join(os.path.dirname(onnx_out), loc)
        ok &= os.path.exists(path) and open(path, "rb").read() == bytes(want)
    check(f"{tag}: the external data ({', '.join(files)}) lies next to FILE under its location: the source's bytes with the "
          f"state tensors replaced", ok and files, files.keys())


def check_model(tag, src, dims, x, torch_module=None, torch_tol=None, external=False, train_flags=()):
    w = f"{WORK}/{tag}"
    os.makedirs(f"{w}/out")
    trainer = build(src, f"{w}/train", dims + list(train_flags))
    onnx_out, st_out = f"{w}/out/{tag}.onnx", f"{w}/out/{tag}.safetensors"
    p = run([trainer, "--steps", "3", "--seed", "3", "--export-onnx", onnx_out, "--export-safetensors", st_out,
             "--dump-params", f"{w}/params"])
    check(f"{tag}: trains 3 steps and exports", p.returncode == 0 and os.path.exists(onnx_out) and os.path.exists(st_out),
          p.stderr)
    if p.returncode != 0:
        return
    params = {f[:-4]: np.load(f"{w}/params/{f}") for f in os.listdir(f"{w}/params")}
    try:
        onnx.checker.check_model(onnx_out)
        check(f"{tag}: onnx.checker passes on the export", True)
    except Exception as e:  # noqa: BLE001 (any checker complaint is the failure)
        check(f"{tag}: onnx.checker passes on the export", False, e)
    got, source = onnx.load(onnx_out, load_external_data=False), onnx.load(src, load_external_data=False)
    gi = {t.name: numpy_helper.to_array(t) for t in onnx.load(onnx_out).graph.initializer}
    si = {t.name: numpy_helper.to_array(t) for t in onnx.load(src).graph.initializer}
    same = [k for k in params if k in gi and gi[k].dtype == params[k].dtype and gi[k].shape == params[k].shape
            and gi[k].tobytes() == params[k].tobytes()]
    moved = [k for k in params if k in si and si[k].tobytes() != params[k].tobytes()]
    check(f"{tag}: all {len(params)} state initializers equal --dump-params bit for bit ({len(moved)} moved by training)",
          len(same) == len(params) and len(params) > 0 and moved, sorted(set(params) - set(same)))
    others = [k for k in si if k not in params]
    check(f"{tag}: the {len(others)} other initializers, the nodes, attributes and metadata are unchanged",
          without_state_payloads(got, params) == without_state_payloads(source, params)
          and os.path.getsize(onnx_out) == os.path.getsize(src))
    exp_path = f"{w}/expected.onnx"
    expected_model(src, params, exp_path)
    src_bytes = open(src, "rb").read()
    if external:
        check_external(tag, src, onnx_out, params)
    elif source.SerializeToString() == src_bytes:
        check(f"{tag}: the export is byte for byte the source with the state payloads replaced",
              replaced_in_place(source, params) == open(onnx_out, "rb").read())
    # ckptc compiles the export; its inference equals that of the expectation, bit for bit
    x_name = source.graph.input[0].name
    mine, err = infer_outputs(onnx_out, f"{w}/infer-export", dims, x_name, x)
    want, err2 = infer_outputs(exp_path, f"{w}/infer-expected", dims, x_name, x)
    check(f"{tag}: ckptc EXPORTED --infer: outputs bit-identical to the expectation's",
          mine is not None and want is not None and mine.keys() == want.keys()
          and all(mine[k].tobytes() == want[k].tobytes() for k in mine), err + err2)
    # the safetensors file, read independently
    try:
        header, tensors, order = read_safetensors(st_out)
        keys = [k for k in order if k != "__metadata__"]
        ok = keys == sorted(keys) and set(tensors) == set(params) and all(
            tensors[k].dtype == params[k].dtype and tensors[k].shape == params[k].shape
            and tensors[k].tobytes() == params[k].tobytes() for k in params)
        check(f"{tag}: safetensors ({len(tensors)} tensors, names sorted) equals --dump-params bit for bit", ok,
              sorted(set(tensors) ^ set(params)))
    except (ValueError, KeyError) as e:
        check(f"{tag}: safetensors parses with the independent reader", False, e)
        return
    if torch_module is None or mine is None:
        return
    import torch
    torch.set_num_threads(1)
    model = torch_module()  # in training mode, as exported
    r = model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in tensors.items()}, strict=False)
    missing = [k for k in r.missing_keys if not k.endswith("num_batches_tracked")]
    with torch.no_grad():
        out = model(torch.from_numpy(x)).numpy()
    ours = mine[sorted(mine)[0]]
    err = float(np.max(np.abs(out - ours)) / max(1.0, float(np.max(np.abs(out)))))
    check(f"{tag}: torch load_state_dict(strict=False) takes every tensor; its forward is within {err:.1e} of the export's "
          f"--infer output", not missing and not r.unexpected_keys and err <= torch_tol, f"{missing} {r.unexpected_keys}")


# ---------------------------------------------------------------- errors

def check_error(what, cmd, msg, outs):
    p = run(cmd)
    lines = p.stderr.strip().splitlines()
    left = [o for o in outs for f in (o, o + ".tmp") if os.path.exists(f)]
    check(f"{what}: exit 2, one line, before any step, nothing written: {lines[0] if lines else ''}",
          p.returncode == 2 and len(lines) == 1 and msg in p.stderr and "step 1" not in p.stdout and not left,
          f"exit {p.returncode}: {p.stderr!r} left {left}")


def errors():
    w = f"{WORK}/errors"
    os.makedirs(f"{w}/src")
    os.makedirs(f"{w}/out/adir")
    src = f"{w}/src/mlp.onnx"
    shutil.copy(os.path.join(SAMPLES, "mlp.onnx"), src)
    trainer = build(src, f"{w}/train", ["--dim", "batch=8"])
    out = f"{w}/out/m.onnx"
    data = bytearray(open(src, "rb").read())
    data[-1] ^= 1
    open(src, "wb").write(data)
    check_error("the source model changed since compiling", [trainer, "--export-onnx", out], "changed since ckptc compiled", [out])
    p = run([trainer, "--steps", "2", "--export-onnx", out, "--source-model", os.path.join(SAMPLES, "mlp.onnx")])
    check("--source-model PATH: an unchanged copy elsewhere exports", p.returncode == 0 and os.path.exists(out), p.stderr)
    os.remove(out)
    os.remove(src)
    check_error("the source model missing", [trainer, "--export-onnx", out], "cannot read the source model", [out])
    good = ["--source-model", os.path.join(SAMPLES, "mlp.onnx")]
    check_error("FILE in a missing directory", [trainer, "--export-onnx", f"{w}/nope/m.onnx"] + good, "does not exist",
                [f"{w}/nope/m.onnx"])
    check_error("FILE a directory", [trainer, "--export-onnx", f"{w}/out/adir"] + good, "is a directory", [])
    check_error("--export-safetensors in a missing directory", [trainer, "--export-safetensors", f"{w}/nope/m.safetensors"],
                "does not exist", [f"{w}/nope/m.safetensors"])
    check_error("--source-model without --export-onnx", [trainer] + good, "only with --export-onnx", [])
    # external data: exporting into the source's own directory would replace its data file
    ext = f"{WORK}/ext-src/mlp-ext.onnx"  # main() made it
    ext_train = f"{WORK}/mlp-ext/train/trainer"  # check_model built it
    data_file = f"{WORK}/ext-src/weights/mlp.data"
    before = open(data_file, "rb").read()
    check_error("--export-onnx next to the source's own external data", [ext_train, "--export-onnx", f"{WORK}/ext-src/again.onnx"],
                "would replace", [f"{WORK}/ext-src/again.onnx"])
    src_before = open(ext, "rb").read()
    check_error("--export-onnx onto the source model itself", [ext_train, "--export-onnx", ext], "would replace the source model itself",
                [ext + ".x"])
    check("... and the source model is untouched", open(ext, "rb").read() == src_before)
    check("... and the source's external data is untouched", open(data_file, "rb").read() == before)
    # one data file under two locations
    m = onnx.load(ext, load_external_data=False)
    for e in m.graph.initializer[0].external_data:
        if e.key == "location":
            e.value = "./weights/mlp.data"
    two = f"{WORK}/ext-src/two-names.onnx"
    onnx.save(m, two)
    two_train = build(two, f"{w}/two", ["--dim", "batch=8"])
    check_error("one external data file under two locations", [two_train, "--export-onnx", out], "names one external data file",
                [out, f"{w}/out/weights/mlp.data"])
    infer = build(os.path.join(SAMPLES, "mlp.onnx"), f"{w}/infer", ["--infer", "--dim", "batch=8"])
    check_error("--export-onnx on an inference program", [infer, "--export-onnx", out], "inference program", [out])


def float_data_model():
    """The mlp sample with every initializer stored as (packed) float_data instead of raw_data."""
    m = onnx.load(os.path.join(SAMPLES, "mlp.onnx"))
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        t.CopyFrom(onnx.helper.make_tensor(t.name, onnx.TensorProto.FLOAT, a.shape, a.flatten().tolist(), raw=False))
    path = f"{WORK}/mlp-float-data.onnx"
    onnx.save(m, path)
    return path


def external_model():
    """The mlp sample with every initializer in WORK/ext-src/weights/mlp.data."""
    d = f"{WORK}/ext-src"
    os.makedirs(f"{d}/weights")
    m = onnx.load(os.path.join(SAMPLES, "mlp.onnx"))
    onnx.save_model(m, f"{d}/mlp-ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights/mlp.data", size_threshold=0)
    return f"{d}/mlp-ext.onnx"


def data_parallel():
    """2 ranks (mpirun): rank 0 writes the exports, equal to its --dump-params."""
    if not shutil.which("mpirun") or not shutil.which("mpicc"):
        print("skip data parallel: no mpirun/mpicc")
        return
    w = f"{WORK}/dp"
    os.makedirs(w)
    trainer = build(os.path.join(SAMPLES, "mlp.onnx"), f"{w}/train", ["--dim", "batch=4", "--data-parallel"])
    p = run(["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2", trainer, "--steps", "2",
             "--export-onnx", f"{w}/m.onnx", "--export-safetensors", f"{w}/m.safetensors", "--dump-params", f"{w}/params"])
    ok = p.returncode == 0 and os.path.exists(f"{w}/m.onnx")
    if ok:
        params = {f[:-4]: np.load(f"{w}/params/{f}") for f in os.listdir(f"{w}/params")}
        gi = {t.name: numpy_helper.to_array(t) for t in onnx.load(f"{w}/m.onnx").graph.initializer}
        _, st, _ = read_safetensors(f"{w}/m.safetensors")
        ok = all(gi[k].tobytes() == v.tobytes() and st[k].tobytes() == v.tobytes() for k, v in params.items())
    check("data parallel, 2 ranks: rank 0 exports both files, equal to --dump-params", ok, p.stderr[-800:])


def main():
    import export
    rng = np.random.default_rng(11)
    x_mlp = rng.standard_normal((8, 64)).astype(np.float32)
    check_model("mlp", os.path.join(SAMPLES, "mlp.onnx"), ["--dim", "batch=8"], x_mlp, export.ResidualMLP, 1e-5)
    x_res = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    check_model("resnet", os.path.join(SAMPLES, "resnet.onnx"), [], x_res, export.ResNet, 1e-5)
    check_model("mlp-float_data", float_data_model(), ["--dim", "batch=8"], x_mlp)
    # gpt: token input, constants among the initializers (not state), dropout
    idx = np.load(os.path.join(SAMPLES, "gpt.in.idx.npy"))
    check_model("gpt", os.path.join(SAMPLES, "gpt.onnx"), [], rng.integers(0, 97, idx.shape).astype(idx.dtype))
    # layers.1 frozen: its initializers are constants, not state, and must come out as they were
    check_model("mlp-ext", external_model(), ["--dim", "batch=8"], x_mlp, external=True, train_flags=["--freeze", r"layers\.1\."])
    errors()
    data_parallel()
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
