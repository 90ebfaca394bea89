"""The NumPy path: the attention equation stage by stage, read like the course writes it.

Inputs are float32; every stage computes in float64 so this path is the yardstick the kernels
are measured against (kernel errors are then fp32 rounding, not shared mistakes).
"""

from __future__ import annotations

import math

import numpy as np

from andrea_cli.masks import MaskSpec, alibi_slopes
from andrea_cli.scale import given_scale, resolve_scale  # noqa: F401  (given_scale: the report's)


def kv_heads_for(x: np.ndarray, H: int) -> np.ndarray:
    """K or V with H_kv heads as the H query heads see them: query head h reads K/V head
    h // (H / H_kv) (grouped-query attention; H_kv = H: each its own).   (H_kv, S, d) -> (H, S, d)"""
    return x if x.shape[0] == H else np.repeat(x, H // x.shape[0], axis=0)


def scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """S = Q · K^T                            (H, L, d_k), (H_kv, S, d_k) -> (H, L, S)"""
    k = kv_heads_for(k, q.shape[0])
    return np.matmul(q.astype(np.float64), k.astype(np.float64).transpose(0, 2, 1))


def scale_for(d_k: int, scaled) -> float:
    """The factor the scores are multiplied by: 1/sqrt(d_k), 1 with --no-scale, or the factor
    given (scale.py reads the convention; the launchers take the Scale it resolves)."""
    return resolve_scale(d_k, scaled).factor


def scale(s: np.ndarray, d_k: int, scaled=True) -> np.ndarray:
    """S / sqrt(d_k), or S times a factor given      (H, T, T) -> (H, T, T)"""
    return s * scale_for(d_k, scaled) if given_scale(scaled) else s / math.sqrt(d_k)


def mask(s: np.ndarray, spec: MaskSpec) -> np.ndarray:
    """Hidden entries become -inf, so softmax gives them exactly 0; a mask array's bias is added
    (its -inf entries hide), and ALiBi's -m_h·(p - j) to head h's visible ones.     (H, L, S)"""
    if spec.kind == "none":
        return s.copy()
    if spec.is_array:  # a mask array: its bias added (-inf: hidden), broadcast over the heads
        return s + spec.bias.astype(np.float64)
    L, S = s.shape[-2], s.shape[-1]
    bias = spec.score_bias(s.shape[0], L, S=S)
    return np.where(spec.visible(L, S=S), s if bias is None else s + bias, -np.inf)


def softmax(s: np.ndarray) -> np.ndarray:
    """Row softmax, max-subtracted so exp never overflows.   (H, T, T) -> (H, T, T)

    A row with every entry masked attends to nothing and gets zeros, as the kernels do.
    """
    m = s.max(axis=-1, keepdims=True)
    safe_m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - safe_m)  # exp(-inf) = 0 exactly
    total = e.sum(axis=-1, keepdims=True)
    # In place: a (T, T) copy less. A fully masked row is all zeros already and is left so.
    return np.divide(e, total, out=e, where=total > 0)


def weighted_sum(p: np.ndarray, v: np.ndarray) -> np.ndarray:
    """output[i] = sum_j P[i][j] · V[j]      (H, L, S), (H_kv, S, d_v) -> (H, L, d_v)"""
    return np.matmul(p, kv_heads_for(v, p.shape[0]).astype(np.float64))


def attention(q, k, v, spec: MaskSpec, scaled: bool = True) -> np.ndarray:
    """softmax(mask(Q · K^T / sqrt(d_k))) · V, in float64: q (H, L, d_k), k (H_kv, S, d_k),
    v (H_kv, S, d_v), H a multiple of H_kv; a row that sees no key gets zeros."""
    s = scores(q, k)
    if scaled:
        s = scale(s, q.shape[-1], scaled)
    return weighted_sum(softmax(mask(s, spec)), v)


def sample_rows(T: int, n: int) -> np.ndarray:
    """n query rows spread evenly over 0..T-1 (first and last included)."""
    return np.unique(np.linspace(0, T - 1, min(n, T)).round().astype(np.int64))


def attention_rows(q, k, v, spec: MaskSpec, scaled: bool, rows: np.ndarray, head: int = 0, heads: int = 1):
    """The equation for some query rows only, never building (T, T): the raw scores, the weights
    and the output of those rows (ALiBi: those of query head `head` of `heads`).
    (L, d_k), (S, d_k), (S, d_v) -> (n, S), (n, S), (n, d_v)"""
    S, d_k = k.shape
    raw = scores(q[None, rows], k[None])[0]
    s = raw * scale_for(d_k, scaled) if scaled else raw
    if spec.is_array:  # (L, S) arrays only here: the rows' bias added
        weights = softmax(s + spec.bias[rows].astype(np.float64))
    else:
        bias = spec.score_bias(heads, q.shape[0], rows, S=S)
        s = s if bias is None else s + bias[head]
        weights = softmax(np.where(spec.visible(q.shape[0], rows, S=S), s, -np.inf))
    return raw, weights, weights @ v.astype(np.float64)


def attention_loops(q, k, v, spec: MaskSpec, scaled: bool = True) -> np.ndarray:
    """The same equation with plain Python loops, for tiny shapes: an independent check of the
    vectorised path above (tests compare the two)."""
    H, L, d_k = q.shape
    H_kv, S, d_v = v.shape
    visible = spec.visible(L, S=S)
    slopes = alibi_slopes(H) if spec.alibi else np.zeros(H)
    offset = spec.offset(L, S)
    out = np.zeros((H, L, d_v))
    for h in range(H):
        g = h // (H // H_kv)  # the K/V head query head h reads
        for i in range(L):
            row = []
            for j in range(S):
                dot = sum(float(q[h, i, c]) * float(k[g, j, c]) for c in range(d_k))
                if given_scale(scaled):
                    dot *= scale_for(d_k, scaled)
                elif scaled:
                    dot /= math.sqrt(d_k)
                if spec.is_array:  # the array's bias, its head's (H, L, S) or the one (L, S)
                    dot += float(spec.bias[h, i, j] if spec.bias.ndim == 3 else spec.bias[i, j])
                dot -= float(slopes[h]) * (i + offset - j)  # ALiBi's bias (slope 0 without)
                row.append(dot if (visible[h] if visible.ndim == 3 else visible)[i, j] else -math.inf)
            top = max(row)
            if top == -math.inf:
                continue
            exps = [math.exp(x - top) for x in row]
            total = sum(exps)
            for j in range(S):
                for c in range(d_v):
                    out[h, i, c] += exps[j] / total * float(v[g, j, c])
    return out
