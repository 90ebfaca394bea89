"""From one trip's instruction mix to the least time a launch can take: each pipe's SM clocks,
the largest of them (or the HBM time) is the bound. Pure arithmetic; the tests check it against
counts worked out by hand.

The model is a bound, stated as one: every SM busy all the time with an even share of the
trips, every warp issuing whenever a pipe is free, every lane of a warp moving its own bytes,
what a launch must move crossing HBM once. Shared memory takes one clock a wavefront: a shared
access whose lane addresses lanes.py derives from the SASS is charged the wavefronts banks.py
counts for them (bank conflicts included), the others their bytes / 128, i.e. assumed
conflict-free (the report counts both). Every pipe runs at the SM's one clock, the tensor clock
for a kernel with tensor-core work (gpus.py says why); mma.sync on Hopper at the fraction of the
tensor rate gpus.py assumes. Latency (a wgmma group waited for at once, the softmax after it),
imbalance between blocks (causal tiles), the tail of the last wave and L2 misses only make a
real run slower; a bound at a peak says which of these assumptions put it there
(`at_peak_because`).

Hopper's wgmma (HGMMA in the SASS, sass.py) reads its B operand, and A when A is a descriptor
too, from shared memory without the registers. How the SM delivers those bytes to the four
warps' tensor cores is not documented; the model counts them ONCE per warpgroup instruction (a
quarter to each warp) on the same 128 bytes per clock as every other shared-memory access. The
evidence is FlashAttention-3's published forward speed on the H100 SXM5 (Shah et al. 2024,
non-causal, sequence 16k): 648 TFLOP/s at head dim 128, 497 at 64. At 1.98 GHz (the boost
clock; a lower one only raises the figures below) 648 TFLOP/s is 648e12 / (132 SMs x 1.98e9) =
2,479 flops per SM clock. One 64-row warpgroup and one 128-key tile at head dim 128: Q·K^T is 8
wgmma m64n128k16 (K over d) and P·V 8 more (N = d, K over the keys), 16 x 2·64·128·16 =
4,194,304 flops; their B operands are the K and V tiles, 2 x 128 x 128 bf16 = 64 KiB. Were each
warp's tensor core to read B itself, the tile would need 4 x 64 KiB / 128 = 2,048 shared-memory
clocks, i.e. at most 2,048 flops per clock, 535 TFLOP/s: below the 648 measured, before Q (read
from shared memory in FlashAttention-3's Q·K^T) and the copies into shared memory are counted.
Read once per warpgroup, the tile needs 512 clocks against the tensor pipe's 4,194,304 / 3,784 =
1,108: the tensor pipe binds, and 648 is 66% of its peak. (Per-warp reads cap every wgmma with
a 16-bit register A at 16 flops per shared byte, 535 TFLOP/s, whatever N or the head dim; the
497 at head dim 64 is under that cap and does not decide between the two readings.)"""

from __future__ import annotations

from dataclasses import dataclass

from andrea_cli.bench.bound.gpus import GpuSpec
from andrea_cli.bench.bound.sass import Mix

PIPES = ("issue", "fp32", "alu", "mufu", "tensor", "shared", "hbm")
PIPE_MEANING = {
    "issue": "instruction issue (4 warp instructions per clock per SM)",
    "fp32": "the FMA pipe (FP32 arithmetic, integer multiply-adds)",
    "alu": "the integer/logic pipe",
    "mufu": "special functions and conversions (exp2, rcp, F2I, F2FP), 16 per clock",
    "tensor": "tensor cores (HMMA, HGMMA)",
    "shared": "shared memory / L1 data path (one 128-byte wavefront per clock per SM, bank conflicts "
              "where derived), wgmma operands, shuffles",
    "hbm": "HBM bandwidth (every array of the launch once)",
}


def attention_matmul_flops(products: int, H: int, T: int, d: int, causal: bool) -> float:
    """products matrix products of T×T×d (the kernel table's count: 2·T²·d flops each,
    FlashAttention's count, 2 flops per multiply-add, half of them under a causal mask)."""
    flops = products * 2.0 * T * T * d * H
    return flops / 2 if causal else flops


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    limit: str  # what stops one more block: registers, shared memory, warps, blocks; or "does not fit"


