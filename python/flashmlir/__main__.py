"""Command line helpers:

    python3 -m flashmlir [info]              what is installed and what this GPU will use
    python3 -m flashmlir list [DIR ...]      kernels found (and invalid manifests)
    python3 -m flashmlir check [DIR ...]     also checks each manifest against its PTX
    python3 -m flashmlir variants [--kind K]  fa-compile arguments of the test/bench variants
    python3 -m flashmlir compile [-o DIR] [--default-set | --kind forward|backward|all]
            [--form dense|varlen|paged|all]
            [--chip sm_80 --chip sm_90a] [--compiler PATH] [-j N]
                                             builds those variants with fa-compile, with a
                                             progress line per kernel; --default-set builds
                                             the AOT set into the package (flashmlir/kernels)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
import time

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
        if not s.is_multi_launch:
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
                what = f", {len(s.kernels)} entries" if s.is_multi_launch else ""
                print(f"  ok   {s.name} (PTX {info.version}, {info.target}{what})")
            except _manifest.ManifestError as exc:
                print(f"  FAIL {exc}")
                rc = 1
    return rc


def _kinds(args):
    return _variants.KINDS if args.kind in (None, "all") else (args.kind,)


def _forms(args):
    form = getattr(args, "form", None)
    return _variants.FORMS if form in (None, "all") else (form,)


def _selected(args):
    if getattr(args, "default_set", False):
        return _variants.default_set()
    return _variants.variants(_kinds(args), _forms(args))


def cmd_variants(args) -> int:
    for v in _selected(args):
        req = _kernels.KernelRequest.make(**v)
        for chip in args.chip or _kernels.COMPILER_CHIPS:
            print("fa-compile " + " ".join(req.compile_args(chip, args.out or "DIR")))
    return 0


def _compile_jobs(compiler, out, variants, chips):
    return [[compiler] + _kernels.KernelRequest.make(**v).compile_args(chip, out)
            for v in variants for chip in chips]


def run_compiles(cmds, jobs=1, stream=None):
    """Runs fa-compile command lines, `jobs` at a time, printing a progress
    line per kernel ([done/total] status seconds command). Returns the
    number of failures."""
    stream = stream or sys.stdout
    total = len(cmds)
    failures = 0
    start = time.time()

    def one(cmd):
        t0 = time.time()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return cmd, proc, time.time() - t0

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for done, fut in enumerate(concurrent.futures.as_completed(
                [pool.submit(one, c) for c in cmds]), 1):
            cmd, proc, secs = fut.result()
            status = "ok" if proc.returncode == 0 else f"FAILED ({proc.returncode})"
            print(f"[{done:>{len(str(total))}}/{total}] {status:<12} {secs:5.1f}s "
                  f"{' '.join(cmd)}", file=stream, flush=True)
            if proc.returncode != 0:
                failures += 1
                print("    " + proc.stdout.strip().replace("\n", "\n    ")[-2000:], file=stream)
    print(f"{total - failures} of {total} kernel(s) built in {time.time() - start:.0f} s, "
          f"{failures} failure(s)", file=stream)
    return failures


def cmd_compile(args) -> int:
    compiler = args.compiler or _kernels.find_compiler()
    if not compiler:
        print("no fa-compile found (PATH, $FLASHMLIR_COMPILER, <repo>/build/bin)", file=sys.stderr)
        return 2
    out = args.out or (_kernels.package_kernel_dir() if args.default_set else None)
    if not out:
        print("compile: -o DIR is required (or --default-set, which builds into the "
              f"package's {_kernels.package_kernel_dir()})", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    chips = args.chip or _kernels.COMPILER_CHIPS
    selected = _selected(args)
    cmds = _compile_jobs(compiler, out, selected, chips)
    counts = {}
    for v in selected:
        counts[v.get("form", "dense")] = counts.get(v.get("form", "dense"), 0) + len(chips)
    print(f"building {len(cmds)} kernel(s) into {out} with {compiler} ({args.jobs} at a time): "
          + ", ".join(f"{n} {f}" for f, n in counts.items()))
    failures = run_compiles(cmds, args.jobs)
    return 1 if failures else 0


def _device_lines():
    """(lines, devices) describing the CUDA devices, or why there are none."""
    from . import _cuda
    try:
        drv = _cuda.driver()
        n = drv.device_count()
    except Exception as exc:  # no driver: a CPU machine
        return [f"CUDA driver: not available ({str(exc).splitlines()[0][:90]}...); CUDA "
                "tensors need an NVIDIA GPU, CPU tensors run the PyTorch reference"], []
    lines = [f"CUDA driver: {drv.version() // 1000}.{drv.version() % 1000 // 10}, "
             f"{n} device(s)"]
    devs = []
    for i in range(n):
        info = _cuda.device_info(i)
        devs.append(info)
        lines.append(f"  device {i}: {info.name}, compute capability {info.cc[0]}.{info.cc[1]}, "
                     f"{info.sm_count} SMs")
    return lines, devs


def _short(v) -> str:
    return (f"{v['kind']:<8} {v['dtype']:<4} D={v['head_dim']:<3} "
            f"{'causal' if v.get('causal') else 'full'}")


def cmd_info(args) -> int:
    import importlib.util
    from . import __version__
    pkg = os.path.dirname(os.path.abspath(__file__))
    print(f"flashmlir {__version__} at {pkg}")
    for mod in ("torch", "transformers"):
        if importlib.util.find_spec(mod) is None:
            print(f"{mod}: not installed")
            continue
        m = __import__(mod)
        extra = ""
        if mod == "torch":
            extra = f" (CUDA {m.version.cuda}, GPU available: {m.cuda.is_available()})"
        if mod == "transformers":
            try:
                from .integrations import transformers as fht  # noqa: F401
                extra = " (attn_implementation \"flashmlir\" registered by importing " \
                        "flashmlir.integrations.transformers)"
            except Exception as exc:  # pragma: no cover
                extra = f" (adapter failed: {exc})"
        print(f"{mod}: {m.__version__}{extra}")
    compiler = _kernels.find_compiler()
    print(f"fa-compile: {compiler or 'not found (missing variants cannot be compiled)'}")
    print(f"compile cache: {_kernels.cache_dir()}")
    from . import _native
    print(f"native launcher: {_native.library_path() or 'not found (launches through ctypes)'}")
    reg = _kernels.KernelRegistry(compiler=None)
    specs = reg.specs()
    print("kernel folders (earlier wins):")
    for d in reg.search_dirs + ([reg.cache] if reg.cache not in reg.search_dirs else []):
        n = len([s for s in specs if os.path.dirname(s.json_path) == d])
        tag = "" if os.path.isdir(d) else " (missing)"
        if d == _kernels.package_kernel_dir():
            tag += " [the package's]"
        print(f"  {n:4d}  {d}{tag}")
    bad = reg.invalid()
    if bad:
        print(f"  {len(bad)} invalid manifest(s): run `python3 -m flashmlir list`")
    lines, devs = _device_lines()
    print("\n".join(lines))
    targets = [(f"device {d.ordinal} ({d.name})", d.cc) for d in devs] or \
        [("an H100/H200 (sm_90)", (9, 0)), ("an A100 (sm_80)", (8, 0))]
    for what, cc in targets:
        print(f"default kernel set on {what}:")
        missing = 0
        for v in _variants.default_set():
            req = _kernels.KernelRequest.make(**v)
            try:
                spec = reg.find(req, cc, compile=False)
                where = f"{spec.name} ({spec.chip}) in {os.path.dirname(spec.json_path)}"
            except Exception:
                missing += 1
                where = ("missing: compiled into the cache on first use" if compiler
                         else "MISSING (no fa-compile to build it)")
            print(f"  {_short(v):<32} {where}")
        if missing:
            print(f"  {missing} missing; `python3 -m flashmlir compile --default-set` builds "
                  "them into the package")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m flashmlir")
    sub = p.add_subparsers(dest="cmd")
    s = sub.add_parser("info", help="what is installed and what the GPU will use (default)")
    s.set_defaults(func=cmd_info)
    for name in ("list", "check"):
        s = sub.add_parser(name)
        s.add_argument("dirs", nargs="*", help="kernel folders (default: the search path)")
        s.set_defaults(func=cmd_list, check=(name == "check"))
    s = sub.add_parser("variants")
    s.add_argument("--chip", action="append")
    s.add_argument("-o", "--out")
    s.add_argument("--kind", choices=("forward", "backward", "all"), default="all")
    s.add_argument("--default-set", action="store_true", help="the AOT default set")
    s.add_argument("--form", choices=_variants.FORMS + ("all",), default="all",
                   help="dense kernels, packed sequences (varlen) or paged caches")
    s.set_defaults(func=cmd_variants)
    s = sub.add_parser("compile")
    s.add_argument("-o", "--out", help="output folder (default with --default-set: the "
                                       "package's kernels/ folder)")
    s.add_argument("--kind", choices=("forward", "backward", "all"), default="all")
    s.add_argument("--default-set", action="store_true",
                   help="the AOT default set (fwd+bwd x D 64/128 x f16/bf16 x causal/not)")
    s.add_argument("--form", choices=_variants.FORMS + ("all",), default="all",
                   help="dense kernels, packed sequences (varlen) or paged caches "
                        "(forward only; default all)")
    s.add_argument("--chip", action="append", help="default: sm_90a and sm_80")
    s.add_argument("--compiler")
    s.add_argument("-j", "--jobs", type=int, default=min(4, os.cpu_count() or 1))
    s.set_defaults(func=cmd_compile)
    args = p.parse_args(argv)
    if args.cmd is None:
        return cmd_info(args)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
