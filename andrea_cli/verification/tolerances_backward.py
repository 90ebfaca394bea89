"""How far the float32 backward kernels may stray from the float64 NumPy backward, element by
element; derived from the operations each kernel performs, as tolerances.py does for the forward
(u, gamma(n) and TINY from there). |X| is the element-wise absolute value, · a matrix product.

Stage by stage (each kernel against the float64 product of its own float32 inputs):
    dV = P^T·dO     T products summed:   gamma(T) · |P|^T·|dO|
    dP = dO·V^T     d_v products:        gamma(d_v) · |dO|·|V|^T
    dS = P∘(dP − r), r = sum_j P·dP: r within gamma(T)·sum|P·dP|; the difference and the product
                    one rounding each:   P·(gamma(T)·sum|P·dP| + gamma(2)·(|dP| + |r|))
    dQ = scale·dS·K T products, the host's float32(scale) and the product: gamma(T + 2)·scale·|dS|·|K|
    dK = scale·dS^T·Q  likewise
End to end (from Q, K, V, dO), the error of P propagates: a weight off by e_P moves dV by
e_P^T·|dO|, dS by e_P·|dP − r| plus P times the error of r, and dQ, dK by scale·e_dS·|K| (|Q|).

L queries against S keys, H query heads over H_kv K/V heads (group = H / H_kv): dQ sums S
terms, while each dK and dV element sums its group's query heads inside the kernel, group·L
terms (gamma(group·L)); the bounds are worked out per query head (K and V repeated as the
query heads read them) and summed over each group, as the errors they bound are.
"""

from __future__ import annotations


import numpy as np

from andrea_cli.backends.launch.fused import FUSED_KEYS
from andrea_cli.reference import kv_heads_for
from andrea_cli.reference_backward import Gradients, group_sum
from andrea_cli.verification.tolerances import TINY, U, gamma, scale_tol, scores_tol, softmax_tol
from andrea_cli.reference import scale_for

SAFETY = 1.01  # first-order bounds: room for the products of two small errors they leave out


def _t(a: np.ndarray) -> np.ndarray:
    return a.transpose(0, 2, 1)


def _rows(p: np.ndarray, H_kv: int | None) -> int:
    """The terms of one dK or dV element: the L query rows of each of its group's query heads."""
    H = p.shape[0]
    return H // (H_kv or H) * p.shape[-2]


def dv_tol(p: np.ndarray, d_out: np.ndarray, H_kv: int | None = None) -> np.ndarray:
    """P^T·dO summed over each group: (H, L, S), (H, L, d_v) -> (H_kv, S, d_v)"""
    abs_sum = np.matmul(_t(np.abs(p.astype(np.float64))), np.abs(d_out.astype(np.float64)))
    return gamma(_rows(p, H_kv)) * group_sum(abs_sum, H_kv or p.shape[0]) + TINY


def dp_tol(d_out: np.ndarray, v: np.ndarray) -> np.ndarray:
    v = kv_heads_for(v, d_out.shape[0])
    return gamma(v.shape[-1]) * np.matmul(np.abs(d_out.astype(np.float64)), _t(np.abs(v.astype(np.float64)))) + TINY


def ds_tol(p: np.ndarray, dp: np.ndarray) -> np.ndarray:
    p64, dp64 = p.astype(np.float64), dp.astype(np.float64)
    r = (p64 * dp64).sum(axis=-1, keepdims=True)
    r_err = gamma(p.shape[-1]) * np.abs(p64 * dp64).sum(axis=-1, keepdims=True)
    return SAFETY * p64 * (r_err + gamma(2) * (np.abs(dp64) + np.abs(r))) + TINY


def dq_tol(ds: np.ndarray, k: np.ndarray, factor: float, extra: int = 0) -> np.ndarray:
    """scale·dS·K; `extra` roundings for a kernel that sums in groups before adding them in."""
    S, k = ds.shape[-1], kv_heads_for(k, ds.shape[0])
    return gamma(S + 2 + extra) * factor * np.matmul(np.abs(ds.astype(np.float64)), np.abs(k.astype(np.float64))) + TINY


def dk_tol(ds: np.ndarray, q: np.ndarray, factor: float, extra: int = 0, H_kv: int | None = None) -> np.ndarray:
    """scale·dS^T·Q summed over each group: (H, L, S), (H, L, d_k) -> (H_kv, S, d_k)"""
    abs_sum = np.matmul(_t(np.abs(ds.astype(np.float64))), np.abs(q.astype(np.float64)))
    return gamma(_rows(ds, H_kv) + 2 + extra) * factor * group_sum(abs_sum, H_kv or ds.shape[0]) + TINY


