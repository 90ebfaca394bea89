"""The register-tiled kernels (scores_kernel2, softmax_kernel3, av_kernel2,
attention_fused_kernel3_d64/_d128) through the CPU build, against float64 NumPy with the derived
tolerances; and broken copies of them (a register tile index off by one, a skipped tile at the
diagonal, the exp2 scale forgotten, a prefetch stored into the wrong stage) must fail the same
checks. (The staged and fused launchers pick them: test_launchers_pick_the_register_tiled_kernels.)"""

from __future__ import annotations

import numpy as np
import pytest

from andrea_cli import reference
from andrea_cli.backends.cpu import CpuBackend
from andrea_cli.backends.launch.fused import default_variant, run_fused, shared_bytes
from andrea_cli.backends.launch.device import cdiv
from andrea_cli.backends.launch.staged import AV2_TILE, DEFAULT_PLAN, SCORES2_TILE, SOFTMAX3_PER_THREAD, run_staged
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import course_scale, resolve_scale
from andrea_cli.verification import tolerances

REAL = packaged_kernel_path().read_text()


def scores2(dev, q, k):
    H, T, d_k = q.shape
    out = np.full((H, T, T), np.nan, np.float32)
    dev.get_function("scores_kernel2")((cdiv(T, SCORES2_TILE), cdiv(T, SCORES2_TILE), H), (256, 1, 1),
                                       (q, k, out, np.int32(T), np.int32(T), np.int32(d_k), np.int32(1)))
    return out


def softmax3(dev, x, threads=None):
    H, T, _ = x.shape
    threads = threads or 32 * cdiv(cdiv(T, SOFTMAX3_PER_THREAD), 32)
    out = np.full_like(x, np.nan)
    dev.get_function("softmax_kernel3")((T, 1, H), (threads, 1, 1), (x, out, np.int32(T), np.int32(T)))
    return out


def av2(dev, p, v, causal):
    H, T, d_v = v.shape
    out = np.full((H, T, d_v), np.nan, np.float32)
    mask = MaskSpec("causal" if causal else "none")
    dev.get_function("av_kernel2")((cdiv(d_v, AV2_TILE), cdiv(T, AV2_TILE), H), (64, 1, 1),
                                   (p, v, out, np.int32(T), np.int32(T), np.int32(d_v), np.int32(1),
                                    *mask.kernel_args(T, T, heads=H)))
    return out


def fused3(dev, q, k, v, mask: MaskSpec, scaled: bool):
    return run_fused(dev, q, k, v, mask=mask, scale=resolve_scale(q.shape[-1], scaled), variant=3).output


def _within(got, want, tol) -> bool:
    return bool(np.all(np.abs(got.astype(np.float64) - want) <= tol))


def _rand(shape, seed, std=1.0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32) * np.float32(std)


def check_scores(dev, T, d_k, seed=0) -> bool:
    q, k = _rand((2, T, d_k), seed), _rand((2, T, d_k), seed + 1)
    return _within(scores2(dev, q, k), reference.scores(q, k), tolerances.scores_tol(q, k))


def check_softmax(dev, T, mask, seed=0, threads=None) -> bool:
    x = _rand((2, T, T), seed, std=3.0)
    x = np.where(mask.visible(T), x, -np.inf).astype(np.float32)
    got = softmax3(dev, x, threads)
    want = reference.softmax(x.astype(np.float64))
    return _within(got, want, tolerances.softmax_tol(x, want)) and bool((got[:, ~mask.visible(T)] == 0).all())


def check_av(dev, T, d_v, causal, seed=0) -> bool:
    p = _rand((2, T, T), seed)
    if causal:
        p = np.tril(p).astype(np.float32)
    v = _rand((2, T, d_v), seed + 1)
    return _within(av2(dev, p, v, causal), reference.weighted_sum(p.astype(np.float64), v), tolerances.av_tol(p, v))


def check_fused(dev, T, d, mask, scaled, seed=0) -> bool:
    q, k, v = (_rand((2, T, d), seed + n) for n in range(3))
    visible = mask.visible(T)
    s = reference.scores(q, k)
    p = reference.softmax(reference.mask(reference.scale(s, d) if scaled else s, mask))
    tol = tolerances.fused_tol(q, k, v, p, visible, d, scaled)
    return _within(fused3(dev, q, k, v, mask, scaled), reference.weighted_sum(p, v), tol)


