"""The bf16 tensor-core kernels' arithmetic in float64, and how far a kernel may stray from it.

attention_fused_kernel4 to kernel7 round Q (pre-scaled by scale·log2 e), K and V to bf16, and P
to bf16 before P·V; everything else is fp32 (ALiBi's bias too, added in base 2). The reference
here applies exactly those roundings, with the running max of the kernel's own softmax steps
(64 keys; kernel5 at d 128: 16), so what is left between kernel and reference is fp32
accumulation order, exp2's last bits (exp2f, or ex2.approx.ftz with its flush of weights below
2^-126 to zero), and the rare P element whose fp32 value lies so close to a bf16 rounding
boundary that those last bits decide which way it rounds: each bound below is derived for the
element it guards (u = 2^-24, gamma as in tolerances.py), not a loose constant.
"""

from __future__ import annotations

import math

import numpy as np

from andrea_cli.backends.launch.fused_bf16 import LOG2E, bf16_kernel, q_multiplier
from andrea_cli.masks import MaskSpec
from andrea_cli.reference import kv_heads_for
from andrea_cli.scale import resolve_scale
from andrea_cli.verification.tolerances import TINY, U, gamma


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (uint16), round to nearest even; a NaN becomes 0x7fff (cvt.rn.bf16)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where((b & 0x7FFFFFFF) > 0x7F800000, np.uint16(0x7FFF), rounded)


def bf16_to_float(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16 and back: what the kernel's bf16 copies hold."""
    return bf16_to_float(bf16_bits(x))


def bf16_inputs(q, k, v, scaled: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The bf16 copies the kernel reads, as float64: Q·multiplier (one fp32 product), K, V."""
    qs = np.asarray(q, np.float32) * np.float32(q_multiplier(resolve_scale(q.shape[-1], scaled)))  # a float32 product, as on the GPU
    return tuple(round_bf16(a).astype(np.float64) for a in (qs, k, v))


def _tile_running_max(s: np.ndarray, step: int) -> np.ndarray:
    """m_t[i, j]: row i's max over visible keys of every softmax step (`step` keys, from key 0: the
    kernels' first tile starts on a multiple of 64) up to and including key j's (the running max
    the kernel holds when it exponentiates key j); -inf before any."""
    H, L, S = s.shape
    n_steps = -(-S // step)
    padded = np.full((H, L, n_steps * step), -np.inf)
    padded[..., :S] = s
    per_step = padded.reshape(H, L, n_steps, step).max(axis=-1)
    running = np.maximum.accumulate(per_step, axis=-1)
    return np.repeat(running, step, axis=-1)[..., :S]


def _near_rounding_boundary(x: np.ndarray, rel_err: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where x (> 0) is within rel_err·x of a bf16 rounding boundary, and the bf16 spacing there."""
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(x > 0, x, 1.0)))
    spacing = np.exp2(exponent - 7)  # 8 significant bits
    frac = x / spacing - np.floor(x / spacing)
    distance = np.abs(frac - 0.5) * spacing
    return (x > 0) & (distance <= rel_err * x), spacing


