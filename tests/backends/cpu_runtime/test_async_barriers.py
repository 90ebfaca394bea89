"""Hopper's barriers on the CPU build (cuda/cpu_runtime/async_barriers.h), through the check kernels
of tests/kernels/async_barriers.cu, in both schedules: named barriers (bar.sync / bar.arrive id, n)
between producer and consumer warps, a two-stage mbarrier ring with transaction counts (FlashAttention-
3's shape, the copies done by hand), setmaxnreg over two warpgroups; each misuse ends the launch with
one line naming the thread and the barrier, each deadlock names who waits on what and what is
missing. The results are compared with NumPy; a missing wait is a race racecheck names (slow tier)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime.errors import CpuDeadlockError, CpuRaceError, CpuWarpError
from andrea_cli.backends.cpu_runtime.module import CpuModule

CHECKS = pathlib.Path(__file__).parents[2] / "kernels" / "async_barriers.cu"


@pytest.fixture(scope="module")
def modules():
    return {schedule: CpuModule(CHECKS, schedule=schedule) for schedule in ("forward", "reverse")}


@pytest.fixture(params=["forward", "reverse"])
def checks(request, modules):
    """The check kernels, each block's threads run in order and last to first."""
    return modules[request.param]


# --- named barriers ------------------------------------------------------------------------------

