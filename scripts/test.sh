#!/bin/sh
# test.sh — every test: install what is missing, build, run the unit tests (Check), the CLI
# tests and the ONNX node-test conformance through ctest.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh --test
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)"
