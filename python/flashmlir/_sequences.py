"""Packed sequences and paged key/value caches on torch tensors:
`flashmlir.attention_varlen` (FlashAttention's flash_attn_varlen_func
layout; differentiable through the packed backward kernels of fa-compile
--form=varlen --kind=backward) and `flashmlir.attention_with_kvcache`
(flash_attn_with_kvcache's, forward only).

They run the kernels of fa-compile's --form=varlen and --form=paged
manifests through the dense path's machinery: a launch plan per call
signature (shapes, strides, dtypes, devices, options, max_seqlen_q), made
with the full validation on the first call, whose steady state writes the
tensors' addresses into the packed parameters and issues the launch (the
native launcher when present): no host synchronisation and no device
allocation but the outputs (and a split-KV decode's workspace), so calls
can be captured in CUDA graphs. cu_seqlens, page tables and cache lengths
are never read on the host.

CPU tensors run a per-sequence PyTorch reference (`_reference`), meta and
fake tensors the custom ops' fake implementations (torch.compile traces
torch.ops.flashmlir.attention_varlen / attention_with_kvcache).

A kernel gets FlashAttention's [T, H, D] / [B, N, H, D] tensors as [H, T, D]
/ [B, H, N, D] views (transposes: same data pointer, strides swapped), and
a [num_pages, page_size, Hkv, D] cache as [P, Hkv, S, D]. Since a view has
its tensor's data pointer and storage offset, a plan binds the caller's
tensors themselves (the view strides are part of the plan).
"""

from __future__ import annotations

import math
import numbers
import os
import threading
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _cuda, _kernels, _launch, _plan, _reference
from . import _interface as I
from . import _manifest as M
from . import _validate as V
from ._errors import KernelNotFoundError, UnsupportedError

_VARLEN_TENSORS = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "out", "lse")
_PAGED_TENSORS = ("q", "k_cache", "v_cache", "cache_seqlens", "page_table", "out", "lse")
_EMPTY, _NO_KEYS, _LAUNCH = I._EMPTY, I._NO_KEYS, I._LAUNCH

# Page sizes tried for a contiguous cache when no paged kernel exists yet
# (then compiled on demand), largest first: the variant set's.
_FALLBACK_PAGE_SIZES = (256, 64, 16)

_NO_GRAD = ("has no backward (there are no paged backward kernels): call it under "
            "torch.no_grad() or on tensors that do not require grad; for training on packed "
            "sequences use flashmlir.attention_varlen, which is differentiable")

# The differentiable varlen fallback (per-sequence dense attention) warns
# once per process.
_warned_fallback = [False]
FALLBACK_WARNING = (
    "flashmlir.attention_varlen: q, k or v requires grad and {why}, so this call runs "
    "flashmlir.attention (dense kernels, forward and backward) on each sequence's slices. It reads cu_seqlens_q/k on the host (a "
    "synchronisation; not CUDA-graph capturable, not traceable by torch.compile) and "
    "launches per sequence. (Warned once.)")


def _check_tensor(name, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")


def _check_device(what, named) -> torch.device:
    """One device, of a type the entries take; returns it."""
    dev = named[0][1].device
    for n, t in named:
        if t.device.type not in (I.KERNEL_DEVICE_TYPE, "cpu", "meta"):
            raise ValueError(f"{n} is on device '{t.device}'; flashmlir.{what} needs CUDA "
                             "tensors (CPU tensors run the PyTorch reference)")
        if t.device != dev:
            raise ValueError(f"{n} is on {t.device} but {named[0][0]} on {dev}: every tensor "
                             f"of flashmlir.{what} must be on one device")
    return dev


def _check_inputs(what, names, tensors):
    for n, t in zip(names, tensors):
        _check_tensor(n, t)
    dts = [t.dtype for t in tensors]
    if len(set(dts)) != 1:
        raise TypeError(f"{', '.join(names[:-1])} and {names[-1]} must have one dtype, got "
                        + ", ".join(str(d) for d in dts))
    if dts[0] not in I._DTYPES:
        raise TypeError(f"flashmlir.{what} supports float16 and bfloat16, got {dts[0]}")


def _check_index(name, t, rank, dims_text) -> None:
    """An int32 tensor of `rank` dims: cu_seqlens, page tables, lengths."""
    _check_tensor(name, t)
    if t.dtype != torch.int32:
        raise TypeError(f"{name} must be torch.int32, got {t.dtype}")
    if t.dim() != rank:
        raise ValueError(f"{name} must have {rank} dimension{'s' if rank > 1 else ''} "
                         f"{dims_text}, got shape {tuple(t.shape)}")


def _check_contiguous_index(name, t) -> None:
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous (strides {tuple(t.stride())} for shape "
                         f"{tuple(t.shape)}); call .contiguous() first")


def _check_head_dims(d, dv) -> None:
    for n, x in (("q/k", d), ("v", dv)):
        if x < 8 or x > V.MAX_HEAD_DIM or x % 8:
            raise ValueError(f"unsupported head dim {x} of {n}: it must be a multiple of 8 "
                             f"in [8, {V.MAX_HEAD_DIM}]")


def _check_heads(hq, hkv) -> None:
    if hkv == 0 and hq > 0:
        raise ValueError(f"k and v have 0 heads but q has {hq}")
    if hkv > 0 and hq % hkv:
        raise ValueError(f"the number of query heads ({hq}) must be a multiple of the "
                         f"number of key/value heads ({hkv})")


def _check_operand(name, t, rows_aligned=True) -> None:
    V.check_strided(name, tuple(t.shape), tuple(t.stride()), t.data_ptr(), t.element_size(),
                    rows_aligned=rows_aligned)


def _scalars(opts: V.Options):
    left, right = opts.mask
    return {**M.score_scalars(opts.scale, opts.softcap),
            "window_left": left, "window_right": right, "causal": int(right == 0)}


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _needs_grad(*ts) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in ts)


def _window_arg(wl, wr):
    return None if (wl, wr) == (-1, -1) else (wl, wr)


# ---------------------------------------------------------------------------
# attention_varlen
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _VarlenCall:
    B: int
    Hq: int
    Hkv: int
    Tq: int
    Tk: int
    D: int
    Dv: int
    max_seqlen_q: int
    opts: V.Options
    dtype: torch.dtype
    device: torch.device

    def env(self):
        return {"B1": self.B + 1, "Hq": self.Hq, "Hkv": self.Hkv, "Tq": self.Tq,
                "Tk": self.Tk, "D": self.D, "Dv": self.Dv,
                "G": self.Hq // self.Hkv if self.Hkv else 0,
                # (no sequence has more queries than Tq)
                "max_seqlen_q": min(self.max_seqlen_q, self.Tq)}

    def request(self, kind: str = "forward") -> _kernels.KernelRequest:
        return _kernels.KernelRequest(kind, I._DTYPES[self.dtype], self.D, self.Dv,
                                      self.opts.mask, self.opts.softcap, self.opts.scale,
                                      form=M.VARLEN)

    def backward_env(self, max_seqlen_k):
        """The backward's names: the forward's plus max_seqlen_k (the key
        blocks of its grid; Tk when not given; at least one block)."""
        mk = self.Tk if max_seqlen_k is None else max(min(int(max_seqlen_k), self.Tk), 1)
        return {**self.env(), "max_seqlen_k": mk}

    @property
    def out_shape(self):
        return (self.Tq, self.Hq, self.Dv)

    @property
    def lse_shape(self):
        return (self.Hq, self.Tq)


