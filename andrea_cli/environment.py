"""What this machine offers andrea: versions, the kernel file, and each backend's status."""

from __future__ import annotations

import platform
import shutil
import subprocess

import numpy as np

from andrea_cli import __version__
from andrea_cli.backends import make_backend
from andrea_cli.errors import first_line
from andrea_cli.backends.cpu_build import cache_dir
from andrea_cli.kernel_file import kernel_names, packaged_kernel_path


def _cuda_version(encoded: int) -> str | None:
    """CUDA encodes 13.2 as 13020; a driver version of 0 means no driver is installed."""
    if not encoded:
        return None
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def _cupy_versions() -> dict:
    try:
        import cupy
    except Exception as exc:
        return {"cupy": None, "cupy_error": first_line(exc)}
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


def _compiler_version() -> str | None:
    for name in ("g++", "c++", "clang++"):
        if shutil.which(name):
            try:
                return subprocess.run([name, "--version"], capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
            except (OSError, subprocess.SubprocessError, IndexError):
                return None
    return None


def describe_environment() -> dict:
    kernel = packaged_kernel_path()
    backends = {}
    gpu = None
    for name in ("cuda", "cpu", "numpy"):
        backend = make_backend(name, kernel)
        status = backend.available()
        backends[name] = {"available": status.ok, "reason": status.reason or None, "fix": status.fix or None}
        if name == "cuda" and status.ok:
            gpu = backend.device_name()
    return {
        "andrea": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        **_cupy_versions(),
        "cxx": _compiler_version(),
        "gpu": gpu,
        "kernel_file": str(kernel),
        "cpu_build_cache": str(cache_dir()),
        "kernels": kernel_names(kernel),
        "backends": backends,
    }
