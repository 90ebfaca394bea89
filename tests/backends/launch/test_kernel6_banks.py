"""kernel6's K/V copy into shared memory is free of bank conflicts as `andrea bench --bound` reads
it (issue 34): compiled for sm_90a, every LDGSTS.128 of attention_fused_kernel6_d64 and _d128 has
its lane addresses followed from threadIdx.x through the SASS (bench/bound/lanes.py) and takes 4
wavefronts (bench/bound/banks.py), the least 32 lanes x 16 bytes can. A copy of the kernel file
with the old thread -> chunk mapping (a quarter-warp on one key row's 8 chunks, 128 bytes apart)
reads 32: the check can fail."""

from __future__ import annotations

import pytest

from andrea_cli.kernel_file import packaged_kernel_path

pytest.importorskip("cupy", reason="cupy is not installed (it brings the NVRTC bindings): pip install '.[test,bound]'")

KERNELS = ("attention_fused_kernel6_d64", "attention_fused_kernel6_d128")
NEW_MAPPING = """    const int kv_row = threadIdx.x / (8 * CHUNKS) * 8 + threadIdx.x % 8;
    const int kv_col = 8 * (threadIdx.x / 8 % CHUNKS);"""
OLD_MAPPING = """    const int kv_row = threadIdx.x / CHUNKS;
    const int kv_col = 8 * (threadIdx.x % CHUNKS);"""


@pytest.fixture
def bound_tools():
    from andrea_cli.bench.bound.sass import find_cuobjdump, find_nvdisasm

    if find_cuobjdump() is None or find_nvdisasm() is None:
        pytest.skip("cuobjdump/nvdisasm not found: pip install '.[test,bound]'")


def copy_wavefronts(path) -> dict[str, list]:
    """{kernel6 entry point: the wavefronts of each LDGSTS (cp.async into shared memory)}."""
    from andrea_cli.bench.bound.report import kernel_sass

    code = kernel_sass(path, "sm_90a")
    return {name: [i.wavefronts for i in code[name] if i.opcode.startswith("LDGSTS")] for name in KERNELS}


@pytest.mark.slow  # NVRTC compiles the kernel file for sm_90a, cuobjdump disassembles it
def test_kernel6_copies_take_four_wavefronts(isolated_cache, bound_tools):
    for name, counts in copy_wavefronts(packaged_kernel_path()).items():
        # the Q copy (padded rows), the K/V copies of the first tile, the hot loop's and the mask loops'
        assert len(counts) >= 8 and set(counts) == {4}, (name, counts)


@pytest.mark.slow
def test_the_old_mapping_is_caught(isolated_cache, bound_tools, tmp_path):
    source = packaged_kernel_path().read_text()
    assert NEW_MAPPING in source, "kernel6's K/V mapping moved: update this broken copy"
    broken = tmp_path / "microgpt_cuda.cu"
    broken.write_text(source.replace(NEW_MAPPING, OLD_MAPPING))
    for name, counts in copy_wavefronts(broken).items():
        assert 32 in counts and 4 in counts, (name, counts)  # K/V at 32; Q's padded copy still 4
