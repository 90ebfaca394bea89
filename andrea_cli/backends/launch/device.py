"""The scaffold every launcher shares: a KernelDevice (cupy on a GPU, the CPU build without one),
the inputs uploaded and the results downloaded under one timed clock (h2d, d2h), and the
launches run warm-up times untimed and once timed.

The launchers (staged.py, fused.py, fused_bf16.py, backward.py) say only which arrays go up,
what one run launches, and which arrays come back."""

from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np


class StageClock(Protocol):
    def start(self, stage: str) -> None: ...

    def stop(self, stage: str) -> None: ...

    def elapsed_ms(self) -> dict[str, float]:
        """Waits for the device, then returns the time of each stage started and stopped."""
        ...


class KernelDevice(Protocol):
    name: str
    warmup_runs: int  # untimed runs before the timed one (GPU clocks and caches settle)

    def get_function(self, name: str) -> Callable[..., None]: ...

    def to_device(self, a: np.ndarray) -> Any: ...

    def empty(self, shape: tuple[int, ...], dtype=np.float32) -> Any: ...

    def to_host(self, a: Any) -> np.ndarray: ...

    def clock(self) -> StageClock: ...


class NoClock:
    """A launch outside a timed run (bench times the launch itself, verify only checks it)."""

    def start(self, stage: str) -> None:
        pass

    def stop(self, stage: str) -> None:
        pass


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


class Transfers:
    """The copies of one run between host and device, timed as "h2d" and "d2h"."""

    def __init__(self, dev: KernelDevice):
        self.dev = dev
        self.clock = dev.clock()

    def upload(self, *arrays) -> list[Any]:
        self.clock.start("h2d")
        on_device = [self.dev.to_device(a) for a in arrays]  # float32, contiguous, on the device
        self.clock.stop("h2d")
        return on_device

    def download(self, *arrays) -> list[np.ndarray]:
        self.clock.start("d2h")
        on_host = [self.dev.to_host(a) for a in arrays]
        self.clock.stop("d2h")
        return on_host

    def elapsed_ms(self) -> dict[str, float]:
        return self.clock.elapsed_ms()


def timed_runs(dev: KernelDevice, launch: Callable[[StageClock], dict[str, str]]
               ) -> tuple[dict[str, float], dict[str, str]]:
    """`launch(clock)` run dev.warmup_runs times untimed, then once more: that run's stage times,
    and what it returned ({stage: the kernel it ran})."""
    for _ in range(dev.warmup_runs + 1):
        clock = dev.clock()
        ran = launch(clock)
        timings = clock.elapsed_ms()
    return timings, ran
