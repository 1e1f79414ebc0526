#!/usr/bin/python3
# bench/run.py -- ckptc vs PyTorch on the CPU: peak memory and step time, one table and one plot;
# and the planner's time on synthetic graphs of 1k to 100k nodes.
#
#     cmake -B build -S . -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2
#     /usr/bin/python3 bench/run.py                  # everything (about 20 minutes on 2 cores)
#     /usr/bin/python3 bench/run.py --quick          # mlp16, gpt4, resnet18 only; no planner
#     /usr/bin/python3 bench/run.py --only planner   # or --only cpu
#
# Writes bench/results/cpu-latest.md (+ .json, the raw figures), bench/results/peak-vs-depth.svg
# and bench/results/planner-scaling.md. Models are exported by bench/export.py into
# bench/models/ when missing; compiled programs go to bench/work/ (both gitignored).
#
# Every variant runs in its own process, one at a time, with --threads N (default 1) on both sides:
# OMP_NUM_THREADS=N, OPENBLAS_NUM_THREADS=N, MKL_NUM_THREADS=N and torch.set_num_threads(N) for
# PyTorch, the trainer's --threads N for ckptc (its GEMMs and kernels on its own deterministic pool:
# the same bits for every N). Both sides train with plain SGD, lr 0.01, on the same weights and
# inputs. --variants none,eager limits the runs to those variants (a side-by-side at a glance).
#
# ckptc variants: none, blocks, sqrt, budget at 50% and at 25% of none's activation bytes (the
#   budget is none's planned peak minus 50% / 75% of its saved + transient activation bytes at
#   the peak), blocks --offload, selective (op-level recompute), blocks,selective, and blocks-max50
#   (blocks --max-recompute=50%: the lowest peak that recomputes at most half the forward's FLOPs).
# PyTorch variants (eager CPU, torch 1.13): eager; ckpt = torch.utils.checkpoint(block,
#   use_reentrant=False) around every block; ckpt-sqrt = the same around runs of round(sqrt(L))
#   blocks; save_on_cpu = torch.autograd.graph.save_on_cpu() around the step (on the CPU the saved
#   tensors already live in host memory: it moves nothing and is eager with hooks; it is what
#   offload is on a GPU); ckpt+save_on_cpu = both, the match of ckptc's blocks --offload.
#
# Memory, stated in the output:
#   ckptc step peak = measured arena peak - static bytes (parameters + inputs; SGD keeps no
#     optimizer state): gradients, activations and workspace at the step's peak. The trainer
#     checks planned == measured. Process VmHWM from /usr/bin/time -v (includes the whole
#     arena, the host pool of --offload, code and OpenBLAS buffers).
#   PyTorch step peak = VmHWM after the last step - VmHWM before the first step, where the HWM
#     is reset to the current RSS (echo 5 > /proc/self/clear_refs) just before the first step, so
#     loading does not hide the step's peak. Parameters and inputs are resident before the first
#     step; gradients are freed by zero_grad(set_to_none=True) after every step, like ckptc's.
# Time: median and p90 of the per-step wall time over the steps after the warm-up (first 2).
import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
WORK = os.path.join(HERE, "work")
MODELS = os.path.join(HERE, "models")
ALL_MODELS = ["mlp16", "mlp64", "gpt4", "gpt8", "gpt12", "resnet18"]
QUICK_MODELS = ["mlp16", "gpt4", "resnet18"]
CK_VARIANTS = ["none", "blocks", "sqrt", "budget50", "budget25", "blocks+offload", "selective", "blocks,selective", "blocks-max50"]
PT_VARIANTS = ["eager", "ckpt", "ckpt-sqrt", "save_on_cpu", "ckpt+save_on_cpu", "eager (default malloc)"]
PT_DEFAULT_MALLOC = "eager (default malloc)"
MATCH = {"none": "eager", "blocks": "ckpt", "sqrt": "ckpt-sqrt", "blocks+offload": "ckpt+save_on_cpu"}
LR = 0.01
ENV1 = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
MiB = 1024.0 * 1024.0


def log(*a):
    print(*a, flush=True)


THREADS = 1  # --threads: both sides


def env1():
    """The environment of a timed run: THREADS threads for OpenMP, OpenBLAS and MKL (PyTorch's side)."""
    e = dict(os.environ)
    e.update({k: str(THREADS) for k in ENV1})
    e.pop("CKRT_NUM_THREADS", None)
    return e


def stats(xs):
    xs = sorted(xs)
    if not xs:
        return None, None
    med = xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])
    p90 = xs[min(len(xs) - 1, int(math.ceil(0.9 * len(xs))) - 1)]
    return med, p90


def status_kb(field, pid="self"):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


# ---------------------------------------------------------------------------------------------
# PyTorch worker (runs in its own process: run.py --torch-worker NAME VARIANT STEPS WARMUP OUT)
# ---------------------------------------------------------------------------------------------

def torch_worker(name, variant, steps, warmup, out):
    import contextlib
    import gc
    import numpy as np
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    import export as E
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    info = json.load(open(os.path.join(MODELS, name + ".json")))
    m = E.build(name)
    if E.param_hash(m) != info["param_sha256"]:
        raise SystemExit("%s: the rebuilt model's parameters differ from the exported ones" % name)
    p = E.paths(name)
    x = torch.from_numpy(np.load(p["x"]))
    labels = torch.from_numpy(np.load(p["labels"]))
    L = len(E.blocks_of(m))
    seq = {"eager": E.plain, "save_on_cpu": E.plain, "ckpt": E.per_block, "ckpt+save_on_cpu": E.per_block,
           "ckpt-sqrt": E.chunks(max(1, round(math.sqrt(L))))}[variant]
    ctx = torch.autograd.graph.save_on_cpu if "save_on_cpu" in variant else contextlib.nullcontext
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    gc.collect()
    reset = True
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        reset = False
    hwm0, rss0 = status_kb("VmHWM"), status_kb("VmRSS")
    mt = None
    try:  # bench/memtrack.c, preloaded by the driver: live heap bytes and their peak
        import ctypes
        mt = ctypes.CDLL(None)
        for fn in ("memtrack_live", "memtrack_peak", "memtrack_base"):
            getattr(mt, fn).restype = ctypes.c_long
        mt.memtrack_reset()
    except (OSError, AttributeError):
        mt = None
    losses, times = [], []
    for s in range(steps):
        t0 = time.perf_counter()
        with ctx():
            logits = E.run_model(m, x, seq)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        losses.append(float(loss.item()))
        del logits, loss
    hwm1 = status_kb("VmHWM")
    heap = mt.memtrack_peak() - mt.memtrack_base() if mt else None
    res = dict(system="pytorch", model=name, variant=variant, losses=losses, step_seconds=times,
               hwm_before_kb=hwm0, rss_before_kb=rss0, hwm_after_kb=hwm1, hwm_reset=reset,
               hwm_delta_bytes=(hwm1 - hwm0) * 1024, heap_peak_bytes=heap, step_peak_bytes=heap,
               process_hwm_bytes=hwm1 * 1024, glibc_tunables=os.environ.get("GLIBC_TUNABLES", ""),
               torch=torch.__version__, threads=torch.get_num_threads(), blocks=L)
    with open(out, "w") as f:
        json.dump(res, f)


