"""The NumPy path against plain loops, and the invariants the course states. (The masks
themselves: test_masks.py.)"""

import numpy as np
import pytest

from andrea_cli import reference
from andrea_cli.masks import MaskSpec

MASKS = [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 2)]


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("mask", MASKS, ids=str)
@pytest.mark.parametrize("scaled", [True, False])
@pytest.mark.parametrize("T,d_k,d_v", [(1, 1, 1), (2, 3, 5), (5, 4, 4), (7, 2, 3)])
def test_reference_matches_plain_loops(T, d_k, d_v, mask, scaled):
    q, k, v = rand((2, T, d_k), 1), rand((2, T, d_k), 2), rand((2, T, d_v), 3)
    fast = reference.attention(q, k, v, mask, scaled)
    slow = reference.attention_loops(q, k, v, mask, scaled)
    np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mask", MASKS, ids=str)
def test_softmax_invariants(mask):
    T = 33
    s = reference.mask(reference.scale(reference.scores(rand((1, T, 16), 4), rand((1, T, 16), 5)), 16), mask)
    p = reference.softmax(s)
    hidden = ~mask.visible(T)
    assert (p >= 0).all()
    assert (p[0][hidden] == 0).all()  # exactly 0, not small
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, atol=1e-12)


def test_first_row_of_causal_attention_sees_only_itself():
    p = reference.softmax(reference.mask(reference.scores(rand((1, 4, 8), 6), rand((1, 4, 8), 7)), MaskSpec("causal")))
    np.testing.assert_array_equal(p[0, 0], [1.0, 0, 0, 0])


def test_softmax_survives_huge_scores():
    # Unscaled scores at d_k = 4096 reach hundreds; exp(800) overflows without the max subtraction.
    p = reference.softmax(np.array([[[800.0, 799.0, -800.0]]]))
    assert np.isfinite(p).all()
    np.testing.assert_allclose(p[0, 0], [1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1)), 0.0])


def test_fully_masked_row_gives_zeros_not_nan():
    assert (reference.softmax(np.full((1, 1, 3), -np.inf)) == 0).all()


@pytest.mark.parametrize("mask", MASKS, ids=str)
@pytest.mark.parametrize("scaled", [True, False])
def test_attention_rows_are_rows_of_the_whole_attention(mask, scaled):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 37, 6), dtype=np.float32) for _ in range(3))
    rows = reference.sample_rows(37, 5)
    assert rows.tolist() == [0, 9, 18, 27, 36]
    raw, weights, out = reference.attention_rows(q[0], k[0], v[0], mask, scaled, rows)
    np.testing.assert_allclose(raw, reference.scores(q, k)[0, rows], rtol=1e-12)
    np.testing.assert_allclose(out, reference.attention(q, k, v, mask, scaled)[0, rows], rtol=1e-10, atol=1e-12)
    assert np.allclose(weights.sum(axis=-1), 1.0)


def test_mask_arrays_in_the_reference_match_the_loop_version():
    # a bool (L, S) mask with a row that sees no key, and a per-head (H, L, S) float bias
    from andrea_cli.masks import mask_array

    rng = np.random.default_rng(8)
    q = rng.standard_normal((2, 4, 3)).astype(np.float32)
    k, v = rng.standard_normal((1, 6, 3)).astype(np.float32), rng.standard_normal((1, 6, 2)).astype(np.float32)
    keep = rng.random((4, 6)) < 0.5
    keep[1] = False
    bias = rng.standard_normal((2, 4, 6)).astype(np.float32)
    bias[0, 2, :3] = -np.inf
    for spec in (mask_array(keep, 4, 6), mask_array(bias, 4, 6, heads=2)):
        fast = reference.attention(q, k, v, spec)
        np.testing.assert_allclose(fast, reference.attention_loops(q, k, v, spec), atol=1e-12)
    assert (reference.attention(q, k, v, mask_array(keep, 4, 6))[:, 1] == 0).all()
