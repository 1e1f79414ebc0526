#!/usr/bin/python3
"""trainable_test.py — buffers stay buffers: the ckptc.trainable entry and python/ckptc_export.py.

    trainable_test.py CKPTC WORKDIR

A hand-written attention model with two kinds of float buffers, a causal mask holding -inf added
to the scores and RoPE-like cos/sin tables multiplied into q and k:
- exported with python/ckptc_export.py (which writes the entry from named_parameters()): ckptc
  trains it for 3 SGD steps and matches PyTorch's losses (relative 1e-5) and parameters (1e-5 of
  max(1, |torch|)); the buffers are not in --dump-params; `inspect` calls them constants and says
  where that came from;
- exported with plain torch.onnx.export (no entry): ckptc warns in one line naming the key and the
  three buffers, and the run trains them and leaves PyTorch's losses (the check that the first
  half can fail);
- a Conv/BatchNorm model exported with the helper: the running statistics stay buffers;
- bad entries (not JSON, not an array of strings, an unknown name, an int64 initializer): exit 2
  with one `ckptc: error:` line naming the key or the name.
Ends with `N passed, N failed`.
"""
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
from onnx_common import np, onnx  # noqa: E402  (NumPy aliases for python3-onnx 1.12, before onnx)
import torch  # noqa: E402
import ckptc_export  # noqa: E402

CKPTC, WORK = sys.argv[1:3]
os.makedirs(WORK, exist_ok=True)
passed = failed = 0
B, T, D, V, LR, STEPS = 2, 8, 16, 12, 0.1, 3
BUFFERS = ["causal", "cos_cached", "sin_cached"]


def check(name, ok, detail=""):
    global passed, failed
    passed, failed = passed + bool(ok), failed + (not ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


class RopeAttention(torch.nn.Module):
    """Embedding, one causal self-attention with rotary q/k from buffers, a residual, a head."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(V, D)
        self.q, self.k, self.v = (torch.nn.Linear(D, D, bias=False) for _ in range(3))
        self.head = torch.nn.Linear(D, V)
        self.register_buffer("causal", torch.full((T, T), float("-inf")).triu(1))
        ang = torch.arange(T, dtype=torch.float32)[:, None] * (1e4 ** (-torch.arange(0, D, 2) / D))[None, :]
        self.register_buffer("cos_cached", torch.cat([ang.cos(), ang.cos()], -1))
        self.register_buffer("sin_cached", torch.cat([ang.sin(), ang.sin()], -1))

    def rope(self, x):
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return x * self.cos_cached + torch.cat([-x2, x1], -1) * self.sin_cached

    def forward(self, idx):
        x = self.emb(idx)
        q, k = self.rope(self.q(x)), self.rope(self.k(x))
        s = q @ k.transpose(-1, -2) / math.sqrt(D) + self.causal
        return self.head(x + torch.softmax(s, -1) @ self.v(x))


torch.manual_seed(0)
model = RopeAttention()
idx = torch.randint(0, V, (B, T))
labels = torch.randint(0, V, (B, T))
np.save(f"{WORK}/idx.npy", idx.numpy())
np.save(f"{WORK}/labels.npy", labels.numpy())
declared = f"{WORK}/declared.onnx"
names = ckptc_export.export(model, (idx,), declared, input_names=["idx"], output_names=["logits"])
plain = f"{WORK}/plain.onnx"
torch.onnx.export(model, (idx,), plain, input_names=["idx"], output_names=["logits"], opset_version=17,
                  do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
want_names = [n for n, _ in model.named_parameters()]
check(f"the helper lists the {len(want_names)} parameters and no buffer", sorted(names) == sorted(want_names), str(names))

# PyTorch's 3 SGD steps
ref = RopeAttention()
ref.load_state_dict(model.state_dict())
opt = torch.optim.SGD(ref.parameters(), lr=LR)
want_losses = []
for _ in range(STEPS):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(ref(idx).reshape(-1, V), labels.reshape(-1))
    want_losses.append(loss.item())
    loss.backward()
    opt.step()


def losses_of(report):
    """The report's losses (strict JSON: a non-finite loss is null), null as NaN."""
    return [float("nan") if v is None else v for v in json.loads(open(report).read())["losses"]]


def train(path, tag):
    d = f"{WORK}/{tag}"
    p = run([CKPTC, path, "--optimizer=sgd", "--lr", str(LR), "-o", d])
    if p.returncode == 0:
        p2 = run(["make", "-s", "-C", d])
        if p2.returncode:
            return p, None, None
        r = run([f"{d}/trainer", "--input", f"idx={WORK}/idx.npy", "--input", f"labels={WORK}/labels.npy", "--steps", str(STEPS),
                 "--report", f"{d}/r.json", "--dump-params", f"{d}/params", "--allow-nonfinite"])
        if r.returncode == 0:
            return p, losses_of(f"{d}/r.json"), f"{d}/params"
    return p, None, None


def rel(a, b):
    return max(abs(x - y) / abs(y) if math.isfinite(x) else math.inf for x, y in zip(a, b)) if len(a) == len(b) else math.inf


p, losses, params = train(declared, "declared")
check("declared: compiles with no warning", p.returncode == 0 and "warning" not in p.stderr, p.stderr)
err = rel(losses or [], want_losses)
check(f"declared: 3 SGD steps match PyTorch's losses (relative {err:.1e})", err <= 1e-5, f"{losses} vs {want_losses}")
if params:
    dumped = sorted(f[:-4] for f in os.listdir(params))
    check("declared: --dump-params holds the parameters, not the buffers", dumped == sorted(want_names), str(dumped))
    perr = max(float(np.abs(np.load(f"{params}/{n}.npy") - p_.detach().numpy()).max()) / max(1.0, float(p_.abs().max()))
               for n, p_ in ref.named_parameters())
    check(f"declared: parameters after 3 steps match PyTorch's ({perr:.1e})", perr <= 1e-5)

r = run([CKPTC, "inspect", declared])
lines = {ln.split()[0]: ln for ln in r.stdout.splitlines()[1:] if ln.startswith("  ") and len(ln.split()) > 2}
check("inspect: buffers constant, parameters trainable, from ckptc.trainable",
      r.returncode == 0 and "trainable initializers: from metadata_props 'ckptc.trainable'" in r.stdout
      and all("constant" in lines.get(b, "") for b in BUFFERS) and all("trainable" in lines.get(n, "") for n in want_names),
      r.stdout[-1500:])
r = run([CKPTC, "inspect", declared, "--json"])
js = json.loads(r.stdout) if r.returncode == 0 else {}
roles = {i["name"]: i["trainable"] for i in js.get("initializers", [])}
check("inspect --json: per initializer, and the source", js.get("trainable_from") == "ckptc.trainable"
      and all(roles.get(n) is True for n in want_names) and all(roles.get(b) is False for b in BUFFERS), r.stdout[-800:])
r = run([CKPTC, "inspect", plain, "--json"])
js = json.loads(r.stdout) if r.returncode == 0 else {}
check("inspect --json without the entry: the default rule", js.get("trainable_from") == "default rule", r.stdout[-400:])

p, losses, _ = train(plain, "plain")
warn = [ln for ln in p.stderr.splitlines() if ln.startswith("ckptc: warning:")]
check("plain: one warning naming ckptc.trainable, the count and the three buffers",
      p.returncode == 0 and len(warn) == 1 and "'ckptc.trainable'" in warn[0] and f"training {len(want_names) + 3} float" in warn[0]
      and all(f"'{b}'" in warn[0] for b in BUFFERS) and not any(f"'{n}'" in warn[0] for n in want_names), p.stderr)
print("     " + (warn[0] if warn else ""))
err = rel(losses or [], want_losses)
check(f"plain: the buffers are trained and the losses leave PyTorch's (relative {err:.1e})", losses and err > 1e-3,
      f"{losses} vs {want_losses}")

# BatchNorm's running statistics stay step-updated buffers when the entry leaves them out
bn = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(),
                         torch.nn.Linear(4 * 6 * 6, 5))
