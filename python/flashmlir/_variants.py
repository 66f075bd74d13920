"""The kernel variants the GPU tests and the benchmark use, so that one
command can build them all (forward and backward):

    PYTHONPATH=python python3 -m flashmlir compile -o build/kernels [--kind backward]
    PYTHONPATH=python python3 -m flashmlir compile --default-set   # into the package

Each entry is a dict of KernelRequest.make() keyword arguments.
"""

from __future__ import annotations

from typing import Dict, List

DTYPES = ("f16", "bf16")
HEAD_DIMS = (64, 128)

# Masks/options the GPU tests exercise for every (dtype, head dim).
TEST_OPTIONS = (
    {},                                        # full attention
    {"causal": True},
    {"window": (97, 31)},                      # sliding window, both sides
    {"causal": True, "window": (255, 0)},      # causal + left window
    {"softcap": 2.0},
)
# The scale and the softcap value are run-time kernel parameters: the tests
# call the kernels above with values no kernel was compiled for.

# Every other head dim the kernels take, and Dv != D pairs (DeepSeek's
# 192/128 among them): the GPU matrix (test_gpu_head_dims.py) runs each
# forward and backward, f16/bf16, with HEAD_DIM_OPTIONS, and the benchmark
# times 96, 192 and 256.
HEAD_DIM_PAIRS = ((32, 32), (96, 96), (160, 160), (192, 128), (192, 192), (256, 256),
                  (128, 64), (64, 128))
HEAD_DIM_OPTIONS = ({}, {"causal": True})
# The deterministic backward of the larger head dims (its own kernels).
HEAD_DIM_DETERMINISTIC = ((96, 96), (192, 128), (256, 256))

# What bench/bench_attention.py times: full and causal, default scale.
BENCH_OPTIONS = ({}, {"causal": True})

# Masks the deterministic backward is built for (tests and bench).
DETERMINISTIC_OPTIONS = ({}, {"causal": True})

KINDS = ("forward", "backward")

# The AOT default set (fa-compile --default-set): forward and backward x
# D 64/128 x f16/bf16 x causal or not, for each of DEFAULT_CHIPS. What
# `python3 -m flashmlir compile --default-set` builds into the package.
DEFAULT_SET_OPTIONS = ({}, {"causal": True})
DEFAULT_CHIPS = ("sm_90a", "sm_80")


def default_set() -> List[Dict]:
    return [dict(kind=kind, dtype=dtype, head_dim=d, value_head_dim=d, **opts)
            for kind in KINDS for d in HEAD_DIMS for dtype in DTYPES
            for opts in DEFAULT_SET_OPTIONS]


def forward_variants() -> List[Dict]:
    out = []
    for dtype in DTYPES:
        for d in HEAD_DIMS:
            for opts in TEST_OPTIONS:
                out.append(dict(kind="forward", dtype=dtype, head_dim=d, value_head_dim=d, **opts))
    return out


def backward_variants() -> List[Dict]:
    """Fast-mode backward for every forward variant, plus deterministic
    backward for DETERMINISTIC_OPTIONS (all dtypes and head dims)."""
    out = []
    for dtype in DTYPES:
        for d in HEAD_DIMS:
            for opts in TEST_OPTIONS:
                out.append(dict(kind="backward", dtype=dtype, head_dim=d, value_head_dim=d,
                                **opts))
            for opts in DETERMINISTIC_OPTIONS:
                out.append(dict(kind="backward", dtype=dtype, head_dim=d, value_head_dim=d,
                                deterministic=True, **opts))
    return out


def head_dim_variants(kinds=KINDS) -> List[Dict]:
    """HEAD_DIM_PAIRS x dtypes x HEAD_DIM_OPTIONS (and the deterministic
    backward of HEAD_DIM_DETERMINISTIC), forward first."""
    out = []
    for kind in ("forward", "backward"):
        if kind not in kinds:
            continue
        for dtype in DTYPES:
            for d, dv in HEAD_DIM_PAIRS:
                for opts in HEAD_DIM_OPTIONS:
                    out.append(dict(kind=kind, dtype=dtype, head_dim=d, value_head_dim=dv,
                                    **opts))
                if kind == "backward" and (d, dv) in HEAD_DIM_DETERMINISTIC:
                    out.append(dict(kind=kind, dtype=dtype, head_dim=d, value_head_dim=dv,
                                    deterministic=True, causal=True))
    return out


