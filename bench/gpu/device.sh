#!/bin/bash
# bench/gpu/device.sh — everything one device call runs on a lent GPU machine, from .gpukit/.
#
#   bench/gpu/kit.sh                     (here: builds and packs .gpukit/)
#   device run, carry [".gpukit"]:  bash bench/gpu/device.sh [PHASES]
#
# PHASES (default "parity bench:gpt2s bench:resnet18"): parity = bench/gpu/run.sh (every sample CUDA
# vs CPU and every policy's bits vs train on the GPU, the kernel cache, the gpt4 offload summary);
# bench:NAME = bench/gpu/compare.py on NAME (ckptc against PyTorch on the same GPU); profile:NAME[:FLAGS]
# = one trainer of NAME with --profile (time per kind of node on the device). Each phase runs
# under its own time limit (CK_GPU_PARITY_S, CK_GPU_BENCH_S) so that one hang leaves the others'
# figures. Everything lands in $OUT (the device tool's folder; else .gpukit/out): device.log, run.sh's
# results.md and parity.md, NAME.md and NAME.json per bench, logs.tar.gz (the trainers' outputs).
set -u
cd "$(dirname "$0")/../.."
R=$PWD
K=$R/.gpukit
O=${OUT:-$K/out}
mkdir -p "$O" "$K/work"
exec > >(tee "$O/device.log") 2>&1
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0)) s] $*"; }
phases=${*:-parity bench:gpt2s bench:resnet18}

say "the machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.max.sm,temperature.gpu \
    --format=csv 2>&1 | head -3
echo "cpus $(nproc); $(cc --version 2>&1 | head -1); $("${PYTHON:-python3}" -V 2>&1); $(uname -r)"
[ -d "$K/build" ] || { echo "device.sh: no .gpukit/build: run bench/gpu/kit.sh and carry .gpukit"; exit 2; }
command -v cc >/dev/null || { echo "device.sh: no C compiler here: the trainers cannot be built"; exit 2; }

# the packed Debian libraries: for ckptc (loader path) and for linking the trainers (-lopenblas)
G=/tmp/ckptc-gpukit
mkdir -p $G/lib && tar -C $G/lib -xJf "$K/libs.tar.xz" ||
    python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$K/libs.tar.xz" $G/lib
export LD_LIBRARY_PATH=$G/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} LIBRARY_PATH=$G/lib
# the generated Makefiles name this checkout's paths as they were here: point them at the copy; no
# -Werror (this machine's compiler is newer than Debian 12's and may warn where that one did not)
export CKRT_INCLUDE=$R/runtime CKRT_LIB=$K/build/runtime MAKEFLAGS="CFLAGS=-O2"
PY=${PYTHON:-python3} # the GPU machine's python3 holds PyTorch and NumPy
export PYTHON=$PY PYTHONUNBUFFERED=1

# NVRTC and cuBLAS (major 13): the toolkit's folder, else the pip wheels PyTorch brought
find_lib() {
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $("${PYTHON:-python3}" -c 'import site
for p in site.getsitepackages(): print(p + "/nvidia/cu13/lib"); print(p + "/nvidia/cuda_nvrtc/lib"); print(p + "/nvidia/cublas/lib"); print(p + "/nvidia/cudnn/lib")' 2>/dev/null); do
        [ -e "$d/$1" ] && { echo "$d"; return; }
    done
    ldconfig -p | awk -v n="$1" '$1 == n { sub("/[^/]*$", "", $NF); print $NF; exit }'
}
nv=$(find_lib libnvrtc.so.13)
cb=$(find_lib libcublas.so.13)
echo "NVRTC in ${nv:-(not found)}; cuBLAS in ${cb:-(not found)}; driver: $(ldconfig -p | grep -m1 'libcuda.so.1 ' | sed 's/.*=> //')"
[ -n "$nv" ] && [ -z "${CKRT_CUDA_LIBDIR:-}" ] && export CKRT_CUDA_LIBDIR=$nv # (a preset one wins)
[ -n "$cb" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cb
# cuDNN (major 9) for the convolutions: the toolkit's, else PyTorch's wheel (CKRT_CUDNN names it)
dn=$(find_lib libcudnn.so.9)
echo "cuDNN in ${dn:-(not found: convolutions by im2col + cuBLAS)}"
[ -n "$dn" ] && [ -z "${CKRT_CUDNN:-}" ] && export CKRT_CUDNN=$dn/libcudnn.so.9 LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dn
"$K/build/ckptc" --version || { echo "device.sh: ckptc does not start here (above)"; exit 2; }

status=0
for ph in $phases; do
    case $ph in
    parity)
        say "bench/gpu/run.sh: parity, kernel cache, offload summary"
        CK_GPU_STEP_TIMEOUT=${CK_GPU_PARITY_S:-170} timeout $((${CK_GPU_PARITY_S:-170} + 60)) bench/gpu/run.sh "$K/build" || status=1
        cp "$K/build/gpu-bench/results.md" "$O/results.md" 2>/dev/null
        cp "$K/build/gpu-bench/parity/parity.md" "$O/parity.md" 2>/dev/null
        ;;
    bench:*)
        n=${ph#bench:}
        say "bench/gpu/compare.py $n: weights"
        "$PY" bench/gpu/models.py weights "$K/models" "$n" || { status=1; continue; }
        say "bench/gpu/compare.py $n"
        timeout "${CK_GPU_BENCH_S:-200}" "$PY" bench/gpu/compare.py "$K/build/ckptc" "$K/models" "$n" "$K/work" \
            --steps "${CK_GPU_STEPS:-8}" --warmup 2 --timeout "${CK_GPU_VARIANT_S:-90}" || status=1
        cp "$K/work/$n.md" "$K/work/$n.json" "$O/" 2>/dev/null
        rm -f "$K/models/$n.data" "$K"/work/"$n"-*/weights.bin
        ;;
    profile:*) # profile:NAME[:FLAGS] (FLAGS: ckptc flags joined by '+', e.g. --checkpoint=blocks)
        spec=${ph#profile:}
        n=${spec%%:*}
        fl=""
        [ "$spec" != "$n" ] && fl=$(echo "${spec#*:}" | tr '+' ' ')
        tag=$n$(echo "$fl" | tr -c 'a-z0-9\n' '-' | tr -s '-')
        say "trainer --profile: $n $fl"
        [ -f "$K/models/$n.data" ] || "$PY" bench/gpu/models.py weights "$K/models" "$n" || { status=1; continue; }
        d=$K/work/prof-$tag
        b=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['input_shape'][0])" "$K/models/$n.json")
        "$K/build/ckptc" "$K/models/$n.onnx" --dim batch="$b" $fl -o "$d" >/dev/null && make -s -C "$d" &&
            timeout 120 "$d/trainer" --device cuda --steps "${CK_GPU_PROFILE_STEPS:-4}" --profile "$O/prof-$tag.txt" | tail -4 ||
            status=1
        head -40 "$O/prof-$tag.txt"
        rm -f "$d/weights.bin"
        ;;
    *) echo "device.sh: unknown phase $ph" ;;
    esac
done
say "done (status $status)"
tar -C "$K" -czf "$O/logs.tar.gz" --exclude='*.bin' --exclude='*.data' --exclude=trainer --exclude=trainer.c --exclude='*.npy' \
    build/gpu-bench work 2>/dev/null
for f in "$O"/*.md; do echo "== $f"; cat "$f"; done
exit $status
