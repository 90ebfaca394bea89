"""The bf16 backward on tensor cores (attention_fused_lse_kernel4, attention_backward_dkdv_kernel2,
attention_backward_dq_kernel2) through the CPU build's emulation of mma.sync, ldmatrix and
cp.async: the logsumexp and the gradients against the float64 reference that applies the kernels'
bf16 roundings (bf16_backward.py), on both block schedules and every tile edge; the bound tight
enough to see the roundings; the same bits on every schedule; and the accuracy target, within 3x
of a bf16 autograd's error against float64 (FlashAttention's rule, the autograd emulated)."""

from __future__ import annotations

import numpy as np
import pytest

from andrea_cli.backends.cpu import CpuBackend
from andrea_cli.backends.launch.backward_bf16 import run_backward_bf16
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import course_scale, resolve_scale
from andrea_cli.verification import bf16_attention, bf16_backward

GRADS = ("dq", "dk", "dv")


@pytest.fixture(scope="module", params=["forward", "reverse"])
def device(request):
    return CpuBackend(packaged_kernel_path(), schedule=request.param).device()


def inputs(H: int, T: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((H, T, d), dtype=np.float32) for _ in range(4)]


# Tile edges of both kernels: 64 keys per dkdv block (16 per warp), 64 queries per dq block, query
# tiles of 64 (d = 64) or 32 (d = 128) in dkdv; T one short of, at and past them; windows that
# end mid-tile or on an edge, span tiles, or leave a warp's keys hidden from a whole query tile.
CASES = [(1, 64, MaskSpec("causal"), True), (33, 128, MaskSpec("causal"), True),
         (63, 128, MaskSpec("none"), False), (64, 64, MaskSpec("window", 64), True),
         (65, 64, MaskSpec("causal"), True), (127, 128, MaskSpec("none"), True),
         (129, 128, MaskSpec("window", 65), True), (200, 64, MaskSpec("window", 16), True),
         (200, 64, MaskSpec("window", 100), False), (130, 64, MaskSpec("none"), True)]
CASE_IDS = [f"T{T}-d{d}-{mask}-{'scaled' if scaled else 'unscaled'}" for T, d, mask, scaled in CASES]


@pytest.mark.parametrize("T, d, mask, scaled", CASES, ids=CASE_IDS)
def test_bf16_backward_against_its_rounding_reference(device, T, d, mask, scaled):
    q, k, v, d_out = inputs(2, T, d, T + d)
    got = run_backward_bf16(device, q, k, v, d_out, mask=mask, scale=resolve_scale(d, scaled))

    lse, lse_tol = bf16_backward.lse_reference_and_tol(q, k, mask, scaled)
    assert (np.abs(got.lse - lse) <= lse_tol).all(), np.abs(got.lse - lse).max()
    out, out_tol = bf16_attention.reference_and_tol(q, k, v, mask, scaled, variant=4)  # kernel4's body
    assert (np.abs(got.output - out) <= out_tol).all()  # kernel4's body: its own bound

    want, tol = bf16_backward.reference_and_tol(q, k, v, d_out, got.output, got.lse, mask, scaled)
    for name in GRADS:
        err = np.abs(getattr(got, name) - getattr(want, name))
        bound = getattr(tol, name)
        assert (err <= bound).all(), f"{name}: worst error {err.max():.3g}, {(err / bound).max():.3g} of its bound"


def test_the_bound_sees_the_bf16_roundings_of_p_and_ds():
    """Skipping either rounding moves some gradient past its bound: the bound is no looser than the
    roundings it must account for."""
    T, d, mask = 130, 64, MaskSpec("causal")
    q, k, v, d_out = inputs(1, T, d, 7)
    out, _ = bf16_attention.reference_and_tol(q, k, v, mask, True, variant=4)
    lse, _ = bf16_backward.lse_reference_and_tol(q, k, mask, True)
    want, tol = bf16_backward.reference_and_tol(q, k, v, d_out, out, lse, mask, True)
    for skipped, grads in (("p", ("dv",)), ("ds", ("dq", "dk"))):
        unrounded, _ = bf16_backward.reference_and_tol(q, k, v, d_out, out, lse, mask, True, unrounded=skipped)
        for name in grads:
            assert (np.abs(getattr(unrounded, name) - getattr(want, name)) > getattr(tol, name)).any(), (skipped, name)


def test_every_schedule_gives_the_same_bits():
    """dQ by a pass of its own, no atomics: the blocks' order changes nothing."""
    q, k, v, d_out = inputs(2, 150, 64, 3)
    runs = [run_backward_bf16(CpuBackend(packaged_kernel_path(), schedule=s).device(), q, k, v, d_out,
                              mask=MaskSpec("causal"), scale=course_scale(q.shape[-1])) for s in ("forward", "reverse")]
    for name in GRADS:
        assert np.array_equal(getattr(runs[0], name), getattr(runs[1], name)), name


