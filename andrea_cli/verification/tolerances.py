"""How far a float32 kernel may honestly stray from the float64 NumPy path, element by element.

Each bound is derived from the operations the kernel performs, with u = 2^-24 the unit roundoff
of float32 and gamma(n) = n·u / (1 - n·u) the classic bound for n rounded operations in a row
(Higham, Accuracy and Stability of Numerical Algorithms, §3.1). FMA contraction on a GPU only
removes roundings, so it stays inside these bounds. The bounds are worst cases: real errors are
usually far smaller, and a bug (a missing barrier, an off-by-one) is larger by orders of magnitude.
"""

from __future__ import annotations


import numpy as np

from andrea_cli.backends.launch.fused import FUSED_KEYS  # keys per tile of the fused kernel
from andrea_cli.reference import kv_heads_for, scale_for

U = 2.0**-24
TINY = 1e-30  # results this small may flush to zero or land in denormals on either side


def gamma(n: int | np.ndarray) -> float | np.ndarray:
    return n * U / (1 - n * U)


def scores_tol(q: np.ndarray, k: np.ndarray, extra_roundings: int = 0) -> np.ndarray:
    """S = Q·K^T accumulates d_k products in float32: |error| <= gamma(d_k) · (|Q|·|K|^T).
    A kernel that sums a few products before adding them in takes a few more roundings per path."""
    d_k, k = q.shape[-1], kv_heads_for(k, q.shape[0])
    return gamma(d_k + extra_roundings) * np.matmul(np.abs(q.astype(np.float64)), np.abs(k.astype(np.float64)).transpose(0, 2, 1)) + TINY


def scale_tol(exact_scaled: np.ndarray) -> np.ndarray:
    """The factor 1.0f / sqrtf(d_k), worked out in float32 by the kernel (sqrtf's rounding halved
    by the reciprocal, then the division's: 1.5u; a factor given: float32 of it, u), then the
    product's rounding: gamma(3)·|x| bounds both."""
    return gamma(3) * np.abs(exact_scaled) + TINY


def softmax_tol(masked: np.ndarray, p_exact: np.ndarray) -> np.ndarray:
    """Softmax of float32 scores x (row max m, n visible entries), computed as
    d = x - m (one rounding: relative u, so absolute |d|·u in the exponent),
    e = exp(d) (CUDA's expf is within 2 ulp; the fast __expf within 2 + 1.16·|d| ulp, an ulp
    being up to 2u relative: allow (4 + 2.32·|d|)·u),
    a sum of n positive terms (gamma(n - 1)), its reciprocal and one product (2u).
    The sum carries the terms' errors too, at most their p-weighted mean D = sum p·|d|.
    So |error of p| <= p · u · (8 + 3.4·(|d| + D) + n), to first order."""
    x = masked.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    d = np.abs(np.where(np.isfinite(x), x - np.where(np.isfinite(m), m, 0.0), 0.0))
    n = np.isfinite(x).sum(axis=-1, keepdims=True)
    D = (p_exact * d).sum(axis=-1, keepdims=True)
    return p_exact * U * (8 + 3.4 * (d + D) + n) + TINY


def av_tol(p: np.ndarray, v: np.ndarray) -> np.ndarray:
    """O = P·V accumulates up to T products: |error| <= gamma(T) · (|P|·|V|)."""
    T, v = p.shape[-1], kv_heads_for(v, p.shape[0])
    return gamma(T) * np.matmul(np.abs(p.astype(np.float64)), np.abs(v.astype(np.float64))) + TINY


