"""The driver's CUDA version and the extra named for it; the compile target chosen per GPU. No GPU needed."""

import shutil
import subprocess

import pytest

from andrea_cli.backends.launch.catalogue import check_kernel_runs
from andrea_cli.backends.toolchain.cuda_arch import CompileTarget, compile_target
from andrea_cli.backends.toolchain.cuda_setup import CudaSetup, driver_cuda_version, read_cuda_setup
from andrea_cli.errors import AndreaError

NVRTC_13_ARCHS = (75, 80, 86, 87, 88, 89, 90, 100, 103, 107, 110, 120, 121)
NVRTC_12_0_ARCHS = (50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90)


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


def test_tensor_core_kernels_are_refused_below_sm_80_in_one_line():
    check_kernel_runs("attention_fused_kernel2", (7, 5))  # fp32 kernels run anywhere
    check_kernel_runs("attention_fused_kernel4_d64", (8, 0))
    with pytest.raises(AndreaError, match="to_bf16_kernel1 uses Ampere instructions"):
        check_kernel_runs("to_bf16_kernel1", (7, 5))
    with pytest.raises(AndreaError) as caught:
        check_kernel_runs("attention_fused_kernel4_d128", (7, 5))
    message = str(caught.value)
    assert "\n" not in message and "compute capability 8.0" in message and "this GPU has 7.5" in message
    # the bf16 backward and the forward that feeds it are tensor-core code too; the FP32 backward is not
    check_kernel_runs("attention_backward_dkdv_kernel1", (7, 5))
    for name in ("attention_fused_lse_kernel4_d64", "attention_backward_dkdv_kernel2_d128",
                 "attention_backward_dq_kernel2_d64"):
        with pytest.raises(AndreaError, match=f"{name} uses Ampere instructions"):
            check_kernel_runs(name, (7, 5))


def test_wgmma_kernels_run_on_compute_capability_9_0_only():
    check_kernel_runs("attention_fused_kernel6_d64", (9, 0))
    for cc, shown in (((8, 0), "8.0"), ((8, 9), "8.9"), ((10, 0), "10.0"), ((12, 0), "12.0"), ((7, 5), "7.5")):
        with pytest.raises(AndreaError) as caught:
            check_kernel_runs("attention_fused_kernel6_d128", cc)
        message = str(caught.value)
        assert "\n" not in message and "wgmma" in message and f"this GPU has {shown}" in message
        assert "sm_90a" in message and "attention_fused_kernel5" in message
    check_kernel_runs("attention_fused_kernel5_d64", (12, 0))  # mma.sync runs on newer GPUs


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
    assert notice.startswith("backend auto: numpy, because cuda: cupy-cuda13x needs a CUDA 13 driver")
    assert "cuda12 extra" in notice and "\n" not in notice


@pytest.mark.slow  # NVRTC compiles the whole kernel file to a cubin
def test_kernel_file_compiles_to_a_cached_cubin_for_the_oldest_gpu(tmp_path, monkeypatch):
    """sm_75 (Turing), the oldest CUDA 13 compiles for: the whole file must build for it, so a
    kernel that needs a newer GPU is refused by andrea in one line, never by the compiler."""
    pytest.importorskip("cupy")
    from andrea_cli.backends.toolchain import nvrtc
    from andrea_cli.kernel_file import packaged_kernel_path

    monkeypatch.setenv("ANDREA_CACHE_DIR", str(tmp_path))
    target = CompileTarget(nvrtc.OLDEST_ARCH, "cubin")
    first = nvrtc.compiled_kernel_file(packaged_kernel_path(), target)
    assert first.read_bytes()[:4] == b"\x7fELF" and first.parent == tmp_path / "cuda"
    monkeypatch.setattr(nvrtc, "_compile", lambda *a, **k: pytest.fail("compiled again on a cache hit"))
    assert nvrtc.compiled_kernel_file(packaged_kernel_path(), target) == first


def test_info_names_the_extra_for_this_driver(cli):
    document = cli.json("info")
    cuda = document["cuda"]
    assert cuda["extra"] in ("cuda12", "cuda13")
    assert cuda["driver"] == document["cuda_driver"]  # None here: no NVIDIA driver
    assert set(cuda["cupy_wheels"]) <= {"cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x", "cupy"}
    assert (cuda["problem"] is None) == (cuda["fix"] is None)
