"""The backward pass in NumPy, float64, read like the chain rule: the yardstick for the backward
kernels, as reference.py is for the forward. Given dO = dL/dO, the gradients of Q, K and V.

Checked against central finite differences in tests/test_reference_backward.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from andrea_cli import reference
from andrea_cli.masks import MaskSpec


@dataclass
class Gradients:
    """Every intermediate of one backward pass, float64."""

    weights: np.ndarray  # P, the forward's softmax         (H, L, S)
    dv: np.ndarray  # P^T · dO, group-summed               (H_kv, S, d_v)
    d_weights: np.ndarray  # dP = dO · V^T                 (H, L, S)
    d_scores: np.ndarray  # dS = P ∘ (dP − rowsum(dP ∘ P))  (H, L, S), w.r.t. the masked scaled scores
    dq: np.ndarray  # scale · dS · K                       (H, L, d_k)
    dk: np.ndarray  # scale · dS^T · Q, group-summed       (H_kv, S, d_k)


def forward_weights(q, k, spec: MaskSpec, scaled: bool) -> np.ndarray:
    """P = softmax(mask(Q · K^T · scale))      (H, L, d_k), (H_kv, S, d_k) -> (H, L, S)"""
    s = reference.scores(q, k)
    if scaled:
        s = reference.scale(s, q.shape[-1], scaled)
    return reference.softmax(reference.mask(s, spec))


def value_gradient(p: np.ndarray, d_out: np.ndarray, H_kv: int | None = None) -> np.ndarray:
    """dV = P^T · dO, summed over each K/V head's group   (H, L, S), (H, L, d_v) -> (H_kv, S, d_v)"""
    return group_sum(np.matmul(p.transpose(0, 2, 1), d_out.astype(np.float64)), H_kv or p.shape[0])


def weight_gradient(d_out: np.ndarray, v: np.ndarray) -> np.ndarray:
    """dP = dO · V^T                          (H, L, d_v), (H_kv, S, d_v) -> (H, L, S)"""
    v = reference.kv_heads_for(v, d_out.shape[0])
    return np.matmul(d_out.astype(np.float64), v.astype(np.float64).transpose(0, 2, 1))


def group_sum(x: np.ndarray, H_kv: int) -> np.ndarray:
    """A gradient per query head summed over the query heads that share each K/V head (query
    head h reads K/V head h // (H / H_kv)): the chain rule through kv_heads_for's repeat.
    (H, S, d) -> (H_kv, S, d)"""
    H = x.shape[0]
    return x.reshape(H_kv, H // H_kv, *x.shape[1:]).sum(axis=1)


def softmax_backward(p: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """dS = P ∘ (dP − rowsum(dP ∘ P)): the softmax Jacobian diag(p) − p·p^T applied to each row
    of dP. A hidden key has p = 0, so it gets exactly 0.          (H, T, T), (H, T, T) -> (H, T, T)"""
    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))


def query_gradient(ds: np.ndarray, k: np.ndarray, factor: float) -> np.ndarray:
    """dQ = scale · dS · K                    (H, L, S), (H_kv, S, d_k) -> (H, L, d_k)"""
    return factor * np.matmul(ds, reference.kv_heads_for(k, ds.shape[0]).astype(np.float64))


def key_gradient(ds: np.ndarray, q: np.ndarray, factor: float, H_kv: int | None = None) -> np.ndarray:
    """dK = scale · dS^T · Q, summed over each K/V head's group  (H, L, S), (H, L, d_k) -> (H_kv, S, d_k)"""
    return group_sum(factor * np.matmul(ds.transpose(0, 2, 1), q.astype(np.float64)), H_kv or ds.shape[0])


def backward(q, k, v, d_out, spec: MaskSpec, scaled: bool = True) -> Gradients:
    """dQ, dK, dV of L with dL/dO = d_out, for O = softmax(mask(Q · K^T · scale)) · V: q (H, L, d_k),
    k (H_kv, S, d_k), v (H_kv, S, d_v), H a multiple of H_kv (dK, dV (H_kv, S, d): summed over
    the query heads that read each K/V head)."""
    factor = reference.scale_for(q.shape[-1], scaled)  # the forward's factor, applied once more on the way back
    p = forward_weights(q, k, spec, scaled)
    dp = weight_gradient(d_out, v)
    ds = softmax_backward(p, dp)
    H_kv = k.shape[0]
    return Gradients(p, value_gradient(p, d_out, H_kv), dp, ds, query_gradient(ds, k, factor),
                     key_gradient(ds, q, factor, H_kv))


def loss(q, k, v, d_out, spec: MaskSpec, scaled: bool = True) -> float:
    """L = sum(dO ∘ O): the scalar whose gradient with respect to O is exactly dO, so finite
    differences of it check backward() (tests) without any other loss in the way."""
    return float((np.asarray(d_out, dtype=np.float64) * reference.attention(q, k, v, spec, scaled)).sum())
