"""The launch worker (cpu_runtime/worker.py): one process per kernel library runs its launches
on the caller's arrays at the caller's addresses; a failed launch ends only that worker and the
next launch starts a fresh one (tests/kernels/guard.cu)."""

import pathlib

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime.errors import CpuCrashError, CpuFaultError
from andrea_cli.backends.cpu_runtime.guarded_memory import guarded_copy, guarded_empty
from andrea_cli.backends.cpu_runtime.module import CpuModule

GUARD = pathlib.Path(__file__).parents[2] / "kernels" / "guard.cu"


@pytest.fixture
def module(monkeypatch):
    monkeypatch.delenv("ANDREA_CPU_ISOLATION", raising=False)
    return CpuModule(GUARD, timeout=0.5)


def copy_n(module, n: int, extra: int = 0) -> tuple[np.ndarray, np.ndarray]:
    x, y = guarded_copy(np.arange(n, dtype=np.float32)), guarded_empty(n)
    module.get_function("copy_n")((1,), (32,), (x, y, np.int32(n), np.int32(extra)))
    return x, y


def test_one_worker_runs_every_good_launch_on_arrays_made_after_it_started(module):
    assert module.isolation == "worker"
    for n in (5, 300, 70_000):  # each launch on arrays the worker has not seen yet
        x, y = copy_n(module, n)
        np.testing.assert_array_equal(y, x + 1)
    assert module._worker.started == 1


def test_a_pointer_stored_in_device_memory_means_the_same_in_the_worker(module):
    x = guarded_copy(np.linspace(-1, 1, 32, dtype=np.float32))
    table = guarded_copy(np.array([x.ctypes.data], dtype=np.uint64))
    y = guarded_empty(32)
    module.get_function("follow_pointer")((1,), (32,), (table, y))
    np.testing.assert_array_equal(y, x * 2)


def test_a_failed_launch_ends_its_worker_and_the_next_launch_gets_a_fresh_one(module):
    copy_n(module, 10)
    with pytest.raises(CpuFaultError, match=r"copy_n: thread \(10, 0, 0\) of block \(0, 0, 0\) read x"):
        copy_n(module, 10, extra=1)
    with pytest.raises(CpuCrashError, match=r"smash_heap: the launch's process died of SIGSEGV"):
        module.get_function("smash_heap")((1,), (32,), (guarded_empty(32),))
    x, y = copy_n(module, 10)
    np.testing.assert_array_equal(y, x + 1)
    assert module._worker.started == 3


def test_a_freed_array_leaves_the_worker_and_its_slot_serves_the_next(module):
    x, y = copy_n(module, 4096)
    address = y.ctypes.data
    del x, y
    x, y = copy_n(module, 1000)  # a smaller array in the slot y had: remapped, not stale
    assert y.ctypes.data != address
    np.testing.assert_array_equal(y, x + 1)


def test_forked_launches_remain_as_the_fallback(monkeypatch):
    monkeypatch.setenv("ANDREA_CPU_ISOLATION", "fork")
    module = CpuModule(GUARD, timeout=0.5)
    assert module._worker is None
    with pytest.raises(CpuCrashError, match=r"smash_heap: the launch's process died of SIGSEGV"):
        module.get_function("smash_heap")((1,), (32,), (guarded_empty(32),))
    x, y = copy_n(module, 10)
    np.testing.assert_array_equal(y, x + 1)


def test_an_array_the_garbage_collector_frees_inside_the_arenas_lock_cannot_deadlock():
    # A collection can start at any allocation, also inside the arena's locked sections, and run
    # a region's __del__ there: it must queue the release, not wait on the lock it is under.
    import threading

    from andrea_cli.backends.cpu_runtime.guarded_memory import GUARD_BYTES, arena

    region = guarded_empty(1024, np.float32).base  # the GuardedRegion behind the array
    data_at = region.base + GUARD_BYTES
    done = threading.Event()

    def collect_under_the_lock():
        with arena()._lock:
            region.__del__()
        done.set()

    threading.Thread(target=collect_under_the_lock, daemon=True).start()
    assert done.wait(10), "a region freed under the arena's lock waited on that lock"
    guarded_empty(16, np.float32)  # the next allocation releases the queued slot
    assert data_at not in arena().snapshot()[1]
