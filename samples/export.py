#!/usr/bin/python3
# samples/export.py -- export the sample models ckptc is tested and benchmarked on.
#
# Rerun from the repository root with Debian's Python (it has torch, onnx, numpy):
#
#     /usr/bin/python3 samples/export.py            # every sample
#     /usr/bin/python3 samples/export.py gpt4       # only the named sample(s)
#
# It (re)writes, for each model NAME in mlp, gpt, bert, resnet, hardmlp, padnet, gpt_deep, gpt4, lstm:
#
#   samples/NAME.onnx              the model, exported in TRAINING mode at opset 17 without constant
#                                  folding, so Dropout and BatchNormalization keep their training
#                                  semantics, shape subgraphs (Shape/Gather/Unsqueeze/Concat) stay in
#                                  the graph, and initializers keep the PyTorch parameter names
#                                  (e.g. `layers.0.fc1.weight`); node names carry the module scope
#                                  (e.g. `/layers.3/fc1/Gemm`). Every initializer equals the fresh
#                                  model's state_dict entry (tracing runs one training-mode forward
#                                  that bumps BatchNorm running stats; we put the initial ones back).
#   samples/NAME.json              input/output names, dtypes and shapes (plus the symbolic dim
#                                  bindings, e.g. {"batch": 8} for mlp, {"batch": 4} for gpt4),
#                                  node count, op_type histogram, opset, checker result, a few node
#                                  names, and a note on how the reference output was computed.
#   samples/NAME.in.INPUT.npy      a fixed example input,
#   samples/NAME.out.OUTPUT.npy    PyTorch's output for that input with dropout disabled (p = 0) and
#                                  everything else, BatchNorm included, in training mode.
#
# and, for every model but gpt_deep, PyTorch's TRAINING references (json key "train_reference"):
#
#   samples/NAME.in.labels.npy     fixed int64 class labels for cross-entropy (seeded),
#   samples/NAME.grads/P.npy       d loss / d P (float32) for every parameter P that gets a gradient,
#                                  P = the PyTorch parameter name = the ONNX initializer name, where
#                                  loss = F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1))
#                                  (mean) of the same dropout-off, training-mode forward as above;
#   samples/resnet.after_step/B.npy  BatchNorm running_mean/running_var after that one forward;
#   samples/NAME.sgd_step/P.npy    (mlp, gpt, gpt4, hardmlp, padnet, lstm) every parameter after one
#                                  torch.optim.SGD(lr=0.1) step;
#   json "sgd_losses"              (lstm) the losses of 3 such SGD steps on the same batch.
#
# A float64 finite-difference spot check of a few recorded gradient elements is printed (not stored).
#
# Everything is seeded (weights and example inputs), so a rerun writes the same bytes.
# The models are small on purpose (every .onnx is under 1 MB; gpt4, the largest, is ~0.97 MB).
#
# gpt4 is the gpt model scaled up (4 blocks, d_model 64, 4 heads, T = 64 with a 64-entry position
# table, vocab 97, dropout 0.1) and, unlike gpt, exported with a DYNAMIC batch axis `batch` on
# `idx` and `logits`: the ONNX file has a symbolic dim, and the x.size() calls in forward become
# real Shape/Gather/Unsqueeze/Concat subgraphs for the batch dimension. Its references use batch 4.

import copy
import collections
import json
import math
import os
import sys
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17
HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------

class ResidualBlock(nn.Module):
    """x + fc2(relu(fc1(x)))"""

    def __init__(self, d, hidden):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.fc2(F.relu(self.fc1(x)))


class ResidualMLP(nn.Module):
    def __init__(self, d_in=64, hidden=128, n_layers=4, n_classes=10):
        super().__init__()
        self.layers = nn.ModuleList([ResidualBlock(d_in, hidden) for _ in range(n_layers)])
        self.head = nn.Linear(d_in, n_classes)

    def forward(self, x):                      # x: (B, 64)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)                    # (B, 10)