def _validate_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     causal, window, scale, softcap, check_strides=True) -> _VarlenCall:
    what = "attention_varlen"
    _check_inputs(what, ("q", "k", "v"), (q, k, v))
    for n, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 3:
            raise ValueError(f"{n} must have 3 dimensions [total_tokens, heads, head_dim] "
                             f"(FlashAttention's packed layout), got shape {tuple(t.shape)}")
    _check_index("cu_seqlens_q", cu_seqlens_q, 1, "[batch + 1]")
    _check_index("cu_seqlens_k", cu_seqlens_k, 1, "[batch + 1]")
    dev = _check_device(what, (("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q),
                               ("cu_seqlens_k", cu_seqlens_k)))
    b1 = cu_seqlens_q.shape[0]
    if b1 < 1 or cu_seqlens_k.shape[0] != b1:
        raise ValueError(f"cu_seqlens_q and cu_seqlens_k must have batch + 1 >= 1 entries each "
                         f"(cumulative offsets starting at 0), got {cu_seqlens_q.shape[0]} and "
                         f"{cu_seqlens_k.shape[0]}")
    tq, hq, d = q.shape
    tk, hkv, dk = k.shape
    tv, hv, dv = v.shape
    if tv != tk:
        raise ValueError(f"k and v must have the same number of tokens, got {tk} and {tv}")
    if hv != hkv:
        raise ValueError(f"k and v must have the same number of heads, got {hkv} and {hv}")
    if dk != d:
        raise ValueError(f"q and k must have the same head dim, got {d} and {dk}")
    _check_heads(hq, hkv)
    _check_head_dims(d, dv)
    for n, t in (("q", tq), ("k/v", tk)):
        if t >= V.MAX_SEQUENCE_LENGTH:
            raise ValueError(f"{n} has {t} tokens: the kernels compute indices in 32 bits and "
                             f"take at most {V.MAX_SEQUENCE_LENGTH - 1}")
    # Under torch.compile max_seqlen_q may be symbolic: checked on the real call.
    if _is_int(max_seqlen_q):
        max_seqlen_q = int(max_seqlen_q)
        if max_seqlen_q < 1 and tq > 0 and b1 > 1:
            raise ValueError(f"max_seqlen_q must be a positive int (at least the query count "
                             f"of every sequence), got {max_seqlen_q}")
        if max_seqlen_q < 0 or max_seqlen_q >= V.MAX_SEQUENCE_LENGTH:
            raise ValueError(f"max_seqlen_q must be in [1, {V.MAX_SEQUENCE_LENGTH - 1}], got "
                             f"{max_seqlen_q}")
    elif not isinstance(max_seqlen_q, torch.SymInt):
        raise TypeError(f"max_seqlen_q must be a Python int (the largest query count of a "
                        f"sequence; it is not read from cu_seqlens_q, which would synchronize), "
                        f"got {type(max_seqlen_q).__name__}")
    if max_seqlen_k is not None and not isinstance(max_seqlen_k, torch.SymInt):
        if not _is_int(max_seqlen_k) or max_seqlen_k < 0:
            raise TypeError(f"max_seqlen_k must be None or an int >= 0, got {max_seqlen_k!r}")
    opts = V.check_options(causal, window, scale, softcap, d)
    if check_strides:
        for n, t in (("q", q), ("k", k), ("v", v)):
            _check_operand(n, t)
        for n, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
            _check_contiguous_index(n, t)
            _check_operand(n, t, rows_aligned=False)
    return _VarlenCall(b1 - 1, hq, hkv, tq, tk, d, dv,
                       max_seqlen_q if _is_int(max_seqlen_q) else 0, opts, q.dtype, dev)


def _outputs(q, c, out, lse):
    """out and lse for a plan: the caller's (checked) or new ones."""
    if out is None:
        out = q.new_empty(c.out_shape)
    else:
        _check_out("out", out, c.out_shape, c.dtype, c.device)
    if lse is None:
        lse = q.new_empty(c.lse_shape, dtype=torch.float32)
    else:
        _check_out("lse", lse, c.lse_shape, torch.float32, c.device, rows_aligned=False)
    return out, lse


def _check_out(name, t, shape, dtype, device, rows_aligned=True) -> None:
    _check_tensor(name, t)
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")
    if t.dtype != dtype or t.device != device:
        raise ValueError(f"{name} must be {dtype} on {device}, got {t.dtype} on {t.device}")
    if t.device.type != "meta":
        _check_operand(name, t, rows_aligned)


class _VarlenPlan:
    """A validated varlen call: its outputs' shapes and the kernel's
    LaunchPlan (bound to the call's own [T, H, D] tensors)."""

    __slots__ = ("call", "mode", "launch", "out_shape", "lse_shape", "ordinal", "seq",
                 "ws_bytes", "ws_zeroed", "_spec", "bwd", "_has_bwd")

    def __init__(self, q, k, v, cu_q, cu_k, c: _VarlenCall, out=None, lse=None):
        self.call = c
        self.ordinal = I._device_ordinal(c.device)
        self.out_shape, self.lse_shape = c.out_shape, c.lse_shape
        self.launch = self.seq = self._spec = None
        self.bwd, self._has_bwd = {}, None
        out, lse = _outputs(q, c, out, lse)
        if c.B == 0 or c.Tq == 0 or c.Hq == 0 or c.max_seqlen_q == 0:
            self.mode = _EMPTY      # no query row of any sequence
            return
        if c.Tk == 0:
            self.mode = _NO_KEYS    # every sequence is keyless: out = 0, lse = +inf
            return
        self.mode = _LAUNCH
        info = _cuda.device_info(self.ordinal)
        spec = _kernels.default_registry().find(c.request(), info.cc)
        tensors = {"q": q.transpose(0, 1), "k": k.transpose(0, 1), "v": v.transpose(0, 1),
                   "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, "out": out.transpose(0, 1),
                   "lse": lse}
        self._spec = spec
        if spec.is_multi_launch:
            # A workspace (the dynamic tile scheduler's counter, zeroed per
            # call on the call's stream): the launches as a PlanSequence.
            env = {**c.env(), "SMS": _launch.multiprocessors(info.sm_count)}
            self.ws_zeroed = spec.zeroed_workspace
            self.seq, _, _, self.ws_bytes = I._multi_launch_sequence(
                spec, self.ordinal, tensors, env, _scalars(c.opts),
                _VARLEN_TENSORS + (I._WORKSPACE,), c.device)
            return
        prep = _launch.prepare(_kernels.load_kernel(spec, self.ordinal),
                               {**tensors, **_scalars(c.opts)}, c.env())
        self.launch = _plan.LaunchPlan(prep, _VARLEN_TENSORS)

    @property
    def spec(self):
        return self._spec

    def run(self, q, k, v, cu_q, cu_k, out=None, lse=None):
        if out is None:
            out = q.new_empty(self.out_shape)
        if lse is None:
            lse = q.new_empty(self.lse_shape, dtype=torch.float32)
        if self.mode is _LAUNCH and self.seq is not None:
            ws = (q.new_zeros if self.ws_zeroed else q.new_empty)(self.ws_bytes,
                                                                  dtype=torch.uint8)
            self.seq.launch((q, k, v, cu_q, cu_k, out, lse, ws), I._current_stream(self.ordinal))
        elif self.mode is _LAUNCH:
            # The tensors themselves: their [H, T, D] views share pointer and offset.
            self.launch.launch((q, k, v, cu_q, cu_k, out, lse), I._current_stream(self.ordinal))
        elif self.mode is _NO_KEYS or self.call.Tq:
            out.zero_()
            lse.fill_(math.inf)
        return out, lse

    def has_backward(self) -> bool:
        """Whether a packed backward kernel serves this call (looked up, and
        compiled on demand where the registry can, once per plan)."""
        if self._has_bwd is None:
            if self.mode is not _LAUNCH:
                self._has_bwd = True      # (no launch: zero gradients)
            else:
                try:
                    _kernels.default_registry().find(
                        self.call.request("backward"), _cuda.device_info(self.ordinal).cc)
                    self._has_bwd = True
                except KernelNotFoundError:
                    self._has_bwd = False
        return self._has_bwd

    def backward(self, q, k, v, cu_q, cu_k, out, lse, dout, max_seqlen_k):
        """dq, dk, dv (contiguous, shaped like q, k, v) for a dout of out's
        shape, through a backward plan cached per dout kind and max_seqlen_k."""
        key = None
        if isinstance(dout, torch.Tensor):
            key = (max_seqlen_k,) + I._dout_key(dout, out, lse, False)
            plan = self.bwd.get(key)
            if plan is not None and (plan.clone_dout or
                                     dout.data_ptr() % _launch.POINTER_ALIGNMENT == 0):
                return plan.run(q, k, v, cu_q, cu_k, out, lse, dout)
        checked = _check_dout(dout, self.call)
        clone = key is not None and checked is not dout and not I._strides_ok(dout)
        ckey = key if clone else (max_seqlen_k,) + I._dout_key(checked, out, lse, False)
        plan = self.bwd.get(ckey)
        if plan is None:
            plan = _VarlenBackwardPlan(self, q, k, v, cu_q, cu_k, out, lse, checked,
                                       max_seqlen_k, clone)
            if len(self.bwd) >= 64:
                self.bwd.clear()
            self.bwd[ckey] = plan
        return plan.run(q, k, v, cu_q, cu_k, out, lse, checked, copied=True)


def _check_dout(dout, c: _VarlenCall) -> torch.Tensor:
    """dout as the packed backward needs it (see _interface.checked_dout)."""
    return I.checked_dout(dout, c.out_shape, c.dtype, c.device)


_VARLEN_BACKWARD_TENSORS = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "out", "dout",
                            "lse", "dq", "dk", "dv")


