#!/usr/bin/python3
# bench/export.py -- the benchmark models, exported from PyTorch for ckptc and rebuilt for PyTorch.
#
#     /usr/bin/python3 bench/export.py              # every model into bench/models/
#     /usr/bin/python3 bench/export.py mlp16 gpt4   # only these
#
# Models (float32, static shapes, no dropout so both sides compute the same function):
#
#   mlpL     L = 16, 64: the samples' residual MLP, x = x + fc2(relu(fc1(x))) with width 512 and
#            hidden 512, a head to 10 classes; x (256, 512), labels (256,) int64. fc2's weights
#            are scaled by 1/sqrt(L) after PyTorch's default init (GPT-2's residual scaling):
#            without it the 64-layer stack diverges to NaN within 5 SGD steps at lr 0.01.
#   gptL     L = 4, 8, 12: the samples' GPT-style decoder, d_model 256, 4 heads, T = 128, vocab
#            256, dropout 0 (no Dropout module at all); idx (8, 128) int64, labels = next token.
#   resnet18 a hand-written torchvision-style ResNet-18 (7x7/2 stem, max-pool, BasicBlocks
#            [2, 2, 2, 2] with 64..512 channels, BatchNorm, global average pool, 10 classes;
#            Debian 12 has no python3-torchvision); x (16, 3, 64, 64), labels (16,).
#
# For each NAME it writes bench/models/NAME.onnx (training mode, opset 17, no constant folding,
# like samples/export.py; every initializer equals the freshly initialised state_dict, BatchNorm
# running stats included), NAME.in.x.npy or NAME.in.idx.npy, NAME.in.labels.npy, and NAME.json
# (inputs, node count, a SHA-256 of the parameters in state_dict order).
#
# Same weights on both sides: the PyTorch side (bench/run.py) rebuilds the model with build()
# below (same seed, same code) instead of loading a file, so that nothing loaded inflates the
# process's memory before the first step; it checks the parameter hash against NAME.json.
import collections
import hashlib
import json
import math
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

