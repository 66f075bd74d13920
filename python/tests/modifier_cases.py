"""Named score_mod / mask_mod cases (FlexAttention's modifiers) and the
problems that the GPU test (test_gpu_modifiers.py), the benchmark
(bench/bench_modifiers.py), the fake-GPU tests and
scripts/build-modifier-kernels.py share.

A kernel with modifiers is compiled for the traced IR, whose key includes
the captured tensors' shapes and dtypes and the Python numbers the
functions read (e.g. Nk - Nq in a causal mask_mod): the build script
compiles exactly the kernels of the problems listed here, so the GPU
machine (no fa-compile) finds them in FLASHMLIR_KERNEL_DIR.

    for p in GPU_TEST_PROBLEMS:            # or BENCH_PROBLEMS
        case = p.build(device)             # the modifiers and their captures
        q, k, v = p.inputs(device, layout)
        out = flashmlir.attention(q, k, v, layout=layout, score_mod=case.score_mod,
                                  mask_mod=case.mask_mod, **p.kwargs)
        if case.builtin is not None:       # the same without modifiers
            same = flashmlir.attention(q, k, v, layout=layout, **case.builtin)

    for p in GPU_BACKWARD_PROBLEMS:        # (and GPU_DETERMINISTIC_PROBLEMS)
        q, k, v = p.inputs(device, layout, requires_grad=True)
        out = flashmlir.attention(q, k, v, ..., deterministic=det)   # as above
        out.backward(dout)                 # the backward kernels of the modifiers
        want = reference_gradients(p, case, q, k, v, dout, layout)

CASES maps a name to its builder: builder(problem, device, generator) ->
Case. Positions are FlexAttention's (0-based q_idx and kv_idx, not
aligned); the masks that have a built-in equivalent align themselves to
the bottom-right corner as the built-in causal mask and windows do.
"""

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import torch

import flashmlir
from flashmlir import _interface

TORCH_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}

WINDOW = 100          # sliding_window: the query sees keys q - WINDOW + 1 .. q (aligned)
SOFTCAP = 30.0        # softcap: 30 * tanh(s / 30)


@dataclass
class Case:
    """A problem's modifiers: the functions, the tensors they read (by name;
    on the problem's device) and the attention() options that compute the
    same without modifiers (the problem's options included), or None."""

    score_mod: Optional[Callable]
    mask_mod: Optional[Callable]
    captures: Dict[str, torch.Tensor]
    builtin: Optional[Dict[str, Any]]


