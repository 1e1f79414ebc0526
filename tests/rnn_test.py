#!/usr/bin/python3
"""rnn_test.py — PyTorch's nn.GRU, nn.RNN and nn.LSTM, in the layouts and directions PyTorch
exports, trained by ckptc against PyTorch (the LSTM classifier sample, samples/lstm, is in the
`train` test; this covers the other recurrent ops and the options the sample does not use).

    /usr/bin/python3 tests/rnn_test.py CKPTC WORKDIR [--filter REGEX] [--jobs N] [--quick]

Each model (batch 2, a handful of time steps, a few units) is exported here with the user's own
torch (training mode, opset 17, no constant folding), then, with labels for cross-entropy:
  1. the logits of `ckptc --infer` equal PyTorch's float32 forward within 1e-5 (relative to max |ref|);
  2. one step (--disable-dropout --optimizer=sgd --lr 0.1): every parameter's gradient within
     1e-4 * max(1, max |ref|) of PyTorch's float64 gradient of the same model, and the loss within
     1e-5 (relative) of the float64 loss;
  3. three SGD steps (lr 0.1): the losses within 1e-5 (relative) of PyTorch's float32 SGD;
  4. every checkpoint policy (blocks, sqrt, every:2, blocks --offload): 3 AdamW steps give losses,
     gradients and parameters bit-identical to --checkpoint=none (not on the 70-step model: its
     generated program takes gcc minutes to build on a loaded machine; with --quick, the sanitized
     build's run, only on the 2-layer bidirectional GRU and the LSTM).
Ends with `N passed, N failed`; exit status 1 if anything failed.
"""
import argparse
import concurrent.futures
import copy
import json
import os
import re
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)
LR = 0.1


class Seq(nn.Module):
    """x: (T, B, I) or (B, T, I) -> recurrent layer -> a head reading Y, Y_h (and Y_c)."""

    def __init__(self, cell, read, n_classes=4, h0=False):
        super().__init__()
        self.rnn, self.read = cell, read
        dirs = 2 if cell.bidirectional else 1
        width = {"last": dirs, "mean": dirs, "h_n": dirs * cell.num_layers, "h_c": 2 * dirs}[read]
        self.head = nn.Linear(width * cell.hidden_size, n_classes)
        shape = (dirs * cell.num_layers, 1, cell.hidden_size)
        self.h0 = nn.Parameter(0.5 * torch.randn(shape)) if h0 else None
        self.c0 = nn.Parameter(0.5 * torch.randn(shape)) if h0 and isinstance(cell, nn.LSTM) else None

    def forward(self, x):
        b = x.shape[0] if self.rnn.batch_first else x.shape[1]
        state = None
        if self.h0 is not None:
            h0 = self.h0.expand(-1, b, -1).contiguous()
            state = (h0, self.c0.expand(-1, b, -1).contiguous()) if self.c0 is not None else h0
        y, hs = self.rnn(x, state)
        tdim = 1 if self.rnn.batch_first else 0
        if self.read == "last":
            return self.head(y.select(tdim, y.shape[tdim] - 1))
        if self.read == "mean":
            return self.head(y.mean(dim=tdim))
        if self.read == "h_n":
            return self.head(hs.transpose(0, 1).reshape(b, -1))
        h, c = hs  # LSTM: the last layer's h and c
        return self.head(torch.cat([h.transpose(0, 1).reshape(b, -1), c.transpose(0, 1).reshape(b, -1)], dim=1))


