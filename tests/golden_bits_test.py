#!/usr/bin/python3
"""golden_bits_test.py — refactoring changes no bit: every sample, every policy, 3 AdamW steps.

    golden_bits_test.py CKPTC SAMPLES_DIR WORKDIR [--record] [--filter REGEX]

For every bundled sample and every checkpoint policy (none, blocks, sqrt, every:2, blocks
--offload, budget:(none's peak less 1/2, 1/4, ... of its saved
activations, the first that plans), selective, blocks,selective) and --update-at-end, compile, train 3 AdamW steps with
dropout on (--seed 7) and compare the SHA-256 of every --dump-grads / --dump-params file, the
losses' bits and the planned peak against tests/golden_bits.json, recorded before a refactor
(--record rewrites this machine's entry). The selective policies' dumps and losses are compared
with none's recorded bits (recompute must change no bit), their planned peaks with their own.
GEMM results depend on oneDNN's ISA (the reports' gemm: avx512_core on an AVX-512 host, avx2
with ONEDNN_MAX_CPU_ISA=AVX2; OpenBLAS's kernel, its build and CPU core, where oneDNN is absent),
so the file holds one entry per such configuration, keyed "OPENBLAS | GEMM"; recording one keeps
the others (record an AVX2 entry on an AVX-512 host
with ONEDNN_MAX_CPU_ISA=AVX2 in the environment). Under a configuration with no entry the test
says so and skips (exit 77) rather than compare bits it cannot expect.
Ends with `N passed, N failed`.
"""
import argparse
import concurrent.futures
import ctypes
import ctypes.util
import hashlib
import json
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden_bits.json")

ap = argparse.ArgumentParser()
ap.add_argument("ckptc")
ap.add_argument("samples")
ap.add_argument("work")
ap.add_argument("--record", action="store_true")
ap.add_argument("--filter", default="")
ap.add_argument("--jobs", type=int, default=2)
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)

SAMPLES = ["mlp", "gpt", "bert", "resnet", "gpt4"]
POLICIES = ["none", "blocks", "sqrt", "every:2", "blocks --offload", "budget", "none --update-at-end",
            "blocks --offload --update-at-end", "selective", "blocks,selective"]
SAME_AS_NONE = {"selective", "blocks,selective"}  # op-level recompute: none's bits, its own peak


def openblas_id():
    for name in ["libopenblas.so.0", ctypes.util.find_library("openblas") or ""]:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.openblas_get_config.restype = ctypes.c_char_p
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return f"{lib.openblas_get_config().decode()} / core {lib.openblas_get_corename().decode()}"
    return "no libopenblas"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


def one(sample, pol):
    ref = json.load(open(os.path.join(args.samples, f"{sample}.json")))
    d = os.path.join(args.work, f"{sample}-{re.sub('[^a-z0-9]+', '-', pol)}")
    model = os.path.join(args.samples, f"{sample}.onnx")
    dims = []
    for k, v in ref.get("dims", {}).items():
        dims += ["--dim", f"{k}={v}"]
    words = pol.split()
    if words[0] == "budget":
        # a budget below none's peak: the search has to recompute something
        p = run([args.ckptc, model, "--plan-only"] + dims)
        m = re.search(r"planned peak ([0-9]+) bytes", p.stdout)
        a = re.search(r"saved activations ([0-9]+)", p.stdout)
        if not m or not a:
            return (sample, pol, None, f"no planned peak in --plan-only output:\n{(p.stdout + p.stderr)[:1500]}")
        for div in [2, 4, 8, 16]:  # the first that plans
            budget = int(m.group(1)) - int(a.group(1)) // div
            if run([args.ckptc, model, "--plan-only", f"--checkpoint=budget:{budget}"] + dims).returncode == 0:
                break
        words = [f"budget:{budget}"] + words[1:]
    p = run([args.ckptc, model, "-o", d, f"--checkpoint={words[0]}"] + words[1:] + dims)
    if p.returncode != 0:
        return (sample, pol, None, "ckptc: " + p.stderr[:1500])
    p = run(["make", "-s", "-C", d])
    if p.returncode != 0:
        return (sample, pol, None, "make: " + (p.stdout + p.stderr)[:1500])
    files = dict(ref["reference_files"]["inputs"])
    files["labels"] = ref["train_reference"]["labels_file"]
    inp = []
    for k, f in files.items():
        inp += ["--input", f"{k}={os.path.join(args.samples, f)}"]
    for sub in ["grads", "params"]:
        if os.path.isdir(os.path.join(d, sub)):
            for f in os.listdir(os.path.join(d, sub)):
                os.unlink(os.path.join(d, sub, f))
    p = run([os.path.join(d, "trainer")] + inp + ["--steps", "3", "--seed", "7", "--dump-grads", f"{d}/grads",
                                                  "--dump-params", f"{d}/params", "--report", f"{d}/report.json"])
    if p.returncode != 0:
        return (sample, pol, None, "trainer: " + p.stderr[:1500])
    rep = json.load(open(f"{d}/report.json"))
    got = {"losses": [struct.pack("<d", x).hex() for x in rep["losses"]], "planned_peak_bytes": rep["planned_peak_bytes"],
           "measured_peak_bytes": rep["measured_peak_bytes"], "gemm": rep.get("gemm", "?"), "files": {}}
    for sub in ["grads", "params"]:
        for f in sorted(os.listdir(os.path.join(d, sub))):
            got["files"][f"{sub}/{f}"] = hashlib.sha256(open(os.path.join(d, sub, f), "rb").read()).hexdigest()
    return (sample, pol, got, "")


