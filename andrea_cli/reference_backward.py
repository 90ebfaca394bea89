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

    weights: np.ndarray  # P, the forward's softmax         (H, T, T)
    dv: np.ndarray  # P^T · dO                             (H, T, d_v)
    d_weights: np.ndarray  # dP = dO · V^T                 (H, T, T)
    d_scores: np.ndarray  # dS = P ∘ (dP − rowsum(dP ∘ P))  (H, T, T), w.r.t. the masked scaled scores
    dq: np.ndarray  # scale · dS · K                       (H, T, d_k)
    dk: np.ndarray  # scale · dS^T · Q                     (H, T, d_k)


def forward_weights(q, k, spec: MaskSpec, scaled: bool) -> np.ndarray:
    """P = softmax(mask(Q · K^T · scale))      (H, T, d_k), (H, T, d_k) -> (H, T, T)"""
    s = reference.scores(q, k)
    if scaled:
        s = reference.scale(s, q.shape[-1], scaled)
    return reference.softmax(reference.mask(s, spec))


def value_gradient(p: np.ndarray, d_out: np.ndarray) -> np.ndarray:
    """dV = P^T · dO                          (H, T, T), (H, T, d_v) -> (H, T, d_v)"""
    return np.matmul(p.transpose(0, 2, 1), d_out.astype(np.float64))


def weight_gradient(d_out: np.ndarray, v: np.ndarray) -> np.ndarray:
    """dP = dO · V^T                          (H, T, d_v), (H, T, d_v) -> (H, T, T)"""
    return np.matmul(d_out.astype(np.float64), v.astype(np.float64).transpose(0, 2, 1))


def softmax_backward(p: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """dS = P ∘ (dP − rowsum(dP ∘ P)): the softmax Jacobian diag(p) − p·p^T applied to each row
    of dP. A hidden key has p = 0, so it gets exactly 0.          (H, T, T), (H, T, T) -> (H, T, T)"""
    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))


def query_gradient(ds: np.ndarray, k: np.ndarray, factor: float) -> np.ndarray:
    """dQ = scale · dS · K                    (H, T, T), (H, T, d_k) -> (H, T, d_k)"""
    return factor * np.matmul(ds, k.astype(np.float64))


def key_gradient(ds: np.ndarray, q: np.ndarray, factor: float) -> np.ndarray:
    """dK = scale · dS^T · Q                  (H, T, T), (H, T, d_k) -> (H, T, d_k)"""
    return factor * np.matmul(ds.transpose(0, 2, 1), q.astype(np.float64))


def backward(q, k, v, d_out, spec: MaskSpec, scaled: bool = True) -> Gradients:
    """dQ, dK, dV of L with dL/dO = d_out, for O = softmax(mask(Q · K^T · scale)) · V."""
    factor = reference.scale_for(q.shape[-1], scaled)  # the forward's factor, applied once more on the way back
    p = forward_weights(q, k, spec, scaled)
    dp = weight_gradient(d_out, v)
    ds = softmax_backward(p, dp)
    return Gradients(p, value_gradient(p, d_out), dp, ds, query_gradient(ds, k, factor), key_gradient(ds, q, factor))


def loss(q, k, v, d_out, spec: MaskSpec, scaled: bool = True) -> float:
    """L = sum(dO ∘ O): the scalar whose gradient with respect to O is exactly dO, so finite
    differences of it check backward() (tests) without any other loss in the way."""
    return float((np.asarray(d_out, dtype=np.float64) * reference.attention(q, k, v, spec, scaled)).sum())
