#!/usr/bin/python3
"""Scaling tests: how the planned memory of generated deep stacks grows with depth.

    scaling_test.py CKPTC WORKDIR

Builds two families of models at depths N = 4, 8, 16, 32 into WORKDIR:

- mlp: onnx.helper, opset 17, input x float (1024, 256), N residual blocks
  x = x + Gemm(Relu(Gemm(x, W1_i, b1_i)), W2_i, b2_i) (hidden 256, transB=1 as PyTorch exports
  nn.Linear), a head Gemm to 10 classes; node and initializer names as PyTorch's exporter scopes
  them (`/layers.{i}/fc1/Gemm`, `layers.{i}.fc1.weight`, ...);
- gpt: a small GPT decoder (the samples/export.py gpt class, copied here so that the test does not
  depend on that script's state) with N blocks, d_model 32, 4 heads, T 16, batch 2, exported by
  torch.onnx in training mode without constant folding at opset 17 (node names `/blocks.{i}/...`).

For every model and N it runs `ckptc MODEL --plan-only --optimizer=sgd --checkpoint=POLICY` for
POLICY in none, blocks, sqrt (SGD keeps optimizer state out of the plan), parses the planned peak
and the saved/transient activation bytes at the peak, and checks the product's guarantees:

- blocks' planned peak is below none's at every N;
- none's saved activations grow linearly in N: a least-squares fit saved(N) ~ a N + b has a > 0
  and a small relative residual, and saved(32) / saved(4) >= 5;
- blocks' saved activations grow by about one boundary tensor (the residual stream) per block:
  (saved(32) - saved(4)) / 28 <= 1.5 x boundary bytes, with one block's worth of none's saved
  activations (the fitted slope a) allowed as slack on the total growth;
- sqrt's checkpoints (the bytes its segments keep for their recompute: the `checkpoints N bytes`
  of --plan-only's segment lines, summed) grow sublinearly: ckpt(32) / ckpt(4) <= 0.75 x 32 / 4;
  its saved activations at the peak never exceed none's at the same N. (Not the saved bytes at
  the peak for the growth: where the peak lands decides how many checkpoints are live there, and
  with each update run as soon as its gradient is final the peak moved off the end of the
  backward, making that count depend on the depth's rounding.)

Prints a table (model, N, policy, planned peak, saved at the peak, transient at the peak) and ends
with the line `N passed, N failed`; exits 1 on any failure.
"""
import math
import os
import re
import subprocess
import sys
import time
import warnings

import numpy as np

# Debian 12's python3-onnx (1.12) still uses aliases that numpy 1.24 removed.
for _alias, _typ in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if _alias not in np.__dict__:  # (hasattr would print numpy's FutureWarning)
        setattr(np, _alias, _typ)

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

DEPTHS = (4, 8, 16, 32)
POLICIES = ("none", "blocks", "sqrt")
OPSET = 17

passed, failed = 0, 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name}: {detail}")


# ---------------------------------------------------------------- models

MLP_B, MLP_D, MLP_H, MLP_C = 1024, 256, 256, 10  # activations, not gradients, dominate: what checkpointing is for


