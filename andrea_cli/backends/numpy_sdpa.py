"""The NumPy path of scaled_dot_product_attention: the stages in the order the staged kernels run
them (scores, scale, mask, softmax, av), in the dtype asked: float32 as the kernels compute (fp16
and bf16 inputs widened first), or float64. Grouped K/V heads are read through a reshape of the
query heads, as the kernels index them (query head h: K/V head h // group), never repeated."""

from __future__ import annotations

import numpy as np


def grouped(x: np.ndarray, heads: int) -> np.ndarray:
    """(..., H_q, n, d) -> (..., heads, H_q / heads, n, d): query heads by the K/V head they read."""
    return x.reshape(*x.shape[:-3], heads, x.shape[-3] // heads, *x.shape[-2:])


def ungrouped(x: np.ndarray) -> np.ndarray:
    """(..., heads, group, n, m) -> (..., heads * group, n, m)"""
    return x.reshape(*x.shape[:-4], x.shape[-4] * x.shape[-3], *x.shape[-2:])


def scores(q: np.ndarray, k: np.ndarray, enable_gqa: bool) -> np.ndarray:
    """Q · K^T                    (..., H_q, L, E), (..., H_k, S, E) -> (..., H_q, L, S)"""
    if not enable_gqa or q.shape[-3] == k.shape[-3]:
        return q @ np.swapaxes(k, -1, -2)
    s = grouped(q, k.shape[-3]) @ np.swapaxes(k, -1, -2)[..., None, :, :]
    return ungrouped(s)


def mask(s: np.ndarray, attn_mask, is_causal: bool) -> np.ndarray:
    """Hidden keys at -inf (is_causal: j > i, top-left; a bool mask: False); a float mask added."""
    if is_causal:
        L, S = s.shape[-2:]
        return np.where(np.arange(S)[None, :] <= np.arange(L)[:, None], s, -np.inf)
    if attn_mask is None:
        return s
    if attn_mask.dtype == bool:
        return np.where(attn_mask, s, -np.inf)
    return s + attn_mask.astype(s.dtype)


def softmax(s: np.ndarray) -> np.ndarray:
    """Row softmax, max-subtracted; a row with every key hidden gives zeros, as the kernels do."""
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=e, where=total > 0)


def weighted_sum(p: np.ndarray, v: np.ndarray, enable_gqa: bool) -> np.ndarray:
    """P · V                       (..., H_q, L, S), (..., H_v, S, E_v) -> (..., H_q, L, E_v)"""
    if not enable_gqa or p.shape[-3] == v.shape[-3]:
        return p @ v
    return ungrouped(grouped(p, v.shape[-3]) @ v[..., None, :, :])


def attention(q, k, v, attn_mask, is_causal: bool, scale: float, enable_gqa: bool, dtype) -> np.ndarray:
    """softmax(mask(Q·K^T · scale)) · V in `dtype` (np.float32 or np.float64); inputs checked."""
    q, k, v = (np.asarray(a, dtype=dtype) for a in (q, k, v))
    s = scores(q, k, enable_gqa) * dtype(scale)
    p = softmax(mask(s, attn_mask, is_causal))
    return weighted_sum(p, v, enable_gqa)
