#!/bin/sh
# build.sh — configures and builds ckptc into build/ (or $CK_BUILD_DIR). Extra args go to cmake.
set -eu
cd "$(dirname "$0")/.."
dir="${CK_BUILD_DIR:-build}"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
