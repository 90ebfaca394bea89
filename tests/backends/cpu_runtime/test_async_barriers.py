"""Hopper's barriers on the CPU build (cuda/cpu_runtime/async_barriers.h), through the check kernels
of tests/kernels/async_barriers.cu, in both schedules: named barriers (bar.sync / bar.arrive id, n)
between producer and consumer warps, a two-stage mbarrier ring with transaction counts (FlashAttention-
3's shape, the copies done by hand), setmaxnreg over two warpgroups; each misuse ends the launch with
one line naming the thread and the barrier, each deadlock names who waits on what and what is
missing. The results are compared with NumPy; a missing wait is a race racecheck names (slow tier)."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime import tensor_map
from andrea_cli.backends.cpu_runtime.errors import (CpuDeadlockError, CpuRaceError, CpuRuntimeError,
                                                CpuWarpError)
from andrea_cli.backends.cpu_runtime.guarded_memory import guarded_copy
from andrea_cli.backends.cpu_runtime.racecheck import static_shared_symbols
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


def bars_at(module) -> dict[str, int]:
    """Where the ring's mbarriers are in static shared memory ("shared+N" in messages), from the
    library's symbols: b0 (full[0]), b16 (empty[0]), b32 (bars[4], never initialised), b36."""
    (start,) = [off for off, _, name in static_shared_symbols(module.library_path)
                if name == "bars in mbarrier_ring_check"]
    return {f"b{k}": start + k for k in (0, 16, 32, 36)}


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
    (1, ["calls mbarrier.try_wait.parity.shared::cta.b64 on the mbarrier at shared+{b32} (bars in mbarrier_ring_check, byte 32), which no "
         "mbarrier.init initialised"]),
    (5, ["thread (0, 0, 0) calls mbarrier.init.shared::cta.b64 on the mbarrier at shared+{b36} (bars in mbarrier_ring_check, byte 36), which is not "
         "8-byte aligned"]),
    (6, ["thread (0, 0, 0)", "with count 0: the count is 1 .. 2^20 - 1"]),
    (9, ["thread (0, 0, 0) calls mbarrier.arrive.shared::cta.b64 on the mbarrier at shared+{b0} (bars in "
         "mbarrier_ring_check, byte 0) in phase 0, which has had its 1 arrivals already (pending tx bytes",
         "more arrivals than its count"]),  # (8 or 256 pending: in reverse the lanes complete first)
])
def test_mbarrier_misuse_is_one_line(checks, how, words):
    with pytest.raises(CpuWarpError) as caught:
        run_ring(checks, how)
    message = str(caught.value)
    assert "\n" not in message
    for w in words:
        assert w.format(**bars_at(checks)) in message, message


@pytest.mark.parametrize("how, words", [
    (2, ["waits on mbarrier at shared+{b0} (bars in mbarrier_ring_check, byte 0) phase 0 (parity 0), pending arrivals 0, pending tx bytes 4"]),
    (3, ["waits on mbarrier at shared+{b0} (bars in mbarrier_ring_check, byte 0) phase 0 (parity 0), never armed", "32 returned"]),
    (4, ["waits on mbarrier at shared+{b16} (bars in mbarrier_ring_check, byte 16) phase 0 (parity 0), pending arrivals 32, pending tx bytes 0"]),
])
def test_mbarrier_deadlock_names_thread_barrier_and_what_is_missing(checks, how, words):
    with pytest.raises(CpuDeadlockError) as caught:
        run_ring(checks, how)
    message = str(caught.value)
    assert "\n" not in message and "thread (" in message
    for w in words:
        assert w.format(**bars_at(checks)) in message, message


def test_mbarrier_deadlock_names_the_first_waiter_in_schedule_order(modules):
    with pytest.raises(CpuDeadlockError) as forward:
        run_ring(modules["forward"], 3)
    with pytest.raises(CpuDeadlockError) as reverse:
        run_ring(modules["reverse"], 3)
    assert f"thread (32, 0, 0) waits on mbarrier at shared+{bars_at(modules['forward'])['b0']} " in str(forward.value)
    assert f"thread (95, 0, 0) waits on mbarrier at shared+{bars_at(modules['reverse'])['b0']} " in str(reverse.value)


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


# --- TMA -------------------------------------------------------------------------------------------

def tma_expected(tensor: np.ndarray, c0: int, c1: int, box: tuple[int, int], swizzle: int) -> np.ndarray:
    """The box (rows c1.., columns c0..) as shared memory holds it: row-major bytes, each byte offset
    moved by the swizzle (computed here from the byte offsets, independently of the emulation)."""
    rows, cols = box
    raw = np.ascontiguousarray(tensor[c1:c1 + rows, c0:c0 + cols]).view(np.uint8).ravel()
    out = np.empty_like(raw)
    for off in range(raw.size):
        out[tensor_map.swizzled_offset(off, swizzle)] = raw[off]
    return out


def run_tma(module, tensor, box, swizzle, c0, c1, how=0, map_bytes=None, replace=True):
    """One tma_check launch; replace: the kernel sets the map's address to its own `src` argument
    (tensormap.replace), else the map's host address is used as encoded."""
    m = tensor_map.encode_tiled(tensor, box, swizzle) if map_bytes is None else map_bytes
    nbytes = box[0] * box[1] * tensor.itemsize
    out = np.zeros(nbytes, np.uint8)
    module.get_function("tma_check")((1,), (128,), (guarded_copy(m), tensor if replace else None, out, np.int32(c0), np.int32(c1),
                                                    np.int32(nbytes), np.int32(how)))
    return out


