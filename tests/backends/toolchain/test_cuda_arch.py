"""backends/toolchain/cuda_arch.py: the compile target chosen per GPU and per NVRTC (a cubin of the
device's own architecture, sm_90a for wgmma, PTX for a GPU newer than NVRTC), and a GPU older than
NVRTC supports refused with the extra that does. No GPU needed."""

import pytest

from andrea_cli.backends.toolchain.cuda_arch import CompileTarget, compile_target
from andrea_cli.errors import AndreaError

NVRTC_13_ARCHS = (75, 80, 86, 87, 88, 89, 90, 100, 103, 107, 110, 120, 121)
NVRTC_12_0_ARCHS = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90)
NVRTC_11_8_ARCHS = (35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90)


def test_compile_target_is_the_devices_own_cubin():
    # compute capability 9.0 gets sm_90a, the architecture-specific target with wgmma (NVRTC 12.0+)
    assert compile_target((9, 0), NVRTC_13_ARCHS, (13, 0)) == CompileTarget("sm_90a", "cubin")
    assert compile_target((9, 0), NVRTC_12_0_ARCHS, (12, 0)).options() == ("--gpu-architecture=sm_90a", "--std=c++17")
    assert compile_target((9, 0), NVRTC_11_8_ARCHS, (11, 8)) == CompileTarget("sm_90", "cubin")  # no sm_90a yet
    assert compile_target((8, 0), NVRTC_13_ARCHS, (13, 0)) == CompileTarget("sm_80", "cubin")
    assert compile_target((8, 6), NVRTC_13_ARCHS).options() == ("--gpu-architecture=sm_86", "--std=c++17")
    assert compile_target((12, 0), NVRTC_13_ARCHS, (13, 0)) == CompileTarget("sm_120", "cubin")  # no "a": no wgmma


def test_compile_target_for_a_gpu_nvrtc_does_not_name():
    # same major, higher minor: the nearest older cubin of that major loads on it
    assert compile_target((8, 9), (75, 80, 86, 90)) == CompileTarget("sm_86", "cubin")
    # a GPU newer than NVRTC (sm_120 with NVRTC 12.0): PTX, which its newer driver can JIT
    assert compile_target((12, 0), NVRTC_12_0_ARCHS) == CompileTarget("compute_90", "ptx")


def test_a_gpu_older_than_nvrtc_supports_is_refused_with_the_extra_that_does():
    with pytest.raises(AndreaError, match=r"compute capability 7\.0, older than any architecture NVRTC 13\.0 "
                                          r'compiles for \(oldest sm_75\): .*pip install "andrea\[cuda12\]"'):
        compile_target((7, 0), NVRTC_13_ARCHS, (13, 0))