class _VarlenBackwardPlan:
    """The packed backward of one varlen forward plan for one kind of dout
    and one max_seqlen_k: the manifest's launches (delta, zeroing of the
    rows of no sequence, the key-block kernel, dq's conversion) as a
    PlanSequence over the [H, T, D] views, and the workspace's size (one
    byte buffer per call, so captured or concurrent calls share nothing).
    The kernels write every row of dq, dk and dv (0 outside every
    sequence), so the gradients are allocated uninitialised."""

    __slots__ = ("mode", "seq", "ws_bytes", "ordinal", "clone_dout")

    def __init__(self, fwd: _VarlenPlan, q, k, v, cu_q, cu_k, out, lse, dout, max_seqlen_k,
                 clone_dout):
        c = fwd.call
        self.ordinal, self.clone_dout = fwd.ordinal, clone_dout
        self.seq, self.ws_bytes = None, 0
        if fwd.mode is not _LAUNCH:
            self.mode = fwd.mode      # no query row, or no key: zero gradients
            return
        self.mode = _LAUNCH
        spec = _kernels.default_registry().find(c.request("backward"),
                                                _cuda.device_info(self.ordinal).cc)
        dq, dk, dv = (t.new_empty(t.shape) for t in (q, k, v))
        t = lambda x: x.transpose(0, 1)
        tensors = {"q": t(q), "k": t(k), "v": t(v), "cu_seqlens_q": cu_q,
                   "cu_seqlens_k": cu_k, "out": t(out), "dout": t(dout), "lse": lse,
                   "dq": t(dq), "dk": t(dk), "dv": t(dv)}
        env = c.backward_env(max_seqlen_k)
        scalars = {**_scalars(c.opts), "max_seqlen_q": env["max_seqlen_q"],
                   "max_seqlen_k": env["max_seqlen_k"]}
        self.seq, _, _, self.ws_bytes = I._multi_launch_sequence(
            spec, self.ordinal, tensors, env, scalars,
            _VARLEN_BACKWARD_TENSORS + (I._WORKSPACE,), c.device)

    def run(self, q, k, v, cu_q, cu_k, out, lse, dout, copied=False):
        if self.clone_dout and not copied:
            dout = dout.clone(memory_format=torch.contiguous_format)
        dq, dk, dv = (t.new_empty(t.shape) for t in (q, k, v))
        if self.mode is not _LAUNCH:
            for g in (dq, dk, dv):
                g.zero_()
            return dq, dk, dv
        ws = q.new_empty(self.ws_bytes, dtype=torch.uint8)
        if I.poison_grads():
            for g in (dq, dk, dv):
                g.fill_(math.nan)
            ws.fill_(255)   # all-ones bytes: NaN in every float type
        self.seq.launch((q, k, v, cu_q, cu_k, out, dout, lse, dq, dk, dv, ws),
                        I._current_stream(self.ordinal))
        return dq, dk, dv


_plans = {}
_plans_lock = threading.Lock()


def _remember(key, plan):
    if key is None:
        return
    with _plans_lock:
        if len(_plans) >= I._MAX_PLANS:
            _plans.clear()
        _plans[key] = plan


def _clear():
    with _plans_lock:
        _plans.clear()
        _page_tables.clear()


I._cache_hooks.append(_clear)


def _tkey(t):
    return None if t is None else (type(t), t.shape, t.stride(), t.dtype, t.device)


