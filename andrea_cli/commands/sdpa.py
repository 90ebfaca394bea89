"""scaled_dot_product_attention as the Python API runs it: the arguments checked (sdpa_inputs),
the call run (runs/sdpa), the result handed back as the query's array type, dtype and device."""

from __future__ import annotations

import os
from pathlib import Path

from andrea_cli.errors import AndreaError, shown
from andrea_cli.runs.sdpa import run_sdpa
from andrea_cli.sdpa_inputs import check_call


def scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, *,
                                 backend: str, kernel):
    if not isinstance(backend, str):
        raise AndreaError(f"backend={shown(backend)}: pass 'auto', 'cuda', 'cpu' or 'numpy'")
    if kernel is not None and not isinstance(kernel, (str, os.PathLike)):
        raise AndreaError(f"kernel={shown(kernel)}: pass the path of an edited copy of the kernel file")
    call = check_call(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    out = run_sdpa(call, backend, None if kernel is None else Path(kernel))
    return call.kind.back(out)
