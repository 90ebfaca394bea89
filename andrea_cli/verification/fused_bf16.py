"""The tensor-core family: attention_fused_kernel4, kernel5 and kernel6 (bf16 inputs, fp32 sums)
wherever their head sizes apply (kernel6, wgmma, only on an sm_90 GPU and in the CPU build), each against the float64 equation with the kernel's own bf16 roundings of
Q, K, V and P and its own softmax steps (bf16_attention.py), so what its bound leaves room for is
fp32 accumulation order and exp2's stated error."""

from __future__ import annotations

from andrea_cli.backends.base import DeviceFault
from andrea_cli.backends.launch.fused_bf16 import BF16_DIMS, BF16_KERNELS, device_cc
from andrea_cli.backends.launch.staged import DEFAULT_PLAN
from andrea_cli.errors import AndreaError, SetupError
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import bf16_attention
from andrea_cli.verification.case import Case, CaseResult, Exact, Family, Inputs, compare

STAGES = {variant: k.label for variant, k in BF16_KERNELS.items()}  # fused4_bf16 .. fused6_bf16

def applies(backend, case: Case) -> bool:
    return (case.plan == DEFAULT_PLAN and hasattr(backend, "attention_fused")
            and case.d_k == case.d_v and case.d_k in BF16_DIMS)


def check_bf16(backend, case: Case, x: Inputs, exact: Exact, result: CaseResult) -> None:
    cc = device_cc(backend.device())  # the launcher's own reading: None for the CPU build
    for variant, stage in STAGES.items():
        if not BF16_KERNELS[variant].runs_on(cc):
            continue  # no stage: kernel6 on a GPU other than sm_90 (verify lists the stages it ran)
        want, tol = bf16_attention.reference_and_tol(x.q, x.k, x.v, case.mask, case.scaled, variant)
        try:
            out = backend.attention_fused(x.q, x.k, x.v, mask=case.mask, scaled=case.scaled, precision="bf16",
                                          variant=variant)
        except (DeviceFault, SetupError):  # the machine, not the case: stop the run
            raise
        except AndreaError as exc:
            kernel, message = BF16_KERNELS[variant].entry(case.d_k), str(exc).splitlines()[0]
            result.error = message if message.startswith(kernel) else f"{kernel}: {message}"
            return
        result.stages[stage] = compare(out.output, want, tol)


def bf16_cases(quick: bool) -> list[Case]:
    """Their edges: T one short of, at and past the 64-row and 64-key tiles (and kernel5's 128-row
    blocks); windows that start a block's first tile mid-way, end on a tile edge or span three
    tiles; no mask with a partial last tile (keys past T must be masked even where no causal or
    window edge is); causal over several 128-row blocks, so the longest-first block order and the
    unmasked tiles between the masked ones are reached; a window whose far end falls exactly on a
    block's first key."""
    causal, none = MaskSpec("causal"), MaskSpec("none")
    if quick:
        return [Case(65, 64, 64, MaskSpec("window", 33), True), Case(127, 128, 128, none, True)]
    return [Case(63, 128, 128, none, False), Case(64, 64, 64, MaskSpec("window", 64), True),
            Case(65, 64, 64, causal, True), Case(127, 64, 64, none, True),
            Case(129, 128, 128, MaskSpec("window", 65), True), Case(200, 64, 64, MaskSpec("window", 100), True),
            Case(257, 64, 64, causal, False), Case(300, 128, 128, causal, True),
            # a window's far end exactly on a tile edge, in tiles the causal edge leaves unmasked:
            # in the second 128-row block row 255 must not see key 0 (the test that puts that tile
            # among the masked ones is >=, not >); in the third, rows up to 383 must not see keys
            # 64..128, two tiles into the block's first (how many are masked is a quotient by 64)
            Case(384, 64, 64, MaskSpec("window", 255), True)]


FAMILY = Family("fused_bf16", stages=tuple(STAGES.values()), applies=applies, check=check_bf16, cases=bf16_cases,
                header="bf16")