@dataclass(frozen=True)
class Problem:
    """One modified attention call: the case, the sizes, the input dtype
    and the other attention() options (`kwargs`: causal, window, softcap,
    scale). Layout-independent: each layout runs the same kernel."""

    case: str
    B: int
    Hq: int
    Hkv: int
    Nq: int
    Nk: int
    D: int
    dtype: str = "bf16"
    options: Tuple[Tuple[str, Any], ...] = ()
    # Run-time key ranges of the case's mask_mod in groups of this many
    # query rows (flashmlir.key_ranges; None: the call passes none).
    key_range_rows: Optional[int] = None

    @property
    def kwargs(self) -> Dict[str, Any]:
        return dict(self.options)

    def ranges(self, case: Case, device="cpu"):
        """The call's flashmlir.KeyRanges (None without key_range_rows)."""
        if self.key_range_rows is None:
            return None
        kw = self.kwargs
        return flashmlir.key_ranges(case.mask_mod, self.B, self.Hq, self.Nq, self.Nk,
                                    causal=kw.get("causal", False), window=kw.get("window"),
                                    rows=self.key_range_rows, device=device)

    def call_kwargs(self, case: Case, device="cpu") -> Dict[str, Any]:
        """attention()'s keyword arguments of the modified call (the
        modifiers, the key ranges when the problem has them, the options)."""
        kw = dict(score_mod=case.score_mod, mask_mod=case.mask_mod, **self.kwargs)
        if self.key_range_rows is not None:
            kw["key_ranges"] = self.ranges(case, device)
        return kw

    @property
    def torch_dtype(self) -> torch.dtype:
        return TORCH_DTYPES[self.dtype]

    @property
    def id(self) -> str:
        opts = "".join(f"-{k}={v}" for k, v in self.options)
        if self.key_range_rows is not None:
            opts += f"-kr{self.key_range_rows}"
        return (f"{self.case}-b{self.B}h{self.Hq}x{self.Hkv}-{self.Nq}x{self.Nk}-d{self.D}-"
                f"{self.dtype}{opts}")

    def build(self, device="cpu", seed: int = 0) -> Case:
        g = torch.Generator()
        g.manual_seed(seed)
        return CASES[self.case](self, device, g)

    def inputs(self, device="cpu", layout: str = "bhsd", seed: int = 0,
               requires_grad: bool = False):
        """q, k, v (standard normal) in `layout`."""
        g = torch.Generator()
        g.manual_seed(seed + 1)

        def make(h, n):
            shape = (self.B, h, n, self.D) if layout == "bhsd" else (self.B, n, h, self.D)
            t = torch.randn(shape, generator=g).to(device=device, dtype=self.torch_dtype)
            return t.requires_grad_(requires_grad)
        return make(self.Hq, self.Nq), make(self.Hkv, self.Nk), make(self.Hkv, self.Nk)

    def _meta(self):
        return tuple(torch.empty((self.B, h, n, self.D), dtype=self.torch_dtype, device="meta")
                     for h, n in ((self.Hq, self.Nq), (self.Hkv, self.Nk), (self.Hkv, self.Nk)))

    def request(self, case: Optional[Case] = None, kind: str = "forward",
                deterministic: bool = False):
        """The KernelRequest the modified call looks up: its forward, or
        (kind "backward") its backward kernels'."""
        case = case or self.build()
        return self._request(kind, deterministic, score_mod=case.score_mod,
                             mask_mod=case.mask_mod, key_ranges=self.key_range_rows,
                             **self.kwargs)

    def builtin_request(self, case: Optional[Case] = None, kind: str = "forward",
                        deterministic: bool = False):
        """The KernelRequest of the built-in equivalent (None: none)."""
        case = case or self.build()
        if case.builtin is None:
            return None
        return self._request(kind, deterministic, **case.builtin)

    def _request(self, kind, deterministic, **kw):
        if kind == "forward":
            assert not deterministic, "deterministic applies to the backward"
            return _interface.forward_request(*self._meta(), **kw)
        return _interface.backward_request(*self._meta(), deterministic=deterministic, **kw)


def _builtin(p: Problem, **extra) -> Dict[str, Any]:
    return {**p.kwargs, **extra}


def _diag(p: Problem) -> int:
    """kv_idx of the diagonal minus q_idx (the built-in masks' alignment)."""
    return p.Nk - p.Nq


def alibi(p: Problem, device, g) -> Case:
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / p.Hq) for h in range(p.Hq)],
                          device=device)

    def score_mod(s, b, h, q_idx, kv_idx):
        return s + slopes[h] * (kv_idx - q_idx)
    return Case(score_mod, None, {"slopes": slopes}, None)


def rel_bias(p: Problem, device, g) -> Case:
    """A learned bias per relative position: table[q_idx - kv_idx + Nk - 1]."""
    table = (torch.randn(p.Nq + p.Nk - 1, generator=g) * 0.5).to(device)
    offset = p.Nk - 1

    def score_mod(s, b, h, q_idx, kv_idx):
        return s + table[q_idx - kv_idx + offset]
    return Case(score_mod, None, {"table": table}, None)


def _documents(p: Problem, g) -> torch.Tensor:
    """[B, max(Nq, Nk)] i32 document ids: runs of random lengths (about 8
    documents per row, at least one token each)."""
    n = max(p.Nq, p.Nk)
    starts = torch.rand(p.B, n, generator=g) < 8.0 / n
    starts[:, 0] = False
    return torch.cumsum(starts.int(), dim=1, dtype=torch.int32)


