#!/usr/bin/env python3
"""Pulls the PTX out of every gpu.binary (format=isa) in an MLIR file.

Usage: extract-ptx.py IN.mlir OUT_PREFIX [--ptxas PTXAS --arch SM]

Writes OUT_PREFIX-<i>.ptx for the i-th binary and prints each path. With
--ptxas, also assembles each one with `ptxas -arch SM -v` and prints its
report (registers, spills) after the path.
"""
import argparse
import re
import subprocess
import sys

parser = argparse.ArgumentParser()
parser.add_argument("input")
parser.add_argument("prefix")
parser.add_argument("--ptxas")
parser.add_argument("--arch", default="sm_80")
args = parser.parse_args()

text = open(args.input).read()
blobs = re.findall(r'assembly = "((?:[^"\\]|\\.)*)"', text)
if not blobs:
    sys.exit("no gpu.binary with PTX found in " + args.input)


def unescape(s):
    # MLIR prints non-printable bytes as \XX (hex) and '\' and '"' escaped.
    out = re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), s)
    return out.replace('\\"', '"').replace("\\\\", "\\")


status = 0
for i, blob in enumerate(blobs):
    path = "%s-%d.ptx" % (args.prefix, i)
    with open(path, "w") as f:
        f.write(unescape(blob))
    print("ptx file:", path)
    if args.ptxas:
        res = subprocess.run([args.ptxas, "-arch=" + args.arch, "-v", path,
                              "-o", "/dev/null"], capture_output=True,
                             text=True)
        sys.stdout.write(res.stdout + res.stderr)
        status |= res.returncode
sys.exit(status)
