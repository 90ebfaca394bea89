"""bench/torch_sdpa.py, PyTorch's SDPA as bench's peer: a torch without CUDA is a reason, the
backend the default ran is read from the ATen operator, a refusal is the warning behind it, and
(where torch imports) the pinned and default rows on the CPU."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

from andrea_cli.errors import AndreaError


def test_torch_without_cuda_is_a_reason_not_a_crash():
    from andrea_cli.bench.torch_sdpa import torch_reason

    torch = pytest.importorskip("torch", reason="torch is not installed: nothing to check")
    if torch.cuda.is_available():
        pytest.skip("this torch has CUDA")
    assert "no usable CUDA" in torch_reason("cuda") and torch_reason("cpu") is None


def test_the_default_backend_is_read_from_the_aten_operator_that_ran():
    from andrea_cli.bench.torch_sdpa import sdpa_backend_of

    generic = "aten::scaled_dot_product_attention"
    assert sdpa_backend_of([generic, "aten::_scaled_dot_product_flash_attention", "aten::empty"]) == "flash"
    assert sdpa_backend_of([generic, "aten::_scaled_dot_product_flash_attention_for_cpu"]) == "flash"
    assert sdpa_backend_of([generic, "aten::_scaled_dot_product_cudnn_attention"]) == "cudnn"
    assert sdpa_backend_of([generic, "aten::_scaled_dot_product_efficient_attention"]) == "efficient"
    assert sdpa_backend_of([generic, "aten::_scaled_dot_product_attention_math", "aten::bmm"]) == "math"
    assert sdpa_backend_of([generic, "aten::bmm"]) is None


def test_a_refusal_reason_is_the_warning_behind_no_available_kernel():
    from andrea_cli.bench.torch_sdpa import torch_environment, why_no_kernel

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("cuDNN attention kernel not used because:")
        warnings.warn("cuDNN attention requires a head dim that is a multiple of 8\nmore detail")
    assert why_no_kernel(RuntimeError("No available kernel. Aborting execution."), caught) == \
        "cuDNN attention requires a head dim that is a multiple of 8"
    assert why_no_kernel(RuntimeError("No available kernel. Aborting execution.\nx"), []) == \
        "No available kernel. Aborting execution."
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "torch", None)
        assert torch_environment("cuda") == {"reason": "torch is not importable (ModuleNotFoundError)"}


def test_torch_sdpa_pinned_and_default_on_the_cpu_where_torch_imports():
    """Where torch is installed: the flash backend runs on the CPU and matches the float64
    reference to bf16's precision, cuDNN's refusal is a one-line reason, the default names what it ran."""
    pytest.importorskip("torch", reason="torch is not installed: the rows without it are tested above")
    from andrea_cli import reference
    from andrea_cli.bench.torch_sdpa import torch_impl
    from andrea_cli.masks import MaskSpec

    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 48, 64), dtype=np.float32) for _ in range(3))
    want = reference.attention(q, k, v, MaskSpec("causal"))
    flash = torch_impl("cpu", "bf16", "flash")
    assert flash.name == "torch_sdpa_bf16_flash" and flash.chooser is None
    np.testing.assert_allclose(flash.to_host(flash.prepare(q, k, v, MaskSpec("causal"))()), want, atol=0.05)
    with pytest.raises(AndreaError, match=r"^SDPA's cudnn backend cannot run this on cpu: \S") as refused:
        torch_impl("cpu", "bf16", "cudnn").prepare(q, k, v, MaskSpec("causal"))
    assert "\n" not in str(refused.value)
    default = torch_impl("cpu", "bf16")
    run = default.prepare(q, k, v, MaskSpec("causal"))
    assert default.chooser(run) in ("flash", "math")
