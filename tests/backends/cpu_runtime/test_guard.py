"""A wrong kernel never takes andrea down: an access one element past an array or past dynamic
shared memory faults at that access and names the array, a loop that never ends is stopped by the
watchdog, and an abort or a stray write over the heap ends only the launch (tests/kernels/guard.cu)."""

import pathlib
import re

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime.errors import CpuAssertError, CpuCrashError, CpuFaultError, CpuTimeoutError
from andrea_cli.backends.cpu_runtime.guarded_memory import guarded_empty, region_of
from andrea_cli.backends.cpu_runtime.module import CpuModule
from andrea_cli.kernel_file import packaged_kernel_path

GUARD = pathlib.Path(__file__).parents[2] / "kernels" / "guard.cu"


@pytest.fixture(scope="module")
def guard():
    return CpuModule(GUARD, timeout=0.5)


def test_arrays_end_at_a_guard_page():
    a = guarded_empty((3, 5))
    region = region_of(a)
    assert region is not None and (a.ctypes.data + a.nbytes) % 4096 == 0
    assert region_of(a.reshape(15)) is region and region_of(a[1:]) is None  # a part of one is not one


@pytest.mark.parametrize("extra", [0, 1])
def test_one_element_past_the_end_faults_and_names_the_array(guard, extra):
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    if extra == 0:
        guard.get_function("copy_n")((1,), (32,), (x, y, np.int32(10), np.int32(0)))
        np.testing.assert_array_equal(y, x + 1)  # copied back from the guarded shared mapping
        return
    # thread 10 reads x[10]: the first wrong byte faults, before any write past y
    with pytest.raises(CpuFaultError, match=r"copy_n: thread \(10, 0, 0\) of block \(0, 0, 0\) read x "
                                            r"\(argument 0\) at element 10, past its end \(it has 10\)"):
        guard.get_function("copy_n")((1,), (32,), (x, y, np.int32(10), np.int32(1)))


def test_a_read_past_the_end_and_a_write_before_the_start(guard):
    x, y = np.zeros(7, np.float32), np.zeros(1, np.float32)
    with pytest.raises(CpuFaultError, match=r"read x \(argument 0\) at element 7, past its end"):
        guard.get_function("read_past")((1,), (1,), (x, y, np.int32(7)))
    # far past (the issue's `+ 1000000`): still inside the array's reserved guard, still named
    with pytest.raises(CpuFaultError, match=r"read x \(argument 0\) at element 1000007, past its end"):
        guard.get_function("read_past")((1,), (1,), (x, y, np.int32(1_000_007)))
    with pytest.raises(CpuFaultError, match=r"wrote 4 bytes before the start of y \(argument 0\)"):
        guard.get_function("write_before")((1,), (1,), (np.zeros(5, np.float32),))


@pytest.mark.parametrize("n", [8, 7])  # 32 bytes end at the guard page; 28 leave a 4-byte canary
def test_one_element_past_dynamic_shared_memory(guard, n):
    kernel = guard.get_function("shared_past")
    y = np.zeros(n, np.float32)
    kernel((1,), (32,), (y, np.int32(n), np.int32(0)), shared_mem=4 * n)
    assert (y == 1).all()
    when = r"thread \(\d+, 0, 0\)" if n % 4 == 0 else "a thread"  # the canary: found at the block's end
    with pytest.raises(CpuFaultError, match=rf"shared_past: {when} wrote byte {4 * n} of dynamic shared memory, "
                                            rf"which has {4 * n} bytes"):
        kernel((1,), (32,), (y, np.int32(n), np.int32(1)), shared_mem=4 * n)


@pytest.mark.parametrize("kernel", ["spin", "spin_with_barriers"])
def test_the_watchdog_stops_an_endless_loop(guard, kernel):
    y = np.zeros(64, np.float32)
    guard.get_function(kernel)((2,), (64,), (y, np.int32(0)))  # honest: ends at once
    with pytest.raises(CpuTimeoutError, match=rf"{kernel}: block \(0, 0, 0\) ran past its 0.5 s limit with 64 of "
                                              r"64 threads still running.*an endless loop\?"):
        guard.get_function(kernel)((2,), (64,), (y, np.int32(1)))


def test_an_abort_or_a_write_over_the_heap_ends_only_the_launch(guard):
    y = np.ones(32, np.float32)
    with pytest.raises(CpuAssertError, match=r"fails_assert: device assert failed at guard.cu:\d+ .*thread \(0, 0, 0\)"):
        guard.get_function("fails_assert")((1,), (32,), (y,))
    with pytest.raises(CpuCrashError, match=r"smash_heap: the launch's process died of SIGSEGV"):
        guard.get_function("smash_heap")((1,), (32,), (y,))
    x, out = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    guard.get_function("copy_n")((1,), (32,), (x, out, np.int32(5), np.int32(0)))  # this process is intact
    np.testing.assert_array_equal(out, x + 1)


@pytest.mark.slow  # the whole quick sweep on a broken copy (its own CPU build): ~25 s of CPU
def test_verify_reports_a_heap_smashing_case_and_passes_the_next(tmp_path, run_main):
    # The case: a stray write corrupts the process and a later case crashes it. Here the
    # broken case fails on its own line and every case after it still runs and passes.
    source = packaged_kernel_path().read_text()
    store = "out[idx] = in[idx] * scale;"  # scale_kernel1: every staged plan runs it
    assert store in source
    broken = tmp_path / "microgpt_cuda.cu"
    broken.write_text(source.replace(store, store + " if (n % 49 == 0 && n <= 4 * 49)"  # T = 7: n = 49 x heads
                                         " memset((void*)&andrea::sched(), 0x41, sizeof(andrea::sched()));", 1))
    code, out, err = run_main("verify", "--backend", "cpu", "--quick", "--kernel", broken)
    assert code == 1
    lines = [re.sub(r"^\[\d+/\d+\] ", "", line) for line in err.splitlines()]  # less the "[n/total] " count
    failed = [line for line in lines if line.startswith("FAIL")]
    passed = [line for line in lines if line.startswith("ok")]
    assert failed and all("T=7 " in line for line in failed), failed
    assert len(passed) > 20 and any(line.startswith("ok   T=33") for line in passed)
    assert "died of SIGSEGV" in " ".join(out.split())  # Rich wraps the lines
    # attend on the same copy: one line naming the kernel, exit 1 (the kernel is wrong, not the input)
    code, out, err = run_main("attend", "--backend", "cpu", "-T", 7, "--d-k", 3, "--kernel", broken)
    assert code == 1 and err.startswith("error: scale_kernel1: the launch's process died of SIGSEGV")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