def reference_and_tol(q, k, v, mask: MaskSpec, scaled: bool, variant: int | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(H, L, d) output of the bf16 kernel's arithmetic in float64, and its element-wise bound
    (variant: attention_fused_kernel4 or 5, the launcher's default if None). q (H, L, d), k and v
    (H_kv, S, d): query head h reads K/V head h // (H / H_kv); a row that sees no key gives 0."""
    qb, kb, vb = bf16_inputs(q, k, v, scaled)
    H, L, d_k = qb.shape
    kb, vb = (kv_heads_for(a, H) for a in (kb, vb))
    numerics = bf16_kernel(variant).numerics
    step = numerics.softmax_keys[d_k]
    exp2_err = numerics.exp2_error_u * U
    visible = mask.visible(L, S=kb.shape[1])
    qk = qb @ kb.transpose(0, 2, 1)  # log2 units; products exact
    # ALiBi's bias in the scores' base 2: -m_h·log2 e·(p - j), worked out in fp32 (exp2f of the
    # slope, the product with log2 e and with p - j, the sum with the score: 8u covers all four)
    bias = mask.score_bias(H, L, S=kb.shape[1])
    bias = 0.0 if bias is None else np.where(visible, bias * LOG2E, 0.0)
    bias_err = 8 * U * (np.abs(qk) + np.abs(bias)) if mask.alibi else 0.0
    s = np.where(visible, qk + bias, -np.inf)
    m_final = s.max(axis=-1, keepdims=True)
    m_tile = _tile_running_max(s, step)
    with np.errstate(invalid="ignore"):
        x = np.where(visible, np.exp2(s - np.where(np.isfinite(m_tile), m_tile, 0.0)), 0.0)  # the kernel's p
        weight = np.where(visible, np.exp2(m_tile - m_final), 0.0)  # the alphas that later rescale it
        l_exact = np.exp2(np.where(visible, s - m_final, -np.inf)).sum(axis=-1, keepdims=True)  # (H, L, 1)
    # a row that sees no key (L > S, bottom-right) has l = 0 and output 0: 1 stands in for the divisions
    l_exact = np.where(l_exact > 0, l_exact, 1.0)
    p_tilde = round_bf16(x.astype(np.float32)).astype(np.float64) * weight
    abs_v = np.abs(vb)
    output = (p_tilde @ vb) / l_exact

    # S = Q·K^T accumulated in fp32 by the mma chain: tensor cores may truncate rather than
    # round their partial sums, so 2u per addition (gamma(2d) for d additions)
    delta_s = gamma(2 * d_k) * (np.abs(qb) @ np.abs(kb).transpose(0, 2, 1)) + bias_err
    delta_m = np.where(visible, delta_s, 0.0).max(axis=-1, keepdims=True)  # a max is one of the s
    span = np.where(visible, np.abs(s - np.where(np.isfinite(m_tile), m_tile, 0.0)), 0.0)
    # x = exp2(s - m_t): the argument is off by both scores' errors and the subtraction's
    # rounding; exp2 adds its own error. Only where that can move x across a bf16 rounding boundary
    # may the kernel's bf16(x) differ from the reference's, by one bf16 spacing.
    rel_x = math.log(2) * (delta_s + delta_m + U * span) + exp2_err
    flips, spacing = _near_rounding_boundary(x, 1.01 * rel_x)
    flip_term = (np.where(flips, spacing * weight, 0.0) @ abs_v) / l_exact

    # O = acc / l. Both are rescaled by the same alphas = exp2(m_old - m_new), each off by exp2's
    # error, a product and the subtraction (the jumps of m add up to at most 2·max|s|).
    tiles = np.ceil(visible.sum(axis=-1, keepdims=True) / step) + 1  # (T, 1): steps a row spans
    max_s = np.where(visible, np.abs(s), 0.0).max(axis=-1, keepdims=True)
    rescale = tiles * (exp2_err + U) + math.log(2) * U * 2 * max_s
    # acc's terms: bf16(x)·2^(m_t - m_f) with both maxima off by up to delta_m; then fp32 sums
    acc_err = 2 * math.log(2) * delta_m + rescale + gamma(step * tiles + tiles)
    # l's terms: exp2(s - m_f) off as x is (the maxima cancel), summed in fp32 per lane, then 2 shuffles
    sum_err = rel_x.max(axis=-1, keepdims=True) + rescale + gamma(step * tiles + tiles + 2)
    weighted_abs = (p_tilde @ abs_v) / l_exact  # sum p~|v| / l
    tol = flip_term + 1.01 * (acc_err * weighted_abs + (sum_err + 2 * U) * np.abs(output))
    if numerics.flushes_subnormals:
        # a weight x or an alpha below 2^-126 becomes 0: each of a row's keys (and each step's
        # rescale of what came before, at most every key's weight) loses at most 2^-126·|v|
        count = visible.sum(axis=-1, keepdims=True)
        tol = tol + 2.0**-126 * (2 * count) * abs_v.max(axis=-2, keepdims=True) / l_exact
    return output, tol + TINY
