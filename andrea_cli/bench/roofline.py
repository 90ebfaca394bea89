"""What attention costs and what a GPU allows: the FlashAttention FLOP convention, the bytes no
implementation can avoid, and the device's peak computed from its own properties."""

from __future__ import annotations

from dataclasses import dataclass

# ------------------------------------------------------------------------------------------------
# What a run has to do: the FlashAttention convention, and the bytes no implementation can avoid.

def attention_flops(H: int, T: int, d_k: int, causal: bool) -> float:
    """4·T²·d_k per head (Q·K^T and P·V, 2 flops per multiply-add, d_v = d_k), halved when
    causal: the convention FlashAttention's papers report, so TFLOP/s figures compare."""
    flops = 4.0 * T * T * d_k * H
    return flops / 2 if causal else flops


def backward_flops(H: int, T: int, d_k: int, causal: bool) -> float:
    """2.5 × the forward: FlashAttention's convention for the backward, its five T×T×d matmuls
    (Q·K^T recomputed, dV = P^T·dO, dP = dO·V^T, dQ = dS·K, dK = dS^T·Q) against the forward's two."""
    return 2.5 * attention_flops(H, T, d_k, causal)


def backward_bytes(H: int, T: int, d_k: int) -> float:
    """Read Q, K, V, O, dO and write dQ, dK, dV once, float32 (d_v = d_k)."""
    return 4.0 * H * T * d_k * 8


def attention_bytes(H: int, T: int, d_k: int, d_v: int | None = None) -> float:
    """Read Q, K, V and write O once, float32: the compulsory traffic. "Effective GB/s" divides
    this by the time, whatever an implementation really moves (the staged path moves 4 T×T more)."""
    d_v = d_k if d_v is None else d_v
    return 4.0 * H * T * (2 * d_k + 2 * d_v)


# ------------------------------------------------------------------------------------------------
# The device's peak, from its properties (not a table of model names).

# FP32 FMA lanes per SM by compute capability major.minor: 64 on sm_60/70/75/80 (GP100, V100,
# Turing, A100), 128 on consumer Pascal/Ampere/Ada (61, 86, 87, 89) and Hopper/Blackwell (90, 100, 120).
def fp32_lanes_per_sm(major: int, minor: int) -> int:
    if (major, minor) in ((6, 0), (7, 0), (7, 2), (7, 5), (8, 0)):
        return 64
    if major >= 6:
        return 128
    return 192 if major == 3 else 128  # Kepler 192; Maxwell 128


# Dense bf16 tensor-core flops per SM per clock (fp32 accumulate), by compute capability: A100
# 2048 (312 TFLOP/s at 108 SMs, 1.41 GHz), H100/H200 4096 (989 at 132 SMs, 1.83 GHz), B200 8192;
# GeForce/workstation Ampere and Ada 512 (their fp32-accumulate rate). None: no bf16 mma (Volta,
# Turing) or a device not in this list, whose % of peak is then not shown.
def bf16_flops_per_clock_per_sm(major: int, minor: int) -> int | None:
    return {(8, 0): 2048, (8, 6): 512, (8, 7): 512, (8, 9): 512, (9, 0): 4096, (10, 0): 8192}.get((major, minor))


@dataclass(frozen=True)
class DevicePeak:
    name: str
    sms: int
    lanes_per_sm: int
    clock_ghz: float  # the boost clock the driver reports
    peak_tflops: float  # SMs × lanes × 2 flops (FMA) × clock
    peak_gbs: float  # memory clock × 2 (double data rate) × bus width
    bf16_tflops: float | None = None  # dense bf16 tensor cores, fp32 accumulate; None if unknown

    def compute_peak(self, precision: str = "fp32") -> float | None:
        """TFLOP/s of the units a precision runs on: FP32 lanes, or bf16 tensor cores."""
        return self.bf16_tflops if precision == "bf16" else self.peak_tflops

    def roofline_ms(self, flops: float, nbytes: float, precision: str = "fp32") -> float:
        """The least time the work can take: bound by arithmetic or by memory, whichever is longer."""
        return max(flops / (self.compute_peak(precision) * 1e12), nbytes / (self.peak_gbs * 1e9)) * 1e3

    def bound(self, flops: float, nbytes: float, precision: str = "fp32") -> str:
        compute_s = flops / (self.compute_peak(precision) * 1e12)
        return "compute" if compute_s >= nbytes / (self.peak_gbs * 1e9) else "memory"


def peak_from_properties(props: dict) -> DevicePeak:
    """props: cudaDeviceProp-like keys name, major, minor, multiProcessorCount, clockRate (kHz),
    memoryClockRate (kHz), memoryBusWidth (bits)."""
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    lanes = fp32_lanes_per_sm(int(props["major"]), int(props["minor"]))
    sms = int(props["multiProcessorCount"])
    clock_ghz = props["clockRate"] / 1e6
    peak_gbs = props["memoryClockRate"] * 1e3 * 2 * (props["memoryBusWidth"] / 8) / 1e9
    per_clock = bf16_flops_per_clock_per_sm(int(props["major"]), int(props["minor"]))
    bf16 = sms * per_clock * clock_ghz / 1e3 if per_clock else None
    return DevicePeak(name, sms, lanes, clock_ghz, sms * lanes * 2 * clock_ghz / 1e3, peak_gbs, bf16)
