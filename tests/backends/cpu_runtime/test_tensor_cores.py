"""The tensor-core building blocks (mma, ldmatrix, cp.async, the bf16 and tf32 conversions,
ex2.approx.ftz) through the CPU build's emulation (tests/kernels/tensor_cores.cu), against NumPy:
roundings bit-exact (ties included), fragment layouts as the PTX ISA documents them; and the misuse
a GPU leaves undefined, refused. (The kernels built from them: tests/backends/launch/test_fused_bf16.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime.errors import CpuWarpError
from andrea_cli.backends.cpu_runtime.module import CpuModule
from andrea_cli.verification import bf16_attention


@pytest.fixture(scope="module")
def checks(tensor_core_checks):
    """The check kernels (tests/kernels/tensor_cores.cu, appended to the kernel file: conftest.py)."""
    return CpuModule(tensor_core_checks)


@pytest.fixture
def kernels(cpu_each_schedule):
    """The kernel file's CPU build in each thread schedule (conftest's cpu_each_schedule)."""
    return cpu_each_schedule.device()


# --- independent roundings: np.frexp and np.rint, not the bit tricks of the emulation -------------

def round_to_bits(x: np.ndarray, bits: int, ties_even: bool) -> np.ndarray:
    """x rounded to `bits` significant bits (float32 exponent range, its subnormal spacing)."""
    x = np.asarray(x, np.float64)
    _, e = np.frexp(x)
    quantum = np.exp2(np.maximum(e, -125) - bits)
    scaled = x / quantum
    r = np.rint(scaled) if ties_even else np.copysign(np.floor(np.abs(scaled) + 0.5), scaled)
    with np.errstate(over="ignore"):
        return (r * quantum).astype(np.float32)  # past the largest float: inf


def bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def special_floats() -> np.ndarray:
    """Ties and near-ties for both roundings, signs, the largest float, subnormals, infinities."""
    raw = [0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0xBF808000, 0xBF818000,  # bf16 ties
           0x3F801000, 0x3F803000, 0x3F800FFF, 0xBF801000, 0x3F802000,              # tf32 ties
           0x7F7FFFFF, 0xFF7FFFFF, 0x00008000, 0x00018000, 0x00001000, 0x00000001,
           0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x3F800000]
    return np.array(raw, np.uint32).view(np.float32)


def test_rounding_references_agree_on_ties():
    # the NumPy references the emulation is held to, on values whose answer is known by hand
    assert bits(round_to_bits(np.float32(1 + 2**-8), 8, True)) == 0x3F800000  # tie, even: down
    assert bits(round_to_bits(np.float32(1 + 3 * 2**-8), 8, True)) == 0x3F820000  # tie, odd: up
    assert bits(round_to_bits(np.float32(1 + 2**-11), 11, False)) == 0x3F802000  # tie: away
    assert bits(round_to_bits(np.float32(-(1 + 2**-11)), 11, False)) == 0xBF802000
    assert np.isinf(round_to_bits(np.float32(3.4028235e38), 8, True))


def test_conversions_bit_exact(checks):
    rng = np.random.default_rng(0)
    x = np.concatenate([special_floats(), rng.standard_normal(3000).astype(np.float32),
                        (rng.standard_normal(500) * 1e-39).astype(np.float32),
                        rng.integers(0, 2**32, 500, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    x = x[np.isfinite(x)]
    packed, tf32 = np.zeros(x.size, np.uint32), np.zeros(x.size, np.uint32)
    checks.get_function("check_conversions")((1,), (64,), (x, packed, tf32, np.int32(x.size)))
    np.testing.assert_array_equal(packed & 0xFFFF, bits(round_to_bits(x, 8, True)) >> 16)  # lo = first operand
    np.testing.assert_array_equal(packed >> 16, bits(round_to_bits(-x, 8, True)) >> 16)
    np.testing.assert_array_equal(tf32, bits(round_to_bits(x, 11, False)))
    np.testing.assert_array_equal(packed & 0xFFFF, bf16_attention.bf16_bits(x))  # the Python side's copy


def test_conversions_of_non_finite(checks):
    x = np.array([np.inf, -np.inf, np.nan], np.float32)
    packed, tf32 = np.zeros(3, np.uint32), np.zeros(3, np.uint32)
    checks.get_function("check_conversions")((1,), (32,), (x, packed, tf32, np.int32(3)))
    assert list(packed & 0xFFFF) == [0x7F80, 0xFF80, 0x7FFF]  # a NaN becomes the canonical bf16 NaN
    assert list(tf32[:2]) == [0x7F800000, 0xFF800000] and np.isnan(tf32[2:].view(np.float32)).all()


def test_ex2_approx_ftz_flushes_subnormals(checks):
    # inputs: subnormals (flushed to 0 first: 2^0 = 1), results below 2^-126 (flushed to +0),
    # the smallest normal result, the PTX manual's special values, ordinary arguments
    tiny = np.array([1e-40, -1e-40, 1e-45], np.float32)
    x = np.concatenate([tiny, np.array([-126.0, -126.5, -140.0, -149.0, -200.0, -np.inf, -0.0, 0.0, np.inf, np.nan,
                                        -1.5, 0.25, 3.0, 127.5], np.float32)])
    y = np.full(x.size, -1.0, np.float32)
    checks.get_function("check_ex2_ftz")((1,), (32,), (x, y, np.int32(x.size)))
    want = np.exp2(x.astype(np.float64))
    want[:3] = 1.0  # a subnormal input is +-0
    want[np.abs(want) < 2.0**-126] = 0.0  # a subnormal result is +0
    assert np.array_equal(np.isnan(y), np.isnan(want))
    ok = ~np.isnan(want)
    # the CPU build's exp2f is within an ulp; a GPU's ex2.approx within the PTX manual's 2 (+ rounding)
    exact = y[ok] == want[ok]  # 0, 1 and inf, and what exp2f gets right
    with np.errstate(invalid="ignore"):
        close = np.abs(y[ok] - want[ok]) <= 5 * 2.0**-24 * np.abs(want[ok])
    assert (exact | close).all(), (x, y)
    assert y[x == -126.0][0] == 2.0**-126 and (y[(x == -126.5) | (x <= -140)] == 0).all()
    assert not np.signbit(y[ok]).any()


@pytest.mark.parametrize("n", [1, 2, 7, 1000])
def test_to_bf16_kernel(kernels, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32) * 3
    out = np.zeros(n, np.uint16)
    kernels.get_function("to_bf16_kernel1")((2,), (64,), (x, out, np.int64(n), np.float32(0.18)))
    np.testing.assert_array_equal(out, bits(round_to_bits(x * np.float32(0.18), 8, True)) >> 16)


def test_mma_bf16_m16n8k16(checks):
    rng = np.random.default_rng(1)
    a = bf16_attention.bf16_bits(rng.standard_normal((16, 16)).astype(np.float32))
    bn = bf16_attention.bf16_bits(rng.standard_normal((8, 16)).astype(np.float32))
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = np.zeros((16, 8), np.float32)
    checks.get_function("check_mma_bf16")((1,), (32,), (a, bn, c, d))
    a64, b64 = (bf16_attention.bf16_to_float(x).astype(np.float64) for x in (a, bn))
    exact = a64 @ b64.T + c.astype(np.float64)
    # products of bf16 are exact; the emulation sums in double and rounds once
    assert (np.abs(d - exact) <= 2**-24 * np.abs(exact) * 1.001 + 1e-30).all()


@pytest.mark.parametrize("convert", [1, 0])
def test_mma_tf32_m16n8k8_rounds_or_truncates(checks, convert):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 8)).astype(np.float32)
    bn = rng.standard_normal((8, 8)).astype(np.float32)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = np.zeros((16, 8), np.float32)
    checks.get_function("check_mma_tf32")((1,), (32,), (a, bn, c, d, np.int32(convert)))
    as_tf32 = (lambda m: round_to_bits(m, 11, False)) if convert else \
        (lambda m: (bits(m) & np.uint32(0xFFFFE000)).view(np.float32))  # raw fp32: the low bits ignored
    exact = as_tf32(a).astype(np.float64) @ as_tf32(bn).astype(np.float64).T + c
    assert (np.abs(d - exact) <= 2**-24 * np.abs(exact) * 1.001 + 1e-30).all()


def test_ldmatrix_every_form(checks):
    rng = np.random.default_rng(3)
    m = np.arange(32 * 32, dtype=np.uint16).reshape(32, 32)
    row_of_lane = rng.permutation(32).astype(np.int32)
    col8_of_lane = rng.integers(0, 4, 32).astype(np.int32)
    out = np.zeros((6, 32, 4), np.uint32)
    checks.get_function("check_ldmatrix")((1,), (32,), (m, row_of_lane, col8_of_lane, out))
    # matrix i is the 8x8 block whose rows lanes 8i .. 8i+7 point at
    mats = [np.stack([m[row_of_lane[8 * i + r], 8 * col8_of_lane[8 * i + r]:][:8] for r in range(8)])
            for i in range(4)]
    lane = np.arange(32)
    for form, (n, trans) in enumerate([(1, False), (2, False), (4, False), (1, True), (2, True), (4, True)]):
        for i in range(n):
            mat = mats[i].T if trans else mats[i]
            lo, hi = (mat[lane // 4, 2 * (lane % 4) + h].astype(np.uint32) for h in (0, 1))
            np.testing.assert_array_equal(out[form, :, i], lo | hi << 16,
                                          err_msg=f"x{n}{'.trans' if trans else ''} register {i}")


def test_cp_async_lands_at_its_wait_group(checks):
    src = np.arange(256, dtype=np.float32) + 1
    before, after1, after0 = (np.zeros(n, np.float32) for n in (128, 256, 256))
    checks.get_function("check_cp_async")((1,), (32,), (src, before, after1, after0))
    assert np.isnan(before).all()  # issued, not waited for: the destination reads as poison
    rows = src.reshape(32, 2, 4)
    a1, a0 = after1.reshape(32, 2, 4), after0.reshape(32, 2, 4)
    np.testing.assert_array_equal(a1[:, 0], rows[:, 0])  # wait_group 1: the older group landed
    assert np.isnan(a1[:, 1]).all()  # the newer one is still in flight
    np.testing.assert_array_equal(a0[:, 0], rows[:, 0])
    np.testing.assert_array_equal(a0[0::2, 1], rows[0::2, 1])
    np.testing.assert_array_equal(a0[1::2, 1], 0)  # zero-filled: nothing read


@pytest.mark.parametrize("how, match", [
    (0, "has returned"),                   # half the warp at mma.sync.aligned
    (1, "not in shared memory"),
    (2, "not 16-byte aligned"),
    (3, "at the same instruction"),        # x1 on one half warp, x2 on the other
])
def test_misuse_is_refused(checks, how, match):
    g = np.zeros(64, np.uint16)
    with pytest.raises(CpuWarpError, match=match):
        checks.get_function("misuse_tensor_cores")((1,), (32,), (g, np.zeros(32, np.float32), np.int32(how)))


def test_aligned_ops_need_whole_warps(checks):
    g = np.zeros(64, np.uint16)
    with pytest.raises(CpuWarpError, match="do not exist"):
        checks.get_function("misuse_tensor_cores")((1,), (48,), (g, np.zeros(48, np.float32), np.int32(4)))
    # whole warps: fine
    checks.get_function("misuse_tensor_cores")((1,), (64,), (g, np.zeros(64, np.float32), np.int32(4)))
