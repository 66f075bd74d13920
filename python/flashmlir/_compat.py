"""Entry points shaped like the APIs users already call:

- `scaled_dot_product_attention`: torch.nn.functional.scaled_dot_product_attention's
  signature and semantics ([..., H, N, D] tensors, `is_causal` top-left
  aligned) for the subset the kernels compute;
- `flash_attn_func`, `flash_attn_qkvpacked_func`, `flash_attn_kvpacked_func`:
  FlashAttention-2's argument names, [B, N, H, D] layout, bottom-right
  causal, `window_size`, `softcap`, `deterministic`, and the LSE.

Unsupported arguments raise `UnsupportedError` (a NotImplementedError)
naming the argument.
"""

from __future__ import annotations

import torch

from . import _interface
from ._errors import UnsupportedError


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """A drop-in for `torch.nn.functional.scaled_dot_product_attention` where
    attn_mask is None and dropout_p is 0.

    query [B, Hq, L, E] (or [B, L, E]), key [B, Hkv, S, E], value
    [B, Hkv, S, Ev], float16 or bfloat16. As in SDPA, `is_causal` is aligned
    to the top-left corner (query i sees keys j <= i, also when L != S;
    `flashmlir.attention(causal=True)` is bottom-right aligned), `scale`
    defaults to 1/sqrt(E), and Hq != Hkv needs `enable_gqa=True`. Rows that
    see no key (is_causal with L > S is fine; S = 0) give 0, not NaN.
    Differentiable in query, key and value. Returns [B, Hq, L, Ev]."""
    if attn_mask is not None:
        raise UnsupportedError(
            "flashmlir.scaled_dot_product_attention does not support attn_mask (only "
            "attn_mask=None: use is_causal, or flashmlir.attention's window/softcap)")
    if dropout_p != 0.0:
        raise UnsupportedError(
            f"flashmlir.scaled_dot_product_attention does not support dropout_p={dropout_p!r} "
            "(only dropout_p=0.0)")
    for n, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{n} must be a torch.Tensor, got {type(t).__name__}")
    rank = query.dim()
    if rank not in (3, 4) or key.dim() != rank or value.dim() != rank:
        raise UnsupportedError(
            "flashmlir.scaled_dot_product_attention supports query, key and value of 4 "
            f"dimensions [B, H, N, D] (or 3, [B, N, D]); got {query.dim()}, {key.dim()} and "
            f"{value.dim()}")
    if query.dtype not in (torch.float16, torch.bfloat16):
        raise UnsupportedError(
            "flashmlir.scaled_dot_product_attention supports float16 and bfloat16 query, key "
            f"and value, got {query.dtype}")
    if rank == 3:
        out = scaled_dot_product_attention(query.unsqueeze(1), key.unsqueeze(1),
                                           value.unsqueeze(1), None, 0.0, is_causal, scale,
                                           enable_gqa)
        return out.squeeze(1)
    if not enable_gqa and query.shape[1] != key.shape[1]:
        raise ValueError(
            f"query has {query.shape[1]} heads and key {key.shape[1]}: grouped-query attention "
            "needs enable_gqa=True (as in torch.nn.functional.scaled_dot_product_attention)")
    nq, nk = query.shape[2], key.shape[2]
    if not is_causal or nq == nk:
        return _interface.attention(query, key, value, causal=bool(is_causal), scale=scale)
    if nq < nk:
        # Top-left: query i sees keys 0..i <= Nq - 1; the later keys are seen
        # by no query, and on the square rest both alignments agree.
        return _interface.attention(query, key[:, :, :nq], value[:, :, :nq], causal=True,
                                    scale=scale)
    # Nq > Nk: the first Nk rows are causal on a square, the rest see every key.
    top = _interface.attention(query[:, :, :nk], key, value, causal=True, scale=scale)
    rest = _interface.attention(query[:, :, nk:], key, value, causal=False, scale=scale)
    return torch.cat([top, rest], dim=2)


def _fa_options(dropout_p, causal, window_size, softcap, alibi_slopes, what):
    if dropout_p != 0.0:
        raise UnsupportedError(f"flashmlir.{what} does not support dropout_p={dropout_p!r} "
                               "(only dropout_p=0.0)")
    if alibi_slopes is not None:
        raise UnsupportedError(f"flashmlir.{what} does not support alibi_slopes (only None)")
    if window_size is None:
        window_size = (-1, -1)
    left, right = window_size
    if causal:
        right = 0   # as FlashAttention: causal sets the window's right bound to 0
    window = None if (left, right) == (-1, -1) else (left, right)
    cap = None if softcap is None or softcap == 0.0 else softcap
    return window, cap


