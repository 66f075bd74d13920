#!/usr/bin/env bash
# Installs what FlashMLIR needs (Debian 12 packages, idempotent), builds it
# into ./build (or $FA_BUILD_DIR) with Ninja, and creates the Python test
# environment (scripts/python-env.sh: a venv with torch and transformers,
# made once and reused; FLASHMLIR_SKIP_PYTHON_ENV=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools libzstd-dev
      cmake ninja-build g++ googletest python3 python3-pytest python3-numpy)
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

BUILD_DIR=${FA_BUILD_DIR:-build}
CUDA_BIN=""
[ -x /usr/local/cuda/bin/ptxas ] && CUDA_BIN=/usr/local/cuda/bin
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DFA_CUDA_BIN_DIR="$CUDA_BIN"
fi
ninja -C "$BUILD_DIR"

if [ -z "${FLASHMLIR_SKIP_PYTHON_ENV:-}" ]; then
  bash scripts/python-env.sh >/dev/null
fi
