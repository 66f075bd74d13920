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

With score_mod / mask_mod (Python functions, see _modifiers):

    flashmlir::attention_forward_mod(q, k, v, captures, key, causal,
        window_left, window_right, scale, softcap, layout, deterministic,
        key_ranges=None) -> (out, lse)
    flashmlir::attention_backward_mod(dout, q, k, v, out, lse, captures, key,
        ..., key_ranges=None) -> (dq, dk, dv)

`key_ranges`: the forward kernel's run-time key ranges, when the key has
them (Traced.key_range_rows; flashmlir.key_ranges makes the tensor).

`key` is the traced modifiers' Traced.op_key(): their Traced.key() (the
regions' MLIR and the captures' types, the string kernels of the modifiers
are cached by) on one line, as inductor's generated code needs. The
IR travels in the graph, so the real implementations rebuild the Traced
from it (_modifiers.from_key, parsed once per key): a compiled, cached or
exported graph needs nothing registered when it was traced. `captures`
are the tensors the functions read, explicit inputs so that dynamo and
AOT autograd see them (graph inputs, buffers or tensors computed in the
graph) and each call binds the current ones. The real implementations are
the eager path's: the modifiers' kernels for CUDA tensors (the same plans,
captures bound per launch), and for CPU tensors the reference on the
regions evaluated from the IR (Traced.functions: the custom op has no
Python functions, and runs no autograd, so its backward uses the
score_mod's derivative by the chain rule over the region, as the kernels
do). The fakes check the captures against the key (number, dtypes,
shapes) and their device, besides the dense checks. The forward's
autograd gives q, k and v their gradients; calls whose captures require
grad never take these ops (the reference on the Python functions,
differentiable in them, runs instead; traced by dynamo under
torch.compile, with no warning there: dynamo cannot trace one).

