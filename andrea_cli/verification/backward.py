"""The backward family: the staged backward kernels stage by stage (each on its own float32
inputs) and end to end, the fused backward end to end, and the fused forward's logsumexp, all
against the float64 NumPy backward (reference_backward.py) with the bounds of
tolerances_backward.py. Masked positions of dS must be exactly 0. On every case up to MAX_T, L
queries against S keys and grouped K/V heads included (verification/lengths.py): dQ (H, L, d_k),
and dK, dV (H_kv, S, d) held to the sums over each K/V head's query heads."""

from __future__ import annotations


import numpy as np

from andrea_cli import reference, reference_backward
from andrea_cli.backends.base import DeviceFault
from andrea_cli.backends.launch.backward import LSE, lse_variants
from andrea_cli.backends.launch.fused import FUSED, FUSED_MAX_D
from andrea_cli.backends.launch.staged import DEFAULT_PLAN, KERNEL1_PLAN
from andrea_cli.errors import AndreaError, SetupError
from andrea_cli.verification import tolerances, tolerances_backward as tb
from andrea_cli.verification.case import Case, CaseResult, Exact, Family, Inputs, compare
from andrea_cli.reference import scale_for


# The sweep's T = 257 and T = 1024 are there for forward rules (softmax_kernel1's 256 threads,
# scale_kernel1's grid stride); the backward's tiles (16, 32 keys, 8 and 4 rows) meet every edge
# at the smaller T (verification/boundaries.py), and at T = 257 it would cost more than the rest.
MAX_T = 256


def applies(backend, case: Case) -> bool:
    """Up to MAX_T, on a backend with the backward kernels: on every shape, L != S and grouped
    K/V heads included (the default geometry, whose staged products are the register-tiled
    dv/dp/dq/dk_kernel2) and on the shapes the one-output-per-thread plan runs (dv/dp/dq/dk_kernel1)."""
    return case.plan in (DEFAULT_PLAN, KERNEL1_PLAN) and case.T <= MAX_T and hasattr(backend, "attention_backward")


def check(backend, case: Case, x: Inputs, exact: Exact, result: CaseResult) -> None:
    # the fused backward does not depend on the plan: once per shape, with the default
    fused = case.plan == DEFAULT_PLAN and max(case.d_k, case.d_v) <= FUSED_MAX_D
    variants = lse_variants(case.d_k, case.d_v) if fused else []
    stages, invariants, result.error = check_backward(backend, case, x.q, x.k, x.v, x.d_out, variants)
    result.stages.update(stages)
    result.invariants.update(invariants)


def check_backward(backend, case, q, k, v, d_out, fused_variants) -> tuple[dict, dict, str | None]:
    """(stage checks, invariants, error). q, d_out (H, L, d); k, v (H_kv, S, d): dK and dV are
    held to the sums over each K/V head's group of query heads (reference_backward.group_sum)."""
    stages, invariants = {}, {}
    visible = case.mask.visible(case.T, S=case.S)
    H_kv = case.H_kv
    exact = reference_backward.backward(q, k, v, d_out, case.mask, case.scaled)
    factor = scale_for(case.d_k, case.scaled)
    bias = case.mask.score_bias(q.shape[0], case.T, S=case.S)  # ALiBi's (H, L, S); None without
    try:
        got = backend.attention_backward(q, k, v, d_out, mask=case.mask, scaled=case.scaled, plan=case.plan)
    except (DeviceFault, SetupError):  # the machine, not the case: stop the run
        raise
    except AndreaError as exc:
        return stages, invariants, f"backward: {str(exc).splitlines()[0]}"

    # stage by stage, on the kernel's own float32 inputs: an error shows in the stage that made it
    p = got.weights
    p64, dp64, ds64 = (a.astype(np.float64) for a in (p, got.d_weights, got.d_scores))
    stages["dv"] = compare(got.dv, reference_backward.value_gradient(p64, d_out, H_kv), tb.dv_tol(p, d_out, H_kv))
    stages["dp"] = compare(got.d_weights, reference_backward.weight_gradient(d_out, v), tb.dp_tol(d_out, v))
    stages["ds"] = compare(got.d_scores, reference_backward.softmax_backward(p64, dp64), tb.ds_tol(p, got.d_weights))
    stages["dq"] = compare(got.dq, reference_backward.query_gradient(ds64, k, factor), tb.dq_tol(got.d_scores, k, factor))
    stages["dk"] = compare(got.dk, reference_backward.key_gradient(ds64, q, factor, H_kv),
                           tb.dk_tol(got.d_scores, q, factor, H_kv=H_kv))
    end = tb.staged_end_to_end_tol(exact, q, k, v, d_out, visible, case.d_k, case.scaled, bias)
    for name in ("dq", "dk", "dv"):
        stages[f"backward_{name}"] = compare(getattr(got, name), getattr(exact, name), end[name])
    invariants["masked_gradient_exactly_zero"] = bool((got.d_scores[:, ~visible] == 0).all())

    if not fused_variants:
        return stages, invariants, None
    out_tol = tolerances.fused_tol(q, k, v, exact.weights, visible, case.d_k, case.scaled, bias)
    fused_end = tb.fused_end_to_end_tol(exact, q, k, v, d_out, visible, case.d_k, case.scaled, out_tol, bias)
    lse_exact = _logsumexp(q, k, case)
    for variant in fused_variants:
        try:
            fused = backend.attention_backward_fused(q, k, v, d_out, mask=case.mask, scaled=case.scaled, variant=variant)
        except (DeviceFault, SetupError):  # the machine, not the case: stop the run
            raise
        except AndreaError as exc:
            return stages, invariants, f"fused backward {variant}: {str(exc).splitlines()[0]}"
        stages[LSE[variant].label] = compare(fused.lse, lse_exact,
                                             tb.lse_tol(q, k, visible, case.d_k, case.scaled, bias))
        for name in ("dq", "dk", "dv"):
            stages[_fused_stage(variant, name)] = compare(getattr(fused, name), getattr(exact, name), fused_end[name])
    return stages, invariants, None


def _logsumexp(q, k, case) -> np.ndarray:
    """(H, L); +inf for a row that sees no key (L > S, bottom-right), as the kernels write it."""
    s = reference.scores(q, k)
    if case.scaled:
        s = reference.scale(s, case.d_k)
    s = reference.mask(s, case.mask)
    visible = np.isfinite(s)
    return np.where(visible.any(axis=-1), tb.row_logsumexp(s, visible)[..., 0], np.inf)


def _fused_stage(variant: int, gradient: str) -> str:
    """fused1_dq: dQ of the fused backward after kernel1's forward (fused1_lse, its lse twin)."""
    return f"{FUSED[variant].label}_{gradient}"


STAGES = ("dv", "dp", "ds", "dq", "dk", "backward_dq", "backward_dk", "backward_dv",
          *(name for v in LSE for name in (LSE[v].label, *(_fused_stage(v, g) for g in ("dq", "dk", "dv")))))
# three columns in verify's table, each the worst of its group; a failing stage is named under it
GROUPS = (("bwd stages", STAGES[:5]), ("bwd", STAGES[5:8]), ("fused bwd", STAGES[8:]))
FAMILY = Family("backward", stages=STAGES, columns=tuple(column for column, _ in GROUPS), groups=GROUPS,
                applies=applies, check=check, header="bwd")
