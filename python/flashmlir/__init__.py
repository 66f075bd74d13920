"""FlashMLIR: exact attention compiled with MLIR into FlashAttention-class
GPU kernels, called from PyTorch.

    import flashmlir
    out = flashmlir.attention(q, k, v, causal=True)            # [B, H, N, D]
    out, lse = flashmlir.attention(q, k, v, layout="bshd", return_lse=True)
    out.backward(dout)                     # dq, dk, dv by the backward kernels

Only `attention` (and `backward_available`) import torch; the kernel
discovery, manifest and launch-packing modules work without it.
"""

from ._errors import (CompileError, CudaError, CudaUnavailableError, ExpressionError,
                      FlashMLIRError, KernelNotFoundError, LaunchError, ManifestError)
from ._kernels import (KernelRegistry, KernelRequest, default_registry, default_search_dirs,
                       set_default_registry)

__all__ = ["attention", "backward_available", "KernelRegistry", "KernelRequest",
           "default_registry", "default_search_dirs", "set_default_registry",
           "FlashMLIRError", "ManifestError", "ExpressionError", "KernelNotFoundError",
           "CompileError", "LaunchError", "CudaError", "CudaUnavailableError"]

__version__ = "0.1.0"


def attention(q, k, v, causal=False, window=None, scale=None, softcap=None,
              return_lse=False, layout="bhsd", *, out=None, lse=None, deterministic=False):
    """Exact scaled-dot-product attention, `softmax(scale * q k^T) v`.

    Args:
      q: [B, Hq, Nq, D] (layout "bhsd") or [B, Nq, Hq, D] (layout "bshd"),
         float16 or bfloat16, on a CUDA device.
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

    Rows that see no key give out = 0 and lse = +inf. The last dimension of
    every tensor must be contiguous and data pointers 16-byte aligned.

    The result is differentiable in q, k and v (lse is not): the backward
    runs the kernels of a "backward" manifest. dq, dk, dv come back in the
    caller's layout; with GQA/MQA dk and dv are summed over each group.

    Returns: out, or (out, lse) when return_lse.
    """
    from ._interface import attention as _attention
    return _attention(q, k, v, causal=causal, window=window, scale=scale, softcap=softcap,
                      return_lse=return_lse, layout=layout, out=out, lse=lse,
                      deterministic=deterministic)


def backward_available(*args, **kwargs) -> bool:
    """Whether a backward kernel exists for a configuration:
    backward_available(dtype=torch.bfloat16, head_dim=128, causal=False,
    window=None, softcap=None, scale=None, deterministic=False,
    value_head_dim=None, device=None, compile=False)."""
    from ._interface import backward_available as _ba
    return _ba(*args, **kwargs)
