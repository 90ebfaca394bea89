"""CUDA's device surface on the CPU build (tests/kernels/surface.cu), against NumPy and exact
arithmetic: the bugs of issue 13, half and bfloat16 bit for bit, cooperative groups, atomics,
votes, warp reduce and match, integer and directed-rounding intrinsics."""

from __future__ import annotations

import pathlib
from fractions import Fraction

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime import RawModule
from andrea_cli.backends.cpu_runtime.errors import CpuAssertError, CpuCompileError, CpuRuntimeError, CpuWarpError

SURFACE = pathlib.Path(__file__).parents[2] / "kernels" / "surface.cu"
NAME_EXPRESSIONS = ("scale_by<float, 3>", "scale_by<int, 2>", "tile_reduce<8>", "tile_reduce<32>",
                    "narrow_arith<__half, __half2>", "narrow_arith<__nv_bfloat16, __nv_bfloat162>")


@pytest.fixture(scope="module")
def mod():
    return RawModule(path=str(SURFACE), name_expressions=NAME_EXPRESSIONS)


# --- the bugs, each failing before its fix ------------------------------------------------------

def test_extern_shared_inside_a_template(mod):
    out = np.zeros(64, np.float32)
    mod.get_function("shared_in_template")((1,), (64,), (out,), shared_mem=64 * 4)
    np.testing.assert_array_equal(out, (np.arange(64) + 1) % 64)


def test_template_kernels_by_name_expression(mod):
    x = np.arange(100, dtype=np.float32)
    y = np.zeros_like(x)
    mod.get_function("scale_by<float, 3>")((1,), (128,), (x, y, np.int32(100)))
    np.testing.assert_array_equal(y, 3 * x)
    xi, yi = np.arange(10, dtype=np.int32), np.zeros(10, np.int32)
    mod.get_function("scale_by<int,2>")((1,), (32,), (xi, yi, np.int32(10)))  # spacing as cupy allows
    np.testing.assert_array_equal(yi, 2 * xi)
    with pytest.raises(CpuRuntimeError, match=r"scale_by<double, 1>.*name_expressions"):
        mod.get_function("scale_by<double, 1>")


def test_atomics_convert_their_value(mod):
    count, total, dtotal = np.zeros(1, np.uint32), np.zeros(1, np.float32), np.zeros(1, np.float64)
    mod.get_function("atomics_convert")((2,), (64,), (count, total, dtotal))
    assert (count[0], total[0], dtotal[0]) == (128, 128.0, 128.0)


@pytest.mark.parametrize("lane_mask,width", [(8, 8), (4, 8), (16, 16), (1, 2), (24, 8)])
def test_xor_shuffle_reads_earlier_groups(mod, lane_mask, width):
    # PTX shfl.bfly: source lane ^ lane_mask if it is not past this lane's group, else the lane's own.
    out = np.zeros(32, np.int32)
    mod.get_function("xor_width")((1,), (32,), (out, np.int32(lane_mask), np.int32(width)))
    lanes = np.arange(32)
    src = lanes ^ lane_mask
    want = np.where(src <= (lanes | (width - 1)), src, lanes) + 100
    np.testing.assert_array_equal(out, want)


def test_device_assert_is_an_error_naming_file_and_line(mod):
    x = np.ones(32, np.float32)
    x[5] = -1
    with pytest.raises(CpuAssertError, match=r"device_assert: device assert failed at surface\.cu:\d+ .*thread "
                                             r"\(5, 0, 0\).*x\[threadIdx\.x\] >= 0\.0f.*block \(0, 0, 0\)"):
        mod.get_function("device_assert")((1,), (32,), (x, np.zeros(32, np.float32)))
    out = np.zeros(32, np.float32)
    mod.get_function("device_assert")((1,), (32,), (np.ones(32, np.float32) * 4, out))  # still works
    assert (out == 2).all()


