#!/usr/bin/python3
"""gen_budget_models.py — the small models test_budget enumerates (every subset of their recompute
candidates is planned, so each has at most 14 of them). Run from the repository root:

    /usr/bin/python3 tests/data/gen_budget_models.py

Writes tests/data/budget_{attn,cnn,ffn}.onnx (exported with python/ckptc_export.py, fixed seeds):
  attn  one pre-norm attention layer (LayerNorm, QK^T, masked softmax, PV, residual), d 16, T 8
  cnn   two conv/BatchNorm/ReLU layers with a residual add and a linear head, 8x8 images
  ffn   two LayerNorm/GELU feed-forward layers with residual adds, width 32
"""
import os
import sys

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from ckptc_export import export  # noqa: E402


class Attn(nn.Module):
    def __init__(self, d=16, t=8, v=32):
        super().__init__()
        self.emb = nn.Embedding(v, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.head = nn.Linear(d, v)
        self.register_buffer("mask", torch.tril(torch.ones(t, t)).view(1, t, t))

    def forward(self, idx):
        x = self.emb(idx)
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        a = (q @ k.transpose(-2, -1)) / 4.0
        a = a.masked_fill(self.mask == 0, float("-inf")).softmax(-1)
        x = x + self.proj(a @ v)
        return self.head(x)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        h = torch.relu(self.b1(self.c1(x)))
        h = torch.relu(self.b2(self.c2(h)) + h)
        return self.head(torch.flatten(h, 1))


class Ffn(nn.Module):
    def __init__(self, d=32, n=2):
        super().__init__()
        self.norms = nn.ModuleList([nn.LayerNorm(d) for _ in range(n)])
        self.fcs = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        for ln, fc in zip(self.norms, self.fcs):
            x = x + nn.functional.gelu(fc(ln(x)))
        return self.head(x)


def main():
    torch.manual_seed(0)
    export(Attn(), (torch.randint(0, 32, (2, 8)),), os.path.join(HERE, "budget_attn.onnx"), input_names=["idx"],
           output_names=["logits"])
    export(Cnn(), (torch.randn(2, 3, 8, 8),), os.path.join(HERE, "budget_cnn.onnx"), input_names=["x"],
           output_names=["logits"])
    export(Ffn(), (torch.randn(16, 32),), os.path.join(HERE, "budget_ffn.onnx"), input_names=["x"],
           output_names=["logits"])


if __name__ == "__main__":
    main()
