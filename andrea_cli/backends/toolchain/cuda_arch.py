"""What NVRTC compiles the kernel file into for one GPU, and with what compute capabilities.

A cubin for the device's own sm_XX, never PTX for the driver to finish: NVRTC is often newer
than the driver (a 13.5 NVRTC on a 13.0 driver, a 12.9 one on a 12.2 driver). CUDA's minor-version
compatibility lets such a driver load a cubin, but PTX from the newer compiler would have to be
JIT-compiled by a driver older than its PTX version, and fails (CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
Pure functions: the choice is tested without a GPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from andrea_cli.errors import AndreaError

# bf16 mma.sync (m16n8k16), bf16 conversions, ldmatrix and cp.async came with Ampere; Hopper's
# wgmma (FlashAttention-3's way) exists only in sm_90a, the architecture-specific target of
# compute capability 9.0 exactly: its cubin runs on H100/H200 and on no other GPU, older or newer
# (a Blackwell has no wgmma). Which kernel needs which: the kernel table (backends/launch/catalogue.py).
TENSOR_CORE_CC = (8, 0)
WGMMA_CC = (9, 0)
ARCH_SPECIFIC_SINCE = (12, 0)  # the NVRTC that first compiles for sm_90a


@dataclass(frozen=True)
class CompileTarget:
    arch: str  # "sm_90a" / "sm_86" (a cubin) or "compute_120" (PTX, only for a GPU newer than NVRTC)
    kind: str  # "cubin" or "ptx"

    def options(self) -> tuple[str, ...]:
        return (f"--gpu-architecture={self.arch}", "--std=c++17")


def _cc_text(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


def compile_target(cc: tuple[int, int], nvrtc_archs: Sequence[int], nvrtc_version: tuple[int, int] = (0, 0)
                   ) -> CompileTarget:
    """cc: the device's compute capability, (9, 0); nvrtc_archs: what NVRTC compiles for, as
    nvrtcGetSupportedArchs lists them (75, 80, ..., 120)."""
    device = cc[0] * 10 + cc[1]
    archs = sorted(nvrtc_archs)
    if tuple(cc) == WGMMA_CC and device in archs and tuple(nvrtc_version) >= ARCH_SPECIFIC_SINCE:
        return CompileTarget("sm_90a", "cubin")  # sm_90 plus wgmma, setmaxnreg, ...: the H100's own
    if device in archs:
        return CompileTarget(f"sm_{device}", "cubin")
    if not archs or device < archs[0]:
        fix = ('pip uninstall -y cupy-cuda13x nvidia-cuda-nvrtc && pip install "andrea[cuda12]" (CUDA 12 still '
               'compiles for it)' if nvrtc_version[0] >= 13 and cc >= (5, 0) else "this GPU is too old for andrea")
        oldest = f"sm_{archs[0]}" if archs else "none"
        raise AndreaError(f"this GPU has compute capability {_cc_text(cc)}, older than any architecture NVRTC "
                          f"{nvrtc_version[0]}.{nvrtc_version[1]} compiles for (oldest {oldest}): {fix}")
    # A cubin runs on its own major at the same or a higher minor (an sm_86 cubin on sm_89).
    same_major = [a for a in archs if a // 10 == cc[0] and a <= device]
    if same_major:
        return CompileTarget(f"sm_{same_major[-1]}", "cubin")
    # The GPU is newer than this NVRTC: only PTX carries forward across a major, and a driver
    # that knows this GPU is newer than the NVRTC, so it can JIT what NVRTC wrote.
    return CompileTarget(f"compute_{max(a for a in archs if a <= device)}", "ptx")