def build_mlp(n, path):
    """N residual blocks x = x + fc2(relu(fc1(x))), then a head to 10 classes."""
    rng = np.random.default_rng(1000 + n)
    inits, nodes = [], []

    def linear(scope, fan_in, fan_out):
        bound = 1.0 / math.sqrt(fan_in)
        w = rng.uniform(-bound, bound, size=(fan_out, fan_in)).astype(np.float32)
        b = rng.uniform(-bound, bound, size=(fan_out,)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, scope + ".weight"))
        inits.append(numpy_helper.from_array(b, scope + ".bias"))
        return scope + ".weight", scope + ".bias"

    x = "x"
    for i in range(n):
        w1, b1 = linear(f"layers.{i}.fc1", MLP_D, MLP_H)
        w2, b2 = linear(f"layers.{i}.fc2", MLP_H, MLP_D)
        s = f"/layers.{i}"
        nodes.append(helper.make_node("Gemm", [x, w1, b1], [f"{s}/fc1/Gemm_output_0"], name=f"{s}/fc1/Gemm",
                                      alpha=1.0, beta=1.0, transB=1))
        nodes.append(helper.make_node("Relu", [f"{s}/fc1/Gemm_output_0"], [f"{s}/Relu_output_0"], name=f"{s}/Relu"))
        nodes.append(helper.make_node("Gemm", [f"{s}/Relu_output_0", w2, b2], [f"{s}/fc2/Gemm_output_0"],
                                      name=f"{s}/fc2/Gemm", alpha=1.0, beta=1.0, transB=1))
        nodes.append(helper.make_node("Add", [x, f"{s}/fc2/Gemm_output_0"], [f"{s}/Add_output_0"], name=f"{s}/Add"))
        x = f"{s}/Add_output_0"
    wh, bh = linear("head", MLP_D, MLP_C)
    nodes.append(helper.make_node("Gemm", [x, wh, bh], ["logits"], name="/head/Gemm", alpha=1.0, beta=1.0, transB=1))
    graph = helper.make_graph(nodes, f"residual_mlp_{n}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [MLP_B, MLP_D])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [MLP_B, MLP_C])],
                              initializer=inits)
    model = helper.make_model(graph, producer_name="scaling_test", opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


GPT_B, GPT_T, GPT_D, GPT_H, GPT_V = 2, 16, 32, 4, 97


def gpt_classes():
    """The samples/export.py gpt model, minimal copy (imports torch lazily)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class CausalSelfAttention(nn.Module):
        def __init__(self, d_model, n_head, block_size, dropout):
            super().__init__()
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
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_drop(att)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
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
        def __init__(self, vocab=GPT_V, block_size=GPT_T, d_model=GPT_D, n_head=GPT_H, n_layer=2, dropout=0.1):
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

    return torch, GPT


def build_gpt(n, path):
    torch, GPT = gpt_classes()
    torch.manual_seed(n)
    model = GPT(n_layer=n).train()
    idx = torch.randint(0, GPT_V, (GPT_B, GPT_T), generator=torch.Generator().manual_seed(1234))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (idx,), path, export_params=True, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=OPSET, input_names=["idx"],
                          output_names=["logits"])
    names = [nd.name for nd in onnx.load(path).graph.node]
    for i in range(n):
        if not any(nm.startswith(f"/blocks.{i}/") for nm in names):
            raise RuntimeError(f"{path}: no node scoped /blocks.{i}/")


MODELS = {
    # name: (builder, bytes of one block's boundary tensor = the residual stream)
    "mlp": (build_mlp, MLP_B * MLP_D * 4),
    "gpt": (build_gpt, GPT_B * GPT_T * GPT_D * 4),
}

# ---------------------------------------------------------------- planning

RE_PEAK = re.compile(r"^planned peak (\d+) bytes \(device\)", re.M)
RE_AT = re.compile(r"^\s*at the peak: saved activations (\d+), transient (\d+)\s*$", re.M)
RE_GRADS = re.compile(r"^\s*grads\s+(\d+)\s*$", re.M)
RE_STEP = re.compile(r"^peak at step (\d+) of (\d+): '(.*)' \((\w+)\)\s*$", re.M)
RE_SEG = re.compile(r"^segment .*, checkpoints (\d+) bytes\s*$", re.M)


def plan(ckptc, path, policy):
    cmd = [ckptc, path, "--plan-only", f"--checkpoint={policy}", "--optimizer=sgd"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    m, a = RE_PEAK.search(p.stdout), RE_AT.search(p.stdout)
    if p.returncode != 0 or not m or not a:
        return None, f"{' '.join(cmd)}: rc={p.returncode} stdout={p.stdout[-800:]!r} stderr={p.stderr[-800:]!r}"
    gr, st = RE_GRADS.search(p.stdout), RE_STEP.search(p.stdout)
    return {"peak": int(m.group(1)), "saved": int(a.group(1)), "transient": int(a.group(2)),
            "grads": int(gr.group(1)) if gr else 0,
            "where": f"{st.group(3)} ({st.group(4)}, step {st.group(1)}/{st.group(2)})" if st else "?",
            "segments": len(RE_SEG.findall(p.stdout)), "ckpt": sum(int(b) for b in RE_SEG.findall(p.stdout))}, None


def linfit(xs, ys):
    """least squares y ~ a x + b; returns a, b and the worst residual relative to max(y)"""
    a, b = np.polyfit(np.array(xs, float), np.array(ys, float), 1)
    worst = max(abs(a * x + b - y) for x, y in zip(xs, ys))
    return a, b, worst / max(max(ys), 1)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ckptc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    res = {}  # (model, N, policy) -> plan
    for model, (builder, _) in MODELS.items():
        for n in DEPTHS:
            path = os.path.join(work, f"{model}{n}.onnx")
            try:
                builder(n, path)
            except Exception as e:  # noqa: BLE001 -- reported as a failure, the rest still runs
                check(f"{model} N={n}: build", False, repr(e))
                continue
            for pol in POLICIES:
                r, err = plan(ckptc, path, pol)
                check(f"{model} N={n} {pol}: plan", r is not None, err)
                if r:
                    res[model, n, pol] = r

    print()
    print(f"{'model':<6} {'N':>3} {'policy':<7} {'planned peak':>14} {'saved@peak':>12} {'transient@peak':>15} "
          f"{'grads@peak':>11} {'segs':>5}  peak at")
    for model in MODELS:
        for n in DEPTHS:
            for pol in POLICIES:
                r = res.get((model, n, pol))
                if r:
                    print(f"{model:<6} {n:>3} {pol:<7} {r['peak']:>14} {r['saved']:>12} {r['transient']:>15} "
                          f"{r['grads']:>11} {r['segments']:>5}  {r['where']}")
                else:
                    print(f"{model:<6} {n:>3} {pol:<7} {'(no plan)':>14}")
    print()

    for model, (_, boundary) in MODELS.items():
        def get(n, pol, key):
            r = res.get((model, n, pol))
            return None if r is None else r[key]

        # blocks' planned peak below none's at every depth
        for n in DEPTHS:
            pb, pn = get(n, "blocks", "peak"), get(n, "none", "peak")
            if pb is not None and pn is not None:
                check(f"{model} N={n}: blocks peak < none peak", pb < pn, f"blocks {pb} >= none {pn} bytes")

        none_saved = [get(n, "none", "saved") for n in DEPTHS]
        a_none = None
        if None not in none_saved:
            a, b, rel = linfit(DEPTHS, none_saved)
            a_none = a
            # a >= 1: at least a byte per block (a constant series fits with a ~ 1e-13 > 0)
            check(f"{model}: none saved linear in N", a >= 1 and rel <= 0.05,
                  f"fit saved ~ {a:.1f} N + {b:.1f}, worst residual {rel:.3f} of max (want a >= 1, <= 0.05); "
                  f"saved {dict(zip(DEPTHS, none_saved))}")
            ratio = none_saved[-1] / max(none_saved[0], 1)
            check(f"{model}: none saved(32)/saved(4) >= 5", ratio >= 5,
                  f"{none_saved[-1]} / {none_saved[0]} = {ratio:.2f}")

        s4, s32 = get(4, "blocks", "saved"), get(32, "blocks", "saved")
        if s4 is not None and s32 is not None:
            slack = max(a_none, 0) if a_none is not None else 0
            per_block = (s32 - s4) / 28
            limit = 1.5 * boundary + slack / 28
            check(f"{model}: blocks saved grows ~ one boundary per block", per_block <= limit,
                  f"(saved(32) {s32} - saved(4) {s4}) / 28 = {per_block:.0f} bytes per block > 1.5 x {boundary} "
                  f"+ one block's slack {slack:.0f} / 28 = {limit:.0f}")

        q4, q32 = get(4, "sqrt", "ckpt"), get(32, "sqrt", "ckpt")
        if q4 is not None and q32 is not None:
            ratio = q32 / max(q4, 1)
            check(f"{model}: sqrt checkpoints sublinear ({q4} -> {q32} bytes)", q4 > 0 and ratio <= 0.75 * 32 / 4,
                  f"ckpt(32) {q32} / ckpt(4) {q4} = {ratio:.2f} > {0.75 * 32 / 4:.2f}")
        for n in DEPTHS:
            q, s = get(n, "sqrt", "saved"), get(n, "none", "saved")
            if q is not None and s is not None:
                check(f"{model} N={n}: sqrt saved <= none saved", q <= s, f"sqrt {q} > none {s}")

    print(f"\nruntime {time.time() - t0:.1f} s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