def document(p: Problem, device, g) -> Case:
    doc = _documents(p, g).to(device)

    def mask_mod(b, h, q_idx, kv_idx):
        return doc[b, q_idx] == doc[b, kv_idx]
    return Case(None, mask_mod, {"doc": doc}, None)


def document_causal(p: Problem, device, g) -> Case:
    doc = _documents(p, g).to(device)

    def mask_mod(b, h, q_idx, kv_idx):
        return (doc[b, q_idx] == doc[b, kv_idx]) & (kv_idx <= q_idx)
    return Case(None, mask_mod, {"doc": doc}, None)


def prefix_lm(p: Problem, device, g) -> Case:
    """The first Nk // 5 keys (at least one) to every query, then causal."""
    prefix, diag = max(1, p.Nk // 5), _diag(p)

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx < prefix) | (kv_idx <= q_idx + diag)
    return Case(None, mask_mod, {}, None)


def sliding_window(p: Problem, device, g) -> Case:
    diag = _diag(p)

    def mask_mod(b, h, q_idx, kv_idx):
        d = q_idx + diag - kv_idx
        return (d >= 0) & (d < WINDOW)
    return Case(None, mask_mod, {}, _builtin(p, causal=True, window=(WINDOW - 1, 0)))


def softcap(p: Problem, device, g) -> Case:
    def score_mod(s, b, h, q_idx, kv_idx):
        return SOFTCAP * torch.tanh(s / SOFTCAP)
    return Case(score_mod, None, {}, _builtin(p, softcap=SOFTCAP))


def causal(p: Problem, device, g) -> Case:
    diag = _diag(p)

    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + diag
    return Case(None, mask_mod, {}, _builtin(p, causal=True))


CASES: Dict[str, Callable[[Problem, Any, torch.Generator], Case]] = {
    "alibi": alibi, "rel_bias": rel_bias, "document": document,
    "document_causal": document_causal, "prefix_lm": prefix_lm,
    "sliding_window": sliding_window, "softcap": softcap, "causal": causal,
}


# -- the GPU test's problems ------------------------------------------------------------
# Every case at each size, the dtype / head dim / heads rotating so each
# case meets all of them; then modifiers combined with built-in options,
# and queries outnumbering keys (leading rows that see no key).
_SIZES = ((1, 300), (17, 17), (300, 450), (1000, 1000))
_CONFIGS = (("bf16", 128, 4, 2), ("f16", 64, 4, 4), ("bf16", 64, 4, 2), ("f16", 128, 4, 4))


def _gpu_test_problems():
    out = []
    for i, name in enumerate(CASES):
        for j, (nq, nk) in enumerate(_SIZES):
            dtype, d, hq, hkv = _CONFIGS[(i + j) % len(_CONFIGS)]
            out.append(Problem(name, 2 if nq * nk < 100_000 else 1, hq, hkv, nq, nk, d, dtype))
    out += [
        Problem("alibi", 2, 4, 2, 300, 450, 128, "bf16", (("causal", True),)),
        Problem("rel_bias", 2, 4, 4, 17, 17, 64, "f16", (("softcap", 20.0),)),
        Problem("document", 1, 4, 2, 1000, 1000, 128, "bf16", (("window", (200, 0)),)),
        Problem("softcap", 2, 4, 4, 300, 450, 64, "f16", (("causal", True),
                                                          ("scale", 0.2))),
        Problem("causal", 2, 4, 2, 450, 300, 128, "bf16"),
        Problem("sliding_window", 2, 4, 4, 450, 300, 64, "f16"),
        # Document masks with run-time key ranges (group sizes below, at and
        # above a query block; with a built-in window; queries outnumbering
        # keys).
        Problem("document", 1, 4, 2, 1000, 1000, 128, "bf16", key_range_rows=64),
        Problem("document_causal", 2, 4, 4, 300, 450, 64, "f16", key_range_rows=128),
        Problem("document", 1, 4, 2, 1000, 1000, 128, "bf16", (("window", (200, 0)),),
                key_range_rows=200),
        Problem("document_causal", 2, 4, 2, 450, 300, 128, "bf16", key_range_rows=32),
    ]
    return out


