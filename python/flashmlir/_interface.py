"""`flashmlir.attention` on torch tensors: validation, layouts, output
allocation, kernel selection and launch, and the autograd Function whose
backward runs the kernels of a backward manifest.

Debug hook: with FLASHMLIR_POISON_GRADS=1 in the environment (read at every
backward), dq, dk, dv and the workspace buffers are filled with NaN before
the backward kernels run, so a test can check that the kernels write every
gradient element and initialise their workspace themselves."""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import warnings
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from . import _backward as _bwd
from . import _cuda, _kernels, _launch, _plan, _reference
from . import _manifest as M
from . import _validate as V
from ._errors import CudaError, CudaUnavailableError, KernelNotFoundError, LaunchError

_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16"}

# Tensors on this device type run the kernels (tests that drive the fake
# driver with CPU tensors set it to "cpu"); CPU tensors otherwise run the
# PyTorch reference, meta and fake ones the fake implementation.
KERNEL_DEVICE_TYPE = "cuda"

# Element types of workspace buffers.
_TORCH_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
                 "f64": torch.float64, "i8": torch.int8, "u8": torch.uint8,
                 "i16": torch.int16, "i32": torch.int32, "i64": torch.int64}
for _n in ("u32", "u64"):
    if hasattr(torch, "uint" + _n[1:]):
        _TORCH_DTYPES[_n] = getattr(torch, "uint" + _n[1:])

POISON_ENV = "FLASHMLIR_POISON_GRADS"


def poison_grads() -> bool:
    """Whether the backward NaN-fills gradients and workspace before launching."""
    return POISON_ENV in os.environ and _kernels._env_flag(POISON_ENV)   # unset: one lookup


@dataclass(frozen=True)
class _Call:
    dims: V.Dims
    opts: V.Options
    dtype: torch.dtype
    device: torch.device
    layout: str
    deterministic: bool = False
    modifiers: Optional[_kernels.Modifiers] = None   # score_mod / mask_mod

    def request(self, kind: str = "forward") -> _kernels.KernelRequest:
        left, right = self.opts.mask
        return _kernels.KernelRequest(kind, _DTYPES[self.dtype], self.dims.D, self.dims.Dv,
                                      (left, right), self.opts.softcap, self.opts.scale,
                                      self.deterministic and kind == "backward",
                                      modifiers=self.modifiers)

    def scalars(self, spec=None):
        """Values scalar kernel parameters may name in `spec`'s manifest (a
        modifiers kernel may build in the softcap its score_mod states)."""
        left, right = self.opts.mask
        softcap = self.opts.softcap
        if softcap is None and spec is not None and spec.modifiers is not None:
            softcap = spec.modifiers.softcap
        return {**M.score_scalars(self.opts.scale, softcap),
                "window_left": left, "window_right": right, "causal": int(right == 0)}


