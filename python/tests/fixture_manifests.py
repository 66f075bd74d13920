"""Manifests for the fixture kernels: a naive CUDA attention forward
(fixtures/fixture_kernels.ptx) and backward (fixtures/fixture_backward.ptx)
with the fa-compile ABI plus runtime scalar parameters.

    python3 python/tests/fixture_manifests.py DIR

writes one manifest per variant of flashmlir._variants, forward and
backward (and a Dv != D one of each), plus the PTX into DIR;
FLASHMLIR_KERNEL_DIR=DIR then runs the whole GPU suite
(test_gpu_attention.py, test_gpu_backward.py) and the benchmark against the
naive kernels, which checks the harness without the MLIR-built kernels.
Torch-free.
"""

import json
import os
import shutil
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))

from flashmlir import _variants  # noqa: E402

PTX = os.path.join(_HERE, "fixtures", "fixture_kernels.ptx")
BACKWARD_PTX = os.path.join(_HERE, "fixtures", "fixture_backward.ptx")


def _memref(name, rank, dtype, dims):
    return {"name": name, "type": "memref", "rank": rank, "dtype": dtype, "dims": dims}


# A split GQA group's accumulator rows (the warp-specialized causal backward,
# 64-key blocks here): Nk when G >= 2 and the unsplit grid has fewer blocks
# than 1.5 waves, else 0; its key-block grid's y then counts query heads.
SPLIT = "min(Hq // Hkv - 1, 1) * min(max(SMS * 3 - ceildiv(Nk, 64) * Hkv * B * 2, 0), 1)"
SPLIT_ROWS = f"Nk * ({SPLIT})"
SPLIT_GRID_Y = f"Hkv * ({SPLIT} * (Hq // Hkv - 1) + 1)"


def backward_param(name, dtype="bf16"):
    """The memref parameter `name` of fa-compile's backward ABI."""
    rank, dt, dims = {
        "q": (4, dtype, ["B", "Hq", "Nq", "D"]), "k": (4, dtype, ["B", "Hkv", "Nk", "D"]),
        "v": (4, dtype, ["B", "Hkv", "Nk", "Dv"]), "out": (4, dtype, ["B", "Hq", "Nq", "Dv"]),
        "dout": (4, dtype, ["B", "Hq", "Nq", "Dv"]), "lse": (3, "f32", ["B", "Hq", "Nq"]),
        "delta": (3, "f32", ["B", "Hq", "Nq"]), "dq_accum": (4, "f32", ["B", "Hq", "Nq", "D"]),
        "dq": (4, dtype, ["B", "Hq", "Nq", "D"]), "dk": (4, dtype, ["B", "Hkv", "Nk", "D"]),
        "dv": (4, dtype, ["B", "Hkv", "Nk", "Dv"]),
        "dq_order": (3, "i32", ["B", "Hq", "ceildiv(Nq, 64)"]),
        "dk_accum": (4, "f32", ["B", "Hkv", SPLIT_ROWS, "D"]),
        "dv_accum": (4, "f32", ["B", "Hkv", SPLIT_ROWS, "Dv"])}[name]
    return _memref(name, rank, dt, dims)


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


_SCALARS = [
    {"name": "scale", "type": "f32", "value": "scale"},
    {"name": "softcap", "type": "f32", "value": "softcap"},
    {"name": "wl", "type": "i64", "value": "window_left"},
    {"name": "wr", "type": "i64", "value": "window_right"},
]


def naive_backward_manifest(name, dtype, d, dv, causal=False, window=(-1, -1), softcap=None,
                            scale=None, deterministic=False):
    """A backward manifest in fa-compile's format whose kernels are the naive
    ones of fixture_backward.cu (entry names differ from fa-compile's: the
    Python side must take them from the manifest)."""
    def kernel(entry, grid, names, scalars=False):
        return {"entry": f"{entry}_{dtype}", "grid": grid, "block": [128, 1, 1], "threads": 128,
                "dynamic_shared_memory": 0,
                "params": [backward_param(n, dtype) for n in names] + (list(_SCALARS) if scalars else [])}

    rows = ["ceildiv(Nq, 128)", "Hq", "B"]
    keys = ["ceildiv(Nk, 128)", "Hkv", "B"]
    if deterministic:
        kernels = [
            kernel("naive_bwd_pre_det", rows, ["out", "dout", "delta"]),
            kernel("naive_bwd_kv_det", keys, ["q", "k", "v", "dout", "lse", "delta", "dk", "dv"],
                   True),
            kernel("naive_bwd_dq_det", rows, ["q", "k", "v", "dout", "lse", "delta", "dq"], True),
        ]
        workspace = [{"name": "delta", "dtype": "f32", "dims": ["B", "Hq", "Nq"]}]
    else:
        kernels = [
            kernel("naive_bwd_pre", rows, ["out", "dout", "delta", "dq_accum"]),
            kernel("naive_bwd_kv", keys, ["q", "k", "v", "dout", "lse", "delta", "dq_accum",
                                          "dk", "dv"], True),
            kernel("naive_bwd_dq_convert", rows, ["dq_accum", "dq"]),
        ]
        workspace = [{"name": "delta", "dtype": "f32", "dims": ["B", "Hq", "Nq"]},
                     {"name": "dq_accum", "dtype": "f32", "dims": ["B", "Hq", "Nq", "D"]}]
    return {
        "version": 1, "name": name, "kind": "backward", "chip": "sm_80",
        "ptx": "fixture_backward.ptx", "dtype": dtype, "head_dim": d, "value_head_dim": dv,
        "causal": causal, "window": list(window), "softcap": softcap, "scale": scale,
        "scale_is_default": scale is None, "block_q": 128, "block_kv": 128, "warps": 4,
        "deterministic": deterministic, "workspace": workspace, "kernels": kernels,
    }


def write_naive_kernels(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    shutil.copy(PTX, os.path.join(out_dir, "fixture_kernels.ptx"))
    shutil.copy(BACKWARD_PTX, os.path.join(out_dir, "fixture_backward.ptx"))
    variants = [dict(v) for v in _variants.forward_variants()]
    variants.append(dict(kind="forward", dtype="bf16", head_dim=64, value_head_dim=128))
    variants += [dict(v) for v in _variants.backward_variants()]
    variants.append(dict(kind="backward", dtype="bf16", head_dim=64, value_head_dim=128))
    names = []
    for i, v in enumerate(variants):
        name = f"naive_{i:02d}"
        args = (name, v["dtype"], v["head_dim"], v["value_head_dim"], v.get("causal", False),
                v.get("window", (-1, -1)), v.get("softcap"), v.get("scale"))
        if v["kind"] == "forward":
            m = naive_manifest(*args)
        else:
            m = naive_backward_manifest(*args, deterministic=v.get("deterministic", False))
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump(m, f, indent=1)
        names.append(name)
    return names


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    print(f"wrote {len(write_naive_kernels(sys.argv[1]))} manifests into {sys.argv[1]}")
