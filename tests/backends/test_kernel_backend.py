"""Every stage of the kernel file against the NumPy path, for each launch geometry, and the fused
and backward kernels end to end: on a GPU at full sizes (the `gpu` cases, skipped with the reason
where no GPU answers), and through the CPU build at small sizes, so that a broken import or a
wrong assertion here fails CI, not the first run on a GPU."""

import functools

import numpy as np
import pytest

from andrea_cli import reference, reference_backward
from andrea_cli.backends.launch.backward import lse_variants
from andrea_cli.backends.launch.fused import fused_variants
from andrea_cli.backends.launch.staged import ALL_PLANS
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec


def on_devices(cpu_shapes, gpu_shapes):
    """(device, T, d_k, d_v) parameters: the CPU build on the small shapes, a GPU on all of them."""
    return ([pytest.param("cpu", *shape, id="cpu-{}-{}-{}".format(*shape)) for shape in cpu_shapes]
            + [pytest.param("cuda", *shape, id="cuda-{}-{}-{}".format(*shape), marks=pytest.mark.gpu)
               for shape in gpu_shapes])


@functools.cache
def _cuda_backend():
    from andrea_cli.backends.cuda import CudaBackend

    return CudaBackend(packaged_kernel_path())


@pytest.fixture
def backend(device, cpu_backend):
    """The kernel file on the test's device: the CPU build (conftest's) or the GPU."""
    return cpu_backend() if device == "cpu" else _cuda_backend()


MASKS = [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 7)]


# on the CPU: one warp and a row past it, d_k no tile divides, d_v != d_k (verify's sweep holds the rest)
@pytest.mark.parametrize("plan", ALL_PLANS, ids=lambda p: p.describe())
@pytest.mark.parametrize("device,T,d_k,d_v", on_devices([(33, 80, 16)],
                                                        [(1, 1, 1), (33, 80, 16), (257, 64, 64), (1024, 64, 64)]))
@pytest.mark.parametrize("mask", MASKS, ids=str)
def test_stages_match_numpy(backend, plan, T, d_k, d_v, mask):
    rng = np.random.default_rng(T + d_k)
    q, k = (rng.standard_normal((2, T, d_k), dtype=np.float32) for _ in range(2))
    v = rng.standard_normal((2, T, d_v), dtype=np.float32)
    out = backend.attention(q, k, v, mask=mask, scaled=True, plan=plan)
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


# on the CPU: T = 1, odd widths (kernel1 only), and d = 64 past one 64-row block (kernel3 too)
@pytest.mark.parametrize("device,T,d_k,d_v", on_devices([(1, 1, 1), (33, 80, 48), (65, 64, 64)],
                                                        [(1, 1, 1), (33, 80, 48), (1024, 64, 64), (4097, 128, 128)]))
@pytest.mark.parametrize("mask", [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 100)], ids=str)
def test_fused_matches_numpy(backend, T, d_k, d_v, mask):
    rng = np.random.default_rng(T)
    q, k = (rng.standard_normal((2, T, d_k), dtype=np.float32) for _ in range(2))
    v = rng.standard_normal((2, T, d_v), dtype=np.float32)
    expected = reference.attention(q, k, v, mask)
    for variant in fused_variants(d_k, d_v):
        out = backend.attention_fused(q, k, v, mask=mask, scaled=True, variant=variant)
        np.testing.assert_allclose(out.output, expected, atol=5e-5, err_msg=f"attention_fused_kernel{variant}")


@pytest.mark.parametrize("device,T,d_k,d_v", on_devices([(1, 1, 1), (33, 80, 48)],
                                                        [(1, 1, 1), (33, 80, 48), (1024, 64, 64), (2049, 128, 128)]))
@pytest.mark.parametrize("mask", [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 100)], ids=str)
def test_backward_matches_numpy(backend, T, d_k, d_v, mask):
    """The staged and the fused backward against the float64 NumPy backward."""
    rng = np.random.default_rng(T + 1)
    q, k = (rng.standard_normal((2, T, d_k), dtype=np.float32) for _ in range(2))
    v, d_out = (rng.standard_normal((2, T, d_v), dtype=np.float32) for _ in range(2))
    exact = reference_backward.backward(q, k, v, d_out, mask)
    runs = [("staged", backend.attention_backward(q, k, v, d_out, mask=mask, scaled=True))]
    # the fused backward runs on the forwards that also write the logsumexp (kernel1 and kernel2)
    runs += [(f"fused{n}", backend.attention_backward_fused(q, k, v, d_out, mask=mask, scaled=True, variant=n))
             for n in lse_variants(d_k, d_v)]
    for label, got in runs:
        for name in ("dq", "dk", "dv"):
            expected = getattr(exact, name)
            np.testing.assert_allclose(getattr(got, name), expected, atol=1e-5 * max(1.0, np.abs(expected).max()),
                                       err_msg=f"{label} {name}")
    assert (runs[0][1].d_scores[:, ~mask.visible(T)] == 0).all()


# on the CPU: one 64-key tile and a partial one, d 64 (the tile-edge cases live in verify's family)
@pytest.mark.parametrize("device,T,d_k,d_v", on_devices([(97, 64, 64)],
                                                        [(1, 64, 64), (97, 128, 128), (1024, 64, 64), (2049, 128, 128)]))
@pytest.mark.parametrize("mask", [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 100)], ids=str)
def test_bf16_backward_matches_its_rounding_reference(backend, T, d_k, d_v, mask):
    """The tensor-core backward: the logsumexp and dQ, dK, dV against the float64 reference with
    the kernels' bf16 roundings (the bound the CPU build's emulation is held to), and within 3x of
    an emulated bf16 autograd's error against float64."""
    from andrea_cli.verification import bf16_backward

    rng = np.random.default_rng(T + d_k)
    q, k, v, d_out = (rng.standard_normal((2, T, d_k), dtype=np.float32) for _ in range(4))
    got = backend.attention_backward_fused(q, k, v, d_out, mask=mask, scaled=True, precision="bf16")
    lse, lse_tol = bf16_backward.lse_reference_and_tol(q, k, mask, True)
    assert (np.abs(got.lse - lse) <= lse_tol).all()
    want, tol = bf16_backward.reference_and_tol(q, k, v, d_out, got.output, got.lse, mask, True)
    exact = bf16_backward.exact_gradients(q, k, v, d_out, mask, True)
    autograd = bf16_backward.max_errors(bf16_backward.autograd_bf16(q, k, v, d_out, mask, True), exact)
    ours = bf16_backward.max_errors(got, exact)
    for name in ("dq", "dk", "dv"):
        err = np.abs(getattr(got, name) - getattr(want, name))
        assert (err <= getattr(tol, name)).all(), f"{name}: {(err / getattr(tol, name)).max():.3g} of its bound"
        assert ours[name] <= 3 * autograd[name], (name, ours[name], autograd[name])