def test_shuffle_reading_a_live_lane_outside_its_mask(mod):
    with pytest.raises(CpuWarpError, match=r"lane \d+ reads lane (1[6-9]|2\d|3[01]), which is not in the mask"):
        mod.get_function("reads_live_lane_outside_mask")((1,), (32,), (np.zeros(32, np.int32), np.int32(16)))
    out = np.zeros(32, np.int32)
    mod.get_function("reads_live_lane_outside_mask")((1,), (32,), (out, np.int32(1)))
    np.testing.assert_array_equal(out[:16], np.arange(16) ^ 1)


def test_exp10f_and_unknown_symbols(mod, tmp_path):
    out = np.zeros(32, np.float32)
    mod.get_function("fast_exp10")((1,), (32,), (out,))
    np.testing.assert_allclose(out, 10.0 ** (np.arange(32) / 8), rtol=1e-6)
    src = tmp_path / "unknown.cu"
    src.write_text('extern "C" float __nvvm_secret(float);\n'
                   'extern "C" __global__ void k(float* o) { o[0] = __nvvm_secret(1.0f); }\n')
    with pytest.raises(CpuCompileError, match=r"unknown\.cu.*__nvvm_secret is not defined"):
        RawModule(path=str(src))


def test_null_pointer_arguments(mod):
    out, bias = np.zeros(32, np.float32), np.full(32, 0.5, np.float32)
    mod.get_function("optional_bias")((1,), (32,), (out, None))
    np.testing.assert_array_equal(out, 2 * np.arange(32))
    mod.get_function("optional_bias")((1,), (32,), (out, bias))
    np.testing.assert_array_equal(out, 2 * np.arange(32) + 0.5)


# --- half and bfloat16, bit for bit ----------------------------------------------------------------

