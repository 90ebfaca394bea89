"""How GPU-side failures reach the user, checked without a GPU: cupy's exceptions are stood in
for by exceptions of the same names and messages."""

import pytest

from andrea_cli.backends.base import DeviceFault
from andrea_cli.backends.cuda import gpu_errors
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