def _fa_result(out, lse, return_lse, return_attn_probs):
    if return_attn_probs:
        return out, lse, None     # FlashAttention's (out, softmax_lse, S_dmask)
    if return_lse:
        return out, lse
    return out


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                    deterministic=False, return_attn_probs=False, *, return_lse=False):
    """FlashAttention-2's `flash_attn_func` on the flashmlir kernels.

    q [B, Nq, Hq, D], k [B, Nk, Hkv, D], v [B, Nk, Hkv, Dv] (float16/bfloat16;
    Hq a multiple of Hkv). `causal` is bottom-right aligned, `window_size`
    (left, right) with -1 for unbounded, `softcap` 0 means none,
    `softmax_scale` defaults to 1/sqrt(D), `deterministic` selects the
    deterministic backward. Returns out [B, Nq, Hq, Dv]; with
    return_lse=True (out, lse) and with return_attn_probs=True, as
    FlashAttention, (out, softmax_lse, None), lse [B, Hq, Nq] float32."""
    window, cap = _fa_options(dropout_p, causal, window_size, softcap, alibi_slopes,
                              "flash_attn_func")
    out, lse = _interface.attention(q, k, v, causal=bool(causal), window=window,
                                    scale=softmax_scale, softcap=cap, return_lse=True,
                                    layout="bshd", deterministic=deterministic)
    return _fa_result(out, lse, return_lse, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                              deterministic=False, return_attn_probs=False, *,
                              return_lse=False):
    """`flash_attn_func` on qkv [B, N, 3, H, D] (strided views, no copies)."""
    if not isinstance(qkv, torch.Tensor) or qkv.dim() != 5 or qkv.shape[2] != 3:
        raise ValueError(f"qkv must be [B, N, 3, H, D], got "
                         f"{tuple(qkv.shape) if isinstance(qkv, torch.Tensor) else type(qkv)}")
    q, k, v = qkv.unbind(2)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, deterministic, return_attn_probs,
                           return_lse=return_lse)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                             deterministic=False, return_attn_probs=False, *,
                             return_lse=False):
    """`flash_attn_func` on q [B, Nq, Hq, D] and kv [B, Nk, 2, Hkv, D]."""
    if not isinstance(kv, torch.Tensor) or kv.dim() != 5 or kv.shape[2] != 2:
        raise ValueError(f"kv must be [B, N, 2, H, D], got "
                         f"{tuple(kv.shape) if isinstance(kv, torch.Tensor) else type(kv)}")
    k, v = kv.unbind(2)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, deterministic, return_attn_probs,
                           return_lse=return_lse)


# -- packed sequences and key/value caches (flashmlir._sequences) ------------------------

def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """FlashAttention-2's `flash_attn_varlen_func` on the flashmlir varlen
    kernels, forward and backward (see flashmlir.attention_varlen).

    q [total_q, Hq, D], k [total_k, Hkv, D], v [total_k, Hkv, Dv];
    cu_seqlens_q/k int32 [B + 1]; max_seqlen_q (a Python int) must bound
    every sequence's query count and max_seqlen_k every key count (smaller
    ones drop queries or key gradients, as in FlashAttention). Returns out [total_q, Hq, Dv], or with
    return_attn_probs (out, softmax_lse [Hq, total_q], None)."""
    from . import _sequences
    window, cap = _fa_options(dropout_p, causal, window_size, softcap, alibi_slopes,
                              "flash_attn_varlen_func")
    if block_table is not None:
        raise UnsupportedError("flashmlir.flash_attn_varlen_func does not support block_table "
                               "(paged varlen); use flashmlir.flash_attn_with_kvcache")
    out, lse = _sequences.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                           max_seqlen_k, causal=bool(causal), window=window,
                                           scale=softmax_scale, softcap=cap, return_lse=True,
                                           deterministic=deterministic)
    return _fa_result(out, lse, False, return_attn_probs)


