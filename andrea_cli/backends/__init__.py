"""Backends by name: `numpy` (the reference), `cuda` (the kernel file on a GPU), `cpu` (the
kernel file compiled for the CPU), and `auto`, which tries cuda, then cpu, then numpy: the
kernel file wherever it can run, the NumPy reference only where no C++ compiler is found."""

from __future__ import annotations

from pathlib import Path

from andrea_cli.backends.base import Availability, Backend
from andrea_cli.errors import AndreaError, SetupError

BACKEND_NAMES = ("auto", "cuda", "cpu", "numpy")


def check_timeout(timeout: float | None) -> None:
    """--timeout: the CPU build's watchdog limit, a positive number of seconds."""
    if timeout is not None and not timeout > 0:
        raise AndreaError(f"--timeout takes a positive number of seconds, got {timeout}: the longest one "
                          "block of a kernel launch may run on the CPU build")


def make_backend(name: str, kernel_path: Path, *, timeout: float | None = None, racecheck: bool = False) -> Backend:
    """Construct without checking availability (that may be slow: it asks the driver). timeout:
    the CPU build's watchdog limit per block (None: its default); a GPU kernel cannot be stopped.
    racecheck: the CPU build under ThreadSanitizer (only --backend cpu has it)."""
    if racecheck and name != "cpu":
        raise AndreaError(f"--racecheck runs the CPU build under ThreadSanitizer, not --backend {name}: pass "
                          "--backend cpu (on a GPU, compute-sanitizer --tool racecheck sees shared memory only)")
    if name == "numpy":
        from andrea_cli.backends.numpy_backend import NumpyBackend

        return NumpyBackend()
    if name == "cuda":
        from andrea_cli.backends.cuda import CudaBackend

        return CudaBackend(kernel_path)
    if name == "cpu":
        from andrea_cli.backends.cpu import CpuBackend

        return CpuBackend(kernel_path, timeout=timeout, racecheck=racecheck)
    raise AndreaError(f"--backend {name!r} is not a backend: use one of {', '.join(BACKEND_NAMES)}")


def require_available(backend: Backend, flag: str) -> Backend:
    """The backend, if it can run here; else the one-line error "{flag}: {reason}; {fix}"."""
    status: Availability = backend.available()
    if not status.ok:
        raise (SetupError if status.setup else AndreaError)(f"{flag}: {status.reason}; {status.fix}")
    return backend


AUTO_ORDER = ("cuda", "cpu", "numpy")
# What the auto notice calls each choice, so a learner knows the kernel file ran (or did not).
AUTO_LABELS = {"cpu": "cpu (the kernel file compiled for the CPU)", "numpy": "numpy (the float64 reference, "
               "not the kernel file)"}


def select_backend(name: str, kernel_path: Path, *, auto_order: tuple[str, ...] = AUTO_ORDER,
                   timeout: float | None = None, racecheck: bool = False) -> tuple[Backend, str | None]:
    """The backend to run on, and for `auto` a one-line notice saying which and why.

    An explicitly named backend that cannot run here is an error naming what to install."""
    if name != "auto" or racecheck:
        return require_available(make_backend(name, kernel_path, timeout=timeout, racecheck=racecheck),
                                 f"--backend {name}"), None
    reasons, fixes = [], {}
    for candidate in auto_order:
        backend = make_backend(candidate, kernel_path, timeout=timeout)
        status = backend.available()
        if status.ok:
            if not reasons:
                return backend, None
            notice = f"backend auto: {AUTO_LABELS.get(candidate, candidate)}, because {'; '.join(reasons)}."
            if candidate == "numpy" and "cpu" in fixes:
                notice += f" To run the kernel file itself: {fixes['cpu']}"
            elif candidate == "numpy":
                notice += " To run the kernel file itself without a GPU: --backend cpu"
            return backend, notice
        reasons.append(f"{candidate}: {status.reason}")
        fixes[candidate] = status.fix
    raise AndreaError(f"no backend can run here ({'; '.join(reasons)})")
