"""A launch's return codes are the library's: cpu_runtime/fibers.h names and numbers them once
(ANDREA_RESULTS), andrea_results() exports them, and native.py reads them from each library. Every
result native.py tells apart comes back under its name from a kernel that causes it, and raise_for
turns it into its error (tests/kernels/basics.cu and guard.cu)."""

import pathlib
import re

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime import native
from andrea_cli.backends.cpu_runtime.build import RUNTIME_DIR, build, scan
from andrea_cli.backends.cpu_runtime.errors import (CpuAssertError, CpuCrashError, CpuDeadlockError, CpuFaultError,
                                                    CpuLaunchError, CpuRuntimeError, CpuTimeoutError, CpuWarpError)
from andrea_cli.backends.cpu_runtime.native import LaunchOptions, NativeLibrary, raise_for

KERNELS = pathlib.Path(__file__).parents[2] / "kernels"


@pytest.fixture(scope="module")
def libraries():
    return {name: NativeLibrary(build(scan(KERNELS / f"{name}.cu"), sanitize=False)) for name in ("basics", "guard")}


def test_every_result_native_py_names_is_the_librarys_as_fibers_h_numbers_it(libraries):
    header = (RUNTIME_DIR / "fibers.h").read_text()
    listed = re.search(r"#define ANDREA_RESULTS\(X\)(.*?)\n(?!\s)", header, re.S).group(1)
    numbers = {int(code): name for name, code in re.findall(r"X\((\w+), (\d+)\)", listed)}
    assert set(native.RESULTS) <= set(numbers.values())
    for lib in libraries.values():
        assert lib.results == numbers


def test_a_library_without_a_result_native_py_names_is_refused(libraries, monkeypatch):
    monkeypatch.setattr(native, "RESULTS", (*native.RESULTS, "LOST_IN_SPACE"))
    with pytest.raises(CpuRuntimeError, match=r"guard-.*\.so: the runtime header and cpu_runtime/native.py "
                                              r"disagree: the library has no result LOST_IN_SPACE"):
        NativeLibrary(build(scan(KERNELS / "guard.cu"), sanitize=False))


def _zeros(n=32):
    return np.zeros(n, np.float32)


# result -> (file, kernel, block, arguments, forked, the error raise_for turns it into). The
# results only a crash or a signal gives run in a forked child (LaunchOptions.isolate), the rest
# in this process.
CAUSES = {
    "OK": ("basics", "scale", 32, lambda: (_zeros(), _zeros(), np.int32(32), np.float32(2.0)), False, None),
    "BAD_LAUNCH": ("basics", "scale", 2048, lambda: (_zeros(), _zeros(), np.int32(32), np.float32(2.0)), False,
                   CpuLaunchError),
    "DEADLOCK": ("basics", "deadlock", 32, lambda: (_zeros(),), False, CpuDeadlockError),
    "WARP_MISUSE": ("basics", "shuffle_exited", 32, lambda: (np.zeros(32, np.int32), np.uint32(0xffffffff),
                                                             np.int32(2)), False, CpuWarpError),
    "ASSERT": ("guard", "fails_assert", 32, lambda: (np.ones(32, np.float32),), False, CpuAssertError),
    "FAULT": ("guard", "follow_pointer", 32, lambda: (np.zeros(1, np.uint64), _zeros()), True, CpuFaultError),
    "TIMEOUT": ("guard", "spin", 32, lambda: (_zeros(), np.int32(1)), True, CpuTimeoutError),
    "CRASHED": ("guard", "smash_heap", 32, lambda: (_zeros(),), True, CpuCrashError),
}


def test_every_result_native_py_names_has_a_cause_here():
    assert set(CAUSES) == set(native.RESULTS)


@pytest.mark.parametrize("result", list(CAUSES))
def test_each_result_comes_back_under_its_name(libraries, result):
    file, kernel, threads, args, forked, error = CAUSES[result]
    lib = libraries[file]
    signature = [kind.split(":")[0] for kind in lib.signature(kernel).split()]
    options = LaunchOptions(0.3, 0.3, 1.0, 1.0, int(forked), 1)
    got, info = lib.launch(kernel, signature, (1, 1, 1), (threads, 1, 1), args(), 0, False, options)
    assert got == result, info.message.decode(errors="replace")
    if error is None:
        raise_for(kernel, got, info)
        return
    with pytest.raises(error, match=rf"^{kernel}"):
        raise_for(kernel, got, info)


def _guard_launch(lib, kernel, args, options):
    signature = [kind.split(":")[0] for kind in lib.signature(kernel).split()]
    return lib.launch(kernel, signature, (1, 1, 1), (32, 1, 1), args, 0, False, options)


WORK = 20_000_000  # slow_with_barriers' busy work per round: about 0.03 s of CPU here


def test_the_watchdog_judges_progress_not_time(libraries):
    # 8 rounds of busy work, a barrier after each: several times the 0.1 s budget in all, but a
    # barrier well within it every time, so the default rule lets it run; a hard --timeout of the
    # same 0.1 s (the old rule for every block) stops it
    lib, y = libraries["guard"], np.zeros(32, np.float32)
    args = (y, np.int32(8), np.int64(WORK))
    got, info = _guard_launch(lib, "slow_with_barriers", args, LaunchOptions(0.0, 0.1, 1.0, 100.0, 0, 1))
    assert got == "OK", info.message.decode(errors="replace")
    assert (y == 1).all()
    got, info = _guard_launch(lib, "slow_with_barriers", args, LaunchOptions(0.1, 0.1, 1.0, 100.0, 0, 1))
    assert got == "TIMEOUT" and info.message.startswith(b"ran past its 0.1 s limit")


def test_an_endless_loop_is_still_named_by_the_progress_rule(libraries):
    # no barrier at all: named after the budget without progress, long before the ceiling
    lib, y = libraries["guard"], np.zeros(32, np.float32)
    got, info = _guard_launch(lib, "spin", (y, np.int32(1)), LaunchOptions(0.0, 0.2, 1.0, 100.0, 1, 1))
    assert got == "TIMEOUT" and info.message.startswith(
        b"made no progress for 0.2 s (no thread reached a barrier or its end) with 32 of 32 threads")
    # barriers forever: progress each time, so the ceiling (5 x 0.1 s) names it
    got, info = _guard_launch(lib, "spin_with_barriers", (y, np.int32(1)), LaunchOptions(0.0, 0.1, 1.0, 5.0, 1, 1))
    assert got == "TIMEOUT" and info.message.startswith(b"ran past its 0.5 s limit with 32 of 32 threads")
