#!/bin/sh
# bench/gpu/kit.sh — packs what a lent GPU machine needs into .gpukit/ (ignored by git), here.
#
#   bench/gpu/kit.sh        then carry .gpukit with the device call, which runs bench/gpu/device.sh
#
# A GPU machine has the CUDA toolkit, a C compiler and PyTorch, but none of the Debian packages the
# build needs (protobuf-c, cJSON, OpenBLAS) and no registry to fetch them from. So ckptc and libckrt
# are built here (Release, CUDA backend, oneDNN off: libdnnl is 100+ MB and the GPU runs no oneDNN;
# the CPU side of the parity check then convolves through OpenBLAS), and the shared libraries ckptc
# and the trainers load are packed beside them (xz: OpenBLAS is 36 MB, 4 MB packed). The trainers
# themselves are compiled there, by ckptc and make, against this libckrt.a. The GPU bench's models
# travel as graphs without weights (bench/gpu/models.py). About 14 MB in all.
set -eu
cd "$(dirname "$0")/../.."
K=.gpukit
B=build-gpu
grep -qx '/.gpukit/' .git/info/exclude 2>/dev/null || echo '/.gpukit/' >>.git/info/exclude
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCK_DNNL=OFF >/dev/null
cmake --build $B -j"$(nproc)" --target ckptc ckrt >/dev/null
[ -f $B/runtime/libckrt.a ] && grep -q 'CKRT_HAVE_CUDA' $B/CMakeCache.txt 2>/dev/null || true
mkdir -p $K/build/runtime
cp $B/ckptc $K/build/ckptc
cp $B/runtime/libckrt.a $K/build/runtime/libckrt.a
nm $K/build/runtime/libckrt.a 2>/dev/null | grep -q ' T ckrt_cuda_compile' ||
    { echo "kit.sh: $B's libckrt has no CUDA backend (is the toolkit in /usr/local/cuda?)"; exit 1; }

# the shared libraries: what ckptc needs (ldd) and what a trainer links (-lopenblas and its needs)
L=$(mktemp -d)
lib() { # lib SONAME [LINKNAME]: the file the loader finds for SONAME, under both names
    f=$(ldconfig -p | awk -v n="$1" '$1 == n && /x86-64/ { print $NF; exit }')
    [ -n "$f" ] || { echo "kit.sh: $1 not found (scripts/deps.sh installs it)"; exit 1; }
    cp -L "$f" "$L/$1"
    if [ -n "${2:-}" ]; then ln -s "$1" "$L/$2"; fi
}
lib libprotobuf-c.so.1
lib libcjson.so.1
lib libopenblas.so.0 libopenblas.so
lib libgfortran.so.5
lib libquadmath.so.0
tar -C "$L" -cJf $K/libs.tar.xz .
rm -rf "$L"

if [ ! -f $K/models/gpt2s.onnx ] || [ ! -f $K/models/resnet18.onnx ]; then
    /usr/bin/python3 bench/gpu/models.py export $K/models gpt2s resnet18 2>&1 | grep -v -i warn
fi
rm -rf $K/models/*.data $K/work $K/out $K/build/gpu-bench # what a local try of device.sh left
du -sh $K
echo "kit.sh: .gpukit ready ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', uncommitted changes'))"
