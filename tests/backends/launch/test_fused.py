"""The fused kernels (attention_fused_kernel1 and kernel2, backends/launch/fused.py) against the
reference through the CPU build of the kernel file, the widths they refuse and the shared memory
they take, and their NVRTC resource usage. (`attend --fused`: tests/runs/test_fused.py.)"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from andrea_cli import reference
from andrea_cli.backends.launch.fused import FUSED_MAX_D, check_fused_shape, shared_bytes
from andrea_cli.errors import AndreaError
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import course_scale, resolve_scale

os.environ.setdefault("COLUMNS", "120")


def _qkv(H, T, d_k, d_v, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((H, T, d_k), dtype=np.float32),
            rng.standard_normal((H, T, d_k), dtype=np.float32),
            rng.standard_normal((H, T, d_v), dtype=np.float32))


MASKS = [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 5)]
# (T, d_k, d_v, variant): kernel2 needs widths divisible by 4, kernel1 takes any.
SHAPES = [(T, d_k, d_v, 1) for T in (1, 2, 17, 33, 65) for d_k, d_v in ((1, 1), (3, 5), (64, 64), (80, 48))]
SHAPES += [(T, d_k, d_v, 2) for T in (1, 17, 33, 65) for d_k, d_v in ((4, 8), (64, 64), (80, 48), (128, 128))]


@pytest.mark.parametrize("T,d_k,d_v,variant", SHAPES)
def test_fused_matches_reference(cpu_device, T, d_k, d_v, variant):
    from andrea_cli.backends.launch.fused import run_fused

    q, k, v = _qkv(2, T, d_k, d_v, seed=T * 1000 + d_k)
    for mask in MASKS:
        for scaled in (True, False):
            got = run_fused(cpu_device, q, k, v, mask=mask, scale=resolve_scale(d_k, scaled), variant=variant)
            want = reference.attention(q, k, v, mask, scaled)
            assert got.output.shape == (2, T, d_v) and got.output.dtype == np.float32
            np.testing.assert_allclose(got.output, want, rtol=1e-4, atol=1e-5,
                                       err_msg=f"T={T} d_k={d_k} d_v={d_v} mask={mask} scaled={scaled}")
            assert set(got.timings_ms) == {"fused", "total"}


def test_fused_reverse_schedule_and_widest_head(cpu_backend):
    """Threads run in reverse order: a missing __syncthreads would show. d = 128 is the limit."""
    from andrea_cli.backends.launch.fused import run_fused

    dev = cpu_backend("reverse").device()
    q, k, v = _qkv(1, 40, FUSED_MAX_D, FUSED_MAX_D, seed=7)
    for mask, variant in ((m, n) for m in MASKS for n in (1, 2)):
        got = run_fused(dev, q, k, v, mask=mask, scale=course_scale(FUSED_MAX_D), variant=variant)
        np.testing.assert_allclose(got.output, reference.attention(q, k, v, mask), rtol=1e-4, atol=1e-5)


def test_fused_refuses_wide_heads_and_sizes_shared_memory():
    with pytest.raises(AndreaError, match="d_k <= 128"):
        check_fused_shape(129, 64)
    with pytest.raises(AndreaError, match="d_v <= 128"):
        check_fused_shape(64, 129)
    assert shared_bytes(64, 64) == 4 * (8 * 64 + 32 * 65 + 32 * 64)
    assert shared_bytes(128, 128, variant=2) == 4 * (8 * 128 + 32 * 132 + 32 * 128)
    assert shared_bytes(128, 128, variant=2) <= 48 * 1024  # no opt-in attribute needed on any GPU


@pytest.mark.slow  # NVRTC compiles the whole kernel file
def test_fused_compiles_through_nvrtc_without_spills():
    pytest.importorskip("cupy", reason="cupy (for its NVRTC bindings) is not installed")
    from cupy.cuda import nvrtc

    source = packaged_kernel_path().read_text()
    for arch in ("sm_80", "sm_90"):
        try:
            prog = nvrtc.createProgram(source, "microgpt_cuda.cu", [], [])
            nvrtc.compileProgram(prog, [f"--gpu-architecture={arch}", "--ptxas-options=-v", "-std=c++17"])
        except Exception as exc:  # a missing libnvrtc raises at first use
            if "NVRTC_ERROR_COMPILATION" in str(exc):
                raise AssertionError(nvrtc.getProgramLog(prog)) from None
            pytest.skip(f"NVRTC is not usable here: {exc}")
        log = nvrtc.getProgramLog(prog)
        for name in ("attention_fused_kernel1", "attention_fused_kernel2"):
            fused = log[log.index(f"'{name}'"):]
            fused = fused[:fused.find("Compile time")]
            assert "0 bytes spill stores, 0 bytes spill loads" in fused, fused
            # 256 threads x 80 registers: still 3 blocks (24 warps) per SM
            assert int(re.search(r"Used (\d+) registers", fused).group(1)) <= 80, fused