def _bf16_neighbours(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bf16 bit patterns just toward zero and just away from zero of float64 x (finite,
    within float32's range): truncate in float64, exactly."""
    ax = np.abs(x)
    sub = ax < 2.0 ** -126  # bf16 subnormals: a fixed quantum of 2^-133
    trunc = np.where(sub, np.floor(ax / 2.0 ** -133) * 2.0 ** -133,
                     (ax.view(np.uint64) & ~np.uint64((1 << 45) - 1)).view(np.float64))
    low = (trunc.astype(np.float32).view(np.uint32) >> 16).astype(np.uint32)
    sign = np.where(np.signbit(x), 0x8000, 0).astype(np.uint32)
    return low | sign, (low + 1) | sign


def _bf16_value(bits: np.ndarray) -> np.ndarray:
    mag = bits & 0x7fff
    v = (mag.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    v = np.where(mag == 0x7f80, 2.0 ** 128, v)  # the step past the largest finite value
    return np.where(bits & 0x8000, -v, v)


def bf16_reference(x: np.ndarray, mode: str) -> np.ndarray:
    """float64 -> bf16 bits rounded as mode says ("rn" nearest even, "rz", "rd", "ru")."""
    toward, away = _bf16_neighbours(x)
    lo, hi = np.abs(_bf16_value(toward)), np.abs(_bf16_value(away))
    ax = np.abs(x)
    exact = lo == ax
    if mode == "rn":
        up = (hi - ax < ax - lo) | ((hi - ax == ax - lo) & (toward & 1 == 1))
    elif mode == "rz":
        up = np.zeros_like(exact)
    else:
        up = ~exact & (np.signbit(x) == (mode == "rd"))
    return np.where(up & ~exact, away, toward).astype(np.uint16)


def half_reference(x: np.ndarray, mode: str) -> np.ndarray:
    """float64 -> half bits: numpy's float16 (nearest even), stepped for the directed modes."""
    with np.errstate(over="ignore"):
        return _half_reference(x, mode)


def _half_reference(x: np.ndarray, mode: str) -> np.ndarray:
    rn = x.astype(np.float16)
    r = rn.astype(np.float64)
    if mode == "rz":
        rn = np.where(np.abs(r) > np.abs(x), np.nextafter(rn, np.float16(0)), rn)
    elif mode == "rd":
        rn = np.where(r > x, np.nextafter(rn, np.float16(-np.inf)), rn)
    elif mode == "ru":
        rn = np.where(r < x, np.nextafter(rn, np.float16(np.inf)), rn)
    return rn.view(np.uint16)


def _conversion_inputs() -> np.ndarray:
    """Every finite half and bf16 value, the midpoints between neighbours and one float ulp either
    side of them, random bit patterns over every exponent, and the edge cases."""
    halves = np.arange(0x7c00, dtype=np.uint16).view(np.float16).astype(np.float64)
    bf16s = _bf16_value(np.arange(0x7f80, dtype=np.uint32))
    mids = np.concatenate([(halves[:-1] + halves[1:]) / 2, (bf16s[:-1] + bf16s[1:]) / 2]).astype(np.float32)
    rng = np.random.default_rng(13)
    random_bits = rng.integers(0, 0x7f800000, 40_000, dtype=np.uint32).view(np.float32)
    edges = np.array([65504, 65519.99, 65520, 65536, 1e30, 3.4028235e38, 2.0 ** -24, 2.0 ** -25,
                      3 * 2.0 ** -26, 2.0 ** -149, 1e-40, 0.0], np.float32)
    x = np.concatenate([halves.astype(np.float32), bf16s.astype(np.float32), mids,
                        np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf)),
                        random_bits, edges])
    return np.concatenate([x, -x])


def test_float_and_double_to_half_and_bf16_bit_exact(mod):
    x = _conversion_inputs()
    # Doubles a float cannot hold: midpoints nudged by 2^-40 (rounding through float would tie).
    mids = x.astype(np.float64)
    d = mids * (1 + np.where(np.arange(len(x)) % 2 == 0, 2.0 ** -40, -(2.0 ** -40)))
    n = len(x)
    out = np.zeros((n, 10), np.uint16)
    mod.get_function("narrow_conversions")((8,), (256,), (x, d, out, np.int32(n)))
    x64 = x.astype(np.float64)
    for col, mode in enumerate(["rn", "rz", "rd", "ru"]):
        np.testing.assert_array_equal(out[:, col], half_reference(x64, mode), err_msg=f"half {mode}")
        np.testing.assert_array_equal(out[:, 4 + col], bf16_reference(x64, mode), err_msg=f"bf16 {mode}")
    np.testing.assert_array_equal(out[:, 8], half_reference(d, "rn"), err_msg="double -> half")
    np.testing.assert_array_equal(out[:, 9], bf16_reference(d, "rn"), err_msg="double -> bf16")
    special = np.zeros((4, 10), np.uint16)
    mod.get_function("narrow_conversions")((1,), (32,), (np.array([np.nan, np.inf, -np.inf, -0.0], np.float32),
                                                         np.array([np.nan, np.inf, -np.inf, -0.0]), special,
                                                         np.int32(4)))
    assert (special[0] == 0x7fff).all()  # CUDA's canonical NaN
    assert list(special[1, [0, 4, 8, 9]]) == [0x7c00, 0x7f80, 0x7c00, 0x7f80]
    assert list(special[1, [1, 5]]) == [0x7c00, 0x7f80]  # infinity is exact: it stays infinite
    assert list(special[3, [0, 4]]) == [0x8000, 0x8000]


def test_every_half_and_bf16_widens_exactly(mod):
    bits = np.arange(1 << 16, dtype=np.uint16)
    h, b = np.zeros(1 << 16, np.float32), np.zeros(1 << 16, np.float32)
    mod.get_function("widen")((8,), (256,), (bits, h, b, np.int32(1 << 16)))
    np.testing.assert_array_equal(h.view(np.uint32), bits.view(np.float16).astype(np.float32).view(np.uint32))
    np.testing.assert_array_equal(b.view(np.uint32), bits.astype(np.uint32) << 16)


def _narrow_operands(decode, encode, rng, n):
    """Values with exponents in [-8, 8] (so float64 holds a + b, a * b and a * b + c exactly),
    plus zeros, infinities and NaN."""
    v = rng.uniform(1, 2, (3, n)) * 2.0 ** rng.integers(-8, 9, (3, n)) * rng.choice([-1, 1], (3, n))
    v[:, :6] = [[0, np.inf, -np.inf, np.nan, 1, 0], [1, 1, np.inf, 2, 0, -0.0], [0, 0, 0, 0, 0, 0]]
    bits = encode(v)
    return bits, decode(bits)


@pytest.mark.parametrize("kind", ["half", "bf16"])
def test_half_and_bf16_arithmetic_rounds_once(mod, kind):
    rng = np.random.default_rng(1 if kind == "half" else 2)
    n = 3000
    if kind == "half":
        encode, decode, name = (lambda v: half_reference(v, "rn")), (lambda b: b.view(np.float16).astype(np.float64)), \
            "narrow_arith<__half, __half2>"
    else:
        encode, decode, name = (lambda v: bf16_reference(np.nan_to_num(v, nan=0.0, posinf=3e38, neginf=-3e38), "rn")), \
            (lambda b: _bf16_value(b.astype(np.uint32))), "narrow_arith<__nv_bfloat16, __nv_bfloat162>"
    bits, (a, b, c) = _narrow_operands(decode, encode, rng, n)
    out = np.zeros((n, 8), np.uint16)
    mod.get_function(name)((4,), (128,), (bits[0].copy(), bits[1].copy(), bits[2].copy(), out, np.int32(n)))
    with np.errstate(all="ignore"):
        larger = np.where((a == 0) & (b == 0), np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0), np.fmax(a, b))
        exact = [a + b, a - b, a * b, a / b, a * b + c, np.sqrt(np.abs(a)), a * b + c, larger]
    rounded = (lambda v: half_reference(v, "rn")) if kind == "half" else \
        (lambda v: bf16_reference(np.where(np.isfinite(v), np.clip(v, -3.3e38, 3.3e38), 0), "rn"))
    for col, want in enumerate(exact):
        finite = np.isfinite(want) & (np.abs(want) < (65504 if kind == "half" else 3.3e38))
        np.testing.assert_array_equal(out[finite, col], rounded(want)[finite], err_msg=f"{kind} column {col}")
        got = decode(out[:, col])
        assert (np.isnan(got) == np.isnan(want)).all(), f"{kind} column {col}: NaN where NumPy has none"


