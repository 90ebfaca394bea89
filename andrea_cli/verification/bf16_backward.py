"""The bf16 tensor-core backward's arithmetic in float64, its element-wise bound, and a bf16
autograd emulation to judge its accuracy by.

attention_backward_dkdv_kernel2 / dq_kernel2 read bf16 copies of Q (pre-scaled by scale·log2 e),
K, V and dO, the forward's fp32 row logsumexp and output O, and round P and dS to bf16 as the
operands of the products after them; every sum is fp32. `reference_and_tol` applies exactly those
roundings to the kernel's own lse and O, so what is left between kernel and reference is fp32
accumulation, exp2f's last bits, and the rare P or dS element whose fp32 value lies so close to a
bf16 rounding boundary that those last bits decide which way it rounds. Each bound is derived
for the element it guards (u = 2^-24, gamma as in tolerances.py).

`autograd_bf16` is what a framework's bf16 autograd computes (torch is not a dependency: this is
NumPy standing in for it): every op's inputs and outputs bf16, its sums fp32-or-better (float64
here), the softmax and its backward in fp32-or-better from bf16 inputs. FlashAttention's test
rule holds a fused bf16 backward to a small multiple of that emulation's error against float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from andrea_cli.backends.launch.backward_bf16 import LSE_FORWARD
from andrea_cli.masks import MaskSpec, alibi_slopes
from andrea_cli.reference import kv_heads_for, scale_for
from andrea_cli.reference_backward import group_sum
from andrea_cli.verification.bf16_attention import bf16_inputs, round_bf16
from andrea_cli.verification.tolerances import TINY, U, gamma

LN2 = math.log(2)
LOG2E = 1 / LN2


@dataclass
class Bf16Gradients:
    dq: np.ndarray  # (H, L, d), float64
    dk: np.ndarray  # (H_kv, S, d): summed over each K/V head's group of query heads
    dv: np.ndarray


def _t(a: np.ndarray) -> np.ndarray:
    return a.transpose(0, 2, 1)


def round64(x: np.ndarray) -> np.ndarray:
    """float64 -> bf16 (through float32, as the kernel rounds its fp32 values) -> float64."""
    return round_bf16(np.asarray(x, np.float32)).astype(np.float64)


def _rounding_gap(x: np.ndarray, err: np.ndarray) -> np.ndarray:
    """How far bf16(x') may be from bf16(x) for any x' within err of x: 0 unless a bf16 rounding
    boundary lies within err of x; then |x' - x| plus one bf16 spacing (each rounding moves a
    value by at most half a spacing), the spacing taken at |x| + err."""
    ax = np.abs(x)
    top = ax + err
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(ax > 0, ax, 1.0)))
        spacing = np.exp2(np.floor(np.log2(np.where(top > 0, top, 1.0))) - 7)  # 8 significant bits
    fine = np.exp2(exponent - 7)
    frac = ax / fine - np.floor(ax / fine)
    distance = np.abs(frac - 0.5) * fine  # to the nearest midpoint between two bf16 values
    near = ((distance <= err) | (ax <= err)) & (err > 0)
    return np.where(near, err + spacing, 0.0)


def reference_and_tol(q, k, v, d_out, out, lse, mask: MaskSpec, scaled: bool, unrounded: str | None = None):
    """(gradients, bounds): the bf16 backward's arithmetic in float64 on these inputs (q, k, v,
    d_out float32 (H, T, d); out (H, T, d) and lse (H, T) the bf16 forward's, as the kernels get
    them), and each gradient's element-wise bound. unrounded "p" or "ds" leaves that operand
    unrounded: the tests show the bound is tight enough to tell. q, d_out (H, L, d); k, v
    (H_kv, S, d): dK and dV are the sums over each group, group·L terms in fp32. ALiBi's bias
    (mask.score_bias) joins each score in log2 units: the slope m' = m_h·log2 e off by its exp2f
    and product (3u of |bias|); dkdv adds -m'·(p - j) (a product and a sum: u·|bias| + u·|s|),
    dq m'·j to the score and m'·p to the row's lse (u·|m'|·(p + j) and u·(|s| + |lse'|)), so
    4u·|bias| + 2u·|m'|·(p + j) + u·(|s| + |lse| + |m'·p|) covers both."""
    qs, kb, vb = bf16_inputs(q, k, v, scaled)
    H_kv, S = kb.shape[0], kb.shape[1]
    dob = round64(d_out)
    H, L, d = qs.shape
    kb, vb = kv_heads_for(kb, H), kv_heads_for(vb, H)
    visible = mask.visible(L, S=S)
    scale = float(np.float32(scale_for(d, scaled)))
    lse2 = (np.asarray(lse, np.float32) * np.float32(LOG2E)).astype(np.float64)[..., None]  # an fp32 product
    s = qs @ _t(kb)  # log2 units, exact
    bias = mask.score_bias(H, L, S=S)
    bias2 = 0.0 if bias is None else np.where(visible, bias * LOG2E, 0.0)
    s = s + bias2
    err_bias = 0.0
    if bias is not None:
        slope2 = alibi_slopes(H)[:, None, None] * LOG2E
        p_pos = (np.arange(L) + mask.offset(L, S))[:, None].astype(np.float64)
        j = np.arange(S)[None, :].astype(np.float64)
        lse_abs = np.abs(np.where(np.isfinite(lse2), lse2, 0.0))
        err_bias = (4 * U * np.abs(bias2) + 2 * U * slope2 * (np.abs(p_pos) + j)
                    + U * (lse_abs + slope2 * np.abs(p_pos)))
    p = np.where(visible, np.exp2(np.where(visible, s, 0.0) - lse2), 0.0)
    dp = dob @ _t(vb)
    d_out64, out64 = np.asarray(d_out, np.float64), np.asarray(out, np.float64)
    delta = (d_out64 * out64).sum(axis=-1, keepdims=True)
    ds = p * (dp - delta)
    pb = p if unrounded == "p" else round64(p)
    dsb = ds if unrounded == "ds" else round64(ds)
    grads = Bf16Gradients(dq=scale * (dsb @ kb), dk=LN2 * group_sum(_t(dsb) @ qs, H_kv),
                          dv=group_sum(_t(pb) @ dob, H_kv))

    # The kernel's fp32 values before their bf16 rounding, against these:
    # S: an mma chain over d (tensor cores may truncate partial sums: 2u per addition)
    err_s = gamma(2 * d) * (np.abs(qs) @ _t(np.abs(kb))) + (err_bias + U * np.abs(s) if bias is not None else 0.0)
    # P = exp2f(s - lse2): the argument off by S's error and the subtraction's rounding; exp2f and
    # the rounding of its result 2 ulp (4u)
    # (a row that sees no key has lse = +inf and P = 0: its bound stays 0, not inf · 0)
    rel_p = LN2 * (err_s + U * np.abs(s - np.where(np.isfinite(lse2), lse2, 0.0))) + 4 * U
    err_p = np.where(visible, 1.01 * rel_p * p, 0.0)
    # dP: an mma chain over d; delta: delta_kernel1's fp32 sum of d products (warp shuffles)
    err_dp = gamma(2 * d) * (np.abs(dob) @ _t(np.abs(vb)))
    err_delta = gamma(d + 1) * (np.abs(d_out64) * np.abs(out64)).sum(axis=-1, keepdims=True)
    # dS = p·(dP - delta): both factors off as above, the subtraction and product rounded
    spread = np.abs(dp - delta)
    err_ds = np.where(visible, 1.01 * (err_p * spread + p * (err_dp + err_delta) + 2 * U * p * spread), 0.0)
    gap_p, gap_ds = _rounding_gap(p, err_p), _rounding_gap(ds, err_ds)

    # the three products: the operands' gaps, then fp32 sums (2u per addition) over S keys (dQ)
    # and over the group's query heads' L rows each (dK, dV)
    n_q, n_kv = gamma(2 * S + 2), gamma(2 * (H // H_kv) * L + 2)
    abs_pb, abs_dsb, abs_q, abs_k, abs_do = np.abs(pb), np.abs(dsb), np.abs(qs), np.abs(kb), np.abs(dob)
    tol_dv = group_sum(_t(gap_p) @ abs_do + n_kv * (_t(abs_pb) @ abs_do), H_kv)
    tol_dk = LN2 * group_sum(_t(gap_ds) @ abs_q + n_kv * (_t(abs_dsb) @ abs_q), H_kv) + 2 * U * np.abs(grads.dk)
    tol_dq = scale * (gap_ds @ abs_k + n_q * (abs_dsb @ abs_k)) + 2 * U * np.abs(grads.dq)
    bounds = Bf16Gradients(dq=1.01 * tol_dq + TINY, dk=1.01 * tol_dk + TINY, dv=1.01 * tol_dv + TINY)
    return grads, bounds


def lse_reference_and_tol(q, k, mask: MaskSpec, scaled: bool) -> tuple[np.ndarray, np.ndarray]:
    """attention_fused_lse_kernel4's row logsumexp (natural log) in float64 from the bf16 Q and K
    it reads, and its bound: every score off by the fp32 mma chain's error (lse moves by at most
    the largest change of a score in its row), the sum l off as bf16_attention derives for the
    forward (exp2f's ulps, the online rescaling, fp32 additions), log2f's 2 ulp of log2 l, the
    roundings of m + log2 l and of the product by ln 2.                                  (H, L)
    k (H_kv, S, d); a row that sees no key (L > S, bottom-right) gets +inf, as the kernel writes."""
    qs, kb, _ = bf16_inputs(q, k, k, scaled)
    L, d = qs.shape[1], qs.shape[2]
    visible = mask.visible(L, S=kb.shape[1])
    kb = kv_heads_for(kb, qs.shape[0])
    s = np.where(visible, qs @ _t(kb), -np.inf)  # log2 units
    seen = visible.any(axis=-1)[..., None]  # (L, 1)
    m = np.where(seen, s.max(axis=-1, keepdims=True), 0.0)
    l_sum = np.where(seen, np.exp2(s - m).sum(axis=-1, keepdims=True), 1.0)
    lse2 = m + np.log2(l_sum)
    err_s = np.where(visible, gamma(2 * d) * (np.abs(qs) @ _t(np.abs(kb))), 0.0).max(axis=-1, keepdims=True)
    n = visible.sum(axis=-1, keepdims=True)
    keys = LSE_FORWARD.tile_size()  # per tile of the forward that writes the lse
    tiles = np.ceil(n / keys) + 1
    max_s = np.where(visible, np.abs(s), 0.0).max(axis=-1, keepdims=True)
    spread = np.where(visible, np.abs(s - m), 0.0).max(axis=-1, keepdims=True)
    rel_l = (LN2 * (2 * err_s + U * spread) + 4 * U + tiles * 5 * U + LN2 * U * 2 * max_s
             + gamma(keys * tiles + tiles + 2))
    err2 = 2 * err_s + 1.01 * LOG2E * rel_l + 2 * U * np.abs(np.log2(l_sum)) + U * np.abs(lse2)
    lse = LN2 * lse2
    tol = np.where(seen, 1.01 * LN2 * err2 + 2 * U * np.abs(lse), 0.0)
    return np.where(seen, lse, np.inf)[..., 0], tol[..., 0] + TINY


def exact_gradients(q, k, v, d_out, mask: MaskSpec, scaled: bool) -> Bf16Gradients:
    """dQ, dK, dV of softmax(mask(Q·K^T·scale))·V in float64, no rounding anywhere. q, d_out
    (H, L, d); k, v (H_kv, S, d): dK, dV summed over each group."""
    q, k, v, d_out = (np.asarray(a, np.float64) for a in (q, k, v, d_out))
    (H, L, d), (H_kv, S) = q.shape, k.shape[:2]
    k, v = kv_heads_for(k, H), kv_heads_for(v, H)
    scale = scale_for(d, scaled)
    p = _softmax(np.where(mask.visible(L, S=S), (q @ _t(k)) * scale, -np.inf))
    dp = d_out @ _t(v)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return Bf16Gradients(dq=scale * (ds @ k), dk=group_sum(scale * (_t(ds) @ q), H_kv), dv=group_sum(_t(p) @ d_out, H_kv))


def _softmax(logits: np.ndarray) -> np.ndarray:
    """Row softmax; a row that sees no key (L > S, bottom-right) gets zeros, as the kernels give."""
    m = logits.max(axis=-1, keepdims=True)
    e = np.exp(logits - np.where(np.isfinite(m), m, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def autograd_bf16(q, k, v, d_out, mask: MaskSpec, scaled: bool) -> Bf16Gradients:
    """A bf16 autograd's gradients, emulated: bf16 leaves, each op's output rounded to bf16 (its
    sums exact, a little better than fp32), as torch computes attention written out in bf16
    (matmul, scale, masked softmax, matmul; then their backward ops in reverse)."""
    qb, kb, vb, dob = (round64(a) for a in (q, k, v, d_out))
    (H, L, d), (H_kv, S) = qb.shape, kb.shape[:2]
    kb, vb = kv_heads_for(kb, H), kv_heads_for(vb, H)
    visible = mask.visible(L, S=S)
    scale = float(round64(np.array([scale_for(d, scaled)]))[0])
    s = round64(qb @ _t(kb))
    s_scaled = round64(s * scale)
    p = round64(_softmax(np.where(visible, s_scaled, -np.inf)))  # softmax: fp32 inside, bf16 out
    dv = round64(group_sum(_t(p) @ dob, H_kv))  # the repeat's backward: a sum over each group, then bf16
    dp = round64(dob @ _t(vb))
    ds = round64(p * (dp - (dp * p).sum(axis=-1, keepdims=True)))  # softmax backward, bf16 out
    ds_s = round64(ds * scale)
    return Bf16Gradients(dq=round64(ds_s @ kb), dk=round64(group_sum(_t(ds_s) @ qb, H_kv)), dv=dv)


def max_errors(got: Bf16Gradients, exact: Bf16Gradients) -> dict[str, float]:
    return {name: float(np.abs(getattr(got, name) - getattr(exact, name)).max()) for name in ("dq", "dk", "dv")}
