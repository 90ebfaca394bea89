"""The static bound's tools: NVRTC (through cupy) compiles, cuobjdump and nvdisasm read the SASS."""

import pytest


@pytest.fixture(scope="session")
def bound_tools():
    """Skips, naming the extra that brings them, where the bound's compiler or disassembler is missing."""
    from andrea_cli.bench.bound.sass import find_cuobjdump, find_nvdisasm

    pytest.importorskip("cupy", reason="cupy brings the NVRTC bindings: pip install '.[bound]'")
    if find_cuobjdump() is None or find_nvdisasm() is None:
        pytest.skip("cuobjdump/nvdisasm not found: pip install '.[bound]'")