# --- cooperative groups --------------------------------------------------------------------------

@pytest.mark.parametrize("tile", [8, 32])
def test_tile_reduce_and_scan(mod, tile):
    x = np.random.default_rng(tile).standard_normal(128).astype(np.float32)
    sums, scans = np.zeros(128 // tile, np.float32), np.zeros(128, np.float32)
    mod.get_function(f"tile_reduce<{tile}>")((1,), (128,), (x, sums, scans))
    np.testing.assert_allclose(sums, x.reshape(-1, tile).astype(np.float64).sum(1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(scans, np.cumsum(x.reshape(-1, tile).astype(np.float64), axis=1).ravel(),
                               rtol=1e-5, atol=1e-5)


def test_tile_shuffles_votes_and_ranks(mod):
    n = 48  # a partial second warp: its tiles of 4 still have every lane
    out = np.zeros((n, 8), np.int32)
    mod.get_function("tile_collectives")((1,), (n,), (out,))
    t = np.arange(n)
    base = t & ~3
    np.testing.assert_array_equal(out[:, 0], base + 3)
    np.testing.assert_array_equal(out[:, 1], np.where(t % 4 < 3, t + 1, t))
    np.testing.assert_array_equal(out[:, 2], np.where(t % 4 > 0, t - 1, t))
    np.testing.assert_array_equal(out[:, 3], t ^ 2)
    np.testing.assert_array_equal(out[:, 4], 0b1010)
    np.testing.assert_array_equal(out[:, 5], (base == 4) + 2)
    np.testing.assert_array_equal(out[:, 6], base + 3)
    np.testing.assert_array_equal(out[:, 7], t // 4 * 100 + n // 4)


def test_coalesced_group_aggregated_increment(mod):
    counter, slots = np.zeros(1, np.int32), np.full(96, -1, np.int32)
    mod.get_function("aggregated_increment")((1,), (96,), (counter, slots))
    assert counter[0] == 48
    np.testing.assert_array_equal(np.sort(slots[:48]), np.arange(1, 96, 2))


def test_tile_sync_is_strict_and_grid_sync_refused(mod):
    with pytest.raises(CpuWarpError, match=r"lanes 0-6 wait for lane 7, which has returned"):
        mod.get_function("tile_lane_returns")((1,), (32,), (np.zeros(32, np.float32),))
    with pytest.raises(CpuAssertError, match=r"grid_group::sync\(\).*CooperativeKernel.*split the kernel"):
        mod.get_function("grid_sync")((2,), (32,), (np.zeros(32, np.float32),))


# --- atomics, votes, warp reduce and match ------------------------------------------------------

def test_atomic_family_on_every_type(mod):
    i, u = np.zeros(5, np.int32), np.array([0xffffffff, 0, 0, 0, 0], np.uint32)
    ull, f, d = np.zeros(2, np.uint64), np.zeros(2, np.float32), np.zeros(1, np.float64)
    h, b = np.zeros(4, np.float16), np.zeros(4, np.uint16)
    mod.get_function("atomic_family")((3,), (64,), (i, u, ull, f, d, h, b))
    t = np.arange(192)
    assert list(u) == [0, 0xffffffff, int(np.bitwise_xor.reduce(t)), 192 % 10, 8]
    assert list(i) == [-191, 191, -384, 64, 42]
    assert list(ull) == [t.sum(), 191 << 33]
    assert list(f) == [48.0, 1.5] and d[0] == 96.0
    assert list(h) == [192, 0, 192, 384]
    assert list(_bf16_value(b.astype(np.uint32))) == [192, 0, 192, 384]


def test_block_votes_and_warp_reductions(mod):
    n = 64
    pred = np.random.default_rng(5).integers(0, 2, n).astype(np.int32)
    out = np.zeros((n, 12), np.int32)
    mod.get_function("votes")((1,), (n,), (pred, out))
    lane = np.arange(n) % 32
    for w in range(2):
        p, o = pred[32 * w:32 * w + 32], out[32 * w:32 * w + 32]
        assert (o[:, 0] == pred.sum()).all() and (o[:, 1] == pred.all()).all() and (o[:, 2] == pred.any()).all()
        assert (o[:, 3] == 7).all()
        assert (o[:, 4] == p.sum()).all() and (o[:, 5] == p.min() - 5).all() and (o[:, 6] == p.max() - 5).all()
        assert (o[:, 7] == (0xf0 | np.bitwise_and.reduce(p))).all()
        assert (o[:, 8] == np.bitwise_or.reduce(p << (lane[:32] % 8))).all()
        assert (o[:, 9] == 0).all()
        masks = {v: int(sum(1 << k for k in range(32) if p[k] == v)) for v in (0, 1)}
        assert [int(m) & 0xffffffff for m in o[:, 10]] == [masks[v] for v in p]
        assert (o[:, 11] == 0).all()  # 0xffffffff + 1 wraps: the mask and pred = 1


# --- integer and directed-rounding intrinsics -----------------------------------------------------

def test_bit_intrinsics(mod):
    rng = np.random.default_rng(7)
    n = 2000
    x, y = rng.integers(0, 1 << 32, (2, n), dtype=np.uint64).astype(np.uint32)
    x[:3] = [0, 1, 0x80000000]
    out = np.zeros((n, 8), np.uint32)
    mod.get_function("bit_intrinsics")((4,), (128,), (x, y, out, np.int32(n)))
    X, Y = x.astype(np.uint64), y.astype(np.uint64)
    bits = (X[:, None] >> np.arange(32, dtype=np.uint64)) & 1
    brev = (bits << (31 - np.arange(32, dtype=np.uint64))).sum(1)
    v = (Y << np.uint64(32)) | X
    sel = [5, 1, 7, 3]  # 0x3715, low nibble first
    perm = sum(((v >> np.uint64(8 * s)) & np.uint64(0xff)) << np.uint64(8 * k) for k, s in enumerate(sel))
    mulhi = ((x.view(np.int32).astype(np.int64) * y.view(np.int32).astype(np.int64)) >> 32).astype(np.uint32)
    shift = (Y & np.uint64(63)) & np.uint64(31)
    fl = ((v << shift) >> np.uint64(32)) & np.uint64(0xffffffff)
    fr = (v >> shift) & np.uint64(0xffffffff)
    popc = bits.sum(1)
    clz = np.array([32 - int(a).bit_length() for a in x], np.uint64)
    ffs = np.array([(int(a) & -int(a)).bit_length() for a in x], np.uint64)
    sad = np.abs(X.astype(np.int64) - Y.astype(np.int64)).astype(np.uint64) + 7 + ((X + Y) >> np.uint64(1))
    want = [brev, perm, (X * Y) >> np.uint64(32), mulhi, fl, fr, popc + 100 * clz + 10000 * ffs, sad]
    for col, w in enumerate(want):
        np.testing.assert_array_equal(out[:, col], (np.asarray(w, np.uint64) & np.uint64(0xffffffff)).astype(np.uint32),
                                      err_msg=f"column {col}")


def _directed(exact: Fraction, mode: str) -> np.float32:
    """exact rounded to float32 toward zero, down or up, by exact comparison."""
    q = np.float32(float(exact))
    while Fraction(float(q)) > exact:
        q = np.nextafter(q, np.float32(-np.inf))
    while Fraction(float(np.nextafter(q, np.float32(np.inf)))) <= exact:
        q = np.nextafter(q, np.float32(np.inf))
    down = q
    up = down if Fraction(float(down)) == exact else np.nextafter(down, np.float32(np.inf))
    return {"rd": down, "ru": up, "rz": down if exact >= 0 else up}[mode]


def test_directed_rounding_variants(mod):
    rng = np.random.default_rng(11)
    n = 300
    a = (rng.uniform(0.5, 2, n) * 2.0 ** rng.integers(-30, 30, n) * rng.choice([-1, 1], n)).astype(np.float32)
    b = (rng.uniform(0.5, 2, n) * 2.0 ** rng.integers(-30, 30, n) * rng.choice([-1, 1], n)).astype(np.float32)
    out = np.zeros((n, 12), np.float32)
    mod.get_function("directed")((2,), (64,), (a, b, out, np.int32(n)))
    for k in range(n):
        A, B = Fraction(float(a[k])), Fraction(float(b[k]))
        for op, exact in enumerate([A + B, A * B, A / B, A * B + B]):
            for m, mode in enumerate(["rz", "rd", "ru"]):
                assert out[k, 3 * op + m] == _directed(exact, mode), (k, op, mode)


def test_hints_clocks_and_a_spin_wait(mod):
    x = np.arange(64 * 4, dtype=np.float32)
    out, clocks, flag = np.zeros(3 * 64 * 4, np.float32), np.zeros(64, np.int64), np.zeros(1, np.int32)
    mod.get_function("hints_and_clocks")((1,), (64,), (x, out, clocks, flag))
    np.testing.assert_array_equal(out, np.tile(x, 3))
    assert flag[0] == 1 and (clocks >= 0).all()


def test_trap_is_an_error(mod):
    x = np.zeros(32, np.float32)
    x[9] = -1
    with pytest.raises(CpuAssertError, match=r"__trap\(\) in thread \(9, 0, 0\)"):
        mod.get_function("trap_on_negative")((1,), (32,), (x,))


def test_what_the_cpu_build_defines(mod):
    out = np.zeros(5, np.int32)
    mod.get_function("build_macros")((1,), (1,), (out,))
    assert list(out) == [1, 0, 1, 12, 1]  # __CUDACC__ yes, __CUDA_ARCH__ no, ANDREA_CPU_BUILD yes


def test_unknown_inline_ptx_is_a_one_line_error(tmp_path):
    src = tmp_path / "ptx.cu"
    src.write_text('extern "C" __global__ void lane(int* out) {\n    unsigned l;\n'
                   '    asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));\n    out[threadIdx.x] = l;\n}\n')
    with pytest.raises(CpuCompileError, match=r"ptx\.cu:3: inline PTX `mov\.u32` .*__CUDA_ARCH__") as e:
        RawModule(path=str(src))
    assert "\n" not in str(e.value)