def run_named(module, how: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(how).standard_normal(128).astype(np.float32)
    out = np.full(128, -7.0, np.float32)
    module.get_function("named_barrier_check")((1,), (128,), (x, out, np.int32(how)))
    return x, out


@pytest.mark.parametrize("how", [0, 6], ids=["named", "bar0-is-syncthreads"])
def test_named_barriers_pass_data_both_ways(checks, how):
    x, out = run_named(checks, how)
    np.testing.assert_array_equal(out, np.concatenate([2 * x[:64] + 1, 3 * x[64:]]))


@pytest.mark.parametrize("how, words", [
    (1, ["barrier 1's round waits for", "every arrival of a round must name the same count"]),
    (2, ["(1, 100): the thread count must be a multiple of 32"]),
    (3, ["with barrier id 16: ids are 0..15"]),
    (4, ["(1, 160)", "from 32 to the block's 128 threads"]),
])
def test_named_barrier_misuse_is_one_line(checks, how, words):
    with pytest.raises(CpuWarpError) as caught:
        run_named(checks, how)
    message = str(caught.value)
    assert "\n" not in message and "thread (" in message
    for w in words:
        assert w in message, message


def test_named_barrier_nobody_arrives_at_is_a_deadlock_naming_it(checks):
    with pytest.raises(CpuDeadlockError) as caught:
        run_named(checks, 5)
    message = str(caught.value)
    # the consumers wait at barrier 1, which the producers never reach; the producers then wait at 2
    assert "waits at named barrier 1 (bar.sync, 128 threads): 64 of 128 arrived" in message
    assert "waits at named barrier 2" in message and "128 of 128 threads wait at named barriers" in message


# --- mbarrier --------------------------------------------------------------------------------------

TILES = 5  # stage 0 is used three times: its phases 0, 1, 2 and parities 0, 1, 0


def run_ring(module, how: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(10 + how).standard_normal(TILES * 64).astype(np.float32)
    out = np.full_like(x, -7.0)
    module.get_function("mbarrier_ring_check")((1,), (96,), (x, out, np.int32(TILES), np.int32(how)))
    return x, out


@pytest.mark.parametrize("how", [0, 7], ids=["try-wait", "test-wait-spin"])
def test_mbarrier_ring_delivers_every_tile(checks, how):
    x, out = run_ring(checks, how)
    np.testing.assert_array_equal(out, 3 * x)


def test_mbarrier_a_skipped_wait_passes_a_plain_run(checks):
    # the producer runs ahead of the consumers in both schedules, so skipping the wait of tile 1
    # still gives the right numbers here: racecheck is the check that names it (below)
    x, out = run_ring(checks, 8)
    np.testing.assert_array_equal(out, 3 * x)


@pytest.mark.parametrize("how, words", [
    (1, ["calls mbarrier.try_wait.parity.shared::cta.b64 on the mbarrier at shared+32, which no "
         "mbarrier.init initialised"]),
    (5, ["thread (0, 0, 0) calls mbarrier.init.shared::cta.b64 on the mbarrier at shared+36, which is not "
         "8-byte aligned"]),
    (6, ["thread (0, 0, 0)", "with count 0: the count is 1 .. 2^20 - 1"]),
])
def test_mbarrier_misuse_is_one_line(checks, how, words):
    with pytest.raises(CpuWarpError) as caught:
        run_ring(checks, how)
    message = str(caught.value)
    assert "\n" not in message
    for w in words:
        assert w in message, message


@pytest.mark.parametrize("how, words", [
    (2, ["waits on mbarrier at shared+0 phase 0 (parity 0), pending arrivals 0, pending tx bytes 4"]),
    (3, ["waits on mbarrier at shared+0 phase 0 (parity 0), never armed", "32 returned"]),
    (4, ["waits on mbarrier at shared+16 phase 0 (parity 0), pending arrivals 32, pending tx bytes 0"]),
])
def test_mbarrier_deadlock_names_thread_barrier_and_what_is_missing(checks, how, words):
    with pytest.raises(CpuDeadlockError) as caught:
        run_ring(checks, how)
    message = str(caught.value)
    assert "\n" not in message and "thread (" in message
    for w in words:
        assert w in message, message


def test_mbarrier_deadlock_names_the_first_waiter_in_schedule_order(modules):
    with pytest.raises(CpuDeadlockError) as forward:
        run_ring(modules["forward"], 3)
    with pytest.raises(CpuDeadlockError) as reverse:
        run_ring(modules["reverse"], 3)
    assert "thread (32, 0, 0) waits on mbarrier at shared+0" in str(forward.value)
    assert "thread (95, 0, 0) waits on mbarrier at shared+0" in str(reverse.value)


# --- setmaxnreg ----------------------------------------------------------------------------------

def run_setmaxnreg(module, how: int, threads: int = 256) -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(threads, dtype=np.float32)
    out = np.zeros(threads, np.float32)
    module.get_function("setmaxnreg_check")((1,), (threads,), (x, out, np.int32(how)))
    return x, out


def test_setmaxnreg_over_two_warpgroups_is_accepted(checks):
    x, out = run_setmaxnreg(checks, 0)
    np.testing.assert_array_equal(out, x + 1)


@pytest.mark.parametrize("how, threads, words", [
    (1, 256, ["setmaxnreg.dec.sync.aligned.u32 30: the register count must be a multiple of 8 in 24..256"]),
    (2, 256, ["setmaxnreg.dec.sync.aligned.u32 48 while warpgroup 0's other threads wait at setmaxnreg 40"]),
    (3, 96, ["in a block of 96 threads: setmaxnreg is for whole warpgroups"]),
])
def test_setmaxnreg_misuse_is_one_line(checks, how, threads, words):
    with pytest.raises(CpuWarpError) as caught:
        run_setmaxnreg(checks, how, threads)
    for w in words:
        assert w in str(caught.value)


def test_setmaxnreg_a_warp_skips_is_a_deadlock(checks):
    with pytest.raises(CpuDeadlockError) as caught:
        run_setmaxnreg(checks, 4)
    assert "for warpgroup 0: 96 of its 128 threads arrived" in str(caught.value)


# --- racecheck -------------------------------------------------------------------------------------

def line_of(text: str) -> int:
    """The line of async_barriers.cu that holds `text` (once)."""
    (line,) = [i + 1 for i, t in enumerate(CHECKS.read_text().splitlines()) if text in t]
    return line


@pytest.fixture(scope="module")
def racecheck():
    return CpuModule(CHECKS, racecheck=True)


@pytest.mark.slow
@pytest.mark.parametrize("how", [0, 6])
def test_racecheck_is_silent_on_named_barriers(racecheck, how):
    x, out = run_named(racecheck, how)
    np.testing.assert_array_equal(out, np.concatenate([2 * x[:64] + 1, 3 * x[64:]]))


@pytest.mark.slow
@pytest.mark.parametrize("how", [7, 8], ids=["no-wait", "not-a-participant"])
def test_racecheck_names_a_missing_named_barrier(racecheck, how):
    with pytest.raises(CpuRaceError) as caught:
        run_named(racecheck, how)
    line = caught.value.hazards[0]
    write = line_of("buf[t] = 2.0f * x[t];") if how == 7 else line_of("buf[64 + t] = 5.0f;")
    read = line_of("out[t - 64] = buf[t - 64] + 1.0f;") if how == 7 else line_of("else out[64 + t - 64]")
    assert line.startswith("read after write on __shared__ buf"), line
    assert f"async_barriers.cu:{write}" in line and f"async_barriers.cu:{read}" in line, line


@pytest.mark.slow
@pytest.mark.parametrize("how", [0, 7])
def test_racecheck_is_silent_on_the_mbarrier_ring(racecheck, how):
    x, out = run_ring(racecheck, how)
    np.testing.assert_array_equal(out, 3 * x)


@pytest.mark.slow
def test_racecheck_names_a_missing_mbarrier_wait(racecheck):
    with pytest.raises(CpuRaceError) as caught:
        run_ring(racecheck, 8)
    line = caught.value.hazards[0]
    assert line.startswith("read after write on __shared__ stage"), line
    assert f"async_barriers.cu:{line_of('out[tile * 64 + i] = 3.0f * stage[s][i];')}" in line, line
    assert f"async_barriers.cu:{line_of('stage[s][lane] = x[tile * 64 + lane];')}" in line or \
        f"async_barriers.cu:{line_of('stage[s][32 + lane] = x[tile * 64 + 32 + lane];')}" in line, line