class HardMLP(nn.Module):
    """MobileNetV3's activations on an MLP: fc1 -> Hardswish, a squeeze-excite style gate
    (gate -> Hardsigmoid, multiplied in), then the head. Exports HardSwish and HardSigmoid
    (alpha 1/6, PyTorch's definition; ONNX's default is 0.2)."""

    def __init__(self, d_in=32, hidden=64, n_classes=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.gate = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x):                      # x: (B, 32)
        h = F.hardswish(self.fc1(x) * 4.0)     # scaled so the values reach both flat parts
        return self.head(h * F.hardsigmoid(self.gate(h) * 4.0))


class PadNet(nn.Module):
    """F.pad in its three modes on a small conv net: reflect before conv1, replicate (ONNX's edge)
    before conv2, and constant with pads computed from the feature map's shape as Swin pads to a
    multiple of its window (Mod, Sub in the exported shape subgraph), then average pooling. A
    learned gain written in place into channel 0 (`h[:, 0] = ...`) exports as ScatterND."""

    def __init__(self, n_classes=10, window=4):
        super().__init__()
        self.window = window
        self.conv1 = nn.Conv2d(3, 6, 3)
        self.conv2 = nn.Conv2d(6, 8, 3)
        self.gain = nn.Parameter(1.0 + 0.5 * torch.rand(11))
        self.head = nn.Linear(8 * 3 * 3, n_classes)

    def forward(self, x):                                                  # x: (B, 3, 10, 10)
        r = torch.relu(self.conv1(F.pad(x, (1, 2, 2, 1), mode="reflect")))  # (B, 6, 11, 11)
        h = r.clone()
        h[:, 0] = r[:, 0] * self.gain                                        # ScatterND
        h = self.conv2(F.pad(h, (1, 1, 0, 2), mode="replicate"))             # (B, 8, 11, 11)
        w = self.window
        pad_r, pad_b = (w - h.shape[-1] % w) % w, (w - h.shape[-2] % w) % w
        h = F.pad(h, (0, pad_r, 0, pad_b), value=0.25)                      # (B, 8, 12, 12)
        return self.head(torch.flatten(F.avg_pool2d(h, w), 1))


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention written out by hand (one fused qkv projection)."""

    def __init__(self, d_model, n_head, block_size, dropout):
        super().__init__()
        assert d_model % n_head == 0
        self.n_head = n_head
        self.head_dim = d_model // n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x):                      # x: (B, T, C)
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)   # (B, nh, T, hd)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)      # (B, nh, T, T)
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_drop(att)
        y = att @ v                                                      # (B, nh, T, hd)
        y = y.transpose(1, 2).contiguous().view(B, T, C)                 # merge heads
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.proj(self.act(self.fc(x)))


class GPTBlock(nn.Module):
    def __init__(self, d_model, n_head, block_size, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, block_size, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab=97, block_size=16, d_model=32, n_head=4, n_layer=2, dropout=0.1):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList([GPTBlock(d_model, n_head, block_size, dropout)
                                     for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab)

    def forward(self, idx):                    # idx: (B, T) int64
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))      # (B, T, vocab)


class BERT(nn.Module):
    """Encoder: embeddings + nn.TransformerEncoderLayer x n_layer + classifier on token 0."""

    def __init__(self, vocab=97, max_len=12, d_model=32, n_head=4, d_ff=64, n_layer=2,
                 n_classes=3, dropout=0.1):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model=d_model, nhead=n_head, dim_feedforward=d_ff,
                                       dropout=dropout, batch_first=True)
            for _ in range(n_layer)])
        self.classifier = nn.Linear(d_model, n_classes)

    def forward(self, idx):                    # idx: (B, T) int64
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for layer in self.layers:
            x = layer(x)
        return self.classifier(x[:, 0])        # (B, n_classes)


class BasicBlock(nn.Module):
    """torchvision-style BasicBlock: conv-bn-relu-conv-bn + shortcut, then relu."""

    def __init__(self, c_in, c_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                nn.BatchNorm2d(c_out))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = nn.Sequential(BasicBlock(8, 8), BasicBlock(8, 8))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, stride=2), BasicBlock(16, 16))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16, n_classes)

    def forward(self, x):                      # x: (B, 3, 16, 16)
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))   # (B, 8, 8, 8)
        x = self.layer1(x)                                     # (B, 8, 8, 8)
        x = self.layer2(x)                                     # (B, 16, 4, 4)
        return self.fc(self.flatten(self.avgpool(x)))          # (B, 10)


# ---------------------------------------------------------------------------------------------
# Sample table: name -> how to build the model and its example input
# ---------------------------------------------------------------------------------------------

class LSTMClassifier(nn.Module):
    """Embedding -> 2-layer bidirectional LSTM (batch_first) -> mean over time -> Linear. Exported,
    each layer is one ONNX LSTM node (direction=bidirectional) fed by Slice/Concat of the PyTorch
    weights (gates reordered ifgo -> iofc) and Expand'ed zero initial states."""

    def __init__(self, vocab=97, d=16, hidden=24, n_classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, n_classes)

    def forward(self, idx):                    # idx: (B, T) int64
        y, _ = self.lstm(self.emb(idx))        # (B, T, 2 * hidden)
        return self.head(y.mean(dim=1))