bn_path = f"{WORK}/bn.onnx"
bn_names = ckptc_export.export(bn, (torch.randn(2, 3, 8, 8),), bn_path, input_names=["x"], output_names=["logits"])
r = run([CKPTC, "inspect", bn_path, "--json"])
js = json.loads(r.stdout) if r.returncode == 0 else {}
kinds = {i["name"]: i["role"] for i in js.get("initializers", [])}
p = run([CKPTC, bn_path, "--optimizer=sgd", "--plan-only"])
check("BatchNorm: running statistics are buffers, the 6 parameters trainable, no warning",
      sorted(bn_names) == sorted(n for n, _ in bn.named_parameters()) and kinds.get("1.running_mean") == "buffer"
      and kinds.get("1.running_var") == "buffer" and all(kinds.get(n) == "trainable" for n in bn_names)
      and p.returncode == 0 and "warning" not in p.stderr, f"{kinds} {p.stderr}")

# bad entries
m = onnx.load(declared)
bad = {"not json": ("[\"emb.weight\"", "'ckptc.trainable' is not a JSON array"),
       "an object": ('{"emb.weight": 1}', "'ckptc.trainable' is not a JSON array"),
       "a number in it": ('["emb.weight", 3]', "element 1 is not a string"),
       "an unknown name": ('["emb.weight", "nope"]', "names 'nope', which is not an initializer")}
m.graph.initializer.append(onnx.numpy_helper.from_array(np.array([1, 2], np.int64), "an_int64"))  # unused: loads fine
bad["an int64 initializer"] = ('["emb.weight", "an_int64"]', "names 'an_int64', an initializer of dtype int64")
for what, (value, needle) in bad.items():
    ckptc_export.set_trainable(m, [])
    m.metadata_props[-1].value = value
    path = f"{WORK}/bad.onnx"
    onnx.save(m, path)
    for cmd in (["inspect", path], ["compile", path, "-o", f"{WORK}/bad"]):
        r = run([CKPTC] + cmd[cmd[0] == "compile":])
        lines = [ln for ln in r.stderr.splitlines() if ln]
        check(f"{what} ({cmd[0]}): exit 2, one line: {lines[0] if lines else ''}",
              r.returncode == 2 and len(lines) == 1 and lines[0].startswith("ckptc: error: ") and needle in lines[0], r.stderr)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
