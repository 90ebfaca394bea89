"""`andrea verify`: every kernel of the kernel file against the float64 NumPy path, over a sweep
of shapes chosen to hit every edge, with tolerances derived in tolerances.py and the invariants
the course states checked exactly.

    case.py                 a case, its inputs and exact answer, the results, Family (what a family provides)
    staged.py               the five stage kernels, stage by stage, and the invariants
    fused.py                the fused kernels, end to end
    fused_bf16.py           the tensor-core kernel, against bf16_attention.py
    backward.py             the backward kernels, staged stage by stage and end to end, and fused end to end
    boundaries.py           the kernels' tile rules, the edges the sweep must reach
    families.py             the registry: a new family is its own module and one line there
    run.py                  the sweep and the run
    tolerances.py           the forward's bounds, derived from the float32 operations each kernel does
    tolerances_backward.py  the backward's
    bf16_attention.py       the bf16 kernel's arithmetic in float64, and its bound
"""

from andrea_cli.verification.case import H_VERIFY, Case, CaseResult, StageCheck, VerifyReport, compare  # noqa: F401
from andrea_cli.verification.families import COLUMN_STAGES, FAMILIES, STAGE_ORDER  # noqa: F401
from andrea_cli.verification.run import check_case, run_verify, sweep  # noqa: F401
