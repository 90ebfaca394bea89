"""The GPU backend: the kernel file through cupy.RawModule. The only module that imports cupy."""

from __future__ import annotations

import time
from pathlib import Path


from andrea_cli.backends.base import Availability, StageOutputs
from andrea_cli.backends.fused import FusedOutputs, run_fused
from andrea_cli.backends.staged import DEFAULT_PLAN, LaunchPlan, run_staged
from andrea_cli.kernel_file import kernel_names
from andrea_cli.masks import MaskSpec

INSTALL_HINT = 'pip install "andrea[cuda]" (cupy-cuda13x and NVRTC) on a machine with an NVIDIA GPU and driver'


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def cuda_availability() -> Availability:
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        return Availability(False, f"cupy is not importable ({_short(exc)})", INSTALL_HINT)
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # cupy imports fine without a GPU; the driver call is what fails
        return Availability(False, f"no CUDA device answers ({_short(exc)})", INSTALL_HINT)
    if count < 1:
        return Availability(False, "no CUDA device found", INSTALL_HINT)
    return Availability(True)


class _EventClock:
    """Per-stage GPU time from CUDA events: the kernels' own time, not Python's launch overhead."""

    def __init__(self, cupy):
        self._cupy = cupy
        self._events: dict[str, tuple] = {}

    def start(self, stage: str) -> None:
        begin, end = self._cupy.cuda.Event(), self._cupy.cuda.Event()
        begin.record()
        self._events[stage] = (begin, end)

    def stop(self, stage: str) -> None:
        self._events[stage][1].record()

    def elapsed_ms(self) -> dict[str, float]:
        self._cupy.cuda.get_current_stream().synchronize()
        return {s: self._cupy.cuda.get_elapsed_time(b, e) for s, (b, e) in self._events.items()}


class _CupyDevice:
    warmup_runs = 1

    def __init__(self, module, cupy):
        self._module, self._cupy = module, cupy
        self._functions: dict[str, object] = {}
        self.name = "cuda"

    def get_function(self, name):
        if name not in self._functions:
            self._functions[name] = self._module.get_function(name)
        return self._functions[name]

    def to_device(self, a):
        return self._cupy.asarray(a)

    def empty(self, shape):
        return self._cupy.empty(shape, dtype=self._cupy.float32)

    def to_host(self, a):
        return self._cupy.asnumpy(a)

    def clock(self):
        return _EventClock(self._cupy)


class CudaBackend:
    name = "cuda"

    def __init__(self, kernel_path: Path, plan: LaunchPlan = DEFAULT_PLAN):
        self.kernel_path = Path(kernel_path)
        self.plan = plan
        self._device: _CupyDevice | None = None
        self._load_ms = 0.0

    def available(self) -> Availability:
        return cuda_availability()

    def device_name(self) -> str:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return f"{name} (sm_{props['major']}{props['minor']}, {props['multiProcessorCount']} SMs)"

    def device(self) -> _CupyDevice:
        """Compile the kernel file once (NVRTC; cupy caches the binary on disk) and keep it."""
        if self._device is None:
            import cupy

            start = time.perf_counter()
            module = cupy.RawModule(code=self.kernel_path.read_text(), options=("-std=c++17",))
            for name in kernel_names(self.kernel_path):
                module.get_function(name)  # compiles now, so the first stage's timing is clean
            self._load_ms = (time.perf_counter() - start) * 1e3
            self._device = _CupyDevice(module, cupy)
        return self._device

    def attention(self, q, k, v, *, mask: MaskSpec, scaled: bool, plan: LaunchPlan | None = None) -> StageOutputs:
        result = run_staged(self.device(), q, k, v, mask=mask, scaled=scaled, plan=plan or self.plan)
        result.load_ms = self._load_ms
        return result

    def attention_fused(self, q, k, v, *, mask: MaskSpec, scaled: bool, variant: int | None = None) -> FusedOutputs:
        result = run_fused(self.device(), q, k, v, mask=mask, scaled=scaled, variant=variant)
        result.load_ms = self._load_ms
        return result
