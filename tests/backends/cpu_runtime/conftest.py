"""Fixtures of the CPU build's tests: the tensor-core check kernels' source, written once."""

from __future__ import annotations

import pathlib

import pytest

from andrea_cli.kernel_file import packaged_kernel_path

CHECKS = pathlib.Path(__file__).parents[2] / "kernels" / "tensor_cores.cu"


@pytest.fixture(scope="session")
def tensor_core_checks(tmp_path_factory) -> pathlib.Path:
    """The kernel file with tests/kernels/tensor_cores.cu appended (the check kernels use the kernel
    file's wrappers), at one path for the whole run: test_tensor_cores.py and test_wgmma.py build
    the same file, and the build's cache key holds the path (the wrapper's #line names it), so one
    file means one CPU build of each flavour between them, not one per module."""
    path = tmp_path_factory.mktemp("tc") / "tensor_core_checks.cu"
    path.write_text(packaged_kernel_path().read_text() + "\n" + CHECKS.read_text())
    return path