# ---------------------------------------------------------------------------------------------
# ckptc side
# ---------------------------------------------------------------------------------------------

def cpu_busy_seconds():
    """Non-idle CPU seconds of the whole machine so far (steal included: it is time we lost)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


CONTENDED = 0.25  # cores used by others during a timed run above which it is rerun (and marked)


TRIES = 3  # --tries: runs per measurement while the machine is busy with other work


def timed_run(cmd, env, tries=None):
    """Runs a timed measurement, measuring how much CPU the rest of the machine used meanwhile
    (machine-wide busy time minus this child's own); reruns up to tries times while that exceeds
    CONTENDED cores, keeping the least contended run. Returns (CompletedProcess, others_cores)."""
    import resource
    best = None
    for k in range(tries or TRIES):
        b0, r0, t0 = cpu_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        b1, r1, t1 = cpu_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
        mine = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
        others = max(0.0, (b1 - b0) - mine) / max(t1 - t0, 1e-9)
        if best is None or others < best[1]:
            best = (r, others)
        if others <= CONTENDED or r.returncode != 0 or k + 1 == (tries or TRIES):
            break
        log("   (other processes used %.2f cores during that run; rerunning in 20 s)" % others)
        time.sleep(20)
    return best


def run_cmd(cmd, cwd=None, env=None, timeout=None):
    t0 = time.time()
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    return r, time.time() - t0


def ckptc_variant(ck, name, variant, steps, budget=None):
    info = json.load(open(os.path.join(MODELS, name + ".json")))
    d = os.path.join(WORK, name, variant.replace("+", "_").replace(",", "_"))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.dirname(d), exist_ok=True)
    args = [ck, os.path.join(MODELS, name + ".onnx"), "-o", d, "--optimizer=sgd", "--lr=%g" % LR]
    pol = {"none": "none", "blocks": "blocks", "sqrt": "sqrt", "blocks+offload": "blocks", "selective": "selective",
           "blocks,selective": "blocks,selective", "blocks-max50": "blocks"}.get(variant)
    args.append("--checkpoint=%s" % (pol if pol else "budget:%d" % budget))
    if variant == "blocks-max50":
        args.append("--max-recompute=50%")
    if variant.endswith("+offload"):
        args.append("--offload")
    res = dict(system="ckptc", model=name, variant=variant, command=" ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a
                                                                             for a in args[:1] + args[1:]))
    if budget is not None:
        res["budget_bytes"] = budget
    r, t = run_cmd(args)
    res["compile_seconds"] = t
    res["ckptc_stdout"] = r.stdout.strip().splitlines()[:2]
    if r.returncode != 0:
        res["error"] = r.stderr.strip().splitlines()[0] if r.stderr.strip() else "exit %d" % r.returncode
        m = re.search(r"smallest planned peak ckptc reaches is (\d+)", r.stderr)
        if m:
            res["smallest_reachable_peak"] = int(m.group(1))
        return res
    r, t = run_cmd(["make", "-s", "-C", d])
    res["make_seconds"] = t
    if r.returncode != 0:
        res["error"] = "make failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
        return res
    p = lambda s: os.path.join(MODELS, "%s.%s" % (name, s))  # noqa: E731
    rep = os.path.join(d, "report.json")
    cmd = ["/usr/bin/time", "-v", os.path.join(d, "trainer"), "--steps", str(steps),
           "--input", "%s=%s" % (info["input"], p("in.%s.npy" % info["input"])),
           "--input", "labels=%s" % p("in.labels.npy"), "--report", rep, "--threads", str(THREADS)]
    res["_trainer_cmd"] = cmd
    return ckptc_measure(res)


def ckptc_measure(res):
    """Runs the compiled variant's trainer (again, in later --rounds) and reads its report."""
    cmd = res["_trainer_cmd"]
    rep = cmd[cmd.index("--report") + 1]
    r, others = timed_run(cmd, env1())
    res["others_cores"] = others
    if r.returncode != 0:
        res["error"] = "trainer failed: " + (r.stderr.strip().splitlines() or ["?"])[0]
        return res
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    rr = json.load(open(rep))
    b = rr["breakdown"]
    res.update(planned_peak_bytes=rr["planned_peak_bytes"], measured_peak_bytes=rr["measured_peak_bytes"],
               static_bytes=rr["static_bytes"], breakdown=b, host_pool_bytes=rr.get("host_offload_peak_bytes", 0),
               step_peak_bytes=rr["measured_peak_bytes"] - rr["static_bytes"],
               process_hwm_bytes=int(m.group(1)) * 1024 if m else None,
               losses=rr["losses"], step_seconds=rr["step_seconds"],
               flops=rr["forward_flops"] + rr["backward_flops"] + rr["recompute_flops"] + rr["update_flops"],
               gemm_flops_forward=rr["forward_flops"], recompute_flops=rr["recompute_flops"],
               segments=len(rr.get("segments", [])), activation_bytes=b["saved_activations"] + b["transient"])
    return res


# PyTorch's runs keep freed memory in the process (glibc's default hands big blocks back to the
# kernel, and on this VM re-faulting them costs up to half a GPT step); ckptc's arena is faulted
# in once before the first step. "eager (default malloc)" shows PyTorch without this.
GLIBC_NO_TRIM = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=68719476736"


def build_memtrack():
    so = os.path.join(WORK, "libmemtrack.so")
    r, _ = run_cmd(["cc", "-O2", "-shared", "-fPIC", os.path.join(HERE, "memtrack.c"), "-o", so, "-ldl"])
    return so if r.returncode == 0 else None


def torch_variant(name, variant, steps, warmup, memtrack):
    out = os.path.join(WORK, name, "torch_%s.json" % re.sub(r"[^a-z0-9-]+", "_", variant))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    env = env1()
    if memtrack:
        env["LD_PRELOAD"] = memtrack
    if variant != PT_DEFAULT_MALLOC:
        env["GLIBC_TUNABLES"] = GLIBC_NO_TRIM
    r, others = timed_run([sys.executable, os.path.abspath(__file__), "--torch-worker", name,
                           "eager" if variant == PT_DEFAULT_MALLOC else variant, str(steps), str(warmup), out], env)
    if r.returncode != 0:
        return dict(system="pytorch", model=name, variant=variant,
                    error=(r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1])
    res = json.load(open(out))
    res["variant"] = variant
    res["others_cores"] = others
    return res


def sgemm_rates(lib="openblas"):
    """One thread's sgemm rate on the benchmark's GEMM shapes: OpenBLAS's (PyTorch's CPU GEMM here)
    or oneDNN's (ckptc's, runtime/ckrt_dnnl.h)."""
    exe = os.path.join(WORK, "sgemm_" + lib)
    flags = ["-DWITH_DNNL", "-lopenblas", "-ldnnl", "-lgomp"] if lib == "onednn" else ["-lopenblas"]
    r, _ = run_cmd(["cc", "-O2", os.path.join(HERE, "sgemm.c"), "-o", exe] + flags)
    if r.returncode != 0:
        return {"error": r.stderr.strip()}
    out = {}
    # the MLP's GEMMs (x W^T forward, dY W and dY^T X backward) and the GPT's largest (fc)
    for shape in ["NT 256 512 512", "NN 256 512 512", "TN 512 512 256", "NT 1024 1024 256"]:
        e = env1()
        e["OPENBLAS_NUM_THREADS"] = "1"  # the table is one thread's rate
        r, _ = run_cmd([exe] + shape.split() + ["1", lib], env=e)
        m = re.search(r": ([\d.]+) ([\d.]+)", r.stdout)
        if m:
            out[shape] = float(m.group(1))
    return out


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def fmt_mib(b):
    return "—" if b is None else "%.1f" % (b / MiB)


def fmt_ratio(a, b):
    if a is None or b is None or not b:
        return "—"
    return "%.2f" % (a / b)


def fmt_ms(s):
    return "—" if s is None else ("%.0f" % (s * 1e3) if s >= 0.1 else "%.1f" % (s * 1e3))


def summarize(r, warmup):
    """median_s: the step median; with --rounds, the median of the rounds' medians (p90 over all)."""
    if "step_seconds" in r:
        r["median_s"], r["p90_s"] = stats(r["step_seconds"][warmup:])
        r["measured_steps"] = len(r["step_seconds"][warmup:])
        r.setdefault("round_medians_s", []).append(r["median_s"])
        r.setdefault("all_steps_s", []).extend(r["step_seconds"][warmup:])
        r["median_s"] = stats(r["round_medians_s"])[0]
        r["p90_s"] = stats(r["all_steps_s"])[1]
    return r


def another_round(r, warmup, steps, memtrack):
    """--rounds: the same variant measured again (not compiled again), its round appended."""
    if "error" in r:
        return r
    if r["system"] == "ckptc":
        ckptc_measure(r)
    else:
        again = torch_variant(r["model"], r["variant"], steps, warmup, memtrack)
        if "error" in again:
            r["error"] = again["error"]
            return r
        r["step_seconds"] = again["step_seconds"]
    return summarize(r, warmup)


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    return dict(cpu=cpu, cores=os.cpu_count(), mem_bytes=mem, kernel=platform.release(), python=platform.python_version())


def ckptc_build_info(build):
    bt = "?"
    try:
        for line in open(os.path.join(build, "CMakeCache.txt")):
            if line.startswith("CMAKE_BUILD_TYPE:"):
                bt = line.split("=", 1)[1].strip()
    except OSError:
        pass
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True).stdout.strip()
    return bt, commit + (" + uncommitted changes" if dirty else "")


