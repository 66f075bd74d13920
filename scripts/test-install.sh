#!/usr/bin/env bash
# Tests the installed package: installs the build (./build or $FA_BUILD_DIR)
# into a temporary prefix, checks its layout, builds examples/downstream
# against it with find_package(FlashMLIR) and runs the result, then runs the
# installed fa-opt and the installed plugin in the stock mlir-opt.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FA_BUILD_DIR:-build}
LLVM_BIN=/usr/lib/llvm-22/bin
EXAMPLE=examples/downstream/attention.mlir

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fa-install.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PREFIX=$WORK/prefix

echo "-- install into $PREFIX"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" >"$WORK/install.log"
for f in bin/fa-opt lib/FAPlugin.so \
         lib/libFAIR.a lib/libFATransforms.a lib/libFAPipelines.a \
         lib/cmake/flashmlir/FlashMLIRConfig.cmake \
         lib/cmake/flashmlir/FlashMLIRConfigVersion.cmake \
         lib/cmake/flashmlir/FlashMLIRTargets.cmake \
         include/fa/Dialect/FA/IR/FAOps.h include/fa/Dialect/FA/IR/FAOps.td \
         include/fa/Dialect/FA/IR/FAOps.h.inc \
         include/fa/Dialect/FA/Transforms/Passes.h.inc \
         include/fa/Pipelines/Pipelines.h; do
  if [ ! -e "$PREFIX/$f" ]; then
    echo "test-install: $f is missing from the installed tree" >&2
    exit 1
  fi
done

echo "-- configure and build examples/downstream against it"
cmake -G Ninja -S examples/downstream -B "$WORK/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DFlashMLIR_DIR="$PREFIX/lib/cmake/flashmlir" >"$WORK/configure.log" ||
  { cat "$WORK/configure.log" >&2; exit 1; }
ninja -C "$WORK/build" >"$WORK/build.log" || { cat "$WORK/build.log" >&2; exit 1; }

echo "-- fa-downstream-opt --fa-lower-to-reference"
"$WORK/build/fa-downstream-opt" --fa-lower-to-reference "$EXAMPLE" |
  "$LLVM_BIN/FileCheck" "$EXAMPLE"

echo "-- installed fa-opt --fa-lower-to-reference"
"$PREFIX/bin/fa-opt" --fa-lower-to-reference "$EXAMPLE" |
  "$LLVM_BIN/FileCheck" "$EXAMPLE"

echo "-- stock mlir-opt with the installed FAPlugin"
"$LLVM_BIN/mlir-opt" "$EXAMPLE" \
  --load-dialect-plugin="$PREFIX/lib/FAPlugin.so" \
  --load-pass-plugin="$PREFIX/lib/FAPlugin.so" \
  --pass-pipeline="builtin.module(fa-lower-to-reference)" |
  "$LLVM_BIN/FileCheck" "$EXAMPLE"

echo "test-install: OK"