MODELS = {
    # name: (model factory, input shape)
    "gru_bidir_2layer": (lambda: Seq(nn.GRU(6, 8, num_layers=2, bidirectional=True), "last"), (5, 2, 6)),
    "gru_batch_first_h0": (lambda: Seq(nn.GRU(6, 8, batch_first=True), "h_n", h0=True), (2, 5, 6)),
    "rnn_tanh_2layer": (lambda: Seq(nn.RNN(6, 8, num_layers=2, batch_first=True), "mean"), (2, 5, 6)),
    "rnn_relu_bidir": (lambda: Seq(nn.RNN(6, 8, nonlinearity="relu", bidirectional=True), "h_n"), (5, 2, 6)),
    "lstm_h0_state": (lambda: Seq(nn.LSTM(6, 8, bidirectional=True), "h_c", h0=True), (4, 2, 6)),
    # 70 steps: more than one Split/Concat can hold (64), so the lowering builds trees of them;
    # a plain RNN (4 nodes a step) keeps the generated program small, and no policy runs on it
    "rnn_long_70_steps": (lambda: Seq(nn.RNN(4, 6, batch_first=True), "mean"), (2, 70, 4)),
}
NO_POLICIES = {"rnn_long_70_steps"}
# --quick (the sanitized build's run): the policies on these two only (the others' cells are the same kernels)
QUICK_POLICIES = {"gru_bidir_2layer", "lstm_h0_state"}

results = []
QUICK = False


def check(name, ok, detail=""):
    results.append((name, ok))
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout + p.stderr


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def export(name, d):
    """Exports the model; returns (model, x, labels) and writes x/labels .npy next to it."""
    factory, shape = MODELS[name]
    torch.manual_seed(0)
    model = factory().train()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=g)
    batch = shape[0] if model.rnn.batch_first else shape[1]
    labels = torch.randint(0, 4, (batch,), generator=g)
    torch.onnx.export(copy.deepcopy(model), (x,), os.path.join(d, "model.onnx"), training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17, input_names=["x"], output_names=["logits"])
    np.save(os.path.join(d, "x.npy"), x.numpy())
    np.save(os.path.join(d, "labels.npy"), labels.numpy().astype(np.int64))
    return model, x, labels


def torch_refs(model, x, labels):
    """PyTorch's float32 logits, float64 loss and gradients, float32 losses of 3 SGD steps."""
    with torch.no_grad():
        logits = copy.deepcopy(model)(x).numpy()
    m64 = copy.deepcopy(model).double()
    loss64 = F.cross_entropy(m64(x.double()), labels)
    loss64.backward()
    grads = {n: p.grad.numpy() for n, p in m64.named_parameters() if p.grad is not None}
    m32 = copy.deepcopy(model)
    opt = torch.optim.SGD(m32.parameters(), lr=LR)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(m32(x), labels)
        losses.append(float(loss.item()))
        loss.backward()
        opt.step()
    return logits, float(loss64.item()), grads, losses


def build(ckptc, d, out, flags):
    rc, log = sh([ckptc, os.path.join(d, "model.onnx"), "-o", os.path.join(d, out)] + flags)
    if rc == 0:
        rc, log = sh(["make", "-s", "-C", os.path.join(d, out)])
    return None if rc == 0 else log


def run(d, out, steps, extra):
    p = os.path.join(d, out)
    return sh([os.path.join(p, "trainer"), "--input", "x=" + os.path.join(d, "x.npy"), "--input",
               "labels=" + os.path.join(d, "labels.npy"), "--steps", str(steps), "--report", os.path.join(p, "report.json")] + extra)


def check_infer(ckptc, name, d, logits):
    err = build(ckptc, d, "infer", ["--infer", "--disable-dropout"])
    if err:
        return check(f"{name}: --infer builds", False, err[-2000:])
    p = os.path.join(d, "infer")
    rc, log = sh([os.path.join(p, "model"), "--input", "x=" + os.path.join(d, "x.npy"), "--dump-outputs", os.path.join(p, "out"),
                  "--report", os.path.join(p, "report.json")])
    if rc != 0:
        return check(f"{name}: --infer runs", False, log[-2000:])
    got = np.load(os.path.join(p, "out", "logits.npy"))
    e = float(np.max(np.abs(got - logits))) / max(1.0, float(np.max(np.abs(logits))))
    check(f"{name}: logits = PyTorch's (max relative error {e:.2e})", got.shape == logits.shape and e <= 1e-5)


