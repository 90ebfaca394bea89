"""bench/bound/geometry.py: the reference launches the bound reads are recorded from the launchers
themselves (grid, block, dynamic shared memory, the mask's kernels, the bytes of the arrays)."""

from __future__ import annotations

from andrea_cli.bench.bound.geometry import reference_launches


def test_geometry_comes_from_the_launchers():
    references = reference_launches()
    assert references.failures == []
    launches = references.launches
    k4 = launches["attention_fused_kernel4_d64"]
    assert k4.full.grid == (64, 1, 12) and k4.full.block == (128, 1, 1) and k4.full.dynamic_shared == 46080
    assert k4.sees_mask and not launches["scores_kernel1"].sees_mask
    assert launches["attention_fused_kernel4_d128"].head_size == 128
    assert "mask_kernel1" in launches  # launched only under a mask
    # Q, K, V bf16 (3 x 12 x 4096 x 64 x 2 bytes) and O float32
    assert k4.full.array_bytes == 3 * 12 * 4096 * 64 * 2 + 12 * 4096 * 64 * 4
