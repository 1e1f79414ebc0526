#!/usr/bin/env python3
"""bench/gpu/compare.py -- ckptc's training step against PyTorch's on the same GPU, one model.

    python3 bench/gpu/compare.py CKPTC MODELS_DIR NAME WORK [--device cuda|cpu] [--steps N]
                                 [--warmup W] [--timeout S] [--only torch|ckptc]

NAME is a bench/gpu/models.py model whose MODELS_DIR/NAME.onnx (+ .data, .json) exist. Every variant
runs in a process of its own, in this order (cheapest and surest first, so that a time limit cuts the
end of the list, not its start):
    PyTorch  eager, checkpoint (torch.utils.checkpoint around every block, use_reentrant=False),
             checkpoint+save_on_cpu (the same inside torch.autograd.graph.save_on_cpu(pin_memory=True))
    ckptc    none, selective, blocks, blocks,selective, blocks+offload
Both sides: float32 (TF32 off in PyTorch; ckptc's cuBLAS GEMMs are plain float32), AdamW (lr 1e-3,
weight decay 1e-2, eps 1e-8), cross-entropy, the same shapes; random inputs (the values do not change
the work). Step time: the median of the steps after W warm-ups (PyTorch: CUDA events around each
step; ckptc: the trainer's per-step clock, which ends with the step's loss read back). Memory:
PyTorch's torch.cuda.max_memory_allocated() over the timed steps (parameters, gradients, AdamW state,
activations, temporaries); ckptc's planned peak and its measured arena peak (the same things,
planned to the byte); for both, the device memory in use (cuMemGetInfo: context included).

Writes WORK/NAME.json (every figure) and WORK/NAME.md (the table), row by row as they finish.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

TORCH_VARIANTS = ["eager", "checkpoint", "checkpoint+save_on_cpu"]
CKPTC_VARIANTS = [("none", []), ("selective", ["--checkpoint=selective"]), ("blocks", ["--checkpoint=blocks"]),
                  ("blocks,selective", ["--checkpoint=blocks,selective"]),
                  ("blocks+offload", ["--checkpoint=blocks", "--offload"])]
# the PyTorch variant each ckptc variant is set against (ratios in the table)
MATCH = {"none": "eager", "selective": "eager", "blocks": "checkpoint", "blocks,selective": "checkpoint",
         "blocks+offload": "checkpoint+save_on_cpu"}


def torch_child(name, variant, device, steps, warmup):
    """One PyTorch variant; prints one JSON line."""
    import torch
    import torch.nn.functional as F
    import models
    import export as bench_export
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    if cuda:
        free0, total = torch.cuda.mem_get_info()
    m = models.build(name).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=1e-2, eps=1e-8)
    shape, C = models.input_shape(name), models.classes(name)
    g = torch.Generator().manual_seed(1234)
    if models.SPECS[name]["family"] == "gpt":
        x = torch.randint(0, C, shape, generator=g)
        y = torch.randint(0, C, shape, generator=g)
    else:
        x = torch.randn(shape, generator=g)
        y = torch.randint(0, C, (shape[0],), generator=g)
    x, y = x.to(dev), y.to(dev)
    seq = bench_export.plain if variant == "eager" else bench_export.per_block

    def step():
        opt.zero_grad(set_to_none=True)
        if variant == "checkpoint+save_on_cpu":
            with torch.autograd.graph.save_on_cpu(pin_memory=cuda):
                out = bench_export.run_model(m, x, seq)
        else:
            out = bench_export.run_model(m, x, seq)
        loss = F.cross_entropy(out.reshape(-1, C), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    losses = []
    for _ in range(warmup):
        losses.append(float(step()))
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            loss = step()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1))
        else:
            t0 = time.perf_counter()
            loss = step()
            times.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss))
    r = dict(side="torch", variant=variant, step_ms=statistics.median(times), step_ms_all=times, losses=losses,
             torch=torch.__version__)
    if cuda:
        free1, _ = torch.cuda.mem_get_info()
        r.update(peak_bytes=torch.cuda.max_memory_allocated(), reserved_bytes=torch.cuda.max_memory_reserved(),
                 device_used_bytes=total - free1, device_used_before_bytes=total - free0,
                 gpu=torch.cuda.get_device_name(0))
    print(json.dumps(r))


def run_torch(name, variant, device, steps, warmup, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-child", name, variant, device, str(steps), str(warmup)]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(side="torch", variant=variant, error=f"timed out after {timeout} s")
    if p.returncode != 0:
        return dict(side="torch", variant=variant, error=f"exit {p.returncode}: " + (p.stderr.strip().splitlines() or [""])[-1][:300])
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["wall_s"] = time.time() - t0
    return r


def run_ckptc(ckptc, models_dir, work, name, variant, flags, device, steps, warmup, timeout):
    meta = json.load(open(os.path.join(models_dir, name + ".json")))
    d = os.path.join(work, name + "-" + variant.replace(",", "-").replace("+", "-"))
    r = dict(side="ckptc", variant=variant, flags=" ".join(flags))
    t0 = time.time()
    c = subprocess.run([ckptc, os.path.join(models_dir, name + ".onnx"), "--dim", "batch=%d" % meta["input_shape"][0],
                        *flags, "-o", d], capture_output=True, text=True)
    if c.returncode != 0:
        r["error"] = "ckptc: " + c.stderr.strip()[-300:]
        return r
    r["compile_s"] = time.time() - t0
    mk = subprocess.run(["make", "-s", "-C", d], capture_output=True, text=True)
    if mk.returncode != 0:
        r["error"] = "make: " + (mk.stdout + mk.stderr).strip()[-300:]
        return r
    rep = os.path.join(d, "report.json")
    t1 = time.time()
    try:
        p = subprocess.run([os.path.join(d, "trainer"), "--device", device, "--steps", str(steps + warmup),
                            "--report", rep], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        r["error"] = f"timed out after {timeout} s"
        return r
    r["wall_s"] = time.time() - t1
    open(os.path.join(d, "out.txt"), "w").write(p.stdout + p.stderr)
    if p.returncode != 0:
        r["error"] = f"trainer exit {p.returncode}: " + (p.stderr.strip() or p.stdout.strip())[-300:]
        return r
    j = json.load(open(rep))
    st = [s * 1e3 for s in j["step_seconds"]]
    r.update(step_ms=statistics.median(st[warmup:]), step_ms_all=st, losses=j["losses"],
             planned_bytes=j["planned_peak_bytes"], measured_bytes=j["measured_peak_bytes"],
             breakdown=j.get("breakdown"), recompute_flops=j.get("recompute_flops"),
             forward_flops=j.get("forward_flops"), backward_flops=j.get("backward_flops"),
             offload_bytes_per_step=j.get("offload_bytes_per_step"), host_offload_peak_bytes=j.get("host_offload_peak_bytes"))
    dev = j.get("device")
    if dev:
        r.update(device_used_bytes=dev["used_bytes_context_included"], copy_ms=dev["copy_ms"],
                 copy_exposed_ms=dev["copy_exposed_ms"], copy_bytes=dev["copy_bytes"], nvrtc_ms=dev["nvrtc_ms"],
                 kernel_cache_hit=dev["kernel_cache_hit"], gpu=dev["name"], conv_cudnn_calls=dev.get("conv_cudnn_calls"),
                 conv_im2col_calls=dev.get("conv_im2col_calls"))
    return r


def mb(b):
    return "" if b is None else f"{b / 2**20:.0f}"


def table(name, meta, rows, steps, warmup):
    t = {r["variant"]: r for r in rows if r["side"] == "torch"}
    out = [f"### {name}: {meta['spec']}, input {tuple(meta['input_shape'])}", "",
           f"Median step of {steps} after {warmup} warm-ups. MiB = 2^20 bytes. Peak: PyTorch max_memory_allocated, "
           "ckptc planned (= measured when the column says so). Device: cuMemGetInfo in use after the run "
           "(CUDA context, PyTorch's cache or ckptc's one allocation).", "",
           "| side | variant | step ms | / own none-eager | / PyTorch match | peak MiB | / PyTorch match | measured == planned "
           "| device MiB | recompute GFLOP | offload: copy ms (exposed) | losses == none's bits |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    base = {"torch": t.get("eager"), "ckptc": next((r for r in rows if r["side"] == "ckptc" and r["variant"] == "none"), None)}
    for r in rows:
        if "error" in r:
            out.append(f"| {r['side']} | {r['variant']} | FAILED: {r['error'][:200]} | | | | | | | | | |")
            continue
        b = base[r["side"]]
        own = f"{r['step_ms'] / b['step_ms']:.2f}" if b and "step_ms" in b else ""
        peak = r.get("peak_bytes", r.get("planned_bytes"))
        m = t.get(MATCH.get(r["variant"], "")) if r["side"] == "ckptc" else None
        vs_t = f"{r['step_ms'] / m['step_ms']:.2f}" if m and "step_ms" in m else ""
        vs_p = f"{peak / m['peak_bytes']:.2f}" if m and m.get("peak_bytes") else ""
        eq = "" if r["side"] == "torch" else ("yes" if r["planned_bytes"] == r["measured_bytes"] else
                                              f"NO ({r['measured_bytes']})")
        rf = r.get("recompute_flops")
        cp = f"{r['copy_ms']:.1f} ({r['copy_exposed_ms']:.1f})" if r.get("copy_bytes") else ""
        bits = "" if r["side"] == "torch" or not b or "losses" not in b else "-" if r is b else \
            ("yes" if r["losses"] == b["losses"] else "NO")
        out.append(f"| {r['side']} | {r['variant']} | {r['step_ms']:.1f} | {own} | {vs_t} | {mb(peak)} | {vs_p} | {eq} | "
                   f"{mb(r.get('device_used_bytes'))} | {'' if rf is None else f'{rf / 1e9:.1f}'} | {cp} | {bits} |")
    return "\n".join(out) + "\n"


def main():
    a = sys.argv[1:]
    if a and a[0] == "--torch-child":
        torch_child(a[1], a[2], a[3], int(a[4]), int(a[5]))
        return 0
    opts = dict(device="cuda", steps="8", warmup="2", timeout="120", only="")
    pos = []
    i = 0
    while i < len(a):
        if a[i].startswith("--") and a[i][2:] in opts:
            opts[a[i][2:]] = a[i + 1]
            i += 2
        else:
            pos.append(a[i])
            i += 1
    if len(pos) != 4:
        raise SystemExit(__doc__)
    ckptc, models_dir, name, work = pos
    steps, warmup, timeout = int(opts["steps"]), int(opts["warmup"]), int(opts["timeout"])
    os.makedirs(work, exist_ok=True)
    meta = json.load(open(os.path.join(models_dir, name + ".json")))
    rows = []
    jobs = []
    if opts["only"] in ("", "torch"):
        jobs += [("torch", v, None) for v in TORCH_VARIANTS]
    if opts["only"] in ("", "ckptc"):
        jobs += [("ckptc", v, f) for v, f in CKPTC_VARIANTS]
    for side, v, flags in jobs:
        t0 = time.time()
        if side == "torch":
            r = run_torch(name, v, opts["device"], steps, warmup, timeout)
        else:
            r = run_ckptc(ckptc, models_dir, work, name, v, flags, opts["device"], steps, warmup, timeout)
        rows.append(r)
        print(f"{name} {side} {v}: " + (r["error"] if "error" in r else
              f"{r['step_ms']:.1f} ms/step, peak {mb(r.get('peak_bytes', r.get('planned_bytes')))} MiB") +
              f"  ({time.time() - t0:.0f} s)", flush=True)
        json.dump(dict(model=meta["name"], spec=meta["spec"], rows=rows), open(os.path.join(work, name + ".json"), "w"), indent=1)
        open(os.path.join(work, name + ".md"), "w").write(table(name, meta, rows, steps, warmup))
    print(open(os.path.join(work, name + ".md")).read())
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
