"""Sanitized launches: the ASan/UBSan build of a kernel file runs in a worker process.

An AddressSanitizer library only loads into a process whose first library is libasan, so the
worker is a Python started with LD_PRELOAD=libasan.so; numpy's allocations then go through
ASan's malloc and an access past an array is caught. Arguments travel by pickle and arrays come
back to be copied into the caller's; a report kills the worker and is raised as CpuSanitizerError.
"""

from __future__ import annotations

import os
import pathlib
import pickle
import re
import subprocess
import sys
import tempfile

import numpy as np

from andrea_cli.backends.cpu_runtime.build import find_compiler
from andrea_cli.backends.cpu_runtime.errors import CpuCompileError, CpuRuntimeError, CpuSanitizerError, CpuSetupError
from andrea_cli.backends.cpu_runtime.native import LaunchInfo, LaunchOptions, NativeLibrary
from andrea_cli.backends.cpu_runtime.worker_python import worker_command

_ENV = {
    # Python itself leaks by design; a report must end the worker so it cannot be missed.
    "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=0:allocator_may_return_null=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}


class SanitizedLibrary:
    """NativeLibrary's interface, served by a worker process (restarted after a report)."""

    WORKER = "andrea_cli.backends.cpu_runtime.sanitize"  # the module the worker runs as __main__
    FLAVOUR = "sanitized"  # the worker's name in messages

    def __init__(self, path: pathlib.Path, kernel_names: list[str]):
        self.path, self.kernel_names = path, kernel_names
        self._proc: subprocess.Popen | None = None
        self._signatures: dict[str, str] = {}
        self._start()

    def _environment(self) -> dict[str, str]:
        """The worker's environment: the sanitizer's runtime preloaded, its options."""
        libasan = subprocess.run([find_compiler(), "-print-file-name=libasan.so"], capture_output=True,
                                 text=True, check=False).stdout.strip()
        if not os.path.isabs(libasan):
            raise CpuSetupError("the C++ compiler has no libasan.so: install it (e.g. `apt-get install "
                                "libasan8`) or run without sanitize")
        return dict(os.environ, LD_PRELOAD=libasan, **_ENV)

    def _start(self) -> None:
        env = self._environment()
        self._stderr = tempfile.TemporaryFile()
        # the standard library first, never a shadow of it in site-packages: worker_python.py
        self._proc = subprocess.Popen(worker_command(self.WORKER, str(self.path), ",".join(self.kernel_names)),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        try:
            self._signatures = self._receive()
        except CpuSanitizerError:
            raise
        except CpuRuntimeError:  # it ended before its first word: it never ran a kernel
            why = ([line.strip() for line in self._report.splitlines() if line.strip()] or ["no output"])[-1]
            raise CpuSetupError(f"the {self.FLAVOUR} worker process could not start ({why}): this Python "
                                f"cannot run `{sys.executable} -I -m {self.WORKER}`; reinstall andrea in a "
                                "clean virtual environment (pip install .)") from None
        if "__error__" in self._signatures:  # the library did not load there
            message = self._signatures["__error__"]
            self.close()
            raise CpuCompileError(message, message)

    def _receive(self):
        try:
            return pickle.load(self._proc.stdout)
        except (EOFError, pickle.UnpicklingError, OSError):
            self._proc.wait()
            self._stderr.seek(0)
            report = self._report = self._stderr.read().decode(errors="replace")
            self._proc = None
            raise _report_error(report, f"the {self.FLAVOUR} worker process ended") from None

    def signature(self, name: str) -> str:
        return self._signatures[name]

    def launch(self, name, signature, grid, block, args, shared_mem, reverse, options):
        if self._proc is None:
            self._start()
        try:
            pickle.dump((name, signature, grid, block, args, shared_mem, reverse, bytes(options)), self._proc.stdin)
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # the worker is gone: _receive raises with what it left on stderr
        reply = self._receive()
        result, info_bytes, arrays = reply[:3]
        for arg, array in zip(args, arrays):
            if array is not None:
                np.copyto(arg, array)
        self._launched(reply)
        return result, LaunchInfo.from_buffer_copy(info_bytes)

    def _launched(self, reply: tuple) -> None:
        """What a worker of another flavour sends after (result, info, arrays): nothing here."""

    def close(self) -> None:
        """End the worker: it leaves its loop when its input closes."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()

    __del__ = close


def _report_error(report: str, fallback: str) -> CpuRuntimeError:
    """One line: what the sanitizer found and where, e.g. "AddressSanitizer: heap-buffer-overflow,
    READ of size 4 in out_of_bounds at .../basics.cu:104"; the whole report rides along."""
    lines = [line.strip() for line in report.splitlines()]
    ubsan = next((line for line in lines if "runtime error:" in line), None)
    if ubsan:
        return CpuSanitizerError(f"UndefinedBehaviorSanitizer: {ubsan}", report)
    head = next((line for line in lines if "ERROR: AddressSanitizer:" in line), None)
    if head is None:
        return CpuRuntimeError(f"{fallback}: {' | '.join(lines[-5:]) or 'no output'}")
    what = re.search(r"AddressSanitizer: ([\w-]+)", head).group(1)
    access = next((m.group(0) for line in lines if (m := re.match(r"(READ|WRITE) of size \d+", line))), "")
    # the innermost frame in a .cu file: a __device__ function inlined into its kernel has its own
    # frame, and a C++ name carries its parameter list ("attention_fused2(float const*, ...)")
    frame = next((m for line in lines
                  if (m := re.match(r"#\d+ 0x[0-9a-f]+ in ([\w:~]+).*? (\S+\.cuh?:\d+)(?::\d+)?$", line))), None)
    where = f" in {frame.group(1)} at {frame.group(2)}" if frame else ""
    return CpuSanitizerError(f"AddressSanitizer: {what}{', ' + access if access else ''}{where}", report)


def serve_launches(path: str, names: list[str], evidence=None, setup=None) -> None:
    """The worker process's loop (this module's and racecheck's): load the instrumented library,
    send the kernels' signatures, then run each launch the parent pickles to stdin and pickle back
    (its result by name, info, the arrays) and, with evidence(lib, args), what it returns after them."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything the kernels print goes to stderr, not into the pickle stream
    try:
        lib = NativeLibrary(pathlib.Path(path))
    except CpuRuntimeError as exc:  # said in the parent, as a load in this process would say it
        pickle.dump({"__error__": str(exc)}, out)
        out.flush()
        return
    if setup is not None:
        setup(lib)
    pickle.dump({n: lib.signature(n) for n in names}, out)
    out.flush()
    while True:
        try:
            name, signature, grid, block, args, shared_mem, reverse, options = pickle.load(sys.stdin.buffer)
        except EOFError:
            return
        # A fresh copy: its buffer comes from the instrumented malloc, exactly as large as the array.
        args = tuple(np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args)
        result, info = lib.launch(name, signature, grid, block, args, shared_mem, reverse,
                                  LaunchOptions.from_buffer_copy(options))
        arrays = [a if isinstance(a, np.ndarray) else None for a in args]
        reply = (result, bytes(info), arrays)
        pickle.dump(reply if evidence is None else (*reply, evidence(lib, args)), out)
        out.flush()


def _worker(path: str, names: list[str]) -> None:
    serve_launches(path, names)


if __name__ == "__main__":
    _worker(sys.argv[1], [n for n in sys.argv[2].split(",") if n])