def _propagate(g: Gradients, q, k, v, d_out, p_err: np.ndarray, r_err: np.ndarray, factor: float,
               extra: int) -> dict[str, np.ndarray]:
    """dq, dk, dv bounds given the error of P (element-wise) and of the rowsum term r (per row);
    dk and dv summed over each K/V head's group."""
    H_kv, H = k.shape[0], q.shape[0]
    k, v = kv_heads_for(k, H), kv_heads_for(v, H)
    aq, ak, av, ado = (np.abs(a.astype(np.float64)) for a in (q, k, v, d_out))
    p_abs = g.weights + p_err
    dp_err = gamma(v.shape[-1]) * np.matmul(ado, _t(av))
    r = (g.weights * g.d_weights).sum(axis=-1, keepdims=True)
    diff = np.abs(g.d_weights) + np.abs(r)
    ds_err = SAFETY * (p_err * diff + g.weights * (dp_err + r_err) + gamma(2) * p_abs * diff)
    ds_abs = np.abs(g.d_scores) + ds_err
    S, rows = g.weights.shape[-1], _rows(g.weights, H_kv)
    dv = np.matmul(_t(p_err), ado) + gamma(rows + extra) * np.matmul(_t(p_abs), ado)
    dk = np.matmul(_t(ds_err), aq) + gamma(rows + 2 + extra) * np.matmul(_t(ds_abs), aq)
    return {
        "dv": SAFETY * group_sum(dv, H_kv) + TINY,
        "dq": SAFETY * factor * (np.matmul(ds_err, ak) + gamma(S + 2) * np.matmul(ds_abs, ak)) + TINY,
        "dk": SAFETY * factor * group_sum(dk, H_kv) + TINY,
    }


