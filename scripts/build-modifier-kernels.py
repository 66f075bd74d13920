#!/usr/bin/env python3
"""Compiles the kernels of the score_mod / mask_mod problems of
python/tests/modifier_cases.py (modifier_cases.kernel_requests: the forward
of GPU_TEST_PROBLEMS and BENCH_PROBLEMS, the backward of
GPU_BACKWARD_PROBLEMS, deterministic too for GPU_DETERMINISTIC_PROBLEMS,
and of BENCH_PROBLEMS; the kernels of the modifiers and of their built-in
equivalents) into OUT_DIR, with the package's own requests and registry,
so that a machine without fa-compile (the H200) finds them:

    python3 scripts/build-modifier-kernels.py build/modifier-kernels [--sm80] [-j 2]
    FLASHMLIR_KERNEL_DIR=build/modifier-kernels python3 -m pytest python/tests/test_gpu_modifiers.py

A kernel with modifiers is named by the traced IR, the captures' shapes and
dtypes included, so the problems must be the ones the GPU test and the
benchmark run. Kernels already in OUT_DIR are kept. First measures one
variant from scratch (trace, fa-compile, manifest load: issue 14's bar is
under a second). Needs torch (tracing) and fa-compile ($FLASHMLIR_COMPILER,
PATH or <repo>/build/bin).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(_REPO, "python"), os.path.join(_REPO, "python", "tests")]

from flashmlir import _kernels  # noqa: E402
from flashmlir import _manifest as M  # noqa: E402
from flashmlir._errors import CompileError  # noqa: E402

import modifier_cases as mc  # noqa: E402

# A device of each chip (selection ranks kernels by the device's capability).
_CC = {"sm_90a": (9, 0), "sm_80": (8, 0)}


def measure_one(compiler: str, chip: str) -> None:
    """Times one variant from nothing: tracing (and hashing) the modifiers,
    fa-compile, loading the manifest."""
    p = next(p for p in mc.GPU_TEST_PROBLEMS if p.case == "alibi")
    t0 = time.perf_counter()
    request = p.request()
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([compiler] + request.compile_args(chip, tmp), check=True,
                       stdout=subprocess.DEVNULL)
        t2 = time.perf_counter()
        (path,) = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".json")]
        assert request.matches(M.load_manifest(path)), path
        t3 = time.perf_counter()
    print(f"one variant ({p.id}, {chip}): trace {1e3 * (t1 - t0):.1f} ms + fa-compile "
          f"{t2 - t1:.2f} s + manifest {1e3 * (t3 - t2):.1f} ms = {t3 - t0:.2f} s "
          f"(bar: < 1 s)", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--sm80", action="store_true", help="also compile for sm_80")
    ap.add_argument("--only", choices=("gpu", "bench"), help="one problem list only")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="parallel fa-compile runs")
    ap.add_argument("--dry-run", action="store_true", help="list the kernels, compile nothing")
    ap.add_argument("--no-measure", action="store_true", help="skip the one-variant timing")
    args = ap.parse_args()
    os.environ.pop("FLASHMLIR_CHIP", None)   # (selection below is per chip)

    problems = {"gpu": mc.GPU_TEST_PROBLEMS, "bench": mc.BENCH_PROBLEMS}
    which = [name for name in problems if args.only in (None, name)]
    chosen = [p for name in which for p in problems[name]]
    requests = mc.kernel_requests(which)
    chips = ["sm_90a"] + (["sm_80"] if args.sm80 else [])
    jobs = [(r, chip) for chip in chips for r in requests]
    print(f"{len(chosen)} problems: {len(requests)} kernels "
          f"({sum(r.modifiers is not None for r in requests)} with modifiers, "
          f"{sum(r.kind == 'backward' for r in requests)} backward) "
          f"x {len(chips)} chip(s)", flush=True)
    if args.dry_run:
        for r, chip in jobs:
            print(f"  {chip} {r.describe()}")
        return 0
    compiler = _kernels.find_compiler()
    if compiler is None:
        print("no fa-compile found (PATH, $FLASHMLIR_COMPILER, <repo>/build/bin)",
              file=sys.stderr)
        return 2
    if not args.no_measure:
        measure_one(compiler, chips[0])

    out = os.path.abspath(args.out_dir)
    os.makedirs(out, exist_ok=True)
    registry = _kernels.KernelRegistry([out], cache=out, compiler=compiler)
    todo = [(r, chip) for r, chip in jobs
            if not any(s.chip == chip for s in registry.candidates(r, _CC[chip]))]
    failures = []

    def compile_one(job):
        request, chip = job
        try:
            registry._compile_one(compiler, request, chip)
        except CompileError as exc:
            failures.append(f"{chip} {request.describe()}: {exc}")

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(compile_one, todo))
    seconds = time.perf_counter() - t0
    built = len(todo) - len(failures)
    print(f"{built} kernels compiled in {seconds:.1f} s"
          + (f" ({seconds / max(built, 1):.2f} s each)" if built else "")
          + f", {len(jobs) - len(todo)} already in {out}, {len(failures)} failed", flush=True)
    for f in failures:
        print("FAILED " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
