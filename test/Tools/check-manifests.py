#!/usr/bin/env python3
"""Checks fa-compile's output directory with the Python package's own
manifest reader (python/flashmlir/_manifest.py, the one definition of the
format: fields, parameter roles, run-time scalars, grid expressions, and the
agreement of each manifest with its PTX entries), and, with --ptxas, that
every PTX assembles for its chip without register spills.

    check-manifests.py DIR [--ptxas PATH] [--expect N]
Prints one line per manifest: "<name> ok <chip> [form=varlen|paged S=<page
size>] regs=<n> spills=<bytes>"
(backward: regs of each kernel, in launch order, separated by '/', and the
total spill bytes).
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from flashmlir import _manifest as M  # noqa: E402  (needs no torch)


def fail(msg):
    print("error: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--ptxas")
    ap.add_argument("--expect", type=int)
    args = ap.parse_args()
    names = sorted(f[:-5] for f in os.listdir(args.dir) if f.endswith(".json"))
    if args.expect is not None and len(names) != args.expect:
        fail(f"expected {args.expect} manifests, found {len(names)}")
    for name in names:
        try:
            spec = M.load_manifest(os.path.join(args.dir, name + ".json"))
            with open(spec.ptx_path) as f:
                M.check_against_ptx(spec, f.read())
        except M.ManifestError as exc:
            fail(str(exc))
        if spec.name != name:
            fail(f"{name}: manifest names itself {spec.name!r}")
        kernels = spec.kernels
        line = f"{name} ok {spec.chip}"
        if spec.form != M.DENSE:   # (the packed forms: their tensors are checked too)
            line += f" form={spec.form}" + (f" S={spec.page_size}" if spec.page_size else "")
        if args.ptxas:
            out = subprocess.run(
                [args.ptxas, f"-arch={spec.chip}", "-v", "-o", os.devnull,
                 spec.ptx_path], capture_output=True, text=True)
            if out.returncode != 0:
                fail(f"{name}: ptxas failed:\n{out.stderr}")
            # ptxas reports entries in its own order: key them by name.
            regs, spills = {}, 0
            for block in out.stderr.split("Compiling entry function")[1:]:
                entry = re.match(r" '(\w+)'", block).group(1)
                regs[entry] = re.search(r"Used (\d+) registers", block).group(1)
                spills += int(re.search(r"(\d+) bytes spill stores", block).group(1))
            line += (" regs=" + "/".join(regs[k.entry] for k in kernels)
                     + f" spills={spills}")
        print(line)


if __name__ == "__main__":
    main()
