"""bench/backward.py's rows (numpy, staged, fused, the bf16 fused) through the CPU build: each
one's dQ against the float64 backward, the bf16 row's within 3x of a bf16 autograd's error."""

from __future__ import annotations

import numpy as np
import pytest

from andrea_cli.bench.sweep import CAUSAL, NO_MASK


@pytest.mark.parametrize("mask", [CAUSAL, NO_MASK], ids=str)
def test_gpu_side_backward_implementations_run_through_the_cpu_build(cpu_backend, mask):
    from andrea_cli.bench.sweep import sample_dq_error
    from andrea_cli.bench.backward import fused_backward_impl, numpy_backward_impl, staged_backward_impl

    backend = cpu_backend()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 40, 16), dtype=np.float32) for _ in range(3))
    for impl in (numpy_backward_impl(), staged_backward_impl(backend), fused_backward_impl(backend)):
        dq = impl.to_host(impl.prepare(q, k, v, mask)())
        assert sample_dq_error(q, k, v, dq, mask) < 1e-5, impl.name
        assert sample_dq_error(q, k, v, 1.01 * dq, mask) > 1e-3  # the check can fail


@pytest.mark.parametrize("d_k", [64, 128])
def test_the_bf16_backward_row_runs_through_the_cpu_build(d_k):
    """fused_bf16_backward (the GPU side's row) through the CPU build: its dQ within 3x of an
    emulated bf16 autograd's error against float64; and the fp32 fused row at the widths where the
    default forward (kernel3) has no logsumexp variant, so the row runs kernel2's."""
    from andrea_cli.backends.cpu import CpuBackend
    from andrea_cli.bench.backward import fused_backward_impl, fused_bf16_backward_impl
    from andrea_cli.bench.sweep import sample_dq_error, upstream_gradient
    from andrea_cli.kernel_file import packaged_kernel_path
    from andrea_cli.verification.bf16_backward import autograd_bf16, exact_gradients

    backend = CpuBackend(packaged_kernel_path())
    rng = np.random.default_rng(d_k)
    q, k, v = (rng.standard_normal((1, 70, d_k), dtype=np.float32) for _ in range(3))
    impl = fused_bf16_backward_impl(backend)
    assert (impl.precision, impl.only_d_ks, impl.peer) == ("bf16", (64, 128), "torch_sdpa_bf16_backward")
    dq = impl.to_host(impl.prepare(q, k, v, CAUSAL)())
    d_out, mask = upstream_gradient(q), CAUSAL
    exact = exact_gradients(q, k, v, d_out, mask, True).dq
    autograd = autograd_bf16(q, k, v, d_out, mask, True).dq
    assert 0 < np.abs(dq - exact).max() <= 3 * np.abs(autograd - exact).max()
    fp32 = fused_backward_impl(backend)
    assert sample_dq_error(q, k, v, fp32.to_host(fp32.prepare(q, k, v, CAUSAL)()), CAUSAL) < 1e-5
