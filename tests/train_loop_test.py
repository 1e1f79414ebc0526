#!/usr/bin/python3
"""train_loop_test.py — the trainer's optimizer loop against PyTorch: gradient accumulation
(--grad-accum), gradient clipping (--clip-grad-norm), the gradient norm in --metrics, and
evaluation (--eval-data, --eval-tokens, --eval-every).

    train_loop_test.py CKPTC SAMPLES_DIR REPO_DIR WORKDIR

1. --grad-accum 2 over a dataset (the mlp sample, batch 8, 32 samples: 2 steps of 2 micro-batches
   an epoch, --epochs 2), SGD and AdamW: the losses (the mean of the micro-batches') and the final
   parameters match PyTorch's accumulation ((loss / 2).backward() per micro-batch, one step)
   within 1e-5; K = 1 on a program with accumulators gives the bits of one without; the planned
   peak grows by exactly the accumulators (one gradient's size per parameter), planned == measured.
2. Every checkpoint policy with --grad-accum 2 on the gpt4 sample (dropout on, AdamW) ends with
   the same bits as none; the micro-batches draw different dropout masks (K = 2 over one batch
   twice differs from K = 1).
3. --clip-grad-norm 0.5 (compiled in, and overridden on the trainer's command line): SGD losses
   and parameters within 1e-5 of torch.nn.utils.clip_grad_norm_, the metrics' grad_norm its total
   norm within 1e-5; --plan-only says what clipping costs; a program with early updates refuses
   the flag (exit 2).
4. --metrics without clipping: grad_norm each step equals PyTorch's total gradient norm (1e-5).
5. Eval: a model with BatchNorm then Dropout, trained with lr 0 (only the running statistics
   move): --eval-data's loss after steps 2 and 4 equals PyTorch's model.eval() loss on the same
   data within 1e-5; an eval changes nothing in training (the same bits with and without
   --eval-every 1); the report and --metrics carry the evals. --eval-tokens on the gpt sample:
   the loss of the windows equals the same windows given as --eval-data arrays.
6. Bad flags: --grad-accum on a program without accumulators, --eval-every without eval data,
   --eval-data missing an input, --eval-data with the wrong shape: exit 2 with one line.
7. Data parallel (with mpirun): 2 ranks x 4 samples with --grad-accum 2 and an eval give the losses
   and eval loss of one process x 8 (1e-5); killed with SIGKILL in step 3 and resumed, the 2 ranks
   end with the bits of a run never stopped.
8. --resume with --grad-accum 2, --shuffle and AdamW after a SIGKILL in the middle of step 3 (between
   its micro-batches' work) ends with the bits of a run never stopped; a checkpoint written with
   another K is refused.
Ends with `N passed, N failed`.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

CKPTC, SAMPLES, REPO, WORK = sys.argv[1:5]
os.makedirs(WORK, exist_ok=True)
sys.path.insert(0, SAMPLES)
sys.path.insert(0, os.path.join(REPO, "python"))
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


def build(d, flags, model="mlp.onnx", dims=("batch=8",)):
    cmd = [CKPTC, model if os.path.isabs(model) else os.path.join(SAMPLES, model), "-o", d]
    for b in dims:
        cmd += ["--dim", b]
    p = run(cmd + flags)
    if p.returncode == 0:
        q = run(["make", "-s", "-C", d])
        if q.returncode != 0:
            raise SystemExit(f"FAIL: building {d}: {q.stdout}{q.stderr}")
    else:
        raise SystemExit(f"FAIL: compiling {d}: {p.stdout}{p.stderr}")
    return os.path.join(d, "trainer"), p.stdout


def train(trainer, args, name):
    p = run([trainer] + args + ["--report", f"{WORK}/{name}.json", "--dump-params", f"{WORK}/{name}-params"])
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {name}: {p.stdout[-800:]}{p.stderr}")
    return json.load(open(f"{WORK}/{name}.json")), p


def params_of(name):
    d = f"{WORK}/{name}-params"
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d))}


def same_bits(a, b):
    pa, pb = params_of(a), params_of(b)
    return pa.keys() == pb.keys() and all(np.array_equal(pa[k], pb[k]) for k in pa)


def rel_err(got, want):
    return max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(got, want)) if len(got) == len(want) else float("inf")


def param_err(name, want):
    worst = 0.0
    for k, v in want.items():
        mine = np.load(f"{WORK}/{name}-params/{k}.npy").astype(np.float64)
        worst = max(worst, float(np.max(np.abs(mine - v))) / max(1.0, float(np.max(np.abs(v)))))
    return worst


def mlp_module():
    import onnx
    import torch
    from onnx import numpy_helper
    import export
    torch.set_num_threads(1)
    model = export.ResidualMLP().double()
    init = {i.name: numpy_helper.to_array(i) for i in onnx.load(os.path.join(SAMPLES, "mlp.onnx")).graph.initializer}
    model.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in init.items()})
    return model


def torch_loop(x, y, steps, batch, accum, opt_kind, lr, clip=None):
    """PyTorch's loop: batches in order, accum micro-batches a step, (loss / accum).backward()."""
    import torch
    model = mlp_module()
    if opt_kind == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    per_epoch = len(x) // batch
    losses, norms, b = [], [], 0
    for _ in range(steps):
        opt.zero_grad()
        tot = 0.0
        for _ in range(accum):
            k = b % per_epoch
            b += 1
            xb = torch.from_numpy(x[k * batch:(k + 1) * batch].astype(np.float64))
            yb = torch.from_numpy(y[k * batch:(k + 1) * batch])
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            (loss / accum).backward()
            tot += float(loss)
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(tot / accum)
        norms.append(norm)
    return losses, norms, {k: v.detach().numpy() for k, v in model.state_dict().items()}


