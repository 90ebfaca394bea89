"""The cases with a mask given as an array (--mask-file, attn_mask): random bool masks with rows
that see no key, additive biases shaped like ALiBi's (a slope per head times the distance), and
a float bias with -inf entries, on the staged kernels (mask_kernel2), each launch geometry's
softmax included (a fully -inf row: zeros in every variant), and on the fused fp32 kernels 1-3
(kernel3 at d 64 and 128: its bias tile at the edges of its 64-row blocks and 64-key tiles). The
arrays are drawn from a fixed seed, so a case is the same array every run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from andrea_cli.backends.launch.staged import KERNEL1_PLAN, LaunchPlan
from andrea_cli.masks import MaskSpec, mask_array
from andrea_cli.verification.case import Case

SEED = 33  # the arrays' own seed (the inputs take the case's)


def random_bool(L: int, S: int, keep: float, blind_rows: int, seed: int) -> MaskSpec:
    """True (take part) with probability `keep`; the first `blind_rows` rows see no key."""
    m = np.random.default_rng(seed).random((L, S)) < keep
    m[:blind_rows] = False
    return replace(mask_array(m, L, S), name=f"bool{blind_rows}")


def alibi(H: int, L: int, S: int, causal: bool) -> MaskSpec:
    """ALiBi's bias, -slope_h · (position of query i - key j), slopes 2^(-8 (h + 1) / H); with
    causal, -inf past the diagonal (the queries the last L positions).   (H, L, S)"""
    i = np.arange(L)[:, None] + (S - L)
    j = np.arange(S)[None, :]
    slopes = 2.0 ** (-8.0 * np.arange(1, H + 1) / H)
    bias = -slopes[:, None, None] * np.abs(i - j)[None]
    if causal:
        bias = np.where(j > i, -np.inf, bias)
    return replace(mask_array(bias.astype(np.float32), L, S, heads=H), name="alibi" + ("-causal" if causal else ""))


def float_bias(L: int, S: int, seed: int) -> MaskSpec:
    """N(0, 3) entries (biases as large as the scores), a fifth of them -inf."""
    rng = np.random.default_rng(seed)
    bias = rng.standard_normal((L, S)) * 3.0
    bias[rng.random((L, S)) < 0.2] = -np.inf
    return replace(mask_array(bias.astype(np.float32), L, S), name="bias")


def array_cases(quick: bool) -> list[Case]:
    staged = ("staged",)
    arrays = ("staged", "fused")  # the fused fp32 kernels read an array beside each K tile
    cases = [
        Case(33, 16, 16, random_bool(33, 33, 0.5, 3, SEED), True, families=arrays),
        Case(40, 64, 48, alibi(2, 40, 40, causal=True), True, families=arrays),
        Case(17, 16, 24, float_bias(17, 65, SEED), True, T_k=65, families=arrays),
        # d 64, kernel3 too: rows that see no key across 8-row blocks, a 64-row block's edge
        Case(70, 64, 64, random_bool(70, 70, 0.3, 9, SEED + 2), True, families=arrays),
        # kernel3_d128's bias tile at its edges: 65 rows (a second block of one row), 100 keys (a
        # tile of 36), a bias per head, two query heads per K/V head
        Case(65, 128, 128, alibi(4, 65, 100, causal=True), True, T_k=100, heads=4, kv_heads=2, families=arrays),
    ]
    if not quick:
        cases += [
            Case(65, 80, 64, alibi(2, 65, 65, causal=False), False, families=arrays),
            Case(17, 32, 32, random_bool(17, 40, 0.3, 2, SEED + 1), True, T_k=40, heads=4, kv_heads=2,
                 families=arrays),
            Case(1, 64, 64, float_bias(1, 97, SEED + 1), True, T_k=97, families=arrays),
            Case(130, 64, 64, alibi(2, 130, 130, causal=True), True, families=arrays),  # (H, L, S), 5 key tiles
            # more queries than keys, one K/V head for all four, one (L, S) bias: kernel3 over 3 blocks
            Case(129, 64, 64, float_bias(129, 70, SEED + 3), True, T_k=70, heads=4, kv_heads=1, families=arrays),
        ]
    # every softmax variant on a row that sees no key: kernel1 (one block per row), kernel2 (a warp)
    plans = [KERNEL1_PLAN, LaunchPlan(2, 2, softmax_rows_per_block=8)]  # of ALL_PLANS
    cases += [Case(33, 16, 16, random_bool(33, 33, 0.5, 3, SEED), True, plan, families=staged)
              for plan in (plans[:1] if quick else plans)]
    return cases
