"""capabilities.kernels_take: the one place that says whether the kernels run a call, and why not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from andrea_cli.backends.launch.capabilities import AttentionCase, fused_takes, kernels_take

SQUARE = AttentionCase(L=64, S=64, d_k=64, d_v=64, q_heads=4, k_heads=4, v_heads=4, same_leading=True,
                       mask="causal", dtype="float32", scale=0.125)


def test_todays_kernels_take_one_length_one_head_count_causal_or_none_float32():
    assert kernels_take(SQUARE) is None
    assert kernels_take(replace(SQUARE, mask="none")) is None


def test_they_take_other_lengths_and_grouped_kv_heads():
    for change in (dict(S=80), dict(L=1), dict(L=100)):
        assert kernels_take(replace(SQUARE, **change)) is None
    grouped = replace(SQUARE, k_heads=1, v_heads=1, same_leading=False, same_batch=True)
    assert kernels_take(grouped) is None and kernels_take(replace(grouped, q_heads=3, k_heads=2, v_heads=2))


@pytest.mark.parametrize("change, why", [
    (dict(k_heads=1, v_heads=1, same_leading=False), "heads 4/1/1"),
    (dict(k_heads=2, v_heads=1, same_leading=False, same_batch=True), "heads 4/2/1"),
    (dict(same_leading=False), "same leading dims"),
    (dict(dtype="float64"), "float64 runs the float64 NumPy path"),
    (dict(scale=0.0), "a positive scale (got 0.0)"),
])
def test_each_thing_they_cannot_take_is_named(change, why):
    assert why in kernels_take(replace(SQUARE, **change))


def test_wide_heads_go_to_the_staged_kernels():
    assert fused_takes(SQUARE) and not fused_takes(replace(SQUARE, d_v=256))


def test_mask_arrays_go_to_the_fused_kernels():
    array = replace(SQUARE, mask="array")
    assert kernels_take(array) is None and fused_takes(array)  # kernels 1-3 read the array beside each K tile
    assert not fused_takes(replace(array, d_k=256))  # wide heads: mask_kernel2 reads it
