#!/usr/bin/env python3
"""Wall time of loading one kernel (its module and function, checked against
the manifest) on GPU 0, from its cubin and from its PTX (JIT), each in a
fresh process after the CUDA context exists: the "load" of issue 14's
compile-time bar (trace + fa-compile + load < 1 s).

    python3 scripts/time-kernel-load.py build/modifier-kernels/NAME.json
"""

import dataclasses
import json
import os
import subprocess
import sys
import time


def child(path: str, use_cubin: bool) -> float:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    from flashmlir import _cuda, _kernels
    from flashmlir import _manifest as M
    spec = M.load_manifest(path)
    if not use_cubin:
        spec = dataclasses.replace(spec, cubin_path=None)
    _cuda.device_info(0)                      # the context, not timed
    t0 = time.perf_counter()
    _kernels.load_kernels(spec, 0)
    return time.perf_counter() - t0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(child(sys.argv[2], sys.argv[3] == "cubin"))
        return
    path = sys.argv[1]
    res = {}
    for mode in ("cubin", "ptx"):
        out = subprocess.run([sys.executable, __file__, "--child", path, mode], check=True,
                             capture_output=True, text=True).stdout.split()[-1]
        res[mode] = float(out)
    print(json.dumps({"manifest": os.path.basename(path), **res}))


if __name__ == "__main__":
    main()
