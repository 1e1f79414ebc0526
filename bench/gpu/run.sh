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
#   3. the offload figures of one run (exposed copy time, GB/s, device memory from cuMemGetInfo).
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
echo "ok: bench/gpu/run.sh finished"