def accumulation(x, y, data):
    reps = {}
    for opt, lr in (("sgd", "0.1"), ("adamw", "0.01")):
        flags = ["--disable-dropout", f"--optimizer={opt}", "--lr", lr] + (["--weight-decay", "0"] if opt == "adamw" else [])
        acc, _ = build(f"{WORK}/acc-{opt}", flags + ["--grad-accum"])
        ev = ["--eval-data", f"x={WORK}/x.npy", "--eval-data", f"labels={WORK}/y.npy"] if opt == "sgd" else []
        rep, p = train(acc, data + ev + ["--epochs", "2", "--grad-accum", "2"], f"acc-{opt}")
        reps[opt] = rep
        want, _, params = torch_loop(x, y, 4, 8, 2, opt, float(lr))
        err = rel_err(rep["losses"], want)
        check(f"{opt} --grad-accum 2, --epochs 2 over 32 samples: {len(rep['losses'])} steps, losses within {err:.1e} of PyTorch's "
              "accumulation", len(rep["losses"]) == 4 and err <= 1e-5, f"ours {rep['losses']} torch {want}")
        perr = param_err(f"acc-{opt}", params)
        check(f"{opt} --grad-accum 2: parameters within {perr:.1e} of PyTorch's", perr <= 1e-5)
        check(f"{opt} --grad-accum 2: planned == measured ({rep['planned_peak_bytes']})",
              rep["planned_peak_bytes"] == rep["measured_peak_bytes"] and rep.get("grad_accum") == 2)
        if opt != "sgd":
            continue
        plain, _ = build(f"{WORK}/plain-{opt}", flags)
        rep1, _ = train(plain, data + ["--steps", "3"], "plain")
        rep2, _ = train(acc, data + ["--steps", "3"], "acc-k1")
        check("--grad-accum 1 on a program with accumulators: the bits of one without", same_bits("plain", "acc-k1")
              and rep1["losses"] == rep2["losses"])
        grads = sum(4 * int(np.prod(v.shape)) for v in params_of("plain").values())
        aligned = sum((4 * int(np.prod(v.shape)) + 63) // 64 * 64 for v in params_of("plain").values())
        extra = rep2["planned_bytes"]["optimizer_state"] - rep1["planned_bytes"]["optimizer_state"]
        check(f"the accumulators add {extra} bytes of static memory: one gradient per parameter ({grads} bytes, {aligned} "
              "with each at a 64-byte boundary)", extra == aligned and rep2["planned_peak_bytes"] - rep1["planned_peak_bytes"] == aligned,
              f"{rep1['planned_bytes']} vs {rep2['planned_bytes']}")
    return reps


def policies():
    idx, lab = f"{SAMPLES}/gpt4.in.idx.npy", f"{SAMPLES}/gpt4.in.labels.npy"
    inputs = ["--input", f"idx={idx}", "--input", f"labels={lab}", "--steps", "3"]
    reps = {}
    for pol in ("none", "blocks", "sqrt", "every:2"):
        flags = ["--grad-accum", "--optimizer=adamw"] + ([] if pol == "none" else [f"--checkpoint={pol}"])
        t, _ = build(f"{WORK}/gpt4-{pol.replace(':', '')}", flags, "gpt4.onnx", ("batch=4",))
        reps[pol], _ = train(t, inputs + ["--grad-accum", "2"], f"gpt4-{pol.replace(':', '')}")
    same = all(same_bits("gpt4-none", f"gpt4-{p.replace(':', '')}") for p in reps)
    check("gpt4 with dropout, AdamW, --grad-accum 2: blocks, sqrt and every:2 end with the bits of none", same)
    train(f"{WORK}/gpt4-none/trainer", inputs + ["--grad-accum", "1"], "gpt4-k1")
    diff = not same_bits("gpt4-none", "gpt4-k1")
    check("the two micro-batches of one batch draw different dropout masks (K = 2 over it twice differs from K = 1)", diff)


def clipping(x, y, data):
    flags = ["--disable-dropout", "--optimizer=sgd", "--lr", "0.1"]
    p = run([CKPTC, os.path.join(SAMPLES, "mlp.onnx"), "--dim", "batch=8", "--plan-only", "--clip-grad-norm", "0.5"] + flags)
    check("--plan-only --clip-grad-norm says what the updates after the backward cost",
          p.returncode == 0 and "--clip-grad-norm: the global norm needs every gradient" in p.stdout and "more than with each update" in p.stdout,
          p.stdout + p.stderr)
    clip, _ = build(f"{WORK}/clip", flags + ["--clip-grad-norm", "0.5"])
    rep, _ = train(clip, data + ["--steps", "3", "--metrics", f"{WORK}/clip.jsonl"], "clip")
    want, norms, params = torch_loop(x, y, 3, 8, 1, "sgd", 0.1, clip=0.5)
    err, perr = rel_err(rep["losses"], want), param_err("clip", params)
    check(f"--clip-grad-norm 0.5 (compiled): losses within {err:.1e}, parameters within {perr:.1e} of clip_grad_norm_",
          err <= 1e-5 and perr <= 1e-5, f"ours {rep['losses']} torch {want}")
    lines = [json.loads(l) for l in open(f"{WORK}/clip.jsonl")]
    got = [l["grad_norm"] for l in lines if "grad_norm" in l]
    nerr = rel_err(got, norms)
    check(f"--metrics grad_norm is the norm before clipping: within {nerr:.1e} of PyTorch's ({norms[0]:.3f} > 0.5: it clipped)",
          nerr <= 1e-5 and norms[0] > 0.5, f"{got} vs {norms}")
    rep, _ = train(clip, data + ["--steps", "3", "--clip-grad-norm", "0.2"], "clip2")
    want, _, params = torch_loop(x, y, 3, 8, 1, "sgd", 0.1, clip=0.2)
    err, perr = rel_err(rep["losses"], want), param_err("clip2", params)
    check(f"the trainer's --clip-grad-norm 0.2 overrides the compiled 0.5: within {err:.1e} / {perr:.1e}",
          err <= 1e-5 and perr <= 1e-5 and rep["clip_grad_norm"] == 0.2)
    acc, _ = build(f"{WORK}/clip-acc", flags + ["--clip-grad-norm", "0.5", "--grad-accum"])
    rep, _ = train(acc, data + ["--epochs", "2", "--steps", "3", "--grad-accum", "2"], "clip-acc")
    want, _, params = torch_loop(x, y, 3, 8, 2, "sgd", 0.1, clip=0.5)
    err, perr = rel_err(rep["losses"], want), param_err("clip-acc", params)
    check(f"--clip-grad-norm with --grad-accum 2 clips the accumulated gradient: within {err:.1e} / {perr:.1e}",
          err <= 1e-5 and perr <= 1e-5)
    early = f"{WORK}/plain-sgd/trainer"
    p = run([early] + data + ["--clip-grad-norm", "1"])
    check("--clip-grad-norm on a program with early updates: exit 2 saying how to compile it",
          p.returncode == 2 and "ckptc --clip-grad-norm" in p.stderr and p.stderr.count("\n") == 1, p.stderr)


def norms_metrics(x, y, data):
    rep, _ = train(f"{WORK}/plain-sgd/trainer", data + ["--steps", "3", "--metrics", f"{WORK}/norm.jsonl"], "norm")
    _, norms, _ = torch_loop(x, y, 3, 8, 1, "sgd", 0.1)
    got = [json.loads(l)["grad_norm"] for l in open(f"{WORK}/norm.jsonl")]
    err = rel_err(got, norms)
    check(f"--metrics grad_norm with early updates: within {err:.1e} of PyTorch's total norm", err <= 1e-5, f"{got} vs {norms}")
    check("the report lists the gradient norms", rel_err(rep["grad_norms"], norms) <= 1e-5, str(rep["grad_norms"]))


class BNDrop:
    """x (B, 16) -> Linear -> BatchNorm1d -> ReLU -> Dropout(0.5) -> Linear (B, 5)."""

    @staticmethod
    def make():
        import torch
        from torch import nn
        torch.manual_seed(3)
        return nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 5))


