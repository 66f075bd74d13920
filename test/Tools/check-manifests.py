#!/usr/bin/env python3
"""Checks fa-compile's output directory: every <name>.json manifest is complete
and agrees with its <name>.ptx (entry name, parameter count), and, with
--ptxas, every PTX assembles for its chip without register spills.

    check-manifests.py DIR [--ptxas PATH] [--expect N]
Prints one line per kernel: "<name> ok <chip> regs=<n> spills=<bytes>".
"""
import argparse
import json
import os
import re
import subprocess
import sys

FIELDS = {"version": int, "name": str, "kind": str, "chip": str, "entry": str,
          "dtype": str, "head_dim": int, "value_head_dim": int, "causal": bool,
          "window": list, "scale": float, "block_q": int, "block_kv": int,
          "warps": int, "stages": int, "threads": int, "block": list,
          "dynamic_shared_memory": int, "grid": list, "params": list}
PARAMS = [("q", 4), ("k", 4), ("v", 4), ("out", 4), ("lse", 3)]


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
        m = json.load(open(os.path.join(args.dir, name + ".json")))
        for field, ty in FIELDS.items():
            if field not in m or not isinstance(m[field], ty):
                fail(f"{name}: field {field!r} missing or not {ty.__name__}")
        if m["name"] != name:
            fail(f"{name}: manifest names itself {m['name']!r}")
        if [(p["name"], p["rank"]) for p in m["params"]] != PARAMS:
            fail(f"{name}: parameters {m['params']}")
        if m["threads"] != 32 * m["warps"] or m["block"] != [m["threads"], 1, 1]:
            fail(f"{name}: block {m['block']} for {m['warps']} warps")
        if m["grid"] != [f"ceildiv(Nq, {m['block_q']})", "Hq", "B"]:
            fail(f"{name}: grid {m['grid']}")
        if not 0 < m["dynamic_shared_memory"] <= 227 * 1024:
            fail(f"{name}: dynamic shared memory {m['dynamic_shared_memory']}")
        ptx = open(os.path.join(args.dir, name + ".ptx")).read()
        entry = re.search(r"\.visible \.entry (\w+)\(([^)]*)\)", ptx)
        if not entry or entry.group(1) != m["entry"]:
            fail(f"{name}: PTX entry {entry and entry.group(1)} != {m['entry']}")
        # Each memref expands to 2 pointers, an offset, rank sizes and rank
        # strides.
        expected = sum(3 + 2 * r for _, r in PARAMS)
        got = entry.group(2).count(".param")
        if got != expected:
            fail(f"{name}: {got} PTX parameters, manifest implies {expected}")
        if f".target {m['chip']}" not in ptx:
            fail(f"{name}: PTX not for {m['chip']}")
        line = f"{name} ok {m['chip']}"
        if args.ptxas:
            out = subprocess.run(
                [args.ptxas, f"-arch={m['chip']}", "-v", "-o", os.devnull,
                 os.path.join(args.dir, name + ".ptx")],
                capture_output=True, text=True)
            if out.returncode != 0:
                fail(f"{name}: ptxas failed:\n{out.stderr}")
            regs = re.search(r"Used (\d+) registers", out.stderr)
            spills = re.search(r"(\d+) bytes spill stores", out.stderr)
            line += f" regs={regs.group(1)} spills={spills.group(1)}"
        print(line)


if __name__ == "__main__":
    main()
