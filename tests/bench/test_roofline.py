"""bench/roofline.py: the FLOP and byte counts (FlashAttention's convention, forward and backward), the
peaks read from a device's properties (FP32 and bf16), and the slower of the two roofs."""

from __future__ import annotations

import pytest

from andrea_cli.bench.roofline import (DevicePeak, attention_bytes, attention_flops, bf16_flops_per_clock_per_sm,
                                       fp32_lanes_per_sm, peak_from_properties)


def test_flops_follow_the_flashattention_convention():
    # One head, T = 1024, d_k = 64: Q·K^T is 1024·1024·64 multiply-adds, P·V the same; 2 flops each.
    assert attention_flops(1, 1024, 64, causal=False) == 2 * (2 * 1024 * 1024 * 64)
    assert attention_flops(1, 1024, 64, causal=True) == 2 * 1024 * 1024 * 64
    assert attention_flops(12, 256, 128, causal=False) == 12 * 4 * 256 * 256 * 128


def test_bytes_are_q_k_v_read_and_o_written_once():
    assert attention_bytes(1, 1024, 64) == 4 * 1024 * 64 * 4  # four (T, 64) float32 arrays
    assert attention_bytes(2, 10, 3, d_v=5) == 2 * 4 * (10 * 3 * 2 + 10 * 5 * 2)


def test_peak_from_fake_h100_like_properties():
    props = {"name": b"Fake H100", "major": 9, "minor": 0, "multiProcessorCount": 132,
             "clockRate": 1_980_000, "memoryClockRate": 2_619_000, "memoryBusWidth": 5120}
    peak = peak_from_properties(props)
    assert peak.name == "Fake H100" and peak.lanes_per_sm == 128
    assert peak.peak_tflops == pytest.approx(132 * 128 * 2 * 1.98e9 / 1e12)  # 66.9
    assert peak.peak_gbs == pytest.approx(2.619e9 * 2 * 640 / 1e9)  # 3352
    assert fp32_lanes_per_sm(8, 0) == 64 and fp32_lanes_per_sm(8, 6) == 128


def test_roofline_takes_the_slower_roof():
    peak = DevicePeak("x", 1, 64, 1.0, peak_tflops=10.0, peak_gbs=1000.0)
    assert peak.roofline_ms(1e12, 1e6) == pytest.approx(100.0) and peak.bound(1e12, 1e6) == "compute"
    assert peak.roofline_ms(1e6, 1e9) == pytest.approx(1.0) and peak.bound(1e6, 1e9) == "memory"


def test_bf16_peak_from_properties():
    h100 = {"name": "H100", "major": 9, "minor": 0, "multiProcessorCount": 132, "clockRate": 1_830_000,
            "memoryClockRate": 2_619_000, "memoryBusWidth": 5120}
    assert peak_from_properties(h100).bf16_tflops == pytest.approx(132 * 4096 * 1.83e9 / 1e12)  # 989, the datasheet's
    a100 = dict(h100, major=8, multiProcessorCount=108, clockRate=1_410_000)
    assert peak_from_properties(a100).bf16_tflops == pytest.approx(312, rel=0.01)
    assert bf16_flops_per_clock_per_sm(7, 0) is None  # Volta: no bf16 mma
    peak = DevicePeak("x", 1, 64, 1.0, peak_tflops=10.0, peak_gbs=1000.0, bf16_tflops=100.0)
    assert peak.roofline_ms(1e12, 1e6, "bf16") == pytest.approx(10.0) and peak.roofline_ms(1e12, 1e6) == pytest.approx(100.0)


# ------------------------------------------------------------------------------------------------
# The backward pass.

def test_backward_costs_follow_the_flashattention_convention():
    from andrea_cli.bench.roofline import backward_bytes, backward_flops

    # five T×T×d_k matmuls (Q·K^T recomputed, dV, dP, dQ, dK) against the forward's two
    assert backward_flops(1, 1024, 64, causal=False) == 5 * (2 * 1024 * 1024 * 64)
    assert backward_flops(3, 100, 16, causal=True) == 2.5 * attention_flops(3, 100, 16, causal=True)
    assert backward_bytes(1, 1024, 64) == 8 * 1024 * 64 * 4  # Q, K, V, O, dO read; dQ, dK, dV written
