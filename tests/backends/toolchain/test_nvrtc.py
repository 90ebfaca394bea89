"""backends/toolchain/nvrtc.py: a compile error names the line, ptxas's log read into registers,
shared memory and spills, and the kernel file compiled for the oldest GPU NVRTC targets, cached."""

import pytest

from andrea_cli.backends.toolchain.cuda_arch import CompileTarget
from andrea_cli.backends.toolchain.nvrtc import compile_kernel_file, parse_ptxas_log

pytest.importorskip("cupy", reason="cupy is not installed (it brings the NVRTC bindings): pip install '.[test,bound]'")


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
