"""`flashmlir.attention` on torch tensors: validation, layouts, output
allocation, kernel selection and launch, and the autograd Function whose
backward runs the kernels of a backward manifest.

Debug hook: with FLASHMLIR_POISON_GRADS=1 in the environment (read at every
backward), dq, dk, dv and the workspace buffers are filled with NaN before
the backward kernels run, so a test can check that the kernels write every
gradient element and initialise their workspace themselves."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from . import _backward as _bwd
from . import _cuda, _kernels, _launch
from . import _manifest as M
from . import _validate as V
from ._errors import CudaError, CudaUnavailableError, KernelNotFoundError, LaunchError

_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16"}

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
    return _kernels._env_flag(POISON_ENV)


@dataclass(frozen=True)
class _Call:
    dims: V.Dims
    opts: V.Options
    dtype: torch.dtype
    device: torch.device
    layout: str
    deterministic: bool = False

    def request(self, kind: str = "forward") -> _kernels.KernelRequest:
        left, right = self.opts.mask
        return _kernels.KernelRequest(kind, _DTYPES[self.dtype], self.dims.D, self.dims.Dv,
                                      (left, right), self.opts.softcap, self.opts.scale,
                                      self.deterministic and kind == "backward")

    def scalars(self):
        """Values scalar kernel parameters may name in their manifest."""
        left, right = self.opts.mask
        return {"scale": self.opts.scale, "softcap": self.opts.softcap or 0.0,
                "window_left": left, "window_right": right, "causal": int(right == 0),
                "log2e_scale": self.opts.scale * math.log2(math.e)}


def _check_tensor(name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")


def _bhsd(t: torch.Tensor, layout: str) -> torch.Tensor:
    return t if layout == "bhsd" else t.transpose(1, 2)


def _check_operand(name: str, t: torch.Tensor, rows_aligned: bool = True) -> None:
    V.check_strided(name, tuple(t.shape), tuple(t.stride()), t.data_ptr(), t.element_size(),
                    rows_aligned=rows_aligned)


def _validate(q, k, v, causal, window, scale, softcap, layout,
              deterministic=False) -> _Call:
    layout = V.check_layout(layout)
    deterministic = V.check_bool("deterministic", deterministic)
    for n, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(n, t)
    for n, t in (("q", q), ("k", k), ("v", v)):
        if t.device.type != "cuda":
            raise ValueError(f"{n} is on device '{t.device}'; flashmlir.attention needs "
                             "CUDA tensors")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, "
                         f"{v.device}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in _DTYPES:
        raise TypeError(f"flashmlir.attention supports float16 and bfloat16, got {q.dtype}")
    dims = V.check_shapes(tuple(q.shape), tuple(k.shape), tuple(v.shape), layout)
    opts = V.check_options(causal, window, scale, softcap, dims.D)
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


def _find_kernel(c: _Call, kind: str = "forward"):
    spec, ordinal = _find_spec(c, kind)
    return _kernels.load_kernel(spec, ordinal)


def _forward(q, k, v, c: _Call, out=None, lse=None):
    """Runs the forward kernel; q, k, v (and out) in the caller's layout."""
    out, lse = _outputs(c, out, lse)
    d = c.dims
    if d.empty_output:
        return out, lse
    if d.Nk == 0:
        # Every row sees no key: out = 0, lse = +inf (the op's semantics).
        out.zero_()
        lse.fill_(math.inf)
        return out, lse
    kernel = _find_kernel(c, "forward")
    ordinal = _device_ordinal(c.device)
    stream = torch.cuda.current_stream(ordinal).cuda_stream
    args = {"q": _bhsd(q, c.layout), "k": _bhsd(k, c.layout), "v": _bhsd(v, c.layout),
            "out": _bhsd(out, c.layout), "lse": lse}
    args.update(c.scalars())
    _launch.launch(kernel, args, d.env(), stream)
    return out, lse


