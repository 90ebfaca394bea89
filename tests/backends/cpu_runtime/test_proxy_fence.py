"""The async proxy in the CPU build: wgmma's tensor cores read shared memory through descriptors as
the async proxy, so a thread's generic writes reach them only through fence.proxy.async together
with a barrier (the writer's fence before the barrier or the reader's after it). racecheck names a
barrier without the fence (or a fence without the barrier, or a fence by some of the writers only)
as a race that says the fence is missing, in both schedules, and stays silent on the correct
orders; the SS form (A from shared memory through its own descriptor) computes A·B like NumPy
and is checked the same way. tests/kernels/proxy_fence.cu holds the kernels and their `how`s."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime.errors import CpuRaceError, CpuWarpError
from andrea_cli.backends.cpu_runtime.module import CpuModule
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.verification import bf16_attention

KERNELS = pathlib.Path(__file__).parents[2] / "kernels"
SCHEDULES = ("forward", "reverse")
REL = 2.0**-20  # products of bf16 are exact; one fp32 rounding of the sum


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("proxy") / "proxy_fence.cu"
    path.write_text(packaged_kernel_path().read_text() + "\n" + (KERNELS / "proxy_fence.cu").read_text())
    return path


@pytest.fixture(scope="module")
def plain(source):
    return {s: CpuModule(source, schedule=s) for s in SCHEDULES}


@pytest.fixture(scope="module")
def racecheck(source):
    return {s: CpuModule(source, racecheck=True, schedule=s) for s in SCHEDULES}


def run(module, ss: bool, trans_a: bool = False, how: int = 0, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = bf16_attention.bf16_bits(rng.standard_normal((64, 16)).astype(np.float32))
    b = bf16_attention.bf16_bits(rng.standard_normal((16, 64)).astype(np.float32))
    out = np.full((64, 64), np.nan, np.float32)
    module.get_function("proxy_wgmma")((1,), (128,), (a, b, out, np.int32(ss), np.int32(trans_a), np.int32(how)),
                                        shared_mem=4096)
    a64, b64 = (bf16_attention.bf16_to_float(m).astype(np.float64) for m in (a, b))
    tol = REL * (np.abs(a64) @ np.abs(b64))
    return bool((np.abs(out - a64 @ b64) <= tol).all())


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("ss, trans_a", [(False, False), (True, False), (True, True)],
                         ids=["rs", "ss-kmajor", "ss-mnmajor"])
def test_the_product_is_numpys(plain, schedule, ss, trans_a):
    assert run(plain[schedule], ss, trans_a)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_tile_changed_in_flight_is_reported(plain, schedule):
    with pytest.raises(CpuWarpError, match=r"A's shared memory changed while the wgmma was in flight"):
        run(plain[schedule], True, how=7)
    with pytest.raises(CpuWarpError, match=r"B's shared memory changed while the wgmma was in flight"):
        run(plain[schedule], False, how=7)


# --- racecheck ------------------------------------------------------------------------------------

FENCE_MISSING = (r"read after write on extern __shared__ memory byte \d+: thread \(\d+\) of block \(0\)'s tensor "
                 r"cores reads at proxy_fence\.cu:\d+, thread \(\d+\) of block \(0\) wrote at proxy_fence\.cu:\d+; "
                 r"the tensor cores \(async proxy\) see another proxy's write only through fence\.proxy\.async.*"
                 r"the fence is missing")


@pytest.mark.slow  # a ThreadSanitizer build of the kernel file
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("ss", [False, True], ids=["rs", "ss"])
@pytest.mark.parametrize("how", [0, 2, 6], ids=["writers-fence", "reader-fences", "barrier-before-refill"])
def test_fence_with_barrier_is_silent(racecheck, schedule, ss, how):
    assert run(racecheck[schedule], ss, how=how)


@pytest.mark.slow
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("ss", [False, True], ids=["rs", "ss"])
@pytest.mark.parametrize("how", [1, 3, 4], ids=["barrier-no-fence", "some-writers-fence", "fence-no-barrier"])
def test_a_missing_fence_is_named(racecheck, schedule, ss, how):
    with pytest.raises(CpuRaceError, match=FENCE_MISSING):
        run(racecheck[schedule], ss, how=how)


@pytest.mark.slow
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_refill_with_no_barrier_after_the_wait_is_named(racecheck, schedule):
    with pytest.raises(CpuRaceError, match=r"on extern __shared__ memory byte \d+: .*tensor cores"):
        run(racecheck[schedule], True, how=5)