def _append_kv(cache, new, name, seqlens, block_table):
    """Writes new [B, Nnew, Hkv, D] into the cache at positions
    seqlens[b] .. seqlens[b] + Nnew - 1 (device-side indexing: no host read;
    a position past the cache's end is a device-side index error)."""
    b, n = new.shape[:2]
    pos = seqlens.long()[:, None] + torch.arange(n, device=new.device)[None, :]
    if block_table is None:
        cache[torch.arange(b, device=new.device)[:, None], pos] = new
    else:
        s = cache.shape[1]
        page = block_table.long().gather(1, pos // s)
        cache[page, pos % s] = new


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, block_table=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False):
    """FlashAttention-2's `flash_attn_with_kvcache` on the flashmlir paged
    kernels (see flashmlir.attention_with_kvcache).

    q [B, Nq, Hq, D]; k_cache/v_cache [B, Nmax, Hkv, D] or, with
    block_table [B, max_pages] (int32), pages [num_pages, page_size, Hkv,
    D]. cache_seqlens: int32 [B] or an int (default: the whole cache).
    k, v [B, Nnew, Hkv, D]: appended into the cache in place at
    cache_seqlens (indexing on the device, no host synchronisation; the
    caller keeps cache_seqlens + Nnew within the cache) before the
    attention, which then sees cache_seqlens + Nnew keys. num_splits is a
    hint the split-KV choice ignores. Rotary embeddings, cache_batch_idx,
    cache_leftpad and alibi_slopes raise UnsupportedError.
    Returns out [B, Nq, Hq, Dv], or (out, softmax_lse [B, Hq, Nq])."""
    from . import _sequences
    what = "flash_attn_with_kvcache"
    for name, val in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin),
                      ("cache_batch_idx", cache_batch_idx), ("cache_leftpad", cache_leftpad)):
        if val is not None:
            raise UnsupportedError(f"flashmlir.{what} does not support {name} (only None)"
                                   + ("; apply the rotary embedding to q and k first"
                                      if name.startswith("rotary") else ""))
    window, cap = _fa_options(0.0, causal, window_size, softcap, alibi_slopes, what)
    for n, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{n} must be a torch.Tensor, got {type(t).__name__}")
    if q.dim() != 4 or k_cache.dim() != 4:
        raise ValueError(f"q must be [B, Nq, Hq, D] and k_cache 4-dimensional, got shapes "
                         f"{tuple(q.shape)} and {tuple(k_cache.shape)}")
    b = q.shape[0]
    if (k is None) != (v is None):
        raise ValueError("k and v must be given together (the new keys and values to append)")
    if cache_seqlens is None:
        if k is not None:
            raise ValueError(f"flashmlir.{what}: appending k and v needs cache_seqlens (where "
                             "each sequence's new keys go)")
        full = (block_table.shape[1] * k_cache.shape[1] if block_table is not None
                else k_cache.shape[1])
        cache_seqlens = full
    if isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        cache_seqlens = torch.full((b,), cache_seqlens, dtype=torch.int32, device=q.device)
    if k is not None:
        for n, t, c in (("k", k, k_cache), ("v", v, v_cache)):
            if not isinstance(t, torch.Tensor) or t.dim() != 4 or t.shape[0] != b or \
                    tuple(t.shape[2:]) != tuple(c.shape[2:]) or t.dtype != c.dtype:
                raise ValueError(f"{n} must be [B, Nnew, Hkv, D] like the cache's rows "
                                 f"({c.dtype}, [{b}, Nnew, {', '.join(map(str, c.shape[2:]))}])"
                                 f", got {tuple(t.shape) if isinstance(t, torch.Tensor) else t}")
        if k.shape[1] != v.shape[1]:
            raise ValueError(f"k and v must have the same number of new rows, got {k.shape[1]} "
                             f"and {v.shape[1]}")
        if not isinstance(cache_seqlens, torch.Tensor) or cache_seqlens.dtype != torch.int32:
            raise TypeError("cache_seqlens must be an int or an int32 tensor [B]")
        if block_table is not None and (not isinstance(block_table, torch.Tensor)
                                        or block_table.dim() != 2):
            raise ValueError("block_table must be an int32 tensor [B, max_pages]")
        _append_kv(k_cache, k, "k", cache_seqlens, block_table)
        _append_kv(v_cache, v, "v", cache_seqlens, block_table)
        cache_seqlens = cache_seqlens + k.shape[1]
    out, lse = _sequences.attention_with_kvcache(q, k_cache, v_cache, cache_seqlens,
                                                 block_table, causal=bool(causal),
                                                 window=window, scale=softmax_scale,
                                                 softcap=cap, return_lse=True)
    return (out, lse) if return_softmax_lse else out
