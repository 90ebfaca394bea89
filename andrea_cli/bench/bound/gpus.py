"""The GPUs a static bound can be read for, and the documented rates it is read with.

Every figure here is NVIDIA's, from the sources named beside it; none was measured by this
project. A rate is what one SM does per clock; the model turns instruction counts into SM clocks
with them, and clocks into seconds with the boost clock.

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
            rsqrt: MUFU) 16; type conversions 16; warp shuffle 32.
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
    fp32_lanes: int  # FP32 FMA results per clock per SM [PG-TPUT]
    bf16_peak_tflops: float  # dense BF16 tensor-core peak, fp32 accumulate, from the datasheet
    hbm_gbs: float
    smem_per_sm: int  # bytes of shared memory one SM can give its blocks
    smem_per_block: int  # the most one block may have (opted in)
    issue_per_clock: int = 4  # warp instructions per clock per SM: 4 schedulers x 1 [WP-H100, WP-A100]
    alu_lanes: int = 64  # integer and logic results per clock per SM [PG-TPUT]
    mufu_lanes: int = 16  # special functions (and conversions) per clock per SM [PG-TPUT]
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
    def tensor_flops_per_clock(self) -> float:
        """Dense BF16 flops per clock per SM at `clock_ghz`, from the datasheet's peak. On A100 this
        is 2048, the whitepaper's figure. On H100/H200 the whitepaper's 4096 per clock gives the
        datasheet's 989 TFLOP/s at 1.83 GHz, below the 1.98 GHz boost the FP32 peak is quoted at;
        the model keeps one clock and the datasheet's peak, so it uses 989 / (132 x 1.98 GHz)."""
        return self.bf16_peak_tflops * 1e12 / (self.sms * self.clock_ghz * 1e9)


GPUS = {
    "h200": GpuSpec("h200", "NVIDIA H200 SXM", "sm_90a", sms=132, clock_ghz=1.98, fp32_lanes=128,
                    bf16_peak_tflops=989.0, hbm_gbs=4800.0, smem_per_sm=228 * 1024, smem_per_block=227 * 1024),
    "h100": GpuSpec("h100", "NVIDIA H100 SXM5", "sm_90a", sms=132, clock_ghz=1.98, fp32_lanes=128,
                    bf16_peak_tflops=989.0, hbm_gbs=3350.0, smem_per_sm=228 * 1024, smem_per_block=227 * 1024),
    "a100": GpuSpec("a100", "NVIDIA A100 SXM4 80GB", "sm_80", sms=108, clock_ghz=1.41, fp32_lanes=64,
                    bf16_peak_tflops=312.0, hbm_gbs=2039.0, smem_per_sm=164 * 1024, smem_per_block=163 * 1024),
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