ACCURACY = [(256, 64, MaskSpec("causal")), (256, 128, MaskSpec("none")), (200, 128, MaskSpec("causal")),
            (256, 64, MaskSpec("none"))]
ACCURACY_SLOW = [(1024, 64, MaskSpec("causal")), (1024, 64, MaskSpec("none")), (1024, 128, MaskSpec("causal")),
                 (1024, 128, MaskSpec("none"))]


def check_accuracy(T: int, d: int, mask: MaskSpec) -> None:
    q, k, v, d_out = inputs(1, T, d, T * d)
    device = CpuBackend(packaged_kernel_path()).device()
    got = run_backward_bf16(device, q, k, v, d_out, mask=mask, scale=course_scale(q.shape[-1]))
    exact = bf16_backward.exact_gradients(q, k, v, d_out, mask, True)
    ours = bf16_backward.max_errors(got, exact)
    autograd = bf16_backward.max_errors(bf16_backward.autograd_bf16(q, k, v, d_out, mask, True), exact)
    for name in GRADS:
        assert ours[name] <= 3 * autograd[name], (name, ours[name], autograd[name])


@pytest.mark.parametrize("T, d, mask", ACCURACY, ids=[f"T{T}-d{d}-{m}" for T, d, m in ACCURACY])
def test_within_3x_of_a_bf16_autograd_error(T, d, mask):
    check_accuracy(T, d, mask)


@pytest.mark.slow
@pytest.mark.parametrize("T, d, mask", ACCURACY_SLOW, ids=[f"T{T}-d{d}-{m}" for T, d, m in ACCURACY_SLOW])
def test_within_3x_of_a_bf16_autograd_error_at_T_1024(T, d, mask):
    check_accuracy(T, d, mask)


def test_the_autograd_emulation_is_a_real_bf16_error():
    """The yardstick is not zero, nor float64 in disguise: its bf16 roundings put its error within
    a few powers of two of 2^-8 of the gradients' size."""
    T, d, mask = 64, 64, MaskSpec("causal")
    q, k, v, d_out = inputs(1, T, d, 11)
    exact = bf16_backward.exact_gradients(q, k, v, d_out, mask, True)
    errors = bf16_backward.max_errors(bf16_backward.autograd_bf16(q, k, v, d_out, mask, True), exact)
    for name in GRADS:
        size = np.abs(getattr(exact, name)).max()
        assert 2**-12 * size < errors[name] < 2**-4 * size, (name, errors[name], size)


def backward_on_exact_forward(device, q, k, v, d_out, mask: MaskSpec, scaled: bool):
    """dkdv_kernel2 and dq_kernel2 alone, on the float64 forward's output and logsumexp (the
    forward they follow, kernel4's lse twin, takes the two bounds only): the backward's own terms
    for a flavour, ALiBi's bias in its recomputed P and the ranges of sinks and a right reach."""
    from andrea_cli import reference
    from andrea_cli.backends.launch.backward_bf16 import launch_backward_bf16
    from andrea_cli.backends.launch.device import Transfers
    from andrea_cli.backends.launch.fused_bf16 import convert_inputs, launch_to_bf16

    (H, L, d), (H_kv, S) = q.shape, k.shape[:2]
    s = reference.mask(reference.scale(reference.scores(q, k), d) if scaled else reference.scores(q, k), mask)
    m = s.max(axis=-1, keepdims=True)
    lse = (m + np.log(np.exp(s - m).sum(axis=-1, keepdims=True)))[..., 0].astype(np.float32)
    out = reference.attention(q, k, v, mask, scaled).astype(np.float32)
    scale = resolve_scale(d, scaled)
    transfers = Transfers(device)
    gq, gk, gv, gdo, gout, glse = transfers.upload(q, k, v, d_out, out, lse)
    qb, kb, vb = convert_inputs(device, gq, gk, gv, (H, L, d), scale, kv_shape=(H_kv, S, d))
    dob = device.empty((H, L, d), dtype=np.uint16)
    launch_to_bf16(device, gdo, dob, H * L * d, 1.0)
    delta, dq, dk, dv = device.empty((H, L)), device.empty((H, L, d)), device.empty((H_kv, S, d)), device.empty((H_kv, S, d))
    launch_backward_bf16(device, qb, kb, vb, dob, gout, gdo, glse, delta, dq, dk, dv, H=H, T=L, d=d, mask=mask,
                         scale=scale, S=S, H_kv=H_kv)
    return dict(zip(GRADS, transfers.download(dq, dk, dv))), out, lse