def write_cpu_report(results, meta, path_md, path_json, path_svg):
    by = {(r["system"], r["model"], r["variant"]): r for r in results}
    models = meta["models"]
    lines = []
    w = lines.append
    w("# ckptc vs PyTorch on the CPU: peak memory and step time")
    w("")
    w("Generated by `/usr/bin/python3 bench/run.py%s` on %s. Machine: %s, %d cores, %.0f GiB; "
      "ckptc %s (%s build), PyTorch %s (Debian), %d thread(s) on both sides (OMP/OpenBLAS/MKL threads %d, "
      "torch.set_num_threads(%d); the trainer's --threads %d); SGD lr %g; %d steps per run, the first %d are warm-up; median and "
      "p90 over the other %d." % (meta["argv"], meta["date"], meta["machine"]["cpu"], meta["machine"]["cores"],
                                   (meta["machine"]["mem_bytes"] or 0) / 2**30, meta["commit"], meta["build_type"],
                                   meta["torch"], meta.get("threads", 1), meta.get("threads", 1), meta.get("threads", 1),
                                   meta.get("threads", 1), LR, meta["steps"], meta["warmup"], meta["steps"] - meta["warmup"]))
    if meta.get("rounds", 1) > 1:
        w("")
        w("Rounds: each model's variants were run %d times round-robin (compiled once); a step time "
          "below is the median of the %d rounds' medians, p90 over all rounds' steps, so that the host's "
          "speed drifting over minutes slows every variant alike. The rounds' medians are in the JSON "
          "(round_medians_s)." % (meta["rounds"], meta["rounds"]))
    w("")
    w("**Peak** = the bytes the step allocates above the parameters and inputs (both sides hold "
      "those before the first step; SGD keeps no optimizer state), measured the same way on both "
      "sides as far as they allow: **ckptc** = measured arena peak - static bytes (gradients, "
      "activations and workspace; the trainer checks planned == measured to the byte, and it held "
      "in every run below); **PyTorch** = peak of the process's live heap bytes during the steps "
      "minus the live bytes just before the first step, counted by bench/memtrack.c (an LD_PRELOAD "
      "counter of malloc_usable_size over every malloc/free: tensors, autograd's saved tensors and "
      "graph, Python objects). Neither counts pages the allocator keeps or fragments: those show in "
      "**VmHWM Δ** (PyTorch: VmHWM after the last step - VmHWM before the first, the HWM reset to "
      "the current RSS just before the first step through /proc/self/clear_refs) and in **process** "
      "(the whole process's VmHWM: ckptc's from /usr/bin/time -v, its arena painted in full plus "
      "code, OpenBLAS buffers and the --offload host pool; PyTorch's includes Python and libtorch, "
      "about %s MiB before the model is built). ckptc's blocks+offload peak is its device arena; "
      "its host pool is listed next to it. On the CPU, PyTorch's save_on_cpu moves nothing (the "
      "saved tensors already are in host memory; its pack hook returns them as they are), so it is "
      "eager plus hooks here; on a GPU it is what offload is. PyTorch runs with glibc told not to "
      "hand freed memory back to the kernel between steps (`GLIBC_TUNABLES=%s`): re-faulting it "
      "cost PyTorch up to 1.5x step time on this VM, while ckptc's arena is faulted in once before "
      "the first step; `eager (default malloc)` is PyTorch without it. ×none = ratio to the same "
      "system's none / eager; ×PT = ratio to PyTorch's matching variant (none↔eager, blocks↔ckpt, "
      "sqrt↔ckpt-sqrt, blocks+offload↔ckpt+save_on_cpu)." % (meta.get("torch_base_mib", "?"), GLIBC_NO_TRIM))
    w("")
    w("| model | system | variant | peak MiB | ×none | ×PT | step ms (median) | p90 ms | ×none | ×PT | "
      "arena MiB (planned = measured) | VmHWM Δ MiB | process MiB | loss step 1 |")
    w("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m in models:
        base_ck = by.get(("ckptc", m, "none"))
        base_pt = by.get(("pytorch", m, "eager"))
        for sysname, variants, base in (("ckptc", CK_VARIANTS, base_ck), ("pytorch", PT_VARIANTS, base_pt)):
            for v in variants:
                r = by.get((sysname, m, v))
                if r is None:
                    continue
                if "error" in r:
                    msg = "not run: " + r["error"][:160].replace("|", "/")
                    if r.get("smallest_reachable_peak") is not None:
                        msg = "budget %.1f MiB (arena) cannot be met: the smallest planned arena ckptc reaches is %.1f MiB" % (
                            r["budget_bytes"] / MiB, r["smallest_reachable_peak"] / MiB)
                    w("| %s | %s | %s | %s ||||||||||" % (m, sysname, v, msg))
                    continue
                pt = by.get(("pytorch", m, MATCH[v])) if sysname == "ckptc" and v in MATCH else None
                pt_ok = pt is not None and "error" not in pt
                vname = v
                if v.startswith("budget"):
                    vname = "%s (%.1f MiB arena)" % (v, r["budget_bytes"] / MiB)
                if v == "blocks+offload" and r.get("host_pool_bytes"):
                    vname += " (host pool %.1f MiB)" % (r["host_pool_bytes"] / MiB)
                if (r.get("others_cores") or 0) > CONTENDED:
                    vname += " †"
                if sysname == "ckptc":
                    arena = "%.1f" % (r["measured_peak_bytes"] / MiB)
                    if r["planned_peak_bytes"] != r["measured_peak_bytes"]:
                        arena += " (planned %.1f!)" % (r["planned_peak_bytes"] / MiB)
                else:
                    arena = "—"
                w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.6f |" % (
                    m, sysname, vname, fmt_mib(r["step_peak_bytes"]),
                    fmt_ratio(r["step_peak_bytes"], base and base.get("step_peak_bytes")),
                    fmt_ratio(r["step_peak_bytes"], pt["step_peak_bytes"]) if pt_ok else "—",
                    fmt_ms(r["median_s"]), fmt_ms(r["p90_s"]),
                    fmt_ratio(r["median_s"], base and base.get("median_s")),
                    fmt_ratio(r["median_s"], pt["median_s"]) if pt_ok else "—",
                    arena, fmt_mib(r.get("hwm_delta_bytes")), fmt_mib(r.get("process_hwm_bytes")), r["losses"][0]))
    cont = [r for r in results if (r.get("others_cores") or 0) > CONTENDED]
    w("")
    w("Other processes' CPU use during each timed run was measured (machine busy time minus the run's "
      "own); a run above %.2f cores was rerun (up to %d runs) and the least disturbed kept. %s" % (
          CONTENDED, TRIES, "† marks %d run(s) still disturbed (up to %.2f cores)." % (
              len(cont), max(r["others_cores"] for r in cont)) if cont else "No run in the table was disturbed."))
    w("")
    # loss agreement and bit-identity
    w("## Loss agreement")
    w("")
    w("| model | ckptc none step 1 | PyTorch eager step 1 | relative difference | max over %d steps | "
      "ckptc variants bit-identical to none (all steps) | PyTorch variants vs eager (max rel.) |" % meta["steps"])
    w("|---|---:|---:|---:|---:|---|---:|")
    for m in models:
        a, b = by.get(("ckptc", m, "none")), by.get(("pytorch", m, "eager"))
        if not a or not b or "error" in a or "error" in b:
            continue
        rel = [abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a["losses"], b["losses"])]
        same = []
        for v in CK_VARIANTS[1:]:
            r = by.get(("ckptc", m, v))
            if r and "error" not in r:
                same.append("%s %s" % (v, "yes" if r["losses"] == a["losses"] else "NO"))
        ptrel = 0.0
        for v in PT_VARIANTS[1:]:
            r = by.get(("pytorch", m, v))
            if r and "error" not in r:
                ptrel = max([ptrel] + [abs(x - y) / max(abs(y), 1e-30) for x, y in zip(r["losses"], b["losses"])])
        w("| %s | %.7f | %.7f | %.1e | %.1e | %s | %.1e |" % (m, a["losses"][0], b["losses"][0], rel[0], max(rel),
                                                          ", ".join(same), ptrel))
    w("")
    # GEMM rate
    w("## GEMM-bound steps vs sgemm alone")
    w("")
    sg, sd = meta.get("sgemm", {}), meta.get("sgemm_onednn", {})
    ref = refd = None

    def yard(rates):  # the MLPs' yardstick: the mean of their three GEMM shapes
        r = [v for k, v in rates.items() if k.endswith("512 512") or k.endswith("512 256")]
        return sum(r) / len(r) if r else None

    if sg and "error" not in sg:
        w("sgemm alone, one thread, median GFLOP/s (bench/sgemm.c, row-major as ckptc calls it): OpenBLAS "
          "(PyTorch's GEMM here) " + ", ".join("%s: %.1f" % (k, v) for k, v in sg.items()) + "; oneDNN (ckptc's GEMM, "
          "runtime/ckrt_dnnl.h) " + (", ".join("%s: %.1f" % (k, v) for k, v in sd.items()) if sd and "error" not in sd
                                     else "not measured") + ".")
        w("")
        ref = yard(sg)
        refd = yard(sd) if sd and "error" not in sd else None
        w("| model | step FLOPs (ckptc's count) | ckptc none GFLOP/s | PyTorch eager GFLOP/s | ckptc / oneDNN sgemm | "
          "PyTorch / OpenBLAS sgemm |")
        w("|---|---:|---:|---:|---:|---:|")
        for m in models:
            a, b = by.get(("ckptc", m, "none")), by.get(("pytorch", m, "eager"))
            if not a or not b or "error" in a or "error" in b:
                continue
            fl = a["flops"]
            ra, rb = fl / a["median_s"] / 1e9, fl / b["median_s"] / 1e9
            refm = ref if m.startswith("mlp") else sg.get("NT 1024 1024 256", ref)
            refdm = refd if m.startswith("mlp") else (sd or {}).get("NT 1024 1024 256", refd)
            w("| %s | %.2f G | %.1f | %.1f | %s | %s |" % (m, fl / 1e9, ra, rb, "%.0f%%" % (100 * ra / refdm) if refdm else "—",
                                                         "%.0f%%" % (100 * rb / refm) if refm else "—"))
        w("")
        w("The step rate counts every FLOP of the step (GEMMs and elementwise), so it is a lower "
          "bound on the GEMM kernels' own rate; the MLPs are the GEMM-bound models (the yardstick "
          "for them is the mean of their three GEMM shapes; for the others the 1024x1024x256 GEMM). "
          "Each side is measured against the library it runs.")
        w("")
    w("## Goals (issues 7 and 19)")
    w("")
    w("The FLOP floor of a checkpointed variant is its step FLOPs (recompute included) over none's: "
      "the ratio its step cannot beat while every FLOP costs the same.")
    w("")
    w("| goal | model | figure | met |")
    w("|---|---|---|---|")
    ok = lambda x: "yes" if x else "**no**"  # noqa: E731
    for m in models:  # issue 19
        a, b = by.get(("ckptc", m, "none")), by.get(("pytorch", m, "eager"))
        if a and b and "error" not in a and "error" not in b:
            q = a["median_s"] / b["median_s"]
            w("| ckptc none step <= PyTorch eager (%d thread%s) | %s | %.2fx | %s |" % (
                meta.get("threads", 1), "" if meta.get("threads", 1) == 1 else "s", m, q, ok(q <= 1.0)))
    for v in ("blocks", "blocks-max50"):
        for m in models:
            a, c = by.get(("ckptc", m, "none")), by.get(("ckptc", m, v))
            if a and c and "error" not in a and "error" not in c:
                q = c["median_s"] / a["median_s"]
                w("| ckptc %s step <= 1.25x ckptc none | %s | %.2fx (FLOP floor %.2fx, recompute %.0f%% of the forward; "
                  "peak %.1f vs none's %.1f MiB) | %s |" % (v, m, q, c["flops"] / a["flops"], 100 * c["recompute_flops"] /
                                                           max(1, c["gemm_flops_forward"]), c["step_peak_bytes"] / MiB,
                                                           a["step_peak_bytes"] / MiB, ok(q <= 1.25)))
    for m in models:
        a, b = by.get(("ckptc", m, "none")), by.get(("pytorch", m, "eager"))
        if m.startswith(("mlp", "gpt")) and a and b and "error" not in a and "error" not in b:
            q = a["median_s"] / b["median_s"]
            w("| ckptc none step <= 1.5x PyTorch eager | %s | %.2fx | %s |" % (m, q, ok(q <= 1.5)))
    for m in models:
        a, c = by.get(("ckptc", m, "none")), by.get(("ckptc", m, "blocks"))
        if a and c and "error" not in a and "error" not in c:
            q = c["median_s"] / a["median_s"]
            w("| ckptc blocks step <= 1.4x ckptc none | %s | %.2fx | %s |" % (m, q, ok(q <= 1.4)))
    for m in models:  # issue 17: selective on the GPT models
        a, c, b = by.get(("ckptc", m, "none")), by.get(("ckptc", m, "selective")), by.get(("ckptc", m, "blocks"))
        if m.startswith("gpt") and a and c and "error" not in a and "error" not in c:
            q, fr = c["median_s"] / a["median_s"], 1 - c["step_peak_bytes"] / a["step_peak_bytes"]
            w("| ckptc selective step <= 1.08x ckptc none | %s | %.2fx | %s |" % (m, q, ok(q <= 1.08)))
            w("| ckptc selective step peak >= 40%% below none's | %s | %.0f%% below | %s |" % (m, 100 * fr, ok(fr >= 0.4)))
            if b and "error" not in b and "recompute_flops" in c and "recompute_flops" in b:
                w("| ckptc selective recomputes less than blocks | %s | %.2f vs %.2f GFLOP | %s |" % (
                    m, c["recompute_flops"] / 1e9, b["recompute_flops"] / 1e9, ok(c["recompute_flops"] < b["recompute_flops"])))
    for m in models:
        c, d = by.get(("ckptc", m, "blocks")), by.get(("pytorch", m, "ckpt"))
        if c and d and "error" not in c and "error" not in d:
            w("| ckptc blocks peak <= PyTorch per-block checkpoint peak | %s | %.1f vs %.1f MiB (%.2fx; vs PyTorch's "
              "VmHWM delta %.1f MiB) | %s |" % (m, c["step_peak_bytes"] / MiB, d["step_peak_bytes"] / MiB,
                                                c["step_peak_bytes"] / d["step_peak_bytes"], d["hwm_delta_bytes"] / MiB,
                                                ok(c["step_peak_bytes"] <= d["step_peak_bytes"])))
    if refd or ref:
        for m in models:
            a = by.get(("ckptc", m, "none"))
            if m.startswith("mlp") and a and "error" not in a:
                q = a["flops"] / a["median_s"] / 1e9 / (refd or ref)
                w("| GEMM-bound step >= 70%% of %s sgemm alone | %s | %.0f%% | %s |" % ("oneDNN" if refd else "OpenBLAS", m,
                                                                                      100 * q, ok(q >= 0.7)))
    w("")
    w("## What ran")
    w("")
    for m in models:
        a = by.get(("ckptc", m, "none"))
        info = json.load(open(os.path.join(MODELS, m + ".json")))
        w("- **%s**: %d ONNX nodes, %.2f M parameters, input %s %s%s." % (
            m, info["nodes"], info["parameters"] / 1e6, info["input"], tuple(info["input_shape"]),
            "; ckptc none planned %.1f MiB arena (static %.1f MiB), activations at the peak %.1f MiB" % (
                a["planned_peak_bytes"] / MiB, a["static_bytes"] / MiB, a["activation_bytes"] / MiB)
            if a and "error" not in a else ""))
    w("")
    w("Commands (ckptc): " + "; ".join(sorted({re.sub(r"^\S+ ", "ckptc ", r["command"]).replace(r["model"], "MODEL")
                                               for r in results if r["system"] == "ckptc" and "command" in r})) + ".")
    w("Trainer: `DIR/trainer --steps %d --input X=bench/models/MODEL.in.X.npy --input labels=... --report R.json` "
      "under /usr/bin/time -v." % meta["steps"])
    w("")
    w("Total wall time of the run: %.0f s." % meta["wall_seconds"])
    w("")
    with open(path_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(path_json, "w") as f:
        json.dump(dict(meta=meta, results=results), f, indent=1)
    write_svg(by, path_svg)


def write_svg(by, path):
    """Step peak vs depth, two panels (MLP, GPT), ckptc solid, PyTorch dashed."""
    panels = [("MLP (h 512, batch 256)", [("mlp16", 16), ("mlp64", 64)]),
              ("GPT-style (d 256, T 128, batch 8)", [("gpt4", 4), ("gpt8", 8), ("gpt12", 12)])]
    series = [("none", "eager", "#d62728"), ("blocks", "ckpt", "#1f77b4"), ("sqrt", "ckpt-sqrt", "#2ca02c"),
              ("blocks+offload", "ckpt+save_on_cpu", "#9467bd")]
    W, H, pw, ph, ml, mt = 1000, 470, 380, 300, 80, 60
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="15" text-anchor="middle">Step peak memory vs depth (MiB above parameters '
           'and inputs): ckptc solid, PyTorch dashed</text>' % (W // 2)]
    for pi, (title, pts) in enumerate(panels):
        x0, y0 = ml + pi * (pw + 130), mt
        vals = []
        for ck, pt, _ in series:
            for m, _d in pts:
                for key in (("ckptc", m, ck), ("pytorch", m, pt)):
                    r = by.get(key)
                    if r and "error" not in r:
                        vals.append(r["step_peak_bytes"] / MiB)
        if not vals:
            continue
        ymax = max(vals) * 1.08
        mag = 10 ** math.floor(math.log10(ymax))
        step = next(s * mag for s in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10) if ymax / (s * mag) <= 6)
        ymax = math.ceil(ymax / step) * step
        depths = [d for _, d in pts]
        dmin, dmax = min(depths), max(depths)
        X = lambda d: x0 + (d - dmin) / (dmax - dmin) * pw  # noqa: E731
        Y = lambda v: y0 + ph - v / ymax * ph  # noqa: E731
        out.append('<text x="%d" y="%d" font-size="13" text-anchor="middle">%s</text>' % (x0 + pw / 2, y0 - 12, title))
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>' % (x0, y0, pw, ph))
        v = 0.0
        while v <= ymax + 1e-9:
            out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (x0, x0 + pw, Y(v), Y(v)))
            out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (x0 - 6, Y(v) + 4, round(v, 6)))
            v += step
        for d in depths:
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (X(d), y0 + ph + 16, d))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">depth (blocks)</text>' % (x0 + pw / 2, y0 + ph + 34))
        out.append('<text x="%d" y="%.1f" text-anchor="middle" transform="rotate(-90 %d %.1f)">MiB</text>'
                   % (x0 - 50, y0 + ph / 2, x0 - 50, y0 + ph / 2))
        for ck, pt, color in series:
            for sysname, var, dash in (("ckptc", ck, ""), ("pytorch", pt, ' stroke-dasharray="6 4"')):
                xy = [(X(d), Y(by[(sysname, m, var)]["step_peak_bytes"] / MiB)) for m, d in pts
                      if (sysname, m, var) in by and "error" not in by[(sysname, m, var)]]
                if len(xy) >= 2:
                    out.append('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>'
                               % (color, dash, " ".join("%.1f,%.1f" % p for p in xy)))
                for px, py in xy:  # filled dots for ckptc, hollow for PyTorch
                    out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s" stroke="%s"/>'
                               % (px, py, "white" if dash else color, color))
    ly = mt + ph + 60
    for i, (ck, pt, color) in enumerate(series):
        lx = ml + i * 230
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"/>' % (lx, lx + 24, ly, ly, color))
        out.append('<text x="%d" y="%d">ckptc %s</text>' % (lx + 30, ly + 4, ck))
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>'
                   % (lx, lx + 24, ly + 20, ly + 20, color))
        out.append('<text x="%d" y="%d">PyTorch %s</text>' % (lx + 30, ly + 24, pt))
    out.append('<text x="%d" y="%d" font-size="11" fill="#555">ckptc blocks+offload: device arena (its host pool '
               'excluded); PyTorch save_on_cpu on the CPU keeps the tensors where they are.</text>' % (ml, ly + 50))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# ---------------------------------------------------------------------------------------------
