"""bench/bound/model.py against answers worked out by hand: small kernels (tests/kernels/bound_probes.cu)
compiled by NVRTC and read by cuobjdump, no GPU: FFMA at the FP32 peak, shared and global copies at
their roofs, mma and wgmma loops at the tensor peak; a kernel that spills says so; occupancy."""

from __future__ import annotations

from pathlib import Path

import pytest

from andrea_cli.bench.bound.gpus import GPUS
from andrea_cli.bench.bound.model import Work, bound, occupancy, pipe_cycles
from andrea_cli.bench.bound.sass import hot_loop, mix_of, steady_state

PROBES = Path(__file__).parents[2] / "kernels" / "bound_probes.cu"
H200, A100 = GPUS["h200"], GPUS["a100"]


@pytest.fixture(scope="module")
def probes(isolated_cache, bound_tools):
    """{arch: ({kernel: instructions}, {kernel: resources})} of the hand-known kernels; sm_90a is
    Hopper's arch-specific target, the only one with wgmma."""
    from andrea_cli.bench.bound.report import kernel_resources, kernel_sass

    return {arch: (kernel_sass(PROBES, arch), kernel_resources(PROBES, arch)) for arch in ("sm_90", "sm_80", "sm_90a")}


def _mix(probes, arch: str, name: str):
    loop = hot_loop(probes[arch][0][name])
    assert loop is not None, f"{name} has no loop on {arch}"
    return mix_of(steady_state(loop))


def _work(flops: float = 0.0, array_bytes: int = 1 << 20) -> Work:
    return Work(warps=1 << 16, array_bytes=array_bytes, executed_flops=flops, useful_flops=flops)


# ------------------------------------------------------------------------------------------------
# Answers known by hand

def test_pure_ffma_runs_at_the_fp32_peak(probes):
    """One FFMA per issue slot: on Hopper (128 FP32 lanes = 4 warp FFMAs per clock, as many as
    the 4 schedulers issue) the loop overhead makes issue bind, at peak x FFMAs / instructions;
    on A100 (64 lanes) the FP32 pipe binds, at exactly the FP32 peak."""
    mix = _mix(probes, "sm_90", "ffma_loop")
    assert mix.ffma == mix.fp32 >= 0.9 * mix.instructions, mix.by_opcode
    b = bound(mix, _work(1e12), H200, warps_per_sm=64, looped=True)
    assert b.bottleneck == "issue" and b.runner_up == "fp32"
    assert b.tflops == pytest.approx(H200.fp32_peak_tflops * mix.ffma / mix.instructions)
    assert H200.fp32_peak_tflops == pytest.approx(66.9, abs=0.05)  # 132 SMs x 128 lanes x 2 x 1.98 GHz

    mix80 = _mix(probes, "sm_80", "ffma_loop")
    b80 = bound(mix80, _work(1e12), A100, warps_per_sm=64, looped=True)
    assert b80.bottleneck == "fp32" and b80.tflops == pytest.approx(A100.fp32_peak_tflops)
    assert A100.fp32_peak_tflops == pytest.approx(19.5, abs=0.01)  # the whitepaper's figure


def test_shared_copy_is_bound_by_shared_memory(probes):
    """Each LDS.128 and STS.128 moves 32 lanes x 16 bytes = 512 bytes: 4 clocks of the SM's
    128 bytes per clock."""
    mix = _mix(probes, "sm_90", "shared_copy")
    lds, sts = mix.by_opcode.get("LDS", 0), mix.by_opcode.get("STS", 0)
    assert lds == sts >= 1 and mix.shared_load_bytes == 512 * lds
    cycles = pipe_cycles(mix, H200, warps_per_sm=64)
    assert cycles["shared"] == 4 * (lds + sts)
    assert bound(mix, _work(), H200, 64, looped=True).bottleneck == "shared"


def test_global_copy_is_bound_by_hbm(probes):
    """Two 1 GiB arrays (read one, write the other) at 4.8 TB/s: 447 us on an H200."""
    mix = _mix(probes, "sm_90", "global_copy")
    assert mix.global_load_bytes == mix.global_store_bytes > 0 and mix.shared_bytes == 0
    nbytes = 2 << 30
    b = bound(mix, _work(array_bytes=nbytes), H200, 64, looped=True)
    assert b.bottleneck == "hbm" and b.tflops is None
    assert b.time_s == pytest.approx(nbytes / 4.8e12)
    assert b.trips == pytest.approx(nbytes / mix.global_bytes)