def _varlen_plan(q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k, causal, window, scale,
                 softcap, out=None, lse=None) -> Optional[_VarlenPlan]:
    """The plan of a call on plain kernel-device tensors (made with the full
    validation on first use); None for CPU, meta and fake tensors."""
    try:
        w = window if window is None or type(window) is tuple else tuple(window)
        key = ("varlen", _tkey(q), _tkey(k), _tkey(v), _tkey(cu_q), _tkey(cu_k),
               max_seqlen_q, causal, w, scale, softcap, _tkey(out), _tkey(lse))
        plan = _plans.get(key)
    except (AttributeError, TypeError):
        key = plan = None
    if plan is not None:
        return plan
    if not I._kernel_tensors(q, k, v, cu_q, cu_k, out, lse):
        _validate_varlen(q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k, causal, window,
                         scale, softcap, check_strides=False)
        return None
    c = _validate_varlen(q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k, causal, window,
                         scale, softcap)
    plan = _VarlenPlan(q, k, v, cu_q, cu_k, c, out, lse)
    _remember(key, plan)
    return plan


def varlen_impl(q, k, v, cu_q, cu_k, max_seqlen_q, causal, window, scale, softcap):
    """The forward on real tensors: the kernels for CUDA tensors, the
    per-sequence reference for CPU ones. Returns out [Tq, Hq, Dv], lse [Hq, Tq]."""
    plan = _varlen_plan(q, k, v, cu_q, cu_k, max_seqlen_q, None, causal, window, scale, softcap)
    if plan is not None:
        return plan.run(q, k, v, cu_q, cu_k)
    c = _validate_varlen(q, k, v, cu_q, cu_k, max_seqlen_q, None, causal, window, scale,
                         softcap)
    return _reference.attention_varlen(q, k, v, cu_q, cu_k, c.opts.mask, c.opts.scale,
                                       c.opts.softcap)


def varlen_fake(q, k, v, cu_q, cu_k, max_seqlen_q, causal, window, scale, softcap):
    window, scale, softcap = I._traced_options(window, scale, softcap)
    c = _validate_varlen(q, k, v, cu_q, cu_k, max_seqlen_q, None, causal, window, scale,
                         softcap, check_strides=False)
    return q.new_empty(c.out_shape), q.new_empty(c.lse_shape, dtype=torch.float32)


def varlen_backward_impl(dout, q, k, v, cu_q, cu_k, out, lse, max_seqlen_q, max_seqlen_k,
                         causal, window, scale, softcap):
    """dq, dk, dv (contiguous, shaped like q, k, v) on real tensors: the
    packed backward kernels for CUDA tensors, the per-sequence reference for
    CPU ones."""
    plan = _varlen_plan(q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k, causal, window,
                        scale, softcap)
    if plan is not None:
        return plan.backward(q, k, v, cu_q, cu_k, out, lse, dout, max_seqlen_k)
    c = _validate_varlen(q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k, causal, window,
                         scale, softcap)
    dout = _check_dout(dout, c)
    grads = _reference.attention_varlen_backward(dout, q, k, v, cu_q, cu_k, c.opts.mask,
                                                 c.opts.scale, c.opts.softcap)
    return tuple(g.contiguous() for g in grads)


def varlen_backward_fake(dout, q, k, v, cu_q, cu_k, out, lse, max_seqlen_q, max_seqlen_k,
                         causal, window, scale, softcap):
    window, scale, softcap = I._traced_options(window, scale, softcap)
    _validate_varlen(q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k, causal, window, scale,
                     softcap, check_strides=False)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


class _VarlenAttention(torch.autograd.Function):
    """Eager autograd over a varlen plan on CUDA tensors (torch.compile and
    CPU tensors use the custom ops, which run the same plans)."""

    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, plan, max_seqlen_k):
        out, lse = plan.run(q, k, v, cu_q, cu_k)
        ctx.set_materialize_grads(False)   # lse is not differentiable: no zero dlse
        ctx.save_for_backward(q, k, v, cu_q, cu_k, out, lse)
        ctx.plan, ctx.max_seqlen_k = plan, max_seqlen_k
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        if torch.is_grad_enabled():        # create_graph=True: refuse a double backward
            return _once_varlen_backward(ctx, dout, dlse)
        return _varlen_backward(ctx, dout, dlse)


def _varlen_backward(ctx, dout, dlse):
    q, k, v, cu_q, cu_k, out, lse = ctx.saved_tensors
    dq, dk, dv = ctx.plan.backward(q, k, v, cu_q, cu_k, out, lse, dout, ctx.max_seqlen_k)
    need = ctx.needs_input_grad
    return (dq if need[0] else None, dk if need[1] else None, dv if need[2] else None,
            None, None, None, None)