def tokens(gen, shape, vocab=97):
    return torch.randint(0, vocab, shape, generator=gen, dtype=torch.long)


def next_token_labels(gen, example, vocab=97):
    """GPT labels: label[b, t] = idx[b, t + 1]; the last position gets a seeded random token."""
    idx = example[0]
    last = torch.randint(0, vocab, (idx.shape[0], 1), generator=gen, dtype=torch.long)
    return torch.cat([idx[:, 1:], last], dim=1)


SAMPLES = [
    # name, model factory, input names, example-input factory, output names, dynamic axes, dims
    dict(name="mlp", model=lambda: ResidualMLP(),
         inputs=["x"], example=lambda g: [torch.randn(8, 64, generator=g)],
         outputs=["logits"],
         dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, dims={"batch": 8},
         labels=lambda g, ex: torch.randint(0, 10, (8,), generator=g), sgd=True,
         fd_params=["layers.0.fc1.weight", "head.bias"]),
    dict(name="gpt", model=lambda: GPT(n_layer=2),
         inputs=["idx"], example=lambda g: [tokens(g, (2, 16))],
         outputs=["logits"], dynamic_axes=None, dims={},
         labels=next_token_labels, sgd=True,
         fd_params=["blocks.0.attn.qkv.weight", "blocks.1.ln1.weight"]),
    dict(name="bert", model=lambda: BERT(),
         inputs=["idx"], example=lambda g: [tokens(g, (2, 12))],
         outputs=["logits"], dynamic_axes=None, dims={},
         labels=lambda g, ex: torch.randint(0, 3, (2,), generator=g), sgd=False,
         fd_params=["layers.0.self_attn.in_proj_weight", "classifier.weight"]),
    dict(name="resnet", model=lambda: ResNet(),
         inputs=["x"], example=lambda g: [torch.randn(2, 3, 16, 16, generator=g)],
         outputs=["logits"], dynamic_axes=None, dims={},
         labels=lambda g, ex: torch.randint(0, 10, (2,), generator=g), sgd=False,
         fd_params=["conv1.weight", "layer2.0.bn1.weight"]),
    dict(name="hardmlp", model=lambda: HardMLP(),
         inputs=["x"], example=lambda g: [torch.randn(8, 32, generator=g)],
         outputs=["logits"], dynamic_axes=None, dims={},
         labels=lambda g, ex: torch.randint(0, 10, (8,), generator=g), sgd=True,
         fd_params=["fc1.weight", "gate.bias"]),
    dict(name="padnet", model=lambda: PadNet(),
         inputs=["x"], example=lambda g: [torch.randn(2, 3, 10, 10, generator=g)],
         outputs=["logits"], dynamic_axes=None, dims={},
         labels=lambda g, ex: torch.randint(0, 10, (2,), generator=g), sgd=True,
         fd_params=["conv1.weight", "gain"]),
    dict(name="gpt_deep", model=lambda: GPT(n_layer=12),
         inputs=["idx"], example=lambda g: [tokens(g, (2, 16))],
         outputs=["logits"], dynamic_axes=None, dims={}),
    dict(name="gpt4", model=lambda: GPT(vocab=97, block_size=64, d_model=64, n_head=4, n_layer=4,
                                        dropout=0.1),
         inputs=["idx"], example=lambda g: [tokens(g, (4, 64))],
         outputs=["logits"],
         dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}}, dims={"batch": 4},
         labels=next_token_labels, sgd=True,
         fd_params=["blocks.0.attn.qkv.weight", "blocks.3.ln1.weight"]),
    dict(name="lstm", model=lambda: LSTMClassifier(),
         inputs=["idx"], example=lambda g: [tokens(g, (2, 8))],
         outputs=["logits"], dynamic_axes=None, dims={},
         labels=lambda g, ex: torch.randint(0, 5, (2,), generator=g), sgd=True, sgd_steps=3,
         fd_params=["lstm.weight_hh_l0", "lstm.bias_ih_l1_reverse"]),
]