def evaluation():
    import torch
    from ckptc_export import export
    rng = np.random.default_rng(11)
    x = rng.standard_normal((40, 16)).astype(np.float32) * 2 + 1
    y = rng.integers(0, 5, 40).astype(np.int64)
    ex = rng.standard_normal((24, 16)).astype(np.float32) * 2 + 1
    ey = rng.integers(0, 5, 24).astype(np.int64)
    for n, a in (("x", x), ("y", y), ("ex", ex), ("ey", ey)):
        np.save(f"{WORK}/bn-{n}.npy", a)
    model = BNDrop.make()
    path = f"{WORK}/bndrop.onnx"
    export(model, (torch.from_numpy(x[:8]),), path, input_names=["x"], output_names=["logits"])
    t, _ = build(f"{WORK}/bndrop", ["--optimizer=sgd", "--lr", "0", "--momentum", "0"], path, ())
    data = ["--data", f"x={WORK}/bn-x.npy", "--data", f"labels={WORK}/bn-y.npy"]
    ev = ["--eval-data", f"x={WORK}/bn-ex.npy", "--eval-data", f"labels={WORK}/bn-ey.npy"]
    rep, p = train(t, data + ev + ["--steps", "4", "--eval-every", "2", "--metrics", f"{WORK}/bn.jsonl"], "bn-eval")
    # PyTorch: the running statistics after the same 4 training-mode forwards, then eval()
    m = BNDrop.make().double()
    want = []
    for s in range(4):
        m.train()
        with torch.no_grad():
            m(torch.from_numpy(x[s * 8:(s + 1) * 8].astype(np.float64)))
        if (s + 1) % 2 == 0:
            m.eval()
            with torch.no_grad():
                ls = [float(torch.nn.functional.cross_entropy(m(torch.from_numpy(ex[j * 8:(j + 1) * 8].astype(np.float64))),
                                                               torch.from_numpy(ey[j * 8:(j + 1) * 8]))) for j in range(3)]
            want.append(sum(ls) / 3)
    got = [e["loss"] for e in rep["evals"]]
    err = rel_err(got, want)
    check(f"eval after steps 2 and 4 (BatchNorm running stats, no dropout): within {err:.1e} of PyTorch's model.eval() loss",
          [e["step"] for e in rep["evals"]] == [2, 4] and err <= 1e-5, f"ours {rep['evals']} torch {want}")
    check("the progress line shows the eval loss", "eval loss" in p.stdout, p.stdout[-400:])
    lines = [json.loads(l) for l in open(f"{WORK}/bn.jsonl")]
    evl = [l for l in lines if "eval_loss" in l]
    check("--metrics has one eval line per eval", [l["step"] for l in evl] == [2, 4] and evl[0]["eval_batches"] == 3, str(evl))
    train(t, data + ["--steps", "4"], "bn-noeval")
    rep3, _ = train(t, data + ev + ["--steps", "4", "--eval-every", "1"], "bn-eval1")
    check("an eval after every step changes no bit of training", same_bits("bn-noeval", "bn-eval1") and len(rep3["evals"]) == 4)
    rep4, _ = train(t, data + ev + ["--steps", "4", "--eval-batches", "1"], "bn-evalb")
    check("--eval-batches 1: one batch, once after the last step", len(rep4["evals"]) == 1 and rep4["evals"][0]["step"] == 4)

    # errors
    for args, what in ((ev[:2] + data, "an input missing from --eval-data"),
                       (data + ["--eval-every", "2"], "--eval-every without eval data"),
                       (data + ["--eval-data", f"x={WORK}/bn-ey.npy", "--eval-data", f"labels={WORK}/bn-ey.npy"], "a wrong eval dtype")):
        p = run([t] + args)
        check(f"{what}: exit 2, one line", p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr)
    p = run([f"{WORK}/plain-sgd/trainer", "--grad-accum", "2"])
    check("--grad-accum on a program without accumulators: exit 2 naming ckptc --grad-accum",
          p.returncode == 2 and "ckptc --grad-accum" in p.stderr, p.stderr)

    # --eval-tokens = the same windows as --eval-data arrays
    gpt, _ = build(f"{WORK}/gpt-ev", ["--disable-dropout"], "gpt.onnx", ())
    T = int(np.load(f"{SAMPLES}/gpt.in.idx.npy").shape[1])
    B = int(np.load(f"{SAMPLES}/gpt.in.idx.npy").shape[0])
    toks = rng.integers(0, 64, B * T * 3 + 1).astype(np.uint16)
    toks.tofile(f"{WORK}/ev.tok")
    n = (len(toks) - 1) // T
    win = np.stack([toks[j * T:j * T + T + 1] for j in range(n)]).astype(np.int64)
    np.save(f"{WORK}/ev-idx.npy", win[:, :T])
    np.save(f"{WORK}/ev-lab.npy", win[:, 1:])
    base = ["--input", f"idx={SAMPLES}/gpt.in.idx.npy", "--input", f"labels={SAMPLES}/gpt.in.labels.npy", "--steps", "2"]
    r1, _ = train(gpt, base + ["--eval-tokens", f"{WORK}/ev.tok"], "gpt-evt")
    r2, _ = train(gpt, base + ["--eval-data", f"idx={WORK}/ev-idx.npy", "--eval-data", f"labels={WORK}/ev-lab.npy"], "gpt-evd")
    check("--eval-tokens: the loss of the windows given as --eval-data arrays", r1["evals"] == r2["evals"] and len(r1["evals"]) == 1,
          f"{r1['evals']} vs {r2['evals']}")
    r3, _ = train(gpt, base, "gpt-noev")
    check("an eval between --input steps keeps the training inputs", r3["losses"] == r1["losses"] and same_bits("gpt-noev", "gpt-evt"))