_once_varlen_backward = torch.autograd.function.once_differentiable(_varlen_backward)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k=None,
                     causal=False, window=None, scale=None, softcap=None, return_lse=False,
                     out=None, *, lse=None, deterministic=False):
    """Attention over packed variable-length sequences (FlashAttention's
    flash_attn_varlen_func layout), differentiable in q, k and v.

    attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                     max_seqlen_k=None, causal=False, window=None, scale=None,
                     softcap=None, return_lse=False, out=None, *, lse=None,
                     deterministic=False)

    Args:
      q: [total_q, Hq, D] float16/bfloat16: the queries of every sequence,
         one after the other.
      k, v: [total_k, Hkv, D] and [total_k, Hkv, Dv]; Hq a multiple of Hkv.
      cu_seqlens_q, cu_seqlens_k: int32 [B + 1] on q's device, contiguous:
         sequence b is queries cu_seqlens_q[b]..cu_seqlens_q[b + 1] against
         keys cu_seqlens_k[b]..cu_seqlens_k[b + 1] (non-decreasing, from 0).
      max_seqlen_q: a Python int at least every sequence's query count. It
         sizes the launch grids and is not checked against cu_seqlens_q
         (that would read it on the host, a synchronisation): a smaller
         value silently leaves the queries of a sequence beyond it
         unwritten (and their gradients missing), as in FlashAttention.
      max_seqlen_k: None or an int at least every sequence's key count: it
         sizes the backward's grid (key blocks); None takes total_k (right
         for any lengths, with idle blocks). Too small a value leaves the
         gradients of the keys beyond it wrong, as in FlashAttention.
      causal, window, scale, softcap: as flashmlir.attention, per sequence:
         causal and windows are aligned to each sequence's bottom-right
         corner (query i of a sequence of nq queries and nk keys sees key j
         iff j <= i + nk - nq).
      return_lse: also return lse [Hq, total_q] (float32, natural log; not
         differentiable).
      out, lse: optional preallocated outputs ([total_q, Hq, Dv] and
         float32 [Hq, total_q]); not allowed when q, k or v requires grad.
      deterministic: with gradients, run dense deterministic backward
         kernels per sequence instead (there is no deterministic packed
         backward): it reads cu_seqlens on the host, a synchronisation, is
         neither CUDA-graph capturable nor traceable by torch.compile
         (UnsupportedError there), and warns once.

    Rows that see no key (an empty key sequence, a window) give out = 0 and
    lse = +inf. Rows outside every sequence (beyond cu_seqlens_q[-1]) are
    not written by the forward on the GPU (the CPU reference gives 0 /
    +inf); their gradients, and those of keys of no sequence, are 0. Last
    dimensions must be contiguous and pointers 16-byte aligned. CPU
    tensors run a per-sequence PyTorch reference (it reads and checks
    cu_seqlens); under torch.compile this is the custom op
    torch.ops.flashmlir.attention_varlen (its backward
    attention_varlen_backward). Forward and backward are CUDA-graph
    capturable. Where no packed backward kernel exists for a configuration
    (and fa-compile cannot build one) an eager call with gradients falls
    back to dense attention per sequence, with a warning.

    Returns: out [total_q, Hq, Dv], or (out, lse) when return_lse.
    """
    grad = _needs_grad(q, k, v)
    if grad and (out is not None or lse is not None):
        raise ValueError("out= and lse= cannot be used when q, k or v requires grad")
    if grad and V.check_bool("deterministic", deterministic):
        # No deterministic packed backward: the dense deterministic kernels
        # per sequence (reads cu_seqlens on the host).
        if torch.compiler.is_compiling():
            raise UnsupportedError(
                "flashmlir.attention_varlen(deterministic=True) with gradients runs dense "
                "attention per sequence (there is no deterministic packed backward kernel), "
                "which reads cu_seqlens on the host and cannot be traced by torch.compile")
        o, l = _varlen_by_sequence(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                   max_seqlen_k, causal, window, scale, softcap, True)
        return (o, l) if return_lse else o
    if not torch.compiler.is_compiling():
        plan = _varlen_plan(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            causal, window, scale, softcap, out, lse)
        if plan is not None:
            if not grad:
                o, l = plan.run(q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse)
            elif plan.has_backward():
                o, l = _VarlenAttention.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, plan,
                                              max_seqlen_k)
            else:
                o, l = _varlen_by_sequence(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                           max_seqlen_k, causal, window, scale, softcap,
                                           False)
            return (o, l) if return_lse else o
        V.check_options(causal, window, scale, softcap, 8)   # messages before the dispatcher
    wl, wr = (-1, -1) if window is None else window
    o, l = _op_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                      wl, wr, scale, softcap)
    o, l = I.copy_into(o, l, out, lse)
    return (o, l) if return_lse else o


def _varlen_by_sequence(q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k, causal, window,
                        scale, softcap, deterministic):
    """The differentiable fallback: flashmlir.attention on each sequence's
    [1, n, H, D] slices (bshd views), concatenated."""
    from . import _interface
    c = _validate_varlen(q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k, causal, window,
                         scale, softcap, check_strides=False)
    if not _warned_fallback[0]:
        _warned_fallback[0] = True
        import warnings
        warnings.warn(FALLBACK_WARNING.format(
            why="deterministic=True (there is no deterministic packed backward kernel)"
            if deterministic else "there is no packed backward kernel for this configuration"),
            RuntimeWarning, stacklevel=3)
    cq, ck = [int(x) for x in cu_q.tolist()], [int(x) for x in cu_k.tolist()]
    for name, cu, total in (("cu_seqlens_q", cq, c.Tq), ("cu_seqlens_k", ck, c.Tk)):
        if cu[0] < 0 or any(b < a for a, b in zip(cu, cu[1:])) or cu[-1] > total:
            raise ValueError(f"{name} must be non-decreasing offsets in [0, {total}], got "
                             f"{cu[:8]}{' ...' if len(cu) > 8 else ''}")
    outs, lses, at = [], [], 0
    for b in range(c.B):
        q0, q1, k0, k1 = cq[b], cq[b + 1], ck[b], ck[b + 1]
        if q0 > at:     # rows of no sequence (between sequences)
            outs.append(q.new_zeros((q0 - at, c.Hq, c.Dv)))
            lses.append(q.new_full((c.Hq, q0 - at), math.inf, dtype=torch.float32))
        o, l = _interface.attention(q[q0:q1][None], k[k0:k1][None], v[k0:k1][None],
                                    causal=causal, window=window, scale=scale, softcap=softcap,
                                    return_lse=True, layout="bshd", deterministic=deterministic)
        outs.append(o[0])
        lses.append(l[0])
        at = max(at, q1)
    if at < c.Tq:
        outs.append(q.new_zeros((c.Tq - at, c.Hq, c.Dv)))
        lses.append(q.new_full((c.Hq, c.Tq - at), math.inf, dtype=torch.float32))
    if not outs:
        return q.new_zeros(c.out_shape), q.new_full(c.lse_shape, math.inf, dtype=torch.float32)
    return torch.cat(outs, 0), torch.cat(lses, 1)


