"""Manifests for the fixture kernels (fixtures/fixture_kernels.ptx): a naive
CUDA attention with the fa-compile ABI plus runtime scalar parameters.

    python3 python/tests/fixture_manifests.py DIR

writes one manifest per variant of flashmlir._variants (and a Dv != D one)
plus the PTX into DIR; FLASHMLIR_KERNEL_DIR=DIR then runs the whole GPU
suite (test_gpu_attention.py) and the benchmark against the naive kernel,
which checks the harness without the MLIR-built kernels. Torch-free.
"""

import json
import os
import shutil
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))

from flashmlir import _variants  # noqa: E402

PTX = os.path.join(_HERE, "fixtures", "fixture_kernels.ptx")


def _memref(name, rank, dtype, dims):
    return {"name": name, "type": "memref", "rank": rank, "dtype": dtype, "dims": dims}


def naive_manifest(name, dtype, d, dv, causal=False, window=(-1, -1), softcap=None, scale=None):
    return {
        "version": 1, "name": name, "kind": "forward", "chip": "sm_80",
        "entry": f"naive_attention_{dtype}", "ptx": "fixture_kernels.ptx",
        "dtype": dtype, "head_dim": d, "value_head_dim": dv, "causal": causal,
        "window": list(window), "softcap": softcap, "scale": scale,
        "threads": 128, "warps": 4, "dynamic_shared_memory": 0,
        "grid": ["ceildiv(Nq, 128)", "Hq", "B"],
        "params": [
            _memref("q", 4, dtype, ["B", "Hq", "Nq", "D"]),
            _memref("k", 4, dtype, ["B", "Hkv", "Nk", "D"]),
            _memref("v", 4, dtype, ["B", "Hkv", "Nk", "Dv"]),
            _memref("out", 4, dtype, ["B", "Hq", "Nq", "Dv"]),
            _memref("lse", 3, "f32", ["B", "Hq", "Nq"]),
            {"name": "scale", "type": "f32", "value": "scale"},
            {"name": "softcap", "type": "f32", "value": "softcap"},
            {"name": "wl", "type": "i64", "value": "window_left"},
            {"name": "wr", "type": "i64", "value": "window_right"},
        ],
    }


def write_naive_kernels(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    shutil.copy(PTX, os.path.join(out_dir, "fixture_kernels.ptx"))
    variants = [dict(v) for v in _variants.forward_variants()]
    variants.append(dict(kind="forward", dtype="bf16", head_dim=64, value_head_dim=128))
    names = []
    for i, v in enumerate(variants):
        name = f"naive_{i:02d}"
        m = naive_manifest(name, v["dtype"], v["head_dim"], v["value_head_dim"],
                           v.get("causal", False), v.get("window", (-1, -1)),
                           v.get("softcap"), v.get("scale"))
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump(m, f, indent=1)
        names.append(name)
    return names


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    print(f"wrote {len(write_naive_kernels(sys.argv[1]))} manifests into {sys.argv[1]}")
