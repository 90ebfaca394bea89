"""Compile-only: the kernel file through NVRTC for the GPUs we target, no GPU needed. Fails on a
compile error, a register spill, or a kernel over the register budget its entry in the kernel
file's opening comment states (a change that costs a kernel its occupancy); every kernel the
kernel table lists has a budget. (NVRTC's own tests: tests/backends/toolchain/test_nvrtc.py.)"""

import pytest

from andrea_cli.backends.launch.catalogue import entry_points
from andrea_cli.backends.toolchain.nvrtc import TARGET_ARCHS, compile_kernel_file
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
