"""The fused family: every fused kernel that takes the case's widths, end to end on the same
inputs against the float64 equation (it has no intermediate stages to compare)."""

from __future__ import annotations

from andrea_cli.backends.base import DeviceFault
from andrea_cli.backends.launch.fused import FUSED, FUSED_MAX_D, fused_variants
from andrea_cli.backends.launch.staged import DEFAULT_PLAN
from andrea_cli.errors import AndreaError, SetupError
from andrea_cli.verification import tolerances
from andrea_cli.verification.case import Case, CaseResult, Exact, Family, Inputs, compare

def applies(backend, case: Case) -> bool:
    """Once per shape (the default geometry only), on a backend with the fused kernels."""
    return (case.plan == DEFAULT_PLAN and hasattr(backend, "attention_fused")
            and max(case.d_k, case.d_v) <= FUSED_MAX_D)


def check_fused(backend, case: Case, x: Inputs, exact: Exact, result: CaseResult) -> None:
    tol = tolerances.fused_tol(x.q, x.k, x.v, exact.weights, exact.visible, case.d_k, case.scaled, exact.bias)
    for variant in fused_variants(case.d_k, case.d_v):
        try:
            fused = backend.attention_fused(x.q, x.k, x.v, mask=case.mask, scaled=case.scaled, variant=variant)
        except (DeviceFault, SetupError):  # the machine, not the case: stop the run
            raise
        except AndreaError as exc:
            kernel, message = FUSED[variant].stem, str(exc).splitlines()[0]
            result.error = message if message.startswith(kernel) else f"{kernel}: {message}"
            return
        result.stages[FUSED[variant].label] = compare(fused.output, exact.output, tol)


FAMILY = Family("fused", stages=tuple(k.label for k in FUSED.values()), applies=applies, check=check_fused,
                header="fused")