jobs = [(s, p) for s in SAMPLES for p in POLICIES if re.search(args.filter, f"{s} {p}")]
with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
    res = list(ex.map(lambda sp: one(*sp), jobs))

conv = sorted(set(g.pop("gemm") for _, _, g, _ in res if g is not None))
if len(conv) > 1:
    print(f"FAIL: the runs' reports name different convolution GEMMs: {conv}")
    sys.exit(1)
config = f"{openblas_id()} | {conv[0] if conv else '?'}"
golden = json.load(open(GOLDEN)) if os.path.exists(GOLDEN) else {"configs": {}}


def effective(key):
    """The runs of an entry: one entry holds every run; another ("base": that entry) holds only
    its runs that differ from that one's (with oneDNN's ISA, only the convolution samples do)."""
    e = golden["configs"].get(key, {"runs": {}})
    return dict(golden["configs"][e["base"]]["runs"], **e["runs"]) if "base" in e else dict(e["runs"])


passed = failed = 0
if args.record:
    bad = [r for r in res if r[2] is None]
    for s, p, _, err in bad:
        print(f"FAIL {s} --checkpoint={p}: {err}")
    if bad:
        sys.exit(1)
    golden["note"] = ("SHA-256 of --dump-grads/--dump-params after 3 AdamW steps (--seed 7), per configuration "
                      "(OpenBLAS build and core | convolution GEMMs), sample and policy; recorded by "
                      "tests/golden_bits_test.py --record before a refactor")
    runs = effective(config)  # --filter records some runs and keeps the others
    runs.update({f"{s} {p}": g for s, p, g, _ in res})
    full_entries = [k for k, v in sorted(golden["configs"].items()) if "base" not in v]
    base = None if config in full_entries or not full_entries else full_entries[0]
    if base:
        full = golden["configs"][base]["runs"]
        runs = {k: g for k, g in runs.items() if full.get(k) != g}
    golden["configs"][config] = dict({"runs": runs}, **({"base": base} if base else {}))
    json.dump(golden, open(GOLDEN, "w"), indent=1, sort_keys=True)
    print(f"recorded {len(res)} runs in {GOLDEN} ({config}; entries: {len(golden['configs'])})")
    sys.exit(0)

if config not in golden["configs"]:
    print(f"SKIP: no golden bits for '{config}' (recorded: {'; '.join(sorted(golden['configs']))})")
    sys.exit(77)
want = {"runs": effective(config)}
for s, p, got, err in res:
    key = f"{s} {p}"
    name = f"{s} --checkpoint={p}"
    if got is None:
        print(f"FAIL {name}: {err}")
        failed += 1
        continue
    w = want["runs"].get(key)
    if w is None:
        print(f"FAIL {name}: not in {GOLDEN} (run --record)")
        failed += 1
        continue
    problems = []
    if p in SAME_AS_NONE:  # the bits are none's; only the peak is this policy's own
        w = dict(want["runs"][f"{s} none"], planned_peak_bytes=w["planned_peak_bytes"])
    if got["losses"] != w["losses"]:
        problems.append(f"losses {got['losses']} vs {w['losses']}")
    if got["planned_peak_bytes"] != w["planned_peak_bytes"]:
        problems.append(f"planned peak {got['planned_peak_bytes']} vs {w['planned_peak_bytes']}")
    if got["measured_peak_bytes"] != got["planned_peak_bytes"]:
        problems.append(f"measured peak {got['measured_peak_bytes']} != planned {got['planned_peak_bytes']}")
    diff = sorted(k for k in set(w["files"]) | set(got["files"]) if w["files"].get(k) != got["files"].get(k))
    if diff:
        problems.append(f"{len(diff)} dump files differ: {diff[:6]}")
    if problems:
        print(f"FAIL {name}: " + "; ".join(problems))
        failed += 1
    else:
        print(f"ok   {name}: {len(got['files'])} files, peak {got['planned_peak_bytes']}")
        passed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
