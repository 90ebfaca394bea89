"""The GPU backend: the kernel file compiled by NVRTC for this GPU, loaded with cupy.RawModule."""

from __future__ import annotations

import contextlib

import numpy as np

from andrea_cli.backends.base import Availability, DeviceFault, DeviceOutOfMemory
from andrea_cli.backends.kernel_backend import KernelFileBackend
from andrea_cli.backends.launch.catalogue import check_kernel_runs
from andrea_cli.backends.toolchain.cuda_arch import compile_target
from andrea_cli.backends.toolchain.cuda_setup import read_cuda_setup
from andrea_cli.errors import AndreaError, first_line
from andrea_cli.kernel_file import kernel_names

INSTALL_HINT = ('pip install "andrea[cuda13]" for a CUDA 13 driver, "andrea[cuda12]" for CUDA 12, '
                'on a machine with an NVIDIA GPU')


def cuda_availability() -> Availability:
    """Whether a GPU answers; where not and the driver is there, whether the installed cupy
    and NVRTC fit it, naming the extra that does (a cupy-cuda13x against a CUDA 12 driver fails
    with only "insufficient driver")."""
    if read_cuda_setup().driver is None:  # the real cause, whatever cupy does; and importing cupy
        # to learn it costs ~0.25 s of CPU, a quarter of the main job's (scripts/bench_main_job.py)
        return Availability(False, "no NVIDIA driver here (no GPU to run on)", INSTALL_HINT)
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        return _unavailable(f"cupy is not importable ({first_line(exc)})")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # cupy imports fine without a GPU; the driver call is what fails
        return _unavailable(f"no CUDA device answers ({first_line(exc)})")
    if count < 1:
        return _unavailable("no CUDA device found")
    try:
        cupy.cuda.nvrtc.getVersion()
    except Exception as exc:  # cupy talks to the GPU but cannot compile: no NVRTC of its major
        return _unavailable(f"NVRTC, which compiles the kernel file, does not load ({first_line(exc)})")
    return Availability(True)


def to_gpu(a: np.ndarray):
    """A host array copied to the current GPU (the Python API hands a cupy caller's result back there)."""
    import cupy

    with gpu_errors("copying the result to the GPU"):
        return cupy.asarray(a)


def _unavailable(reason: str) -> Availability:
    mismatch = read_cuda_setup().problem()
    if mismatch is not None:
        return Availability(False, mismatch.reason, mismatch.fix)
    return Availability(False, reason, INSTALL_HINT)


def _cuda_version(encoded: int) -> str | None:
    """CUDA encodes 13.2 as 13020; a driver version of 0 means no driver is installed."""
    if not encoded:
        return None
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def cupy_versions() -> dict:
    """cupy's, the CUDA runtime's, the driver's and NVRTC's versions, each None with its error
    when it cannot be read (`andrea info`)."""
    try:
        import cupy
    except Exception as exc:  # the same keys either way: a script reads them without a KeyError
        return {"cupy": None, "cupy_error": first_line(exc), "cuda_runtime": None, "cuda_driver": None, "nvrtc": None}
    found: dict = {"cupy": cupy.__version__}
    probes = {
        "cuda_runtime": lambda: _cuda_version(cupy.cuda.runtime.runtimeGetVersion()),
        "cuda_driver": lambda: _cuda_version(cupy.cuda.runtime.driverGetVersion()),
        "nvrtc": lambda: ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
    }
    for key, probe in probes.items():
        try:
            found[key] = probe()
        except Exception as exc:  # no driver, no NVRTC library: say so, do not fail
            found[key] = None
            found[f"{key}_error"] = first_line(exc)
    return found


# CUDA errors after which the context is lost: every later call fails the same way.
_STICKY = ("ILLEGAL_ADDRESS", "IllegalAddress", "LAUNCH_FAILED", "LaunchFailure", "LAUNCH_TIMEOUT", "LaunchTimeout",
           "MISALIGNED", "Misaligned",
           "ILLEGAL_INSTRUCTION", "IllegalInstruction", "HARDWARE_STACK", "HardwareStack", "ASSERT", "Assert")


@contextlib.contextmanager
def gpu_errors(what: str):
    """cupy's driver, runtime and out-of-memory errors as one-line AndreaErrors. Launches are
    asynchronous, so a kernel's fault surfaces at the next synchronising call, not its launch:
    every device call goes through here."""
    try:
        yield
    except AndreaError:
        raise
    except Exception as exc:  # CUDADriverError, CUDARuntimeError, OutOfMemoryError, CompileException
        text = first_line(exc)
        if "OutOfMemory" in type(exc).__name__ or "out of memory" in text.lower():
            raise DeviceOutOfMemory(f"{what}: the GPU ran out of memory ({text}); use a smaller --T") from None
        if any(code in str(exc) for code in _STICKY):
            raise DeviceFault(f"{what}: the GPU faulted ({text}); a kernel read or wrote out of bounds "
                              "(try --backend cpu, or verify --backend cpu, to find where)") from None
        raise AndreaError(f"{what}: {text}") from None


