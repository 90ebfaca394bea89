"""The GPUs a static bound can be read for, and the documented rates it is read with.

Every figure here is NVIDIA's, from the sources named beside it, or an assumption said to be one
(marked ASSUMED); none was measured by this project. A rate is what one SM does per clock; the
model turns instruction counts into SM clocks with them, and clocks into seconds with the SM's
clock: the boost clock for a kernel without tensor-core work, the tensor clock for one with it.

Clocks (ASSUMED, from NVIDIA's own peaks): the H100 SXM5's FP32 peak, 67 TFLOP/s, is 132 SMs x
128 lanes x 2 flops at 1.98 GHz, its boost clock; its dense BF16 peak, 989 TFLOP/s, is 132 SMs x
4,096 flops per clock [WP-H100: twice A100's per SM and clock] at 1.83 GHz. NVIDIA quotes the
tensor peak at the lower clock (the H100 PCIe likewise: FP32 at 1.755 GHz, BF16 at 1.62); the
model reads 1.83 GHz as the clock an SM holds while its tensor cores are busy, and, an SM having
one clock for all its pipes, runs every pipe of a kernel with tensor-core work at it (so issue,
special functions and shared memory are not modelled 8% faster than the tensor cores beside
them) and every pipe of a kernel without at 1.98 GHz. The A100 quotes both peaks at 1.41 GHz.

mma.sync on Hopper (ASSUMED): NVIDIA documents no rate for HMMA (mma.sync) on sm_90 beside
wgmma's. FlashAttention-3 (Shah et al. 2024, section 2) states that mma.sync reaches only about
2/3 of the H100's tensor peak, and other outside reports put it at 60-67%; the model gives HMMA
2/3 of the tensor pipe's rate on Hopper (`mma_sync_fraction`), the whole of it on the A100, where
mma.sync is the tensor cores' native instruction.

Sources
  [WP-H100] NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): 132 SMs on H100 SXM5,
            4 SM sub-partitions ("processing blocks") each with one warp scheduler issuing one
            warp instruction per clock, 128 FP32 lanes per SM, 256 KB L1/shared per SM.
  [DS-H100] NVIDIA H100 datasheet: SXM 67 TFLOP/s FP32, 989 TFLOP/s dense BF16 (1,979 with
            sparsity), 3.35 TB/s HBM3.
  [DS-H200] NVIDIA H200 datasheet: the same GH100 (67 / 989 TFLOP/s), 4.8 TB/s HBM3e, 141 GB.
  [WP-A100] NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs, 1,410 MHz boost,
            64 FP32 lanes per SM, 19.5 TFLOP/s FP32, 312 TFLOP/s dense BF16.
  [DS-A100] NVIDIA A100 80GB SXM datasheet: 2,039 GB/s HBM2e.
  [PG-TPUT] CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table (results per
            clock per SM): 32-bit float add/multiply/FMA 64 on cc 8.0, 128 on 9.0; 32-bit
            integer add/compare/logic/shift and multiply-add 64; special functions (exp2, rcp,
            rsqrt: MUFU) 16; type conversions ("all other type conversions", which
            F2FP, the float-to-bf16x2 pack, is: one 32-bit result a lane) 16; warp shuffle 32.
  [NCU-PIPE] Nsight Compute Kernel Profiling Guide, "Pipelines": the FMA pipe also runs integer
            multiplies (IMAD, IMUL); the ALU the other integer, logic and compare work; the XU
            special functions and conversions; HMMA the tensor pipe.
  [PG-SMEM] CUDA C++ Programming Guide, "Shared Memory" (compute capability 5.x and later):
            32 banks, each 32 bits wide per clock, i.e. 128 bytes per clock per SM; and
            "Features and Technical Specifications": 64K 32-bit registers, 64 resident warps and
            32 resident blocks per SM; shared memory per SM 164 KB (cc 8.0) / 228 KB (cc 9.0),
            per block at most 163 KB / 227 KB, 1 KB of it reserved by the system per block.

The H100 and H200 are read compiled for "sm_90a", Hopper's arch-specific target: only it has
wgmma (HGMMA in the SASS), which the kernel file uses under __CUDA_ARCH_FEAT_SM90_ALL; its code
for every other kernel is the plain sm_90 one. The A100 is read compiled for sm_80.

Not modelled: the L2 cache. NVIDIA documents its size, not its bandwidth; what the hot loop
loads from global memory is charged to the SM's L1/shared data path instead (the same 128
bytes per clock: L1 and shared memory are one array [PG-SMEM]), and what a launch must move
at least to the HBM bandwidth."""

from __future__ import annotations

from dataclasses import dataclass

from andrea_cli.errors import AndreaError


