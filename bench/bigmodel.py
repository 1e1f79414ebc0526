#!/usr/bin/python3
"""bench/bigmodel.py — ckptc's memory and time on a model whose weights outweigh everything else.

    /usr/bin/python3 bench/bigmodel.py [--build build] [--layers 16] [--width 8192] [--batch 4]
        [--work DIR] [--baseline OTHER_CKPTC] [--trainer-layers N] [--reps 2] [--json FILE] [--keep]

Generates an MLP of LAYERS x (MatMul by a WIDTH x WIDTH float32 weight, Tanh), the weights in
ONNX external data (one file, written one layer at a time: the generator holds one weight in
memory, never all of them), then measures, each run in its own process:

  * `ckptc MODEL --loss=mse --optimizer=sgd --plan-only`   peak RSS and wall time
  * `ckptc MODEL --loss=mse --optimizer=sgd -o DIR`        peak RSS and wall time (writes weights.bin)
  * `cp` of the external-data file                          wall time: the yardstick for -o
  * the generated CPU trainer, one step                     peak RSS against its planned arena

Peak RSS is the kernel's ru_maxrss of the child as GNU time reports it (/usr/bin/time -f %M, as
-v's "Maximum resident set size"): heap plus every page of a file mapping the process touched. Wall time is time.monotonic() around the
child. Before every run the script calls sync(), so that no run pays for the dirty pages of the
one before; the files are left in the page cache (the generator just wrote them, and 4 GiB fits
in this machine's RAM), so ckptc and cp both read from memory and write into it. Each
measurement is repeated --reps times; the table shows the median. With --baseline, a second
ckptc (e.g. one built from an older commit) is measured the same way and its weights.bin compared
byte for byte with this build's. CKPTC_STATS=1 makes ckptc print its weight-byte counters
(bytes copied, mapped, left resident, streamed), which the table quotes.

Everything is written under --work (default /tmp/ckptc-bigmodel) and deleted at the end unless
--keep. Figures: bench/results/bigmodel-*.md.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper


def write_model(path, layers, width, batch, seed=0):
    """The model and its external-data file PATH.data; returns the data file's size."""
    rng = np.random.default_rng(seed)
    data_name = os.path.basename(path) + ".data"
    inits, nodes, names, off, h = [], [], [], 0, "x"
    with open(os.path.join(os.path.dirname(path), data_name), "wb") as f:
        for i in range(layers):
            w = rng.standard_normal((width, width), dtype=np.float32)
            w *= np.float32(1.0 / np.sqrt(width))
            name = "layers.%d.weight" % i
            t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[width, width],
                            data_location=TensorProto.EXTERNAL)
            for k, v in (("location", data_name), ("offset", str(off)), ("length", str(w.nbytes))):
                e = t.external_data.add()
                e.key, e.value = k, v
            w.tofile(f)
            off += w.nbytes
            del w
            inits.append(t)
            names.append(name)
            out = "y" if i == layers - 1 else "/layers.%d/out" % i
            nodes.append(helper.make_node("MatMul", [h, name], ["/layers.%d/mm" % i], name="/layers.%d/MatMul" % i))
            nodes.append(helper.make_node("Tanh", ["/layers.%d/mm" % i], [out], name="/layers.%d/Tanh" % i))
            h = out
    g = helper.make_graph(nodes, "bigmlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, width])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="ckptc-bench-bigmodel")
    m.ir_version = 8
    helper.set_model_props(m, {"ckptc.trainable": json.dumps(names)})
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return off


def run_child(cmd, env=None):
    """(exit status, wall seconds, peak RSS bytes, stdout, stderr) of one child; its CPU seconds
    (user + system) go to CPU_S. Peak and CPU time come from GNU time (/usr/bin/time -f): the
    kernel carries a process's ru_maxrss across exec, so a child forked from this Python process
    would report at least Python's own RSS; time is small."""
    os.sync()
    rss_file = "/tmp/ckptc-bench-rss.%d" % os.getpid()
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", rss_file] + cmd, capture_output=True, env=env)
    wall = time.monotonic() - t0
    with open(rss_file) as f:
        rss, user, sys_s = f.read().split()[-3:]
    os.unlink(rss_file)
    CPU_S.append(float(user) + float(sys_s))
    return p.returncode, wall, int(rss) * 1024, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


CPU_S = []  # user + system seconds of each run_child, in order (the last one is the run just made)


def stats_of(err):
    for line in err.splitlines():
        if line.startswith("ckptc: stats:"):
            return {k: int(v) for k, v in (kv.split("=") for kv in line.split(":", 2)[2].split())}
    return {}


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def mib(b):
    return b / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--trainer-layers", type=int, default=0, help="a smaller model for the trainer run (0: the same)")
    ap.add_argument("--work", default="/tmp/ckptc-bigmodel")
    ap.add_argument("--baseline", help="another ckptc binary, measured the same way")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--baseline-reps", type=int, default=1, help="-o runs of the baseline (slow)")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    ckptc = os.path.abspath(os.path.join(a.build, "ckptc"))
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "big.onnx")
    res = {"machine": {"cpu": cpu_name(), "cores": os.cpu_count(), "ram_gib": round(ram_bytes() / 2**30, 1),
                       "kernel": platform.release()},
           "model": {"layers": a.layers, "width": a.width, "batch": a.batch}}
    try:
        t0 = time.monotonic()
        data_bytes = write_model(model, a.layers, a.width, a.batch)
        res["model"].update(data_bytes=data_bytes, generate_s=round(time.monotonic() - t0, 1))
        print("model: %d layers of %dx%d float32, %.0f MiB of external data (written in %.0f s)"
              % (a.layers, a.width, a.width, mib(data_bytes), res["model"]["generate_s"]), flush=True)
        flags = ["--loss=mse", "--optimizer=sgd"]
        env = dict(os.environ, CKPTC_STATS="1")
        builds = [("this build", ckptc)] + ([("baseline", os.path.abspath(a.baseline))] if a.baseline else [])
        res["ckptc"] = {tag: {"plan_only": [], "compile": []} for tag, _ in builds}
        for tag, exe in builds:
            r = res["ckptc"][tag]
            for _ in range(a.reps):
                rc, wall, rss, out, err = run_child([exe, model] + flags + ["--plan-only"], env)
                if rc != 0:
                    sys.exit("%s --plan-only failed (%d):\n%s" % (exe, rc, err))
                r["plan_only"].append({"wall_s": wall, "cpu_s": CPU_S[-1], "rss": rss, "stats": stats_of(err)})
            print("%s: --plan-only %.0f MiB %.2f s" % (tag, mib(med([x["rss"] for x in r["plan_only"]])),
                                                     med([x["wall_s"] for x in r["plan_only"]])), flush=True)
        # cp and -o in turns, so that both see the same state of the machine (page cache, the
        # host's load): times on a shared VM move by 2x from one minute to the next
        res["cp_s"] = []
        for k in range(a.reps):
            dst = os.path.join(a.work, "copy.data")
            rc, wall, rss, out, err = run_child(["cp", model + ".data", dst])
            res["cp_s"].append(wall)
            res.setdefault("cp_cpu_s", []).append(CPU_S[-1])
            os.unlink(dst)
            for tag, exe in builds:
                if tag == "baseline" and k >= a.baseline_reps:
                    continue
                out_dir = os.path.join(a.work, "out-" + tag.replace(" ", "-"))
                shutil.rmtree(out_dir, ignore_errors=True)
                rc, wall, rss, out, err = run_child([exe, model] + flags + ["-o", out_dir], env)
                if rc != 0:
                    sys.exit("%s -o failed (%d):\n%s" % (exe, rc, err))
                res["ckptc"][tag]["compile"].append({"wall_s": wall, "cpu_s": CPU_S[-1], "rss": rss, "stats": stats_of(err),
                                                     "cp_s": res["cp_s"][-1]})
            print("round %d: cp %.2f s; %s" % (k + 1, res["cp_s"][-1], "; ".join(
                "%s -o %.2f s %.0f MiB" % (tag, r["compile"][-1]["wall_s"], mib(r["compile"][-1]["rss"]))
                for tag, r in res["ckptc"].items() if len(r["compile"]) == k + 1)), flush=True)
        for tag, r in res["ckptc"].items():
            r["weights_bin_bytes"] = os.path.getsize(os.path.join(a.work, "out-" + tag.replace(" ", "-"), "weights.bin"))
        if a.baseline:
            same = subprocess.run(["cmp", os.path.join(a.work, "out-this-build", "weights.bin"),
                                   os.path.join(a.work, "out-baseline", "weights.bin")]).returncode == 0
            res["weights_bin_identical_to_baseline"] = same
            shutil.rmtree(os.path.join(a.work, "out-baseline"))
            print("weights.bin identical to the baseline's:", same, flush=True)

        # the trainer: one step of the generated CPU program
        tdir = os.path.join(a.work, "out-this-build")
        if a.trainer_layers and a.trainer_layers != a.layers:
            shutil.rmtree(tdir, ignore_errors=True)
            tmodel = os.path.join(a.work, "trainer.onnx")
            write_model(tmodel, a.trainer_layers, a.width, a.batch)
            subprocess.run([ckptc, tmodel] + flags + ["-o", tdir], check=True, stdout=subprocess.DEVNULL)
            os.unlink(os.path.join(a.work, "big.onnx.data"))
        subprocess.run(["make", "-C", tdir], check=True, stdout=subprocess.DEVNULL)
        arena = json.load(open(os.path.join(tdir, "plan.json")))["arena_bytes"]
        rc, wall, rss, out, err = run_child([os.path.join(tdir, "trainer"), "--steps", "1", "--device", "cpu",
                                             "--report", os.path.join(a.work, "report.json")])
        if rc != 0:
            sys.exit("trainer failed (%d):\n%s%s" % (rc, out, err))
        rep = json.load(open(os.path.join(a.work, "report.json")))
        res["trainer"] = {"layers": a.trainer_layers or a.layers, "arena_bytes": arena, "rss": rss, "wall_s": wall,
                          "measured_peak_bytes": rep.get("measured_peak_bytes"),
                          "planned_peak_bytes": rep.get("planned_peak_bytes")}
        print("trainer (%d layers): RSS %.0f MiB, arena %.0f MiB (RSS/arena %.3f), %.1f s" % (
            res["trainer"]["layers"], mib(rss), mib(arena), rss / arena, wall), flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(a.work, ignore_errors=True)
    print()
    print(table(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


def table(res):
    w = res["model"]["data_bytes"]
    cp = med(res["cp_s"])
    lines = ["| ckptc | command | peak RSS (median) | RSS / weights | wall: median (each run) | / cp in the same round (median) "
             "| CPU user+sys (median) | weight bytes copied | mapped bytes resident at exit |", "|---|---|---|---|---|---|---|---|---|"]
    for tag, r in res["ckptc"].items():
        for key, cmd in (("plan_only", "--plan-only"), ("compile", "-o DIR")):
            xs = r[key]
            rss, wall, st = med([x["rss"] for x in xs]), med([x["wall_s"] for x in xs]), xs[-1]["stats"]
            ratio = med([x["wall_s"] / x["cp_s"] for x in xs]) if key == "compile" else None
            lines.append("| %s | `%s` | %.0f MiB | %.3f | %.2f s (%s) | %s | %.2f s | %s | %s |" % (
                tag, cmd, mib(rss), rss / w, wall, ", ".join("%.2f" % x["wall_s"] for x in xs),
                "%.2f" % ratio if ratio else "", med([x["cpu_s"] for x in xs]),
                st.get("copied_bytes", "n/a"), st.get("resident_bytes", "n/a")))
    lines.append("| | `cp` of the %.0f MiB data file | | | %.2f s (%s) | 1.00 | %.2f s | | |" % (
        mib(w), cp, ", ".join("%.2f" % x for x in res["cp_s"]), med(res["cp_cpu_s"])))
    t = res["trainer"]
    lines.append("")
    lines.append("trainer (%d layers, one step): peak RSS %.0f MiB, planned arena %.0f MiB (measured peak %s bytes): "
                 "RSS / arena = %.3f" % (t["layers"], mib(t["rss"]), mib(t["arena_bytes"]), t["measured_peak_bytes"],
                                          t["rss"] / t["arena_bytes"]))
    return "\n".join(lines)


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def ram_bytes():
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


if __name__ == "__main__":
    main()
