"""bench/bound/model.py against answers worked out by hand: small kernels (tests/kernels/bound_probes.cu)
compiled by NVRTC and read by cuobjdump, no GPU: FFMA at the FP32 peak, shared and global copies at
their roofs, a 4-way bank-conflicted shared copy 4 times slower, wgmma loops at the tensor peak and
mma.sync at its assumed share of it on Hopper; a kernel that spills says so; occupancy."""

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
    # the lane addresses were read from the SASS: every access derived, none conflicted
    assert mix.shared_derived == lds + sts and mix.shared_assumed == 0 and mix.shared_conflict_wavefronts == 0


def test_a_bank_conflicted_shared_copy_is_four_times_slower(probes):
    """shared_copy_4way: lane l at byte 64·l, so a quarter-warp's 8 lanes fall on banks 0-3 and
    16-19, 4 distinct words in each: 4 wavefronts a phase, 16 per LDS.128 / STS.128 against 4.
    The same loop's bound is 4 times shared_copy's (shared memory binds both)."""
    from andrea_cli.bench.bound.banks import wavefronts

    assert wavefronts([64 * lane for lane in range(32)], 16) == 16  # by hand, as the docstring says
    plain, conflicted = _mix(probes, "sm_90", "shared_copy"), _mix(probes, "sm_90", "shared_copy_4way")
    lds, sts = conflicted.by_opcode.get("LDS", 0), conflicted.by_opcode.get("STS", 0)
    assert lds == sts == plain.by_opcode["LDS"] >= 1 and conflicted.shared_assumed == 0
    accesses = [i for i in steady_state(hot_loop(probes["sm_90"][0]["shared_copy_4way"]))
                if i.opcode.startswith(("LDS", "STS"))]
    assert {i.wavefronts for i in accesses} == {16}, [(i.opcode, i.wavefronts) for i in accesses]
    assert conflicted.shared_conflict_wavefronts == 12 * (lds + sts)
    cycles = pipe_cycles(conflicted, H200, warps_per_sm=64)
    assert cycles["shared"] == 16 * (lds + sts) == 4 * pipe_cycles(plain, H200, warps_per_sm=64)["shared"]
    slow, fast = (bound(m, _work(), H200, 64, looped=True) for m in (conflicted, plain))
    assert slow.bottleneck == fast.bottleneck == "shared" and slow.time_s == pytest.approx(4 * fast.time_s)


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
    """HMMA.16816 is 2 x 16 x 8 x 16 = 4096 flops per warp; nothing else in the loop binds. On the
    A100 that is the tensor peak; on Hopper mma.sync is given 2/3 of the tensor rate (the stated
    assumption, gpus.py): 2/3 x 4,096 flops per clock x 132 SMs x 1.83 GHz = 659.6 TFLOP/s, and the
    report names that assumption."""
    mix80 = _mix(probes, "sm_80", "mma_loop")
    assert mix80.hmma >= 8 and mix80.tensor_flops == mix80.mma_sync_flops == 4096 * mix80.hmma
    b80 = bound(mix80, _work(1e12), A100, 64, looped=True)
    # 108 SMs x 2,048 x 1.41 GHz = 311.9 (the datasheet rounds it to 312)
    assert b80.bottleneck == "tensor" and b80.tflops == pytest.approx(A100.tensor_peak_tflops) == pytest.approx(311.87, abs=0.01)
    assert A100.tensor_flops_per_clock == 2048 and A100.tensor_peak_tflops == pytest.approx(312, rel=1e-3)

    mix = _mix(probes, "sm_90", "mma_loop")
    assert mix.hmma >= 8 and mix.tensor_flops == 4096 * mix.hmma
    b = bound(mix, _work(1e12), H200, 64, looped=True)
    assert b.bottleneck == "tensor" and b.clock_ghz == 1.83
    assert b.tflops == pytest.approx(2 / 3 * 4096 * 132 * 1.83e9 / 1e12) == pytest.approx(659.6, abs=0.05)
    assert any("mma.sync at 67%" in why for why in b.at_peak_because), b.at_peak_because


def test_wgmma_loop_runs_at_the_tensor_peak(probes):
    """wgmma m64n128k16 with A from registers, B from shared memory through a descriptor: each of
    the warpgroup's 4 warps issues the HGMMA and does its 16 rows, 2 x 64 x 128 x 16 / 4 = 65,536
    flops; B is 16 x 128 bf16 = 4,096 bytes, read once per warpgroup instruction: 1,024 per warp.
    Per HGMMA and warp the tensor pipe needs 65,536 / 4,096 = 16 SM clocks and shared memory
    1,024 / 128 = 8: the tensor pipe binds, at the peak, every pipe at the tensor clock (1.83 GHz);
    the report names the assumptions that put it there. (Were B read by every warp, shared memory
    would need 32 clocks and bind instead: the reading FlashAttention-3's speed rules out.)"""
    assert GPUS["h200"].arch == GPUS["h100"].arch == "sm_90a" and A100.arch == "sm_80"
    mix = _mix(probes, "sm_90a", "wgmma_loop")
    assert mix.hgmma >= 4 and mix.hgmma % 4 == 0 and mix.hmma == 0, mix.by_opcode
    assert set(mix.by_opcode) >= {"HGMMA", "WARPGROUP"}
    assert mix.tensor_flops == 65536 * mix.hgmma and mix.wgmma_shared_bytes == 1024 * mix.hgmma
    assert mix.shared_load_bytes == mix.shared_store_bytes == 0 and mix.shared_bytes == mix.wgmma_shared_bytes
    cycles = pipe_cycles(mix, H200, warps_per_sm=8)
    assert cycles["shared"] == 8 * mix.hgmma
    assert cycles["tensor"] == 16 * mix.hgmma
    assert 4 * cycles["shared"] > cycles["tensor"] > cycles["shared"]
    b = bound(mix, _work(1e12), H200, 8, looped=True)
    assert b.bottleneck == "tensor" and b.runner_up == "shared" and b.tflops == pytest.approx(H200.bf16_peak_tflops)
    assert b.clock_ghz == 1.83 and any("once per warpgroup" in why for why in b.at_peak_because)
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
