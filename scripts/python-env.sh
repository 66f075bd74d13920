#!/usr/bin/env bash
# Creates (once) the Python virtual environment the tests run in: python3-venv
# from Debian, then the packages of python/requirements-test.txt from PyPI.
# The venv lives outside the checkout, keyed by the requirements' hash, so
# fresh clones (CI) and repeated runs reuse it; pip's own cache keeps the
# wheels. Prints the venv's path on its last line.
#
#   FLASHMLIR_VENV=DIR   use (or create) the venv at DIR instead
set -euo pipefail
cd "$(dirname "$0")/.."
REQ=python/requirements-test.txt
PY=/usr/bin/python3
key=$( (cat "$REQ"; $PY -c 'import sys; print(sys.version_info[:2])') | sha256sum | cut -c1-12)
VENV=${FLASHMLIR_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/flashmlir-venv/$key}

if [ -f "$VENV/.complete" ] && "$VENV/bin/python" -c 'import torch, transformers, pytest' 2>/dev/null; then
  echo "python-env: reusing $VENV" >&2
  echo "$VENV"
  exit 0
fi

if ! $PY -c 'import ensurepip, venv' 2>/dev/null; then
  echo "python-env: installing python3-venv" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
fi

start=$(date +%s)
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
$PY -m venv "$VENV"
echo "python-env: installing $(grep -v '^#' "$REQ" | tr '\n' ' ') into $VENV" >&2
"$VENV/bin/python" -m pip install -q --upgrade pip >&2
"$VENV/bin/python" -m pip install -q -r "$REQ" >&2
touch "$VENV/.complete"
echo "python-env: ready in $(( $(date +%s) - start )) s" >&2
echo "$VENV"