def staged_end_to_end_tol(g: Gradients, q, k, v, d_out, visible, d_k: int, scaled: bool,
                          bias: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The staged backward from Q, K, V, dO: P carries the forward's error (output_tol's weight
    bound), r = sum_j P·dP carries P's and dP's errors and its own T roundings. bias: ALiBi's
    (H, L, S), added to the scaled scores (tolerances.output_tol's three roundings)."""
    factor = scale_for(d_k, scaled)
    p_err = _weight_err(g.weights, q, k, visible, d_k, scaled, extra_roundings=0, bias=bias)
    dp_err = dp_tol(d_out, v) - TINY
    abs_dp = np.abs(g.d_weights)
    r_err = (p_err * abs_dp + g.weights * dp_err + gamma(g.weights.shape[-1]) * g.weights * abs_dp).sum(axis=-1, keepdims=True)
    return _propagate(g, q, k, v, d_out, p_err, r_err, factor, extra=0)


def _weight_err(p, q, k, visible, d_k, scaled, extra_roundings, bias=None):
    """The bound on a float32 softmax weight computed from Q and K: the scores' error through the
    softmax (at most p·2·max|delta|) plus the softmax's own roundings (tolerances.output_tol's,
    ALiBi's bias among them)."""
    factor = scale_for(d_k, scaled)
    s_exact = np.matmul(q.astype(np.float64), _t(kv_heads_for(k, q.shape[0]).astype(np.float64))) * factor
    delta = scores_tol(q, k, extra_roundings) * factor + (scale_tol(s_exact) if scaled else 0.0)
    if bias is not None:
        finite = np.where(visible, bias, 0.0)
        delta = delta + gamma(3) * (np.abs(s_exact) + np.abs(finite))
        s_exact = s_exact + finite
    worst = np.where(visible, delta, 0).max(axis=-1, keepdims=True)
    return SAFETY * p * 2 * worst + softmax_tol(np.where(visible, s_exact, -np.inf), p)


def fused_end_to_end_tol(g: Gradients, q, k, v, d_out, visible, d_k: int, scaled: bool,
                         out_tol: np.ndarray, bias: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The fused backward: P = exp(s − lse) recomputed from float32 scores (their error, as in the
    forward, enters s and lse: 2·max|delta|), lse = m + log(l) with l off by the forward's online
    rescaling (2·(5·tiles + 4.64·max|s|)·u relative) and by the roundings of m + log(l) and of
    s − lse (u·(|lse| + |s − lse|) each, absolute in the exponent); the rowsum term is
    delta = dO·O with O within `out_tol` (tolerances.fused_tol): sum|dO|·out_tol + gamma(d_v)·|dO|·|O|.
    dK and dV sum in groups of 8 rows before adding in: 8 more roundings. bias: ALiBi's, in s
    (the recomputed P adds it as the forward did) and in P's error (_weight_err)."""
    factor = scale_for(d_k, scaled)
    p = g.weights
    s = _biased_scores(q, k, factor, visible, bias)
    lse = row_logsumexp(s, visible)
    max_s = np.where(visible, np.abs(s), 0).max(axis=-1, keepdims=True)
    tiles = np.ceil(visible.sum(axis=-1, keepdims=True) / FUSED_KEYS) + 1
    exponent = np.where(visible, np.abs(s - lse), 0)
    rho = 2 * (5 * tiles + 4.64 * max_s) * U + U * (2 * np.abs(lse) + 3.4 * exponent + 8)
    p_err = _weight_err(p, q, k, visible, d_k, scaled, extra_roundings=4, bias=bias) + SAFETY * p * rho
    ado = np.abs(d_out.astype(np.float64))
    out = np.matmul(p, kv_heads_for(v, q.shape[0]).astype(np.float64))
    r_err = ((ado * out_tol).sum(axis=-1) + gamma(v.shape[-1]) * (ado * np.abs(out)).sum(axis=-1))[..., None]
    return _propagate(g, q, k, v, d_out, p_err, r_err, factor, extra=8)


def _biased_scores(q, k, factor, visible, bias) -> np.ndarray:
    """Q·K^T·scale in float64, ALiBi's bias added where a key is visible (H, L, S)."""
    s = np.matmul(q.astype(np.float64), _t(kv_heads_for(k, q.shape[0]).astype(np.float64))) * factor
    return s if bias is None else s + np.where(visible, bias, 0.0)


def lse_tol(q, k, visible, d_k: int, scaled: bool, bias: np.ndarray | None = None) -> np.ndarray:
    """The fused forward's row logsumexp m + log(l): the scores' worst error (lse moves by at most
    the largest change of a score in its row), l's relative error (the forward's online rescaling, its n additions and expf's
    (4 + 2.32·|s − m|) ulp per term), and the rounding of the sum: u·|lse|. bias: ALiBi's, in s
    and its three roundings in each score's error (tolerances.output_tol).       (H, T)"""
    factor = scale_for(d_k, scaled)
    s = _biased_scores(q, k, factor, visible, None)
    delta = scores_tol(q, k, 4) * factor + (scale_tol(s) if scaled else 0.0)
    if bias is not None:
        finite = np.where(visible, bias, 0.0)
        delta = delta + gamma(3) * (np.abs(s) + np.abs(finite))
        s = s + finite
    worst = np.where(visible, delta, 0).max(axis=-1)
    m = np.where(visible, s, -np.inf).max(axis=-1, keepdims=True)
    lse = row_logsumexp(s, visible)[..., 0]
    max_s = np.where(visible, np.abs(s), 0).max(axis=-1)
    spread = np.abs(np.where(visible, s - np.where(np.isfinite(m), m, 0), 0)).max(axis=-1)
    n = visible.sum(axis=-1)
    tiles = np.ceil(n / FUSED_KEYS) + 1
    rel_l = (2 * (5 * tiles + 4.64 * max_s) + n + 8 + 4.64 * spread) * U
    # a row that sees no key (L > S, bottom-right) gets +inf, exactly: nothing to allow for
    return np.where(n > 0, SAFETY * (worst + rel_l) + U * np.abs(lse), 0.0) + TINY


def row_logsumexp(s: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """log sum_j exp(s_ij) over each row's visible keys, (H, L, 1); 0 for a row that sees no key
    (L > S, bottom-right), whose P is 0 everywhere, so that its bounds stay 0 rather than NaN."""
    s_vis = np.where(visible, s, -np.inf)
    m = s_vis.max(axis=-1, keepdims=True)
    seen = np.isfinite(m)
    m = np.where(seen, m, 0.0)
    total = np.where(visible, np.exp(s_vis - m), 0).sum(axis=-1, keepdims=True)
    return np.where(seen, m + np.log(np.where(seen, total, 1.0)), 0.0)
