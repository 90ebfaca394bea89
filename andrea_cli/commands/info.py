"""`andrea info`: what this machine offers andrea: versions, the kernel file, and each backend's status."""

from __future__ import annotations

import platform
import shutil
import subprocess

import numpy as np

from andrea_cli import __version__
from andrea_cli.backends import make_backend
from andrea_cli.backends.cuda import cupy_versions
from andrea_cli.backends.cpu_runtime.build import cache_dir
from andrea_cli.kernel_file import kernel_names, packaged_kernel_path


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
        **cupy_versions(),
        "cxx": _compiler_version(),
        "gpu": gpu,
        "kernel_file": str(kernel),
        "cpu_build_cache": str(cache_dir()),
        "kernels": kernel_names(kernel),
        "backends": backends,
    }
