"""backends/toolchain/cuda_setup.py: the driver's CUDA version and the extra named for it, in
`info` and in the auto backend's notice. No GPU needed. (The compile target: test_cuda_arch.py.)"""

import shutil
import subprocess

import pytest

from andrea_cli.backends.toolchain.cuda_setup import CudaSetup, driver_cuda_version, read_cuda_setup


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    """A stand-in libcuda exporting cuDriverGetVersion, so the ctypes path itself runs here."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build a stand-in driver library")
    folder = tmp_path_factory.mktemp("driver")
    source = folder / "fake_cuda.c"
    source.write_text("int cuDriverGetVersion(int *v) { *v = 12040; return 0; }\n"
                      "int cuBroken(int *v) { return 999; }\n")
    library = folder / "libcuda_fake.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return str(library)


def test_driver_version_read_through_ctypes(fake_driver):
    assert driver_cuda_version((fake_driver,)) == (12, 4)


def test_no_driver_library_is_none(tmp_path):
    assert driver_cuda_version((str(tmp_path / "libcuda_missing.so"),)) is None


def test_read_setup_sees_the_installed_wheels(fake_driver):
    setup = read_cuda_setup((fake_driver,))
    assert setup.driver == (12, 4)
    assert setup.extra == "cuda12"
    if "cupy-cuda13x" in setup.cupy_wheels:  # the test extra installs it
        assert 'pip install "andrea[cuda12]"' in str(setup.problem())


def setup(driver, cupy=None, nvrtc=None):
    return CudaSetup(driver, cupy if cupy is not None else {}, nvrtc if nvrtc is not None else {})


def test_cuda13_wheel_on_a_cuda12_driver_names_the_cuda12_extra():
    problem = setup((12, 4), {"cupy-cuda13x": 13}, {"nvidia-cuda-nvrtc": 13}).problem()
    assert problem.reason == "cupy-cuda13x needs a CUDA 13 driver and this one speaks CUDA 12.4: install the cuda12 extra"
    assert problem.fix == 'pip uninstall -y cupy-cuda13x && pip install "andrea[cuda12]"'


def test_matching_wheels_are_fine_and_a_newer_driver_runs_older_wheels():
    assert setup((13, 0), {"cupy-cuda13x": 13}, {"nvidia-cuda-nvrtc": 13}).problem() is None
    assert setup((12, 2), {"cupy-cuda12x": 12}, {"nvidia-cuda-nvrtc-cu12": 12}).problem() is None
    assert setup((13, 1), {"cupy-cuda12x": 12}, {"nvidia-cuda-nvrtc-cu12": 12}).problem() is None


def test_other_mismatches_each_get_one_line_with_the_fix():
    assert setup((11, 8), {"cupy-cuda12x": 12}).problem().fix == "update the NVIDIA driver"
    assert setup((12, 8)).problem().fix == 'pip install "andrea[cuda12]"'
    both = setup((13, 0), {"cupy-cuda12x": 12, "cupy-cuda13x": 13}).problem()
    assert both.fix == 'pip uninstall -y cupy-cuda12x cupy-cuda13x && pip install "andrea[cuda13]"'
    nvrtc = setup((12, 4), {"cupy-cuda12x": 12}, {"nvidia-cuda-nvrtc": 13}).problem()
    assert "NVRTC installed is nvidia-cuda-nvrtc (CUDA 13)" in nvrtc.reason and nvrtc.fix == 'pip install "andrea[cuda12]"'
    assert setup(None, {"cupy-cuda13x": 13}).problem() is None  # no driver: the no-GPU line says it
    assert setup(None).extra == "cuda13"
    for problem in (both, nvrtc):
        assert "\n" not in str(problem)


def test_auto_fallback_names_the_extra_when_cupy_and_driver_disagree(monkeypatch):
    """No GPU answers here; with a CUDA 12 driver and cupy-cuda13x, the reason names the cuda12
    extra, in `info` and in attend's one-line auto notice."""
    pytest.importorskip("cupy")
    from andrea_cli.backends import cuda, select_backend
    from andrea_cli.kernel_file import packaged_kernel_path

    mismatched = CudaSetup((12, 4), {"cupy-cuda13x": 13}, {"nvidia-cuda-nvrtc": 13})
    monkeypatch.setattr(cuda, "read_cuda_setup", lambda: mismatched)
    status = cuda.cuda_availability()
    if status.ok:
        pytest.skip("a GPU answers here")
    assert status.reason.endswith("install the cuda12 extra")
    assert status.fix == 'pip uninstall -y cupy-cuda13x && pip install "andrea[cuda12]"'
    _, notice = select_backend("auto", packaged_kernel_path())
    assert notice.startswith("backend auto: cpu (the kernel file compiled for the CPU), because cuda: "
                             "cupy-cuda13x needs a CUDA 13 driver")
    assert "cuda12 extra" in notice and "\n" not in notice
