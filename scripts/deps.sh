#!/bin/sh
# deps.sh — installs the Debian 12 packages ckptc needs, only those that are missing.
#   scripts/deps.sh          build dependencies
#   scripts/deps.sh --test   build + test dependencies (Python's onnx for the ONNX node tests; Open MPI
#                            for the data-parallel tests and libckrt_mpi, which the build makes when found)
# As root it runs apt-get; otherwise it prints the exact command to run and stops.
set -eu
# libc6-dev: the C library's headers and start files (crt1.o), only a Recommends of gcc, which
# --no-install-recommends skips: a minimal Debian 12 (debootstrap minbase, the debian:12 image) lacks them;
# libcjson-dev: `ckptc compare` reads reports with cJSON (the CLI only; generated programs need nothing);
# libdnnl-dev: oneDNN, the GEMMs of libckrt's CPU convolutions (cmake -DCK_DNNL=OFF builds without it)
pkgs="cmake make gcc libc6-dev pkg-config libprotobuf-c-dev protobuf-c-compiler libonnx-dev check libopenblas-dev libcjson-dev"
pkgs="$pkgs libdnnl-dev"
if [ "${1:-}" = "--test" ]; then
    # clang + libclang-rt-14-dev: the libFuzzer smoke test (fuzz/smoke.sh), llvm-14 for its
    # llvm-symbolizer (readable stacks in a finding); valgrind: the memcheck test
    pkgs="$pkgs clang libclang-rt-14-dev llvm-14 valgrind"
    # g++: the CUDA emulations compile each kernels.cu as C++ (without it they used clang's c++)
    pkgs="$pkgs g++"
    pkgs="$pkgs python3 python3-onnx python3-numpy python3-torch openmpi-bin libopenmpi-dev"
    # python3-torchvision: held-out models for the blocks test (tests/blocks_test.py)
    pkgs="$pkgs python3-torchvision"
fi
missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "ckptc: missing Debian packages:$missing" >&2
    echo "install them with:  sudo apt-get update && sudo apt-get install -y$missing" >&2
    exit 1
fi
echo "ckptc: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends $missing
