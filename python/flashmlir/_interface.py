"""`flashmlir.attention` on torch tensors: validation, layouts, output
allocation, kernel selection and launch, and the autograd wrapper into
which the backward kernels will slot."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from . import _cuda, _kernels, _launch
from . import _validate as V

_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16"}


@dataclass(frozen=True)
class _Call:
    dims: V.Dims
    opts: V.Options
    dtype: torch.dtype
    device: torch.device
    layout: str

    def request(self, kind: str = "forward") -> _kernels.KernelRequest:
        left, right = self.opts.mask
        return _kernels.KernelRequest(kind, _DTYPES[self.dtype], self.dims.D, self.dims.Dv,
                                      (left, right), self.opts.softcap, self.opts.scale)

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


def _validate(q, k, v, causal, window, scale, softcap, layout) -> _Call:
    layout = V.check_layout(layout)
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
    return _Call(dims, opts, q.dtype, q.device, layout)


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


def _find_kernel(c: _Call, kind: str = "forward"):
    ordinal = _device_ordinal(c.device)
    info = _cuda.device_info(ordinal)
    spec = _kernels.default_registry().find(c.request(kind), info.cc)
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


def _backward(q, k, v, out, lse, dout, c: _Call):
    # The backward kernels (kinds backward_preprocess, backward,
    # backward_dq_convert) slot in here: look them up with
    # c.request("backward") etc. and launch them like _forward does.
    raise NotImplementedError(
        "flashmlir: the backward pass is not available yet (no backward kernels are "
        "wired into the Python package); call flashmlir.attention under "
        "torch.no_grad() or on tensors that do not require grad")


def backward_available(dtype=torch.bfloat16, head_dim: int = 128, causal: bool = False,
                       window=None, softcap=None, scale=None) -> bool:
    """Whether `attention(...).backward()` can run for this configuration."""
    return False


class _FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, call):
        out, lse = _forward(q, k, v, call)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.call = call
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, out, lse, dout, ctx.call)
        return dq, dk, dv, None


def attention(q, k, v, causal=False, window=None, scale=None, softcap=None,
              return_lse=False, layout="bhsd", *, out=None, lse=None):
    c = _validate(q, k, v, causal, window, scale, softcap, layout)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if needs_grad:
        if out is not None or lse is not None:
            raise ValueError("out= and lse= cannot be used when q, k or v requires grad")
        o, l = _FlashAttention.apply(q, k, v, c)
    else:
        o, l = _forward(q, k, v, c, out, lse)
    return (o, l) if return_lse else o