def _check_tensor(name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")


def _bhsd(t: torch.Tensor, layout: str) -> torch.Tensor:
    return t if layout == "bhsd" else t.transpose(1, 2)


def _check_operand(name: str, t: torch.Tensor, rows_aligned: bool = True) -> None:
    V.check_strided(name, tuple(t.shape), tuple(t.stride()), t.data_ptr(), t.element_size(),
                    rows_aligned=rows_aligned)


def _validate(q, k, v, causal, window, scale, softcap, layout,
              deterministic=False, check_strides=True) -> _Call:
    """The full check of a call (raises TypeError/ValueError, launches
    nothing). CUDA tensors run the kernels, CPU tensors the PyTorch reference
    (`_reference`); `check_strides=False` (fake/meta tensors) leaves out the
    checks that need a data pointer."""
    layout = V.check_layout(layout)
    deterministic = V.check_bool("deterministic", deterministic)
    for n, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(n, t)
    for n, t in (("q", q), ("k", k), ("v", v)):
        if t.device.type not in (KERNEL_DEVICE_TYPE, "cpu", "meta"):
            raise ValueError(f"{n} is on device '{t.device}'; flashmlir.attention needs CUDA "
                             "tensors (CPU tensors run the PyTorch reference)")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, "
                         f"{v.device}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in _DTYPES:
        raise TypeError(f"flashmlir.attention supports float16 and bfloat16, got {q.dtype}")
    dims = V.check_shapes(tuple(q.shape), tuple(k.shape), tuple(v.shape), layout)
    opts = V.check_options(causal, window, scale, softcap, dims.D)
    if check_strides:
        for n, t in (("q", q), ("k", k), ("v", v)):
            _check_operand(n, t)
    return _Call(dims, opts, q.dtype, q.device, layout, deterministic)


def _out_shape(c: _Call) -> Tuple[int, ...]:
    d = c.dims
    return (d.B, d.Hq, d.Nq, d.Dv) if c.layout == "bhsd" else (d.B, d.Nq, d.Hq, d.Dv)


def _outputs(c: _Call, out: Optional[torch.Tensor], lse: Optional[torch.Tensor]):
    d = c.dims
    if out is None:
        out = torch.empty(_out_shape(c), dtype=c.dtype, device=c.device)
    else:
        _check_tensor("out", out)
        if tuple(out.shape) != _out_shape(c):
            raise ValueError(f"out must have shape {_out_shape(c)} (layout={c.layout!r}), "
                             f"got {tuple(out.shape)}")
        if out.dtype != c.dtype or out.device != c.device:
            raise ValueError(f"out must be {c.dtype} on {c.device}, got {out.dtype} on "
                             f"{out.device}")
        _check_operand("out", out)
    if lse is None:
        lse = torch.empty((d.B, d.Hq, d.Nq), dtype=torch.float32, device=c.device)
    else:
        _check_tensor("lse", lse)
        if tuple(lse.shape) != (d.B, d.Hq, d.Nq):
            raise ValueError(f"lse must have shape {(d.B, d.Hq, d.Nq)}, got {tuple(lse.shape)}")
        if lse.dtype != torch.float32 or lse.device != c.device:
            raise ValueError(f"lse must be float32 on {c.device}, got {lse.dtype} on "
                             f"{lse.device}")
        _check_operand("lse", lse, rows_aligned=False)
    return out, lse


def _device_ordinal(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def _find_spec(c: _Call, kind: str = "forward"):
    ordinal = _device_ordinal(c.device)
    info = _cuda.device_info(ordinal)
    return _kernels.default_registry().find(c.request(kind), info.cc), ordinal


def checked_dout(dout, shape, dtype, device, shape_note: str = "") -> torch.Tensor:
    """dout as the kernels need it: the output's `shape`, `dtype` and
    `device`; copied to a contiguous tensor when its last dimension is
    strided or its pointer or rows are not 16-byte aligned, e.g. the
    expanded one of out.sum().backward(); zeros for None (only with
    ctx.set_materialize_grads(False)). Shared by the dense and the packed
    backward."""
    shape = tuple(shape)
    if dout is None:
        return torch.zeros(shape, dtype=dtype, device=device)
    _check_tensor("dout", dout)
    if tuple(dout.shape) != shape:
        raise ValueError(f"the gradient of out must have shape {shape}{shape_note}, got "
                         f"{tuple(dout.shape)}")
    if dout.dtype != dtype:
        raise TypeError(f"the gradient of out must be {dtype}, got {dout.dtype}")
    if dout.device != device:
        raise ValueError(f"the gradient of out must be on {device}, got {dout.device}")
    try:
        _check_operand("dout", dout)
    except ValueError:
        # clone, not contiguous(): a contiguous view at a misaligned offset
        # needs a fresh (aligned) allocation too.
        dout = dout.clone(memory_format=torch.contiguous_format)
    return dout


def copy_into(o, l, out, lse):
    """An op's results written into the caller's out/lse (when given): the
    entry points whose ops have no out= variant (packed sequences,
    modifiers)."""
    for name, res, dst in (("out", o, out), ("lse", l, lse)):
        if dst is None:
            continue
        _check_tensor(name, dst)
        if tuple(dst.shape) != tuple(res.shape) or dst.dtype != res.dtype:
            raise ValueError(f"{name} must have shape {tuple(res.shape)} and dtype {res.dtype}, "
                             f"got {tuple(dst.shape)} {dst.dtype}")
        dst.copy_(res)
    return (o if out is None else out), (l if lse is None else lse)


def _check_dout(dout, c: _Call) -> torch.Tensor:
    """checked_dout for a dense call (in its layout)."""
    return checked_dout(dout, _out_shape(c), c.dtype, c.device, f" (layout={c.layout!r})")


def backward_available(dtype=torch.bfloat16, head_dim: int = 128, causal: bool = False,
                       window=None, softcap=None, scale=None, deterministic: bool = False,
                       value_head_dim: Optional[int] = None, device=None,
                       compile: bool = False) -> bool:
    """Whether `attention(...).backward()` finds a backward kernel for this
    configuration on `device` (default: the current CUDA device). With
    compile=False (the default) it only looks at existing kernels and never
    runs fa-compile. Bad options raise as in attention()."""
    if isinstance(dtype, str):
        dt = M.normalize_dtype(dtype)
    elif dtype in _DTYPES:
        dt = _DTYPES[dtype]
    else:
        return False
    if dt not in M.ATTENTION_DTYPES:
        return False
    opts = V.check_options(causal, window, scale, softcap, int(head_dim))
    deterministic = V.check_bool("deterministic", deterministic)
    dv = int(value_head_dim if value_head_dim is not None else head_dim)
    request = _kernels.KernelRequest("backward", dt, int(head_dim), dv, opts.mask,
                                     opts.softcap, opts.scale, deterministic)
    try:
        if not torch.cuda.is_available():
            return False
        ordinal = _device_ordinal(torch.device(device) if device is not None
                                  else torch.device("cuda"))
        info = _cuda.device_info(ordinal)
        _kernels.default_registry().find(request, info.cc, compile=compile)
    except (KernelNotFoundError, CudaUnavailableError, CudaError):
        return False
    return True


def forward_request(q, k, v, causal=False, window=None, scale=None, softcap=None,
                    layout="bhsd", score_mod=None, mask_mod=None,
                    key_ranges=None) -> _kernels.KernelRequest:
    """The KernelRequest of the forward kernel `attention(q, k, v, ...)` looks
    up (q, k and v may be meta tensors), e.g. to compile kernels ahead of
    the calls (scripts/build-modifier-kernels.py). Raises as attention().
    `key_ranges`: a KeyRanges, or its rows (the kernel depends on those
    only)."""
    return _request("forward", q, k, v, causal, window, scale, softcap, layout, False,
                    score_mod, mask_mod, key_ranges)


def backward_request(q, k, v, causal=False, window=None, scale=None, softcap=None,
                     layout="bhsd", deterministic=False, score_mod=None,
                     mask_mod=None, key_ranges=None) -> _kernels.KernelRequest:
    """The KernelRequest of the backward kernels `attention(q, k, v, ...)`
    looks up when q, k or v requires grad (as forward_request; the backward
    kernels take no key ranges)."""
    return _request("backward", q, k, v, causal, window, scale, softcap, layout, deterministic,
                    score_mod, mask_mod, key_ranges)


def _request(kind, q, k, v, causal, window, scale, softcap, layout, deterministic, score_mod,
             mask_mod, key_ranges=None) -> _kernels.KernelRequest:
    c = _validate(q, k, v, causal, window, scale, softcap, layout, deterministic,
                  check_strides=False)
    if key_ranges is not None and mask_mod is None:
        raise ValueError("key_ranges bound where a mask_mod's keys lie: pass the mask_mod too")
    if score_mod is not None or mask_mod is not None:
        from . import _modifiers
        rows = getattr(key_ranges, "rows", key_ranges)
        c = dataclasses.replace(c, modifiers=_kernels.Modifiers.of(
            _modifiers.trace(score_mod, mask_mod).with_key_ranges(rows)))
    return c.request(kind)


# ---------------------------------------------------------------------------
# Plans: what a call of given shapes, strides, dtypes, devices and options
# needs, made (with the full validation) on its first call and reused after.
# ---------------------------------------------------------------------------

_EMPTY, _NO_KEYS, _LAUNCH = "empty", "no-keys", "launch"
_FORWARD_TENSORS = ("q", "k", "v", "out", "lse")
_BACKWARD_TENSORS = ("q", "k", "v", "out", "dout", "lse", "dq", "dk", "dv")
_WORKSPACE = "workspace"   # the byte buffer a backward's workspace is carved from
_MAX_PLANS = 4096


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _current_stream(ordinal: int) -> int:
    """The CUstream of the current torch stream of device `ordinal`, so side
    streams and CUDA-graph capture streams are followed. The raw handle is
    what `torch.cuda.current_stream(ordinal).cuda_stream` returns without
    building a Stream object on every call (Triton's launcher reads it the
    same way); the public API when this torch lacks it."""
    if _raw_stream is not None:
        return _raw_stream(ordinal)
    return torch.cuda.current_stream(ordinal).cuda_stream


def _empty_like_is_contiguous(t, shape) -> bool:
    """Whether torch.empty_like(t) is the contiguous tensor of `shape` (t has
    that shape and its strides are the contiguous ones): then a plan
    allocates it that way, skipping the shape and dtype parsing of
    new_empty. Decided once per plan (the strides are part of its key)."""
    if tuple(t.shape) != tuple(shape):
        return False
    stride, want = 1, []
    for n in reversed(tuple(shape)):
        want.append(stride)
        stride *= max(int(n), 1)
    return tuple(t.stride()) == tuple(reversed(want))


# Workspace buffers start at multiples of this many bytes of their one
# allocation (the allocator's own alignment of separate buffers, and more
# than any kernel's vector accesses need).
_WORKSPACE_ALIGNMENT = 256


def _buffer_bytes(shape, dtype) -> int:
    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def _workspace_layout(shapes):
    """Byte offsets of the workspace buffers (name, shape, torch dtype) in one
    allocation, and its size."""
    offsets, total = [], 0
    for _, shape, dtype in shapes:
        offsets.append(total)
        n = _buffer_bytes(shape, dtype)
        total += -(-n // _WORKSPACE_ALIGNMENT) * _WORKSPACE_ALIGNMENT
    return tuple(offsets), total


def _zeroed_ranges(shapes, offsets, zeroed):
    """The byte ranges (offset, size) of the workspace buffers named in
    `zeroed` that the launcher zero-fills: empty ones skipped, neighbours
    (only alignment padding between them) merged into one fill."""
    ranges = []
    for (name, shape, dtype), off in zip(shapes, offsets):
        n = _buffer_bytes(shape, dtype)
        if name not in zeroed or not n:
            continue
        if ranges and sum(ranges[-1]) > off - _WORKSPACE_ALIGNMENT:
            ranges[-1] = (ranges[-1][0], off + n - ranges[-1][0])
        else:
            ranges.append((off, n))
    return tuple(ranges)


def _workspace_views(buf, shapes, offsets):
    """The workspace buffers as tensors viewing the byte buffer `buf`."""
    out = []
    for (_, shape, dtype), off in zip(shapes, offsets):
        n = _buffer_bytes(shape, dtype)
        out.append(buf.narrow(0, off, n).view(dtype).view(shape))
    return out


def _multi_launch_sequence(spec, ordinal, tensors, env, scalars, names, device):
    """The PlanSequence of a manifest with several launches and a workspace
    (a backward, a split-KV forward), and that workspace: its buffers
    ((name, shape, dtype)), their byte offsets and the total bytes. The
    buffers are views at those offsets of one byte buffer, the call's
    `_WORKSPACE` tensor (the last of `names`), so each call brings its own."""
    kernels = _kernels.load_kernels(spec, ordinal)
    shapes = _bwd.workspace_shapes(spec, env)
    for name, _, dtype in shapes:
        if dtype not in _TORCH_DTYPES:
            raise LaunchError(f"{spec.name}: workspace {name} has element type {dtype}, "
                              f"which this torch has no dtype for")
    workspace = tuple((name, shape, _TORCH_DTYPES[dtype]) for name, shape, dtype in shapes)
    offsets, nbytes = _workspace_layout(workspace)
    buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
    views = dict(zip((w[0] for w in workspace), _workspace_views(buf, workspace, offsets)))
    _, preps = _bwd.prepare(spec, kernels, tensors, env, lambda n, s, t: views[n], scalars)
    binds = {w[0]: (_WORKSPACE, off) for w, off in zip(workspace, offsets)}
    seq = _plan.PlanSequence([_plan.LaunchPlan(p, names, binds) for p in preps])
    return seq, workspace, offsets, nbytes


class _BackwardPlan:
    """The backward of one forward plan for one kind of dout: gradients and
    workspace to allocate, and the manifest's launches as a PlanSequence.
    The workspace buffers are carved out of one byte allocation per call
    (bound by offset, see _plan.LaunchPlan's views); a call's buffers are
    its own, so calls on different streams or in CUDA-graph capture never
    share scratch memory. A forward plan with modifiers has backward
    kernels of the same modifiers' key, their captured tensors (those the
    forward bound) bound at every call as the kernels' capture<n>."""

    __slots__ = ("mode", "seq", "grad_shapes", "workspace", "dtype", "device", "ordinal",
                 "clone_dout", "ws_offsets", "ws_bytes", "ws_zero", "like")

    def __init__(self, fwd: "_ForwardPlan", q, k, v, out, lse, dout, deterministic: bool,
                 clone_dout: bool, captures=()):
        c = dataclasses.replace(fwd.call, deterministic=deterministic)
        self.dtype, self.device, self.ordinal = c.dtype, c.device, fwd.ordinal
        self.clone_dout = clone_dout
        self.grad_shapes = (tuple(q.shape), tuple(k.shape), tuple(v.shape))
        self.like = tuple(_empty_like_is_contiguous(t, t.shape) for t in (q, k, v))
        self.workspace = ()
        self.ws_offsets, self.ws_bytes, self.ws_zero = (), 0, ()
        self.seq = None
        d = c.dims
        if d.empty_output or d.Nk == 0:
            # No query row, or no key: out does not depend on q, k or v.
            self.mode = _EMPTY
            return
        self.mode = _LAUNCH
        spec, ordinal = _find_spec(c, "backward")
        dq, dk, dv = (torch.empty(s, dtype=c.dtype, device=c.device) for s in self.grad_shapes)
        L = c.layout
        tensors = {"q": _bhsd(q, L), "k": _bhsd(k, L), "v": _bhsd(v, L), "out": _bhsd(out, L),
                   "dout": _bhsd(dout, L), "lse": lse,
                   "dq": _bhsd(dq, L), "dk": _bhsd(dk, L), "dv": _bhsd(dv, L)}
        # A backward of modifiers with key ranges takes the query ranges (and
        # deterministic, the key ranges) after the captures.
        ranged = _backward_range_names(spec)
        if ranged:
            captures, ranges = captures[:-len(ranged)], captures[-len(ranged):]
        caps = _capture_args(spec, captures)
        tensors.update(caps)
        if ranged:
            _check_backward_ranges(ranges, ranged, spec, c)
            tensors.update(zip(ranged, ranges))
        # (SMS: a split GQA group's workspace depends on the grid's size.)
        env = {**d.env(), **spec.capture_dims(),
               "SMS": _launch.multiprocessors(_cuda.device_info(ordinal).sm_count)}
        self.seq, self.workspace, self.ws_offsets, self.ws_bytes = _multi_launch_sequence(
            spec, ordinal, tensors, env, c.scalars(spec),
            _BACKWARD_TENSORS + tuple(caps) + ranged + (_WORKSPACE,), c.device)
        # (A split GQA group's dK / dV accumulators start at zero.)
        self.ws_zero = _zeroed_ranges(self.workspace, self.ws_offsets,
                                      {w.name for w in spec.workspace if w.zeroed})

    def run(self, q, k, v, out, lse, dout, copied=False, captures=()):
        """`captures`: as _ForwardPlan.run's (the forward's)."""
        if self.clone_dout and not copied:
            dout = dout.clone(memory_format=torch.contiguous_format)
        # Contiguous gradients with q's dtype and device (plans are for plain
        # tensors of the call's dtype and device only), the cheapest way.
        sq, sk, sv = self.grad_shapes
        lq, lk, lv = self.like
        dq = torch.empty_like(q) if lq else q.new_empty(sq)
        dk = torch.empty_like(k) if lk else q.new_empty(sk)
        dv = torch.empty_like(v) if lv else q.new_empty(sv)
        if self.mode is _EMPTY:
            dq.zero_()
            dk.zero_()
            dv.zero_()
            return dq, dk, dv
        ws = q.new_empty(self.ws_bytes, dtype=torch.uint8)
        if poison_grads():
            for t in (dq, dk, dv):
                t.fill_(math.nan)
            ws.fill_(255)   # all-ones bytes: NaN in every float type
        for off, n in self.ws_zero:
            ws.narrow(0, off, n).zero_()
        self.seq.launch((q, k, v, out, dout, lse, dq, dk, dv, *captures, ws),
                        _current_stream(self.ordinal))
        return dq, dk, dv


def _backward_ranges(c: "_Call", key_ranges, query_ranges, deterministic: bool):
    """The range tensors the backward kernels of `c`'s modifiers (with key
    ranges of c.modifiers.key_range_rows) take after the captures: the query
    ranges per key/value head ([B, Hkv, ceil(Nk / rows), 2], from the
    per-query-head `query_ranges` or derived from `key_ranges`), then,
    deterministic, the key ranges."""
    d = c.dims
    qr = _key_ranges.backward_query_ranges(key_ranges, query_ranges,
                                           c.modifiers.key_range_rows, d.Hkv, d.Nq, d.Nk)
    return (_aligned(qr),) + ((_aligned(key_ranges),) if deterministic else ())


def _backward_range_names(spec) -> Tuple[str, ...]:
    """The range parameters a backward kernel takes after its captures."""
    mods = spec.modifiers
    if mods is None or mods.query_range_rows is None:
        return ()
    return (M.QUERY_RANGES,) + ((M.KEY_RANGES,) if mods.key_range_rows is not None else ())


def _check_backward_ranges(ranges, names, spec, c: "_Call") -> None:
    """The backward's query ranges [B, Hkv, ceil(Nk / rows), 2] (and key
    ranges) for call `c`: int32 of those shapes on its device."""
    d = c.dims
    rows = spec.modifiers.query_range_rows
    want = {M.QUERY_RANGES: (d.B, d.Hkv, -(-d.Nk // rows), 2)}
    for name, t in zip(names, ranges):
        if name == M.KEY_RANGES:
            check_key_ranges(t, rows, d.B, d.Hq, d.Nq, c.device)
            continue
        if (not isinstance(t, torch.Tensor) or t.dtype != torch.int32
                or tuple(t.shape) != want[name] or t.device != c.device):
            got = (f"{t.dtype} of shape {list(t.shape)} on {t.device}"
                   if isinstance(t, torch.Tensor) else type(t).__name__)
            raise ValueError(f"key_ranges: the backward's {name} must be int32 of shape "
                             f"{list(want[name])} on {c.device}, got {got}")


def _strides_ok(t) -> bool:
    """Whether t's strides (not its pointer) meet the kernels' requirements."""
    try:
        V.check_strided("t", tuple(t.shape), tuple(t.stride()), 0, t.element_size())
    except ValueError:
        return False
    return True


def _dout_key(dout, out, lse, deterministic):
    return (deterministic, type(dout), dout.shape, dout.stride(), dout.dtype, dout.device,
            out.stride(), lse.stride())


# Split-KV (decoding): the query rows of one block of the split kernel; a
# call is a decode when its rows (a GQA group of one query, or Nq) fit one
# block and its query blocks do not fill the device on their own.
_SPLIT_ROWS = 64
SPLIT_KV_ENV = "FLASHMLIR_SPLIT_KV"   # "0": never use the split-KV kernels


def _group_view(t: torch.Tensor, hkv: int) -> Optional[torch.Tensor]:
    """[B, Hq, Nq, ...] as [B, Hkv, G * Nq, ...] (the query heads of one
    key/value head become the rows of one query block), or None when the
    strides allow no such view."""
    b, hq, nq = t.shape[:3]
    try:
        return t.view(b, hkv, (hq // hkv) * nq, *t.shape[3:])
    except RuntimeError:   # heads and rows not one stride apart
        return None


class _WorkspaceForward:
    """A forward whose manifest lists its launches with a workspace: the
    split-KV kernels of a decode call (the partials) or a dynamic-scheduler
    kernel (its tile counter). Their PlanSequence and the workspace, carved
    out of one byte buffer per call; zero-filled on the call's stream when a
    buffer must start at zero (stream-ordered, so CUDA-graph capturable, and
    one buffer per call, so concurrent calls count apart)."""

    __slots__ = ("seq", "ws_bytes", "ws_zeroed", "spec")

    @staticmethod
    def build(spec, ordinal, tensors, env, scalars, device,
              names=_FORWARD_TENSORS) -> "_WorkspaceForward":
        """`names`: the call's tensors (those of the op, then captures)."""
        plan = _WorkspaceForward()
        plan.spec = spec
        plan.ws_zeroed = spec.zeroed_workspace
        plan.seq, _, _, plan.ws_bytes = _multi_launch_sequence(
            spec, ordinal, tensors, env, scalars, tuple(names) + (_WORKSPACE,), device)
        return plan

    @staticmethod
    def split(q, k, v, out, lse, c: _Call, ordinal: int) -> Optional["_WorkspaceForward"]:
        """The split-KV plan of a decode-shaped call, or None."""
        if os.environ.get(SPLIT_KV_ENV, "1") == "0":
            return None
        d, (left, right) = c.dims, c.opts.mask
        info = _cuda.device_info(ordinal)
        sms = _launch.multiprocessors(info.sm_count)
        # GQA packing: the group's heads share the key/value tiles, as rows
        # of one query block, when no mask tells the rows apart (one query
        # sees every key when causal: the mask is bottom-right aligned).
        G = d.Hq // d.Hkv
        packed = (d.Hq > d.Hkv and G * d.Nq <= _SPLIT_ROWS and left == -1
                  and (right == -1 or (right == 0 and d.Nq == 1)))
        L = c.layout
        tensors = {"q": _bhsd(q, L), "k": _bhsd(k, L), "v": _bhsd(v, L), "out": _bhsd(out, L),
                   "lse": lse}
        if packed:
            grouped = {n: _group_view(tensors[n], d.Hkv) for n in ("q", "out", "lse")}
            packed = all(t is not None for t in grouped.values())
        heads, rows = (d.Hkv, G * d.Nq) if packed else (d.Hq, d.Nq)
        if rows > _SPLIT_ROWS or d.B * heads >= sms:
            return None
        mask = (-1, -1) if packed else c.opts.mask
        request = _kernels.KernelRequest("forward", _DTYPES[c.dtype], d.D, d.Dv, mask,
                                         c.opts.softcap, c.opts.scale, split_kv=True)
        # Shipped or built kernels only: a decode step never waits for a
        # compile (without one, the plain kernel serves the call).
        found = _kernels.default_registry().candidates(request, info.cc)
        if not found:
            return None
        spec = found[0]
        env = {**d.env(), "SMS": sms}
        if packed:
            env.update(Hq=d.Hkv, Nq=rows, G=1)
            tensors.update(grouped)
        scalars = c.scalars(spec)
        if packed:   # the packed rows take the kernel without a mask
            scalars.update(window_left=-1, window_right=-1, causal=0)
        return _WorkspaceForward.build(spec, ordinal, tensors, env, scalars, c.device)

    def run(self, q, k, v, out, lse, stream: int, captures=()) -> None:
        if self.ws_zeroed:
            ws = q.new_zeros(self.ws_bytes, dtype=torch.uint8)
        else:
            ws = q.new_empty(self.ws_bytes, dtype=torch.uint8)
        self.seq.launch((q, k, v, out, lse, *captures, ws), stream)


class _ForwardPlan:
    """A validated forward call: the output shapes and, unless the problem is
    empty, the kernel's LaunchPlan (or, decoding, the split-KV kernels');
    plus the backward plans made from it. A call with modifiers
    (`c.modifiers`) runs their kernel, its captured tensors (`captures`, as
    the kernel's capture<n> parameters) bound at every launch, and with
    key ranges (`c.modifiers.key_range_rows`) the ranges tensor `ranges`
    (checked, see _check_key_ranges) as its key_ranges parameter."""

    __slots__ = ("call", "mode", "launch", "split", "multi", "out_shape", "lse_shape", "dtype",
                 "device", "ordinal", "bwd", "out_like", "__weakref__")

    def __init__(self, q, k, v, c: _Call, out=None, lse=None, captures=(), ranges=None):
        self.call = c
        self.dtype, self.device = c.dtype, c.device
        self.ordinal = _device_ordinal(c.device)
        self.out_shape = _out_shape(c)
        self.out_like = _empty_like_is_contiguous(q, self.out_shape)
        d = c.dims
        self.lse_shape = (d.B, d.Hq, d.Nq)
        self.bwd = {}
        self.launch = self.split = self.multi = None
        out, lse = _outputs(c, out, lse)
        if d.empty_output:
            self.mode = _EMPTY
        elif d.Nk == 0:
            self.mode = _NO_KEYS   # every row sees no key: out = 0, lse = +inf
        else:
            self.mode = _LAUNCH
            if c.modifiers is None:   # (no split-KV kernel computes modifiers)
                self.split = _WorkspaceForward.split(q, k, v, out, lse, c, self.ordinal)
                if self.split is not None:
                    return
            spec, ordinal = _find_spec(c, "forward")
            L = c.layout
            args = {"q": _bhsd(q, L), "k": _bhsd(k, L), "v": _bhsd(v, L), "out": _bhsd(out, L),
                    "lse": lse}
            caps = _capture_args(spec, captures)
            args.update(caps)
            names = _FORWARD_TENSORS + tuple(caps)
            if c.modifiers is not None and c.modifiers.key_range_rows is not None:
                args[M.KEY_RANGES] = ranges
                names += (M.KEY_RANGES,)
            env = {**d.env(), **spec.capture_dims()}
            if spec.is_multi_launch:
                # (The dynamic tile scheduler's counter.)
                env["SMS"] = _launch.multiprocessors(_cuda.device_info(ordinal).sm_count)
                self.multi = _WorkspaceForward.build(spec, ordinal, args, env, c.scalars(spec),
                                                     c.device, names)
                return
            args.update(c.scalars(spec))
            prep = _launch.prepare(_kernels.load_kernel(spec, ordinal), args, env)
            self.launch = _plan.LaunchPlan(prep, names)

    def run(self, q, k, v, out=None, lse=None, captures=(), ranges=None):
        """`captures`: a call with modifiers' captured tensors (16-byte aligned,
        see _aligned), with the shapes, strides, dtypes and device of the
        plan's; `ranges` its key ranges (likewise), when the plan has them."""
        if ranges is not None:
            captures = (*captures, ranges)
        if out is None:
            # q's dtype and device, as _outputs; contiguous either way
            out = torch.empty_like(q) if self.out_like else q.new_empty(self.out_shape)
        if lse is None:
            lse = q.new_empty(self.lse_shape, dtype=torch.float32)
        if self.split is not None:
            self.split.run(q, k, v, out, lse, _current_stream(self.ordinal))
        elif self.multi is not None:
            self.multi.run(q, k, v, out, lse, _current_stream(self.ordinal), captures)
        elif self.mode is _LAUNCH:
            self.launch.launch((q, k, v, out, lse, *captures), _current_stream(self.ordinal))
        elif self.mode is _NO_KEYS:
            out.zero_()
            lse.fill_(math.inf)
        return out, lse

    def backward(self, q, k, v, out, lse, dout, deterministic: bool, captures=()):
        """dq, dk, dv (shaped like q, k, v) for a dout of the output's shape.
        `captures`: those the forward ran with (a plan with modifiers; its
        backward plans, kept here, are of its modifiers' key and captures'
        layout, as the plan is)."""
        key = None
        if isinstance(dout, torch.Tensor):
            key = _dout_key(dout, out, lse, deterministic)
            plan = self.bwd.get(key)
            if plan is not None and (plan.clone_dout or
                                     dout.data_ptr() % _launch.POINTER_ALIGNMENT == 0):
                return plan.run(q, k, v, out, lse, dout, False, captures)
        checked = _check_dout(dout, self.call)      # the full check; may copy
        if key is not None and checked is not dout and not _strides_ok(dout):
            # A strided or expanded dout: copied on every call of this kind.
            plan = _BackwardPlan(self, q, k, v, out, lse, checked, deterministic, True, captures)
            self._remember(key, plan)
            return plan.run(q, k, v, out, lse, checked, True, captures)
        ckey = _dout_key(checked, out, lse, deterministic)
        plan = self.bwd.get(ckey)
        if plan is None:
            plan = _BackwardPlan(self, q, k, v, out, lse, checked, deterministic, False,
                                 captures)
            self._remember(ckey, plan)
        return plan.run(q, k, v, out, lse, checked, True, captures)

    def _remember(self, key, plan):
        if len(self.bwd) >= 64:
            self.bwd.clear()
        self.bwd[key] = plan


_plans = {}
_plans_lock = threading.Lock()


def clear_caches() -> None:
    """Drops every cached launch plan (the next call of each shape is
    validated, looked up and packed again). Called when the default kernel
    registry is replaced; environment variables read at plan time
    (FLASHMLIR_DEBUG, FLASHMLIR_SYNC, FLASHMLIR_CHIP) take effect after it."""
    with _plans_lock:
        _plans.clear()
    for hook in _cache_hooks:
        hook()


# Other plan caches (the packed-sequence and paged entries, _sequences)
# that clear_caches() drops too.
_cache_hooks = []

_kernels.on_registry_change(clear_caches)


def _plan_key(q, k, v, causal, window, scale, softcap, layout, deterministic, out, lse):
    """The cache key of a call, or None when it cannot have one (non-tensors,
    unhashable options: the slow path then explains what is wrong)."""
    try:
        if window is not None and type(window) is not tuple:
            window = tuple(window)
        key = (type(q), q.shape, q.stride(), q.dtype, q.device,
               type(k), k.shape, k.stride(), k.dtype, k.device,
               type(v), v.shape, v.stride(), v.dtype, v.device,
               causal, window, scale, softcap, layout, deterministic,
               None if out is None else (type(out), out.shape, out.stride(), out.dtype, out.device),
               None if lse is None else (type(lse), lse.shape, lse.stride(), lse.dtype, lse.device))
        return key
    except (AttributeError, TypeError):
        return None


def _kernel_tensors(*ts) -> bool:
    """Plain tensors on the kernels' device (not CPU, meta, fake or a subclass)."""
    return all(type(t) is torch.Tensor and t.device.type == KERNEL_DEVICE_TYPE
               for t in ts if t is not None)


def _forward_plan(q, k, v, causal, window, scale, softcap, layout, deterministic,
                  out=None, lse=None, traced=None, ranges=None) -> Optional[_ForwardPlan]:
    """The plan of a call on plain kernel-device tensors, made with the full
    validation on first use; None for other tensors (CPU, meta, fake).
    `traced`: the call's modifiers (a _modifiers.Traced); its plans are kept
    per traced IR and the shapes, strides, dtypes and devices of its
    captured tensors (and of `ranges`, its key ranges when traced has
    them)."""
    key = _plan_key(q, k, v, causal, window, scale, softcap, layout, deterministic, out, lse)
    if traced is not None and key is not None:
        key = (key, traced.key(), tuple((t.shape, t.stride(), t.dtype, t.device)
                                        for t in traced.captures))
        if traced.key_range_rows is not None:
            key += ((type(ranges), getattr(ranges, "shape", None),
                     ranges.stride() if isinstance(ranges, torch.Tensor) else None,
                     getattr(ranges, "dtype", None), getattr(ranges, "device", None)),)
    try:
        plan = _plans.get(key)
    except TypeError:   # an unhashable option: no plan for it (the checks explain)
        key = plan = None
    if plan is not None:
        return plan
    if not _kernel_tensors(q, k, v, out, lse):
        _validate(q, k, v, causal, window, scale, softcap, layout, deterministic,
                  check_strides=False)   # errors for non-tensors, bad options
        return None
    c = _validate(q, k, v, causal, window, scale, softcap, layout, deterministic)
    captures = ()
    if traced is not None:
        _check_capture_devices(traced.captures, c.device)
        _check_key_ranges(ranges, traced.key_range_rows, c)
        c = dataclasses.replace(c, modifiers=_kernels.Modifiers.of(traced))
        captures = aligned_captures(traced.captures)
        if ranges is not None:
            ranges = _aligned(ranges)
    plan = _ForwardPlan(q, k, v, c, out, lse, captures, ranges)
    if key is not None:
        with _plans_lock:
            if len(_plans) >= _MAX_PLANS:
                _plans.clear()
            _plans[key] = plan
    return plan


class _FlashAttention(torch.autograd.Function):
    """Eager autograd over a forward plan (torch.compile uses the custom ops
    of _ops.py instead; both run the same plans). A plan with modifiers
    takes its captured tensors (aligned) after `deterministic`, `modifiers`
    and `ranges` (its key ranges or None: the forward's only): bound in the
    forward's and the backward's launches, saved for the backward (an
    in-place change in between raises there).
    `modifiers` is (score_mod, mask_mod, the captures as the functions read
    them) when a capture requires grad (None otherwise): the backward then
    adds the captures' gradients by row chunks (_capture_grads)."""

    @staticmethod
    def forward(ctx, q, k, v, plan, deterministic, modifiers, ranges, query_ranges, *captures):
        out, lse = plan.run(q, k, v, None, None, captures, ranges)
        # lse is not differentiable: no zero dlse to allocate and fill per call.
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(q, k, v, out, lse, *captures)
        ctx.plan = plan
        ctx.deterministic = deterministic
        ctx.modifiers = modifiers
        # (With key ranges: the tensors the backward kernels take after the
        # captures.)
        ctx.ranges = () if ranges is None else _backward_ranges(
            plan.call, ranges, query_ranges, deterministic)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        if torch.is_grad_enabled():
            # create_graph=True: once_differentiable's error on a double
            # backward (its wrapper costs microseconds on every call).
            return _once_backward(ctx, dout, dlse)
        return _flash_backward(ctx, dout, dlse)


def _flash_backward(ctx, dout, dlse):
    saved = ctx.saved_tensors
    q, k, v, out, lse = saved[:5]
    captures = saved[5:]
    need = ctx.needs_input_grad
    dq = dk = dv = None
    if dout is not None and any(need[:3]):
        dq, dk, dv = ctx.plan.backward(q, k, v, out, lse, dout, ctx.deterministic,
                                       (*captures, *ctx.ranges))
    grads = (dq if need[0] else None, dk if need[1] else None,
             dv if need[2] else None, None, None, None, None, None)
    dcaps = [None] * len(captures)
    wanted = [n for n, want in enumerate(need[8:]) if want]
    if wanted and dout is not None:
        dcaps = _capture_grad_list(ctx, q, k, v, out, lse, dout, captures, wanted)
    return grads + tuple(dcaps)


def _capture_grad_list(ctx, q, k, v, out, lse, dout, captures, wanted):
    """The captures' gradients (None where not wanted): _capture_grads on
    the functions' own captures (`ctx.modifiers`), returned for the aligned
    ones the Function took (the same values)."""
    from . import _capture_grads
    score_mod, mask_mod, originals = ctx.modifiers
    out_list = [None] * len(captures)
    c, L = ctx.plan.call, ctx.plan.call.layout
    if score_mod is None:   # (a mask_mod's reads get no gradient)
        for n in wanted:
            out_list[n] = torch.zeros_like(captures[n])
        return out_list
    got = _capture_grads.capture_gradients(
        _bhsd(dout, L), _bhsd(q, L), _bhsd(k, L), _bhsd(v, L), _bhsd(out, L), lse,
        c.opts.mask, c.opts.scale, c.opts.softcap, score_mod, mask_mod,
        [originals[n] for n in wanted])
    for n, g in zip(wanted, got):
        out_list[n] = g
    return out_list


_once_backward = once_differentiable(_flash_backward)


def _backward(q, k, v, out, lse, dout, c: _Call):
    """The backward of a validated call without the plan cache (dout is
    checked before out and lse are used). Returns dq, dk, dv shaped like q,
    k, v."""
    checked = _check_dout(dout, c)
    plan = _ForwardPlan.__new__(_ForwardPlan)
    plan.call, plan.ordinal, plan.bwd = c, _device_ordinal(c.device), {}
    return _BackwardPlan(plan, q, k, v, out, lse, checked, c.deterministic, False
                         ).run(q, k, v, out, lse, checked)


# ---------------------------------------------------------------------------
# What the custom ops run (see _ops.py)
# ---------------------------------------------------------------------------

def _window_arg(window_left: int, window_right: int):
    return None if (window_left, window_right) == (-1, -1) else (window_left, window_right)


def forward_impl(q, k, v, causal, window, scale, softcap, layout, deterministic,
                 out=None, lse=None):
    """The forward on real tensors: the kernels for CUDA tensors, the PyTorch
    reference for CPU ones. Writes into out/lse when given. Returns out, lse."""
    plan = _forward_plan(q, k, v, causal, window, scale, softcap, layout, deterministic,
                         out, lse)
    if plan is not None:
        return plan.run(q, k, v, out, lse)
    c = _validate(q, k, v, causal, window, scale, softcap, layout, deterministic)
    if out is not None or lse is not None:
        out, lse = _outputs(c, out, lse)
    o, l = _reference.attention(_bhsd(q, c.layout), _bhsd(k, c.layout), _bhsd(v, c.layout),
                                c.opts.mask, c.opts.scale, c.opts.softcap)
    o = o if c.layout == "bhsd" else o.transpose(1, 2)
    if out is None:
        return o.contiguous(), l
    out.copy_(o)
    lse.copy_(l)
    return out, lse


def backward_impl(dout, q, k, v, out, lse, causal, window, scale, softcap, layout,
                  deterministic):
    """dq, dk, dv (contiguous, shaped like q, k, v) on real tensors."""
    plan = _forward_plan(q, k, v, causal, window, scale, softcap, layout, deterministic)
    if plan is not None:
        return plan.backward(q, k, v, out, lse, dout, deterministic)
    c = _validate(q, k, v, causal, window, scale, softcap, layout, deterministic)
    dout = _check_dout(dout, c)
    L = c.layout
    grads = _reference.attention_backward(_bhsd(dout, L), _bhsd(q, L), _bhsd(k, L), _bhsd(v, L),
                                          c.opts.mask, c.opts.scale, c.opts.softcap)
    return tuple(_bhsd(g, L).contiguous() for g in grads)


def modified_forward_impl(q, k, v, captures, key, causal, window, scale, softcap, layout,
                          deterministic, key_ranges=None, query_ranges=None):
    """forward_impl with score_mod / mask_mod, given as their traced key and
    the captured tensors (see _modifiers.from_key), and the key ranges
    tensor when the key has them: the kernels of the modifiers for CUDA
    tensors (the plan eager calls use), the reference on the evaluated
    regions for CPU ones (the ranges checked, not needed). `query_ranges`
    (the backward's, per query head, or None) are not read here. Returns
    out, lse (contiguous)."""
    from . import _modifiers
    traced = _modifiers.from_key(key, captures)
    plan = _forward_plan(q, k, v, causal, window, scale, softcap, layout, deterministic,
                         traced=traced, ranges=key_ranges)
    if plan is not None:
        return plan.run(q, k, v, None, None, aligned_captures(captures),
                        None if key_ranges is None else _aligned(key_ranges))
    c = _validate(q, k, v, causal, window, scale, softcap, layout, deterministic)
    _check_capture_devices(captures, c.device)
    _check_key_ranges(key_ranges, traced.key_range_rows, c)
    score_mod, mask_mod, _ = traced.functions()
    L = c.layout
    o, l = _reference.attention_modified(_bhsd(q, L), _bhsd(k, L), _bhsd(v, L), c.opts.mask,
                                         c.opts.scale, c.opts.softcap, score_mod, mask_mod)
    return _bhsd(o, L).contiguous(), l


def modified_backward_impl(dout, q, k, v, out, lse, captures, key, causal, window, scale,
                           softcap, layout, deterministic, key_ranges=None, query_ranges=None):
    """backward_impl with score_mod / mask_mod (as modified_forward_impl;
    with key ranges the kernels take the query ranges per key/value head,
    from `query_ranges` per query head or derived from the key ranges, see
    _backward_ranges)."""
    from . import _modifiers
    traced = _modifiers.from_key(key, captures)
    plan = _forward_plan(q, k, v, causal, window, scale, softcap, layout, deterministic,
                         traced=traced, ranges=key_ranges)
    if plan is not None:
        ranges = () if key_ranges is None else _backward_ranges(
            plan.call, _aligned(key_ranges), query_ranges, deterministic)
        return plan.backward(q, k, v, out, lse, dout, deterministic,
                             (*aligned_captures(captures), *ranges))
    c = _validate(q, k, v, causal, window, scale, softcap, layout, deterministic)
    _check_capture_devices(captures, c.device)
    _check_key_ranges(key_ranges, traced.key_range_rows, c)
    dout = _check_dout(dout, c)
    _, mask_mod, score_mod_grad = traced.functions()
    L = c.layout
    grads = _reference.attention_modified_backward(
        _bhsd(dout, L), _bhsd(q, L), _bhsd(k, L), _bhsd(v, L), c.opts.mask, c.opts.scale,
        c.opts.softcap, score_mod_grad, mask_mod)
    return tuple(_bhsd(g, L).contiguous() for g in grads)


def _traced_options(window, scale, softcap):
    """Options as the fake implementations can check them: under dynamic
    shapes torch.compile may pass the window bounds as SymInts (the real
    call gets the ints, and they are checked then)."""
    if window is not None and not all(type(w) is int for w in window):
        window = None
    if scale is not None and not isinstance(scale, (int, float)):
        scale = None
    if softcap is not None and not isinstance(softcap, (int, float)):
        softcap = None
    return window, scale, softcap


def fake_forward(q, k, v, causal, window, scale, softcap, layout, deterministic):
    """Outputs of the forward for fake/meta tensors (torch.compile tracing):
    the shapes, dtypes and (contiguous) strides of the real outputs."""
    window, scale, softcap = _traced_options(window, scale, softcap)
    c = _validate(q, k, v, causal, window, scale, softcap, layout, deterministic,
                  check_strides=False)
    d = c.dims
    return (q.new_empty(_out_shape(c)), q.new_empty((d.B, d.Hq, d.Nq), dtype=torch.float32))


def fake_backward(dout, q, k, v, causal, window, scale, softcap, layout, deterministic):
    window, scale, softcap = _traced_options(window, scale, softcap)
    _validate(q, k, v, causal, window, scale, softcap, layout, deterministic, check_strides=False)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def fake_modified_forward(q, k, v, captures, key, causal, window, scale, softcap, layout,
                          deterministic, key_ranges=None, query_ranges=None):
    """fake_forward with score_mod / mask_mod: also the captures against the
    key (number, dtypes, shapes) and their device, and the key ranges."""
    from . import _modifiers
    traced = _modifiers.from_key(key, captures)
    out = fake_forward(q, k, v, causal, window, scale, softcap, layout, deterministic)
    _check_capture_devices(captures, q.device)
    _check_fake_key_ranges(key_ranges, traced, q, layout)
    return out


def fake_modified_backward(dout, q, k, v, captures, key, causal, window, scale, softcap,
                           layout, deterministic, key_ranges=None, query_ranges=None):
    """fake_backward with score_mod / mask_mod (as fake_modified_forward)."""
    from . import _modifiers
    traced = _modifiers.from_key(key, captures)
    grads = fake_backward(dout, q, k, v, causal, window, scale, softcap, layout, deterministic)
    _check_capture_devices(captures, q.device)
    _check_fake_key_ranges(key_ranges, traced, q, layout)
    return grads


def _check_fake_key_ranges(ranges, traced, q, layout) -> None:
    """_check_key_ranges on fake tensors (the dims from q's shape)."""
    b, x, y = q.shape[:3]
    hq, nq = (y, x) if str(layout).lower() == "bshd" else (x, y)
    check_key_ranges(ranges, traced.key_range_rows, b, hq, nq, q.device)


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------

def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


# ---------------------------------------------------------------------------
# Score and mask modifiers
# ---------------------------------------------------------------------------

def check_key_ranges(ranges, rows, B, Hq, Nq, device) -> None:
    """That `ranges` is the key ranges tensor of a call with `rows` query
    rows per group (None: the call takes none): [B, Hq, ceil(Nq / rows), 4]
    int32 on `device`."""
    if rows is None:
        if ranges is not None:
            raise ValueError("key ranges given to modifiers compiled without them")
        return
    if not isinstance(ranges, torch.Tensor):
        raise TypeError(f"key_ranges: the ranges must be a torch.Tensor, got "
                        f"{type(ranges).__name__}")
    want = (B, Hq, -(-Nq // rows), _key_ranges.COLUMNS)
    if ranges.dtype != torch.int32 or tuple(ranges.shape) != want:
        raise ValueError(f"key_ranges: the ranges must be int32 of shape [B, Hq, ceil(Nq / "
                         f"{rows}), {want[3]}] = {list(want)} for this call, got {ranges.dtype} of "
                         f"shape {list(ranges.shape)} (flashmlir.key_ranges makes them)")
    if ranges.device != device:
        raise ValueError(f"key_ranges: the ranges are on {ranges.device} but q, k and v are "
                         f"on {device}")


def _check_key_ranges(ranges, rows, c: _Call) -> None:
    check_key_ranges(ranges, rows, c.dims.B, c.dims.Hq, c.dims.Nq, c.device)


def _check_capture_devices(captures, device) -> None:
    for n, t in enumerate(captures):
        if t.device != device:
            raise ValueError(
                f"score_mod / mask_mod read a tensor on {t.device} (capture {n}: "
                f"{t.dtype} of shape {tuple(t.shape)}) but q, k and v are on {device}: "
                "create it on their device")


def _capture_args(spec, captures):
    """The captured tensors by kernel parameter name (capture<n>), checked
    against the kernel's manifest (count, dtype, shape)."""
    from ._modifiers import _CAPTURE_TYPES
    want = spec.captures
    if len(captures) != len(want):
        raise ValueError(f"score_mod / mask_mod read {len(captures)} tensor(s) but kernel "
                         f"{spec.name} takes {len(want)} ({spec.json_path})")
    for n, (t, w) in enumerate(zip(captures, want)):
        if (_CAPTURE_TYPES.get(t.dtype), tuple(t.shape)) != (w.dtype, w.shape):
            raise ValueError(
                f"score_mod / mask_mod: capture {n} is a {t.dtype} tensor of shape "
                f"{tuple(t.shape)} but kernel {spec.name} takes {w.dtype} of shape "
                f"{list(w.shape)} ({spec.json_path})")
    return {w.name: t for t, w in zip(captures, want)}


def _aligned(t: torch.Tensor) -> torch.Tensor:
    """t, or (when its data pointer is not 16-byte aligned, as the launch path
    needs every pointer) a copy with the same sizes and strides."""
    if t.data_ptr() % _launch.POINTER_ALIGNMENT == 0:
        return t
    if t.numel() == 0:
        return t.new_empty_strided(t.shape, t.stride())
    extent = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    flat = t.new_empty(extent)
    flat.copy_(t.as_strided((extent,), (1,)))      # (from t's storage offset)
    return flat.as_strided(t.shape, t.stride())


def aligned_captures(captures) -> Tuple[torch.Tensor, ...]:
    return tuple(_aligned(t) for t in captures)


def _modified(q, k, v, causal, window, scale, softcap, layout, deterministic, out, lse,
              score_mod, mask_mod, key_ranges=None):
    """attention with score_mod / mask_mod, traced first (the modifiers'
    errors surface for every device; see _modifiers.traced). Plain tensors
    on the kernels' device run the compiled forward kernel of the
    modifiers, with their captured tensors bound at each call, and when q,
    k or v requires grad, _FlashAttention over it (the backward kernels of
    the same modifiers, the captures bound again). Other tensors (CPU,
    meta, fake) and calls under torch.compile take the custom ops of
    _ops.py, given the traced key and the captures, which run the same
    kernels (CPU tensors: the reference on the evaluated regions). When a
    captured tensor requires grad, kernel tensors in eager mode run
    _FlashAttention with the functions (the captures' gradients by row
    chunks, _capture_grads); other tensors and torch.compile the PyTorch
    reference on the Python functions (plain torch ops, so autograd and
    torch.compile trace through). `key_ranges` (a KeyRanges or None): the
    forward kernel's run-time key ranges (the reference checks and ignores
    them)."""
    from . import _modifiers
    compiling = torch.compiler.is_compiling()
    # (Under torch.compile dynamo traces the tracer itself, see _ops.py: the
    # key is a constant of the graph, the captures its tensors.)
    traced = _modifiers.trace(score_mod, mask_mod) if compiling else \
        _modifiers.traced(score_mod, mask_mod)
    ranges = qranges = None
    if key_ranges is not None:
        if mask_mod is None:
            raise ValueError("key_ranges bound where a mask_mod's keys lie: pass the "
                             "mask_mod too")
        if not isinstance(key_ranges, _key_ranges.KeyRanges):
            raise TypeError(f"key_ranges must be a flashmlir.KeyRanges (from "
                            f"flashmlir.key_ranges), got {type(key_ranges).__name__}")
        # (int(): under torch.compile with dynamic shapes an int attribute of
        # an input is symbolic; the rows select a kernel, so they specialize.)
        traced = traced.with_key_ranges(int(key_ranges.rows))
        ranges, qranges = key_ranges.ranges, key_ranges.query_ranges
    captures = traced.captures
    if not _needs_grad(*captures):
        if not compiling and _kernel_tensors(q, k, v, out, lse):
            plan = _forward_plan(q, k, v, causal, window, scale, softcap, layout,
                                 deterministic, out, lse, traced, ranges)
            ranges = None if ranges is None else _aligned(ranges)
            if _needs_grad(q, k, v):
                if out is not None or lse is not None:
                    raise ValueError("out= and lse= cannot be used when q, k or v requires grad")
                return _FlashAttention.apply(q, k, v, plan, deterministic, None, ranges,
                                             qranges, *aligned_captures(captures))
            return plan.run(q, k, v, out, lse, aligned_captures(captures), ranges)
        return _ops.attention_modified(q, k, v, traced, causal, window, scale, softcap, layout,
                                       deterministic, out, lse, ranges, qranges)
    if not compiling and _kernel_tensors(q, k, v, out, lse):
        # The kernels for out, lse and dq, dk, dv; the captures' gradients
        # by row chunks in the backward.
        if out is not None or lse is not None:
            raise ValueError("out= and lse= cannot be used when a tensor requires grad")
        plan = _forward_plan(q, k, v, causal, window, scale, softcap, layout, deterministic,
                             None, None, traced, ranges)
        return _FlashAttention.apply(q, k, v, plan, deterministic,
                                     (score_mod, mask_mod, captures),
                                     None if ranges is None else _aligned(ranges), qranges,
                                     *aligned_captures(captures))
    c = _validate(q, k, v, causal, window, scale, softcap, layout, deterministic,
                  check_strides=not compiling)
    _check_capture_devices(captures, c.device)
    _check_key_ranges(ranges, traced.key_range_rows, c)
    if (out is not None or lse is not None) and _needs_grad(q, k, v):
        raise ValueError("out= and lse= cannot be used when q, k or v requires grad")
    o, l = _reference.attention_modified(
        _bhsd(q, c.layout), _bhsd(k, c.layout), _bhsd(v, c.layout), c.opts.mask,
        c.opts.scale, c.opts.softcap, score_mod, mask_mod)
    o = o if c.layout == "bhsd" else o.transpose(1, 2)
    if out is None and lse is None:
        return o, l
    out, lse = _outputs(c, out, lse)
    out.copy_(o)
    lse.copy_(l)
    return out, lse


def attention(q, k, v, causal=False, window=None, scale=None, softcap=None,
              return_lse=False, layout="bhsd", *, out=None, lse=None, deterministic=False,
              score_mod=None, mask_mod=None, key_ranges=None):
    """Exact scaled-dot-product attention, `softmax(scale * q k^T) v`.

    attention(q, k, v, causal=False, window=None, scale=None, softcap=None,
              return_lse=False, layout="bhsd", *, out=None, lse=None,
              deterministic=False, score_mod=None, mask_mod=None, key_ranges=None)

    Args:
      q: [B, Hq, Nq, D] (layout "bhsd") or [B, Nq, Hq, D] (layout "bshd"),
         float16 or bfloat16, on a CUDA device (CPU tensors run the PyTorch
         reference, in float32 math).
      k: [B, Hkv, Nk, D] (or [B, Nk, Hkv, D]); Hq must be a multiple of Hkv
         (grouped-query / multi-query attention).
      v: [B, Hkv, Nk, Dv] (or [B, Nk, Hkv, Dv]).
      causal: key j is visible from query i iff j <= i + Nk - Nq (aligned to
         the bottom-right corner when Nq != Nk).
      window: (left, right) sliding window around that diagonal, -1 for
         unbounded; with causal the right bound must be 0 (or -1).
      scale: softmax scale, > 0; default 1/sqrt(D).
      softcap: scores become softcap * tanh(scores / softcap); > 0 or None.
      return_lse: also return the natural-log log-sum-exp [B, Hq, Nq] (f32).
      layout: "bhsd" or "bshd"; the output uses the same layout.
      out, lse: optional preallocated outputs (same shapes as the results);
         not allowed when q, k or v requires grad.
      deterministic: run the backward (when q, k or v requires grad) with the
         deterministic kernels: dq without atomics, so repeated backward
         passes give bitwise-identical gradients (somewhat slower).
      score_mod, mask_mod: FlexAttention's modifiers, Python functions
         score_mod(score, b, h, q_idx, kv_idx) -> score (the scaled score,
         before the softcap) and mask_mod(b, h, q_idx, kv_idx) -> bool (AND-ed
         with causal / window); h is the query head, q_idx and kv_idx 0-based
         positions (not aligned: a bottom-right causal mask with Nq != Nk is
         kv_idx <= q_idx + Nk - Nq). They may index tensors defined outside
         them (captures, on q's device; gradients flow to those that
         require grad). Traced to the fa dialect's regions at every call
         (flashmlir.trace_modifiers; unsupported Python raises
         UnsupportedError). On CUDA tensors the forward runs a kernel
         compiled for the traced modifiers, with any causal / window /
         softcap / scale, both layouts and GQA: found in the kernel folders
         or compiled once with fa-compile into the cache (their key, the
         traced IR and the captures' dtypes and shapes, names the kernel;
         the captures' values are read at each call, any strides). When q,
         k or v requires grad, the backward runs the backward kernels of
         the same modifiers (deterministic= as without modifiers). A
         captured tensor that requires grad (a learned bias table) gets
         its gradient after the backward kernels, from the saved out and
         lse by rows in chunks in PyTorch (O(chunk * Nk) memory; about a
         reference backward's time); under torch.compile such a call
         traces the PyTorch reference (O(Nq * Nk) memory). torch.compile(fullgraph=True) traces the
         modifiers at compile time into the custom ops
         torch.ops.flashmlir.attention_forward_mod / attention_backward_mod
         (the key a constant, the captures graph tensors), which run the
         same kernels; CPU tensors run them too, the reference on the
         traced regions. Python numbers the functions read and the
         captures' shapes are constants of the graph (a recompile per
         value, as a kernel per value); comparing a traced value with a
         symbolic int does not trace (see _ops.py).
      key_ranges: where a mask_mod's visible keys lie, for masks the
         compiler cannot analyze (a document mask over per-token ids): a
         flashmlir.KeyRanges from flashmlir.key_ranges(mask_mod, B, Hq, Nq,
         Nk, causal=, window=), made once per mask and reused (as
         FlexAttention's create_block_mask). The forward kernel then visits
         only the key blocks of each query block's ranges; without them it
         visits every block the built-in mask allows. A promise: keys
         outside the ranges are treated as hidden (the reference and the
         backward ignore the ranges).

    Rows that see no key give out = 0 and lse = +inf. The last dimension of
    every tensor must be contiguous and data pointers 16-byte aligned.

    The result is differentiable in q, k and v (lse is not). In eager mode a
    call on CUDA tensors reuses a launch plan cached per shapes, strides,
    dtypes, devices and options; under torch.compile it is the custom op
    torch.ops.flashmlir.attention_forward (and attention_backward).

    Returns: out, or (out, lse) when return_lse.
    """
    if score_mod is not None or mask_mod is not None or key_ranges is not None:
        o, l = _modified(q, k, v, causal, window, scale, softcap, layout, deterministic,
                         out, lse, score_mod, mask_mod, key_ranges)
        return (o, l) if return_lse else o
    if not torch.compiler.is_compiling():
        # Eager, plain CUDA tensors: the cached plan, no dispatcher.
        plan = _forward_plan(q, k, v, causal, window, scale, softcap, layout, deterministic,
                             out, lse)
        if plan is not None:
            if _needs_grad(q, k, v):
                if out is not None or lse is not None:
                    raise ValueError("out= and lse= cannot be used when q, k or v requires grad")
                o, l = _FlashAttention.apply(q, k, v, plan, deterministic, None, None, None)
            else:
                o, l = plan.run(q, k, v, out, lse)
            return (o, l) if return_lse else o
    # torch.compile, CPU (reference), meta and fake tensors: the custom ops.
    o, l = _ops.attention(q, k, v, causal, window, scale, softcap, layout, deterministic,
                          out, lse)
    return (o, l) if return_lse else o


from . import _key_ranges, _ops  # noqa: E402  (_ops registers the custom ops; imports this module)