def check_step(ckptc, name, d, loss64, grads, losses):
    err = build(ckptc, d, "sgd", ["--disable-dropout", "--optimizer=sgd", "--lr", str(LR)])
    if err:
        return check(f"{name}: trainer builds", False, err[-2000:])
    rc, log = run(d, "sgd", 1, ["--dump-grads", os.path.join(d, "sgd", "grads")])
    if rc != 0:
        return check(f"{name}: one step runs", False, log[-2000:])
    got = json.load(open(os.path.join(d, "sgd", "report.json")))["losses"]
    check(f"{name}: loss {got[0]:.7f} vs float64 {loss64:.7f}", abs(got[0] - loss64) <= 1e-5 * abs(loss64))
    worst, bad = 0.0, []
    for pname, want in grads.items():
        path = os.path.join(d, "sgd", "grads", sanitize(pname) + ".npy")
        if not os.path.exists(path):
            bad.append(pname + ": not dumped")
            continue
        e = float(np.max(np.abs(np.load(path).astype(np.float64) - want))) / max(1.0, float(np.max(np.abs(want))))
        worst = max(worst, e)
        if e > 1e-4:
            bad.append(f"{pname}: {e:.3g}")
    check(f"{name}: {len(grads)} gradients = float64 PyTorch's within 1e-4 (max {worst:.2e})", not bad, "; ".join(bad))
    rc, log = run(d, "sgd", 3, [])
    if rc != 0:
        return check(f"{name}: 3 SGD steps run", False, log[-2000:])
    got = json.load(open(os.path.join(d, "sgd", "report.json")))["losses"]
    errs = [abs(a - b) / abs(b) for a, b in zip(got, losses)]
    check(f"{name}: 3 SGD losses {['%.7f' % v for v in got]} vs torch (max relative error {max(errs):.2e})",
          len(got) == 3 and max(errs) <= 1e-5)


def check_policies(ckptc, name, d):
    base = None
    for pol in ["none", "blocks", "sqrt", "every:2", "blocks --offload"]:
        out = "pol-" + pol.replace(":", "").replace(" --", "-")
        err = build(ckptc, d, out, ["--checkpoint=" + pol.split()[0]] + pol.split()[1:] + ["--optimizer=adamw", "--lr", "1e-2"])
        if err:
            return check(f"{name} --checkpoint={pol}: builds", False, err[-2000:])
        dump = ["--dump-grads", os.path.join(d, out, "grads"), "--dump-params", os.path.join(d, out, "params"), "--seed", "7"]
        rc, log = run(d, out, 3, dump)
        if rc != 0:
            return check(f"{name} --checkpoint={pol}: runs", False, log[-2000:])
        files = {}
        for sub in ["grads", "params"]:
            for f in sorted(os.listdir(os.path.join(d, out, sub))):
                files[sub + "/" + f] = open(os.path.join(d, out, sub, f), "rb").read()
        got = (json.load(open(os.path.join(d, out, "report.json")))["losses"], files)
        if base is None:
            base = got
            continue
        diff = [k for k in base[1] if got[1].get(k) != base[1][k]]
        check(f"{name} --checkpoint={pol}: 3 steps bit-identical to none", got[0] == base[0] and not diff and len(files) > 0,
              f"losses {got[0]} vs {base[0]}; differing {diff[:5]}")


def prepare(work, name):
    """Exports and computes the references (torch.onnx.export is not thread-safe: one at a time)."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    model, x, labels = export(name, d)
    return d, torch_refs(model, x, labels)


def one(ckptc, name, d, refs):
    logits, loss64, grads, losses = refs
    check_infer(ckptc, name, d, logits)
    check_step(ckptc, name, d, loss64, grads, losses)
    if name not in NO_POLICIES and (not QUICK or name in QUICK_POLICIES):
        check_policies(ckptc, name, d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckptc")
    ap.add_argument("work")
    ap.add_argument("--filter", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    global QUICK
    QUICK = a.quick
    ckptc = os.path.abspath(a.ckptc)
    names = [n for n in MODELS if re.search(a.filter, n)]
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        ready = [(n,) + prepare(a.work, n) for n in names]
        for f in [ex.submit(one, ckptc, *r) for r in ready]:
            f.result()
    failed = sum(1 for r in results if not r[1])
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
