"""The cuda backend (backends/cuda.py) without a GPU: how GPU-side failures reach the user (cupy's
exceptions stood in for by exceptions of the same names and messages), and a launch over 48 KiB of
dynamic shared memory opting in first."""

from __future__ import annotations

import pytest

from andrea_cli.backends.base import DeviceFault
from andrea_cli.backends.cuda import gpu_errors
from andrea_cli.backends.launch.fused import shared_bytes
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import Case, run_verify


class OutOfMemoryError(Exception):  # the name cupy.cuda.memory uses
    pass


class CUDADriverError(Exception):
    pass


def test_out_of_memory_is_a_one_line_user_error():
    with pytest.raises(AndreaError, match="ran out of memory.*smaller --T"):
        with gpu_errors("allocating (12, 65536, 65536)"):
            raise OutOfMemoryError("Out of memory allocating 206,158,430,208 bytes")


def test_an_illegal_address_is_a_device_fault():
    with pytest.raises(DeviceFault, match="faulted"):
        with gpu_errors("waiting for the kernels"):
            raise CUDADriverError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")


def test_other_driver_errors_keep_their_message():
    with pytest.raises(AndreaError, match="too many resources") as info:
        with gpu_errors("softmax_kernel1 launch"):
            raise CUDADriverError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested for launch")
    assert not isinstance(info.value, DeviceFault)


class FaultingBackend:
    """Faults on the second case, as a GPU with a broken kernel would."""

    name = "cuda"

    def __init__(self):
        self.calls = 0

    def device_name(self):
        return "a GPU"

    def attention(self, *args, **kwargs):
        self.calls += 1
        raise DeviceFault("scores_kernel1: the GPU faulted")


def test_verify_stops_at_a_device_fault_and_reports_it():
    backend = FaultingBackend()
    cases = [Case(4, 2, 2, MaskSpec("causal"), True), Case(5, 2, 2, MaskSpec("causal"), True)]
    report = run_verify([("gpu", backend)], cases, kernel_file="k.cu")
    assert backend.calls == 1 and not report.passed
    (result,) = report.results
    assert "faulted" in result.error and "1 later cases not run" in result.error


def test_cuda_launch_opts_in_to_large_shared_memory():
    """Over 48 KiB of dynamic shared memory a kernel must opt in before its launch (on a GPU the
    launch fails otherwise); checked here with a stand-in for cupy's RawKernel."""
    from andrea_cli.backends.cuda import _checked_launch

    class Kernel:
        max_dynamic_shared_size_bytes = 0
        launched_with = None

        def __call__(self, grid, block, args, shared_mem=0):
            self.launched_with = (shared_mem, self.max_dynamic_shared_size_bytes)

    small, large = Kernel(), Kernel()
    _checked_launch("k", small)((1, 1, 1), (32, 1, 1), (), shared_mem=4096)
    _checked_launch("k", large)((1, 1, 1), (128, 1, 1), (), shared_mem=shared_bytes(128, 128, variant=3))
    assert small.launched_with == (4096, 0) and large.launched_with == (99328, 99328)