def data_parallel(data, single):
    """2 ranks x 4 samples, --grad-accum 2 and an eval: one process x 8's losses and eval loss."""
    import shutil
    if not shutil.which("mpirun") or not shutil.which("mpicc"):
        print("skip: no mpirun/mpicc (data parallel with --grad-accum not checked)")
        return
    t, _ = build(f"{WORK}/dp", ["--disable-dropout", "--optimizer=sgd", "--lr", "0.1", "--grad-accum", "--data-parallel"],
                 dims=("batch=4",))
    ev = ["--eval-data", f"x={WORK}/x.npy", "--eval-data", f"labels={WORK}/y.npy"]
    p = run(["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2", t] + data + ev +
            ["--epochs", "2", "--grad-accum", "2", "--report", f"{WORK}/dp.json"])
    rep = json.load(open(f"{WORK}/dp.json")) if p.returncode == 0 else {"losses": [], "evals": []}
    err = rel_err(rep["losses"] + [e["loss"] for e in rep["evals"]], single["losses"] + [e["loss"] for e in single["evals"]])
    check(f"data parallel, 2 ranks x 4 samples, --grad-accum 2 and an eval: within {err:.1e} of one process x 8",
          err <= 1e-5 and len(rep["evals"]) == 1, f"exit {p.returncode} {p.stderr[-500:]} {rep['losses']} {single['losses']}")
    # --resume with 2 ranks: a rank killed (SIGKILL) in the middle of step 3 takes the job down
    mpi = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2", t]
    args = data + ["--epochs", "3", "--grad-accum", "2", "--shuffle", "--seed", "2"]
    full = run(mpi + args + ["--dump-params", f"{WORK}/dpfull-params"])
    ck = f"{WORK}/dp-ckpt"
    shutil.rmtree(ck, ignore_errors=True)  # an earlier run's checkpoints would be refused
    killed = subprocess.run(mpi + args + ["--save-every", "1", "--ckpt-dir", ck], capture_output=True, text=True, timeout=900,
                            env=dict(os.environ, CKRT_DEBUG_KILL="step:3"))
    res = run(mpi + args + ["--ckpt-dir", ck, "--resume", ck, "--dump-params", f"{WORK}/dpres-params"])
    ok = full.returncode == 0 and killed.returncode != 0 and res.returncode == 0 and same_bits("dpfull", "dpres")
    check("data parallel --resume: 2 ranks killed in step 3 and resumed end with the bits of a run never stopped", ok,
          f"exits {full.returncode} {killed.returncode} {res.returncode} {res.stderr[-400:]}")


