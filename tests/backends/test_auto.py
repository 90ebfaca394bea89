"""`--backend auto` (backends/__init__.py, commands/backend.py): without a GPU the CPU build of
the kernel file, NumPy only where no C++ compiler is found, and a one-line notice naming the
real cause (no driver, no GPU answering, no cupy) and the fix."""

import sys

import pytest

from andrea_cli.backends import cuda, select_backend
from andrea_cli.backends.toolchain.cuda_setup import CudaSetup
from andrea_cli.kernel_file import packaged_kernel_path


@pytest.fixture
def no_gpu():
    if cuda.cuda_availability().ok:
        pytest.skip("a GPU answers here: auto picks it")


def test_auto_runs_the_kernel_file_on_the_cpu_without_a_gpu(no_gpu, monkeypatch):
    monkeypatch.setattr(cuda, "read_cuda_setup", lambda: CudaSetup(None, {}, {}))
    backend, notice = select_backend("auto", packaged_kernel_path())
    assert backend.name == "cpu"
    assert notice == ("backend auto: cpu (the kernel file compiled for the CPU), because cuda: no NVIDIA driver "
                      "here (no GPU to run on).")


def test_auto_falls_back_to_numpy_only_without_a_compiler_and_says_how_to_get_one(no_gpu, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    backend, notice = select_backend("auto", packaged_kernel_path())
    assert backend.name == "numpy"
    assert "cpu: no C++ compiler found (tried no-such-compiler-xyz)" in notice
    assert notice.endswith("To run the kernel file itself: install g++ (e.g. apt-get install g++) or set CXX")
    assert "not the kernel file" in notice and "\n" not in notice


def test_without_cupy_the_reason_is_the_missing_driver_or_cupy_itself(monkeypatch):
    """The reason names the real cause: with no driver, the driver (not the missing cupy); with
    a driver, the cupy that is not installed and the extra that fits it."""
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError
    monkeypatch.setattr(cuda, "read_cuda_setup", lambda: CudaSetup(None, {}, {}))
    assert cuda.cuda_availability().reason == "no NVIDIA driver here (no GPU to run on)"
    monkeypatch.setattr(cuda, "read_cuda_setup", lambda: CudaSetup((13, 0), {}, {}))
    status = cuda.cuda_availability()
    assert status.reason == "cupy is not installed; this driver (CUDA 13.0) takes the cuda13 extra"
    assert status.fix == 'pip install "andrea[cuda13]"'


def test_attend_by_default_runs_the_cpu_build(no_gpu, cli):
    doc = cli.json("attend", "--T", "12", "--d-k", "4")
    assert doc["backend"] == "cpu"
    assert doc["notices"][0].startswith("backend auto: cpu (the kernel file compiled for the CPU), because cuda: ")
