#!/bin/sh
# bench/gpu/run.sh — the CUDA backend on a machine with a GPU, in under 5 minutes.
#
#   bench/gpu/run.sh [--emulate] [BUILD_DIR]      (default build-gpu)
#
# Uses BUILD_DIR as it is when it holds a built ckptc (a machine without the build's packages can
# be handed one), else configures and builds it there, first checking that what the build needs
# is installed (it says which packages are missing and stops: a GPU machine may have no registry).
# Then, each step under a timeout (CK_GPU_STEP_TIMEOUT, default 600 s), its result appended to
# BUILD_DIR/gpu-bench/results.md as soon as it ends, so a later failure or hang keeps the figures:
#   1. every sample (mlp, gpt, bert, resnet, gpt_deep, gpt4; plain and --checkpoint=blocks
#      --offload) runs with dropout on --device cuda and on --device cpu: the gradients of step 1
#      and the losses of 3 steps must agree within 1e-4 relative, planned == measured peak
#      (tests/cuda_test.py gpu; its table also goes to gpu-bench/parity/parity.md row by row);
#   2. the NVRTC cache: the gpt4 trainer started twice, the second start must skip compilation;
#   3. the offload figures of one run (exposed copy time, GB/s, device memory from cuMemGetInfo);
#   4. data parallel over NCCL, 2 ranks on 2 GPUs (NCCL refuses two ranks on one GPU: with fewer
#      GPUs the step says so and is skipped), with the buckets overlapped and not: the two
#      schedules must give the same bits, and the GPU ranks must agree with 2 CPU ranks within
#      1e-4; the comm figures go to gpu-bench/dp.md for bench/results/.
# Only "no GPU at all" skips (exit 77); any other failure is a FAIL with its message, and the
# script goes on with the next step. Exit 0 when every step passed or was skipped for a stated
# reason, 1 otherwise.
#
# --emulate runs the same steps on this machine's CPU: the programs load tests/fake_cuda.c (built
# in BUILD_DIR/fakecuda by a build with the CUDA toolkit's headers) as their driver, cuBLAS and
# NVRTC. It checks the script and the backend's wiring, not a GPU's numbers or speed (ctest runs
# it as gpu_bench_emu). Python: $PYTHON, else python3 from PATH (a GPU machine's PyTorch and
# NumPy are often not in /usr/bin/python3).
set -u
cd "$(dirname "$0")/../.."
self=bench/gpu/run.sh
if [ "${1:-}" = "--step" ]; then # one step in a process of its own (timeout runs commands, not functions)
    sub=$2
    B=$CK_GPU_B W=$CK_GPU_W PY=$CK_GPU_PY emulate=$CK_GPU_EMULATE
