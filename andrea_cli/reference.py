"""The NumPy path: the attention equation stage by stage, read like the course writes it.

Inputs are float32; every stage computes in float64 so this path is the yardstick the kernels
are measured against (kernel errors are then fp32 rounding, not shared mistakes).
"""

from __future__ import annotations

import math

import numpy as np

from andrea_cli.masks import MaskSpec
from andrea_cli.scale import given_scale, resolve_scale  # noqa: F401  (given_scale: the report's)


def scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """S = Q · K^T                            (H, T, d_k), (H, T, d_k) -> (H, T, T)"""
    return np.matmul(q.astype(np.float64), k.astype(np.float64).transpose(0, 2, 1))


def scale_for(d_k: int, scaled) -> float:
    """The factor the scores are multiplied by: 1/sqrt(d_k), 1 with --no-scale, or the factor
    given (scale.py reads the convention; the launchers take the Scale it resolves)."""
    return resolve_scale(d_k, scaled).factor


def scale(s: np.ndarray, d_k: int, scaled=True) -> np.ndarray:
    """S / sqrt(d_k), or S times a factor given      (H, T, T) -> (H, T, T)"""
    return s * scale_for(d_k, scaled) if given_scale(scaled) else s / math.sqrt(d_k)


def mask(s: np.ndarray, spec: MaskSpec) -> np.ndarray:
    """Hidden entries become -inf, so softmax gives them exactly 0.    (H, T, T)"""
    if spec.kind == "none":
        return s.copy()
    return np.where(spec.visible(s.shape[-1]), s, -np.inf)


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
    """output[i] = sum_j P[i][j] · V[j]      (H, T, T), (H, T, d_v) -> (H, T, d_v)"""
    return np.matmul(p, v.astype(np.float64))


def attention(q, k, v, spec: MaskSpec, scaled: bool = True) -> np.ndarray:
    """softmax(mask(Q · K^T / sqrt(d_k))) · V, in float64."""
    s = scores(q, k)
    if scaled:
        s = scale(s, q.shape[-1], scaled)
    return weighted_sum(softmax(mask(s, spec)), v)


def sample_rows(T: int, n: int) -> np.ndarray:
    """n query rows spread evenly over 0..T-1 (first and last included)."""
    return np.unique(np.linspace(0, T - 1, min(n, T)).round().astype(np.int64))


def attention_rows(q, k, v, spec: MaskSpec, scaled: bool, rows: np.ndarray):
    """The equation for some query rows only, never building (T, T): the raw scores, the weights
    and the output of those rows.     (T, d_k), (T, d_k), (T, d_v) -> (n, T), (n, T), (n, d_v)"""
    T, d_k = k.shape
    raw = scores(q[None, rows], k[None])[0]
    s = raw * scale_for(d_k, scaled) if scaled else raw
    weights = softmax(np.where(spec.visible(T, rows), s, -np.inf))
    return raw, weights, weights @ v.astype(np.float64)


def attention_loops(q, k, v, spec: MaskSpec, scaled: bool = True) -> np.ndarray:
    """The same equation with plain Python loops, for tiny shapes: an independent check of the
    vectorised path above (tests compare the two)."""
    H, T, d_k = q.shape
    d_v = v.shape[-1]
    visible = spec.visible(T)
    out = np.zeros((H, T, d_v))
    for h in range(H):
        for i in range(T):
            row = []
            for j in range(T):
                dot = sum(float(q[h, i, c]) * float(k[h, j, c]) for c in range(d_k))
                if given_scale(scaled):
                    dot *= scale_for(d_k, scaled)
                elif scaled:
                    dot /= math.sqrt(d_k)
                row.append(dot if visible[i, j] else -math.inf)
            top = max(row)
            if top == -math.inf:
                continue
            exps = [math.exp(x - top) for x in row]
            total = sum(exps)
            for j in range(T):
                for c in range(d_v):
                    out[h, i, c] += exps[j] / total * float(v[h, j, c])
    return out