@dataclass(frozen=True)
class GpuSpec:
    key: str  # what --gpu takes
    name: str
    arch: str  # what NVRTC compiles the bound's SASS for: sm_90a on Hopper (wgmma), sm_80
    sms: int
    clock_ghz: float  # boost clock: the one NVIDIA's FP32 peak is quoted at
    tensor_clock_ghz: float  # the clock its dense BF16 peak is quoted at (ASSUMED: an SM's with busy tensor cores)
    fp32_lanes: int  # FP32 FMA results per clock per SM [PG-TPUT]
    bf16_peak_tflops: float  # dense BF16 tensor-core peak, fp32 accumulate, from the datasheet
    hbm_gbs: float
    smem_per_sm: int  # bytes of shared memory one SM can give its blocks
    smem_per_block: int  # the most one block may have (opted in)
    tensor_flops_per_clock: int = 4096  # dense BF16 flops per clock per SM [WP-H100; WP-A100: 2048]
    mma_sync_fraction: float = 1.0  # HMMA's share of that rate (ASSUMED 2/3 on Hopper, see above)
    issue_per_clock: int = 4  # warp instructions per clock per SM: 4 schedulers x 1 [WP-H100, WP-A100]
    alu_lanes: int = 64  # integer and logic results per clock per SM [PG-TPUT]
    mufu_lanes: int = 16  # special functions, and conversions (F2FP, F2I...), per clock per SM [PG-TPUT]
    shuffle_lanes: int = 32  # warp shuffle results per clock per SM [PG-TPUT]
    shared_bytes_per_clock: int = 128  # 32 banks x 4 bytes [PG-SMEM]
    registers_per_sm: int = 65536
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    smem_reserved_per_block: int = 1024  # cc 8.0 and later [PG-SMEM]

    @property
    def fp32_peak_tflops(self) -> float:
        """SMs x lanes x 2 flops (an FMA) x clock: 66.9 on H100/H200 (datasheet: 67), 19.5 on A100."""
        return self.sms * self.fp32_lanes * 2 * self.clock_ghz / 1e3

    @property
    def tensor_peak_tflops(self) -> float:
        """SMs x flops per clock x the tensor clock: 989.4 on H100/H200 (datasheet: 989), 312 on A100."""
        return self.sms * self.tensor_flops_per_clock * self.tensor_clock_ghz / 1e3

    def sm_clock_ghz(self, tensor: bool) -> float:
        """The clock every pipe of a kernel runs at: the tensor clock when it does tensor-core work."""
        return self.tensor_clock_ghz if tensor else self.clock_ghz


_HOPPER = dict(arch="sm_90a", sms=132, clock_ghz=1.98, tensor_clock_ghz=1.83, fp32_lanes=128, bf16_peak_tflops=989.0,
               mma_sync_fraction=2 / 3, smem_per_sm=228 * 1024, smem_per_block=227 * 1024)
GPUS = {
    "h200": GpuSpec("h200", "NVIDIA H200 SXM", hbm_gbs=4800.0, **_HOPPER),
    "h100": GpuSpec("h100", "NVIDIA H100 SXM5", hbm_gbs=3350.0, **_HOPPER),
    "a100": GpuSpec("a100", "NVIDIA A100 SXM4 80GB", "sm_80", sms=108, clock_ghz=1.41, tensor_clock_ghz=1.41,
                    fp32_lanes=64, bf16_peak_tflops=312.0, tensor_flops_per_clock=2048, hbm_gbs=2039.0,
                    smem_per_sm=164 * 1024, smem_per_block=163 * 1024),
}


def gpu_spec(key: str) -> GpuSpec:
    try:
        return GPUS[key.lower()]
    except KeyError:
        raise AndreaError(f"--gpu {key!r} is not a GPU the bound knows: use {', '.join(GPUS)}") from None


# Parts sold under a modelled name with other SM counts, clocks or memory: the model would be wrong for them.
OTHER_PARTS = {"h100": ("pcie", "nvl")}


def spec_for_device(name: str, sms: int) -> tuple[GpuSpec | None, str]:
    """The modelled GPU a device is ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"),
    by its name and checked by its SM count; (None, why) for one the model does not describe."""
    lowered = name.lower()
    for key, spec in GPUS.items():
        if key not in lowered:
            continue
        other = next((part for part in OTHER_PARTS.get(key, ()) if part in lowered), None)
        if other:
            return None, f"{name} is the {key.upper()} {other.upper()} part; the model describes the {spec.name}"
        if sms != spec.sms:
            return None, f"{name} has {sms} SMs; the model's {spec.name} has {spec.sms}"
        return spec, ""
    return None, f"no model of {name}: the bound knows {', '.join(s.name for s in GPUS.values())}"