# Planner scaling
# ---------------------------------------------------------------------------------------------

def planner_scaling(ck, sizes, budget_cap):
    gdir = os.path.join(WORK, "graphs")
    rows = []
    for kind in ("mlp", "tf"):
        for n in sizes:
            path = os.path.join(gdir, "%s_%d.onnx" % (kind, n))
            r, _ = run_cmd([sys.executable, os.path.join(HERE, "gen_graphs.py"), gdir, kind, str(n)])
            onnx_nodes = int(r.stdout.split()[-2]) if r.returncode == 0 else None
            none_peak = None
            for pol in ["none", "blocks", "sqrt", "blocks --offload", "budget"]:
                args = [ck, path, "--plan-only", "--optimizer=sgd"]
                if pol == "budget":
                    if none_peak is None:
                        continue
                    args.append("--checkpoint=budget:%d" % budget_for(none_peak, 0.5))
                else:
                    args += ["--checkpoint=" + pol.split()[0]] + pol.split()[1:]
                cap = budget_cap if pol == "budget" else 600
                # timeout(1) stops ckptc itself (killing /usr/bin/time would leave it running)
                rr, others = timed_run(["/usr/bin/time", "-f", "%e %M %U %S", "timeout", "-s", "KILL", str(cap)] + args, None,
                                       tries=1 if pol == "budget" else None)
                if rr.returncode in (124, 137) or "Command terminated by signal 9" in rr.stderr:
                    rows.append(dict(kind=kind, target=n, onnx_nodes=onnx_nodes, policy=pol, timeout=cap))
                    log("planner %s %d %-16s > %d s (stopped)" % (kind, n, pol, cap))
                    continue
                tl = rr.stderr.strip().splitlines()[-1].split()
                row = dict(kind=kind, target=n, onnx_nodes=onnx_nodes, policy=pol, seconds=float(tl[0]),
                           max_rss_kb=int(tl[1]), cpu_seconds=float(tl[2]) + float(tl[3]), rc=rr.returncode,
                           others_cores=others)
                m = re.search(r"planned peak (\d+) bytes", rr.stdout)
                row["planned_peak"] = int(m.group(1)) if m else None
                m = re.search(r"peak at step \d+ of (\d+)", rr.stdout)
                row["ir_nodes"] = int(m.group(1)) if m else None
                m = re.search(r"at the peak: saved activations (\d+), transient (\d+)", rr.stdout)
                if pol == "none" and row["planned_peak"]:
                    none_peak = (row["planned_peak"], int(m.group(1)) + int(m.group(2)) if m else 0)
                m = re.search(r"recomputing (\d+) of (\d+) segments", rr.stdout)
                if m:
                    row["budget_note"] = "recomputes %s of %s segments" % m.groups()
                if rr.returncode:
                    row["error"] = (rr.stderr.strip().splitlines() or [""])[0][:160]
                rows.append(row)
                log("planner %s %6d %-16s %7.2f s (cpu %.2f s) %7.0f MB%s" % (kind, n, pol, row["seconds"], row["cpu_seconds"],
                                                                   row["max_rss_kb"] / 1024,
                                                                   "" if not rr.returncode else "  exit %d" % rr.returncode))
    return rows


