"""Every kernel family verify checks, in the order its checks run and its columns are shown.
A new family is its own module with a FAMILY (see case.Family) and one line in each list here."""

from __future__ import annotations

from andrea_cli.verification.backward import FAMILY as BACKWARD
from andrea_cli.verification.backward_bf16 import FAMILY as BACKWARD_BF16
from andrea_cli.verification.decode import FAMILY as DECODE
from andrea_cli.verification.fused import FAMILY as FUSED
from andrea_cli.verification.fused_bf16 import FAMILY as FUSED_BF16
from andrea_cli.verification.staged import FAMILY as STAGED

FAMILIES = (
    STAGED,
    FUSED,
    FUSED_BF16,
    BACKWARD,
    BACKWARD_BF16,
    DECODE,
)

STAGE_ORDER = tuple(name for family in FAMILIES for name in family.table_columns)  # verify's table columns
# each column -> the stages it shows (the worst of them, for a group)
COLUMN_STAGES = {name: family.column_stages(name) for family in FAMILIES for name in family.table_columns}