REFERENCE_NOTE = (
    "Reference output = PyTorch forward of a deep copy of the freshly initialised model, the "
    "whole copy in training mode (model.train(), so BatchNorm normalises with the batch "
    "statistics), with every dropout disabled by setting its probability to 0 (nn.Dropout.p = 0 "
    "and, inside nn.TransformerEncoderLayer, nn.MultiheadAttention.dropout = 0.0); computed "
    "under torch.no_grad(), float32, CPU. To compare, run the ONNX graph with Dropout ratio 0 "
    "(or Dropout as identity) and BatchNormalization with training_mode=1.")


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def disable_dropout(model):
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
        if isinstance(m, nn.MultiheadAttention):
            m.dropout = 0.0
    return model


def onnx_dims(value_info):
    """Shape of an ONNX ValueInfo as a list of ints / dim_param strings (None if unknown)."""
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]


def onnx_dtype(value_info):
    """(numpy dtype name, ONNX TensorProto.DataType name, ONNX elem_type number)"""
    elem = value_info.type.tensor_type.elem_type
    return (np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem]).name,
            onnx.TensorProto.DataType.Name(elem), elem)


def restore_initializers(proto, state):
    """Make every initializer equal the freshly initialised model's state_dict entry.

    Tracing runs one forward in training mode, and BatchNorm updates running_mean/running_var
    in place before the exporter copies them, so the exported running stats would be one update
    ahead of the PyTorch model. Put the initial values back. Returns the names that changed."""
    changed = []
    for t in proto.graph.initializer:
        if t.name not in state:
            continue
        want = state[t.name].detach().numpy()
        have = onnx.numpy_helper.to_array(t)
        if have.shape != want.shape or have.dtype != want.dtype:
            raise SystemExit("initializer %s: %s %s vs state_dict %s %s"
                             % (t.name, have.shape, have.dtype, want.shape, want.dtype))
        if not np.array_equal(have, want):
            t.CopyFrom(onnx.numpy_helper.from_array(want, t.name))
            changed.append(t.name)
    return changed


TRAIN_NOTE = (
    "Training reference = PyTorch on a deep copy of the freshly initialised model (the very "
    "weights exported to the .onnx), prepared exactly like the reference output: the whole copy "
    "in training mode (model.train(); BatchNorm normalises with the batch statistics) with every "
    "dropout disabled (nn.Dropout.p = 0, nn.MultiheadAttention.dropout = 0.0); float32, CPU, "
    "one thread. One forward of the reference input (reference_files.inputs) with autograd on, "
    "then loss = torch.nn.functional.cross_entropy(logits.reshape(-1, C), labels.reshape(-1)) "
    "(reduction='mean' over all B (x T) rows, no label smoothing, no ignore_index in play, C = "
    "last dim of logits) with labels = labels_file (int64), then loss.backward() from zeroed "
    "gradients. grads_dir/P.npy = P.grad (float32, P's shape) for every parameter P with "
    "requires_grad whose .grad is not None; P is both the PyTorch parameter name and the ONNX "
    "initializer name. No gradient clipping, no weight decay.")

