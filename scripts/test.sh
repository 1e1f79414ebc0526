#!/bin/sh
# test.sh — every test: install what is missing, build, run the unit tests (Check), the CLI
# tests and the ONNX node-test conformance through ctest.
#   scripts/test.sh              build/ and the whole ctest suite, then the fuzz smoke test
#                                (fuzz/smoke.sh: 60 s of libFuzzer over the kept corpus; skipped
#                                with a message when clang + libclang-rt-14-dev are missing)
#   scripts/test.sh --sanitize   the same ctest suite built with AddressSanitizer + UBSan in
#                                build-asan/ (CK_SANITIZE=ON): ckptc, libckrt, the unit tests and
#                                every program the tests generate (the generated Makefile adds the
#                                same flags). Any ASan, LeakSanitizer or UBSan report fails it, even
#                                one from a process whose exit status a test does not look at.
# .ci/run runs both. CK_TEST_JOBS sets ctest's parallelism (default: the number of CPUs).
set -eu
cd "$(dirname "$0")/.."
mode="${1:-}"
case "$mode" in
"" | --sanitize) ;;
*) echo "usage: scripts/test.sh [--sanitize]" >&2; exit 2 ;;
esac
jobs="${CK_TEST_JOBS:-$(nproc)}"
scripts/deps.sh --test
if [ "$mode" = "" ]; then
    scripts/build.sh
    (cd build && ctest --output-on-failure -j"$jobs")
    fuzz/smoke.sh
    exit 0
fi

dir=build-asan
start=$(date +%s)
# CPU only (CK_CUDA=OFF): the CUDA backend needs a GPU to run, and NVIDIA's uninstrumented
# libraries (cuBLAS alone is hundreds of MB) would be loaded and scanned by LeakSanitizer in every
# ckptc and program start, about a second each
CK_BUILD_DIR=$dir scripts/build.sh -DCK_SANITIZE=ON -DCK_CUDA=OFF
logs="$PWD/$dir/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
# Reports go to $logs/NAME.PID as well as making the process fail; allocator_may_return_null:
# a failed allocation (the trainer's --mem-limit tests ask for terabytes) returns NULL as in a
# normal build instead of aborting.
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:check_initialization_order=1:log_path=$logs/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan"
export LSAN_OPTIONS="log_path=$logs/lsan"
export CK_TIMEOUT_MULTIPLIER=10 # Check's per-test timeout (4 s): instrumented code runs 2-5x slower
rc=0
# generated programs: -O1 (CFLAGS replaces the Makefile's -O2; the sanitizer flags are added anyway)
# compiles the hundreds of test programs faster under instrumentation
(cd "$dir" && CFLAGS=-O1 ctest --output-on-failure -j"$jobs") || rc=1
if [ -n "$(ls -A "$logs")" ]; then
    for f in "$logs"/*; do
        echo "== sanitizer report $f"
        head -n 60 "$f"
    done
    echo "test.sh --sanitize: $(ls "$logs" | wc -l) sanitizer report(s) in $logs"
    rc=1
fi
echo "test.sh --sanitize: $( [ $rc = 0 ] && echo clean || echo FAILED ) in $(( $(date +%s) - start )) s"
exit $rc
