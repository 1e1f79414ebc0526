#!/bin/sh
# bench/gpu/run.sh — the CUDA backend on a machine with a GPU, in under 5 minutes.
#
# Builds ckptc and libckrt with the CUDA backend (needs the CUDA toolkit in /usr/local/cuda and a
# driver), then:
#   1. every sample (mlp, gpt, bert, resnet, gpt_deep, gpt4; plain and --checkpoint=blocks
#      --offload) runs with dropout on --device cuda and on --device cpu: the gradients of step 1
#      and the losses of 3 steps must agree within 1e-4 relative; a table of losses, errors,
#      planned and measured peaks and step times (tests/cuda_test.py gpu);
#   2. the NVRTC cache: the gpt4 trainer started twice, the second start must skip compilation;
#   3. the offload figures of one run (exposed copy time, GB/s, device memory from cuMemGetInfo);
#   4. data parallel over NCCL (when mpirun, libckrt_mpi and libnccl.so.2 are there): gpt4 on 2
#      ranks sharing the GPU (so NCCL runs over one device; say so when recording), with the
#      buckets overlapped and not: the two schedules must give the same bits, and the GPU ranks
#      must agree with 2 CPU ranks within 1e-4; the comm figures go to $W/dp.md for
#      bench/results/.
# Prints everything; exits non-zero on a mismatch. Usage: bench/gpu/run.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/../.."
B=${1:-build-gpu}
W=$B/gpu-bench
test -e /usr/local/cuda/include/nvrtc.h || { echo "run.sh: no CUDA toolkit in /usr/local/cuda"; exit 2; }
cmake -B "$B" -S . -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j"$(nproc)" >/dev/null
rm -rf "$W" && mkdir -p "$W"

echo "== 1. CUDA vs CPU on every sample (step-1 gradients, 3 losses, dropout on; tolerance 1e-4 relative)"
"${PYTHON:-/usr/bin/python3}" tests/cuda_test.py gpu "$B/ckptc" samples "$W/parity"

echo "== 2. kernel cache: two starts of the gpt4 trainer (a fresh cache directory)"
"$B/ckptc" samples/gpt4.onnx --dim batch=16 --checkpoint=blocks --offload -o "$W/gpt4" >/dev/null
make -s -C "$W/gpt4"
export XDG_CACHE_HOME="$W/cache"
for k in 1 2; do
    start=$(date +%s.%N)
    "$W/gpt4/trainer" --device cuda --steps 20 --report "$W/gpt4/report$k.json" >"$W/gpt4/out$k.txt"
    end=$(date +%s.%N)
    echo "start $k: $(head -1 "$W/gpt4/out$k.txt"); $(grep -o '"kernel_cache_hit": [a-z]*' "$W/gpt4/report$k.json"), \
$(grep -o '"nvrtc_ms": [0-9.]*' "$W/gpt4/report$k.json"), wall $(awk "BEGIN { printf \"%.2f\", $end - $start }") s"
done
grep -q '"kernel_cache_hit": true' "$W/gpt4/report2.json" || { echo "FAIL: the second start compiled again"; exit 1; }

echo "== 3. gpt4 (batch 16, blocks + offload) on the GPU: the trainer's summary"
sed -n '/memory (planned)/,$p' "$W/gpt4/out2.txt"
echo "== 4. data parallel over NCCL: 2 ranks sharing the GPU"
if [ -z "${CKRT_NCCL_LIBRARY:-}" ] && ! ldconfig -p | grep -q 'libnccl\.so\.2'; then # PyTorch's wheels bundle one
    n=$("${PYTHON:-/usr/bin/python3}" -c 'import glob, site
print(next(iter(sorted(f for p in site.getsitepackages() for f in glob.glob(p + "/nvidia/nccl/lib/libnccl.so.2"))), ""))' \
        2>/dev/null || true)
    if [ -n "$n" ]; then export CKRT_NCCL_LIBRARY="$n"; fi
fi
if command -v mpirun >/dev/null && [ -e "$B/runtime/libckrt_mpi.a" ] && \
   { [ -n "${CKRT_NCCL_LIBRARY:-}" ] || ldconfig -p | grep -q 'libnccl\.so\.2'; }; then
    export OMPI_MCA_mpi_yield_when_idle=1
    for ov in on off; do
        "$B/ckptc" samples/gpt4.onnx --dim batch=8 --data-parallel --checkpoint=blocks --offload --dp-bucket 256KiB \
            --dp-overlap=$ov --optimizer=sgd -o "$W/dp-$ov" >/dev/null
        make -s -C "$W/dp-$ov"
        for dev in cuda cpu; do
            mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$W/dp-$ov/trainer" --device $dev --steps 5 \
                --seed 3 --dump-grads "$W/dp-$ov/grads-$dev" --report "$W/dp-$ov/$dev.json" >"$W/dp-$ov/$dev.txt"
        done
    done
    "${PYTHON:-/usr/bin/python3}" - "$W" <<'PY'
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
text = ["gpt4, per-rank batch 8, 2 ranks sharing one GPU, blocks + offload, --dp-bucket 256KiB, 5 steps", "",
        "| overlap | device | transport | buckets | planned peak | measured peak | comm ms | wait ms | step ms |",
        "|---|---|---|---|---|---|---|---|---|", *rows, "",
        f"overlap on vs off on the GPU: {'the same bits' if same else 'DIFFERENT BITS'}; GPU vs CPU ranks: max relative "
        f"gradient error {err:.2e}"]
open(f"{W}/dp.md", "w").write("\n".join(text) + "\n")
print("\n".join(text))
sys.exit(0 if same and err <= 1e-4 else 1)
PY
else
    echo "skipped: needs mpirun, $B/runtime/libckrt_mpi.a (CMake found MPI) and NCCL (libnccl.so.2 or CKRT_NCCL_LIBRARY)"
fi
echo "ok: bench/gpu/run.sh finished"
