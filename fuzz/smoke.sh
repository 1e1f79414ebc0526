#!/bin/sh
# smoke.sh — the fuzzing smoke test for CI: builds the libFuzzer harnesses with clang (CK_FUZZ=ON,
# ASan + UBSan), replays fuzz/regressions/, then fuzzes each harness for CK_FUZZ_SECONDS (60)
# over the committed corpus, both at once. Exits non-zero on any crash, leak, timeout, OOM or
# sanitizer report (a hang: an input running over CK_FUZZ_TIMEOUT, 30 s); the input that caused
# it is left in $CK_FUZZ_BUILD/findings/. Without clang
# and libFuzzer it says so and exits 0, so the normal gcc build never depends on it.
set -eu
cd "$(dirname "$0")/.."
secs="${CK_FUZZ_SECONDS:-60}"
dir="${CK_FUZZ_BUILD:-build-fuzz}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' >"$tmp/t.c"
if ! command -v clang >/dev/null 2>&1 || ! clang -fsanitize=fuzzer,address,undefined "$tmp/t.c" -o "$tmp/t" 2>/dev/null; then
    echo "smoke.sh: no clang with libFuzzer (apt-get install clang libclang-rt-14-dev); skipped"
    exit 0
fi
CC=clang cmake -S . -B "$dir" -DCK_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
cmake --build "$dir" --target fuzz_load fuzz_load_dims -j"$(nproc)"
mkdir -p "$dir/findings"
# -timeout is wall-clock seconds per input: the slowest kept input takes ~1 s alone, 10 s on a
# loaded 2-core CI machine; a real hang never ends, so a generous limit loses nothing
flags="-rss_limit_mb=2048 -timeout=${CK_FUZZ_TIMEOUT:-30} -dict=fuzz/onnx.dict -artifact_prefix=$dir/findings/"

# every regression once (file arguments are run, not fuzzed); *.dims carry the dims header
"$dir/fuzz/fuzz_load" $flags fuzz/regressions/*.onnx >"$tmp/regress.log" 2>&1 || {
    tail -n 40 "$tmp/regress.log"
    echo "smoke.sh: a regression input fails again"
    exit 1
}
if ls fuzz/regressions/*.dims >/dev/null 2>&1; then
    "$dir/fuzz/fuzz_load_dims" $flags fuzz/regressions/*.dims >"$tmp/regress_dims.log" 2>&1 || {
        tail -n 40 "$tmp/regress_dims.log"
        echo "smoke.sh: a dims regression input fails again"
        exit 1
    }
fi

# fuzz: new inputs go to a scratch dir (first argument), the committed corpus is only read
mkdir -p "$tmp/new" "$tmp/new_dims"
"$dir/fuzz/fuzz_load" $flags -max_total_time="$secs" "$tmp/new" fuzz/corpus >"$tmp/load.log" 2>&1 &
p1=$!
"$dir/fuzz/fuzz_load_dims" $flags -max_total_time="$secs" "$tmp/new_dims" fuzz/corpus_dims >"$tmp/dims.log" 2>&1 &
p2=$!
rc=0
wait $p1 || rc=1
wait $p2 || rc=1
for h in load dims; do
    grep -E '^#[0-9]+[[:space:]]+DONE' "$tmp/$h.log" | sed "s/^/smoke.sh: fuzz_$h: /" || true
done
if [ $rc != 0 ]; then
    for h in load dims; do grep -A 30 -E 'ERROR|runtime error|ALARM|deadly' "$tmp/$h.log" | head -n 60 || true; done
    echo "smoke.sh: FINDINGS: inputs in $dir/findings/ (reproduce: $dir/fuzz/fuzz_load FILE)"
    exit 1
fi
echo "smoke.sh: no findings"
