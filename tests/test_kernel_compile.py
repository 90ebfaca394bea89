"""Compile-only: the kernel file through NVRTC for the GPUs we target, no GPU needed.
Fails on a compile error or a register spill; reads the resource report of every kernel."""

import pytest

from andrea_cli.kernel_file import kernel_names, packaged_kernel_path
from andrea_cli.backends.nvrtc import TARGET_ARCHS, compile_kernel_file, parse_ptxas_log

pytest.importorskip("cupy", reason="cupy is not installed (it brings the NVRTC bindings): pip install '.[test]'")


@pytest.mark.parametrize("arch", TARGET_ARCHS)
def test_kernel_file_compiles_without_spills(arch):
    path = packaged_kernel_path()
    resources = {r.kernel: r for r in compile_kernel_file(path, arch)}
    assert set(resources) == set(kernel_names(path)), "ptxas reported a different set of kernels"
    for r in resources.values():
        assert r.spill_stores == 0 and r.spill_loads == 0, r
        assert 0 < r.registers <= 255, r
        assert r.shared_bytes <= 48 * 1024, r  # static shared memory without opting in


def test_compile_error_names_the_line(tmp_path):
    from andrea_cli.errors import AndreaError

    broken = tmp_path / "broken.cu"
    broken.write_text('extern "C" __global__ void f(float* x) {\n  x[0] = undefined_name;\n}\n')
    with pytest.raises(AndreaError, match=r"broken.cu\(2\)"):
        compile_kernel_file(broken, "sm_90")


def test_parse_ptxas_log():
    log = """ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2176 bytes smem, 380 bytes cmem[0]"""
    (r,) = parse_ptxas_log(log)
    assert (r.kernel, r.arch, r.registers, r.shared_bytes, r.spill_stores, r.stack_bytes) == ("k", "sm_90", 40, 2176, 4, 8)