# ---------------------------------------------------------------------------
# attention_with_kvcache
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _PagedCall:
    B: int
    Hq: int
    Hkv: int
    Nq: int
    P: int
    S: int
    MaxPages: int
    D: int
    Dv: int
    opts: V.Options
    dtype: torch.dtype
    device: torch.device
    contiguous: bool          # a [B, Nmax, Hkv, D] cache (no page table)
    Nmax: int = 0

    def env(self):
        return {"B": self.B, "Hq": self.Hq, "Hkv": self.Hkv, "Nq": self.Nq, "P": self.P,
                "S": self.S, "MaxPages": self.MaxPages, "D": self.D, "Dv": self.Dv,
                "G": self.Hq // self.Hkv if self.Hkv else 0}

    def request(self, page_size=None, split_kv=False, mask=None) -> _kernels.KernelRequest:
        return _kernels.KernelRequest("forward", I._DTYPES[self.dtype], self.D, self.Dv,
                                      self.opts.mask if mask is None else mask,
                                      self.opts.softcap, self.opts.scale, split_kv=split_kv,
                                      form=M.PAGED,
                                      page_size=page_size if page_size else self.S)

    @property
    def out_shape(self):
        return (self.B, self.Nq, self.Hq, self.Dv)

    @property
    def lse_shape(self):
        return (self.B, self.Hq, self.Nq)


def _check_page_size(s, where) -> None:
    if s < M.PAGE_SIZE_MULTIPLE or s > M.MAX_PAGE_SIZE or s % M.PAGE_SIZE_MULTIPLE:
        raise UnsupportedError(
            f"{where} {s}: the paged kernels take page sizes that are multiples of "
            f"{M.PAGE_SIZE_MULTIPLE} in [{M.PAGE_SIZE_MULTIPLE}, {M.MAX_PAGE_SIZE}]")


def _validate_paged(q, k_cache, v_cache, cache_seqlens, page_table, causal, window, scale,
                    softcap, check_strides=True) -> _PagedCall:
    what = "attention_with_kvcache"
    _check_inputs(what, ("q", "k_cache", "v_cache"), (q, k_cache, v_cache))
    paged = page_table is not None
    cache_dims = "[num_pages, page_size, Hkv, D]" if paged else "[B, Nmax, Hkv, D]"
    if q.dim() != 4:
        raise ValueError(f"q must have 4 dimensions [B, Nq, Hq, D], got shape {tuple(q.shape)}")
    for n, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dim() != 4:
            raise ValueError(f"{n} must have 4 dimensions {cache_dims}"
                             + ("" if paged else " (or pass a page_table)")
                             + f", got shape {tuple(t.shape)}")
    _check_index("cache_seqlens", cache_seqlens, 1, "[B]")
    named = [("q", q), ("k_cache", k_cache), ("v_cache", v_cache),
             ("cache_seqlens", cache_seqlens)]
    if paged:
        _check_index("page_table", page_table, 2, "[B, max_pages]")
        named.append(("page_table", page_table))
    dev = _check_device(what, named)
    b, nq, hq, d = q.shape
    p, s, hkv, dk = k_cache.shape
    vp, vs, vh, dv = v_cache.shape
    if (vp, vs) != (p, s):
        raise ValueError(f"k_cache and v_cache must have the same "
                         + ("pages and page size" if paged else "batch and length")
                         + f", got {tuple(k_cache.shape[:2])} and {tuple(v_cache.shape[:2])}")
    if vh != hkv:
        raise ValueError(f"k_cache and v_cache must have the same number of heads, got {hkv} "
                         f"and {vh}")
    if dk != d:
        raise ValueError(f"q and k_cache must have the same head dim, got {d} and {dk}")
    _check_heads(hq, hkv)
    _check_head_dims(d, dv)
    if cache_seqlens.shape[0] != b:
        raise ValueError(f"cache_seqlens must have one entry per batch ({b}), got "
                         f"{cache_seqlens.shape[0]}")
    nmax = 0
    if paged:
        if page_table.shape[0] != b:
            raise ValueError(f"page_table must have one row per batch ({b}), got shape "
                             f"{tuple(page_table.shape)}")
        max_pages = page_table.shape[1]
        if max_pages * s >= V.MAX_SEQUENCE_LENGTH:
            raise ValueError(f"page_table has {max_pages} pages of {s} keys per sequence: the "
                             f"kernels take at most {V.MAX_SEQUENCE_LENGTH - 1} keys")
        _check_page_size(s, "page size (k_cache.shape[1])")
    else:
        if p != b:
            raise ValueError(f"k_cache [B, Nmax, Hkv, D] must have q's batch size {b}, got "
                             f"{p} (a paged cache needs a page_table)")
        nmax = s
        if nmax % M.PAGE_SIZE_MULTIPLE:
            raise UnsupportedError(
                f"a contiguous cache of {nmax} keys per sequence: the paged kernels serve it "
                f"as pages of a multiple of {M.PAGE_SIZE_MULTIPLE} keys that divides its "
                f"length; allocate the cache with a length that is a multiple of "
                f"{M.PAGE_SIZE_MULTIPLE} (cache_seqlens says how much of it is filled) or "
                "pass a page_table")
        if nmax >= V.MAX_SEQUENCE_LENGTH:
            raise ValueError(f"the cache length {nmax} is too long: the kernels take at most "
                             f"{V.MAX_SEQUENCE_LENGTH - 1} keys")
        max_pages = 0
    if nq >= V.MAX_SEQUENCE_LENGTH:
        raise ValueError(f"q has {nq} queries per sequence; at most "
                         f"{V.MAX_SEQUENCE_LENGTH - 1}")
    opts = V.check_options(causal, window, scale, softcap, d)
    if check_strides:
        for n, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
            _check_operand(n, t)
        idx = [("cache_seqlens", cache_seqlens)] + ([("page_table", page_table)] if paged else [])
        for n, t in idx:
            _check_contiguous_index(n, t)
            _check_operand(n, t, rows_aligned=False)
    if paged:
        return _PagedCall(b, hq, hkv, nq, p, s, max_pages, d, dv, opts, q.dtype, dev, False)
    return _PagedCall(b, hq, hkv, nq, 0, 0, 0, d, dv, opts, q.dtype, dev, True, nmax)


_page_tables = {}


def contiguous_page_table(b: int, pages: int, device) -> torch.Tensor:
    """The page table of a contiguous [B, Nmax, Hkv, D] cache viewed as
    B * pages pages: batch i's pages i * pages .. (i + 1) * pages - 1. Made
    once per (B, pages, device) and kept (so steady-state calls allocate
    nothing for it)."""
    key = (b, pages, device)
    t = _page_tables.get(key)
    if t is None:
        t = torch.arange(b * pages, dtype=torch.int32, device=device).view(b, pages)
        with _plans_lock:
            _page_tables[key] = t
    return t


def _pages_view(name, t, s):
    """[B, Nmax, H, D] as [B * Nmax / S, S, H, D] (no copy)."""
    b, n = t.shape[:2]
    try:
        return t.view(b * n // s, s, *t.shape[2:])
    except RuntimeError:
        raise ValueError(f"{name} [B, Nmax, Hkv, D] without a page_table is served as pages of "
                         f"{s} keys, which needs its batch and sequence dimensions one stride "
                         f"apart (e.g. contiguous); got strides {tuple(t.stride())} for shape "
                         f"{tuple(t.shape)}: call .contiguous() or pass a page_table") from None


def _contiguous_page_size(c: _PagedCall, cc) -> int:
    """The largest page size of a paged kernel for this call that divides
    the cache length (else the largest of the variant set's, compiled on
    demand)."""
    have = _kernels.default_registry().page_sizes(c.request(page_size=16), cc)
    for s in list(have) + list(_FALLBACK_PAGE_SIZES):
        if c.Nmax % s == 0:
            return s
    return M.PAGE_SIZE_MULTIPLE


class _PagedPlan:
    """A validated paged call: output shapes and the kernel's LaunchPlan, or
    (decoding) the split-KV kernels' PlanSequence and workspace size. A
    contiguous cache keeps its page table here."""

    __slots__ = ("call", "mode", "launch", "seq", "ws_bytes", "out_shape", "lse_shape",
                 "ordinal", "table", "spec", "packed", "page_size")

    def __init__(self, q, k_cache, v_cache, seqlens, table, c: _PagedCall, out=None, lse=None):
        self.call = c
        self.ordinal = I._device_ordinal(c.device)
        self.out_shape, self.lse_shape = c.out_shape, c.lse_shape
        self.launch = self.seq = self.spec = self.table = None
        self.ws_bytes, self.packed, self.page_size = 0, False, c.S
        out, lse = _outputs(q, c, out, lse)
        if c.B == 0 or c.Nq == 0 or c.Hq == 0:
            self.mode = _EMPTY
            return
        info = _cuda.device_info(self.ordinal)
        if c.contiguous:
            if c.Nmax == 0:
                self.mode = _NO_KEYS
                return
            s = _contiguous_page_size(c, info.cc)
            pages = c.Nmax // s
            k_cache, v_cache = (_pages_view("k_cache", k_cache, s),
                                _pages_view("v_cache", v_cache, s))
            self.table = table = contiguous_page_table(c.B, pages, c.device)
            c = _PagedCall(c.B, c.Hq, c.Hkv, c.Nq, c.B * pages, s, pages, c.D, c.Dv, c.opts,
                           c.dtype, c.device, True, c.Nmax)
            self.call, self.page_size = c, s
        if c.P == 0 or c.MaxPages == 0:
            self.mode = _NO_KEYS
            return
        self.mode = _LAUNCH
        tensors = {"q": q.transpose(1, 2), "k_cache": k_cache.transpose(1, 2),
                   "v_cache": v_cache.transpose(1, 2), "cache_seqlens": seqlens,
                   "page_table": table, "out": out.transpose(1, 2), "lse": lse}
        if self._split(tensors, info):
            return
        spec = _kernels.default_registry().find(c.request(), info.cc)
        self.spec = spec
        prep = _launch.prepare(_kernels.load_kernel(spec, self.ordinal),
                               {**tensors, **_scalars(c.opts)}, c.env())
        self.launch = _plan.LaunchPlan(prep, _PAGED_TENSORS)

    def _split(self, tensors, info) -> bool:
        """The split-KV kernels for a decode-shaped call (few query rows, too
        few (batch, head) blocks to fill the device), as the dense path
        chooses them (_interface._WorkspaceForward.split); GQA-packed when no
        mask tells a group's rows apart."""
        if os.environ.get(I.SPLIT_KV_ENV, "1") == "0":
            return False
        c = self.call
        left, right = c.opts.mask
        sms = _launch.multiprocessors(info.sm_count)
        g = c.Hq // c.Hkv
        packed = (c.Hq > c.Hkv and g * c.Nq <= I._SPLIT_ROWS and left == -1
                  and (right == -1 or (right == 0 and c.Nq == 1)))
        if packed:
            grouped = {n: I._group_view(tensors[n], c.Hkv) for n in ("q", "out", "lse")}
            packed = all(t is not None for t in grouped.values())
        heads, rows = (c.Hkv, g * c.Nq) if packed else (c.Hq, c.Nq)
        if rows > I._SPLIT_ROWS or c.B * heads >= sms:
            return False
        request = c.request(split_kv=True, mask=(-1, -1) if packed else None)
        found = _kernels.default_registry().candidates(request, info.cc)
        if not found:     # (never compiled on demand: the plain kernel serves the call)
            return False
        spec = found[0]
        env = {**c.env(), "SMS": sms}
        scalars = _scalars(c.opts)
        if packed:
            env.update(Hq=c.Hkv, Nq=rows, G=1)
            tensors = {**tensors, **grouped}
            scalars.update(window_left=-1, window_right=-1, causal=0)
        self.seq, _, _, self.ws_bytes = I._multi_launch_sequence(
            spec, self.ordinal, tensors, env, scalars, _PAGED_TENSORS + (I._WORKSPACE,),
            c.device)
        self.spec, self.packed = spec, packed
        return True

    def run(self, q, k_cache, v_cache, seqlens, table, out=None, lse=None):
        if out is None:
            out = q.new_empty(self.out_shape)
        if lse is None:
            lse = q.new_empty(self.lse_shape, dtype=torch.float32)
        if table is None:
            table = self.table
        if self.seq is not None:
            ws = q.new_empty(self.ws_bytes, dtype=torch.uint8)
            self.seq.launch((q, k_cache, v_cache, seqlens, table, out, lse, ws),
                            I._current_stream(self.ordinal))
        elif self.launch is not None:
            self.launch.launch((q, k_cache, v_cache, seqlens, table, out, lse),
                               I._current_stream(self.ordinal))
        elif self.mode is _NO_KEYS:
            out.zero_()
            lse.fill_(math.inf)
        return out, lse


def _paged_plan(q, k_cache, v_cache, seqlens, table, causal, window, scale, softcap,
                out=None, lse=None) -> Optional[_PagedPlan]:
    try:
        w = window if window is None or type(window) is tuple else tuple(window)
        key = ("paged", _tkey(q), _tkey(k_cache), _tkey(v_cache), _tkey(seqlens), _tkey(table),
               causal, w, scale, softcap, _tkey(out), _tkey(lse))
        plan = _plans.get(key)
    except (AttributeError, TypeError):
        key = plan = None
    if plan is not None:
        return plan
    if not I._kernel_tensors(q, k_cache, v_cache, seqlens, table, out, lse):
        _validate_paged(q, k_cache, v_cache, seqlens, table, causal, window, scale, softcap,
                        check_strides=False)
        return None
    c = _validate_paged(q, k_cache, v_cache, seqlens, table, causal, window, scale, softcap)
    plan = _PagedPlan(q, k_cache, v_cache, seqlens, table, c, out, lse)
    _remember(key, plan)
    return plan


def kvcache_impl(q, k_cache, v_cache, seqlens, table, causal, window, scale, softcap):
    """The forward on real tensors: the kernels for CUDA tensors, the
    per-batch reference for CPU ones. Returns out [B, Nq, Hq, Dv], lse [B, Hq, Nq]."""
    plan = _paged_plan(q, k_cache, v_cache, seqlens, table, causal, window, scale, softcap)
    if plan is not None:
        return plan.run(q, k_cache, v_cache, seqlens, table)
    c = _validate_paged(q, k_cache, v_cache, seqlens, table, causal, window, scale, softcap)
    if table is None:   # one page per sequence
        table = torch.arange(c.B, dtype=torch.int32, device=q.device)[:, None]
    o, l = _reference.attention_paged(q.transpose(1, 2), k_cache.transpose(1, 2),
                                      v_cache.transpose(1, 2), table, seqlens, c.opts.mask,
                                      c.opts.scale, c.opts.softcap)
    return o.transpose(1, 2).contiguous(), l


def kvcache_fake(q, k_cache, v_cache, seqlens, table, causal, window, scale, softcap):
    window, scale, softcap = I._traced_options(window, scale, softcap)
    c = _validate_paged(q, k_cache, v_cache, seqlens, table, causal, window, scale, softcap,
                        check_strides=False)
    return q.new_empty(c.out_shape), q.new_empty(c.lse_shape, dtype=torch.float32)


def attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, page_table=None, causal=False,
                           window=None, scale=None, softcap=None, return_lse=False, *,
                           out=None, lse=None):
    """Attention of new queries against a key/value cache, paged or
    contiguous (FlashAttention's flash_attn_with_kvcache layouts), forward only.

    attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, page_table=None,
                           causal=False, window=None, scale=None, softcap=None,
                           return_lse=False)

    Args:
      q: [B, Nq, Hq, D] float16/bfloat16.
      k_cache, v_cache: with page_table, pages [num_pages, page_size, Hkv, D]
         (and Dv): batch b's key j is row j % page_size of page
         page_table[b, j // page_size]. The page size must be one the paged
         kernels are built for (the variant set: 16, 64, 256; others
         compiled on demand when fa-compile is available; a multiple of 16).
         Without page_table, a contiguous cache [B, Nmax, Hkv, D] (Nmax a
         multiple of 16), served by the paged kernels as pages of the
         largest compiled page size dividing Nmax (a view, no copy) with an
         identity page table made once per (B, Nmax / page size, device).
      cache_seqlens: int32 [B]: batch b attends to its first cache_seqlens[b]
         keys (at most max_pages * page_size, resp. Nmax; not checked on the
         GPU: no host read).
      page_table: int32 [B, max_pages], contiguous, entries < num_pages
         (pages past a batch's length are not read).
      causal, window, scale, softcap: as flashmlir.attention; causal and
         windows are aligned to each batch's bottom-right corner (query i
         of Nq sees key j iff j <= i + cache_seqlens[b] - Nq).
      return_lse: also return lse [B, Hq, Nq] (float32).
      out, lse: optional preallocated outputs ([B, Nq, Hq, Dv] and float32
         [B, Hq, Nq]).

    Few queries per sequence (decoding) with few (batch, head) pairs use the
    split-KV paged kernels when they exist (FLASHMLIR_SPLIT_KV=0: never),
    with a GQA group's heads packed into one query block when no mask tells
    its rows apart, as flashmlir.attention does. Rows that see no key give
    out = 0 and lse = +inf. Not differentiable (UnsupportedError when an
    input requires grad: no paged backward kernel). CUDA-graph capturable (a contiguous cache's page
    table is made on the first call of its shape: make that call before
    capturing). CPU tensors run a per-batch PyTorch reference.

    Returns: out [B, Nq, Hq, Dv], or (out, lse) when return_lse.
    """
    if _needs_grad(q, k_cache, v_cache):
        raise UnsupportedError(f"flashmlir.attention_with_kvcache {_NO_GRAD}")
    if not torch.compiler.is_compiling():
        plan = _paged_plan(q, k_cache, v_cache, cache_seqlens, page_table, causal, window,
                           scale, softcap, out, lse)
        if plan is not None:
            o, l = plan.run(q, k_cache, v_cache, cache_seqlens, page_table, out, lse)
            return (o, l) if return_lse else o
        V.check_options(causal, window, scale, softcap, 8)
    wl, wr = (-1, -1) if window is None else window
    o, l = _op_kvcache(q, k_cache, v_cache, cache_seqlens, page_table, causal, wl, wr, scale,
                       softcap)
    o, l = I.copy_into(o, l, out, lse)
    return (o, l) if return_lse else o


# ---------------------------------------------------------------------------
# The custom ops (torch.compile, CPU, meta and fake tensors)
# ---------------------------------------------------------------------------

_NS = "flashmlir"


@torch.library.custom_op(f"{_NS}::attention_varlen", mutates_args=())
def _op_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
               max_seqlen_q: int, max_seqlen_k: Optional[int], causal: bool, window_left: int,
               window_right: int, scale: Optional[float],
               softcap: Optional[float]) -> Tuple[Tensor, Tensor]:
    # (max_seqlen_k is the backward's: it sizes the packed backward's grid.)
    return varlen_impl(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal,
                       _window_arg(window_left, window_right), scale, softcap)


