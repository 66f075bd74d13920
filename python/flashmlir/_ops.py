"""The op as `torch.library` custom ops, for torch.compile, torch.export and
every tensor that is not a plain CUDA tensor in eager mode (CPU tensors run
the PyTorch reference; meta and fake tensors the fake implementations).

    flashmlir::attention_forward(q, k, v, causal, window_left, window_right,
        scale, softcap, layout, deterministic) -> (out, lse)
    flashmlir::attention_forward_out(q, k, v, out!, lse!, ...) -> ()   # out=/lse=
    flashmlir::attention_backward(dout, q, k, v, out, lse, ...) -> (dq, dk, dv)

The forward's autograd is registered with `register_autograd` (its
backward calls attention_backward), so `torch.compile(fullgraph=True)`
traces forward and backward with no graph break, dynamic shapes included:
the fake implementations compute the outputs' shapes (contiguous, like the
real ones) from the symbolic input shapes, and check what can be checked
without data (dtypes, devices, shapes, options). The real implementations
are the plan-cached kernel launches of _interface (and its CPU reference),
so eager, compiled and CUDA-graph modes run the same kernels; the launch
stream is torch.cuda.current_stream() when the op runs.

`deterministic` is an argument of the forward only so that its backward can
select the deterministic kernels.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _interface as I

_NS = "flashmlir"


@torch.library.custom_op(f"{_NS}::attention_forward", mutates_args=())
def attention_forward(q: Tensor, k: Tensor, v: Tensor, causal: bool, window_left: int,
                      window_right: int, scale: Optional[float], softcap: Optional[float],
                      layout: str, deterministic: bool) -> Tuple[Tensor, Tensor]:
    return I.forward_impl(q, k, v, causal, I._window_arg(window_left, window_right), scale,
                          softcap, layout, deterministic)


@attention_forward.register_fake
def _(q, k, v, causal, window_left, window_right, scale, softcap, layout, deterministic):
    return I.fake_forward(q, k, v, causal, I._window_arg(window_left, window_right), scale,
                          softcap, layout, deterministic)


@torch.library.custom_op(f"{_NS}::attention_forward_out", mutates_args=("out", "lse"))
def attention_forward_out(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                          causal: bool, window_left: int, window_right: int,
                          scale: Optional[float], softcap: Optional[float],
                          layout: str) -> None:
    I.forward_impl(q, k, v, causal, I._window_arg(window_left, window_right), scale, softcap,
                   layout, False, out, lse)


@attention_forward_out.register_fake
def _(q, k, v, out, lse, causal, window_left, window_right, scale, softcap, layout):
    o, l = I.fake_forward(q, k, v, causal, I._window_arg(window_left, window_right), scale,
                          softcap, layout, False)
    if tuple(out.shape) != tuple(o.shape) or out.dtype != o.dtype:
        raise ValueError(f"out must have shape {tuple(o.shape)} and dtype {o.dtype}, got "
                         f"{tuple(out.shape)} {out.dtype}")
    if tuple(lse.shape) != tuple(l.shape) or lse.dtype != torch.float32:
        raise ValueError(f"lse must have shape {tuple(l.shape)} and dtype float32, got "
                         f"{tuple(lse.shape)} {lse.dtype}")


@torch.library.custom_op(f"{_NS}::attention_backward", mutates_args=())
def attention_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                       causal: bool, window_left: int, window_right: int,
                       scale: Optional[float], softcap: Optional[float], layout: str,
                       deterministic: bool) -> Tuple[Tensor, Tensor, Tensor]:
    return I.backward_impl(dout, q, k, v, out, lse, causal,
                           I._window_arg(window_left, window_right), scale, softcap, layout,
                           deterministic)


@attention_backward.register_fake
def _(dout, q, k, v, out, lse, causal, window_left, window_right, scale, softcap, layout,
      deterministic):
    return I.fake_backward(dout, q, k, v, causal, I._window_arg(window_left, window_right),
                           scale, softcap, layout, deterministic)


def _setup_context(ctx, inputs, output):
    q, k, v, causal, wl, wr, scale, softcap, layout, deterministic = inputs
    out, lse = output
    ctx.set_materialize_grads(False)   # no zero dlse per call (lse is not differentiable)
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.options = (causal, wl, wr, scale, softcap, layout, deterministic)
    ctx.mark_non_differentiable(lse)


def _backward(ctx, dout, dlse):
    q, k, v, out, lse = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros_like(out)
    dq, dk, dv = attention_backward(dout, q, k, v, out, lse, *ctx.options)
    need = ctx.needs_input_grad
    return (dq if need[0] else None, dk if need[1] else None, dv if need[2] else None,
            None, None, None, None, None, None, None)


attention_forward.register_autograd(_backward, setup_context=_setup_context)


def attention(q, k, v, causal, window, scale, softcap, layout, deterministic, out, lse):
    """flashmlir.attention through the custom ops. Returns out, lse."""
    if not torch.compiler.is_compiling():
        I.V.check_options(causal, window, scale, softcap, 8)   # messages before the dispatcher
    wl, wr = (-1, -1) if window is None else window
    if out is None and lse is None:
        return attention_forward(q, k, v, causal, wl, wr, scale, softcap, layout, deterministic)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        raise ValueError("out= and lse= cannot be used when q, k or v requires grad")
    if out is None or lse is None:
        o_shape, l_shape = _output_shapes(q, v, layout)
        if out is None:
            out = torch.empty(o_shape, dtype=q.dtype, device=q.device)
        if lse is None:
            lse = torch.empty(l_shape, dtype=torch.float32, device=q.device)
    attention_forward_out(q, k, v, out, lse, causal, wl, wr, scale, softcap, layout)
    return out, lse


def _output_shapes(q, v, layout):
    """Shapes of out and lse (traceable: no validation, see fake_forward)."""
    b, x, y, _ = q.shape
    dv = v.shape[-1]
    if str(layout).lower() == "bshd":
        return (b, x, y, dv), (b, y, x)
    return (b, x, y, dv), (b, x, y)
