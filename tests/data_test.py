#!/usr/bin/python3
"""data_test.py — the trainer over datasets (--data, --epochs, --shuffle) against PyTorch.

    data_test.py CKPTC SAMPLES_DIR WORKDIR

1. PyTorch parity: the mlp sample (samples/export.py's ResidualMLP, its weights taken from the
   ONNX initializers) trained with SGD (lr 0.1, dropout off) over a dataset of 29 samples, batch
   8, --epochs 2: 3 batches an epoch (rows 0-7, 8-15, 16-23; the last partial batch dropped),
   6 steps. ckptc's 6 losses match PyTorch's over the same batches within 1e-5 relative, and the
   final parameters within 1e-5.
2. --steps caps the epochs' steps; the report says data/samples/batches.
3. --shuffle: the same seed gives the same bits, another seed other losses, and the losses differ
   from the sequential run; an epoch of a shuffled run over exactly 3 batches (24 samples) sees
   every sample once: with lr 0 every step's loss is one batch's loss, and the 3 losses' mean is
   the whole dataset's mean loss (PyTorch) whatever the order.
4. Bad data: a dataset with another number of samples, another trailing shape, another dtype,
   fewer samples than one batch, an input fed twice, --shuffle without --data: exit 2, one line;
   a label out of range names the dataset rows of its batch.
5. --lr-schedule linear|cosine with --warmup and --min-lr: losses match PyTorch's SGD under
   LambdaLR with the documented factor (within 1e-5), the report's lrs the formula (1e-6).
6. Data parallel (with mpirun): 2 ranks of 4 samples each read their halves of the global batches
   of 8: the losses match one process with batch 8 within 1e-5.
Ends with `N passed, N failed`.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

CKPTC, SAMPLES, WORK = sys.argv[1:4]
os.makedirs(WORK, exist_ok=True)
sys.path.insert(0, SAMPLES)
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def build(d, flags):
    p = run([CKPTC, os.path.join(SAMPLES, "mlp.onnx"), "--dim", "batch=8", "-o", d] + flags)
    if p.returncode == 0:
        p = run(["make", "-s", "-C", d])
    if p.returncode != 0:
        raise SystemExit(f"FAIL: building {d}: {p.stdout}{p.stderr}")
    return os.path.join(d, "trainer")


def torch_losses(x, y, lr, steps, batch, schedule=None):
    import onnx
    import torch
    from onnx import numpy_helper
    import export
    torch.set_num_threads(1)
    model = export.ResidualMLP().double()
    init = {i.name: numpy_helper.to_array(i) for i in onnx.load(os.path.join(SAMPLES, "mlp.onnx")).graph.initializer}
    state = model.state_dict()
    if set(init) != set(state):
        raise SystemExit(f"FAIL: the ONNX initializers {sorted(init)} are not the module's parameters {sorted(state)}")
    model.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in init.items()})
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule) if schedule else None
    per_epoch = len(x) // batch
    out = []
    for s in range(steps):
        k = s % per_epoch
        xb = torch.from_numpy(x[k * batch:(k + 1) * batch].astype(np.float64))
        yb = torch.from_numpy(y[k * batch:(k + 1) * batch])
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched:
            sched.step()
        out.append(float(loss))
    return out, {k: v.detach().numpy() for k, v in model.state_dict().items()}


def main():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((29, 64)).astype(np.float32)
    y = rng.integers(0, 10, 29).astype(np.int64)
    np.save(f"{WORK}/x.npy", x)
    np.save(f"{WORK}/y.npy", y)
    data = ["--data", f"x={WORK}/x.npy", "--data", f"labels={WORK}/y.npy"]

    # 1. parity over two epochs
    sgd = build(f"{WORK}/sgd", ["--disable-dropout", "--optimizer=sgd", "--lr", "0.1"])
    p = run([sgd] + data + ["--epochs", "2", "--report", f"{WORK}/sgd.json", "--dump-params", f"{WORK}/sgd-params"])
    if p.returncode != 0:
        raise SystemExit(f"FAIL: training over the dataset: {p.stderr}")
    rep = json.load(open(f"{WORK}/sgd.json"))
    want, params = torch_losses(x, y, 0.1, 6, 8)
    got = rep["losses"]
    err = max(abs(a - b) / abs(b) for a, b in zip(got, want)) if len(got) == len(want) else float("inf")
    check(f"--epochs 2 over 29 samples: {len(got)} steps, losses within {err:.1e} of PyTorch's over the same batches",
          len(got) == 6 and err <= 1e-5, f"ours {got}, torch {want}")
    worst = 0.0
    for k, v in params.items():
        mine = np.load(f"{WORK}/sgd-params/{k}.npy").astype(np.float64)
        worst = max(worst, float(np.max(np.abs(mine - v))) / max(1.0, float(np.max(np.abs(v)))))
    check(f"parameters after 6 SGD steps within {worst:.1e} of PyTorch's", worst <= 1e-5)
    check("the progress line names the epoch", "epoch 2  step 6/6" in p.stdout, p.stdout[-500:])
    d = rep.get("data", {})
    check("the report describes the data", d.get("samples") == 29 and d.get("batches_per_epoch") == 3 and d.get("epochs") == 2
          and rep["inputs"] == {"x": "data", "labels": "data"}, json.dumps(d))

    # 2. --steps caps
    p = run([sgd] + data + ["--epochs", "2", "--steps", "4", "--report", f"{WORK}/cap.json"])
    capped = json.load(open(f"{WORK}/cap.json"))["losses"] if p.returncode == 0 else []
    check("--steps 4 caps --epochs 2 (6 steps) at 4, the same first losses", capped == got[:4], f"{capped} vs {got[:4]}")

    # 3. --shuffle
    adam = build(f"{WORK}/adamw", [])
    runs = {}
    for name, extra in [("seq", []), ("s7", ["--shuffle", "--seed", "7"]), ("s7b", ["--shuffle", "--seed", "7"]),
                        ("s8", ["--shuffle", "--seed", "8"])]:
        p = run([adam] + data + ["--epochs", "2", "--report", f"{WORK}/{name}.json"] + extra)
        runs[name] = json.load(open(f"{WORK}/{name}.json"))["losses"] if p.returncode == 0 else None
    check("--shuffle with one seed gives the same losses twice", runs["s7"] is not None and runs["s7"] == runs["s7b"])
    check("--shuffle with another seed, and the sequential order, give other losses",
          runs["s7"] is not None and runs["s7"] != runs["s8"] and runs["s7"] != runs["seq"], json.dumps(runs))
    np.save(f"{WORK}/x24.npy", x[:24])
    np.save(f"{WORK}/y24.npy", y[:24])
    frozen = build(f"{WORK}/lr0", ["--disable-dropout", "--optimizer=sgd", "--lr", "0"])
    p = run([frozen, "--data", f"x={WORK}/x24.npy", "--data", f"labels={WORK}/y24.npy", "--shuffle", "--seed", "3",
             "--report", f"{WORK}/lr0.json"])
    sh = json.load(open(f"{WORK}/lr0.json"))["losses"] if p.returncode == 0 else []
    whole, _ = torch_losses(x[:24], y[:24], 0.0, 1, 24)
    check(f"a shuffled epoch of 3 batches covers every sample once (mean batch loss {np.mean(sh) if sh else 0:.7f}, "
          f"PyTorch's over all 24: {whole[0]:.7f})", len(sh) == 3 and abs(np.mean(sh) - whole[0]) <= 1e-5 * abs(whole[0]),
          f"{sh}")
    seq0, _ = torch_losses(x[:24], y[:24], 0.0, 3, 8)
    check("... in an order other than the sequential one", sh != seq0, f"{sh} vs {seq0}")

    # 4. bad data
    np.save(f"{WORK}/y30.npy", rng.integers(0, 10, 30).astype(np.int64))
    np.save(f"{WORK}/x63.npy", rng.standard_normal((29, 63)).astype(np.float32))
    np.save(f"{WORK}/x64.npy", rng.standard_normal((29, 64)))
    np.save(f"{WORK}/x5.npy", x[:5])
    np.save(f"{WORK}/y5.npy", y[:5])
    bad = [
        ("another number of samples", ["--data", f"x={WORK}/x.npy", "--data", f"labels={WORK}/y30.npy"], "every dataset needs the same"),
        ("another trailing shape", ["--data", f"x={WORK}/x63.npy"], "has shape (29,63)"),
        ("another dtype", ["--data", f"x={WORK}/x64.npy"], "holds float64 but the input is float32"),
        ("fewer samples than a batch", ["--data", f"x={WORK}/x5.npy", "--data", f"labels={WORK}/y5.npy"], "fewer than one batch of 8"),
        ("an input fed twice", ["--data", f"x={WORK}/x.npy", "--input", f"x={WORK}/x.npy"], "given twice"),
        ("--shuffle without --data", ["--shuffle"], "needs a dataset"),
        ("--data for no input", ["--data", f"nope={WORK}/x.npy"], "no input named 'nope'"),
    ]
    for what, flags, msg in bad:
        p = run([sgd] + flags)
        lines = p.stderr.strip().splitlines()
        check(f"{what}: exit 2, one line: {lines[0] if lines else ''}", p.returncode == 2 and len(lines) == 1 and msg in p.stderr,
              f"exit {p.returncode}: {p.stderr!r}")
    yb = y.copy()
    yb[13] = 99
    np.save(f"{WORK}/ybad.npy", yb)
    p = run([sgd, "--data", f"x={WORK}/x.npy", "--data", f"labels={WORK}/ybad.npy"])
    check("a label out of range: exit 2 naming the batch's rows: " + p.stderr.strip()[-120:],
          p.returncode == 2 and "label 99 at position 5" in p.stderr and "step 2's batch is the datasets' rows 8-15" in p.stderr,
          p.stderr)
    # 5. LR schedules against torch.optim.lr_scheduler.LambdaLR with the documented factor
    import math
    T, W, lr, mn = 9, 2, 0.1, 0.01
    def factor(kind):
        def f(s):
            if s < W:
                return (s + 1) / W
            p = (s - W) / (T - W)
            g = 1 - p if kind == "linear" else 0.5 * (1 + math.cos(math.pi * p))
            return (mn + (lr - mn) * g) / lr
        return f
    for kind in ["linear", "cosine"]:
        p = run([sgd] + data + ["--epochs", "3", "--lr-schedule", kind, "--warmup", str(W), "--min-lr", str(mn),
                                "--report", f"{WORK}/{kind}.json"])
        rep = json.load(open(f"{WORK}/{kind}.json")) if p.returncode == 0 else {"losses": [], "lrs": []}
        want, _ = torch_losses(x, y, lr, T, 8, factor(kind))
        lrs = [lr * factor(kind)(s) for s in range(T)]
        e = max(abs(a - b) / abs(b) for a, b in zip(rep["losses"], want)) if len(rep["losses"]) == T else float("inf")
        le = max(abs(a - b) / b for a, b in zip(rep["lrs"], lrs)) if len(rep["lrs"]) == T else float("inf")
        check(f"--lr-schedule {kind} --warmup {W} --min-lr {mn}: {T} losses within {e:.1e} of PyTorch's LambdaLR, lrs within {le:.1e}",
              e <= 1e-5 and le <= 1e-6, f"exit {p.returncode} {p.stderr[-300:]} ours {rep['losses']} torch {want}")
    p = run([sgd] + data + ["--min-lr", "1"])
    check("--min-lr without a decaying schedule: exit 2", p.returncode == 2 and "--min-lr" in p.stderr, p.stderr)

    # 6. data parallel: 2 ranks x 4 samples read the global batches of 8 (each rank its half)
    if not shutil.which("mpirun") or not shutil.which("mpicc"):
        print("skip 5: no mpirun/mpicc (data parallel over --data not checked)")
    else:
        d = f"{WORK}/dp"
        p = run([CKPTC, os.path.join(SAMPLES, "mlp.onnx"), "--dim", "batch=4", "--data-parallel", "--disable-dropout",
                 "--optimizer=sgd", "--lr", "0.1", "-o", d])
        if p.returncode == 0:
            p = run(["make", "-s", "-C", d])
        if p.returncode != 0:
            check("a data-parallel program builds", False, p.stdout + p.stderr)
        else:
            p = run(["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2", f"{d}/trainer"] + data +
                    ["--epochs", "2", "--report", f"{WORK}/dp.json"])
            dl = json.load(open(f"{WORK}/dp.json"))["losses"] if p.returncode == 0 else []
            e = max(abs(a - b) / abs(b) for a, b in zip(dl, got)) if len(dl) == len(got) else float("inf")
            check(f"2 ranks x 4 samples over the dataset: the 6 losses within {e:.1e} of one process x 8", e <= 1e-5,
                  f"exit {p.returncode} {p.stderr[-500:]} {dl}")
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
