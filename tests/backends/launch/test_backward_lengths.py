"""The backward kernels (staged kernel1 and kernel2, fused fp32) for L queries against S keys
(L < S, L > S, L = 1; causal bottom-right) and grouped K/V heads (2 and 8 query heads per K/V
head, one K/V head), in both thread schedules of the CPU build, against the float64 NumPy
backward; and that comparison against a wrong head mapping fails (it can catch the bug)."""

import numpy as np
import pytest

from andrea_cli import reference, reference_backward
from andrea_cli.backends.launch.staged import DEFAULT_PLAN, KERNEL1_PLAN
from andrea_cli.masks import MaskSpec

TOL = 1e-5


def inputs(H, H_kv, L, S, d_k, d_v, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((H, L, d_k), dtype=np.float32)
    k = rng.standard_normal((H_kv, S, d_k), dtype=np.float32)
    v = rng.standard_normal((H_kv, S, d_v), dtype=np.float32)
    d_out = rng.standard_normal((H, L, d_v), dtype=np.float32)
    return q, k, v, d_out


def rel_err(got, expected) -> float:
    err = float(np.abs(got - expected).max())
    return err / float(np.abs(expected).max()) if err else 0.0


CASES = [  # H, H_kv, L, S, d_k, d_v, mask
    (4, 2, 5, 19, 8, 6, MaskSpec("causal")),  # L < S: bottom-right, offset 14
    (2, 1, 21, 6, 5, 7, MaskSpec("causal")),  # L > S: the first 15 rows see no key
    (8, 1, 1, 23, 4, 4, MaskSpec("window", 5)),  # decode-like L = 1, 8 query heads per K/V head
    (8, 4, 17, 33, 8, 8, MaskSpec("none")),
    (2, 1, 67, 65, 8, 12, MaskSpec("causal")),  # past kernel2's 64-row tiles, L != S
    (4, 2, 16, 64, 12, 8, MaskSpec("window", 20)),  # float4-aligned: kernel2's vector copies
]


def _runs(cpu, q, k, v, d_out, mask):
    staged = [cpu.attention_backward(q, k, v, d_out, mask=mask, scaled=True, plan=plan)
              for plan in (DEFAULT_PLAN, KERNEL1_PLAN)]
    return [*staged, cpu.attention_backward_fused(q, k, v, d_out, mask=mask, scaled=True)]


@pytest.mark.parametrize("H, H_kv, L, S, d_k, d_v, mask", CASES)
def test_backward_lengths_and_groups_match_numpy(cpu_each_schedule, H, H_kv, L, S, d_k, d_v, mask):
    q, k, v, d_out = inputs(H, H_kv, L, S, d_k, d_v)
    exact = reference_backward.backward(q, k, v, d_out, mask)
    assert exact.dk.shape == (H_kv, S, d_k) and exact.dv.shape == (H_kv, S, d_v)
    for got in _runs(cpu_each_schedule, q, k, v, d_out, mask):
        for name in ("dq", "dk", "dv"):
            assert getattr(got, name).shape == getattr(exact, name).shape, name
            assert rel_err(getattr(got, name), getattr(exact, name)) < TOL, (name, got.kernels)


def test_a_wrong_group_mapping_is_caught(cpu_backend):
    """dK/dV summed over the wrong query heads (h % H_kv, interleaved, instead of h // group) is
    what a broken kernel would give: the same comparison rejects it by far."""
    H, H_kv, L, S = 4, 2, 9, 13
    q, k, v, d_out = inputs(H, H_kv, L, S, 8, 8, seed=3)
    mask = MaskSpec("causal")
    got = cpu_backend().attention_backward_fused(q, k, v, d_out, mask=mask, scaled=True)
    order = np.argsort(np.arange(H) % H_kv, kind="stable")  # heads regrouped {0, 2}, {1, 3}
    wrong = reference_backward.backward(q[order], k, v, d_out[order], mask)
    right = reference_backward.backward(q, k, v, d_out, mask)
    assert rel_err(got.dk, right.dk) < TOL and rel_err(got.dv, right.dv) < TOL
    assert rel_err(got.dk, wrong.dk) > 100 * TOL and rel_err(got.dv, wrong.dv) > 100 * TOL


def test_reference_backward_groups_are_the_repeated_heads_gradients():
    """GQA's dK is the repeat's chain rule: the reference on K/V repeated per query head, summed
    over each group, gives the grouped reference's dK and dV exactly."""
    H, H_kv = 6, 2
    q, k, v, d_out = inputs(H, H_kv, 7, 11, 5, 4, seed=5)
    mask = MaskSpec("causal")
    grouped = reference_backward.backward(q, k, v, d_out, mask)
    full = reference_backward.backward(q, reference.kv_heads_for(k, H), reference.kv_heads_for(v, H), d_out, mask)
    np.testing.assert_allclose(grouped.dk, full.dk.reshape(H_kv, H // H_kv, 11, 5).sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(grouped.dv, full.dv.reshape(H_kv, H // H_kv, 11, 4).sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(grouped.dq, full.dq, rtol=1e-12)


@pytest.mark.parametrize("text", ["causal", "window:2,3", "sinks:2,window:3", "alibi", "alibi,window:4"])
def test_reference_backward_matches_torch_autograd(text):
    """Against torch autograd of scaled_dot_product_attention with enable_gqa and the
    bottom-right mask given explicitly (torch's is_causal is top-left when L != S): every
    flavour, ALiBi as a float attn_mask (its bias where visible, -inf elsewhere)."""
    from andrea_cli.masks import parse_mask

    torch = pytest.importorskip("torch")
    H, H_kv, L, S = 4, 2, 5, 12
    q, k, v, d_out = inputs(H, H_kv, L, S, 8, 6, seed=7)
    mask = parse_mask(text)
    exact = reference_backward.backward(q, k, v, d_out, mask)
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    seen, bias = mask.visible(L, S=S), mask.score_bias(H, L, S=S)
    attn_mask = torch.tensor(seen if bias is None else np.where(seen, bias, -np.inf))
    out = torch.nn.functional.scaled_dot_product_attention(tq[None], tk[None], tv[None], attn_mask=attn_mask,
                                                           enable_gqa=True)[0]
    out.backward(torch.tensor(d_out, dtype=torch.float64))
    for name, t in (("dq", tq), ("dk", tk), ("dv", tv)):
        np.testing.assert_allclose(getattr(exact, name), t.grad.numpy(), rtol=1e-9, atol=1e-12)


BF16_CASES = [  # H, H_kv, L, S, mask: past the 64-key / 64-query tiles, L < S, L > S, L = 1
    (4, 2, 9, 70, MaskSpec("causal")),
    (2, 1, 70, 20, MaskSpec("causal")),
    (8, 1, 1, 33, MaskSpec("window", 8)),
]


@pytest.mark.parametrize("H, H_kv, L, S, mask", BF16_CASES)
def test_bf16_backward_lengths_and_groups(cpu_each_schedule, H, H_kv, L, S, mask):
    """The tensor-core backward (bf16 operands): within bf16's rounding of the float64 gradients
    (2e-2 of the largest entry, where a wrong head or offset gives errors of order 1)."""
    q, k, v, d_out = inputs(H, H_kv, L, S, 64, 64, seed=11)
    exact = reference_backward.backward(q, k, v, d_out, mask)
    got = cpu_each_schedule.attention_backward_fused(q, k, v, d_out, mask=mask, scaled=True, precision="bf16")
    for name in ("dq", "dk", "dv"):
        assert getattr(got, name).shape == getattr(exact, name).shape, name
        assert rel_err(getattr(got, name), getattr(exact, name)) < 2e-2, (name, got.kernels)