def output_tol(q, k, v, p_exact: np.ndarray, visible: np.ndarray, d_k: int, scaled: bool,
               extra_roundings: int = 0, bias: np.ndarray | None = None) -> np.ndarray:
    """End to end, against softmax(mask(Q·K^T/sqrt(d_k)))·V computed in float64.
    A perturbation delta of a row's scores moves each weight by at most p·2·max|delta| (the
    softmax Jacobian diag(p) - p·p^T), so the weights carry the scores' error propagated plus
    the softmax's own, and the output adds av's rounding on top. bias: what is added to the
    scaled scores in float32, a mask array's (one more rounding, of |s + bias|) or ALiBi's
    (-m_h·d, itself a product of a rounded slope: three more, of |s| + |bias|)."""
    factor = scale_for(d_k, scaled)
    k, v = kv_heads_for(k, q.shape[0]), kv_heads_for(v, q.shape[0])
    s_exact = np.matmul(q.astype(np.float64), k.astype(np.float64).transpose(0, 2, 1)) * factor
    delta = scores_tol(q, k, extra_roundings) * factor + (scale_tol(s_exact) if scaled else 0.0)
    if bias is not None:
        finite = np.where(visible, bias.astype(np.float64), 0.0)
        delta = delta + gamma(3) * (np.abs(s_exact) + np.abs(finite))
        s_exact = s_exact + finite
    worst_delta = np.where(visible, delta, 0).max(axis=-1, keepdims=True)
    masked = np.where(visible, s_exact, -np.inf)
    p_tol = 1.01 * (p_exact * 2 * worst_delta) + softmax_tol(masked, p_exact)
    abs_v = np.abs(v.astype(np.float64))
    return np.matmul(p_tol, abs_v) + av_tol(p_exact, v)


def fused_tol(q, k, v, p_exact: np.ndarray, visible: np.ndarray, d_k: int, scaled: bool,
              bias: np.ndarray | None = None) -> np.ndarray:
    """The fused kernel against the float64 equation: output_tol with 4 more roundings per dot
    product (kernel2 sums four products before adding them in), plus the online softmax. Each key
    tile that raises a row's running max rescales what was accumulated (acc and the sum l) by
    alpha = exp(m_old - m_new): an expf and a product, relative error <= (5 + 2.32·|m_old - m_new|)·u.
    The jumps of a row's max add up to at most 2·max|s|, so over its tiles acc and l each pick up
    at most (5·tiles + 4.64·max|s|)·u relative error, and their quotient twice that. bias: as
    output_tol's (s then includes it)."""
    base = output_tol(q, k, v, p_exact, visible, d_k, scaled, extra_roundings=4, bias=bias)
    factor = scale_for(d_k, scaled)
    k, v = kv_heads_for(k, q.shape[0]), kv_heads_for(v, q.shape[0])
    s = np.matmul(q.astype(np.float64), k.astype(np.float64).transpose(0, 2, 1)) * factor
    if bias is not None:
        s = s + np.where(visible, bias.astype(np.float64), 0.0)
    max_s = np.where(visible, np.abs(s), 0).max(axis=-1, keepdims=True)  # (H, T, 1)
    tiles = np.ceil(visible.sum(axis=-1, keepdims=True) / FUSED_KEYS) + 1  # (T, 1)
    rescale = 2 * (5 * tiles + 4.64 * max_s) * U
    return base + rescale * np.matmul(p_exact, np.abs(v.astype(np.float64)))


def decode_tol(q, k, v, p_exact: np.ndarray, visible: np.ndarray, d_k: int, scaled: bool, warps: int,
               slices: int, bias: np.ndarray | None = None) -> np.ndarray:
    """One step of generation against the float64 equation's row: the fused kernels' bound, with
    the online softmax stepping at most one key at a time in each of `warps` streams (a rescale per
    step that raises the stream's max; the kernel's streams are its lane groups, decode.STREAMS)
    and two merges, of the streams and of the `slices`, each an exp, a
    product and a sum per part: (5·keys_per_warp + 5·(warps + slices) + 2·4.64·max|s|)·u."""
    base = output_tol(q, k, v, p_exact, visible, d_k, scaled, extra_roundings=4, bias=bias)
    factor = scale_for(d_k, scaled)
    s = np.matmul(q.astype(np.float64), k.astype(np.float64).transpose(0, 2, 1)) * factor
    if bias is not None:
        s = s + np.where(visible, bias.astype(np.float64), 0.0)
    max_s = np.where(visible, np.abs(s), 0).max(axis=-1, keepdims=True)
    per_warp = np.ceil(visible.sum(axis=-1, keepdims=True) / warps)
    rescale = 2 * (5 * per_warp + 5 * (warps + slices) + 2 * 4.64 * max_s) * U
    return base + rescale * np.matmul(p_exact, np.abs(v.astype(np.float64)))
