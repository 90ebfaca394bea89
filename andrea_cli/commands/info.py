"""`andrea info`: what this machine offers andrea: versions, the kernel file, and each backend's status."""

from __future__ import annotations

import platform
import subprocess

import numpy as np

from andrea_cli import __version__
from andrea_cli.backends import make_backend
from andrea_cli.backends.cpu_runtime.build import cache_dir, compiler_version, find_compiler
from andrea_cli.backends.cpu_runtime.coverage import RACECHECK, REFUSED, SUPPORTED
from andrea_cli.backends.cpu_runtime.errors import CompilerNotFoundError
from andrea_cli.backends.cuda import cupy_versions
from andrea_cli.backends.toolchain.cuda_setup import read_cuda_setup
from andrea_cli.kernel_file import kernel_names, packaged_kernel_path


def _compiler_version() -> str | None:
    """The first line of `--version` of the compiler the CPU build would use, or None."""
    try:
        lines = compiler_version(find_compiler()).splitlines()
    except (CompilerNotFoundError, OSError, subprocess.SubprocessError):
        return None
    return lines[0] if lines else None


def describe_target(backend) -> str:
    """"cubin for sm_90 (NVRTC 13.5)": what the cuda backend will compile the kernel file into."""
    from andrea_cli.backends.toolchain.cuda_arch import compile_target
    from andrea_cli.backends.toolchain.nvrtc import nvrtc_version, supported_archs
    from andrea_cli.errors import AndreaError

    try:
        version = nvrtc_version()
        target = compile_target(backend.compute_capability(), supported_archs(), version)
    except AndreaError as exc:
        return f"nothing: {exc}"
    return f"{target.kind} for {target.arch} (NVRTC {version[0]}.{version[1]})"


def describe_environment() -> dict:
    kernel = packaged_kernel_path()
    backends = {}
    gpu = compiled_for = None
    for name in ("cuda", "cpu", "numpy"):
        backend = make_backend(name, kernel)
        status = backend.available()
        backends[name] = {"available": status.ok, "reason": status.reason or None, "fix": status.fix or None}
        if name == "cuda" and status.ok:
            gpu = backend.device_name()
            compiled_for = describe_target(backend)
    setup = read_cuda_setup()
    problem = setup.problem()
    versions = cupy_versions()
    if versions.get("cuda_driver") is None and setup.driver is not None:  # read without cupy or a device
        versions["cuda_driver"] = setup.driver_text
        versions.pop("cuda_driver_error", None)
    return {
        "andrea": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        **versions,
        "cuda": {
            "driver": setup.driver_text,
            "cupy_wheels": sorted(setup.cupy_wheels),
            "nvrtc_wheels": sorted(setup.nvrtc_wheels),
            "extra": setup.extra,  # the pyproject extra that fits this driver
            "problem": problem.reason if problem else None,
            "fix": problem.fix if problem else None,
        },
        "cxx": _compiler_version(),
        "gpu": gpu,
        "compiled_for": compiled_for,  # what NVRTC builds the kernel file into for this GPU
        "kernel_file": str(kernel),
        # the installed copy is what runs: an edit elsewhere (a checkout's cuda/) needs --kernel
        "edit_kernel": "to run an edited copy: andrea attend --kernel cuda/microgpt_cuda.cu "
                       "(--plan textbook: the five textbook kernels); andrea verify --kernel FILE checks it",
        "cpu_build_cache": str(cache_dir()),
        "kernels": kernel_names(kernel),
        "backends": backends,
        "cpu_build": {"supports": SUPPORTED, "refuses": REFUSED, "racecheck": RACECHECK},
    }
