"""`andrea info`: what this machine offers andrea: versions, the kernel file, and each backend's status."""

from __future__ import annotations

import platform
import subprocess

import numpy as np

from andrea_cli import __version__
from andrea_cli.backends import make_backend
from andrea_cli.backends.cuda import cupy_versions
from andrea_cli.backends.cpu_runtime.build import cache_dir, compiler_version, find_compiler
from andrea_cli.backends.cpu_runtime.errors import CompilerNotFoundError
from andrea_cli.kernel_file import kernel_names, packaged_kernel_path


def _compiler_version() -> str | None:
    """The first line of `--version` of the compiler the CPU build would use, or None."""
    try:
        lines = compiler_version(find_compiler()).splitlines()
    except (CompilerNotFoundError, OSError, subprocess.SubprocessError):
        return None
    return lines[0] if lines else None


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