def occupancy(gpu: GpuSpec, registers: int, shared_per_block: int, warps_per_block: int) -> Occupancy:
    """Resident blocks per SM, the CUDA occupancy calculator's way: registers are allocated per
    warp in units of 256, each block's shared memory carries a 1 KB system reserve."""
    if shared_per_block > gpu.smem_per_block or warps_per_block * 32 > 1024:
        return Occupancy(0, 0, "does not fit")
    regs_per_warp = -(-max(registers, 1) * 32 // 256) * 256
    limits = {
        "registers": gpu.registers_per_sm // (regs_per_warp * warps_per_block),
        "shared memory": gpu.smem_per_sm // (shared_per_block + gpu.smem_reserved_per_block)
        if shared_per_block else gpu.max_blocks_per_sm,
        "warps": gpu.max_warps_per_sm // warps_per_block,
        "blocks": gpu.max_blocks_per_sm,
    }
    limit = min(limits, key=limits.get)
    blocks = limits[limit]
    return Occupancy(blocks, blocks * warps_per_block, limit if blocks else "does not fit")


def pipe_cycles(mix: Mix, gpu: GpuSpec, warps_per_sm: int) -> dict[str, float]:
    """SM clocks one warp's trip takes on each pipe (the SM's whole rate: warps share it). Shared
    memory: the trip's bytes / 128 plus the wavefronts its bank conflicts add."""
    return {
        # a scheduler with no warp issues nothing: fewer than 4 resident warps leave slots idle
        "issue": mix.instructions / max(1, min(gpu.issue_per_clock, warps_per_sm)),
        # integer multiply-adds share the FMA pipe at the integer rate [PG-TPUT: 64 per clock]
        "fp32": (mix.fp32 - mix.imad) / (gpu.fp32_lanes / 32) + mix.imad / (gpu.alu_lanes / 32),
        "alu": mix.alu / (gpu.alu_lanes / 32),
        "mufu": mix.mufu / (gpu.mufu_lanes / 32),
        "tensor": (mix.tensor_flops - mix.mma_sync_flops) / gpu.tensor_flops_per_clock
        + mix.mma_sync_flops / (gpu.tensor_flops_per_clock * gpu.mma_sync_fraction),
        "shared": (mix.shared_bytes + mix.global_bytes + mix.local_bytes) / gpu.shared_bytes_per_clock
        + mix.shared_conflict_wavefronts + mix.shfl / (gpu.shuffle_lanes / 32),
    }


@dataclass(frozen=True)
class Work:
    """What one launch does at the reference shape."""

    warps: int  # warps launched
    array_bytes: int  # every array argument once
    executed_flops: float  # the matrix products the kernel computes (masked tiles it skips left out)
    useful_flops: float  # FlashAttention's count of them


def trips_per_launch(mix: Mix, work: Work, looped: bool) -> float:
    """How many warp-trips of the hot loop a launch makes: its matrix products divided by what
    one trip computes; for a kernel without them, its arrays divided by the global bytes of a
    trip; for straight-line code, one per warp."""
    trip_flops = mix.tensor_flops or 64 * mix.ffma
    if work.executed_flops and trip_flops:
        return work.executed_flops / trip_flops
    if looped and mix.global_bytes:
        return work.array_bytes / mix.global_bytes
    return float(work.warps)


@dataclass(frozen=True)
class Bound:
    seconds: dict[str, float]  # each pipe's least time for the launch, and hbm
    bottleneck: str
    runner_up: str
    tflops: float | None  # useful flops / the bound's time; None for a kernel with no products
    peak_tflops: float  # the peak of the units its products run on
    trips: float
    clock_ghz: float = 0.0  # the SM clock every pipe ran at (the tensor clock for tensor-core work)
    at_peak_because: tuple[str, ...] = ()  # a bound at a peak: the assumptions that put it there

    @property
    def time_s(self) -> float:
        return self.seconds[self.bottleneck]

    @property
    def peak_fraction(self) -> float | None:
        return None if self.tflops is None else self.tflops / self.peak_tflops


AT_PEAK = 0.995  # a bound within 0.5% of a peak is at it


def peak_assumptions(mix: Mix, gpu: GpuSpec, bottleneck: str) -> tuple[str, ...]:
    """What a bound at its pipe's peak rests on, in words for the report."""
    said = ["no latency: each instruction issued as soon as its pipe is free, whatever it waits for"]
    if bottleneck == "tensor":
        if mix.hgmma:
            said.append("a wgmma group's softmax and its wait overlap other warps' wgmma in full (the "
                        "hot loop's waits are not modelled)")
            said.append("wgmma's shared operands read once per warpgroup (model.py)")
        if mix.hmma and gpu.mma_sync_fraction < 1:
            said.append(f"mma.sync at {gpu.mma_sync_fraction:.0%} of the tensor rate (ASSUMED, gpus.py)")
        said.append(f"the SM at {gpu.tensor_clock_ghz} GHz with its tensor cores busy (ASSUMED, gpus.py)")
    if mix.shared_assumed:
        said.append(f"{mix.shared_assumed} shared accesses a trip assumed free of bank conflicts "
                    "(their addresses not derived)")
    return tuple(said)


def bound(mix: Mix, work: Work, gpu: GpuSpec, warps_per_sm: int, looped: bool) -> Bound:
    trips = trips_per_launch(mix, work, looped)
    tensor = mix.tensor_instructions > 0
    clock = gpu.sm_clock_ghz(tensor)
    hz = clock * 1e9
    seconds = {pipe: trips * cycles / gpu.sms / hz for pipe, cycles in pipe_cycles(mix, gpu, warps_per_sm).items()}
    peak = gpu.bf16_peak_tflops if tensor else gpu.fp32_peak_tflops
    # the products are done somewhere: never faster than the peak of the units that do them,
    # whatever the hot loop holds
    math = "tensor" if tensor else "fp32"
    seconds[math] = max(seconds[math], work.executed_flops / (peak * 1e12))
    seconds["hbm"] = work.array_bytes / (gpu.hbm_gbs * 1e9)
    ranked = sorted(seconds, key=seconds.get, reverse=True)
    time_s = seconds[ranked[0]]
    tflops = work.useful_flops / time_s / 1e12 if work.useful_flops and time_s > 0 else None
    # the rate the products' pipe tops out at: the peak, or mma.sync's share of it on Hopper
    ceiling = peak * (gpu.mma_sync_fraction if tensor and mix.hmma and not mix.hgmma else 1.0)
    executed = work.executed_flops / time_s / 1e12 if time_s > 0 else 0.0
    because = peak_assumptions(mix, gpu, ranked[0]) if ranked[0] == math and executed >= AT_PEAK * ceiling else ()
    return Bound(seconds, ranked[0], ranked[1], tflops, peak, trips, clock, because)
