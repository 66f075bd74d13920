#!/usr/bin/env python3
"""Checks fa-compile's output directory: every <name>.json manifest is complete
and agrees with its <name>.ptx (entry names, parameter counts), and, with
--ptxas, every PTX assembles for its chip without register spills.

    check-manifests.py DIR [--ptxas PATH] [--expect N]
Prints one line per manifest: "<name> ok <chip> regs=<n> spills=<bytes>"
(backward: regs of each kernel, in launch order, separated by '/', and the
total spill bytes).
"""
import argparse
import json
import os
import re
import subprocess
import sys

FIELDS = {"version": int, "name": str, "kind": str, "chip": str, "entry": str,
          "dtype": str, "head_dim": int, "value_head_dim": int, "causal": bool,
          "window": list, "block_q": int, "block_kv": int,
          "warps": int, "stages": int, "threads": int, "block": list,
          "dynamic_shared_memory": int, "grid": list, "params": list}
PARAMS = [("q", 4), ("k", 4), ("v", 4), ("out", 4), ("lse", 3)]
BACKWARD_FIELDS = {k: v for k, v in FIELDS.items()
                   if k not in ("entry", "stages", "threads", "block",
                                "dynamic_shared_memory", "grid", "params")}
BACKWARD_FIELDS.update({"deterministic": bool, "kernels": list,
                        "workspace": list})
# Launch order and parameters of the backward kernels, per mode.
BACKWARD_KERNELS = {
    False: [("preprocess", ["out", "dout", "lse", "delta", "lse2", "dq_accum"]),
            ("", ["q", "k", "v", "dout", "lse2", "delta", "dq_accum", "dk",
                  "dv"]),
            ("dq_convert", ["dq_accum", "dq"])],
    True: [("preprocess", ["out", "dout", "lse", "delta", "lse2"]),
           ("", ["q", "k", "v", "dout", "lse2", "delta", "dk", "dv"]),
           ("dq", ["q", "k", "v", "dout", "lse2", "delta", "dq"])],
}
RANKS = {"lse": 3, "delta": 3, "lse2": 3}
RUNTIME_SCALE = True  # of the manifest being checked


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
        backward = m.get("kind") == "backward"
        for field, ty in (BACKWARD_FIELDS if backward else FIELDS).items():
            if field not in m or not isinstance(m[field], ty):
                fail(f"{name}: field {field!r} missing or not {ty.__name__}")
        if m["name"] != name:
            fail(f"{name}: manifest names itself {m['name']!r}")
        # "scale": null is a run-time parameter (every kernel fa-compile
        # builds from flags), a number a constant built in (an IR file's).
        global RUNTIME_SCALE
        RUNTIME_SCALE = m.get("scale", 0) is None
        if not RUNTIME_SCALE and not isinstance(m.get("scale"), float):
            fail(f"{name}: scale {m.get('scale')!r} is neither null nor a number")
        ptx = open(os.path.join(args.dir, name + ".ptx")).read()
        if f".target {m['chip']}" not in ptx:
            fail(f"{name}: PTX not for {m['chip']}")
        entries = dict(re.findall(r"\.visible \.entry (\w+)\(([^)]*)\)", ptx))
        if backward:
            expected = BACKWARD_KERNELS[m["deterministic"]]
            if len(m["kernels"]) != len(expected):
                fail(f"{name}: {len(m['kernels'])} kernels")
            for k, (suffix, params) in zip(m["kernels"], expected):
                want = "fa_bwd_" + (suffix + "_" if suffix else "") + "kernel"
                if k["entry"] != want:
                    fail(f"{name}: kernel {k['entry']}, expected {want}")
                check_kernel(name, k, [(p, RANKS.get(p, 4)) for p in params],
                             entries)
            kernels = m["kernels"]
        else:
            check_kernel(name, m, PARAMS, entries)
            if m["threads"] != 32 * m["warps"]:
                fail(f"{name}: {m['threads']} threads for {m['warps']} warps")
            if m["grid"] != [f"ceildiv(Nq, {m['block_q']})", "Hq", "B"]:
                fail(f"{name}: grid {m['grid']}")
            kernels = [m]
        line = f"{name} ok {m['chip']}"
        if args.ptxas:
            out = subprocess.run(
                [args.ptxas, f"-arch={m['chip']}", "-v", "-o", os.devnull,
                 os.path.join(args.dir, name + ".ptx")],
                capture_output=True, text=True)
            if out.returncode != 0:
                fail(f"{name}: ptxas failed:\n{out.stderr}")
            # ptxas reports entries in its own order: key them by name.
            regs, spills = {}, 0
            for block in out.stderr.split("Compiling entry function")[1:]:
                entry = re.match(r" '(\w+)'", block).group(1)
                regs[entry] = re.search(r"Used (\d+) registers", block).group(1)
                spills += int(re.search(r"(\d+) bytes spill stores", block).group(1))
            line += (" regs=" + "/".join(regs[k["entry"]] for k in kernels)
                     + f" spills={spills}")
        print(line)


def check_kernel(name, k, params, entries):
    """One launch: parameters (the run-time scalars first, then the memrefs),
    block, shared memory, and its PTX entry."""
    scalars = [p for p in k["params"] if p["type"] != "memref"]
    memrefs = k["params"][len(scalars):]
    if [(p["name"], p["rank"]) for p in memrefs] != params:
        fail(f"{name}: parameters of {k['entry']}: {k['params']}")
    if any(p["type"] != "f32" or p["role"] != p["name"] or p["value"] != p["name"]
           or p["name"] not in ("scale", "softcap") for p in scalars):
        fail(f"{name}: scalar parameters of {k['entry']}: {scalars}")
    uses_scale = RUNTIME_SCALE and not k["entry"].endswith("_preprocess_kernel")
    if uses_scale != any(p["name"] == "scale" for p in scalars):
        fail(f"{name}: {k['entry']} {'lacks' if uses_scale else 'has'} a scale parameter")
    if k["block"] != [k["threads"], 1, 1]:
        fail(f"{name}: block {k['block']} of {k['entry']}")
    if not 0 <= k["dynamic_shared_memory"] <= 227 * 1024:
        fail(f"{name}: dynamic shared memory {k['dynamic_shared_memory']}")
    if len(k["grid"]) != 3:
        fail(f"{name}: grid {k['grid']} of {k['entry']}")
    if k["entry"] not in entries:
        fail(f"{name}: no PTX entry {k['entry']}")
    # Each memref expands to 2 pointers, an offset, rank sizes and rank
    # strides.
    expected = sum(3 + 2 * r for _, r in params) + len(scalars)
    got = entries[k["entry"]].count(".param")
    if got != expected:
        fail(f"{name}: {got} PTX parameters for {k['entry']}, manifest "
             f"implies {expected}")


if __name__ == "__main__":
    main()
