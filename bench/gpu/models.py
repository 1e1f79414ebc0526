#!/usr/bin/python3
"""bench/gpu/models.py -- the GPU bench's models: the graph exported here, the weights made there.

    /usr/bin/python3 bench/gpu/models.py export DIR [NAME...]   # here: DIR/NAME.onnx, DIR/NAME.json
    python3 bench/gpu/models.py weights DIR [NAME...]           # on the GPU machine: DIR/NAME.data

A GPU-sized model's weights (GPT-2 small: 390 MB) cannot travel with a device call (64 MiB in
all), and a GPU machine's PyTorch (2.x) exports ONNX differently from the one the project's tests
use (Debian's 1.13). So the graph is exported here with every parameter and buffer moved to one
external-data file, NAME.data, which is not kept; NAME.json records where each tensor lies in it
and a SHA-256 of the fresh state_dict. `weights` rebuilds the model on the GPU machine from the
same seed and code, writes its state_dict into NAME.data at those offsets, and compares the hash
(torch's CPU generator gives the same initial weights across versions; a mismatch is reported and
the run goes on: the graph and shapes, which the bench measures, do not depend on the values).

Models (float32, dropout 0, AdamW on both sides in bench/gpu/compare.py):
    gpt2s     GPT-2 small's shape: 12 blocks, d_model 768, 12 heads, T 1024, batch 8, vocab 8192
              (the samples' GPT: hand-written attention, LayerNorm, GELU MLP)
    resnet18  torchvision's ResNet-18 (bench/export.py's), 1000 classes, batch 32, 3x224x224
    gpt_tiny, resnet_tiny   the same code at toy sizes, for checking this script and compare.py
"""
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "python"))

SPECS = {
    "gpt2s": dict(family="gpt", batch=8, T=1024, d=768, heads=12, layers=12, vocab=8192),
    "resnet18": dict(family="resnet", batch=32, hw=224, classes=1000),
    "gpt_tiny": dict(family="gpt", batch=2, T=32, d=32, heads=4, layers=2, vocab=64),
    "resnet_tiny": dict(family="resnet", batch=2, hw=32, classes=10),
}
SEED = 0
ALIGN = 64


def build(name):
    """The model, freshly initialised from SEED, in training mode (dropout 0)."""
    import torch
    import export as bench_export  # bench/export.py: ResNet18, run_model, the samples' GPT
    s = SPECS[name]
    torch.manual_seed(SEED)
    if s["family"] == "gpt":
        m = bench_export.samples.GPT(vocab=s["vocab"], block_size=s["T"], d_model=s["d"], n_head=s["heads"],
                                     n_layer=s["layers"], dropout=0.0)
        for blk in m.blocks:
            blk.attn.attn_drop = torch.nn.Identity()
    else:
        m = bench_export.ResNet18(s["classes"])
    return m.train()


def input_shape(name):
    s = SPECS[name]
    return (s["batch"], s["T"]) if s["family"] == "gpt" else (s["batch"], 3, s["hw"], s["hw"])


def classes(name):
    s = SPECS[name]
    return s["vocab"] if s["family"] == "gpt" else s["classes"]


def state_hash(m):
    h = hashlib.sha256()
    for k, v in m.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def export(out_dir, name):
    import torch
    from ckptc_export import _onnx, export as ckptc_export
    onnx, numpy_helper = _onnx()
    m = build(name)
    s = SPECS[name]
    shape = input_shape(name)
    trace = (1,) + tuple(shape[1:])  # the batch axis is symbolic: trace with 1 (less memory)
    if s["family"] == "gpt":
        x = torch.zeros(trace, dtype=torch.long)
        in_name, axes = "idx", {"idx": {0: "batch"}, "logits": {0: "batch"}}
    else:
        x = torch.zeros(trace)
        in_name, axes = "x", {"x": {0: "batch"}, "logits": {0: "batch"}}
    path = os.path.join(out_dir, name + ".onnx")
    ckptc_export(m, (x,), path, input_names=[in_name], output_names=["logits"], dynamic_axes=axes)
    g = onnx.load(path)
    sd = m.state_dict()
    layout, off = {}, 0
    for init in g.graph.initializer:
        if init.name not in sd:
            continue
        arr = numpy_helper.to_array(init)
        n = arr.nbytes
        layout[init.name] = dict(offset=off, length=n, shape=list(arr.shape), dtype=str(arr.dtype))
        raw = arr.tobytes()
        init.ClearField("raw_data")
        init.ClearField("float_data")
        init.ClearField("int64_data")
        init.ClearField("int32_data")
        init.ClearField("double_data")
        del init.external_data[:]
        for k, v in (("location", name + ".data"), ("offset", str(off)), ("length", str(n))):
            e = init.external_data.add()
            e.key, e.value = k, v
        init.data_location = onnx.TensorProto.EXTERNAL
        assert len(raw) == n
        off += (n + ALIGN - 1) // ALIGN * ALIGN
    onnx.save(g, path)
    meta = dict(name=name, spec=s, input=in_name, input_shape=list(shape), classes=classes(name),
                data_bytes=off, state_sha256=state_hash(m), layout=layout,
                note="weights: bench/gpu/models.py weights DIR (rebuilt from seed %d)" % SEED)
    json.dump(meta, open(os.path.join(out_dir, name + ".json"), "w"), indent=1)
    print("%s: %s (%d initializers external, %.1f MB of weights made on the GPU machine)"
          % (name, path, len(layout), off / 1e6))


def weights(out_dir, name):
    import numpy as np
    meta = json.load(open(os.path.join(out_dir, name + ".json")))
    m = build(name)
    sd = m.state_dict()
    same = state_hash(m) == meta["state_sha256"]
    path = os.path.join(out_dir, name + ".data")
    with open(path, "wb") as f:
        f.truncate(meta["data_bytes"])
        for k, L in meta["layout"].items():
            a = sd[k].detach().cpu().contiguous().numpy()
            if list(a.shape) != L["shape"] or str(a.dtype) != L["dtype"] or a.nbytes != L["length"]:
                raise SystemExit(f"FAIL: {name}: {k} is {a.dtype}{list(a.shape)} here, {L['dtype']}{L['shape']} in the export")
            f.seek(L["offset"])
            f.write(a.tobytes())
    print(f"{name}: {path} ({meta['data_bytes'] / 1e6:.1f} MB); weights "
          + ("equal the export's (SHA-256 of the state_dict)" if same else
             "DIFFER from the export's (this torch's initialisation differs; shapes and graph are the same)"))
    return same


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("export", "weights"):
        raise SystemExit(__doc__)
    cmd, out_dir, names = sys.argv[1], sys.argv[2], sys.argv[3:] or ["gpt2s", "resnet18"]
    os.makedirs(out_dir, exist_ok=True)
    for n in names:
        (export if cmd == "export" else weights)(out_dir, n)


if __name__ == "__main__":
    main()
