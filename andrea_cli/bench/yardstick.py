"""Whether a bench row's output is right, by FlashAttention's rule: its error on the sampled rows
(against the float64 equation) at most FACTOR times the error of a plain implementation at the
row's precision on the same rows, plus a floor of a few float32 units in the last place of the
output, so that a plain path that happens to land on the exact answer does not fail a kernel for
its last bit. A fast wrong kernel is then no figure to rank.

The plain implementation is the textbook order in float32 (scores, scale, mask, softmax from the
row's max, P·V; the backward's dP = dO·V^T, dS = P∘(dP - rowsum(P∘dP)), dQ = scale·dS·K); at bf16
its inputs are rounded to bf16, and so are P and dS before they multiply, as a tensor core takes
them. Only the sampled rows are computed: (rows, T), never (T, T)."""

from __future__ import annotations

import math

import numpy as np

from andrea_cli.masks import MaskSpec

# 2x torch's fp32 error in fp32, 3x a plain bf16 path's in bf16 (issue 33's rule, FlashAttention's)
FACTOR = {"fp32": 2.0, "bf16": 3.0}
FLOOR_ULPS = 16  # float32 units in the last place of the largest exact output


def _stored(x: np.ndarray, precision: str) -> np.ndarray:
    from andrea_cli.verification.bf16_attention import round_bf16

    x = np.asarray(x, dtype=np.float32)
    return round_bf16(x) if precision == "bf16" else x


def plain_weights_rows(q, k, mask: MaskSpec, rows: np.ndarray, precision: str) -> np.ndarray:
    """P of the sampled rows of one head, (n, T) float32: q (T, d), k (T, d)."""
    T, d = q.shape
    s = (_stored(q, precision)[rows] @ _stored(k, precision).T) * np.float32(1.0 / math.sqrt(d))
    s = np.where(mask.visible(T, rows, S=k.shape[0]), s, np.float32(-np.inf))
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, np.float32(0.0)))
    sums = e.sum(axis=-1, keepdims=True)
    return (e / np.where(sums > 0, sums, np.float32(1.0))).astype(np.float32)


def plain_output_rows(q, k, v, mask: MaskSpec, rows: np.ndarray, precision: str) -> np.ndarray:
    p = _stored(plain_weights_rows(q, k, mask, rows, precision), precision)
    return p @ _stored(v, precision)


def plain_dq_rows(q, k, v, d_out, mask: MaskSpec, rows: np.ndarray, precision: str) -> np.ndarray:
    p = plain_weights_rows(q, k, mask, rows, precision)
    dp = _stored(d_out[rows], precision) @ _stored(v, precision).T
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    return (_stored(ds, precision) @ _stored(k, precision)) * np.float32(1.0 / math.sqrt(q.shape[1]))


def tolerance(plain: np.ndarray, exact: np.ndarray, precision: str) -> float:
    """FACTOR x the plain path's largest error on these rows, plus the floor."""
    scale = float(np.abs(exact).max()) if exact.size else 0.0
    floor = FLOOR_ULPS * float(np.finfo(np.float32).eps) * max(scale, 1.0)
    return FACTOR.get(precision, FACTOR["fp32"]) * float(np.abs(plain - exact).max(initial=0.0)) + floor
