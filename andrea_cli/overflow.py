"""Scores past what float32 holds, said in plain words: the kernels compute Q·K^T in float32,
so a score beyond 3.4e38 becomes inf, and the softmax of a row holding inf is NaN."""

from __future__ import annotations

import math

import numpy as np

FLOAT32_MAX = float(np.finfo(np.float32).max)
NOTICE_START = "the largest |Q·K^T| is "  # how overflow_notice's line begins, so the API can pick it out
ROWS_PER_CHUNK = 1024  # float64 score rows computed at once: bounded memory at any T


def largest_score(q: np.ndarray, k: np.ndarray) -> float:
    """max |Q·K^T| over every head, in float64.                  q, k: (H, T, d_k) or (T, d_k)"""
    q64, k64 = np.asarray(q, np.float64), np.asarray(k, np.float64)
    if q64.ndim == 2:
        q64, k64 = q64[None], k64[None]
    largest = 0.0
    for h in range(q64.shape[0]):
        for r0 in range(0, q64.shape[1], ROWS_PER_CHUNK):
            s = q64[h, r0:r0 + ROWS_PER_CHUNK] @ k64[h].T  # (rows, T)
            largest = max(largest, float(np.abs(s).max(initial=0.0)))
    return largest


def is_overflow_notice(notice: str) -> bool:
    return notice.startswith(NOTICE_START)


def overflow_notice(q: np.ndarray, k: np.ndarray) -> str | None:
    """One line when some |Q·K^T| is past float32's largest value, else None. A bound comes first
    (|q_i·k_j| <= d_k max|q| max|k|), so inputs of ordinary size cost two maxima, no product."""
    if not isinstance(q, np.ndarray) or not isinstance(k, np.ndarray) or q.size == 0 or k.size == 0:
        return None  # inputs already on a GPU (the Python API) are not read back for this
    with np.errstate(over="ignore"):
        bound = q.shape[-1] * float(np.abs(q, dtype=np.float64).max()) * float(np.abs(k, dtype=np.float64).max())
    if bound <= FLOAT32_MAX:
        return None
    largest = largest_score(q, k)
    if largest <= FLOAT32_MAX:
        return None
    divide_by = 10.0 ** math.floor(math.log10(math.sqrt(largest)))  # brings the largest score near 1-100
    return (f"{NOTICE_START}{largest:.3g}, past float32's largest value ({FLOAT32_MAX:.3g}): the "
            f"kernels' scores overflow to inf, so the weights and the output are inf/NaN; scale the inputs "
            f"down (divide Q and K by {divide_by:.0e}, say)")
