"""The bf16 backward family: attention_fused_lse_kernel4 then attention_backward_dkdv_kernel2 and
dq_kernel2 wherever their head sizes apply, against the float64 backward with the kernels' own
bf16 roundings of Q, K, V, dO, P and dS, on the kernels' own output and logsumexp
(bf16_backward.py); the forward's output and logsumexp against theirs (bf16_attention.py)."""

from __future__ import annotations

from andrea_cli.backends.base import DeviceFault
from andrea_cli.backends.launch.backward_bf16 import LSE_FORWARD_VARIANT
from andrea_cli.backends.launch.fused_bf16 import BF16_DIMS
from andrea_cli.backends.launch.staged import DEFAULT_PLAN
from andrea_cli.errors import AndreaError, SetupError
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import bf16_attention, bf16_backward
from andrea_cli.verification.case import Case, CaseResult, Exact, Family, Inputs, compare

# the backward family's limit (verification/backward.py): every tile edge is met below it
MAX_T = 256
STAGES = ("bf16_fwd", "bf16_lse", "bf16_dq", "bf16_dk", "bf16_dv")
GROUPS = (("bf16 bwd", STAGES),)


def applies(backend, case: Case) -> bool:
    return (case.plan == DEFAULT_PLAN and case.T <= MAX_T and hasattr(backend, "attention_backward_fused")
            and case.d_k == case.d_v and case.d_k in BF16_DIMS)


def check(backend, case: Case, x: Inputs, exact: Exact, result: CaseResult) -> None:
    try:
        got = backend.attention_backward_fused(x.q, x.k, x.v, x.d_out, mask=case.mask, scaled=case.scaled,
                                               precision="bf16")
    except (DeviceFault, SetupError):  # the machine, not the case: stop the run
        raise
    except AndreaError as exc:
        result.error = f"bf16 backward (d {case.d_k}): {str(exc).splitlines()[0]}"
        return
    out, out_tol = bf16_attention.reference_and_tol(x.q, x.k, x.v, case.mask, case.scaled,
                                                    variant=LSE_FORWARD_VARIANT)  # kernel4's body
    result.stages["bf16_fwd"] = compare(got.output, out, out_tol)
    lse, lse_tol = bf16_backward.lse_reference_and_tol(x.q, x.k, case.mask, case.scaled)
    result.stages["bf16_lse"] = compare(got.lse, lse, lse_tol)
    want, tol = bf16_backward.reference_and_tol(x.q, x.k, x.v, x.d_out, got.output, got.lse, case.mask, case.scaled)
    for name in ("dq", "dk", "dv"):
        result.stages[f"bf16_{name}"] = compare(getattr(got, name), getattr(want, name), getattr(tol, name))


def bf16_backward_cases(quick: bool) -> list[Case]:
    """Its edges beyond the tensor-core forward's cases (verification/fused_bf16.py: T one short of, at
    and past 64, windows ending mid-tile and on a tile edge, which this family runs on too): a
    query tile of 32 (d = 128) one row into the fourth; a window that hides a warp's 16 keys from a
    whole query tile (W = 16); no mask over three key blocks with a partial last one."""
    if quick:
        return [Case(97, 128, 128, MaskSpec("causal"), True)]
    return [Case(97, 128, 128, MaskSpec("causal"), True), Case(200, 64, 64, MaskSpec("window", 16), True),
            Case(130, 64, 64, MaskSpec("none"), True)] + flavour_cases()


def flavour_cases() -> list[Case]:
    """The flavours through the forward that saves the lse (kernel4's body) and both backward
    kernels: a two-sided window reaching one key past a 64-key tile with ALiBi, at L != S (ALiBi's
    distances from p = i + 30) on one K/V head for two query heads; sinks ending on a tile edge
    beside a window that leaves whole tiles between them (dK/dV's query range then spans every row
    for the sink keys); ALiBi and a window over 3 heads at d 128."""
    return [Case(130, 64, 64, MaskSpec("window", 5, right=65, alibi=True), True, T_k=160, heads=2, kv_heads=1,
                 families=("backward_bf16",)),
            Case(200, 64, 64, MaskSpec("window", 40, sinks=64), True, families=("backward_bf16",)),
            Case(130, 128, 128, MaskSpec("window", 70, alibi=True), True, heads=3, families=("backward_bf16",))]


FAMILY = Family("backward_bf16", stages=STAGES, columns=("bf16 bwd",), groups=GROUPS, applies=applies, check=check,
                cases=bf16_backward_cases, header="bf16\nbwd")  # two lines: the family table fits 120 columns