# T: 1, one short of / one past a 64 tile, past a 128 tile; d_k: 1, odd, 8 (one k-slice), 80
@pytest.mark.parametrize("T,d_k", [(1, 1), (5, 3), (63, 8), (65, 80), (130, 64), (200, 17)])
def test_scores_kernel2(cpu_device, T, d_k):
    assert check_scores(cpu_device, T, d_k)


@pytest.mark.parametrize("T", [1, 6, 33, 64, 131, 260])
@pytest.mark.parametrize("mask", [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 5)], ids=str)
def test_softmax_kernel3(cpu_device, T, mask):
    assert check_softmax(cpu_device, T, mask)


def test_softmax_kernel3_many_warps_and_fully_masked_rows(cpu_device):
    """8 warps per row (the block reduction through shared memory); a row of -inf gets zeros."""
    assert check_softmax(cpu_device, 100, MaskSpec("causal"), threads=256)
    x = np.full((1, 9, 9), -np.inf, np.float32)
    x[0, 3, 2] = 1.0
    got = softmax3(cpu_device, x)
    assert got[0, 3, 2] == 1.0 and (np.delete(got.reshape(-1), 3 * 9 + 2) == 0).all()


@pytest.mark.parametrize("T,d_v,causal", [(1, 1, 1), (7, 5, 0), (64, 64, 1), (65, 64, 0), (130, 128, 1), (150, 70, 1)])
def test_av_kernel2(cpu_device, T, d_v, causal):
    assert check_av(cpu_device, T, d_v, causal)


def _widened(a):
    """a with one more column of zeros: its rows 65 floats apart, so no row but the first starts on
    16 bytes and gemm_tile_8x8 copies element by element."""
    return np.concatenate([a, np.zeros(a.shape[:-1] + (1,), a.dtype)], axis=-1)


def test_float4_and_element_copies_give_the_same_bits(cpu_device):
    """gemm_tile_8x8 copies its k-slices as float4s where every row is 16-byte aligned (width 64),
    element by element otherwise (the same values, widened to 65 by a column of zeros). The shared
    tiles hold the same values and the FMAs run in the same order either way (a zero k adds +0 at
    the end), so the outputs agree bit for bit: operands read along k (Q, K, P), along a row (V,
    dO), and transposed (P in dV = P^T·dO)."""
    T, d = 130, 64
    q, k, v = (_rand((2, T, d), n) for n in range(3))
    p = np.tril(_rand((2, T, T), 3)).astype(np.float32)
    assert np.array_equal(scores2(cpu_device, q, k), scores2(cpu_device, _widened(q), _widened(k)))
    assert np.array_equal(av2(cpu_device, p, v, 1), av2(cpu_device, p, _widened(v), 1)[..., :d])

    def dv2(p, d_out):
        d_v = d_out.shape[-1]
        out = np.full(d_out.shape, np.nan, np.float32)
        args = (p, d_out, out, np.int32(T), np.int32(T), np.int32(d_v), np.int32(1),
                *MaskSpec("causal").kernel_args(T, T, heads=2))
        cpu_device.get_function("dv_kernel2")((cdiv(d_v, AV2_TILE), cdiv(T, AV2_TILE), 2), (64, 1, 1), args)
        return out

    p_t = np.ascontiguousarray(p.transpose(0, 2, 1))
    assert _within(dv2(p, v), reference.weighted_sum(p_t.astype(np.float64), v), tolerances.av_tol(p_t, v))
    assert np.array_equal(dv2(p, v), dv2(p, _widened(v))[..., :d])


FUSED_CASES = [(1, 64, MaskSpec("causal"), True), (17, 128, MaskSpec("none"), False),
               (64, 64, MaskSpec("window", 5), True), (65, 64, MaskSpec("causal"), True),
               (130, 64, MaskSpec("window", 70), True), (150, 128, MaskSpec("causal"), False),
               (129, 128, MaskSpec("window", 64), True), (200, 64, MaskSpec("none"), True)]


@pytest.mark.parametrize("T,d,mask,scaled", FUSED_CASES, ids=lambda x: str(x))
def test_attention_fused_kernel3(cpu_device, T, d, mask, scaled):
    assert check_fused(cpu_device, T, d, mask, scaled)


def test_fused3_reverse_schedule(cpu_backend):
    """Threads in reverse order: a missing barrier between the P store and the P·V reads shows."""
    rev = cpu_backend("reverse").device()
    assert check_fused(rev, 130, 64, MaskSpec("causal"), True)
    assert check_scores(rev, 130, 16) and check_av(rev, 130, 64, 1) and check_softmax(rev, 70, MaskSpec("causal"))