def tma_tensor(dtype=np.float32, shape=(40, 96)) -> np.ndarray:
    data = np.random.default_rng(3).standard_normal(shape).astype(np.float32).astype(dtype)
    return guarded_copy(data)  # its address is the launch worker's too


@pytest.mark.parametrize("swizzle, box", [(0, (8, 24)), (32, (8, 8)), (64, (16, 16)), (128, (8, 32)),
                                          (128, (16, 16))])
def test_tma_copies_the_box_with_its_swizzle(checks, swizzle, box):
    tensor = tma_tensor()
    c0, c1 = 16, 5
    out = run_tma(checks, tensor, box, swizzle, c0, c1)
    np.testing.assert_array_equal(out, tma_expected(tensor, c0, c1, box, swizzle))
    if swizzle:  # the swizzle moved bytes: the plain layout differs
        assert not np.array_equal(out, tma_expected(tensor, c0, c1, box, 0))


def test_tma_with_the_hosts_address_as_encoded(checks):
    # the launch worker sees the guarded tensor at the host's address: the map works unchanged
    tensor = tma_tensor()
    out = run_tma(checks, tensor, (8, 32), 128, 16, 5, replace=False)
    np.testing.assert_array_equal(out, tma_expected(tensor, 16, 5, (8, 32), 128))


def test_tma_of_bf16_rows_with_the_128_byte_swizzle(checks):
    tensor = guarded_copy(np.random.default_rng(4).integers(0, 1 << 16, (64, 128)).astype(np.uint16))
    out = run_tma(checks, tensor, (16, 64), 128, 64, 32)
    np.testing.assert_array_equal(out, tma_expected(tensor, 64, 32, (16, 64), 128))


def test_tma_box_outside_the_tensor_is_one_line(checks):
    tensor = tma_tensor()
    with pytest.raises(CpuWarpError) as caught:
        run_tma(checks, tensor, (8, 32), 128, 80, 0)
    message = str(caught.value)
    assert "\n" not in message and "thread (0, 0, 0)" in message
    assert "box (80..111, 0..7) of a (96, 40) tensor, whose mbarrier is at shared+" in message
    assert "(bar in tma_check, byte 0)" in message
    assert "the box leaves the tensor" in message


def test_tma_map_the_host_did_not_encode_is_refused(checks):
    with pytest.raises(CpuWarpError, match="a tensor map the host did not encode"):
        run_tma(checks, tma_tensor(), (8, 32), 0, 0, 0, map_bytes=np.zeros(128, np.uint8))


def test_tma_wait_on_a_phase_never_armed_is_a_deadlock(checks):
    with pytest.raises(CpuDeadlockError) as caught:
        run_tma(checks, tma_tensor(), (8, 32), 0, 0, 0, how=1)
    assert "waits on mbarrier at shared+" in str(caught.value)
    assert "phase 0 (parity 0), never armed" in str(caught.value)


def test_tma_without_expect_tx_leaves_the_count_below_zero(checks):
    with pytest.raises(CpuDeadlockError, match="pending arrivals 1, pending tx bytes -1024"):
        run_tma(checks, tma_tensor(), (8, 32), 0, 0, 0, how=2)


@pytest.mark.parametrize("box, swizzle, words", [
    ((8, 32), 64, "more than the 64-byte swizzle span"),
    ((8, 2), 0, "must be a multiple of 16"),
    ((8, 300), 0, "each box dim 1..256"),
    ((8, 8), 16, "swizzle 16"),
])
def test_encode_tiled_checks_as_the_driver_does(box, swizzle, words):
    with pytest.raises(CpuRuntimeError, match=re.escape(words)):
        tensor_map.encode_tiled(tma_tensor(), box, swizzle)


@pytest.mark.slow
def test_racecheck_is_silent_on_a_tma_load_waited_for(racecheck):
    tensor = tma_tensor()
    out = run_tma(racecheck, tensor, (8, 32), 128, 16, 5)
    np.testing.assert_array_equal(out, tma_expected(tensor, 16, 5, (8, 32), 128))


@pytest.mark.slow
def test_racecheck_names_a_read_of_a_tma_destination_before_its_wait(racecheck):
    with pytest.raises(CpuRaceError) as caught:
        run_tma(racecheck, tma_tensor(), (8, 32), 128, 16, 5, how=3)
    line = caught.value.hazards[0]
    assert "__shared__ tile" in line, line
    assert f"async_barriers.cu:{line_of('out[i] = tile[i];')}" in line, line


# --- the GPU side ----------------------------------------------------------------------------------

@pytest.mark.slow  # NVRTC and ptxas: a few seconds, no GPU needed
def test_the_wrappers_inline_ptx_assembles_for_sm_90a():
    """The same check kernels with their PTX bodies (bar, mbarrier, cp.async.bulk.tensor,
    tensormap.replace, setmaxnreg) through NVRTC and ptxas for Hopper: the PTX is what ptxas
    accepts, which the CPU build alone cannot say."""
    pytest.importorskip("cupy", reason="cupy is not installed (it brings the NVRTC bindings)")
    from andrea_cli.backends.toolchain.nvrtc import compile_kernel_file

    kernels = {r.kernel for r in compile_kernel_file(CHECKS, "sm_90a")}
    assert kernels == {"named_barrier_check", "mbarrier_ring_check", "setmaxnreg_check", "tma_check"}
