"""FlashMLIR: exact attention compiled with MLIR into FlashAttention-class
GPU kernels, called from PyTorch.

    import flashmlir
    out = flashmlir.attention(q, k, v, causal=True)            # [B, H, N, D]
    out, lse = flashmlir.attention(q, k, v, layout="bshd", return_lse=True)
    out.backward(dout)                     # dq, dk, dv by the backward kernels
    out = flashmlir.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = flashmlir.flash_attn_func(q, k, v, causal=True)      # [B, N, H, D]
    out = flashmlir.attention_varlen(q, k, v, cu_q, cu_k, max_seqlen_q)  # packed [T, H, D]
    out = flashmlir.attention_with_kvcache(q, k_cache, v_cache, seqlens, page_table)

The torch-side API (attention, the SDPA- and flash-attn-style entry points,
the custom ops torch.ops.flashmlir.* that torch.compile traces) is loaded
with torch: at import when torch is already imported, else on first use.
The kernel discovery, manifest and launch-packing modules, and `python -m
flashmlir`, work without torch.
"""

import sys as _sys

from ._errors import (CompileError, CudaError, CudaUnavailableError, ExpressionError,
                      FlashMLIRError, KernelNotFoundError, LaunchError, ManifestError,
                      UnsupportedError)
from ._kernels import (KernelRegistry, KernelRequest, default_registry, default_search_dirs,
                       set_default_registry)

__all__ = ["attention", "scaled_dot_product_attention", "flash_attn_func",
           "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func", "attention_varlen",
           "attention_with_kvcache", "flash_attn_varlen_func", "flash_attn_with_kvcache",
           "backward_available", "trace_modifiers", "key_ranges", "KeyRanges",
           "clear_caches", "KernelRegistry", "KernelRequest",
           "default_registry", "default_search_dirs", "set_default_registry",
           "FlashMLIRError", "ManifestError", "ExpressionError", "KernelNotFoundError",
           "CompileError", "LaunchError", "CudaError", "CudaUnavailableError",
           "UnsupportedError"]

__version__ = "0.2.0"

_TORCH_API = ("attention", "backward_available", "clear_caches", "scaled_dot_product_attention",
              "flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func",
              "attention_varlen", "attention_with_kvcache", "flash_attn_varlen_func",
              "flash_attn_with_kvcache", "trace_modifiers", "key_ranges", "KeyRanges")


def _load_torch_api():
    """Imports the torch-side modules (registering the custom ops) and binds
    their entry points as attributes of the package."""
    from . import _compat, _interface, _key_ranges, _modifiers, _sequences
    g = globals()
    for name in _TORCH_API:
        g[name] = (getattr(_interface, name, None) or getattr(_sequences, name, None)
                   or getattr(_modifiers, name, None) or getattr(_key_ranges, name, None)
                   or getattr(_compat, name))


def __getattr__(name):
    if name in _TORCH_API:
        try:
            _load_torch_api()
        except ImportError as exc:
            raise ImportError(f"flashmlir.{name} needs torch (pip install torch): {exc}") from exc
        return globals()[name]
    raise AttributeError(f"module 'flashmlir' has no attribute {name!r}")


if "torch" in _sys.modules:
    _load_torch_api()
