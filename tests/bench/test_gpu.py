"""bench/gpu.py's rows driven through the CPU build (they only need a KernelDevice): their argument
lists, buffers and outputs checked here, not first on a GPU; fp32, bf16 and kernel4 beside kernel5."""

from __future__ import annotations

import numpy as np
import pytest

from andrea_cli.bench.sweep import CAUSAL, NO_MASK, swept_mask
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import bf16_attention


@pytest.mark.parametrize("mask", [CAUSAL, NO_MASK], ids=str)
def test_gpu_side_implementations_run_through_the_cpu_build(cpu_backend, mask):
    """The GPU bench's kernel launchers only need a KernelDevice: drive them with the CPU build,
    so their argument lists and buffer shapes are checked here, not first on a GPU."""
    from andrea_cli import reference
    from andrea_cli.bench.gpu import fused_gpu_impl, staged_gpu_impl

    from andrea_cli.backends.launch.staged import KERNEL1_PLAN

    backend = cpu_backend()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 40, 64), dtype=np.float32) for _ in range(3))  # d 64: every variant
    expected = reference.attention(q, k, v, mask)
    for impl in (staged_gpu_impl(backend), staged_gpu_impl(backend, plan=KERNEL1_PLAN), fused_gpu_impl(backend),
                 fused_gpu_impl(backend, variant=2), fused_gpu_impl(backend, variant=1)):
        out = impl.to_host(impl.prepare(q, k, v, mask)())
        np.testing.assert_allclose(out, expected, atol=1e-5, err_msg=impl.name)


@pytest.mark.parametrize("causal", [True, False])
def test_kernel4_beside_kernel5_on_the_gpu_side_runs_through_the_cpu_build(cpu_backend, causal):
    from andrea_cli.bench.gpu import fused_bf16_gpu_impl

    impl = fused_bf16_gpu_impl(cpu_backend(), variant=4)
    assert impl.name == "fused4_bf16" and impl.peer == "torch_sdpa_bf16" and impl.precision == "bf16"
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 70, 64), dtype=np.float32) for _ in range(3))
    want, tol = bf16_attention.reference_and_tol(q, k, v, swept_mask(causal), True, variant=4)
    assert (np.abs(impl.to_host(impl.prepare(q, k, v, swept_mask(causal))()) - want) <= tol).all()


@pytest.mark.parametrize("causal", [True, False])
def test_gpu_bench_bf16_launcher_runs_through_the_cpu_build(cpu_backend, causal):
    from andrea_cli.bench.gpu import fused_bf16_gpu_impl

    impl = fused_bf16_gpu_impl(cpu_backend())
    assert impl.precision == "bf16" and impl.peer == "torch_sdpa_bf16" and impl.only_d_ks == (64, 128)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 70, 64), dtype=np.float32) for _ in range(3))
    mask = MaskSpec("causal" if causal else "none")
    want, tol = bf16_attention.reference_and_tol(q, k, v, mask, True)
    assert (np.abs(impl.to_host(impl.prepare(q, k, v, mask)()) - want) <= tol).all()
