"""The sweep of shapes chosen to hit every edge (T and d of 1, primes, one past a tile or a warp)
and the run: each case's inputs and exact answer drawn once, then every family that applies."""

from __future__ import annotations

import time

from andrea_cli.backends.base import DeviceFault
from andrea_cli.masks import MaskSpec
from andrea_cli.verify.case import Case, CaseResult, VerifyReport, draw_inputs, exact_answer
from andrea_cli.verify.families import FAMILIES

# (T, d_k, d_v): every T and d_k of the sweep appears; d_v differs from d_k in half of them.
SHAPES = [(1, 1, 1), (2, 3, 5), (7, 16, 16), (31, 64, 3), (32, 80, 80), (33, 128, 64), (64, 256, 256),
          (127, 64, 80), (257, 3, 16), (1024, 64, 64)]
D_K_AT_33 = [1, 3, 16, 64, 80, 128, 256]
QUICK_SHAPES = [(1, 1, 1), (7, 3, 5), (33, 16, 16), (64, 80, 64)]
VARIANTS = [(MaskSpec("none"), False), (MaskSpec("window", 5), True), (MaskSpec("causal"), False), (MaskSpec("none"), True)]


def shape_cases(quick: bool) -> list[Case]:
    """Not the full product of T × d_k × masks, but every value of each at least once, each
    shape causal-and-scaled (the real configuration) plus one rotating variant."""
    cases: list[Case] = []
    shapes = QUICK_SHAPES if quick else SHAPES + [(33, d, d) for d in D_K_AT_33]
    for n, (T, d_k, d_v) in enumerate(shapes):
        cases.append(Case(T, d_k, d_v, MaskSpec("causal"), True))
        if T <= 257:  # the largest shape runs once: on the CPU build it costs seconds
            mask, scaled = VARIANTS[n % len(VARIANTS)]
            cases.append(Case(T, d_k, d_v, mask, scaled))
    return cases


def edge_cases(quick: bool) -> list[Case]:
    # windows wider than the fused kernel's 32-key tile, not a multiple of it: the first tile a
    # block loads starts mid-window, and rows see parts of two or three tiles
    cases = [Case(70, 16, 16, MaskSpec("window", 33), True)]
    if not quick:
        cases.append(Case(257, 64, 64, MaskSpec("window", 100), True))
    # unscaled dot products of width 256 with entries of std 4: scores in the hundreds, where a
    # softmax without the max subtraction overflows to inf
    cases.append(Case(33, 256, 16, MaskSpec("none"), False, input_std=4.0))
    return cases


def sweep(quick: bool = False) -> list[Case]:
    """The shared shapes, then the cases each family adds (e.g. launch geometries), then the edges."""
    return shape_cases(quick) + [c for family in FAMILIES for c in family.cases(quick)] + edge_cases(quick)


def check_case(backend, case: Case, schedule: str, seed: int) -> CaseResult:
    """Every family that applies, on the same inputs; the first that does not finish ends the case."""
    inputs = draw_inputs(case, seed)
    exact = exact_answer(case, inputs)
    result = CaseResult(case, schedule)
    for family in FAMILIES:
        if result.error is None and family.applies(backend, case):
            family.check(backend, case, inputs, exact, result)
    return result


def run_verify(backends: list[tuple[str, object]], cases: list[Case], *, kernel_file: str,
               progress=None) -> VerifyReport:
    """backends: (schedule label, backend) pairs, e.g. [("gpu", cuda)] or the CPU build's
    [("forward", cpu), ("reverse", cpu_reversed)]; each case runs on each."""
    start = time.perf_counter()
    first = backends[0][1]
    device = first.device_name()  # asked now: after a GPU fault the driver may not answer
    results = run_cases(backends, cases, progress)
    results.sort(key=lambda r: r.passed)  # failures first; the sort is stable
    return VerifyReport(first.name, device, kernel_file, results, time.perf_counter() - start)


def run_cases(backends: list[tuple[str, object]], cases: list[Case], progress) -> list[CaseResult]:
    results = []
    for n, case in enumerate(cases):
        for schedule, backend in backends:
            try:
                results.append(check_case(backend, case, schedule, seed=n))
            except DeviceFault as exc:  # the GPU context is gone: report this case and stop here
                results.append(CaseResult(case, schedule, error=f"{exc} ({len(cases) - n - 1} later cases not run)"))
                return results
            if progress:
                progress(results[-1])
    return results