def test_mma_loop_runs_at_the_tensor_peak(probes):
    """HMMA.16816 is 2 x 16 x 8 x 16 = 4096 flops per warp; nothing else in the loop binds."""
    for arch, gpu in (("sm_90", H200), ("sm_80", A100)):
        mix = _mix(probes, arch, "mma_loop")
        assert mix.hmma >= 8 and mix.tensor_flops == 4096 * mix.hmma
        b = bound(mix, _work(1e12), gpu, 64, looped=True)
        assert b.bottleneck == "tensor" and b.tflops == pytest.approx(gpu.bf16_peak_tflops)
    assert A100.tensor_flops_per_clock == pytest.approx(2048, rel=1e-3)  # the A100 whitepaper's rate


def test_wgmma_loop_runs_at_the_tensor_peak(probes):
    """wgmma m64n128k16 with A from registers, B from shared memory through a descriptor: each of
    the warpgroup's 4 warps issues the HGMMA and does its 16 rows, 2 x 64 x 128 x 16 / 4 = 65,536
    flops; B is 16 x 128 bf16 = 4,096 bytes, read once per warpgroup instruction: 1,024 per warp.
    Per HGMMA and warp the tensor pipe needs 65,536 / 3,784 = 17.3 SM clocks and shared memory
    1,024 / 128 = 8: the tensor pipe binds, at the peak. (Were B read by every warp, shared memory
    would need 32 clocks and bind instead: the reading FlashAttention-3's speed rules out.)"""
    assert GPUS["h200"].arch == GPUS["h100"].arch == "sm_90a" and A100.arch == "sm_80"
    mix = _mix(probes, "sm_90a", "wgmma_loop")
    assert mix.hgmma >= 4 and mix.hgmma % 4 == 0 and mix.hmma == 0, mix.by_opcode
    assert set(mix.by_opcode) >= {"HGMMA", "WARPGROUP"}
    assert mix.tensor_flops == 65536 * mix.hgmma and mix.wgmma_shared_bytes == 1024 * mix.hgmma
    assert mix.shared_load_bytes == mix.shared_store_bytes == 0 and mix.shared_bytes == mix.wgmma_shared_bytes
    cycles = pipe_cycles(mix, H200, warps_per_sm=8)
    assert cycles["shared"] == 8 * mix.hgmma
    assert cycles["tensor"] == pytest.approx(65536 / (989e12 / (132 * 1.98e9)) * mix.hgmma)
    assert 4 * cycles["shared"] > cycles["tensor"] > cycles["shared"]
    b = bound(mix, _work(1e12), H200, 8, looped=True)
    assert b.bottleneck == "tensor" and b.runner_up == "shared" and b.tflops == pytest.approx(H200.bf16_peak_tflops)
    assert b.trips == pytest.approx(1e12 / (65536 * mix.hgmma))

    # A and B both through descriptors, m64n64k16: 32,768 flops and (64 x 16 + 16 x 64) x 2 / 4 bytes per warp
    ss = _mix(probes, "sm_90a", "wgmma_ss_loop")
    assert ss.hgmma >= 4 and ss.tensor_flops == 32768 * ss.hgmma and ss.wgmma_shared_bytes == 1024 * ss.hgmma
    # compiled for plain sm_90 (or Ampere) the wgmma code is not there: why Hopper is read as sm_90a
    for arch in ("sm_90", "sm_80"):
        assert not any(i.opcode.startswith("HGMMA") for i in probes[arch][0]["wgmma_loop"]), arch


def test_a_kernel_with_spills_says_so(probes):
    from andrea_cli.bench.bound.report import kernel_bound

    code, resources = probes["sm_90"]
    kb = kernel_bound("spilling", code["spilling"], resources["spilling"], None, H200)
    assert kb.spill_bytes > 0 and kb.mix.local_bytes > 0
    assert any("spills" in note for note in kb.notes), kb.notes
    assert any("no reference geometry" in note for note in kb.notes) and kb.full is None
    assert kb.to_json()["spill_bytes"] == kb.spill_bytes


def test_occupancy_by_hand():
    """kernel4_d64 on an H200: 131 registers -> 17 x 256 per warp, 4 warps -> 17,408 per block,
    3 blocks in 65,536 (shared memory would allow 4 of 46,080 + 1,024 in 228 KB)."""
    occ = occupancy(H200, 131, 46080, 4)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limit) == (3, 12, "registers")
    occ = occupancy(A100, 208, 99328, 4)  # kernel3_d128 on an A100: one 100,352-byte block in 164 KB
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limit) == (1, 4, "shared memory")
    assert occupancy(A100, 32, 200_000, 4).limit == "does not fit"
