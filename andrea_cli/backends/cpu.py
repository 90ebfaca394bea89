"""The kernel file compiled for the CPU (cuda/cuda_cpu_runtime.h): the same kernels, the same
launches as on a GPU, one fiber per CUDA thread. For correctness, not speed."""

from __future__ import annotations

import platform
import time
from pathlib import Path

import numpy as np

from andrea_cli.backends.base import Availability
from andrea_cli.backends.cpu_runtime import tensor_map
from andrea_cli.backends.cpu_runtime.guarded_memory import guarded_copy, guarded_empty
from andrea_cli.backends.kernel_backend import KernelFileBackend
from andrea_cli.backends.launch.staged import DEFAULT_PLAN, LaunchPlan
from andrea_cli.errors import AndreaError


class _WallClock:
    """The CPU build runs each launch to completion before returning: wall time is stage time."""

    def __init__(self):
        self._start: dict[str, float] = {}
        self._ms: dict[str, float] = {}

    def start(self, stage: str) -> None:
        self._start[stage] = time.perf_counter()

    def stop(self, stage: str) -> None:
        self._ms[stage] = (time.perf_counter() - self._start[stage]) * 1e3

    def elapsed_ms(self) -> dict[str, float]:
        return dict(self._ms)


class _HostDevice:
    warmup_runs = 0  # a CPU run is slow and its timing is not a speed figure anyway
    name = "cpu"

    def __init__(self, module):
        self._module = module

    def get_function(self, name):
        return self._module.get_function(name)

    def to_device(self, a):
        # a copy (kernels never touch the caller's array), in a guarded mapping where launches
        # are isolated: one element past its end faults
        if self._module.isolate:
            return guarded_copy(np.asarray(a, dtype=np.float32))
        return np.array(a, dtype=np.float32, order="C")

    def empty(self, shape, dtype=np.float32):
        return guarded_empty(shape, dtype) if self._module.isolate else np.empty(shape, dtype=dtype)

    def to_host(self, a):
        return a

    def tensor_map(self, x, shape: tuple[int, ...], box: tuple[int, ...]):
        """A TMA tensor map of device array x viewed as `shape` (C order), in device memory. The
        arrays live at one address in every process (guarded_memory's arena), so the map's
        address of x holds in a launch worker too."""
        encoded = tensor_map.encode_tiled(x.reshape(shape), box)
        out = self.empty(encoded.shape, np.uint8)
        out[...] = encoded
        return out

    def clock(self):
        return _WallClock()


class CpuBackend(KernelFileBackend):
    name = "cpu"

    def __init__(self, kernel_path: Path, plan: LaunchPlan = DEFAULT_PLAN, *, schedule: str = "forward",
                 sanitize: bool = False, timeout: float | None = None, racecheck: bool = False):
        """timeout: the most CPU seconds one block of a launch may run (None: the watchdog's default).
        racecheck: the ThreadSanitizer build; a data race a GPU could expose is an error."""
        super().__init__(kernel_path, plan)
        self.schedule = schedule
        self.sanitize = sanitize
        self.timeout = timeout
        self.racecheck = racecheck

    def available(self) -> Availability:
        try:
            import andrea_cli.backends.cpu_runtime.module  # noqa: F401
        except (ImportError, AndreaError) as exc:  # the runtime, or its header, is missing
            return Availability(False, f"the CPU runtime is missing ({exc})", "reinstall andrea")
        from andrea_cli.backends.cpu_runtime.build import compiler_candidates, find_compiler
        from andrea_cli.backends.cpu_runtime.errors import CompilerNotFoundError

        try:
            find_compiler()
        except CompilerNotFoundError:
            return Availability(False, f"no C++ compiler found (tried {', '.join(compiler_candidates())})",
                                "install g++ (e.g. apt-get install g++) or set CXX", setup=True)
        return Availability(True)

    def device_name(self) -> str:
        return f"CPU ({platform.machine()}), kernel file compiled with the CUDA-on-CPU runtime, {self.schedule} schedule"

    def _load(self) -> _HostDevice:
        from threadpoolctl import threadpool_limits

        from andrea_cli.backends.cpu_runtime.module import CpuModule

        # The host's BLAS (NumPy's reference sums) on one thread: its idle threads spin-wait for
        # the next call and took the cores the kernels run on (verify --quick: twice the CPU
        # time; scripts/bench_cpu_runtime.py). The references are small; one thread does them.
        threadpool_limits(1, user_api="blas")

        return _HostDevice(CpuModule(self.kernel_path, schedule=self.schedule, sanitize=self.sanitize,
                                     timeout=self.timeout, racecheck=self.racecheck))
