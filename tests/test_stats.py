"""Statistics against their definitions, computed the slow way."""

import numpy as np

from andrea_cli import stats


def test_jacobian_norm_matches_the_explicit_matrix():
    p = np.random.default_rng(0).dirichlet(np.ones(9), size=4)
    for row, norm in zip(p, stats.jacobian_norm(p)):
        J = np.diag(row) - np.outer(row, row)
        assert np.isclose(norm, np.linalg.norm(J, "fro"), rtol=1e-12)


def test_one_hot_rows_have_no_gradient_and_zero_entropy():
    p = np.eye(5)
    assert np.allclose(stats.jacobian_norm(p), 0)
    assert np.allclose(stats.row_entropy(p), 0)
    peak = stats.peakiness(p)
    assert peak.mean_max_weight == 1.0 and peak.share_rows_over_99 == 1.0 and peak.mean_effective_positions == 1.0


def test_uniform_rows_have_entropy_log_n():
    p = np.full((3, 8), 1 / 8)
    assert np.allclose(stats.row_entropy(p), np.log(8))
    assert np.isclose(stats.peakiness(p).mean_effective_positions, 8)


def test_magnitude_and_row_sums():
    s = np.array([[-3.0, 1.0], [2.0, 0.0]], dtype=np.float32)
    m = stats.magnitude(s)
    assert (m.mean_abs, m.max_abs) == (1.5, 3.0) and np.isclose(m.std, np.std(s))
    r = stats.row_sums(np.array([[0.5, 0.5], [0.25, 0.5]]))
    assert (r.min, r.max, r.max_abs_dev) == (0.75, 1.0, 0.25)
