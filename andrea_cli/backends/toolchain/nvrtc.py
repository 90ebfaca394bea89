"""Compile the kernel file with NVRTC, no GPU needed: a cubin for the GPU at hand (cached on
disk), or a compile-only check that reads what ptxas says each kernel uses.

cupy's low-level `cupy.cuda.nvrtc` bindings load libnvrtc without touching the driver, so this
runs in CI: a compile error or a register spill in the kernel file fails there, not on a GPU."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from andrea_cli.backends.toolchain.cache import cache_root
from andrea_cli.backends.toolchain.cuda_arch import CompileTarget
from andrea_cli.backends.toolchain.cuda_setup import read_cuda_setup
from andrea_cli.errors import AndreaError, first_line

TARGET_ARCHS = ("sm_80", "sm_90", "sm_90a")  # A100 and H100/H200 (sm_90a: with wgmma, what an H100 gets)
OLDEST_ARCH = "sm_75"  # Turing: the oldest GPU CUDA 13 compiles for; the file must build for it too


@dataclass(frozen=True)
class KernelResources:
    kernel: str
    arch: str
    registers: int
    shared_bytes: int  # static shared memory; dynamic shared memory is set per launch
    stack_bytes: int
    spill_stores: int
    spill_loads: int


_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(log: str) -> list[KernelResources]:
    found: list[KernelResources] = []
    current: dict | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = {"kernel": m.group(1), "arch": m.group(2), "stack_bytes": 0, "spill_stores": 0,
                       "spill_loads": 0, "shared_bytes": 0}
        elif current is not None and (m := _FRAME.search(line)):
            current.update(stack_bytes=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif current is not None and (m := _USED.search(line)):
            current["registers"] = int(m.group(1))
            if s := _SMEM.search(line):
                current["shared_bytes"] = int(s.group(1))
            found.append(KernelResources(**current))
            current = None
    return found


def _nvrtc():
    try:
        from cupy.cuda import nvrtc
    except Exception as exc:
        raise AndreaError(f"NVRTC is not available ({first_line(exc)}); {read_cuda_setup().install}") from None
    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    try:
        return tuple(_nvrtc().getVersion())
    except AndreaError:
        raise
    except Exception as exc:  # the bindings import, but libnvrtc is missing or of another major
        raise AndreaError(f"NVRTC could not start ({first_line(exc)}); {read_cuda_setup().install}") from None


def supported_archs() -> tuple[int, ...]:
    """What this NVRTC compiles for: (75, 80, 86, ..., 120) for CUDA 13."""
    nvrtc_version()  # a one-line error where libnvrtc is missing
    return tuple(_nvrtc().getSupportedArchs())


def _compile(path: Path, options: tuple[str, ...], fetch=None) -> tuple[str, bytes | None]:
    """NVRTC's log and, with `fetch(nvrtc, program)`, what it produced; AndreaError naming the
    first error line on failure."""
    nvrtc = _nvrtc()
    nvrtc_version()
    arch = next((o.split("=", 1)[1] for o in options if o.startswith("--gpu-architecture=")), "the GPU")
    program = nvrtc.createProgram(Path(path).read_text(), Path(path).name, [], [])
    try:
        nvrtc.compileProgram(program, list(options))
        produced = fetch(nvrtc, program) if fetch else None
    except nvrtc.NVRTCError:
        log = nvrtc.getProgramLog(program)
        first = next((line for line in log.splitlines() if "error" in line), log.strip()[:200])
        raise AndreaError(f"{Path(path).name} does not compile for {arch}: {first.strip()}") from None
    finally:
        log = nvrtc.getProgramLog(program)
        nvrtc.destroyProgram(program)
    return log, produced


def compile_kernel_file(path: Path, arch: str) -> list[KernelResources]:
    """Compile for one architecture and read each kernel's resources from ptxas."""
    log, _ = _compile(path, (f"--gpu-architecture={arch}", "--std=c++17", "--ptxas-options=-v"))
    return parse_ptxas_log(log)


def compiled_kernel_file(path: Path, target: CompileTarget) -> Path:
    """The kernel file compiled for one target (a cubin, or PTX for a GPU newer than NVRTC),
    cached on disk under a key of all that decides the binary: source, options, NVRTC's version."""
    source = Path(path).read_bytes()
    key = hashlib.sha256(b"\0".join([source, " ".join(target.options()).encode(),
                                      repr(nvrtc_version()).encode()])).hexdigest()[:20]
    out = cache_root() / "cuda" / f"{Path(path).stem}-{target.arch}-{key}.{target.kind}"
    if out.is_file():
        return out

    def fetch(nvrtc, program) -> bytes:
        binary = nvrtc.getCUBIN(program) if target.kind == "cubin" else nvrtc.getPTX(program)
        return binary.encode() if isinstance(binary, str) else binary

    _, binary = _compile(path, target.options(), fetch)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
    with os.fdopen(fd, "wb") as f:
        f.write(binary)
    os.replace(temporary, out)  # concurrent compiles of one key never see half a file
    return out
