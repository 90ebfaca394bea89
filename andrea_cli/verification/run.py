"""The sweep of shapes chosen to hit every edge (T and d of 1, primes, one past a tile or a warp)
and the run: each case's inputs and exact answer drawn once, then every family that applies."""

from __future__ import annotations

import time

from andrea_cli.backends.base import DeviceFault
from andrea_cli.masks import MaskSpec
from andrea_cli.verification.boundaries import window_cases
from andrea_cli.verification.case import Case, CaseResult, Family, VerifyReport, draw_inputs, exact_answer
from andrea_cli.verification.families import FAMILIES
from andrea_cli.verification.lengths import length_cases
from andrea_cli.verification.mask_arrays import array_cases
from andrea_cli.verification.mask_flavours import bf16_flavour_cases, flavour_cases

# (T, d_k, d_v): every T and d_k of the sweep appears; d_v differs from d_k in half of them.
SHAPES = [(1, 1, 1), (2, 3, 5), (7, 16, 16), (31, 64, 3), (32, 80, 80), (33, 128, 64), (64, 128, 128),
          (127, 64, 80), (257, 3, 16), (1024, 64, 64)]
D_K_AT_33 = [1, 3, 15, 16, 31, 64, 80, 128, 256]  # 15, 31: one short of a 16-tile, of a 32-lane row
QUICK_SHAPES = [(1, 1, 1), (7, 3, 5), (33, 16, 16), (64, 80, 64)]
VARIANTS = [(MaskSpec("none"), False), (MaskSpec("window", 5), True), (MaskSpec("causal"), False), (MaskSpec("none"), True)]


def shape_cases(quick: bool) -> list[Case]:
    """Not the full product of T × d_k × masks, but every value of each at least once, each
    shape causal-and-scaled (the real configuration) plus one rotating variant."""
    cases: list[Case] = []
    shapes = QUICK_SHAPES if quick else SHAPES + [(33, d, d) for d in D_K_AT_33]
    for n, (T, d_k, d_v) in enumerate(shapes):
        if T > 257:
            # once, and for the staged kernels only: 2 × T × T > 4096 × 256 scores take scale_kernel1's
            # grid-stride loop round twice. Every other tile rule repeats every 32 rows or keys and
            # meets its edges at the smaller T (boundaries.py); here it would cost a minute.
            cases.append(Case(T, d_k, d_v, MaskSpec("causal"), True, families=("staged",)))
            continue
        cases.append(Case(T, d_k, d_v, MaskSpec("causal"), True))
        mask, scaled = VARIANTS[n % len(VARIANTS)]
        cases.append(Case(T, d_k, d_v, mask, scaled))
    return cases


def edge_cases(quick: bool) -> list[Case]:
    # sliding windows whose first key lands on every position of a key tile (boundaries.py)
    cases = window_cases(quick)
    # d = 64 and T past one 64-row block: the register-tiled fused kernel in the quick sweep too,
    # with a window wider than a 32-key tile
    cases.append(Case(70, 64, 64, MaskSpec("window", 33), True))
    if not quick:  # kernel3 over three 64-row blocks and 64-key tiles: causal skips and the diagonal
        cases += [Case(130, 64, 64, MaskSpec("causal"), True, families=("fused",)),
                  Case(150, 128, 128, MaskSpec("none"), False, families=("fused",))]
    # unscaled dot products of width 256 with entries of std 4: scores in the hundreds, where a
    # softmax without the max subtraction overflows to inf
    cases.append(Case(33, 256, 16, MaskSpec("none"), False, input_std=4.0))
    # huge scores (~1e4: Q and K uniform in +-100, d 128) through the fused fp32 kernels, held to
    # the same float32 bound (tolerances.fused_tol, which grows with |Q|·|K|); kernel3_d128 over
    # two 64-row blocks, causal and not. 16 heads: at 1e4 nearly every row's softmax is one key,
    # and the error lives in the few rows whose top two scores lie within a few units (~5 of
    # 1,600 rows here, ~1 of 200 at 2 heads), so FlashAttention's rule (within 2x torch's error,
    # tests/verification/test_extreme_inputs.py) measures an order, not one row's draw
    cases += [Case(T, 128, 128, mask, True, input_uniform=100.0, heads=16, families=("fused",))
              for T, mask in ((100, MaskSpec("none")), (70, MaskSpec("causal")))][:1 if quick else 2]
    return cases


def sweep(quick: bool = False) -> list[Case]:
    """The shared shapes, then the cases each family adds (e.g. launch geometries), then the edges."""
    return (shape_cases(quick) + [c for family in FAMILIES for c in family.cases(quick)] + edge_cases(quick)
            + length_cases(quick) + array_cases(quick) + flavour_cases(quick) + bf16_flavour_cases(quick))


def families_for(backend, case: Case) -> list[Family]:
    """The families that apply to the case on this backend, less those the case leaves out."""
    return [family for family in FAMILIES
            if family.applies(backend, case) and (case.families is None or family.name in case.families)]


def check_case(backend, case: Case, schedule: str, seed: int) -> CaseResult:
    """Every family that runs on it, on the same inputs; the first that does not finish ends the case."""
    inputs = draw_inputs(case, seed)
    exact = exact_answer(case, inputs)
    result = CaseResult(case, schedule)
    for family in families_for(backend, case):
        if result.error is None:
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