def resume(data):
    t = f"{WORK}/acc-adamw/trainer"
    args = data + ["--epochs", "3", "--grad-accum", "2", "--shuffle", "--seed", "4"]
    train(t, args, "res-full")
    ck = f"{WORK}/res-ckpt"
    shutil.rmtree(ck, ignore_errors=True)  # an earlier run's checkpoints would be refused
    p = subprocess.run([t] + args + ["--save-every", "1", "--ckpt-dir", ck], capture_output=True, text=True,
                       env=dict(os.environ, CKRT_DEBUG_KILL="step:3"))
    killed = p.returncode == -9
    rep, _ = train(t, args + ["--save-every", "1", "--ckpt-dir", ck, "--resume", ck], "res-resumed")
    check("--grad-accum 2 --shuffle AdamW killed in step 3 and resumed: the bits of a run never stopped",
          killed and same_bits("res-full", "res-resumed"), f"exit {p.returncode}")
    p = run([t] + data + ["--epochs", "3", "--grad-accum", "1", "--shuffle", "--seed", "4", "--resume", ck])
    check("a checkpoint written with --grad-accum 2 refused by a run with --grad-accum 1", p.returncode == 2 and
          "--grad-accum 2" in p.stderr, p.stderr)


def main():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    y = rng.integers(0, 10, 32).astype(np.int64)
    np.save(f"{WORK}/x.npy", x)
    np.save(f"{WORK}/y.npy", y)
    data = ["--data", f"x={WORK}/x.npy", "--data", f"labels={WORK}/y.npy"]
    single = accumulation(x, y, data)["sgd"]
    policies()
    clipping(x, y, data)
    norms_metrics(x, y, data)
    evaluation()
    data_parallel(data, single)
    resume(data)
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
