"""On a GPU: every stage of the kernel file against the NumPy path, for each launch geometry."""

import numpy as np
import pytest

from andrea_cli import reference
from andrea_cli.backends.launch.staged import ALL_PLANS
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("plan", ALL_PLANS, ids=lambda p: p.describe())
@pytest.mark.parametrize("T,d_k,d_v", [(1, 1, 1), (33, 80, 16), (257, 64, 64), (1024, 64, 64)])
@pytest.mark.parametrize("mask", [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 7)], ids=str)
def test_cuda_stages_match_numpy(plan, T, d_k, d_v, mask):
    from andrea_cli.backends.cuda import CudaBackend

    rng = np.random.default_rng(T + d_k)
    q, k = (rng.standard_normal((2, T, d_k), dtype=np.float32) for _ in range(2))
    v = rng.standard_normal((2, T, d_v), dtype=np.float32)
    out = CudaBackend(packaged_kernel_path(), plan).attention(q, k, v, mask=mask, scaled=True)
    s = reference.scores(q, k)
    np.testing.assert_allclose(out.scores, s, rtol=1e-4, atol=1e-4 * np.sqrt(d_k))
    np.testing.assert_array_equal(out.scaled, out.scores * np.float32(1 / np.sqrt(d_k)))
    hidden = ~mask.visible(T)
    assert np.isneginf(out.masked[:, hidden]).all()
    p = reference.softmax(out.masked.astype(np.float64))
    np.testing.assert_allclose(out.weights, p, atol=2e-6)
    assert (out.weights[:, hidden] == 0).all()
    np.testing.assert_allclose(out.output, reference.weighted_sum(out.weights.astype(np.float64), v), atol=1e-4)
    np.testing.assert_allclose(out.output, reference.attention(q, k, v, mask), atol=5e-4)


@pytest.mark.parametrize("T,d_k,d_v", [(1, 1, 1), (33, 80, 48), (1024, 64, 64), (4097, 128, 128)])
@pytest.mark.parametrize("mask", [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 100)], ids=str)
def test_cuda_fused_matches_numpy(T, d_k, d_v, mask):
    from andrea_cli.backends.cuda import CudaBackend
    from andrea_cli.backends.launch.fused import fused_variants

    rng = np.random.default_rng(T)
    q, k = (rng.standard_normal((2, T, d_k), dtype=np.float32) for _ in range(2))
    v = rng.standard_normal((2, T, d_v), dtype=np.float32)
    backend = CudaBackend(packaged_kernel_path())
    expected = reference.attention(q, k, v, mask)
    for variant in fused_variants(d_k, d_v):
        out = backend.attention_fused(q, k, v, mask=mask, scaled=True, variant=variant)
        np.testing.assert_allclose(out.output, expected, atol=5e-5, err_msg=f"attention_fused_kernel{variant}")


@pytest.mark.parametrize("T,d_k,d_v", [(1, 1, 1), (33, 80, 48), (1024, 64, 64), (2049, 128, 128)])
@pytest.mark.parametrize("mask", [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 100)], ids=str)
def test_cuda_backward_matches_numpy(T, d_k, d_v, mask):
    """The staged and the fused backward on the GPU against the float64 NumPy backward."""
    from andrea_cli import reference_backward
    from andrea_cli.backends.cuda import CudaBackend
    from andrea_cli.backends.launch.backward import lse_variants

    rng = np.random.default_rng(T + 1)
    q, k = (rng.standard_normal((2, T, d_k), dtype=np.float32) for _ in range(2))
    v, d_out = (rng.standard_normal((2, T, d_v), dtype=np.float32) for _ in range(2))
    exact = reference_backward.backward(q, k, v, d_out, mask)
    backend = CudaBackend(packaged_kernel_path())
    runs = [("staged", backend.attention_backward(q, k, v, d_out, mask=mask, scaled=True))]
    runs += [(f"fused{n}", backend.attention_backward_fused(q, k, v, d_out, mask=mask, scaled=True, variant=n))
             for n in lse_variants(d_k, d_v)]
    for label, got in runs:
        for name in ("dq", "dk", "dv"):
            expected = getattr(exact, name)
            np.testing.assert_allclose(getattr(got, name), expected, atol=1e-5 * max(1.0, np.abs(expected).max()),
                                       err_msg=f"{label} {name}")
    assert (runs[0][1].d_scores[:, ~mask.visible(T)] == 0).all()
