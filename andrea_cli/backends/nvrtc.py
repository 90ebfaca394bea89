"""Compile the kernel file with NVRTC, no GPU needed, and read what ptxas says each kernel uses.

cupy's low-level `cupy.cuda.nvrtc` bindings load libnvrtc without touching the driver, so this
runs in CI: a compile error or a register spill in the kernel file fails there, not on a GPU."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from andrea_cli.errors import AndreaError, first_line

TARGET_ARCHS = ("sm_80", "sm_90")  # A100 and H100/H200


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


def compile_kernel_file(path: Path, arch: str) -> list[KernelResources]:
    """Compile for one architecture; AndreaError with the compiler's log on failure."""
    try:
        from cupy.cuda import nvrtc
    except Exception as exc:
        raise AndreaError(f"NVRTC is not available ({exc}); pip install \"andrea[cuda]\"") from None
    source = Path(path).read_text()
    try:
        program = nvrtc.createProgram(source, Path(path).name, [], [])
    except Exception as exc:  # libnvrtc itself missing
        raise AndreaError(f"NVRTC could not start ({first_line(exc)}); pip install \"nvidia-cuda-nvrtc==13.*\"") from None
    try:
        nvrtc.compileProgram(program, [f"--gpu-architecture={arch}", "--std=c++17", "--ptxas-options=-v"])
    except nvrtc.NVRTCError:
        log = nvrtc.getProgramLog(program)
        first = next((line for line in log.splitlines() if "error" in line), log.strip()[:200])
        raise AndreaError(f"{Path(path).name} does not compile for {arch}: {first.strip()}") from None
    finally:
        log = nvrtc.getProgramLog(program)
        nvrtc.destroyProgram(program)
    return parse_ptxas_log(log)