def budget_for(none, frac):
    """none = (planned peak, activation bytes at the peak): keep frac of the activations."""
    peak, act = none
    return int(peak - (1.0 - frac) * act)


def write_planner_report(rows, meta, path):
    lines = ["# Planner scaling: `ckptc --plan-only` on synthetic graphs", ""]
    w = lines.append
    w("Generated by `/usr/bin/python3 bench/run.py%s` on %s (%s, %d cores; ckptc %s, %s build)." % (
        meta["argv"], meta["date"], meta["machine"]["cpu"], meta["machine"]["cores"], meta["commit"], meta["build_type"]))
    w("")
    w("Graphs from bench/gen_graphs.py: **mlp** = residual MLP, 4 ONNX nodes per layer (Gemm, Relu, "
      "Gemm, Add; width 16, batch 64); **tf** = transformer-like stack, 26 ONNX nodes per layer "
      "(LayerNorm, q/k/v MatMul+Add, Reshape/Transpose, attention MatMul/Mul/Softmax/MatMul, "
      "projection, LayerNorm, a ReLU MLP; width 16, 2 heads, T 16, batch 2), names scoped "
      "`/layers.N/...`. Tiny widths: the planner's work depends on the number of nodes and buffers, "
      "not their sizes. Time = wall seconds of the whole `ckptc MODEL --plan-only --optimizer=sgd "
      "--checkpoint=P` process (loading the ONNX file included), from /usr/bin/time, and its CPU "
      "seconds (user + system: what the process itself used, less sensitive to other load on the "
      "machine); IR nodes = the "
      "training step's nodes (forward, recompute, backward, update). `blocks --offload` plans twice "
      "(ckptc keeps the checkpoints on the device when offload would not lower the peak). `budget` = "
      "none's planned peak minus half its activation bytes at the peak; it plans the whole model "
      "at most 9 times (none, all segments recomputed, then a bisection over prefixes of the "
      "candidates), stopped after %d s." % meta["budget_cap"])
    w("")
    w("| graph | ONNX nodes | IR nodes | policy | seconds | CPU seconds | max RSS MB | planned peak bytes | note |")
    w("|---|---:|---:|---|---:|---:|---:|---:|---|")
    for r in rows:
        if "timeout" in r:
            w("| %s | %s | | %s | > %d (stopped) | | | | |" % (r["kind"], r["onnx_nodes"], r["policy"], r["timeout"]))
            continue
        w("| %s | %s | %s | %s | %.2f | %.2f | %.0f | %s | %s |" % (
            r["kind"], r["onnx_nodes"], r.get("ir_nodes") or "", r["policy"], r["seconds"], r.get("cpu_seconds", 0),
            r["max_rss_kb"] / 1024,
            r.get("planned_peak") or "", r.get("error") or r.get("budget_note") or ""))
    w("")
    for n, limit in ((10000, 1.0), (100000, 10.0)):
        t = [r["seconds"] for r in rows if r["target"] == n and r["policy"] in ("none", "blocks", "sqrt") and "seconds" in r]
        tc = [r.get("cpu_seconds", 0) for r in rows if r["target"] == n and r["policy"] in ("none", "blocks", "sqrt") and "seconds" in r]
        to = [r["seconds"] for r in rows if r["target"] == n and r["policy"] == "blocks --offload" and "seconds" in r]
        tb = [r["seconds"] for r in rows if r["target"] == n and r["policy"] == "budget" and "seconds" in r]
        if t:
            w("Goal: %dk nodes planned in <= %g s (none, blocks, sqrt): slowest %.2f s wall, %.2f s CPU: %s.%s%s" % (
                n // 1000, limit, max(t), max(tc), "met" if max(t) <= limit else "**missed**",
                " With --offload (two plans): %.2f s." % max(to) if to else "",
                " budget (up to 9 plans): %.2f s." % max(tb) if tb else ""))
            w("")
    w("")
    w(meta.get("planner_note", ""))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


