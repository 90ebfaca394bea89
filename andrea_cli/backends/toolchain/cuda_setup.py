"""Which CUDA the NVIDIA driver speaks and which cupy wheel is installed, read without a GPU and
without importing cupy, so `info` and the auto fallback can name the extra that fits.

A cupy wheel is built for one CUDA major (cupy-cuda12x, cupy-cuda13x) and needs a driver of that
major or newer; within a major, CUDA's minor-version compatibility covers the rest (for cubins:
see toolchain/cuda_arch.py)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from importlib import metadata

# The driver library: Linux, then Windows. cuDriverGetVersion needs no cuInit and no device.
DRIVER_LIBRARIES = ("libcuda.so.1", "libcuda.so", "nvcuda.dll")
# The extras of pyproject.toml, by the CUDA major their cupy wheel and NVRTC are built for.
EXTRAS = {12: "cuda12", 13: "cuda13"}
CUPY_WHEELS = {"cupy-cuda13x": 13, "cupy-cuda12x": 12, "cupy-cuda11x": 11, "cupy": None}  # None: built from source
NVRTC_WHEELS = {"nvidia-cuda-nvrtc": None, "nvidia-cuda-nvrtc-cu12": 12, "nvidia-cuda-nvrtc-cu11": 11}  # None: its version's major


@dataclass(frozen=True)
class Mismatch:
    reason: str  # names the extra that fits, so a one-line fallback notice carries it
    fix: str  # the command to run

    def __str__(self) -> str:
        return f"{self.reason}; {self.fix}"


@dataclass(frozen=True)
class CudaSetup:
    driver: tuple[int, int] | None  # the CUDA version the driver speaks; None: no driver library
    cupy_wheels: dict[str, int | None]  # installed cupy distributions -> their CUDA major
    nvrtc_wheels: dict[str, int]  # installed NVRTC wheels -> their CUDA major

    @property
    def driver_text(self) -> str | None:
        return None if self.driver is None else f"{self.driver[0]}.{self.driver[1]}"

    @property
    def extra(self) -> str:
        """The extra to install for this driver: cuda13 when no driver tells otherwise."""
        if self.driver is None or self.driver[0] >= 13:
            return EXTRAS[13]
        return EXTRAS[12]

    @property
    def install(self) -> str:
        return f'pip install "andrea[{self.extra}]"'

    def problem(self) -> Mismatch | None:
        """What does not fit and the command that mends it, or None when nothing visible is wrong."""
        if self.driver is None:
            return None  # no NVIDIA driver: the plain "no GPU" message says enough
        major = self.driver[0]
        if major < min(EXTRAS):
            return Mismatch(f"the NVIDIA driver speaks CUDA {self.driver_text}, older than the CUDA 12 andrea needs",
                            "update the NVIDIA driver")
        if len(self.cupy_wheels) > 1:
            names = sorted(self.cupy_wheels)
            return Mismatch(f"several cupy packages are installed ({', '.join(names)}); keep the {self.extra} extra's",
                            f"pip uninstall -y {' '.join(names)} && {self.install}")
        if not self.cupy_wheels:
            return Mismatch(f"cupy is not installed; this driver (CUDA {self.driver_text}) takes the {self.extra} extra",
                            self.install)
        wheel, built_for = next(iter(self.cupy_wheels.items()))
        if built_for is not None and built_for > major:
            return Mismatch(f"{wheel} needs a CUDA {built_for} driver and this one speaks CUDA {self.driver_text}: "
                            f"install the {self.extra} extra", f"pip uninstall -y {wheel} && {self.install}")
        if built_for is not None and built_for < min(EXTRAS):
            return Mismatch(f"{wheel} is for CUDA {built_for}, older than andrea supports: install the {self.extra} extra",
                            f"pip uninstall -y {wheel} && {self.install}")
        if built_for is not None and self.nvrtc_wheels and built_for not in self.nvrtc_wheels.values():
            found = ", ".join(f"{name} (CUDA {m})" for name, m in sorted(self.nvrtc_wheels.items()))
            extra = EXTRAS.get(built_for, self.extra)
            return Mismatch(f"{wheel} is for CUDA {built_for} but the NVRTC installed is {found}: "
                            f"install the {extra} extra", f'pip install "andrea[{extra}]"')
        return None


def driver_cuda_version(libraries: tuple[str, ...] = DRIVER_LIBRARIES) -> tuple[int, int] | None:
    """The CUDA version the installed driver speaks, e.g. (12, 4), from cuDriverGetVersion.
    Works where the driver is installed but no device answers; None where there is no driver."""
    for name in libraries:
        try:
            library = ctypes.CDLL(name)
            get_version = library.cuDriverGetVersion
        except (OSError, AttributeError):
            continue
        encoded = ctypes.c_int(0)
        if get_version(ctypes.byref(encoded)) == 0 and encoded.value > 0:
            return encoded.value // 1000, encoded.value % 1000 // 10  # CUDA encodes 12.4 as 12040
    return None


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def read_cuda_setup(libraries: tuple[str, ...] = DRIVER_LIBRARIES) -> CudaSetup:
    cupy_wheels = {name: major for name, major in CUPY_WHEELS.items() if _installed(name)}
    nvrtc_wheels = {}
    for name, major in NVRTC_WHEELS.items():
        version = _installed(name)
        if version:
            nvrtc_wheels[name] = major if major is not None else int(version.split(".")[0])
    return CudaSetup(driver_cuda_version(libraries), cupy_wheels, nvrtc_wheels)
