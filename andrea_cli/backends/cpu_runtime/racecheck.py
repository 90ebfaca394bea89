"""Racecheck's launches: the ThreadSanitizer build of a kernel file runs in a worker process.

A ThreadSanitizer library only loads into a process whose first library is libtsan, so the
worker is a Python started with LD_PRELOAD=libtsan.so (as sanitize.py does with libasan). It
keeps going after a report (halt_on_error=0) and writes reports to a log file of its own; after
each launch it sends back the new reports with what names an address there (the arrays it
passed, where shared memory was, the fences no atomic followed). The caller turns them into one
line per hazard (race_report) and raises CpuRaceError.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np

from andrea_cli.backends.cpu_runtime import race_report
from andrea_cli.backends.cpu_runtime.build import find_compiler
from andrea_cli.backends.cpu_runtime.errors import CpuRaceError, CpuSetupError
from andrea_cli.backends.cpu_runtime.sanitize import SanitizedLibrary, serve_launches

# halt_on_error=0 / exitcode=0: every race of a launch is reported and the worker lives on;
# io_sync=0: a kernel's printf must not order its threads; report_signal_unsafe=0: the runtime's
# fault handler is not the kernel's business.
_OPTIONS = "halt_on_error=0:exitcode=0:report_signal_unsafe=0:report_thread_leaks=0:io_sync=0:detect_deadlocks=0"


def libtsan() -> str:
    path = subprocess.run([find_compiler(), "-print-file-name=libtsan.so"], capture_output=True, text=True,
                          check=False).stdout.strip()
    if not os.path.isabs(path):
        raise CpuSetupError("the C++ compiler has no libtsan.so: install it (e.g. `apt-get install libtsan2`) or "
                          "run without racecheck")
    return path


class RacecheckLibrary(SanitizedLibrary):
    """NativeLibrary's interface, served by a ThreadSanitizer worker; `races` after each launch."""

    def __init__(self, path: pathlib.Path, kernel_names: list[str]):
        self._log_dir = tempfile.TemporaryDirectory(prefix="andrea-racecheck-")
        self.shared_symbols = static_shared_symbols(path)
        self.last: dict = {}
        super().__init__(path, kernel_names)

    WORKER = "andrea_cli.backends.cpu_runtime.racecheck"
    FLAVOUR = "racecheck"

    def _environment(self) -> dict[str, str]:
        # one BLAS thread: every thread of the worker widens ThreadSanitizer's vector clocks
        return dict(os.environ, LD_PRELOAD=libtsan(), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                    TSAN_OPTIONS=f"{_OPTIONS}:log_path={self._log_dir.name}/tsan")

    def _launched(self, reply: tuple) -> None:
        self.last = reply[3]  # the launch's reports and what names an address in them
        if self.last["report"]:
            # ThreadSanitizer reports one pair of lines once per process: a fresh worker for the
            # next launch, so that a race it repeats is reported again.
            SanitizedLibrary.close(self)  # the worker only: its log folder stays for the next

    def raise_races(self, kernel: str, params: list[str], block: tuple[int, int, int]) -> None:
        """CpuRaceError naming the last launch's races, if it had any; params: the kernel's
        parameter declarations ("const float* __restrict__ q")."""
        report = self.last.get("report", "")
        races = race_report.parse(report)
        if not races:
            return
        names = [(re.findall(r"[A-Za-z_]\w*", p) or [f"argument {i}"])[-1] for i, p in enumerate(params)]
        arrays = [(names[i] if i < len(names) else f"argument {i}", start, nbytes, itemsize)
                  for i, start, nbytes, itemsize in self.last["arrays"]]
        layout = self.last["layout"]
        memory = race_report.Memory(arrays, (layout[0], layout[1]), self.shared_symbols, (layout[2], layout[3]),
                                    self.last["fences"])
        lines = race_report.summarize(races, memory, block)
        # the first line holds the first race whole: it is what verify's FAIL line and a table cell show
        message = f"{kernel}: data race a GPU could expose: {lines[0]}" + "".join(f"\n  {line}" for line in lines[1:])
        raise CpuRaceError(message, kernel, lines, report)

    def close(self) -> None:
        super().close()
        if getattr(self, "_log_dir", None) is not None:
            self._log_dir.cleanup()
            self._log_dir = None

    __del__ = close


def static_shared_symbols(path: pathlib.Path) -> list[tuple[int, int, str]]:
    """(offset, size, name) of each static __shared__ variable: in the CPU build they are the
    library's thread-local variables, at their offset in its TLS block ("q_tile in scores_kernel1")."""
    out = subprocess.run(["readelf", "-sW", "-C", str(path)], capture_output=True, text=True, check=False).stdout
    symbols = []
    for line in out.splitlines():
        parts = line.split(None, 7)
        if len(parts) == 8 and parts[3] == "TLS" and parts[6] != "UND":
            name = parts[7]
            if name.startswith("andrea::"):
                continue  # the runtime's own
            owner, _, var = name.rpartition("::")
            function = re.sub(r"\(.*", "", owner).rsplit("::", 1)[-1] if owner else ""
            symbols.append((int(parts[1], 16), int(parts[2]), f"{var} in {function}" if function else var))
    return symbols


def _new_reports(log_prefix: str, offset: int) -> tuple[str, int]:
    path = f"{log_prefix}.{os.getpid()}"
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read()
    except FileNotFoundError:
        return "", offset
    return text.decode(errors="replace"), offset + len(text)


def _log_prefix() -> str:
    for option in os.environ.get("TSAN_OPTIONS", "").split(":"):
        if option.startswith("log_path="):
            return option[len("log_path="):]
    return ""


def _worker(path: str, names: list[str]) -> None:
    import ctypes

    prefix, offset = _log_prefix(), 0
    layout = (ctypes.c_ulonglong * 4)()
    fences = ctypes.create_string_buffer(8192)

    def setup(lib) -> None:
        lib.lib.andrea_racecheck.restype = ctypes.c_int

    def evidence(lib, args) -> dict:
        """ThreadSanitizer's new reports since the last launch, shared memory's layout and the
        barriers (fences) the launch passed: what race_report names a race with."""
        nonlocal offset
        report, offset = _new_reports(prefix, offset)
        lib.lib.andrea_racecheck(layout, fences, len(fences))
        fence_list = []
        for line in fences.value.decode(errors="replace").splitlines():
            parts = line.split(None, 6)
            if len(parts) == 7:
                v = tuple(int(x) for x in parts[:6])
                fence_list.append(((v[:3], v[3:]), parts[6].rsplit("/", 1)[-1]))
        return {"report": report, "layout": list(layout), "fences": fence_list,
                "arrays": [(i, a.ctypes.data, a.nbytes, a.itemsize) for i, a in enumerate(args)
                           if isinstance(a, np.ndarray)]}

    serve_launches(path, names, evidence, setup)

if __name__ == "__main__":
    _worker(sys.argv[1], [n for n in sys.argv[2].split(",") if n])