@_op_varlen.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, window_left,
      window_right, scale, softcap):
    return varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal,
                       _window_arg(window_left, window_right), scale, softcap)


@torch.library.custom_op(f"{_NS}::attention_varlen_backward", mutates_args=())
def _op_varlen_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor,
                        cu_seqlens_k: Tensor, out: Tensor, lse: Tensor, max_seqlen_q: int,
                        max_seqlen_k: Optional[int], causal: bool, window_left: int,
                        window_right: int, scale: Optional[float],
                        softcap: Optional[float]) -> Tuple[Tensor, Tensor, Tensor]:
    return varlen_backward_impl(dout, q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse,
                                max_seqlen_q, max_seqlen_k, causal,
                                _window_arg(window_left, window_right), scale, softcap)


@_op_varlen_backward.register_fake
def _(dout, q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse, max_seqlen_q, max_seqlen_k, causal,
      window_left, window_right, scale, softcap):
    return varlen_backward_fake(dout, q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse,
                                max_seqlen_q, max_seqlen_k, causal,
                                _window_arg(window_left, window_right), scale, softcap)


def _varlen_setup_context(ctx, inputs, output):
    q, k, v, cu_q, cu_k = inputs[:5]
    out, lse = output
    ctx.set_materialize_grads(False)   # no zero dlse per call (lse is not differentiable)
    ctx.save_for_backward(q, k, v, cu_q, cu_k, out, lse)
    ctx.options = inputs[5:]
    ctx.mark_non_differentiable(lse)


