"""`andrea verify`: every stage of the kernel file against the float64 NumPy path, over a sweep
of shapes chosen to hit every edge (T and d of 1, primes, one past a tile or a warp), with
tolerances derived in tolerances.py and the invariants the course states checked exactly."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from andrea_cli import reference, tolerances
from andrea_cli.backends.base import DeviceFault
from andrea_cli.backends.fused import FUSED_MAX_D
from andrea_cli.backends.staged import ALL_PLANS, DEFAULT_PLAN, LaunchPlan
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.verify_backward import check_backward


H_VERIFY = 2  # every case runs two heads, so the head offset on gridDim.z is exercised everywhere


@dataclass(frozen=True)
class Case:
    T: int
    d_k: int
    d_v: int
    mask: MaskSpec
    scaled: bool
    plan: LaunchPlan = DEFAULT_PLAN
    input_std: float = 1.0  # > 1 makes large scores: softmax without the max subtraction overflows

    def label(self) -> str:
        return f"T={self.T} d_k={self.d_k} d_v={self.d_v} {self.mask} {'scaled' if self.scaled else 'unscaled'}"


# (T, d_k, d_v): every T and d_k of the sweep appears; d_v differs from d_k in half of them.
SHAPES = [(1, 1, 1), (2, 3, 5), (7, 16, 16), (31, 64, 3), (32, 80, 80), (33, 128, 64), (64, 256, 256),
          (127, 64, 80), (257, 3, 16), (1024, 64, 64)]
D_K_AT_33 = [1, 3, 16, 64, 80, 128, 256]
QUICK_SHAPES = [(1, 1, 1), (7, 3, 5), (33, 16, 16), (64, 80, 64)]
VARIANTS = [(MaskSpec("none"), False), (MaskSpec("window", 5), True), (MaskSpec("causal"), False), (MaskSpec("none"), True)]
PLAN_SHAPES = [(1, 1, 1), (33, 16, 16), (257, 64, 48)]


def sweep(quick: bool = False) -> list[Case]:
    """Not the full product of T × d_k × masks × geometries, but every value of each at least
    once, each shape causal-and-scaled (the real configuration) plus one rotating variant."""
    cases: list[Case] = []
    shapes = QUICK_SHAPES if quick else SHAPES + [(33, d, d) for d in D_K_AT_33]
    for n, (T, d_k, d_v) in enumerate(shapes):
        cases.append(Case(T, d_k, d_v, MaskSpec("causal"), True))
        if T <= 257:  # the largest shape runs once: on the CPU build it costs seconds
            mask, scaled = VARIANTS[n % len(VARIANTS)]
            cases.append(Case(T, d_k, d_v, mask, scaled))
    for T, d_k, d_v in PLAN_SHAPES[:2] if quick else PLAN_SHAPES:
        for plan in ALL_PLANS:
            if plan != DEFAULT_PLAN:
                cases.append(Case(T, d_k, d_v, MaskSpec("causal"), True, plan))
    # windows wider than the fused kernel's 32-key tile, not a multiple of it: the first tile a
    # block loads starts mid-window, and rows see parts of two or three tiles
    cases.append(Case(70, 16, 16, MaskSpec("window", 33), True))
    if not quick:
        cases.append(Case(257, 64, 64, MaskSpec("window", 100), True))
    # unscaled dot products of width 256 with entries of std 4: scores in the hundreds, where a
    # softmax without the max subtraction overflows to inf
    cases.append(Case(33, 256, 16, MaskSpec("none"), False, input_std=4.0))
    return cases


@dataclass
class StageCheck:
    max_abs_err: float
    max_rel_err: float
    tol: float  # the largest element-wise bound; each element is checked against its own
    passed: bool
    first_bad: dict | None = None  # {"index": [h, i, j], "got": x, "expected": y, "tol": t}


@dataclass
class CaseResult:
    case: Case
    schedule: str
    stages: dict[str, StageCheck] = field(default_factory=dict)
    invariants: dict[str, bool] = field(default_factory=dict)
    error: str | None = None  # the kernel did not finish (deadlock, launch error)

    @property
    def passed(self) -> bool:
        return self.error is None and all(s.passed for s in self.stages.values()) and all(self.invariants.values())

    def to_json(self) -> dict:
        c = self.case
        return {
            "T": c.T, "d_k": c.d_k, "d_v": c.d_v, "mask": str(c.mask), "scaled": c.scaled,
            "geometry": c.plan.describe(), "schedule": self.schedule, "input_std": c.input_std,
            "passed": self.passed, "error": self.error,
            "stages": {name: s.__dict__ for name, s in self.stages.items()},
            "invariants": self.invariants,
        }


@dataclass
class VerifyReport:
    backend: str
    device: str
    kernel_file: str
    results: list[CaseResult]
    elapsed_s: float

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def to_json(self) -> dict:
        failed = sum(not r.passed for r in self.results)
        return {"backend": self.backend, "device": self.device, "kernel_file": self.kernel_file,
                "passed": self.passed, "n_cases": len(self.results), "n_failed": failed,
                "elapsed_s": round(self.elapsed_s, 3), "cases": [r.to_json() for r in self.results]}


def compare(got: np.ndarray, expected: np.ndarray, tol: np.ndarray | float) -> StageCheck:
    got64 = got.astype(np.float64)
    tol_arr = np.broadcast_to(np.asarray(tol, dtype=np.float64), expected.shape)
    both_inf = np.isinf(expected) & (got64 == expected)  # -inf where -inf was due
    with np.errstate(invalid="ignore"):  # inf - inf where the kernel put -inf but should not have
        err = np.where(both_inf, 0.0, np.abs(got64 - expected))
    err = np.where(np.isnan(err), np.inf, err)  # a NaN is the worst error, not a silent pass
    bad = err > tol_arr
    finite_ref = np.isfinite(expected) & (expected != 0)
    rel = np.where(finite_ref, err / np.where(finite_ref, np.abs(expected), 1.0), 0.0)
    check = StageCheck(
        max_abs_err=float(err.max()) if err.size else 0.0,
        max_rel_err=float(rel.max()) if rel.size else 0.0,
        tol=float(tol_arr.max()) if tol_arr.size else 0.0,
        passed=not bad.any(),
    )
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])  # the first, in row-major order
        check.first_bad = {"index": list(index), "got": float(got64[index]), "expected": float(expected[index]),
                           "tol": float(tol_arr[index])}
    return check


def fused_variants(d_k: int, d_v: int) -> list[int]:
    """Kernel1 takes any width; kernel2 (float4 loads) widths divisible by 4."""
    return [1, 2] if d_k % 4 == 0 and d_v % 4 == 0 else [1]


def check_case(backend, case: Case, schedule: str, seed: int) -> CaseResult:
    rng = np.random.default_rng(seed)
    H = H_VERIFY
    q, k = (rng.standard_normal((H, case.T, case.d_k), dtype=np.float32) * np.float32(case.input_std) for _ in range(2))
    v = rng.standard_normal((H, case.T, case.d_v), dtype=np.float32)
    result = CaseResult(case, schedule)
    try:
        out = backend.attention(q, k, v, mask=case.mask, scaled=case.scaled, plan=case.plan)
    except DeviceFault:
        raise
    except AndreaError as exc:
        result.error = str(exc).splitlines()[0]
        return result
    visible = case.mask.visible(case.T)
    s_exact = reference.scores(q, k)
    result.stages["scores"] = compare(out.scores, s_exact, tolerances.scores_tol(q, k))
    # every later stage is checked on the kernel's own previous stage, so an error shows up in
    # the stage that made it, not in every stage after it
    if case.scaled:
        exact = reference.scale(out.scores.astype(np.float64), case.d_k)
        result.stages["scale"] = compare(out.scaled, exact, tolerances.scale_tol(exact))
    if case.mask.kind != "none":
        result.stages["mask"] = compare(out.masked, reference.mask(out.scaled.astype(np.float64), case.mask), 0.0)
    p_exact = reference.softmax(out.masked.astype(np.float64))
    result.stages["softmax"] = compare(out.weights, p_exact, tolerances.softmax_tol(out.masked, p_exact))
    result.stages["av"] = compare(out.output, reference.weighted_sum(out.weights.astype(np.float64), v),
                                  tolerances.av_tol(out.weights, v))
    p_true = reference.softmax(reference.mask(reference.scale(s_exact, case.d_k) if case.scaled else s_exact, case.mask))
    result.stages["output"] = compare(out.output, reference.weighted_sum(p_true, v),
                                      tolerances.output_tol(q, k, v, p_true, visible, case.d_k, case.scaled))

    if case.plan == DEFAULT_PLAN and hasattr(backend, "attention_fused") and max(case.d_k, case.d_v) <= FUSED_MAX_D:
        # the fused kernel is checked once per shape, on the same inputs, end to end: it has no
        # intermediate stages to compare
        tol = tolerances.fused_tol(q, k, v, p_true, visible, case.d_k, case.scaled)
        for variant in fused_variants(case.d_k, case.d_v):
            try:
                fused = backend.attention_fused(q, k, v, mask=case.mask, scaled=case.scaled, variant=variant)
            except DeviceFault:
                raise
            except AndreaError as exc:
                result.error = f"attention_fused_kernel{variant}: {str(exc).splitlines()[0]}"
                return result
            result.stages[f"fused{variant}"] = compare(fused.output, reference.weighted_sum(p_true, v), tol)

    w = out.weights
    sum_tol = tolerances.softmax_tol(out.masked, p_exact).sum(axis=-1) + tolerances.gamma(case.T)
    result.invariants = {
        "future_exactly_zero": bool((w[:, ~visible] == 0).all()),
        "weights_non_negative": bool((w >= 0).all()),
        "rows_sum_to_one": bool((np.abs(w.astype(np.float64).sum(axis=-1) - 1) <= sum_tol).all()),
        "unscaled_scores_unscaled": case.d_k == 1 or bool(
            np.abs(out.scores - s_exact).max() < np.abs(out.scores - s_exact / math.sqrt(case.d_k)).max()),
    }
    if case.plan == DEFAULT_PLAN and hasattr(backend, "attention_backward"):
        d_out = rng.standard_normal((H, case.T, case.d_v), dtype=np.float32)
        variants = fused_variants(case.d_k, case.d_v) if max(case.d_k, case.d_v) <= FUSED_MAX_D else []
        stages, invariants, result.error = check_backward(backend, case, q, k, v, d_out, compare, variants)
        result.stages.update(stages)
        result.invariants.update(invariants)
    return result


def run_verify(backends: list[tuple[str, object]], cases: list[Case], *, kernel_file: str,
               progress=None) -> VerifyReport:
    """backends: (schedule label, backend) pairs, e.g. [("gpu", cuda)] or the CPU build's
    [("forward", cpu), ("reverse", cpu_reversed)]; each case runs on each."""
    start = time.perf_counter()
    first = backends[0][1]
    device = first.device_name()  # asked now: after a GPU fault the driver may not answer
    results = []
    for n, case in enumerate(cases):
        for schedule, backend in backends:
            try:
                results.append(check_case(backend, case, schedule, seed=n))
            except DeviceFault as exc:  # the GPU context is gone: report this case and stop here
                failed = CaseResult(case, schedule, error=f"{exc} ({len(cases) - n - 1} later cases not run)")
                results.append(failed)
                results.sort(key=lambda r: r.passed)
                return VerifyReport(first.name, device, kernel_file, results, time.perf_counter() - start)
            if progress:
                progress(results[-1])
    results.sort(key=lambda r: r.passed)  # failures first; the sort is stable
    return VerifyReport(first.name, device, kernel_file, results, time.perf_counter() - start)