BN_NOTE = (
    " BatchNorm: PyTorch updates the running stats in that one training-mode forward (before the "
    "backward): running_mean = (1 - 0.1) * running_mean + 0.1 * mean_batch and running_var = "
    "(1 - 0.1) * running_var + 0.1 * var_batch_unbiased, where mean/var are taken per channel "
    "over (N, H, W), var_batch_unbiased = sum((x - mean)^2) / (n - 1) with n = N*H*W (the "
    "normalisation itself uses the biased var, / n, plus eps = 1e-5); PyTorch momentum 0.1 = "
    "1 - ONNX BatchNormalization momentum 0.9; initial stats are mean 0, var 1. after_step_dir/"
    "B.npy holds PyTorch's values of every running_mean/running_var buffer after that forward "
    "(num_batches_tracked, +1, is not recorded; with a fixed momentum it does not matter). "
    "ONNX opset-15+ BatchNormalization in training mode defines running_var with the biased "
    "(population) variance, so an ONNX-literal implementation differs from these files by the "
    "factor n/(n-1) on the 0.1 * var_batch term.")

SGD_NOTE = (
    " SGD: after loss.backward(), torch.optim.SGD(model.parameters(), lr=sgd_lr).step() (momentum "
    "0, dampening 0, weight_decay 0, nesterov False, maximize False): P <- P - lr * P.grad; "
    "sgd_step_dir/P.npy holds every parameter after that single step (float32).")

LABEL_SEED = 5678     # labels generator (separate from the weight seed 0 and input seed 1234)
FD_SEED = 99          # which elements the finite-difference spot check probes
SGD_LR = 0.1


def save_npy_dir(dirpath, arrays):
    """Write NAME.npy for each (NAME, array) into dirpath, dropping stale .npy files first."""
    os.makedirs(dirpath, exist_ok=True)
    for f in sorted(os.listdir(dirpath)):
        if f.endswith(".npy"):
            os.remove(os.path.join(dirpath, f))
    for nm, a in arrays:
        np.save(os.path.join(dirpath, nm + ".npy"), a)


