#!/bin/sh
# demo.sh — the main job end to end on a bundled sample: install what is missing, build, then
# load the GPT-style sample, fold its shape subgraphs, infer every shape and print the result.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
build/ckptc inspect samples/gpt.onnx
