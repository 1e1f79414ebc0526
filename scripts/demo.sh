#!/bin/sh
# demo.sh — the mission end to end on the bundled GPT-style sample (4 blocks, batch 16 x 64 tokens):
# install what is missing, build, inspect the model, train it without checkpointing and with
# block checkpointing + offload, and compare the two runs' memory and time; then train it on text (a
# token file made from the GPL's text) with gradient accumulation, clipping, a cosine schedule,
# checkpoints and an eval on held-out tokens whose loss must fall.
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

echo
echo "== train on text: a token file, evaluated on held-out tokens"
# Any Debian system has the GPL's text: each byte becomes a token of the sample's 97 (newline 0,
# printable ASCII 1..95, anything else 96), uint16 as nanoGPT and llm.c write them; the last
# tenth is held out for evaluation. perl is part of every Debian system (perl-base).
perl -e 'local $/; my @v = map { $_ == 10 ? 0 : ($_ >= 32 && $_ < 127 ? $_ - 31 : 96) } unpack("C*", <STDIN>);
         my $n = int(@v * 0.9);
         open(my $t, ">", $ARGV[0]) or die; binmode $t; print $t pack("v*", @v[0 .. $n - 1]);
         open(my $e, ">", $ARGV[1]) or die; binmode $e; print $e pack("v*", @v[$n .. $#v]);' \
    "$D/train.bin" "$D/val.bin" < /usr/share/common-licenses/GPL-3
TOKEN_STEPS=${TOKEN_STEPS:-200}
# batch 8, two micro-batches a step: the update of a batch of 16 at the memory of 8
build/ckptc "$M" --dim batch=8 --checkpoint=blocks --lr 3e-3 --grad-accum --clip-grad-norm 1.0 -o "$D/text"
make -s -C "$D/text"
"$D/text/trainer" --tokens "$D/train.bin" --eval-tokens "$D/val.bin" --eval-every 50 --shuffle --epochs 1000 \
    --steps "$TOKEN_STEPS" --grad-accum 2 --lr-schedule cosine --warmup 20 --min-lr 3e-4 \
    --save-every 100 --ckpt-dir "$D/ckpt" --metrics "$D/text.jsonl" --report "$D/text.json" | grep -E 'eval|planned'
# the eval losses, in order: the first must be above the last
grep '"evals"' "$D/text.json" | grep -o '"loss": [0-9.e+-]*' | sed 's/.*: //' | awk '
    NR == 1 { first = $1 } { last = $1 } END {
        if (NR < 2 || !(last < first)) { print "eval loss did not fall: " first " -> " last; exit 1 }
        print "eval loss on held-out text: " first " -> " last " over " NR " evals" }'