def ce_loss(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def finite_difference_check(spec, model, example, labels, grads, eps=1e-6, n_elem=3):
    """Central differences in float64 on a float64 copy; prints, returns (all_ok, rows)."""
    m64 = disable_dropout(copy.deepcopy(model)).double().train()
    ex64 = [t.double() if t.is_floating_point() else t for t in example]
    params = dict(m64.named_parameters())
    # float64 autograd on the same copy, to tell float32 rounding from a wrong gradient
    m64.zero_grad(set_to_none=True)
    ce_loss(m64(*ex64), labels).backward()
    g64 = {n: p.grad.detach().clone() for n, p in params.items() if p.grad is not None}
    rs = np.random.RandomState(FD_SEED)
    rows = []
    ok = True
    for pname in spec["fd_params"]:
        p = params[pname]
        flat = p.data.view(-1)
        for i in sorted(rs.choice(flat.numel(), n_elem, replace=False).tolist()):
            orig = flat[i].item()
            with torch.no_grad():
                flat[i] = orig + eps
                lp = ce_loss(m64(*ex64), labels).item()
                flat[i] = orig - eps
                lm = ce_loss(m64(*ex64), labels).item()
                flat[i] = orig
            fd = (lp - lm) / (2 * eps)
            g = float(grads[pname].reshape(-1)[i])
            a64 = float(g64[pname].reshape(-1)[i])
            rel = abs(fd - g) / max(abs(fd), abs(g), 1e-30)
            rel64 = abs(fd - a64) / max(abs(fd), abs(a64), 1e-30)
            # |error| relative to the parameter's largest gradient: an element that is a
            # near-cancelling sum (e.g. a bias grad ~1e-5 summed from terms ~0.1) can only be
            # as exact as float32 rounding of those terms allows.
            scaled = abs(fd - g) / float(np.abs(grads[pname]).max())
            if rel <= 1e-4:
                verdict = "ok"
            elif scaled <= 1e-5 and rel64 <= 1e-4:
                verdict = "ok within float32 rounding (rel > 1e-4 only from cancellation)"
            else:
                verdict = "FAIL"
            ok &= verdict != "FAIL"
            rows.append((pname, i, fd, g, rel, verdict))
            print("   fd check %-36s [%5d]  fd64 % .9e  recorded(f32) % .9e  rel %.2e"
                  "  |err|/max|g| %.1e  rel vs f64 autograd %.1e  %s"
                  % (pname, i, fd, g, rel, scaled, rel64, verdict))
    return ok, rows


def train_reference(spec, model, example, ref_out, init_names):
    """Record PyTorch's loss, gradients (and BN stats / one SGD step) for one model."""
    name = spec["name"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        labels = spec["labels"](torch.Generator().manual_seed(LABEL_SEED), example).to(torch.long)
        labels_file = "%s.in.labels.npy" % name
        np.save(os.path.join(HERE, labels_file), labels.numpy().astype(np.int64))

        tm = disable_dropout(copy.deepcopy(model)).train()
        tm.zero_grad(set_to_none=True)
        logits = tm(*example)
        same_as_ref = bool(torch.equal(logits.detach(), ref_out))
        loss = ce_loss(logits, labels)
        loss.backward()

        named = [(n, p) for n, p in tm.named_parameters() if p.requires_grad]
        with_grad = [(n, p.grad.detach().numpy().astype(np.float32)) for n, p in named
                     if p.grad is not None]
        without_grad = [n for n, p in named if p.grad is None]
        not_init = [n for n, _ in tm.named_parameters() if n not in init_names]
        grads_dir = "%s.grads" % name
        save_npy_dir(os.path.join(HERE, grads_dir), with_grad)
        grads = dict(with_grad)
        max_abs = max(float(np.abs(g).max()) for _, g in with_grad)

        out = {
            "loss": float(loss.item()),
            "loss_fn": "cross_entropy(logits.reshape(-1, %d), labels.reshape(-1)), mean"
                       % logits.shape[-1],
            "labels_file": labels_file,
            "labels_shape": list(labels.shape),
            "labels_dtype": "int64",
            "grads_dir": grads_dir,
            "grad_params": [n for n, _ in with_grad],
            "params_without_grad": without_grad,
            "params_not_onnx_initializers": not_init,
            "max_abs_grad": max_abs,
            "forward_equals_reference_output": same_as_ref,
            "note": TRAIN_NOTE,
        }

        bn = [(n, b.detach().numpy().copy()) for n, b in tm.named_buffers()
              if n.endswith(".running_mean") or n.endswith(".running_var")]
        if bn:
            out["after_step_dir"] = "%s.after_step" % name
            out["after_step_buffers"] = [n for n, _ in bn]
            out["bn_momentum_torch"] = 0.1
            out["note"] += BN_NOTE
            save_npy_dir(os.path.join(HERE, out["after_step_dir"]), bn)

        if spec.get("sgd"):
            torch.optim.SGD(tm.parameters(), lr=SGD_LR).step()
            out["sgd_lr"] = SGD_LR
            out["sgd_step_dir"] = "%s.sgd_step" % name
            out["note"] += SGD_NOTE
            save_npy_dir(os.path.join(HERE, out["sgd_step_dir"]),
                         [(n, p.detach().numpy().copy()) for n, p in tm.named_parameters()])
            if spec.get("sgd_steps", 1) > 1:  # the losses of the next steps, same SGD
                losses, opt = [out["loss"]], torch.optim.SGD(tm.parameters(), lr=SGD_LR)
                for _ in range(spec["sgd_steps"] - 1):
                    opt.zero_grad(set_to_none=True)
                    step_loss = ce_loss(tm(*example), labels)
                    losses.append(float(step_loss.item()))
                    step_loss.backward()
                    opt.step()
                out["sgd_losses"] = losses

        print("   train: loss %.7f  max|grad| %.6g  %d grads  without grad %s  not initializers %s"
              "  forward == reference output: %s"
              % (out["loss"], max_abs, len(with_grad), without_grad, not_init, same_as_ref))
        fd_ok, _ = finite_difference_check(spec, model, example, labels, grads)
        print("   fd check: %s" % ("pass" if fd_ok else "SOME ELEMENTS FAIL"))
    finally:
        torch.set_num_threads(threads)
    return out


def bind(dims, binding):
    return [binding.get(d, d) if isinstance(d, str) else d for d in dims]


def check(model_proto):
    try:
        onnx.checker.check_model(model_proto)
        checker = "pass"
    except Exception as e:  # noqa: BLE001 -- record whatever the checker says
        checker = "fail: %s" % e
    try:
        onnx.shape_inference.infer_shapes(model_proto, check_type=True, strict_mode=True)
        infer = "pass"
    except Exception as e:  # noqa: BLE001
        infer = "fail: %s" % str(e).splitlines()[0]
    return checker, infer


def export_one(spec):
    name = spec["name"]
    torch.manual_seed(0)
    model = spec["model"]().train()
    gen = torch.Generator().manual_seed(1234)
    example = spec["example"](gen)

    # Reference: dropout off, everything else (BatchNorm) in training mode. Done on copies
    # before export so that no forward pass (tracing runs one) touches the model's buffers.
    ref_model = disable_dropout(copy.deepcopy(model)).train()
    with torch.no_grad():
        ref_out = ref_model(*example)
    # Output shape/dtype as PyTorch sees it in plain train mode (dropout on).
    with torch.no_grad():
        train_out = copy.deepcopy(model).train()(*example)

    path = os.path.join(HERE, name + ".onnx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.onnx.export(copy.deepcopy(model), tuple(example), path,
                          export_params=True,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False,
                          opset_version=OPSET,
                          input_names=spec["inputs"],
                          output_names=spec["outputs"],
                          dynamic_axes=spec["dynamic_axes"])
    export_warnings = sorted({"%s: %s" % (w.category.__name__, str(w.message).strip())
                              for w in caught})
    # Where each warning came from (printed only: the paths are machine-specific).
    for where in sorted({"%s:%d" % (w.filename, w.lineno) for w in caught}):
        print("   [%s] warning raised at %s" % (name, where))

    proto = onnx.load(path)
    state = model.state_dict()
    restored = restore_initializers(proto, state)
    if restored:
        onnx.save(proto, path)
    g = proto.graph
    hist = collections.Counter(n.op_type for n in g.node)
    checker, infer = check(proto)
    unnamed = [i for i, n in enumerate(g.node) if not n.name]
    names = [n.name for n in g.node]
    dim_params = sorted({d for vi in list(g.input) + list(g.output) + list(g.value_info)
                         for d in (onnx_dims(vi) or []) if isinstance(d, str)})
    init_names = {t.name for t in g.initializer}
    opset = {(o.domain or "ai.onnx"): o.version for o in proto.opset_import}

    for nm, t in zip(spec["inputs"], example):
        np.save(os.path.join(HERE, "%s.in.%s.npy" % (name, nm)), t.numpy())
    for nm, t in zip(spec["outputs"], [ref_out]):
        np.save(os.path.join(HERE, "%s.out.%s.npy" % (name, nm)), t.numpy())

    graph_inputs = {vi.name: vi for vi in g.input if vi.name not in init_names}
    info = {
        "model": name,
        "file": name + ".onnx",
        "producer": "%s %s" % (proto.producer_name, proto.producer_version),
        "ir_version": proto.ir_version,
        "opset": opset,
        "dims": spec["dims"],
        "inputs": [],
        "outputs": [],
        "reference_note": REFERENCE_NOTE,
        "reference_files": {
            "inputs": {nm: "%s.in.%s.npy" % (name, nm) for nm in spec["inputs"]},
            "outputs": {nm: "%s.out.%s.npy" % (name, nm) for nm in spec["outputs"]},
        },
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "num_initializers": len(g.initializer),
        "initializers_not_in_state_dict": sorted({t.name for t in g.initializer} - set(state)),
        "state_dict_entries_not_exported": sorted(set(state) - {t.name for t in g.initializer}),
        "initializers_restored_after_trace": restored,
        "unscoped_node_names": sum(1 for n in g.node if not n.name.startswith("/")),
        "node_count": len(g.node),
        "op_types": dict(sorted(hist.items())),
        "checker": checker,
        "strict_shape_inference": infer,
        "all_nodes_named": not unnamed,
        "node_names_unique": len(set(names)) == len(names),
        "dim_params": dim_params,
        "sample_node_names": names[:3] + names[len(names) // 2: len(names) // 2 + 3] + names[-3:],
        "export_warnings": export_warnings,
    }
    for nm, t in zip(spec["inputs"], example):
        vi = graph_inputs[nm]
        dt, odt, elem = onnx_dtype(vi)
        info["inputs"].append({"name": nm, "dtype": dt, "onnx_dtype": odt, "onnx_elem_type": elem,
                               "shape": bind(onnx_dims(vi), spec["dims"]),
                               "onnx_shape": onnx_dims(vi),
                               "torch_shape": list(t.shape), "torch_dtype": str(t.dtype)})
    for nm, t in zip(spec["outputs"], [train_out]):
        vi = next(o for o in g.output if o.name == nm)
        dt, odt, elem = onnx_dtype(vi)
        info["outputs"].append({"name": nm, "dtype": dt, "onnx_dtype": odt, "onnx_elem_type": elem,
                                "shape": list(t.shape), "torch_dtype": str(t.dtype),
                                "onnx_shape": onnx_dims(vi)})
    extra_outputs = [o.name for o in g.output if o.name not in spec["outputs"]]
    if extra_outputs:
        info["extra_graph_outputs"] = extra_outputs
    if "labels" in spec:
        info["train_reference"] = train_reference(spec, model, example, ref_out, init_names)

    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(info, f, indent=2, sort_keys=False)
        f.write("\n")

    print("== %s: %d nodes, opset %s, checker %s, strict shape inference %s, %.1f KB"
          % (name, len(g.node), opset, checker, infer, os.path.getsize(path) / 1024))
    print("   ops: " + ", ".join("%s=%d" % kv for kv in sorted(hist.items())))
    print("   inputs: %s  outputs: %s  dim_params: %s"
          % ([(i["name"], i["dtype"], i["onnx_shape"]) for i in info["inputs"]],
             [(o["name"], o["dtype"], o["shape"]) for o in info["outputs"]], dim_params))
    print("   all nodes named: %s (unique: %s)" % (not unnamed, info["node_names_unique"]))
    for n in info["sample_node_names"]:
        print("     " + n)
    for w in export_warnings:
        print("   warning: " + w.splitlines()[0][:200])
    return not unnamed and checker == "pass"


def main(argv):
    """Export every sample, or only those named on the command line."""
    known = [s["name"] for s in SAMPLES]
    unknown = [a for a in argv if a not in known]
    if unknown:
        print("unknown sample(s) %s; known: %s" % (", ".join(unknown), ", ".join(known)),
              file=sys.stderr)
        return 2
    ok = True
    for spec in SAMPLES:
        if not argv or spec["name"] in argv:
            ok &= export_one(spec)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