Under torch.compile, dynamo traces flashmlir.attention and with it the
tracer (_modifiers.trace) on the user's functions, whatever defined them:
the key comes out a constant of the graph, the captures graph tensors, and
forward and backward trace with no graph break, q, k and v's sizes
symbolic under dynamic shapes. (Not running the tracer in dynamo would
not do: torch.compiler.disable breaks the graph, allow_in_graph and
leaf functions return tensors only, not a key, and functions made in the
compiled code over its tensors, the usual closure, exist as no Python
object at trace time to run outside it.) What the
tracer needs to run there: a TorchFunctionMode routes `table[h, kv_idx]`
to it (dynamo finds no __torch_function__ inside a tuple index), and the
Python numbers a region builds in (and the captures' sizes) are made
constants, which specializes symbolic ones (a guard on the value: another
value is another kernel, so another graph). Not traceable by dynamo: a
comparison of a traced value with a symbolic int (an int argument of the
compiled function or a size under dynamic shapes; dynamo compares it
itself), e.g. `q_idx - kv_idx < n` (write `kv_idx > q_idx - n`, or make n a
constant with operator.index(n)); an unsupported construct in a function
ends the trace with dynamo's error naming the UnsupportedError. None of
this runs per call: the compiled graph calls the op.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

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


# -- score_mod / mask_mod ------------------------------------------------------------------

@torch.library.custom_op(f"{_NS}::attention_forward_mod", mutates_args=())
def attention_forward_mod(q: Tensor, k: Tensor, v: Tensor, captures: List[Tensor], key: str,
                          causal: bool, window_left: int, window_right: int,
                          scale: Optional[float], softcap: Optional[float], layout: str,
                          deterministic: bool,
                          key_ranges: Optional[Tensor] = None,
                          query_ranges: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    return I.modified_forward_impl(q, k, v, captures, key, causal,
                                   I._window_arg(window_left, window_right), scale, softcap,
                                   layout, deterministic, key_ranges, query_ranges)


@attention_forward_mod.register_fake
def _(q, k, v, captures, key, causal, window_left, window_right, scale, softcap, layout,
      deterministic, key_ranges=None, query_ranges=None):
    return I.fake_modified_forward(q, k, v, captures, key, causal,
                                   I._window_arg(window_left, window_right), scale, softcap,
                                   layout, deterministic, key_ranges, query_ranges)


@torch.library.custom_op(f"{_NS}::attention_backward_mod", mutates_args=())
def attention_backward_mod(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor,
                           lse: Tensor, captures: List[Tensor], key: str, causal: bool,
                           window_left: int, window_right: int, scale: Optional[float],
                           softcap: Optional[float], layout: str, deterministic: bool,
                           key_ranges: Optional[Tensor] = None,
                           query_ranges: Optional[Tensor] = None
                           ) -> Tuple[Tensor, Tensor, Tensor]:
    return I.modified_backward_impl(dout, q, k, v, out, lse, captures, key, causal,
                                    I._window_arg(window_left, window_right), scale, softcap,
                                    layout, deterministic, key_ranges, query_ranges)


@attention_backward_mod.register_fake
def _(dout, q, k, v, out, lse, captures, key, causal, window_left, window_right, scale,
      softcap, layout, deterministic, key_ranges=None, query_ranges=None):
    return I.fake_modified_backward(dout, q, k, v, captures, key, causal,
                                    I._window_arg(window_left, window_right), scale, softcap,
                                    layout, deterministic, key_ranges, query_ranges)


def _setup_context_mod(ctx, inputs, output):
    q, k, v, captures, key = inputs[:5]
    options, extra = inputs[5:12], tuple(inputs[12:]) + (None, None)
    ranges, qranges = extra[0], extra[1]
    out, lse = output
    ctx.set_materialize_grads(False)
    # (The key ranges and the backward's query ranges, when given, saved
    # after the captures: the backward's plan is the forward's, keyed by
    # them too.)
    ctx.save_for_backward(q, k, v, out, lse, *captures,
                          *([] if ranges is None else [ranges]),
                          *([] if qranges is None else [qranges]))
    ctx.key, ctx.options = key, options
    ctx.ranged, ctx.qranged = ranges is not None, qranges is not None
    ctx.mark_non_differentiable(lse)


def _backward_mod(ctx, dout, dlse):
    q, k, v, out, lse, *captures = ctx.saved_tensors
    qranges = captures.pop() if ctx.qranged else None
    ranges = captures.pop() if ctx.ranged else None
    if dout is None:
        dout = torch.zeros_like(out)
    dq, dk, dv = attention_backward_mod(dout, q, k, v, out, lse, captures, ctx.key,
                                        *ctx.options, ranges, qranges)
    need = ctx.needs_input_grad
    # (No gradients of the captures: calls whose captures require grad run
    # the reference instead, see _interface._modified.)
    # (As many as the call passed: a defaulted key_ranges may be left out.)
    return ((dq if need[0] else None, dk if need[1] else None, dv if need[2] else None,
             [None] * len(captures)) + (None,) * (len(need) - 4))


attention_forward_mod.register_autograd(_backward_mod, setup_context=_setup_context_mod)


def attention_modified(q, k, v, traced, causal, window, scale, softcap, layout, deterministic,
                       out, lse, key_ranges=None, query_ranges=None):
    """flashmlir.attention with score_mod / mask_mod (`traced`, their Traced;
    no captured tensor requires grad) and the key ranges tensor when traced
    has them, through the custom ops, out= and lse= copied from the results.
    Returns out, lse."""
    if not torch.compiler.is_compiling():
        I.V.check_options(causal, window, scale, softcap, 8)   # messages before the dispatcher
    if (out is not None or lse is not None) and I._needs_grad(q, k, v):
        raise ValueError("out= and lse= cannot be used when q, k or v requires grad")
    wl, wr = (-1, -1) if window is None else window
    o, l = attention_forward_mod(q, k, v, list(traced.captures), traced.op_key(), causal, wl, wr,
                                 scale, softcap, layout, deterministic, key_ranges,
                                 query_ranges)
    return I.copy_into(o, l, out, lse)


def _output_shapes(q, v, layout):
    """Shapes of out and lse (traceable: no validation, see fake_forward)."""
    b, x, y, _ = q.shape
    dv = v.shape[-1]
    if str(layout).lower() == "bshd":
        return (b, x, y, dv), (b, y, x)
    return (b, x, y, dv), (b, x, y)
