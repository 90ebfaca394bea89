"""Compile-only: the kernel file through NVRTC for the GPUs we target, no GPU needed.
Fails on a compile error, a register spill, or a kernel over the register budget its entry in
the kernel file's opening comment states (a change that costs a kernel its occupancy)."""

import pytest

from andrea_cli.backends.launch.catalogue import entry_points
from andrea_cli.backends.toolchain.nvrtc import TARGET_ARCHS, compile_kernel_file, parse_ptxas_log
from andrea_cli.kernel_file import kernel_names, packaged_kernel_path, register_budgets

pytest.importorskip("cupy", reason="cupy is not installed (it brings the NVRTC bindings): pip install '.[test,bound]'")


@pytest.mark.slow  # NVRTC compiles the whole kernel file per architecture
@pytest.mark.parametrize("arch", TARGET_ARCHS)
def test_kernel_file_compiles_without_spills(arch):
    path = packaged_kernel_path()
    resources = {r.kernel: r for r in compile_kernel_file(path, arch)}
    assert set(resources) == set(kernel_names(path)) == set(entry_points()), \
        "ptxas reported a different set of kernels, or the kernel table lists another"
    budgets = register_budgets(path.read_text())
    for r in resources.values():
        assert r.spill_stores == 0 and r.spill_loads == 0, r
        assert 0 < r.registers <= budgets[r.kernel], (
            f"{r.kernel} uses {r.registers} registers on {arch}, over its budget of {budgets[r.kernel]} "
            "(written in its entry of the kernel file's opening comment)")
        assert r.shared_bytes <= 48 * 1024, r  # static shared memory without opting in


def test_every_kernel_has_a_register_budget():
    path = packaged_kernel_path()
    missing = sorted((set(kernel_names(path)) | set(entry_points())) - set(register_budgets(path.read_text())))
    assert not missing, (f"no register budget for {missing}: end each kernel's entry in the opening comment "
                         f"of {path.name} with 'registers <= N' (see the other entries)")


def test_register_budgets_are_read_per_entry():
    text = """// file
//   a_kernel1   does a
//                    grid (1); registers <= 40
//   b_kernel1, b_kernel2   two at once, T <= 9, held in registers
//                    more; registers <= 56, <= 80
//
// Backward:
//   c_kernel1        no budget written
int x;  // registers <= 3
"""
    assert register_budgets(text) == {"a_kernel1": 40, "b_kernel1": 56, "b_kernel2": 80}


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