def _load_samples():
    """samples/export.py (ResidualMLP, GPT, BasicBlock, restore_initializers), under its own name."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("ckptc_samples_export", os.path.join(ROOT, "samples", "export.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


samples = _load_samples()

OPSET = 17
MODELS_DIR = os.path.join(HERE, "models")
WEIGHT_SEED, INPUT_SEED, LABEL_SEED = 0, 1234, 5678


class ResNet18(nn.Module):
    """torchvision.models.resnet18(num_classes=10), written out (same layer names and shapes)."""

    def __init__(self, n_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        B = samples.BasicBlock
        self.layer1 = nn.Sequential(B(64, 64), B(64, 64))
        self.layer2 = nn.Sequential(B(64, 128, stride=2), B(128, 128))
        self.layer3 = nn.Sequential(B(128, 256, stride=2), B(256, 256))
        self.layer4 = nn.Sequential(B(256, 512, stride=2), B(512, 512))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, n_classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        return run_model(self, x, plain)


# ---------------------------------------------------------------------------------------------
# Forward with a pluggable way of running the repeated blocks (how PyTorch users checkpoint)
# ---------------------------------------------------------------------------------------------

def plain(blocks, x):
    for b in blocks:
        x = b(x)
    return x


def per_block(blocks, x):
    """torch.utils.checkpoint around every block (non-reentrant, torch 1.13's API)."""
    for b in blocks:
        x = checkpoint(b, x, use_reentrant=False)
    return x


def chunks(k):
    """checkpoint around runs of k consecutive blocks (the sqrt policy: k = round(sqrt(L)))."""
    def run(blocks, x):
        blocks = list(blocks)
        for i in range(0, len(blocks), k):
            part = blocks[i:i + k]
            x = checkpoint(lambda y, part=part: plain(part, y), x, use_reentrant=False)
        return x
    return run


def blocks_of(m):
    if isinstance(m, samples.ResidualMLP):
        return list(m.layers)
    if isinstance(m, samples.GPT):
        return list(m.blocks)
    return [b for layer in (m.layer1, m.layer2, m.layer3, m.layer4) for b in layer]


def run_model(m, x, seq):
    """The model's forward with its blocks run by seq(blocks, x)."""
    if isinstance(m, samples.ResidualMLP):
        return m.head(seq(m.layers, x))
    if isinstance(m, samples.GPT):
        B, T = x.size()
        pos = torch.arange(0, T, dtype=torch.long, device=x.device)
        h = m.tok_emb(x) + m.pos_emb(pos)
        return m.lm_head(m.ln_f(seq(m.blocks, h)))
    h = m.maxpool(m.relu(m.bn1(m.conv1(x))))
    h = seq(blocks_of(m), h)
    return m.fc(torch.flatten(m.avgpool(h), 1))


# ---------------------------------------------------------------------------------------------
# The model table
# ---------------------------------------------------------------------------------------------

def _spec(family, depth):
    if family == "mlp":
        return dict(family="mlp", depth=depth, input="x", shape=(256, 512), classes=10,
                    make=lambda: samples.ResidualMLP(d_in=512, hidden=512, n_layers=depth, n_classes=10))
    if family == "gpt":
        return dict(family="gpt", depth=depth, input="idx", shape=(8, 128), classes=256,
                    make=lambda: samples.GPT(vocab=256, block_size=128, d_model=256, n_head=4,
                                             n_layer=depth, dropout=0.0))
    return dict(family="resnet", depth=depth, input="x", shape=(16, 3, 64, 64), classes=10,
                make=lambda: ResNet18(10))


SPECS = collections.OrderedDict([
    ("mlp16", _spec("mlp", 16)), ("mlp64", _spec("mlp", 64)),
    ("gpt4", _spec("gpt", 4)), ("gpt8", _spec("gpt", 8)), ("gpt12", _spec("gpt", 12)),
    ("resnet18", _spec("resnet", 8)),  # depth = 8 BasicBlocks
])


def build(name):
    """The model, freshly initialised from the fixed seed, in training mode."""
    spec = SPECS[name]
    torch.manual_seed(WEIGHT_SEED)
    m = spec["make"]().train()
    if spec["family"] == "gpt":  # dropout 0: drop the modules so the ONNX graph has no Dropout
        for blk in m.blocks:
            blk.attn.attn_drop = nn.Identity()
    if spec["family"] == "mlp":  # residual branches scaled by 1/sqrt(L) (as GPT-2 does): with
        with torch.no_grad():    # PyTorch's default init, 64 unnormalized layers diverge by step 5
            for blk in m.layers:
                blk.fc2.weight.mul_(1.0 / math.sqrt(spec["depth"]))
    return m


def param_hash(m):
    h = hashlib.sha256()
    for k, v in m.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def inputs(name):
    """(x, labels) as numpy arrays: the same every time."""
    spec = SPECS[name]
    g = torch.Generator().manual_seed(INPUT_SEED)
    if spec["family"] == "gpt":
        x = torch.randint(0, spec["classes"], spec["shape"], generator=g, dtype=torch.long)
        gl = torch.Generator().manual_seed(LABEL_SEED)
        last = torch.randint(0, spec["classes"], (spec["shape"][0], 1), generator=gl, dtype=torch.long)
        labels = torch.cat([x[:, 1:], last], dim=1)
    else:
        x = torch.randn(*spec["shape"], generator=g)
        gl = torch.Generator().manual_seed(LABEL_SEED)
        labels = torch.randint(0, spec["classes"], (spec["shape"][0],), generator=gl, dtype=torch.long)
    return x.numpy(), labels.numpy().astype(np.int64)


def paths(name):
    spec = SPECS[name]
    p = lambda s: os.path.join(MODELS_DIR, "%s.%s" % (name, s))  # noqa: E731
    return dict(onnx=p("onnx"), json=p("json"), x=p("in.%s.npy" % spec["input"]), labels=p("in.labels.npy"))


def export(name):
    spec = SPECS[name]
    os.makedirs(MODELS_DIR, exist_ok=True)
    pp = paths(name)
    m = build(name)
    state = {k: v.clone() for k, v in m.state_dict().items()}
    digest = param_hash(m)
    x, labels = inputs(name)
    np.save(pp["x"], x)
    np.save(pp["labels"], labels)
    import copy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(copy.deepcopy(m), (torch.from_numpy(x),), pp["onnx"], export_params=True,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          opset_version=OPSET, input_names=[spec["input"]], output_names=["logits"])
    proto = onnx.load(pp["onnx"])
    samples.restore_initializers(proto, state)
    # which initializers are parameters (BatchNorm's running statistics are not), as
    # python/ckptc_export.py declares them: ckptc then updates exactly what PyTorch's SGD updates
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import ckptc_export
    ckptc_export.set_trainable(proto, ckptc_export.trainable_names(m, proto))
    onnx.save(proto, pp["onnx"])
    g = proto.graph
    missing = sorted(set(k for k in state if not k.endswith("num_batches_tracked"))
                     - {t.name for t in g.initializer})
    hist = collections.Counter(n.op_type for n in g.node)
    info = dict(model=name, family=spec["family"], depth=spec["depth"], input=spec["input"],
                input_shape=list(x.shape), labels_shape=list(labels.shape), classes=spec["classes"],
                nodes=len(g.node), op_types=dict(sorted(hist.items())),
                parameters=sum(p.numel() for p in m.parameters()), param_sha256=digest,
                state_not_in_onnx=missing,
                onnx_bytes=os.path.getsize(pp["onnx"]))
    with open(pp["json"], "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    print("%-9s %5d nodes  %10d parameters  %7.1f MB  %s" % (name, len(g.node), info["parameters"],
                                                            info["onnx_bytes"] / 1e6, "" if not missing else
                                                            "NOT IN ONNX: %s" % missing))
    return info


def main(argv):
    names = argv or list(SPECS)
    bad = [n for n in names if n not in SPECS]
    if bad:
        print("unknown model(s) %s; known: %s" % (bad, ", ".join(SPECS)), file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    for n in names:
        export(n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
