"""Kernels in the styles of llm.c's dev/cuda and NVIDIA's cuda-samples (tests/kernels/styles.cu),
unchanged, on the CPU build's RawModule, against float64 NumPy."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime import RawModule

STYLES = pathlib.Path(__file__).parents[2] / "kernels" / "styles.cu"
BF16_EPS = 2.0 ** -8  # half an ulp of bfloat16, relative: one rounding of a result to bf16


@pytest.fixture(scope="module", params=["forward", "reverse"])
def mod(request):
    # The reverse schedule runs each block's threads last to first: a missing barrier shows.
    return RawModule(path=str(STYLES), schedule=request.param,
                     name_expressions=("reduce6<float, 256, true>", "reduce6<double, 128, false>",
                                       "MatrixMulCUDA<16>"))


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, nearest even (the kernels' own rounding is checked bit for bit in
    test_surface.py; here it only makes inputs)."""
    b = x.astype(np.float32).view(np.uint32)
    return ((b + 0x7fff + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def test_layernorm_warp_per_row_bf16(mod):
    rng = np.random.default_rng(0)
    N, C = 13, 96  # 13 rows: 4 warps per block, the last block partly idle
    inp = to_bf16(rng.standard_normal((N, C)))
    weight, bias = to_bf16(rng.standard_normal(C)), to_bf16(rng.standard_normal(C))
    out, mean, rstd = np.zeros((N, C), np.uint16), np.zeros(N, np.float32), np.zeros(N, np.float32)
    mod.get_function("layernorm_forward_kernel3")((4,), (128,), (out, mean, rstd, inp, weight, bias,
                                                                np.int32(N), np.int32(C)))
    x = from_bf16(inp)
    m = x.mean(axis=1)
    s = 1 / np.sqrt(x.var(axis=1) + 1e-5)
    want = (x - m[:, None]) * s[:, None] * from_bf16(weight) + from_bf16(bias)
    np.testing.assert_allclose(mean, m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd, s, rtol=1e-5)
    # one bf16 rounding of the result, plus float32 noise carried through |weight| * |normalized|
    bound = BF16_EPS * np.abs(want) + 1e-5 * (np.abs(from_bf16(weight)) * np.abs((x - m[:, None]) * s[:, None]) + 1)
    assert (np.abs(from_bf16(out) - want) <= bound).all()


def test_layernorm_without_optional_outputs(mod):
    # mean and rstd are optional (NULL) as in llm.c's inference path.
    rng = np.random.default_rng(1)
    inp, w, b = to_bf16(rng.standard_normal((4, 32))), to_bf16(np.ones(32)), to_bf16(np.zeros(32))
    out = np.zeros((4, 32), np.uint16)
    mod.get_function("layernorm_forward_kernel3")((1,), (128,), (out, None, None, inp, w, b, np.int32(4), np.int32(32)))
    np.testing.assert_allclose(from_bf16(out).mean(axis=1), 0, atol=0.02)


def test_online_softmax(mod):
    rng = np.random.default_rng(2)
    N, C = 9, 77
    x = (rng.standard_normal((N, C)) * 5).astype(np.float32)
    out = np.zeros_like(x)
    mod.get_function("softmax_forward_online_kernel")((3,), (128,), (out, x, np.int32(N), np.int32(C)))
    e = np.exp(x - x.max(axis=1, keepdims=True).astype(np.float64))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-8)


def test_gelu_packed128(mod):
    rng = np.random.default_rng(3)
    N = 8 * 70
    inp = to_bf16(rng.standard_normal(N) * 3)
    out = np.zeros(N, np.uint16)
    mod.get_function("gelu_forward_kernel2")((3,), (32,), (out, inp, np.int32(N)))
    x = from_bf16(inp)
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    assert (np.abs(from_bf16(out) - want) <= BF16_EPS * np.abs(want) + 1e-6).all()


def test_residual_bf16_pairs(mod):
    rng = np.random.default_rng(4)
    a, b = to_bf16(rng.standard_normal(200)), to_bf16(rng.standard_normal(200))
    out = np.zeros(200, np.uint16)
    mod.get_function("residual_forward_kernel")((1,), (128,), (out, a, b, np.int32(100)))
    np.testing.assert_array_equal(out, to_bf16((from_bf16(a) + from_bf16(b)).astype(np.float32)))


@pytest.mark.parametrize("name,dtype,threads,n", [("reduce6<float, 256, true>", np.float32, 256, 1 << 14),
                                                  ("reduce6<double, 128, false>", np.float64, 128, 5000)])
def test_reduce6_template_on_block_size(mod, name, dtype, threads, n):
    x = np.random.default_rng(5).standard_normal(n).astype(dtype)
    blocks = 8
    partial = np.zeros(blocks, dtype)
    mod.get_function(name)((blocks,), (threads,), (x, partial, np.uint32(n)),
                           shared_mem=threads * np.dtype(dtype).itemsize)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(partial.sum(), x.astype(np.float64).sum(), rtol=tol, atol=tol)


def test_histogram256_shared_atomics(mod):
    data = np.random.default_rng(6).integers(0, 256, 10_000).astype(np.uint8)
    hist = np.zeros(256, np.uint32)
    mod.get_function("histogram256")((4,), (192,), (hist, data, np.uint32(data.size)))
    np.testing.assert_array_equal(hist, np.bincount(data, minlength=256))


def test_transpose_padded_tile(mod):
    h, w = 45, 70
    x = np.random.default_rng(7).standard_normal((h, w)).astype(np.float32)
    out = np.zeros((w, h), np.float32)
    grid = ((w + 31) // 32, (h + 31) // 32)
    mod.get_function("transposeCoalesced")(grid, (32, 8), (out, x, np.int32(w), np.int32(h)))
    np.testing.assert_array_equal(out, x.T)


def test_matrix_mul_template(mod):
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((32, 48)).astype(np.float32), rng.standard_normal((48, 64)).astype(np.float32)
    c = np.zeros((32, 64), np.float32)
    mod.get_function("MatrixMulCUDA<16>")((4, 2), (16, 16), (c, a, b, np.int32(48), np.int32(64)))
    want = a.astype(np.float64) @ b
    np.testing.assert_allclose(c, want, rtol=0, atol=48 * 2.0 ** -23 * (np.abs(a) @ np.abs(b)).max())


def test_shuffle_scan(mod):
    data = np.random.default_rng(9).integers(-50, 50, 512).astype(np.int32)
    x, partial = data.copy(), np.zeros(2, np.int32)
    mod.get_function("shfl_scan_test")((2,), (256,), (x, np.int32(32), partial), shared_mem=8 * 4)
    want = np.cumsum(data.reshape(2, 256), axis=1)
    np.testing.assert_array_equal(x.reshape(2, 256), want)
    np.testing.assert_array_equal(partial, want[:, -1])


def test_half2_scalar_product(mod):
    rng = np.random.default_rng(10)
    blocks, size = 3, 100
    a, b = rng.uniform(-1, 1, (2, blocks, 2 * size)).astype(np.float16)
    results = np.zeros(blocks, np.float32)
    mod.get_function("scalarProductKernel_intrinsics")((blocks,), (128,), (a, b, results, np.int32(size)))
    products = (a.astype(np.float64) * b).astype(np.float16).astype(np.float64)  # __hmul2 rounds each to half
    np.testing.assert_allclose(results, products.sum(axis=1), rtol=1e-5, atol=1e-5)
