"""The NumPy backward against central finite differences of L = sum(dO ∘ O): every entry of
dQ, dK and dV, for each mask, scaled and unscaled, on shapes small enough to perturb one by one."""

import numpy as np
import pytest

from andrea_cli import reference_backward as rb
from andrea_cli.masks import MaskSpec


@pytest.mark.parametrize("spec, scaled", [(MaskSpec("causal"), True), (MaskSpec("none"), False),
                                          (MaskSpec("window", 2), True), (MaskSpec("none"), True)])
def test_backward_matches_finite_differences(numeric_gradient, spec, scaled):
    rng = np.random.default_rng(3)
    H, T, d_k, d_v = 2, 5, 3, 4
    q, k = rng.standard_normal((2, H, T, d_k))
    v = rng.standard_normal((H, T, d_v))
    d_out = rng.standard_normal((H, T, d_v))
    grads = rb.backward(q, k, v, d_out, spec, scaled)
    for name, x in (("dq", q), ("dk", k), ("dv", v)):
        expected = numeric_gradient(lambda: rb.loss(q, k, v, d_out, spec, scaled), x)
        np.testing.assert_allclose(getattr(grads, name), expected, rtol=1e-6, atol=1e-8, err_msg=name)


def test_masked_positions_get_exactly_zero_and_rows_of_ds_sum_to_zero():
    rng = np.random.default_rng(4)
    q, k, v, d_out = (rng.standard_normal((1, 9, 4)) for _ in range(4))
    spec = MaskSpec("window", 3)
    grads = rb.backward(q, k, v, d_out, spec)
    hidden = ~spec.visible(9)
    assert (grads.d_scores[:, hidden] == 0).all()
    # softmax is invariant to adding a constant to a row, so each row of dS sums to 0
    np.testing.assert_allclose(grads.d_scores.sum(axis=-1), 0, atol=1e-12)


def test_first_row_under_a_causal_mask_passes_nothing_to_q():
    """Row 0 sees only key 0: its softmax is the constant 1, so no gradient reaches q[0]."""
    rng = np.random.default_rng(5)
    q, k, v, d_out = (rng.standard_normal((1, 6, 3)) for _ in range(4))
    grads = rb.backward(q, k, v, d_out, MaskSpec("causal"))
    assert np.abs(grads.dq[0, 0]).max() < 1e-15
