#!/bin/sh
# demo.sh — the mission end to end on the bundled GPT-style sample (4 blocks, batch 16 x 64 tokens):
# install what is missing, build, inspect the model, train it without checkpointing and with
# block checkpointing + offload, and compare the two runs' memory and time.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
M=samples/gpt4.onnx
D=build/demo
STEPS=${STEPS:-20}
rm -rf "$D"
mkdir -p "$D"

echo "== what ckptc sees in $M"
build/ckptc inspect "$M" --dim batch=16 | sed -n '1,11p'

echo
echo "== compile and train: --checkpoint=none"
build/ckptc "$M" --dim batch=16 --checkpoint=none -o "$D/none"
make -s -C "$D/none"
"$D/none/trainer" --steps "$STEPS" --report "$D/none.json"

echo
echo "== compile and train: --checkpoint=blocks --offload"
build/ckptc "$M" --dim batch=16 --checkpoint=blocks --offload -o "$D/blocks"
make -s -C "$D/blocks"
"$D/blocks/trainer" --steps "$STEPS" --report "$D/blocks.json"

echo
echo "== ckptc compare"
build/ckptc compare "$D/none.json" "$D/blocks.json" --timeline "$D/timeline.svg"
if [ "$(grep '"losses"' "$D/none.json")" = "$(grep '"losses"' "$D/blocks.json")" ]; then
    echo "losses of the two runs: identical to the last bit ($STEPS steps, same seed and data)"
else
    echo "losses of the two runs DIFFER: that is a bug" >&2
    exit 1
fi
echo "memory timeline of both runs: $D/timeline.svg"
