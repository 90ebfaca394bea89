"""Choosing what `andrea verify` runs: the backend(s), and the sweep or the one case asked for.
Like every command: run_verify_command(options, progress) -> the report."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from andrea_cli.backends import check_timeout, make_backend, require_available
from andrea_cli.backends.launch.catalogue import resolve_kernel_path
from andrea_cli.commands.options import VerifyOptions
from andrea_cli.defaults import head_sizes
from andrea_cli.errors import AndreaError
from andrea_cli.inputs import check_fits_in_memory, check_sizes
from andrea_cli.masks import parse_mask
from andrea_cli.verification import H_VERIFY, Case, CaseResult, VerifyReport, run_verify, sweep
from andrea_cli.verification.race_sweep import race_cases


SANITIZER_BUILDS = {"sanitize": "AddressSanitizer and UndefinedBehaviorSanitizer", "racecheck": "ThreadSanitizer"}


def verify_backends(name: str, kernel_path: Path, *, sanitize: bool = False, racecheck: bool = False,
                    timeout: float | None = None, schedules: tuple[str, ...] = ("forward", "reverse"),
                    progress: Callable[[str], None] | None = None) -> list[tuple[str, object]]:
    """The kernels are what is verified, so the NumPy path is no backend here. On the CPU build,
    every case runs once per schedule: threads in order, and in reverse to expose a missing barrier.
    sanitize: the CPU build with AddressSanitizer and UndefinedBehaviorSanitizer; racecheck: with
    ThreadSanitizer told CUDA's memory model (a data race is the case's failure)."""
    if name == "numpy":
        raise AndreaError("--backend numpy is the reference itself: verify the kernels with --backend cpu or cuda")
    if sanitize and racecheck:
        raise AndreaError("--sanitize and --racecheck are two builds (AddressSanitizer and ThreadSanitizer cannot "
                          "share a process): pass one of them")
    if sanitize and name == "cuda":
        raise AndreaError("--sanitize runs the CPU build under AddressSanitizer: pass --backend cpu (on a GPU, "
                          "run compute-sanitizer on the process instead)")
    if racecheck and name == "cuda":
        raise AndreaError("--racecheck runs the CPU build under ThreadSanitizer: pass --backend cpu (on a GPU, "
                          "compute-sanitizer --tool racecheck sees shared memory only)")
    if name == "auto":
        name = "cpu" if sanitize or racecheck or not make_backend("cuda", kernel_path).available().ok else "cuda"
    if name == "cuda":
        backend = require_available(make_backend("cuda", kernel_path), "--backend cuda")
        backend.device()  # compile now: a compile error is the user's to fix (exit 2), not a failed case
        return [("gpu", backend)]
    if name == "cpu":
        from andrea_cli.backends.cpu import CpuBackend

        pairs = [(schedule, CpuBackend(kernel_path, schedule=schedule, sanitize=sanitize, timeout=timeout,
                                       racecheck=racecheck))
                 for schedule in schedules]
        require_available(pairs[0][1], "--backend cpu")
        if progress is not None and (sanitize or racecheck):  # a build of its own: about a minute the first time
            tool = SANITIZER_BUILDS["sanitize" if sanitize else "racecheck"]
            progress(f"verify: building the kernel file under {tool} (once; cached after)")
        for _, backend in pairs:
            backend.device()
        return pairs
    raise AndreaError(f"--backend {name!r} is not a backend for verify: use auto, cuda or cpu")


def progress_line(result: CaseResult, done: int | None = None, total: int | None = None) -> str:
    mark = "ok  " if result.passed else "FAIL"
    count = f"[{done}/{total}] " if done is not None and total is not None else ""
    return f"{count}{mark} {result.case.label()}  [{result.case.plan.describe()}, {result.schedule}]"


# Host bytes per T×T entry while one case is checked: the kernel's five float32 stages, the
# float64 reference stages and the element-wise tolerances and errors of each comparison.
VERIFY_BYTES_PER_SCORE = 256


def run_verify_command(o: VerifyOptions, progress: Callable[[str], None] | None = None) -> VerifyReport:
    """progress: called with a line per case run (the CLI prints them to stderr unless --json)."""
    check_timeout(o.timeout)
    T, d_k, d_v, mask, scaled = o.T, o.d_k, o.d_v, o.mask, o.scale is not False
    one_case = T is not None or d_k is not None or d_v is not None or mask is not None or not scaled
    if one_case and o.quick:
        raise AndreaError("--quick runs the sweep; --T/--d-k/--d-v/--mask/--no-scale pick one case: pass one or the other")
    schedules = ("forward", "reverse")
    if one_case:
        mask_spec = parse_mask(mask or "causal")
        T, d_k, d_v = head_sizes(T, d_k, d_v)
        check_sizes(T, d_k, d_v)
        check_fits_in_memory(H_VERIFY, T, d_k, d_v, bytes_per_score=VERIFY_BYTES_PER_SCORE)
        cases = [Case(T, d_k, d_v, mask_spec, scaled)]
    elif o.quick and o.racecheck:  # every kernel, each tile loop twice; happens-before needs one order
        cases, schedules = race_cases(), ("forward",)
    else:
        cases = sweep(o.quick)
    kernel_path = resolve_kernel_path(o.kernel)
    backends = verify_backends(o.backend, kernel_path, sanitize=o.sanitize, racecheck=o.racecheck,
                               timeout=o.timeout, schedules=schedules, progress=progress)
    each_case = None
    if progress is not None:
        total, done = len(cases) * len(backends), iter(range(1, 10**9))
        each_case = lambda result: progress(progress_line(result, next(done), total))  # noqa: E731
    return run_verify(backends, cases, kernel_file=str(kernel_path), progress=each_case)
