#!/usr/bin/env python3
"""Builds the warp-specialized backward (fa-compile --schedule=
warp_specialized) for every backward variant (fast and deterministic) the GPU tests use
(python/flashmlir/_variants.py backward_variants), into one folder that
goes first on FLASHMLIR_KERNEL_DIR so the tests and the benchmark take
these kernels instead of the cooperative ones (issue 16).

Usage: PYTHONPATH=python python3 scripts/build-ws-backward.py OUT [-j N]
    [--head-dim D] [--tiles BQ,BKV,WARPS]
(--head-dim: only that head dim's variants; --tiles: fixed tiles instead of
the configuration's candidates.)
"""
import argparse
import concurrent.futures as cf
import os
import subprocess
import sys

from flashmlir import _kernels as K
from flashmlir import _variants as V


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--chip", default="sm_90a")
    ap.add_argument("--head-dim", type=int, default=0)
    ap.add_argument("--tiles", default="")
    args = ap.parse_args()
    extra = ["--schedule=warp_specialized"]
    if args.tiles:
        bq, bkv, warps = args.tiles.split(",")
        extra += [f"--block-q={bq}", f"--block-kv={bkv}", f"--warps={warps}"]
    compiler = K.find_compiler()
    if compiler is None:
        print("fa-compile not found (build it or set FLASHMLIR_COMPILER)", file=sys.stderr)
        return 1
    reqs = [K.KernelRequest.make(**v) for v in V.backward_variants()
            if not args.head_dim or v.get("head_dim") == args.head_dim]
    os.makedirs(args.out, exist_ok=True)

    def one(r):
        cmd = [compiler] + r.compile_args(args.chip, args.out) + extra
        p = subprocess.run(cmd, capture_output=True, text=True)
        return r, p

    failed = 0
    with cf.ThreadPoolExecutor(args.jobs) as ex:
        for r, p in ex.map(one, reqs):
            ok = p.returncode == 0
            failed += not ok
            print(("ok   " if ok else "FAIL ") + r.describe())
            if not ok:
                print(p.stderr.strip()[-2000:])
    print(f"{len(reqs) - failed} of {len(reqs)} built into {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