# Split-KV forwards (decoding, fa-split-kv with a run-time split count):
# without a mask (also GQA-packed single queries) and causal (a few queries
# per sequence).
SPLIT_KV_OPTIONS = ({}, {"causal": True})


def split_kv_variants() -> List[Dict]:
    return [dict(kind="forward", dtype=dtype, head_dim=d, value_head_dim=d, split_kv=True,
                 **opts)
            for dtype in DTYPES for d in HEAD_DIMS for opts in SPLIT_KV_OPTIONS]


# Packed sequences (flashmlir.attention_varlen, fa-compile --form=varlen):
# D 64/128 x f16/bf16 x causal or not, plus the run-time window (full and
# causal) and softcap kernels for bf16 D 128 (the GPU tests' masks; the
# sizes and the softcap value are kernel parameters).
VARLEN_OPTIONS = ({}, {"causal": True})
VARLEN_EXTRA = (({"window": (97, 31)}, {"causal": True, "window": (255, 0)},
                 {"softcap": 2.0}), "bf16", 128)

# Paged caches (flashmlir.attention_with_kvcache, --form=paged): page sizes
# 16, 64 and 256 x D 64/128, f16 and bf16 for S 256 and bf16 only for the
# others, causal or not, plain and split-KV (decoding, --kv-splits=auto).
# (The split kernels' 64-key blocks span four 16-key pages.) Plus a run-time window (causal) and a softcap kernel for bf16
# D 128, plain (a split request with a mask falls back to them).
PAGE_SIZES = (16, 64, 256)
PAGED_DTYPES = {16: ("bf16",), 64: ("bf16",), 256: ("f16", "bf16")}
PAGED_SPLIT_PAGE_SIZES = (16, 64, 256)
PAGED_OPTIONS = ({}, {"causal": True})
PAGED_EXTRA = ((64, {"causal": True, "window": (1000, 0)}), (256, {"softcap": 3.0}))
FORMS = ("dense", "varlen", "paged")


def varlen_variants() -> List[Dict]:
    out = [dict(kind="forward", form="varlen", dtype=dtype, head_dim=d, value_head_dim=d, **opts)
           for dtype in DTYPES for d in HEAD_DIMS for opts in VARLEN_OPTIONS]
    extra, dtype, d = VARLEN_EXTRA
    out += [dict(kind="forward", form="varlen", dtype=dtype, head_dim=d, value_head_dim=d,
                 **opts) for opts in extra]
    return out


def varlen_backward_variants() -> List[Dict]:
    """The packed backward for each packed forward (fast mode only)."""
    return [dict(v, kind="backward", deterministic=False) for v in varlen_variants()]


def paged_variants() -> List[Dict]:
    out = []
    for s in PAGE_SIZES:
        for dtype in PAGED_DTYPES[s]:
            for d in HEAD_DIMS:
                for opts in PAGED_OPTIONS:
                    for split in ((False, True) if s in PAGED_SPLIT_PAGE_SIZES else (False,)):
                        out.append(dict(kind="forward", form="paged", page_size=s, dtype=dtype,
                                        head_dim=d, value_head_dim=d, split_kv=split, **opts))
    out += [dict(kind="forward", form="paged", page_size=s, dtype="bf16", head_dim=128,
                 value_head_dim=128, split_kv=False, **opts) for s, opts in PAGED_EXTRA]
    return out


def sequence_variants() -> List[Dict]:
    """The varlen and paged forward variants."""
    return varlen_variants() + paged_variants()


def variants(kinds=KINDS, forms=FORMS) -> List[Dict]:
    """The variants of the given kinds and forms, forward first."""
    out = []
    if "forward" in kinds and "dense" in forms:
        out += forward_variants() + split_kv_variants()
    if "forward" in kinds and "varlen" in forms:
        out += varlen_variants()
    if "forward" in kinds and "paged" in forms:
        out += paged_variants()
    if "backward" in kinds and "dense" in forms:
        out += backward_variants()
    if "backward" in kinds and "varlen" in forms:
        out += varlen_backward_variants()
    return out + (head_dim_variants(kinds) if "dense" in forms else [])
