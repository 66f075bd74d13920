"""Command line helpers:

    python3 -m flashmlir list [DIR ...]      kernels found (and invalid manifests)
    python3 -m flashmlir check [DIR ...]     also checks each manifest against its PTX
    python3 -m flashmlir variants [--kind K]  fa-compile arguments of the test/bench variants
    python3 -m flashmlir compile -o DIR [--kind forward|backward|all]
            [--chip sm_80 --chip sm_90a] [--compiler PATH]
                                             builds those variants with fa-compile
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from . import _kernels, _manifest, _variants


def _registry(dirs):
    return _kernels.KernelRegistry(dirs or None, compiler=None)


def cmd_list(args) -> int:
    reg = _registry(args.dirs)
    print("search path:")
    for d in reg.search_dirs + ([reg.cache] if reg.cache not in reg.search_dirs else []):
        print(f"  {d}{'' if os.path.isdir(d) else '  (missing)'}")
    specs = reg.specs()
    print(f"{len(specs)} kernel(s):")
    for s in specs:
        if not s.is_backward:
            print(f"  {s.describe():<70} threads={s.threads} smem={s.dynamic_shared_memory} "
                  f"grid={[g.text for g in s.grid]}")
            continue
        print(f"  {s.describe():<70} workspace="
              + ",".join(f"{w.name}[{','.join(d.text for d in w.dims)}]" for w in s.workspace))
        for k in s.kernels:
            print(f"      {k.entry:<40} threads={k.threads} smem={k.dynamic_shared_memory} "
                  f"grid={[g.text for g in k.grid]} "
                  f"params={','.join(p.name for p in k.params)}")
    bad = reg.invalid()
    for _, err in bad:
        print(f"INVALID: {err}")
    rc = 1 if bad else 0
    if args.check:
        for s in specs:
            try:
                with open(s.ptx_path, encoding="utf-8", errors="replace") as f:
                    info = _manifest.check_against_ptx(s, f.read())
                what = f", {len(s.kernels)} entries" if s.is_backward else ""
                print(f"  ok   {s.name} (PTX {info.version}, {info.target}{what})")
            except _manifest.ManifestError as exc:
                print(f"  FAIL {exc}")
                rc = 1
    return rc


def _kinds(args):
    return _variants.KINDS if args.kind in (None, "all") else (args.kind,)


def cmd_variants(args) -> int:
    for v in _variants.variants(_kinds(args)):
        req = _kernels.KernelRequest.make(**v)
        for chip in args.chip or _kernels.COMPILER_CHIPS:
            print("fa-compile " + " ".join(req.compile_args(chip, args.out or "DIR")))
    return 0


def cmd_compile(args) -> int:
    compiler = args.compiler or _kernels.find_compiler()
    if not compiler:
        print("no fa-compile found (PATH, $FLASHMLIR_COMPILER, <repo>/build/bin)", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    failures = 0
    for v in _variants.variants(_kinds(args)):
        req = _kernels.KernelRequest.make(**v)
        for chip in args.chip or _kernels.COMPILER_CHIPS:
            cmd = [compiler] + req.compile_args(chip, args.out)
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            status = "ok" if proc.returncode == 0 else f"FAILED ({proc.returncode})"
            print(f"{status:<12} {' '.join(cmd)}")
            if proc.returncode != 0:
                failures += 1
                print("    " + proc.stdout.strip().replace("\n", "\n    ")[-2000:])
    print(f"{failures} failure(s)")
    return 1 if failures else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m flashmlir")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("list", "check"):
        s = sub.add_parser(name)
        s.add_argument("dirs", nargs="*", help="kernel folders (default: the search path)")
        s.set_defaults(func=cmd_list, check=(name == "check"))
    s = sub.add_parser("variants")
    s.add_argument("--chip", action="append")
    s.add_argument("-o", "--out")
    s.add_argument("--kind", choices=("forward", "backward", "all"), default="all")
    s.set_defaults(func=cmd_variants)
    s = sub.add_parser("compile")
    s.add_argument("-o", "--out", required=True)
    s.add_argument("--kind", choices=("forward", "backward", "all"), default="all")
    s.add_argument("--chip", action="append", help="default: sm_90a and sm_80")
    s.add_argument("--compiler")
    s.set_defaults(func=cmd_compile)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