def _check_dout(dout, c: _Call) -> torch.Tensor:
    """dout as the kernels need it: the output's shape, dtype and device;
    copied to a contiguous tensor (in the call's layout) when its last
    dimension is strided or its pointer or rows are not 16-byte aligned,
    e.g. the expanded one of out.sum().backward()."""
    shape = _out_shape(c)
    if dout is None:  # only with ctx.set_materialize_grads(False); keep it total
        return torch.zeros(shape, dtype=c.dtype, device=c.device)
    _check_tensor("dout", dout)
    if tuple(dout.shape) != shape:
        raise ValueError(f"the gradient of out must have shape {shape} "
                         f"(layout={c.layout!r}), got {tuple(dout.shape)}")
    if dout.dtype != c.dtype:
        raise TypeError(f"the gradient of out must be {c.dtype}, got {dout.dtype}")
    if dout.device != c.device:
        raise ValueError(f"the gradient of out must be on {c.device}, got {dout.device}")
    try:
        _check_operand("dout", dout)
    except ValueError:
        # clone, not contiguous(): a contiguous view at a misaligned offset
        # needs a fresh (aligned) allocation too.
        dout = dout.clone(memory_format=torch.contiguous_format)
    return dout


def _backward(q, k, v, out, lse, dout, c: _Call):
    """Runs the backward manifest's kernels; every tensor in the caller's
    layout (lse [B, Hq, Nq]). Returns dq, dk, dv shaped like q, k, v."""
    dout = _check_dout(dout, c)
    d = c.dims
    dq = torch.empty(tuple(q.shape), dtype=c.dtype, device=c.device)
    dk = torch.empty(tuple(k.shape), dtype=c.dtype, device=c.device)
    dv = torch.empty(tuple(v.shape), dtype=c.dtype, device=c.device)
    if d.empty_output or d.Nk == 0:
        # No query row, or no key: out does not depend on q, k or v.
        for g in (dq, dk, dv):
            g.zero_()
        return dq, dk, dv
    spec, ordinal = _find_spec(c, "backward")
    kernels = _kernels.load_kernels(spec, ordinal)
    stream = torch.cuda.current_stream(ordinal).cuda_stream
    poison = poison_grads()
    if poison:
        for g in (dq, dk, dv):
            g.fill_(math.nan)

    def alloc(name, shape, dtype):
        if dtype not in _TORCH_DTYPES:
            raise LaunchError(f"{spec.name}: workspace {name} has element type {dtype}, "
                              f"which this torch has no dtype for")
        t = torch.empty(shape, dtype=_TORCH_DTYPES[dtype], device=c.device)
        if poison and t.is_floating_point():
            t.fill_(math.nan)
        return t

    tensors = {"q": _bhsd(q, c.layout), "k": _bhsd(k, c.layout), "v": _bhsd(v, c.layout),
               "out": _bhsd(out, c.layout), "dout": _bhsd(dout, c.layout), "lse": lse,
               "dq": _bhsd(dq, c.layout), "dk": _bhsd(dk, c.layout), "dv": _bhsd(dv, c.layout)}
    _, preps = _bwd.prepare(spec, kernels, tensors, d.env(), alloc, c.scalars())
    _bwd.launch(preps, stream)
    return dq, dk, dv


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


class _FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, call):
        out, lse = _forward(q, k, v, call)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.call = call
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    @once_differentiable
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, out, lse, dout, ctx.call)
        need = ctx.needs_input_grad
        return (dq if need[0] else None, dk if need[1] else None,
                dv if need[2] else None, None)


def attention(q, k, v, causal=False, window=None, scale=None, softcap=None,
              return_lse=False, layout="bhsd", *, out=None, lse=None, deterministic=False):
    c = _validate(q, k, v, causal, window, scale, softcap, layout, deterministic)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if needs_grad:
        if out is not None or lse is not None:
            raise ValueError("out= and lse= cannot be used when q, k or v requires grad")
        o, l = _FlashAttention.apply(q, k, v, c)
    else:
        o, l = _forward(q, k, v, c, out, lse)
    return (o, l) if return_lse else o