def test_launchers_pick_the_register_tiled_kernels(cpu_device):
    assert [default_variant(d_k, d_v) for d_k, d_v in ((64, 64), (128, 128), (64, 48), (80, 80), (3, 5))] == [3, 3, 2, 2, 1]
    assert (DEFAULT_PLAN.gemm_variant, DEFAULT_PLAN.softmax_variant) == (2, 3)
    assert DEFAULT_PLAN.softmax_for(16384) == 3 and DEFAULT_PLAN.softmax_for(16385) == 2
    assert shared_bytes(64, 64, variant=3) == 50176 and shared_bytes(128, 128, variant=3) == 99328
    q, k, v = (_rand((1, 40, 64), n) for n in range(3))
    fused = run_fused(cpu_device, q, k, v, mask=MaskSpec("causal"), scale=course_scale(q.shape[-1]))  # the default: kernel3
    staged = run_staged(cpu_device, q, k, v, mask=MaskSpec("causal"), scale=course_scale(q.shape[-1]))
    assert np.abs(fused.output - staged.output).max() < 1e-5
    assert np.abs(fused.output - fused3(cpu_device, q, k, v, MaskSpec("causal"), True)).max() == 0


# Bugs a register-tiled kernel invites; the check beside each must catch it. Each broken copy of
# the file carries bugs in different kernels (a check runs one kernel), so one CPU build serves
# several: a build costs seconds.
BROKEN_COPIES = [
    {
        "register tile index off by one (scores_kernel2, av_kernel2)": (
            "const float4 b_hi = *(const float4*)&b_s[stage][kk][BN / 2 + 4 * tx];",
            "const float4 b_hi = *(const float4*)&b_s[stage][kk][BN / 2 + 4 * tx + 1];",
            lambda d: check_scores(d, 130, 16)),
        "skipped tile at the diagonal (attention_fused_kernel3)": (
            "for (int j0 = kt.j_begin; j0 < kt.j_end; j0 += FUSED3_KEYS) {",
            "for (int j0 = kt.j_begin; j0 < kt.j_end - FUSED3_KEYS; j0 += FUSED3_KEYS) {",
            lambda d: check_fused(d, 130, 64, MaskSpec("causal"), True)),
        "exp2 scale forgotten (softmax_kernel3)": (
            "exp2f((e[n] - m) * LOG2E)", "exp2f(e[n] - m)",
            lambda d: check_softmax(d, 33, MaskSpec("causal"))),
    },
    {
        "skipped tile at the diagonal (av_kernel2)": (
            "d_v, group * L, d_v, kt.j_end, row0, blockIdx.x * 64);",
            "d_v, group * L, d_v, kt.j_end - 64, row0, blockIdx.x * 64);",
            lambda d: check_av(d, 130, 64, 1)),
        "exp2 scale forgotten (attention_fused_kernel3)": (
            "const float q_factor = scale * LOG2E;", "const float q_factor = scale;",
            lambda d: check_fused(d, 65, 64, MaskSpec("causal"), True)),
    },
    {
        # av_kernel2 holds its prefetch half a slice at a time: the first half stored into the
        # stage the second half's FMAs are about to read
        "first prefetch half stored into the stage being read (av_kernel2)": (
            "                if (kk > 0) stash(stage ^ 1, kk / (GEMM_BK / PARTS) - 1);",
            "                if (kk > 0) stash(stage, kk / (GEMM_BK / PARTS) - 1);",
            lambda d: check_av(d, 130, 64, 0)),
    },
]


# the first in the default tier, the rest in the slow one (a CPU build of the kernel file each)
@pytest.mark.parametrize("copy", [n if n == 0 else pytest.param(n, marks=pytest.mark.slow)
                                  for n in range(len(BROKEN_COPIES))])
def test_checks_catch_broken_copies(tmp_path, copy, quick_builds):
    text = REAL
    for bug, (old, new, _) in BROKEN_COPIES[copy].items():
        assert text.count(old) == 1, f"the kernel file changed: update the '{bug}' mutation"
        text = text.replace(old, new)
    broken = tmp_path / "broken.cu"
    broken.write_text(text)
    dev = CpuBackend(broken).device()
    caught = {bug: not check(dev) for bug, (_, _, check) in BROKEN_COPIES[copy].items()}
    assert all(caught.values()), caught
