#!/usr/bin/env bash
# Runs every test: lit + FileCheck (IR, diagnostics, plugin), a short fuzzing
# run (scripts/fuzz.py, docs/FUZZING.md), GoogleTest
# (dialect and CPU numerics), the installed package (scripts/test-install.sh:
# install, build examples/downstream with find_package, run it), and the
# Python tests (GPU ones skip without a GPU). Assumes scripts/setup.sh has
# built ./build (or $FA_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FA_BUILD_DIR:-build}

echo "== lit"
/usr/lib/llvm-22/bin/lit -sv "$BUILD_DIR/test"

# A fixed, deterministic budget; docs/FUZZING.md has longer runs.
echo "== fuzz"
rm -rf "$BUILD_DIR/fuzz-out"
/usr/bin/python3 scripts/fuzz.py --build-dir "$BUILD_DIR" --seed 1 \
  --iterations 600 --allow scripts/fuzz/allow.txt --out "$BUILD_DIR/fuzz-out"

echo "== GoogleTest"
(cd "$BUILD_DIR" && ctest --output-on-failure --no-tests=error -j2)

echo "== install + downstream project"
FA_BUILD_DIR="$BUILD_DIR" bash scripts/test-install.sh

if [ -d python/tests ]; then
  # The torch-free modules on the system Python (no torch: the torch tests skip).
  echo "== pytest (system python3, no torch)"
  run_pytest() {
    set +e
    FA_BUILD_DIR="$PWD/$BUILD_DIR" "$@"
    local rc=$?
    set -e
    # 5 = no test collected (e.g. all GPU tests deselected): not a failure.
    [ $rc -eq 0 ] || [ $rc -eq 5 ] || exit $rc
  }
  run_pytest /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests
  # Everything on the venv of scripts/python-env.sh (torch, transformers):
  # the launch path on the fake GPU, the custom ops, torch.compile, the
  # transformers adapter, packaging. GPU tests skip without a GPU.
  VENV=$(bash scripts/python-env.sh | tail -n 1)
  echo "== pytest ($VENV: $("$VENV/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'))"
  run_pytest "$VENV/bin/python" -m pytest -q -p no:cacheprovider python/tests
fi
