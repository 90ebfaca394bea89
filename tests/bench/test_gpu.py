"""bench/gpu.py's rows driven through the CPU build (they only need a KernelDevice): their argument
lists, buffers and outputs checked here, not first on a GPU; fp32, bf16 and every tensor-core kernel."""

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
@pytest.mark.parametrize("variant", [4, 5, 6, 7])
def test_every_tensor_core_kernels_gpu_row_runs_through_the_cpu_build(cpu_backend, variant, causal):
    """fused4_bf16 .. fused7_bf16 (kernel7 with the K/V tensor maps its launcher encodes) agree
    with the bf16 reference of their own arithmetic, and name the kernel they ran."""
    from andrea_cli.bench.gpu import fused_bf16_gpu_impl

    impl = fused_bf16_gpu_impl(cpu_backend(), variant=variant)
    assert impl.name == f"fused{variant}_bf16" and impl.peer == "torch_sdpa_bf16" and impl.precision == "bf16"
    assert impl.cannot_run == ""  # the CPU build runs every kernel
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 70, 64), dtype=np.float32) for _ in range(3))
    want, tol = bf16_attention.reference_and_tol(q, k, v, swept_mask(causal), True, variant=variant)
    run = impl.prepare(q, k, v, swept_mask(causal))
    assert (np.abs(impl.to_host(run()) - want) <= tol).all()
    assert run.kernels["fused"] == f"attention_fused_kernel{variant}_d64"


class DeviceOf:
    """A backend whose device reports a compute capability and runs nothing: the rows' set-up alone."""

    def __init__(self, cc):
        self.dev = type("Dev", (), {"compute_capability": cc, "to_host": staticmethod(np.asarray)})()

    def device(self):
        return self.dev


def test_the_gpu_side_has_a_row_per_tensor_core_kernel_and_skips_those_the_gpu_cannot_run():
    """Every kernel's row on every GPU, newest first; the one the default runs only on request; a
    kernel for sm_90a alone skipped on an A100 with the reason, before anything is launched."""
    from andrea_cli.bench.gpu import bf16_variant_impls
    from andrea_cli.bench.sweep import why_not

    hopper = bf16_variant_impls(DeviceOf((9, 0)))
    assert [i.name for i in hopper] == ["fused7_bf16", "fused6_bf16", "fused5_bf16", "fused4_bf16"]
    assert [i.on_request for i in hopper] == [False, True, False, False]  # kernel6 is fused_bf16 there
    assert all(i.cannot_run == "" for i in hopper)
    ampere = {i.name: i for i in bf16_variant_impls(DeviceOf((8, 0)))}
    assert ampere["fused5_bf16"].on_request and not ampere["fused4_bf16"].on_request
    for name in ("fused6_bf16", "fused7_bf16"):
        why = why_not(ampere[name], 12, 1024, 64, CAUSAL, 1e12, "GPU memory")
        assert why.startswith(f"attention_fused_kernel{name[5]} uses Hopper's wgmma") and "8.0" in why
    assert why_not(ampere["fused4_bf16"], 12, 1024, 64, CAUSAL, 1e12, "GPU memory") == ""


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
