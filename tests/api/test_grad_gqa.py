"""andrea_cli.grad with grouped K/V heads: k, v (..., H_kv, S, d) against q (..., H_q, L, d), H_q
a multiple of H_kv, query head h reading K/V head h // (H_q / H_kv), as torch's
scaled_dot_product_attention(..., enable_gqa=True). dK and dV come back with K's and V's heads,
summed over each group. Held to torch's autograd in float64 and to the NumPy float64 backward,
on the NumPy path and the CPU build (staged, fused fp32, fused bf16), with MQA, 3-D inputs, and
the one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

import andrea_cli
from andrea_cli import reference_backward
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec

RUNS = [("numpy", {}), ("cpu", {}), ("cpu", {"fused": True})]
RUN_IDS = ["numpy", "cpu-staged", "cpu-fused"]


def draw(q_shape, kv_shape, d_v=None, seed=0):
    """q, k, v, d_out float32: q (..., H_q, L, d), k (..., H_kv, S, d), v and dO d_v wide."""
    rng = np.random.default_rng(seed)
    d_v = d_v or q_shape[-1]
    q = rng.standard_normal(q_shape, dtype=np.float32)
    k = rng.standard_normal(kv_shape, dtype=np.float32)
    v = rng.standard_normal(kv_shape[:-1] + (d_v,), dtype=np.float32)
    d_out = rng.standard_normal(q_shape[:-1] + (d_v,), dtype=np.float32)
    return q, k, v, d_out


def torch_gradients(q, k, v, d_out, is_causal: bool):
    """dQ, dK, dV of sum(dO ∘ SDPA(q, k, v, enable_gqa=True)) by torch's autograd, float64."""
    torch = pytest.importorskip("torch", reason="torch is not installed: no autograd to hold grad to")
    leaves = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=is_causal, enable_gqa=True)
    out.backward(torch.tensor(d_out, dtype=torch.float64))
    return [t.grad.numpy() for t in leaves]


def max_rel(got, exact) -> float:
    return float(np.abs(got - exact).max() / np.abs(exact).max())


@pytest.mark.parametrize("backend, options", RUNS, ids=RUN_IDS)
@pytest.mark.parametrize("q_shape, kv_shape, mask", [
    ((2, 4, 19, 8), (2, 2, 19, 8), "causal"),  # batch 2, 2 query heads per K/V head; L = S: torch's causal
    ((8, 11, 16), (1, 11, 16), "causal"),  # MQA, 3-D (heads, T, d)
    ((3, 6, 9, 8), (3, 2, 23, 8), "none"),  # L != S, 3 per K/V head
])
def test_grouped_gradients_match_torch_autograd(backend, options, q_shape, kv_shape, mask):
    q, k, v, d_out = draw(q_shape, kv_shape, seed=len(q_shape))
    got = andrea_cli.grad(q, k, v, d_out, backend=backend, mask=mask, **options)
    want = torch_gradients(q, k, v, d_out, is_causal=mask == "causal")
    for name, exact in zip(("dq", "dk", "dv"), want):
        g = getattr(got, name)
        assert g.shape == exact.shape, name  # dK, dV with K's heads: summed over each group
        assert max_rel(g, exact) <= 2e-6, name


@pytest.mark.parametrize("backend, options", RUNS, ids=RUN_IDS)
def test_grouped_gradients_match_the_float64_reference(backend, options):
    """The NumPy float64 backward on the folded heads (batch·H_q against batch·H_kv), and the
    report's own check of it; window mask, d_v != d_k."""
    q, k, v, d_out = draw((2, 6, 13, 8), (2, 3, 13, 8), d_v=12, seed=5)
    got = andrea_cli.grad(q, k, v, d_out, backend=backend, mask="window:4", **options)
    flat = [a.reshape(-1, *a.shape[-2:]) for a in (q, k, v, d_out)]
    exact = reference_backward.backward(*flat, MaskSpec("window", 4))
    assert exact.dk.shape == (6, 13, 8) and exact.dv.shape == (6, 13, 12)
    for name in ("dq", "dk", "dv"):
        e = getattr(exact, name)
        assert max_rel(getattr(got, name).reshape(e.shape), e) <= 2e-6, name
        assert got.report["max_rel_error"][name] <= 2e-6
    assert got.report["shapes"]["dk"] == [6, 13, 8] and got.report["shapes"]["dq"] == [12, 13, 8]


def test_grouped_bf16_against_float64_within_the_emulated_autograds_error():
    """The tensor-core backward (d 64) with 4 query heads on one K/V head: within 3x of an
    emulated bf16 autograd's error (FlashAttention's rule), and plainly bf16 (above 1e-4)."""
    q, k, v, d_out = draw((4, 40, 64), (1, 40, 64), seed=9)
    got = andrea_cli.grad(q, k, v, d_out, backend="cpu", fused=True, precision="bf16")
    exact = reference_backward.backward(q, k, v, d_out, MaskSpec("causal"))
    for name in ("dq", "dk", "dv"):
        e = getattr(exact, name)
        assert getattr(got, name).shape == e.shape, name
        err = max_rel(getattr(got, name), e)
        assert err == pytest.approx(got.report["max_rel_error"][name])
        assert 1e-4 < err <= 3 * got.report["autograd_bf16_rel_error"][name], name


@pytest.mark.parametrize("q_shape, kv_shape, words", [
    ((4, 6, 8), (3, 6, 8), "q has 4 heads (dim -3), k and v 3: grouped K/V heads need H_q a multiple of H_kv; "
                           "pass k, v with a head count dividing 4"),
    ((2, 4, 6, 8), (3, 2, 6, 8), "the leading (batch, head) dims must agree, or differ in the head dim (-3) alone"),
    ((6, 8), (2, 6, 8), "the leading (batch, head) dims must agree"),
    ((2, 6, 8), (4, 6, 8), "k and v 4: grouped K/V heads need H_q a multiple of H_kv"),
])
def test_bad_groupings_are_one_line_naming_the_fix(q_shape, kv_shape, words):
    q, k, v, d_out = draw(q_shape, kv_shape)
    with pytest.raises(AndreaError) as caught:
        andrea_cli.grad(q, k, v, d_out, backend="numpy")
    assert words in str(caught.value) and "\n" not in str(caught.value), str(caught.value)


def test_k_and_v_heads_must_agree_and_d_out_is_the_outputs_shape():
    q, k, v, d_out = draw((4, 6, 8), (2, 6, 8))
    with pytest.raises(AndreaError, match=r"K and V need the same leading \(batch, head\) dims"):
        andrea_cli.grad(q, k, v[:1], d_out, backend="numpy")
    with pytest.raises(AndreaError, match=r"^d_out is \(2, 6, 8\) but the output is \(4, 6, 8\)"):
        andrea_cli.grad(q, k, v, d_out[:2], backend="numpy")
    q4, k4, v4, d4 = draw((2, 4, 6, 8), (2, 2, 6, 8))
    with pytest.raises(AndreaError, match=r"dO must have the output's shape"):
        andrea_cli.grad(q4, k4, v4, d4.reshape(4, 2, 6, 8), backend="numpy")  # as many heads, the wrong dims

