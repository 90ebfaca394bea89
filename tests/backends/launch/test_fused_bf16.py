"""attention_fused_kernel4, kernel5 and kernel6 (backends/launch/fused_bf16.py) through the CPU
build's emulation of the tensor cores, on both block schedules, against the float64 reference with
their bf16 roundings: the bound tight enough that skipping P's rounding exceeds it, and each
kernel held to its own softmax steps."""

from __future__ import annotations

import numpy as np
import pytest

from andrea_cli.backends.launch.fused_bf16 import bf16_kernel, q_multiplier, shared_bytes_bf16
from andrea_cli.scale import resolve_scale
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import bf16_attention


@pytest.fixture
def kernels(cpu_each_schedule):
    """The kernel file's CPU build in each thread schedule (conftest's cpu_each_schedule)."""
    return cpu_each_schedule.device()


CASES = [(1, 64, MaskSpec("causal"), True), (63, 128, MaskSpec("none"), False),
         (65, 64, MaskSpec("window", 33), True), (130, 64, MaskSpec("causal"), True),
         (200, 128, MaskSpec("window", 64), True), (129, 64, MaskSpec("none"), True),
         (300, 128, MaskSpec("causal"), True), (257, 64, MaskSpec("window", 65), True)]
CASE_IDS = [f"T{T}-d{d}-{mask}-{'scaled' if scaled else 'unscaled'}" for T, d, mask, scaled in CASES]


def run_bf16_kernel(module, variant: int, q, k, v, mask: MaskSpec, scaled: bool) -> np.ndarray:
    H, T, d = q.shape
    kernel = bf16_kernel(variant)
    qb = bf16_attention.bf16_bits(q * np.float32(q_multiplier(resolve_scale(d, scaled))))
    kb, vb = bf16_attention.bf16_bits(k), bf16_attention.bf16_bits(v)
    out = np.full((H, T, d), np.nan, np.float32)
    module.get_function(kernel.entry(d))(
        (-(-T // kernel.block_rows(d)), 1, H), (kernel.block_threads(d),),
        (qb, kb, vb, out, np.int32(T), np.int32(T), np.int32(1), *mask.kernel_args(T, T, heads=H)),  # L = S, a K/V head each
        shared_mem=shared_bytes_bf16(d, variant))
    return out


@pytest.mark.parametrize("variant", [4, 5, 6])
@pytest.mark.parametrize("T, d, mask, scaled", CASES, ids=CASE_IDS)
def test_tensor_core_kernel_against_bf16_reference(kernels, variant, T, d, mask, scaled):
    rng = np.random.default_rng(T + d)
    q, k, v = (rng.standard_normal((2, T, d), dtype=np.float32) for _ in range(3))
    out = run_bf16_kernel(kernels, variant, q, k, v, mask, scaled)
    want, tol = bf16_attention.reference_and_tol(q, k, v, mask, scaled, variant)
    err = np.abs(out - want)
    assert (err <= tol).all(), f"worst error {err.max():.3g}, {(err / tol).max():.3g} of its bound"
    if scaled and T > 1:  # and the bound is tight: skipping P's bf16 rounding exceeds it somewhere
        # (unscaled scores reach 100+, where the fp32 score error bound alone is that large)
        assert (np.abs(reference_unrounded_p(q, k, v, mask, scaled) - want) > tol).any()


def reference_unrounded_p(q, k, v, mask, scaled):
    qb, kb, vb = bf16_attention.bf16_inputs(q, k, v, scaled)
    s = np.where(mask.visible(q.shape[1]), qb @ kb.transpose(0, 2, 1), -np.inf)
    p = np.exp2(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ vb


def test_kernel5_is_held_to_its_own_softmax_steps(kernels):
    # at d 128 kernel5's running max moves every 16 keys (its registers hold 16 keys of S), not
    # every 64 as kernel4's: the bound built on kernel4's steps rejects kernel5's output, so the
    # step each model assumes is checked, not assumed
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 200, 128), dtype=np.float32) for _ in range(3))
    mask = MaskSpec("window", 64)
    out = run_bf16_kernel(kernels, 5, q, k, v, mask, True)
    want5, tol5 = bf16_attention.reference_and_tol(q, k, v, mask, True, 5)
    want4, tol4 = bf16_attention.reference_and_tol(q, k, v, mask, True, 4)
    assert (np.abs(out - want5) <= tol5).all() and (np.abs(out - want4) > tol4).any()
