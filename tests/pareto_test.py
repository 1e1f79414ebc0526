#!/usr/bin/python3
"""pareto_test.py — `ckptc pareto`: the trade-off table and its SVG.

    pareto_test.py CKPTC SAMPLES_DIR WORKDIR

On the gpt and resnet samples: the front's first row is the smallest peak and its last is none's
(equal to `--plan-only`'s planned peak with no checkpointing); down the table the peak rises and
the recompute FLOPs fall; each policy row's peak equals what `--plan-only --checkpoint=POLICY`
plans; the SVG is well-formed XML with one mark per policy. Ends with `N passed, N failed`.
"""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

CKPTC, SAMPLES, WORK = sys.argv[1:4]
os.makedirs(WORK, exist_ok=True)
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)


def planned(model, policy):
    p = subprocess.run([CKPTC, model, "--plan-only", f"--checkpoint={policy}"], capture_output=True, text=True)
    m = re.search(r"planned peak (\d+) bytes", p.stdout)
    return int(m.group(1)) if m else None


for name in ["gpt", "resnet"]:
    model = os.path.join(SAMPLES, f"{name}.onnx")
    svg = os.path.join(WORK, f"{name}.svg")
    p = subprocess.run([CKPTC, "pareto", model, "--svg", svg], capture_output=True, text=True)
    check(f"{name}: ckptc pareto exits 0", p.returncode == 0, p.stdout + p.stderr)
    if p.returncode != 0:
        continue
    front, pols = [], {}
    section = "front"
    for line in p.stdout.splitlines():
        if line.startswith("policies:"):
            section = "policies"
        m = re.match(r"\s+(\d+)\s+(\d+)\s+[\d.]+%\s+(.*)", line)
        if not m:
            continue
        if section == "front":
            front.append((int(m.group(1)), int(m.group(2))))
        else:
            pols[m.group(3).replace("--checkpoint=", "")] = (int(m.group(1)), int(m.group(2)))
    none = planned(model, "none")
    check(f"{name}: the front ends at none's peak {none} with no recompute", bool(front) and front[-1] == (none, 0), str(front[-3:]))
    check(f"{name}: down the front the peak rises and the recompute falls ({len(front)} rows)",
          all(a[0] < b[0] and a[1] > b[1] for a, b in zip(front, front[1:])), str(front))
    for pol in ["none", "selective", "blocks", "blocks,selective", "sqrt"]:
        want = planned(model, pol)
        check(f"{name}: {pol} row plans {want}, as --plan-only does", pol in pols and pols[pol][0] == want, str(pols.get(pol)))
    try:
        root = ET.parse(svg).getroot()
        texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
        check(f"{name}: the SVG parses and names every policy", all(pol in texts for pol in pols), str(texts))
    except ET.ParseError as e:
        check(f"{name}: the SVG parses", False, str(e))

failed = results.count(False)
print(f"{len(results) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
