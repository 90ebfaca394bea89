"""The sizes a run takes when none are given: one head of ANDREA-120M (T 1024, d_k 64, d_v = d_k);
bench's BLAS threads.
No imports, so the command line can show them in its help at no cost."""

from __future__ import annotations

DEFAULT_T = 1024  # ANDREA-120M's context length
DEFAULT_D_K = 64  # ANDREA-120M's head width: d_model 768 / 12 heads
DEFAULT_BLAS_THREADS = 1  # bench's CPU side: one core each; on a small or shared machine more spin against each other


def head_sizes(T: int | None, d_k: int | None, d_v: int | None) -> tuple[int, int, int]:
    """(T, d_k, d_v) as given, each missing one from the defaults; d_v defaults to d_k."""
    T = DEFAULT_T if T is None else T
    d_k = DEFAULT_D_K if d_k is None else d_k
    return T, d_k, d_k if d_v is None else d_v