PLANNER_NOTE = """\
## What was super-linear, and what changed

Before (this machine, same graphs): `--plan-only --checkpoint=none` took 1.3 s at 1k ONNX nodes,
137 s (mlp) and 217 s (tf) at 10k; 100k was out of reach. perf: 80% in qsort under the placement.

- **Placement** (passes/plan.c): each buffer collected every placed buffer whose lifetime overlaps
  its own and sorted them by offset: O(n^2 log n) per order, four orders plus a compaction pass.
  The saved activations all overlap each other, so nothing prunes. Now: up to 8192 buffers, the
  same four-order search and compaction read a segment tree over the steps that keeps, per node,
  the union of the placed address ranges as a short list of disjoint intervals (same gaps, same
  choices: plans are byte-identical to before on every sample, every bench model and the 1k
  graphs, with every policy, both optimizers and --offload). Above 8192 buffers, one order
  (program order) as a linear scan with the free gaps in two treaps, O(n log n); it makes exactly
  the choices the old program-order pass made (checked on graphs up to 44k buffers), and on the
  10k-node graphs it came within 0.3% of the four-order search's peak (the best of the four in 3
  of 6 cases). The search itself stays super-linear in the number of free gaps a lifetime sees
  (residual stacks leave one per layer), which is why it is capped.
- **Live bytes per step** (plan.c): every buffer added its size to every step of its lifetime,
  O(n x lifetime); now differences at both ends and one prefix sum.
- **Checkpoint pass** (passes/checkpoint.c): cloning a segment scanned the whole forward for its
  nodes, and recording it rescanned the forward and re-allocated the segment array (O(segments^2)
  bytes: 150 MB at 2,500 segments); the checkpoint de-duplication compared every clone input with
  every earlier one; unscoped nodes looked for the nearest scoped ones by rescanning. Now
  per-segment node lists, one allocation, value stamps and a precomputed next-scoped index.
- **`budget:SIZE`** (cli/ckptc.c): it reloaded and re-planned the whole model once per candidate
  segment, O(segments x plan): 110 s for the 1k-node MLP (250 segments), hours at 10k. Now the
  recompute set is a prefix of the candidates (by bytes freed per FLOP), the shortest that fits,
  found by a byte-count guess and bisection: at most 9 full plans (same plan as before on the 1k
  MLP: 176 of 250 segments). Each plan still reloads the file (no graph copy yet).
"""


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        name, variant, steps, warmup, out = sys.argv[2:7]
        torch_worker(name, variant, int(steps), int(warmup), out)
        return 0
    ap = argparse.ArgumentParser(description="ckptc vs PyTorch CPU benchmark and planner scaling")
    ap.add_argument("--models", default=",".join(ALL_MODELS))
    ap.add_argument("--quick", action="store_true", help="mlp16, gpt4, resnet18; no planner scaling")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="ckptc build directory (default build/)")
    ap.add_argument("--only", choices=["cpu", "planner"])
    ap.add_argument("--tries", type=int, default=3,
                    help="runs per measurement while other processes use the machine (the least disturbed is kept)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure each model's variants this many times, round-robin (compiled once); a step time is "
                         "then the median of the rounds' medians, so that a host whose speed drifts over minutes "
                         "slows every variant alike")
    ap.add_argument("--threads", type=int, default=1, help="threads on both sides (PyTorch, OpenBLAS, ckptc --threads)")
    ap.add_argument("--variants", default="", help="only these variants, comma-separated (e.g. none,eager), or semicolon-separated when one is a combination (none;blocks;blocks,selective); default all")
    ap.add_argument("--planner-sizes", default="1000,10000,100000")
    ap.add_argument("--budget-cap", type=int, default=60, help="seconds before a planner budget run is stopped")
    ap.add_argument("--out", default="cpu-latest",
                    help="name of the CPU results in bench/results/ (NAME.md, NAME.json, NAME-peak-vs-depth.svg unless "
                         "cpu-latest); another name keeps cpu-latest for a partial or differently-machined run")
    a = ap.parse_args()
    global TRIES, THREADS
    TRIES = max(1, a.tries)
    THREADS = max(1, a.threads)
    only = set(v for v in a.variants.split(";" if ";" in a.variants else ",") if v)
    if "none" not in only and only:
        only.add("none")  # the other variants' budgets and ratios are none's
    ck = os.path.join(os.path.abspath(a.build), "ckptc")
    if not os.path.exists(ck):
        print("no %s: build first (cmake -B build -S . -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2)" % ck,
              file=sys.stderr)
        return 2
    models = QUICK_MODELS if a.quick else a.models.split(",")
    t_start = time.time()
    bt, commit = ckptc_build_info(os.path.abspath(a.build))
    import torch  # noqa: F401  (version only; the measurements run in child processes)
    argv = "".join(" " + x for x in sys.argv[1:])
    meta = dict(argv=argv, date=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), machine=machine(),
                build_type=bt, commit=commit, torch=torch.__version__, steps=a.steps, warmup=a.warmup, threads=THREADS,
                models=models, budget_cap=a.budget_cap, rounds=a.rounds)
    os.makedirs(RESULTS, exist_ok=True)
    os.makedirs(WORK, exist_ok=True)
    if a.only != "planner":
        missing = [m for m in models if not os.path.exists(os.path.join(MODELS, m + ".json"))]
        if missing:
            log("exporting %s" % ", ".join(missing))
            subprocess.run([sys.executable, os.path.join(HERE, "export.py")] + missing, check=True)
        memtrack = build_memtrack()
        meta["memtrack"] = bool(memtrack)
        meta["sgemm"] = sgemm_rates()
        log("sgemm alone: %s" % meta["sgemm"])
        meta["sgemm_onednn"] = sgemm_rates("onednn")
        log("oneDNN sgemm alone: %s" % meta["sgemm_onednn"])
        base = subprocess.run([sys.executable, "-c", "import torch,sys; sys.stdout.write(open('/proc/self/status').read())"],
                              stdout=subprocess.PIPE, text=True, env=env1()).stdout
        m = re.search(r"VmRSS:\s+(\d+)", base)
        meta["torch_base_mib"] = "%.0f" % (int(m.group(1)) / 1024) if m else "?"
        results = []
        for name in models:
            none = summarize(ckptc_variant(ck, name, "none", a.steps), a.warmup)
            results.append(none)
            log_row(none)
            act = none.get("activation_bytes")
            for v in CK_VARIANTS[1:]:
                if only and v not in only:
                    continue
                budget = None
                if v.startswith("budget"):
                    if "error" in none:
                        continue
                    budget = budget_for((none["planned_peak_bytes"], act), 0.5 if v == "budget50" else 0.25)
                r = summarize(ckptc_variant(ck, name, v, a.steps, budget), a.warmup)
                results.append(r)
                log_row(r)
            for v in PT_VARIANTS:
                if only and v not in only:
                    continue
                r = summarize(torch_variant(name, v, a.steps, a.warmup, memtrack), a.warmup)
                results.append(r)
                log_row(r)
            mine = [r for r in results if r["model"] == name]
            for k in range(1, a.rounds):  # the model's variants again, in the same order
                for r in mine:
                    another_round(r, a.warmup, a.steps, memtrack)
                log("%s round %d: %s" % (name, k + 1, "  ".join("%s %s %.1f" % (r["system"], r["variant"], r["round_medians_s"][-1] * 1e3)
                                                             for r in mine if "error" not in r)))
            if a.rounds > 1:
                for r in mine:
                    log_row(r)
        meta["wall_seconds"] = time.time() - t_start
        svg = "peak-vs-depth.svg" if a.out == "cpu-latest" else a.out + "-peak-vs-depth.svg"
        write_cpu_report(results, meta, os.path.join(RESULTS, a.out + ".md"), os.path.join(RESULTS, a.out + ".json"),
                         os.path.join(RESULTS, svg))
        log("wrote bench/results/%s.md, %s.json, %s" % (a.out, a.out, svg))
    if a.only != "cpu" and not a.quick:
        sizes = [int(s) for s in a.planner_sizes.split(",")]
        rows = planner_scaling(ck, sizes, a.budget_cap)
        meta["planner_note"] = PLANNER_NOTE
        write_planner_report(rows, meta, os.path.join(RESULTS, "planner-scaling.md"))
        log("wrote bench/results/planner-scaling.md")
    log("total %.0f s" % (time.time() - t_start))
    return 0


def log_row(r):
    if "error" in r:
        log("%-8s %-8s %-18s ERROR %s" % (r["model"], r["system"], r["variant"], r["error"][:150]))
        return
    log("%-8s %-8s %-18s peak %8.1f MiB  process %8.1f MiB  step %8.1f ms (p90 %8.1f)  loss %.6f" % (
        r["model"], r["system"], r["variant"], r["step_peak_bytes"] / MiB, (r.get("process_hwm_bytes") or 0) / MiB,
        r["median_s"] * 1e3, r["p90_s"] * 1e3, r["losses"][0]))


if __name__ == "__main__":
    sys.exit(main())