else
    sub=""
    emulate=0
    if [ "${1:-}" = "--emulate" ]; then emulate=1; shift; fi
    B=${1:-build-gpu}
    case $B in /*) ;; *) B=$PWD/$B ;; esac
    W=$B/gpu-bench
    PY=${PYTHON:-python3}
fi
T=${CK_GPU_STEP_TIMEOUT:-600}


# step NAME CMD...: runs CMD under the timeout, prints its output, records the result at once
step() {
    name=$1
    shift
    echo "== $name"
    start=$(date +%s)
    timeout "$T" "$self" --step "$@" >"$W/step.log" 2>&1
    rc=$?
    cat "$W/step.log"
    case $rc in
    0) st=PASS ;;
    77) st="$(grep -m1 -o 'SKIP.*' "$W/step.log" || echo SKIP)" ;;
    124) st="FAIL: timed out after $T s"; failed=1 ;;
    *) st="FAIL (exit $rc): $({ grep -m1 'FAIL' "$W/step.log" || tail -n 1 "$W/step.log"; } | cut -c1-200)"; failed=1 ;;
    esac
    echo "| $name | $st | $(($(date +%s) - start)) |" >>"$results"
    return $rc
}

parity() { "$PY" tests/cuda_test.py gpu "$B/ckptc" samples "$W/parity"; }

cache() {
    export XDG_CACHE_HOME="$W/cache-2" # empty: the first start compiles
    "$B/ckptc" samples/gpt4.onnx --dim batch=16 --checkpoint=blocks --offload -o "$W/gpt4" >/dev/null && make -s -C "$W/gpt4" || return 1
    for k in 1 2; do
        s0=$(date +%s.%N)
        "$W/gpt4/trainer" --device cuda --steps 20 --report "$W/gpt4/report$k.json" >"$W/gpt4/out$k.txt" || { cat "$W/gpt4/out$k.txt"; return 1; }
        s1=$(date +%s.%N)
        echo "start $k: $(head -1 "$W/gpt4/out$k.txt"); $(grep -o '"kernel_cache_hit": [a-z]*' "$W/gpt4/report$k.json"), \
$(grep -o '"nvrtc_ms": [0-9.]*' "$W/gpt4/report$k.json"), wall $(awk "BEGIN { printf \"%.2f\", $s1 - $s0 }") s"
    done
    grep -q '"kernel_cache_hit": true' "$W/gpt4/report2.json" || { echo "FAIL: the second start compiled again"; return 1; }
}

summary() { sed -n '/memory (planned)/,$p' "$W/gpt4/out2.txt"; grep -q 'measured peak' "$W/gpt4/out2.txt"; }

gpus() { # how many GPUs the driver reports (0 when none or unknown)
    if [ $emulate = 1 ]; then echo 1; return; fi
    n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    echo "${n:-0}"
}

nccl() {
    if [ "$(gpus)" -lt 2 ]; then echo "SKIP: data parallel over NCCL needs 2 GPUs (NCCL refuses two ranks on one GPU); $(gpus) here"; return 77; fi
    if [ -z "${CKRT_NCCL_LIBRARY:-}" ] && ! ldconfig -p | grep -q 'libnccl\.so\.2'; then # PyTorch's wheels bundle one
        n=$("$PY" -c 'import glob, site
print(next(iter(sorted(f for p in site.getsitepackages() for f in glob.glob(p + "/nvidia/nccl/lib/libnccl.so.2"))), ""))' 2>/dev/null || true)
        if [ -n "$n" ]; then export CKRT_NCCL_LIBRARY="$n"; fi
    fi
    if ! command -v mpirun >/dev/null || [ ! -e "$B/runtime/libckrt_mpi.a" ] ||
       { [ -z "${CKRT_NCCL_LIBRARY:-}" ] && ! ldconfig -p | grep -q 'libnccl\.so\.2'; }; then
        echo "SKIP: needs mpirun, $B/runtime/libckrt_mpi.a (CMake found MPI) and NCCL (libnccl.so.2 or CKRT_NCCL_LIBRARY)"
        return 77
    fi
    export OMPI_MCA_mpi_yield_when_idle=1
    for ov in on off; do
        "$B/ckptc" samples/gpt4.onnx --dim batch=8 --data-parallel --checkpoint=blocks --offload --dp-bucket 256KiB \
            --dp-overlap=$ov --optimizer=sgd -o "$W/dp-$ov" >/dev/null && make -s -C "$W/dp-$ov" || return 1
        for dev in cuda cpu; do
            mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$W/dp-$ov/trainer" --device $dev --steps 5 \
                --seed 3 --dump-grads "$W/dp-$ov/grads-$dev" --report "$W/dp-$ov/$dev.json" >"$W/dp-$ov/$dev.txt" 2>&1 ||
                { cat "$W/dp-$ov/$dev.txt"; return 1; }
        done
    done
    "$PY" - "$W" <<'PY'
import json, os, sys
import numpy as np
W = sys.argv[1]
def grads(d):
    return {f: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d))}
on, off = grads(f"{W}/dp-on/grads-cuda"), grads(f"{W}/dp-off/grads-cuda")
same = all(np.array_equal(on[k], off[k]) for k in on) and set(on) == set(off)
cpu = grads(f"{W}/dp-on/grads-cpu")
err = max(float(np.max(np.abs(on[k].astype(np.float64) - cpu[k])) / max(float(np.max(np.abs(cpu[k]))), 1e-30)) for k in cpu)
rows = []
for ov in ("on", "off"):
    for dev in ("cuda", "cpu"):
        r = json.load(open(f"{W}/dp-{ov}/{dev}.json"))
        d = r["data_parallel"]
        rows.append(f"| {ov} | {dev} | {d['transport']} | {d['buckets_per_step']} | {r['planned_peak_bytes']} | "
                    f"{r['measured_peak_bytes']} | {d['comm_time_ms']:.3f} | {d['sync_wait_ms']:.3f} | {r['step_time_ms']:.2f} |")
text = ["gpt4, per-rank batch 8, 2 ranks on 2 GPUs, blocks + offload, --dp-bucket 256KiB, 5 steps", "",
        "| overlap | device | transport | buckets | planned peak | measured peak | comm ms | wait ms | step ms |",
        "|---|---|---|---|---|---|---|---|---|", *rows, "",
        f"overlap on vs off on the GPU: {'the same bits' if same else 'DIFFERENT BITS'}; GPU vs CPU ranks: max relative "
        f"gradient error {err:.2e}"]
open(f"{W}/dp.md", "w").write("\n".join(text) + "\n")
print("\n".join(text))
if not (same and err <= 1e-4):
    print("FAIL: the overlapped and plain schedules differ, or the GPU ranks are off the CPU ranks")
    sys.exit(1)
PY
}

if [ -n "$sub" ]; then "$sub"; exit $?; fi

# ---------------------------------------------------------------- the build
if [ -x "$B/ckptc" ] && [ -f "$B/runtime/libckrt.a" ]; then
    echo "run.sh: using the build in $B as it is"
else
    missing=""
    for t in cmake make cc pkg-config protoc-c; do command -v $t >/dev/null 2>&1 || missing="$missing $t"; done
    for f in /usr/include/onnx/onnx.proto /usr/local/cuda/include/nvrtc.h /usr/include/check.h; do
        [ -e "$f" ] || missing="$missing $f"
    done
    pkg-config --exists libprotobuf-c 2>/dev/null || missing="$missing libprotobuf-c(pkg-config)"
    if [ -n "$missing" ]; then
        echo "run.sh: cannot build ckptc here, missing:$missing"
        echo "        (Debian: scripts/deps.sh installs them; the CUDA toolkit belongs in /usr/local/cuda) or pass a built BUILD_DIR"
        exit 2
    fi
    cmake -B "$B" -S . -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$B" -j"$(nproc)" >/dev/null ||
        { echo "run.sh: FAIL: the build in $B failed"; exit 1; }
fi
command -v "$PY" >/dev/null 2>&1 && "$PY" -c 'import numpy' 2>/dev/null ||
    { echo "run.sh: FAIL: $PY with NumPy is needed (set PYTHON=/path/to/python3)"; exit 2; }
if [ $emulate = 1 ]; then
    [ -e "$B/fakecuda/libcuda.so.1" ] || { echo "run.sh: --emulate needs $B/fakecuda (a build with the CUDA toolkit's headers)"; exit 2; }
    export CKRT_CUDA_DRIVER="$B/fakecuda/libcuda.so.1" CKRT_CUDA_LIBDIR="$B/fakecuda"
    echo "run.sh: --emulate: the CUDA backend runs on the fake driver in $B/fakecuda (CPU), figures are not a GPU's"
fi
rm -rf "$W" && mkdir -p "$W"
export XDG_CACHE_HOME="$W/cache"
results=$W/results.md
printf '| step | result | seconds |\n|---|---|---|\n' >"$results"
failed=0
export CK_GPU_B="$B" CK_GPU_W="$W" CK_GPU_PY="$PY" CK_GPU_EMULATE="$emulate"

step "1. CUDA vs CPU on every sample (step-1 gradients, 3 losses, dropout on; 1e-4 relative)" parity
if [ $? = 77 ]; then
    if [ $emulate = 1 ]; then echo "run.sh: FAIL: the fake driver was not usable (above)"; exit 1; fi
    echo "run.sh: SKIP: no GPU here (step 1 says why); nothing else can run"
    exit 77
fi
if step "2. kernel cache: two starts of the gpt4 trainer (a fresh cache directory)" cache; then
    step "3. gpt4 (batch 16, blocks + offload) on the GPU: the trainer's summary" summary
else
    echo "| 3. gpt4 summary | not run: step 2 failed | 0 |" >>"$results"
fi
step "4. data parallel over NCCL: 2 ranks on 2 GPUs" nccl
echo
cat "$results"
if [ $failed = 0 ]; then echo "ok: bench/gpu/run.sh finished (results: $results)"; else echo "run.sh: FAILED (results: $results)"; fi
exit $failed
