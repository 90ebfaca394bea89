"""bench/sweep.py: an implementation that runs out of memory, fails or would not fit costs its row
only, a lost device stops the sweep, each implementation is freed before the next prepares, and
the peak estimates cover what the implementations allocate."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

from andrea_cli.bench.cpu import numpy_impl, perf_counter_timer
from andrea_cli.bench.sweep import CAUSAL, NO_MASK, Impl, Side, run_sweep


def _side(**kw) -> Side:
    return Side("cpu", "test", perf_counter_timer, lambda: 2**40, **kw)


def test_the_sweep_skips_an_implementation_that_runs_out_of_memory_and_carries_on():
    def hungry(q, k, v, mask):
        raise MemoryError("Unable to allocate 149. GiB")

    released = []
    impls = [numpy_impl(), Impl("hungry", hungry), Impl("after", numpy_impl().prepare)]
    result = run_sweep(_side(release=lambda: released.append(1)), impls, Ts=(8, 16), d_ks=(4,), masks=(CAUSAL,),
                       warmup=0, repeats=1, baseline="numpy")
    by = {(m.impl, m.T): m for m in result.measurements}
    for T in (8, 16):
        assert by["hungry", T].median_ms is None
        assert by["hungry", T].skipped == "ran out of host memory: MemoryError"
        assert by["after", T].median_ms is not None and by["after", T].ratio is not None
    assert len(released) == 1 + 3 * 2  # before the sweep, then after every implementation at each size


def test_a_failing_implementation_costs_its_row_and_a_lost_device_stops_the_sweep():
    from andrea_cli.backends.base import DeviceFault, DeviceOutOfMemory
    from andrea_cli.errors import AndreaError

    def refused(q, k, v, mask):
        raise AndreaError("softmax_kernel1 launch: too many resources requested")

    def no_room(q, k, v, mask):
        raise DeviceOutOfMemory("allocating (1, 8, 8) on the GPU: the GPU ran out of memory")

    impls = [numpy_impl(), Impl("refused", refused), Impl("no_room", no_room), Impl("after", numpy_impl().prepare)]
    result = run_sweep(_side(), impls, Ts=(8,), d_ks=(4,), masks=(NO_MASK,), warmup=0, repeats=1, baseline="numpy")
    by = {m.impl: m for m in result.measurements}
    assert by["refused"].skipped == "failed: softmax_kernel1 launch: too many resources requested"
    assert by["no_room"].skipped.startswith("ran out of")  # a GPU out-of-memory is a MemoryError too
    assert by["after"].median_ms is not None

    def faulted(q, k, v, mask):
        raise DeviceFault("the GPU faulted")

    with pytest.raises(DeviceFault):
        run_sweep(_side(), [numpy_impl(), Impl("faulted", faulted)], Ts=(8,), d_ks=(4,), masks=(NO_MASK,),
                  warmup=0, repeats=1, baseline="numpy")


def test_an_implementation_too_big_for_the_budget_is_skipped_with_its_need_unprepared():
    def never(q, k, v, mask):
        raise AssertionError("prepared a size over the budget")

    impls = [numpy_impl(), Impl("big", never, peak_bytes=lambda H, T, d_k, mask: 2.0**50)]
    result = run_sweep(_side(), impls, Ts=(8,), d_ks=(4,), masks=(NO_MASK,), warmup=0, repeats=1, baseline="numpy")
    big = next(m for m in result.measurements if m.impl == "big")
    assert big.median_ms is None and big.skipped.startswith("needs about 1048576.0 GiB of host memory")


def test_the_previous_implementation_is_freed_before_the_next_prepares():
    alive = []

    def holding(q, k, v, mask):
        assert all(ref() is None for ref in alive), "the previous implementation's buffers are still alive"
        buffer = np.zeros(4)
        alive.append(weakref.ref(buffer))
        return lambda: (buffer, numpy_impl().prepare(q, k, v, mask)())[1]

    impls = [numpy_impl(), Impl("a", holding), Impl("b", holding)]
    run_sweep(_side(), impls, Ts=(8, 9), d_ks=(4,), masks=(NO_MASK,), warmup=0, repeats=1, baseline="numpy")
    assert len(alive) == 4


@pytest.mark.parametrize("mask", [CAUSAL, NO_MASK], ids=str)
def test_peak_estimates_cover_what_the_implementations_allocate(cpu_backend, mask):
    """NumPy reports its allocations to tracemalloc: the numpy path, and the staged GPU launcher
    driven through the CPU build, must stay within the bytes they declare for a run (once warm)."""
    import tracemalloc

    from andrea_cli.bench.gpu import staged_gpu_impl

    H, T, d_k = 2, 96, 8
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((H, T, d_k), dtype=np.float32) for _ in range(3))
    from andrea_cli.bench.backward import numpy_backward_impl, staged_backward_impl

    backend = cpu_backend()
    for impl in (numpy_impl(), staged_gpu_impl(backend), numpy_backward_impl(), staged_backward_impl(backend)):
        # One untraced run first: the first launch builds and caches the module and its launch
        # plans once per process, which no size of the sweep pays again (and which made this test
        # pass or fail by the order the suite ran in).
        impl.prepare(q, k, v, mask)()
        tracemalloc.start()
        impl.prepare(q, k, v, mask)()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak <= impl.peak_bytes(H, T, d_k, mask) + 64 * 1024, (impl.name, peak)  # + Python's own objects
        assert peak >= 0.5 * impl.peak_bytes(H, T, d_k, mask), (impl.name, peak)  # not wildly generous