def _varlen_op_backward(ctx, dout, dlse):
    q, k, v, cu_q, cu_k, out, lse = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros_like(out)
    dq, dk, dv = _op_varlen_backward(dout, q, k, v, cu_q, cu_k, out, lse, *ctx.options)
    need = ctx.needs_input_grad
    return ((dq if need[0] else None, dk if need[1] else None, dv if need[2] else None)
            + (None,) * 9)


_op_varlen.register_autograd(_varlen_op_backward, setup_context=_varlen_setup_context)


@torch.library.custom_op(f"{_NS}::attention_with_kvcache", mutates_args=())
def _op_kvcache(q: Tensor, k_cache: Tensor, v_cache: Tensor, cache_seqlens: Tensor,
                page_table: Optional[Tensor], causal: bool, window_left: int,
                window_right: int, scale: Optional[float],
                softcap: Optional[float]) -> Tuple[Tensor, Tensor]:
    return kvcache_impl(q, k_cache, v_cache, cache_seqlens, page_table, causal,
                        _window_arg(window_left, window_right), scale, softcap)


@_op_kvcache.register_fake
def _(q, k_cache, v_cache, cache_seqlens, page_table, causal, window_left, window_right,
      scale, softcap):
    return kvcache_fake(q, k_cache, v_cache, cache_seqlens, page_table, causal,
                        _window_arg(window_left, window_right), scale, softcap)


def _no_backward(what):
    def setup(ctx, inputs, output):
        pass

    def backward(ctx, *grads):
        raise UnsupportedError(f"flashmlir.{what} {_NO_GRAD}")
    return backward, setup


_b, _s = _no_backward("attention_with_kvcache")
_op_kvcache.register_autograd(_b, setup_context=_s)