STATIC_SHARED_LIMIT = 48 * 1024  # dynamic shared memory a block gets without opting in


def _checked_launch(name: str, kernel):
    def launch(grid, block, args, shared_mem=0):
        with gpu_errors(f"{name} launch"):
            # beyond 48 KiB a kernel must opt in (cudaFuncAttributeMaxDynamicSharedMemorySize)
            if shared_mem > STATIC_SHARED_LIMIT and kernel.max_dynamic_shared_size_bytes < shared_mem:
                kernel.max_dynamic_shared_size_bytes = shared_mem
            kernel(grid, block, args, shared_mem=shared_mem)

    return launch


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
        with gpu_errors("waiting for the kernels"):
            self._cupy.cuda.get_current_stream().synchronize()
        return {s: self._cupy.cuda.get_elapsed_time(b, e) for s, (b, e) in self._events.items()}


class _CupyDevice:
    warmup_runs = 1

    def __init__(self, module, cupy, compute_capability: tuple[int, int]):
        self._module, self._cupy = module, cupy
        self.compute_capability = compute_capability
        self._functions: dict[str, object] = {}
        self.name = "cuda"

    def get_function(self, name):
        if name not in self._functions:
            check_kernel_runs(name, self.compute_capability)  # one line, not a driver error at launch
            self._functions[name] = _checked_launch(name, self._module.get_function(name))
        return self._functions[name]

    def to_device(self, a):
        """NumPy arrays are copied over; a cupy array, or any CUDA tensor offering DLPack (torch),
        is used where it is, without a trip through the host (converted on the GPU if it is not
        contiguous float32)."""
        cupy = self._cupy
        with gpu_errors("copying the inputs to the GPU"):
            if not isinstance(a, (cupy.ndarray, np.ndarray)) and hasattr(a, "__dlpack__"):
                a = cupy.from_dlpack(a)
            return cupy.ascontiguousarray(cupy.asarray(a), dtype=cupy.float32)

    def empty(self, shape, dtype=np.float32):
        with gpu_errors(f"allocating {shape} on the GPU"):
            return self._cupy.empty(shape, dtype=dtype)

    def to_host(self, a):
        with gpu_errors("copying results from the GPU"):
            return self._cupy.asnumpy(a)

    def clock(self):
        return _EventClock(self._cupy)

    def tensor_map(self, x, shape: tuple[int, ...], box: tuple[int, ...]):
        """A TMA tensor map of device array x viewed as `shape`, encoded by the driver, in device memory."""
        from andrea_cli.backends.cuda_tensor_map import encode_tiled

        encoded = encode_tiled(x.data.ptr, x.itemsize, shape, box)
        with gpu_errors("copying a tensor map to the GPU"):
            return self._cupy.asarray(encoded)


class CudaBackend(KernelFileBackend):
    name = "cuda"

    def available(self) -> Availability:
        return cuda_availability()

    def _properties(self) -> dict:
        import cupy

        with gpu_errors("reading the GPU's properties"):
            return cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)

    def device_name(self) -> str:
        props = self._properties()
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return f"{name} (sm_{props['major']}{props['minor']}, {props['multiProcessorCount']} SMs)"

    def compute_capability(self) -> tuple[int, int]:
        props = self._properties()
        return int(props["major"]), int(props["minor"])

    def _load(self) -> _CupyDevice:
        """NVRTC compiles the kernel file into a cubin for this GPU's own sm_XX (cached on disk;
        see cuda_arch.py for why not PTX); every kernel is fetched now, so the first stage's
        timing is clean and a compile error comes up front."""
        import cupy

        from andrea_cli.backends.toolchain.nvrtc import compiled_kernel_file, nvrtc_version, supported_archs

        cc = self.compute_capability()
        target = compile_target(cc, supported_archs(), nvrtc_version())
        binary = compiled_kernel_file(self.kernel_path, target)  # AndreaError naming NVRTC's first error
        with gpu_errors(f"loading {self.kernel_path.name} compiled for {target.arch}"):
            module = cupy.RawModule(path=str(binary))
            for name in kernel_names(self.kernel_path):
                module.get_function(name)
        return _CupyDevice(module, cupy, cc)