GPU_TEST_PROBLEMS = _gpu_test_problems()


def _gpu_backward_problems():
    """Of the GPU test's problems: each case at two of the sizes (rotating,
    so each size meets four cases), one bf16 d128 GQA, one f16 d64 MHA;
    then every problem with built-in options or queries outnumbering keys
    (rows that see no key: zero dq)."""
    per_case = len(_SIZES)
    out = [p for n, p in enumerate(GPU_TEST_PROBLEMS[:len(CASES) * per_case])
           if (n // per_case + n % per_case) % len(_CONFIGS) in (0, 1)]
    return out + GPU_TEST_PROBLEMS[len(CASES) * per_case:]


# The problems the GPU test runs the backward of (kernels built for them:
# the modified calls' and their built-in equivalents'), and those it also
# runs with deterministic=True (the deterministic backward kernels).
GPU_BACKWARD_PROBLEMS = _gpu_backward_problems()
GPU_DETERMINISTIC_PROBLEMS = [p for p in GPU_BACKWARD_PROBLEMS
                              if p.case in ("alibi", "document_causal")]

# -- the benchmark's problems: 16k tokens, 16 heads of 128, bf16 ----------------------
BENCH_TOKENS = 16384
BENCH_PROBLEMS = [Problem(name, BENCH_TOKENS // n, 16, 16, n, n, 128, "bf16")
                  for n in (4096, 16384) for name in CASES] + [
    Problem(name, BENCH_TOKENS // n, 16, 16, n, n, 128, "bf16", key_range_rows=128)
    for n in (4096, 16384) for name in ("document", "document_causal")]


def requests(problems, kind: str = "forward", deterministic: bool = False):
    """The distinct KernelRequests of `problems` (the modified calls and
    their built-in equivalents; their forward, or their backward kernels),
    in first-use order."""
    out = []
    for p in problems:
        case = p.build()
        for r in (p.request(case, kind, deterministic),
                  p.builtin_request(case, kind, deterministic)):
            if r is not None and r not in out:
                out.append(r)
    return out


def kernel_requests(which=("gpu", "bench")):
    """Every kernel the GPU test ("gpu") and the benchmark ("bench") look
    up: the forward of their problems, the backward of
    GPU_BACKWARD_PROBLEMS (deterministic too for GPU_DETERMINISTIC_PROBLEMS)
    and of BENCH_PROBLEMS. Distinct, in first-use order (what
    scripts/build-modifier-kernels.py compiles)."""
    lists = {"gpu": [requests(GPU_TEST_PROBLEMS), requests(GPU_BACKWARD_PROBLEMS, "backward"),
                     requests(GPU_DETERMINISTIC_PROBLEMS, "backward", True)],
             "bench": [requests(BENCH_PROBLEMS), requests(BENCH_PROBLEMS, "backward")]}
    out = []
    for name in which:
        for r in (r for rs in lists[name] for r in rs):
            if r not in out:
                out.append(r)
    return out


def reference_gradients(p: Problem, case: Case, q, k, v, dout, layout: str = "bhsd"):
    """dq, dk, dv of the modified call (typed like q, k, v) by autograd of
    `reference` on detached copies (its f32 math; materializes [Nq, Nk])."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        out, _ = reference(p, case, q, k, v, layout)
        return torch.autograd.grad(out, (q, k, v), dout)


def reference(p: Problem, case: Case, q, k, v, layout: str = "bhsd"):
    """out, lse of the modified call by the PyTorch reference (f32 math on
    q's device; materializes the [Nq, Nk] scores)."""
    from flashmlir import _reference, _validate
    opts = _validate.check_options(p.kwargs.get("causal", False), p.kwargs.get("window"),
                                   p.kwargs.get("scale"), p.kwargs.get("softcap"), p.D)
    bhsd = (lambda t: t) if layout == "bhsd" else (lambda t: t.transpose(1, 2))
    o, lse = _reference.attention_modified(bhsd(q), bhsd(k), bhsd(v), opts.mask, opts.scale,
                                           opts.softcap, case.score_mod, case.mask_mod)
    return bhsd(o), lse
