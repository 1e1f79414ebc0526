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
# ASan and leak reports go to $logs/NAME.PID as well as making the process fail (exit 1); UBSan
# (gcc's separate runtime ignores log_path) prints to stderr and aborts the process, exit 1,
# which every test checks. allocator_may_return_null:
# a failed allocation (the trainer's --mem-limit tests ask for terabytes) returns NULL as in a
# normal build instead of aborting.
export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:allocator_may_return_null=1:check_initialization_order=1:log_path=$logs/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# LeakSanitizer: full stacks (fast_unwind_on_malloc=0) so that tests/lsan.supp can name the
# third-party libraries (Open MPI) whose memory lives until exit
export LSAN_OPTIONS="log_path=$logs/lsan:suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export CK_TIMEOUT_MULTIPLIER=10 # Check's per-test timeout (4 s): instrumented code runs 2-5x slower
# what the tests run must be instrumented: ckptc, and a program it generates (through its Makefile)
rm -rf "$dir/sanity"
"$dir/ckptc" samples/mlp.onnx --dim batch=2 -o "$dir/sanity" >/dev/null
make -s -C "$dir/sanity"
for b in "$dir/ckptc" "$dir/sanity/trainer"; do
    ldd "$b" | grep -q libasan || { echo "test.sh --sanitize: $b is not built with AddressSanitizer" >&2; exit 1; }
done
"$dir/sanity/trainer" >/dev/null
rc=0
# generated programs: -O1 (CFLAGS replaces the Makefile's -O2; the sanitizer flags are added anyway)
# compiles the hundreds of test programs faster under instrumentation
(cd "$dir" && CFLAGS=-O1 ctest --output-on-failure -j"$jobs") || rc=1
# (a file without ERROR holds only a warning, e.g. the refused multi-terabyte allocation)
reports=$(grep -l 'ERROR: ' "$logs"/* 2>/dev/null || true)
if [ -n "$reports" ]; then
    for f in $reports; do
        echo "== sanitizer report $f"
        head -n 60 "$f"
    done
    echo "test.sh --sanitize: $(echo "$reports" | wc -l) sanitizer report(s) in $logs"
    rc=1
fi
echo "test.sh --sanitize: $( [ $rc = 0 ] && echo clean || echo FAILED ) in $(( $(date +%s) - start )) s"
exit $rc
