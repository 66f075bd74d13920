"""FlashMLIR as a Hugging Face transformers attention implementation.

    import flashmlir.integrations.transformers          # registers "flashmlir"
    model = AutoModelForCausalLM.from_config(config, attn_implementation="flashmlir")

Importing this module registers `attention_forward` with transformers'
`AttentionInterface` and `mask_function` with its `AttentionMaskInterface`
under the name "flashmlir" (`register()` does it again, e.g. under another
name). The attention runs `flashmlir.attention` on the model's [B, H, N, D]
query/key/value views with `layout="bshd"`, so the output is the
[B, N, H, D] tensor the model reshapes, without a copy; GQA is native,
`causal` is bottom-right aligned (right for a KV cache: a decoded token sees
every cached key), `sliding_window` W maps to `window=(W - 1, 0)` and
`softcap` and `scaling` pass through.

The mask function returns None (no mask tensor is built) when the mask is
the model's causal or sliding-window pattern without padding. Anything else
(padding, packed sequences, custom masks, a static cache longer than the
sequence) gets the boolean mask transformers' SDPA path would use, and the
attention then calls transformers' SDPA implementation with it, as it does
for dropout in training and for float32 inputs; each reason is logged once
(`fallbacks` counts them). With FLASHMLIR_HF_STRICT=1 these raise
`flashmlir.UnsupportedError` instead.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from typing import Optional

import torch

from .. import _interface
from .._errors import UnsupportedError

NAME = "flashmlir"
STRICT_ENV = "FLASHMLIR_HF_STRICT"

# How often each path ran: "flashmlir", and "sdpa: <reason>" for fallbacks.
calls: Counter = Counter()
_warned = set()


def _strict() -> bool:
    return os.environ.get(STRICT_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _fallback(reason, module, query, key, value, attention_mask, dropout, scaling, is_causal,
              kwargs):
    if _strict():
        raise UnsupportedError(f"flashmlir attention for transformers: {reason} "
                               f"({STRICT_ENV}=1 forbids the SDPA fallback)")
    if torch.compiler.is_compiling():
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, is_causal=is_causal,
                                      **kwargs)
    calls["sdpa: " + reason] += 1
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"flashmlir attention for transformers: {reason}; using transformers' "
                      "SDPA attention for such calls", RuntimeWarning, stacklevel=3)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                  scaling=scaling, is_causal=is_causal, **kwargs)


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                      value: torch.Tensor, attention_mask: Optional[torch.Tensor],
                      dropout: float = 0.0, scaling: Optional[float] = None,
                      sliding_window: Optional[int] = None, softcap: Optional[float] = None,
                      is_causal: Optional[bool] = None, **kwargs):
    """transformers' attention-function signature: query [B, Hq, Nq, D], key
    and value [B, Hkv, Nk, D]. Returns (out [B, Nq, Hq, Dv], None)."""
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    reason = None
    if attention_mask is not None:
        reason = "an explicit attention mask (padding, packing or a custom mask)"
    elif dropout:
        reason = f"attention dropout {dropout}"
    elif query.dtype not in (torch.float16, torch.bfloat16):
        reason = f"{query.dtype} inputs (the kernels take float16 and bfloat16)"
    elif kwargs.get("s_aux") is not None:
        reason = "attention sinks (s_aux)"
    if reason is not None:
        if softcap:
            raise UnsupportedError(f"flashmlir attention for transformers: {reason} with "
                                   "softcap (transformers' SDPA has no softcap)")
        return _fallback(reason, module, query, key, value, attention_mask, dropout, scaling,
                         is_causal, kwargs)
    window = None
    if sliding_window is not None:
        w = int(sliding_window) - 1
        window = (w, 0) if is_causal else (w, w)
    if not torch.compiler.is_compiling():
        calls["flashmlir"] += 1
    out = _interface.attention(query.transpose(1, 2), key.transpose(1, 2),
                               value.transpose(1, 2), causal=bool(is_causal), window=window,
                               scale=scaling, softcap=softcap or None, layout="bshd")
    return out, None


def _is_plain_mask(mask_function) -> bool:
    """The model's own causal (or sliding-window causal) pattern, which the
    attention computes from is_causal and sliding_window."""
    from transformers import masking_utils as mu
    if mask_function is mu.causal_mask_function:
        return True
    # sliding_window_causal_mask_function(W) = and_masks(sliding_window_overlay(W), causal)
    if getattr(mask_function, "__qualname__", "") == "and_masks.<locals>.and_mask":
        fns = [c.cell_contents for c in (mask_function.__closure__ or ())
               if isinstance(c.cell_contents, tuple)]
        parts = fns[0] if fns else ()
        return (len(parts) == 2 and parts[1] is mu.causal_mask_function and
                getattr(parts[0], "__qualname__", "").startswith("sliding_window_overlay."))
    return False


def mask_function(batch_size: int, q_length: int, kv_length: int, q_offset: int = 0,
                  kv_offset: int = 0, mask_function=None, attention_mask=None, **kwargs):
    """transformers' mask-interface signature: None when the attention needs
    no mask tensor, else the boolean 4D mask of transformers' sdpa_mask."""
    from transformers import masking_utils as mu
    if mask_function is None:
        mask_function = mu.causal_mask_function
    padded = False
    if attention_mask is not None:
        am = attention_mask[:, -kv_length:]
        padded = am.shape[1] != kv_length or not bool(am.all())
    if not padded and _is_plain_mask(mask_function):
        return None
    kwargs.pop("allow_is_causal_skip", None)
    return mu.sdpa_mask(batch_size, q_length, kv_length, q_offset, kv_offset, mask_function,
                        attention_mask, allow_is_causal_skip=False, **kwargs)


_registered = set()


def _not_flash_attention(name: str) -> None:
    """transformers takes every implementation whose name contains "flash"
    for a FlashAttention variant (utils.generic.is_flash_attention_requested,
    called from ~70 places: it would look for the flash_attn package and
    change masking and generation). Makes that check false for the names
    registered here, for every module that imported the function, by
    swapping its code for a shim that calls a copy of the original."""
    import types

    from transformers.utils import generic
    _registered.add(name)
    fn = generic.is_flash_attention_requested
    g = fn.__globals__
    if "_flashmlir_names" in g:
        return
    g["_flashmlir_original"] = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__,
                                                 fn.__closure__)
    g["_flashmlir_names"] = _registered

    def shim(config=None, requested_attention_implementation=None, version=None):
        name = requested_attention_implementation
        if config is not None and requested_attention_implementation is None:
            name = getattr(config, "_attn_implementation", None)
        if isinstance(name, str) and name.split("|")[-1] in _flashmlir_names:  # noqa: F821
            return False
        return _flashmlir_original(config, requested_attention_implementation,  # noqa: F821
                                   version)
    fn.__code__ = shim.__code__


def register(name: str = NAME) -> str:
    """Registers the attention and mask functions under `name`; returns it."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface
    if "flash" in name:
        _not_flash_attention(name)
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, mask_function)
    return name


try:
    import transformers  # noqa: F401
except ImportError:  # pragma: no cover - registering needs transformers
    pass
else:
    register()
