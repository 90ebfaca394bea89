"""reference_sdpa.py, torch's SDPA in float64: against its own loop version on tiny shapes (no
torch needed), its invariants, and, where torch is installed, against torch in float64."""

from __future__ import annotations

import numpy as np
import pytest

from andrea_cli.reference_sdpa import attention_bias, causal_top_left, sdpa, sdpa_loops


def qkv(H=2, L=5, S=7, E=3, E_v=4, H_kv=None, seed=0):
    rng = np.random.default_rng(seed)
    H_kv = H_kv or H
    return rng.standard_normal((H, L, E)), rng.standard_normal((H_kv, S, E)), rng.standard_normal((H_kv, S, E_v))


@pytest.mark.parametrize("L, S", [(5, 7), (7, 5), (1, 6), (4, 4)])
def test_is_causal_is_top_left_at_every_length(L, S):
    q, k, v = qkv(L=L, S=S)
    np.testing.assert_allclose(sdpa(q, k, v, is_causal=True), sdpa_loops(q, k, v, is_causal=True), atol=1e-12)
    seen = causal_top_left(L, S)
    assert seen[0].sum() == 1 and seen[-1].sum() == min(L, S)  # query 0 sees key 0 only, whatever S


def test_a_bool_mask_hides_false_and_a_fully_hidden_row_is_zero():
    q, k, v = qkv()
    mask = np.random.default_rng(1).random((5, 7)) < 0.6
    mask[2] = False
    out = sdpa(q, k, v, attn_mask=mask)
    np.testing.assert_allclose(out, sdpa_loops(q, k, v, attn_mask=mask), atol=1e-12)
    assert (out[:, 2] == 0).all()


def test_a_float_mask_is_added_and_broadcast_over_heads():
    q, k, v = qkv()
    bias = np.random.default_rng(2).standard_normal((1, 5, 7))
    np.testing.assert_allclose(sdpa(q, k, v, attn_mask=bias), sdpa_loops(q, k, v, attn_mask=bias), atol=1e-12)
    assert not np.allclose(sdpa(q, k, v, attn_mask=bias), sdpa(q, k, v))  # the bias did something


@pytest.mark.parametrize("H_kv", [1, 2])
def test_enable_gqa_maps_query_head_h_to_kv_head_h_over_the_group(H_kv):
    q, k, v = qkv(H=4, H_kv=H_kv)
    out = sdpa(q, k, v, enable_gqa=True, scale=0.4)
    np.testing.assert_allclose(out, sdpa_loops(q, k, v, enable_gqa=True, scale=0.4), atol=1e-12)
    group = 4 // H_kv
    np.testing.assert_allclose(out[3], sdpa(q[3:4], k[3 // group:3 // group + 1], v[3 // group:3 // group + 1],
                                            scale=0.4)[0], atol=1e-12)


def test_the_bias_of_each_mask():
    assert (attention_bias(2, 3) == 0).all()
    assert np.isneginf(attention_bias(2, 3, is_causal=True)).tolist() == [[False, True, True], [False, False, True]]
    assert np.isneginf(attention_bias(1, 2, np.array([[True, False]]))).tolist() == [[False, True]]


def test_against_torch_in_float64():
    torch = pytest.importorskip("torch", reason="torch is an optional test dependency: pip install torch")
    F = torch.nn.functional
    q, k, v = qkv(H=4, L=6, S=9, H_kv=2)
    mask = np.random.default_rng(3).random((6, 9)) < 0.7
    cases = [dict(is_causal=True), dict(attn_mask=mask), dict(attn_mask=mask * -3.0, scale=0.2), {}]
    for case in cases:
        t_case = {name: torch.from_numpy(value) if isinstance(value, np.ndarray) else value
                  for name, value in case.items()}
        theirs = F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), enable_gqa=True, **t_case)
        np.testing.assert_allclose(sdpa(q, k, v, enable_gqa=True, **case), theirs.numpy(), atol=1e-13)
