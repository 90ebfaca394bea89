"""The factor the scores are multiplied by, resolved once per run: the course's 1/sqrt(d_k) (True
or None), none (False, --no-scale), or a factor the caller gives (the Python API's scale=0.125,
as PyTorch's SDPA takes it). The backends resolve it where a run enters them; the launchers read
the Scale they are handed and never interpret the convention again."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Scale:
    factor: float  # what the scores are multiplied by: 1/sqrt(d_k), 1.0 with --no-scale, or the one given
    applied: bool = True  # False: --no-scale, and no scale stage runs
    given: bool = False  # the caller's own factor, not the course's

    def __bool__(self) -> bool:
        """A Scale reads as `scaled` always has: whether a scale stage runs."""
        return self.applied

    def kernel_given(self) -> float:
        """scale_kernel1's last argument: 0 for the course's factor (the kernel works out
        1.0f / sqrtf(d_k) itself), else the factor given."""
        return self.factor if self.given else 0.0


def given_scale(scaled) -> bool:
    """Whether `scaled` is a factor given as a number rather than True (1/sqrt(d_k)) or False."""
    if isinstance(scaled, Scale):
        return scaled.given
    return isinstance(scaled, (float, np.floating)) and not isinstance(scaled, bool)


def resolve_scale(d_k: int, scaled) -> Scale:
    """The one reading of the convention (a Scale passes through as it is)."""
    if isinstance(scaled, Scale):
        return scaled
    if given_scale(scaled):
        return Scale(float(scaled), True, True)
    return Scale(1.0 / math.sqrt(d_k)) if scaled else Scale(1.0, False)


def course_scale(d_k: int) -> Scale:
    """The course's 1/sqrt(d_k): what bench and the static bounds launch with."""
    return resolve_scale(d_k, True)
