"""The staged family: each of the five stage kernels against float64, each on the kernel's own
previous stage (so an error shows in the stage that made it), the output end to end, and the
invariants the course states (the future gets exactly 0, weights >= 0, rows sum to 1)."""

from __future__ import annotations

import math

import numpy as np

from andrea_cli import reference
from andrea_cli.backends.base import STAGES, DeviceFault
from andrea_cli.backends.launch.staged import ALL_PLANS, DEFAULT_PLAN
from andrea_cli.errors import AndreaError, SetupError
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import tolerances
from andrea_cli.verification.case import Case, CaseResult, Exact, Family, Inputs, compare

# (T, d_k, d_v): one warp's worth of rows and one past it (the 32-thread and 8-rows geometries'
# edges), and two warps past (a second partial trip of every loop over T); d_k = 40 takes
# scores_kernel1 through three 16-wide slices of k, so a barrier missing between them shows
PLAN_SHAPES = [(1, 1, 1), (33, 40, 16), (65, 64, 48)]


def plan_cases(quick: bool) -> list[Case]:
    """Every launch geometry other than the default, on a few shapes, and on scores in the
    hundreds (unscaled, width 256, entries of std 4) where a softmax without the max subtraction
    overflows."""
    others = [plan for plan in ALL_PLANS if plan != DEFAULT_PLAN]
    return ([Case(T, d_k, d_v, MaskSpec("causal"), True, plan)
             for T, d_k, d_v in (PLAN_SHAPES[:2] if quick else PLAN_SHAPES) for plan in others]
            + [Case(33, 256, 16, MaskSpec("none"), False, plan, input_std=4.0) for plan in others])


def check_staged(backend, case: Case, x: Inputs, exact: Exact, result: CaseResult) -> None:
    try:
        out = backend.attention(x.q, x.k, x.v, mask=case.mask, scaled=case.scaled, plan=case.plan)
    except (DeviceFault, SetupError):  # the machine, not the case: stop the run
        raise
    except AndreaError as exc:
        result.error = str(exc).splitlines()[0]
        return
    result.stages["scores"] = compare(out.scores, exact.scores, tolerances.scores_tol(x.q, x.k))
    if case.scaled:
        scaled = reference.scale(out.scores.astype(np.float64), case.d_k)
        result.stages["scale"] = compare(out.scaled, scaled, tolerances.scale_tol(scaled))
    if case.mask.kind != "none":
        masked = reference.mask(out.scaled.astype(np.float64), case.mask)
        # mask_kernel1 copies or writes -inf: exact; mask_kernel2 adds in float32: one rounding
        if case.mask.is_array:
            tol = tolerances.gamma(1) * np.abs(np.where(np.isfinite(masked), masked, 0))
        elif exact.bias is not None:  # ALiBi: the slope (exp2f), -m_h·d and the sum: three roundings
            tol = tolerances.gamma(3) * (np.abs(out.scaled.astype(np.float64)) + np.abs(exact.bias))
        else:
            tol = 0.0
        result.stages["mask"] = compare(out.masked, masked, tol)
    p_exact = reference.softmax(out.masked.astype(np.float64))
    result.stages["softmax"] = compare(out.weights, p_exact, tolerances.softmax_tol(out.masked, p_exact))
    result.stages["av"] = compare(out.output, reference.weighted_sum(out.weights.astype(np.float64), x.v),
                                  tolerances.av_tol(out.weights, x.v))
    result.stages["output"] = compare(out.output, exact.output, tolerances.output_tol(
        x.q, x.k, x.v, exact.weights, exact.visible, case.d_k, case.scaled, bias=exact.bias))
    result.invariants = invariants(case, out, exact, p_exact)


def invariants(case: Case, out, exact: Exact, p_exact: np.ndarray) -> dict[str, bool]:
    w = out.weights
    sum_tol = tolerances.softmax_tol(out.masked, p_exact).sum(axis=-1) + tolerances.gamma(case.S)
    error = np.abs(out.scores - exact.scores)
    # a row that sees no key (L > S, bottom-right: the first L - S queries) sums to exactly 0
    sees = exact.visible.any(axis=-1)
    return {
        "future_exactly_zero": bool((w[np.broadcast_to(~exact.visible, w.shape)] == 0).all()),
        "weights_non_negative": bool((w >= 0).all()),
        "rows_sum_to_one": bool((np.abs(w.astype(np.float64).sum(axis=-1) - sees) <= np.where(sees, sum_tol, 0)).all()),
        "unscaled_scores_unscaled": case.d_k == 1 or bool(
            error.max() < np.abs(out.scores - exact.scores / math.sqrt(case.d_k)).max()),
    }


FAMILY = Family("staged", stages=(*STAGES, "output"), applies=lambda backend, case: True,
                check=check_staged, cases=plan_cases, header="staged")
