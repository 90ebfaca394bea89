"""wgmma (Hopper's warpgroup mma, B read from shared memory through a descriptor), through the CPU
build's emulation, against NumPy: the no-swizzle K-major and MN-major canonical layouts, N 64 and
128, several k-steps advancing the descriptor, accumulation on and off, one and two warpgroups;
and the misuse a GPU leaves undefined, poisoned or refused: D read before wgmma_wait, B
overwritten while the wgmma is in flight, descriptors outside or misaligned in shared memory, a
block that is not whole warpgroups, a warp out of step with its warpgroup, and (racecheck) B
written without a barrier. scripts/tensor_core_check.py runs the same kernels natively."""

from __future__ import annotations

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime.errors import CpuRaceError, CpuWarpError
from andrea_cli.backends.cpu_runtime.module import CpuModule
from andrea_cli.verification import bf16_attention


@pytest.fixture(scope="module")
def modules(tensor_core_checks):
    """The check kernels (conftest.py), the same file and so the same CPU build as test_tensor_cores.py's."""
    return {schedule: CpuModule(tensor_core_checks, schedule=schedule) for schedule in ("forward", "reverse")}


@pytest.fixture(params=["forward", "reverse"])
def checks(request, modules):
    """The check kernels on the CPU build, each block's threads in order and last to first."""
    return modules[request.param]


# products of bf16 are exact; the sum is rounded to fp32 once per k-step (the emulation) or a few
# times more (a GPU's order inside one wgmma): a few ulp of the sum of the terms' magnitudes
REL = 2.0**-20


def kernel_name(n: int, mn_major: bool) -> str:
    return f"check_wgmma_n{n}_{'mnmajor' if mn_major else 'kmajor'}"


def wgmma_inputs(rows: int, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = bf16_attention.bf16_bits(rng.standard_normal((rows, k)).astype(np.float32))
    b = bf16_attention.bf16_bits(rng.standard_normal((k, n)).astype(np.float32))
    c = rng.standard_normal((rows, n)).astype(np.float32)
    return a, b, c


K = 64  # the check kernel's: 4 k-steps


def run_wgmma(module, n: int, mn_major: bool, flags: int, how: int = 0, warpgroups: int = 1,
              threads: int | None = None, seed: int = 0):
    a, b, c = wgmma_inputs(64 * warpgroups, K, n, seed)
    out = np.full((64 * warpgroups, n), -7.0, np.float32)
    module.get_function(kernel_name(n, mn_major))(
        (1,), (threads or 128 * warpgroups,), (a, b, c, out, np.int32(flags), np.int32(how)),
        shared_mem=K * n * 2)
    return a, b, c, out


def expected(a, b, c, flags: int) -> np.ndarray:
    a64, b64 = (bf16_attention.bf16_to_float(m).astype(np.float64) for m in (a, b))
    return a64 @ b64 + (c.astype(np.float64) if flags & 1 else 0.0)


def tolerance(a, b, c, flags: int) -> np.ndarray:
    a64, b64 = (np.abs(bf16_attention.bf16_to_float(m).astype(np.float64)) for m in (a, b))
    return REL * (a64 @ b64 + (np.abs(c) if flags & 1 else 0.0))


@pytest.mark.parametrize("n", [64, 128])
@pytest.mark.parametrize("mn_major", [False, True], ids=["k-major", "mn-major"])
@pytest.mark.parametrize("flags", [0, 1, 2, 4, 7], ids=["plain", "accumulate", "commit-each", "sbo128", "all"])
def test_wgmma_against_numpy(checks, n, mn_major, flags):
    a, b, c, out = run_wgmma(checks, n, mn_major, flags, seed=n + flags)
    want = expected(a, b, c, flags)
    err = np.abs(out - want)
    assert (err <= tolerance(a, b, c, flags)).all(), f"worst error {err.max():.3g}"


def test_two_warpgroups_each_their_rows(checks):
    a, b, c, out = run_wgmma(checks, 128, False, 1, warpgroups=2, seed=5)
    want = expected(a, b, c, 1)
    assert (np.abs(out - want) <= tolerance(a, b, c, 1)).all()


def test_d_read_before_the_wait_is_nan(checks):
    _, _, _, out = run_wgmma(checks, 64, False, 1, how=1)
    assert np.isnan(out).all()


def test_wait_group_1_leaves_the_newest_group_in_flight(checks):
    a, b, c, out = run_wgmma(checks, 128, True, 2, how=9)  # 4 groups, one per k-step, then a fifth
    assert (np.abs(out - expected(a, b, c, 0)) <= tolerance(a, b, c, 0)).all()


@pytest.mark.parametrize("how, match", [
    (2, "B's shared memory changed while the wgmma was in flight.*wgmma_wait, __syncthreads, overwrite"),
    (6, "B's shared memory changed while the wgmma was in flight.*fill, fence_proxy_async, __syncthreads"),
    (3, "past the launch's 8192 dynamic bytes"),
    (4, "must be a multiple of 16"),
    (5, "not in the launch's dynamic shared memory"),
    (8, r"its wgmma number 0 is at another instruction than the same wgmma of another warp of its "
        r"warpgroup \(warps 0-3\)"),
    # not decoded, so refused: read as no-swizzle, a swizzled tile would give other bytes silently
    (10, r"the B descriptor 0x4[0-9a-f]+ has layout type 1 \(128-byte swizzle\) and base offset 0: the CPU "
         r"build decodes only layout type 0 \(no swizzle\) with base offset 0"),
    (11, r"has layout type 0 \(no swizzle\) and base offset 1: the CPU build decodes only"),
])
def test_wgmma_misuse_is_reported(checks, how, match):
    with pytest.raises(CpuWarpError, match=match):
        run_wgmma(checks, 64, how % 2 == 0, 0, how=how)


def test_wgmma_needs_whole_warpgroups(checks):
    with pytest.raises(CpuWarpError, match="block has 96 threads.*multiple of 128"):
        run_wgmma(checks, 64, False, 0, threads=96)


def test_b_rewritten_unchanged_in_flight_passes_without_racecheck(checks):
    # the same bytes written again while the wgmmas read them: nothing changed for the wait to see
    a, b, c, out = run_wgmma(checks, 64, True, 0, how=7)
    assert (np.abs(out - expected(a, b, c, 0)) <= tolerance(a, b, c, 0)).all()


@pytest.fixture(scope="module")
def racecheck_checks(tensor_core_checks):
    return CpuModule(tensor_core_checks, racecheck=True)


@pytest.mark.slow  # a ThreadSanitizer build of the kernel file
def test_racecheck_counts_wgmma_b_as_shared_reads(racecheck_checks):
    run_wgmma(racecheck_checks, 64, False, 0)  # correct: silent
    with pytest.raises(CpuRaceError, match=r"write after read on extern __shared__ memory byte \d+: thread \(\d+\)"):
        run_wgmma(racecheck_checks, 64, False, 0, how=7)
