"""What every backend offers: one small interface, and the arrays a run produces."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from andrea_cli.errors import AndreaError, KernelError
from andrea_cli.masks import MaskSpec

STAGES = ("scores", "scale", "mask", "softmax", "av")


class DeviceOutOfMemory(AndreaError, MemoryError):
    """The device had no room for an allocation: a user error (a smaller size fits), and a
    MemoryError, so a sweep can skip the size and carry on."""


class DeviceFault(KernelError):
    """The device faulted (an illegal address in a kernel, say): on a GPU the context is then
    unusable, so nothing more can run in this process."""


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str = ""  # why not, shortened to one line, when ok is False
    fix: str = ""  # what to install or pass to make it work
    setup: bool = False  # what is missing is this machine's (a C++ compiler): SetupError, exit 1


@dataclass
class StageOutputs:
    """Every intermediate of one run, on the host. Shapes: (H, T, T) except output (H, T, d_v).

    `scaled` and `masked` are the same array as their input when that stage did not run
    (--no-scale, --mask none)."""

    scores: np.ndarray  # Q·K^T, unscaled
    scaled: np.ndarray  # scores * 1/sqrt(d_k)
    masked: np.ndarray  # hidden entries at -inf
    weights: np.ndarray  # row softmax
    output: np.ndarray  # weights · V
    timings_ms: dict[str, float]  # per stage that ran, and "total" (the stages' sum)
    transfer_ms: dict[str, float] = field(default_factory=dict)  # "h2d", "d2h" where they exist
    load_ms: float = 0.0  # compiling or loading the kernel module, paid once per process
    device_output: Any = field(default=None, repr=False)  # output where the kernel wrote it (a GPU array on cuda)
    kernels: dict[str, str] = field(default_factory=dict)  # {stage: the kernel it ran}; none on the NumPy path


class Backend(Protocol):
    name: str

    def available(self) -> Availability: ...

    def device_name(self) -> str: ...

    def attention(
        self, q: np.ndarray, k: np.ndarray, v: np.ndarray, *, mask: MaskSpec, scaled: bool
    ) -> StageOutputs:
        """q, k: (H, T, d_k) float32; v: (H, T, d_v) float32."""
        ...
