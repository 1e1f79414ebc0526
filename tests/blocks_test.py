#!/usr/bin/python3
"""blocks_test.py — --checkpoint=blocks on models whose node names do not give the blocks.

    blocks_test.py CKPTC REPO_DIR WORKDIR [--quick]

Held-out models exported here with python/ckptc_export.py: an MLP whose tanh and residual add are
outside each layer's scope (`x = torch.tanh(l(x)) + x`), torchvision's ViT (its units are
`encoder_layer_N`), RegNet (`block1-0`) and MobileNetV2, a small VGG-style stack of single-layer
`features.N`, and residual units whose head reads the first unit's output again (a checkpoint the
backward reads before the first recompute group, as in LR-ASPP: it must stay on the device under
--offload). For each: wherever sqrt plans a lower peak than none, blocks plans one at least as
low, --explain gives each segment its unit and why it ends, and two
AdamW steps under blocks and under selective (op-level recompute: LayerNorm, GELU, attention
products, BatchNorm as BatchNormApply) end with the bits of none (dump-params). A model without any repeated
unit gets the one line saying so. Exit 77 (skipped) without torchvision.
--quick (the sanitized build's run) leaves out RegNet and MobileNetV2, the two largest.
Ends with `N passed, N failed`.
"""
import os
import re
import subprocess
import sys

import numpy as np

CKPTC, REPO, WORK = sys.argv[1:4]
QUICK = "--quick" in sys.argv[4:]
os.makedirs(WORK, exist_ok=True)
sys.path.insert(0, os.path.join(REPO, "python"))
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


def models():
    import torch
    import torchvision
    from torch import nn
    from torchvision.models.vision_transformer import VisionTransformer

    class GlueMLP(nn.Module):
        def __init__(self, d=64, n=6):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])
            self.head = nn.Linear(d, 10)

        def forward(self, x):
            for layer in self.layers:
                x = torch.tanh(layer(x)) + x
            return self.head(x)

    class Stack(nn.Module):  # VGG-style: features.N are single layers, no unit repeats exactly
        def __init__(self):
            super().__init__()
            chans = [3, 8, 16, 16, 32]
            layers = []
            for a, b in zip(chans, chans[1:]):
                layers += [nn.Conv2d(a, b, 3, padding=1), nn.ReLU()]
            self.features = nn.Sequential(*layers)
            self.head = nn.Linear(32 * 16 * 16, 10)

        def forward(self, x):
            return self.head(torch.flatten(self.features(x), 1))

    class LongSkip(nn.Module):  # the head reads the first unit's output again, as LR-ASPP's head reads an early feature
        def __init__(self, d=32, n=6):
            super().__init__()
            self.stem = nn.Linear(16, d)
            self.units = nn.ModuleList([nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d)) for _ in range(n)])
            self.head, self.low = nn.Linear(d, 10), nn.Linear(d, 10)

        def forward(self, x):
            x = self.stem(x)
            early = None
            for i, u in enumerate(self.units):
                x = x + u(x)
                early = x if i == 0 else early
            return self.head(x) + self.low(early)

    torch.manual_seed(0)
    img = (2, 3, 32, 32)
    return [("glue_mlp", GlueMLP(), (32, 64)),
            ("vit", VisionTransformer(image_size=32, patch_size=8, num_layers=4, num_heads=2, hidden_dim=32, mlp_dim=64,
                                      num_classes=10), img),
            ("regnet", torchvision.models.regnet_x_400mf(num_classes=10), img),
            ("mobilenet_v2", torchvision.models.mobilenet_v2(num_classes=10, width_mult=0.25), img),
            ("vgg_stack", Stack(), (2, 3, 16, 16)),
            ("long_skip", LongSkip(), (8, 16))]


def peak(path, policy):
    p = run([CKPTC, path, f"--checkpoint={policy}", "--plan-only"])
    m = re.search(r"planned peak (\d+) bytes", p.stdout)
    if p.returncode != 0 or not m:
        raise SystemExit(f"FAIL: {path} {policy}: {p.stdout}{p.stderr}")
    return int(m.group(1)), p.stdout


def train(path, policy, d, extra=()):
    p = run([CKPTC, path, f"--checkpoint={policy}", *extra, "-o", d])
    if p.returncode == 0:
        p = run(["make", "-s", "-C", d])
    if p.returncode == 0:
        p = run([f"{d}/trainer", "--steps", "2", "--seed", "3", "--dump-params", f"{d}/params"])
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {path} {policy}: {p.stdout[-800:]}{p.stderr}")
    return {f: np.load(os.path.join(d, "params", f)) for f in sorted(os.listdir(f"{d}/params"))}


def main():
    try:
        import torch
        import torchvision  # noqa: F401
        from ckptc_export import export
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    torch.set_num_threads(1)
    for name, model, shape in models():
        if QUICK and name in ("regnet", "mobilenet_v2"):
            continue
        path = f"{WORK}/{name}.onnx"
        export(model, (torch.randn(*shape),), path, input_names=["x"], output_names=["logits"])
        (none, _), (blocks, out), (sq, _) = peak(path, "none"), peak(path, "blocks"), peak(path, "sqrt")
        line = next((l for l in out.splitlines() if l.startswith("ckptc: --checkpoint=blocks")), "(names)")
        check(f"{name}: none {none}, blocks {blocks}, sqrt {sq}: blocks lowers the peak wherever sqrt does, at least as far; "
              f"{line[:90]}", sq >= none or blocks <= sq, out)
        ex = run([CKPTC, path, "--checkpoint=blocks", "--plan-only", "--explain"]).stdout
        segs = [l for l in ex.splitlines() if l.startswith("segment ")]
        whys = [l for l in ex.splitlines() if l.startswith("        ") and "; ends: " in l]
        check(f"{name}: --explain says per segment which unit it is and why it ends ({len(segs)} segments)",
              len(whys) == len(segs), ex[-1500:])
        a = train(path, "none", f"{WORK}/{name}-none")
        for pol in ["blocks", "selective"]:
            b = train(path, pol, f"{WORK}/{name}-{pol}")
            check(f"{name}: two AdamW steps under {pol} end with the bits of none",
                  a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a))
        if name == "long_skip":  # the head's backward reads a checkpoint before the first recompute group: it stays on the device
            b = train(path, "blocks", f"{WORK}/{name}-offload", ["--offload"])
            check(f"{name}: two AdamW steps under blocks --offload end with the bits of none",
                  a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a))
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