# The flavours at the bf16 kernels' edges: a right reach one past a 64-key block (dq) and 16 past
# a warp's keys; sinks spanning a 64-key block and one key of the next, with a 16-key window that
# hides a warp's keys from whole query tiles; ALiBi over three heads (no power of two), L != S
# and two query heads a K/V head; ALiBi beside a window at d = 128 (query tiles of 32).
FLAVOURS = [(70, 70, 2, 2, 64, MaskSpec("window", 5, right=65)), (130, 130, 2, 2, 64, MaskSpec("window", 16, sinks=65)),
            (70, 100, 3, 3, 64, MaskSpec("causal", alibi=True)), (97, 97, 4, 2, 128, MaskSpec("window", 40, alibi=True))]
FLAVOUR_IDS = [f"{L}:{S}-h{H}/{H_kv}-d{d}-{mask}" for L, S, H, H_kv, d, mask in FLAVOURS]


@pytest.mark.parametrize("L, S, H, H_kv, d, mask", FLAVOURS, ids=FLAVOUR_IDS)
def test_bf16_backward_kernels_take_every_flavour(device, L, S, H, H_kv, d, mask):
    rng = np.random.default_rng(L + S + d)
    q, d_out = (rng.standard_normal((H, L, d), dtype=np.float32) for _ in range(2))
    k, v = (rng.standard_normal((H_kv, S, d), dtype=np.float32) for _ in range(2))
    got, out, lse = backward_on_exact_forward(device, q, k, v, d_out, mask, True)
    want, tol = bf16_backward.reference_and_tol(q, k, v, d_out, out, lse, mask, True)
    for name in GRADS:
        err = np.abs(got[name] - getattr(want, name))
        bound = getattr(tol, name)
        assert (err <= bound).all(), f"{name}: worst error {err.max():.3g}, {(err / bound).max():.3g} of its bound"


def test_the_bf16_backward_forward_refuses_a_flavour_in_one_line(device):
    from andrea_cli.errors import AndreaError

    q = np.zeros((1, 8, 64), np.float32)
    with pytest.raises(AndreaError, match="^--mask alibi: the bf16 forward .* not alibi: run the fp32 backward"):
        run_backward_bf16(device, q, q, q, q, mask=MaskSpec("causal", alibi=True), scale=course_scale(64))


# bug -> (the kernel file's text, its broken copy, the case (FLAVOURS' index), a gradient that must fail)
BROKEN_BF16 = {
    "ALiBi's bias left out of dkdv_kernel2's P^T": (
        "float pe = exp2f(p[nt][e] + bias - ls[x]);", "float pe = exp2f(p[nt][e] - ls[x]);", 2, "dk"),
    "ALiBi's bias left out of dq_kernel2's P": (
        "const float sb = mask.alibi > 0 ? fmaf(slope2, (float)j, s[nt][e]) : s[nt][e];",
        "const float sb = s[nt][e];", 2, "dq"),
    "ALiBi's row part left out of dq_kernel2's lse": (
        "if (mask.alibi > 0) lse2[r] += slope2 * (float)(rows[r] + mask.offset);", "", 3, "dq"),
    # the rows that see a sink key dropped from a dK/dV block's query tiles (every row for j < sinks)
    "sinks' rows missed in dkdv_kernel2's query tiles": (
        "const bool far_end = window > 0 && j0 >= sinks;", "const bool far_end = window > 0;", 1, "dk"),
}


@pytest.mark.slow  # a CPU build of the broken copy each
@pytest.mark.parametrize("bug", BROKEN_BF16)
def test_a_broken_bf16_backward_flavour_is_caught(tmp_path, quick_builds, bug):
    old, new, n, culprit = BROKEN_BF16[bug]
    real = packaged_kernel_path().read_text()
    assert real.count(old) == 1, f"the kernel file changed: update the '{bug}' mutation"
    broken = tmp_path / "broken.cu"
    broken.write_text(real.replace(old, new))
    L, S, H, H_kv, d, mask = FLAVOURS[n]
    rng = np.random.default_rng(L + S + d)
    q, d_out = (rng.standard_normal((H, L, d), dtype=np.float32) for _ in range(2))
    k, v = (rng.standard_normal((H_kv, S, d), dtype=np.float32) for _ in range(2))
    got, out, lse = backward_on_exact_forward(CpuBackend(broken).device(), q, k, v, d_out, mask, True)
    want, tol = bf16_backward.reference_and_tol(q, k, v, d_out, out, lse, mask, True)
    assert (np.abs(got[culprit] - getattr(want, culprit)) > getattr(tol, culprit)).any()
