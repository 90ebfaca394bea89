"""PyTorch's scaled_dot_product_attention in float64 NumPy: the yardstick of
andrea_cli.scaled_dot_product_attention, written as torch's documentation writes the equation.

    attn_bias = 0, or -inf where a bool mask is False (or above the top-left diagonal: is_causal),
                or the float mask itself
    out       = softmax(Q · K^T · scale + attn_bias) · V

q (..., H_q, L, E), k (..., H_k, S, E), v (..., H_v, S, E_v); the leading dims broadcast; with
enable_gqa, query head h reads K/V head h // (H_q / H_k), as torch's repeat_interleave does.
A row with every key hidden gets zeros, as torch's kernels (and andrea's) give. Inputs are
assumed checked (sdpa_inputs.py does that)."""

from __future__ import annotations

import math

import numpy as np


def causal_top_left(L: int, S: int) -> np.ndarray:
    """(L, S) booleans, True where query i may see key j: j <= i, aligned at the top left as torch's
    is_causal is (with L < S the last S - L keys are hidden from every query)."""
    return np.arange(S)[None, :] <= np.arange(L)[:, None]


def attention_bias(L: int, S: int, attn_mask=None, is_causal: bool = False) -> np.ndarray:
    """What is added to the scaled scores: (L, S) or the mask's own broadcastable shape, float64."""
    if is_causal:
        return np.where(causal_top_left(L, S), 0.0, -np.inf)
    if attn_mask is None:
        return np.zeros((L, S))
    mask = np.asarray(attn_mask)
    if mask.dtype == bool:  # True: takes part
        return np.where(mask, 0.0, -np.inf)
    return mask.astype(np.float64)


def repeat_kv(x: np.ndarray, n_q_heads: int) -> np.ndarray:
    """K or V with each head repeated H_q / H_k times along dim -3 (torch's repeat_interleave)."""
    return np.repeat(x, n_q_heads // x.shape[-3], axis=-3)


def softmax_rows(s: np.ndarray) -> np.ndarray:
    """Row softmax, max-subtracted; a row of -inf only is all zeros."""
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def sdpa(q, k, v, attn_mask=None, is_causal: bool = False, scale: float | None = None,
         enable_gqa: bool = False) -> np.ndarray:
    """softmax(Q·K^T·scale + bias)·V in float64      -> (broadcast leading dims..., L, E_v)"""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    factor = 1.0 / math.sqrt(E) if scale is None else float(scale)
    if enable_gqa:
        k, v = repeat_kv(k, q.shape[-3]), repeat_kv(v, q.shape[-3])
    s = q @ np.swapaxes(k, -1, -2) * factor  # (..., L, S)
    s = s + attention_bias(L, S, attn_mask, is_causal)
    return softmax_rows(s) @ v  # (..., L, E_v)


def sdpa_loops(q, k, v, attn_mask=None, is_causal: bool = False, scale: float | None = None,
               enable_gqa: bool = False) -> np.ndarray:
    """The same with Python loops over (H, L, S), for tiny 3-D inputs (H, L, E): an independent
    check of sdpa() above (the tests compare the two). A 2-D mask (L, S) or a 3-D one (H, L, S)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    H, L, E = q.shape
    S, E_v = k.shape[1], v.shape[2]
    factor = 1.0 / math.sqrt(E) if scale is None else float(scale)
    mask = None if attn_mask is None else np.broadcast_to(np.asarray(attn_mask), (H, L, S))
    out = np.zeros((H, L, E_v))
    for h in range(H):
        hk = h // (H // k.shape[0]) if enable_gqa else h
        hv = h // (H // v.shape[0]) if enable_gqa else h
        for i in range(L):
            row = []
            for j in range(S):
                x = sum(q[h, i, c] * k[hk, j, c] for c in range(E)) * factor
                if is_causal and j > i:
                    x = -math.inf
                elif mask is not None and mask.dtype == bool:
                    x = x if mask[h, i, j] else -math.inf
                elif mask is not None:
                    x += float(mask[h, i, j])
                row.append(x)
            top = max(row)
            if top == -math.inf:
                continue
            weights = [math.exp(x - top) for x in row]
            total = sum(weights)
            for c in range(E_v):
                out[h, i, c] = sum(w * v[hv, j, c] for j, w in enumerate(weights)) / total
    return out
