"""andrea_cli.attend with grouped K/V heads (fewer in dim -3 than Q's, as grad takes them): every
backend against a float64 computation that repeats each K/V head for its query heads by hand."""

import numpy as np
import pytest

import andrea_cli
from andrea_cli.errors import AndreaError


def grouped_inputs(lead_q=(2, 8), lead_kv=(2, 2), L=40, d=16, d_v=24, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((*lead_q, L, d)).astype(np.float32)
    k = rng.standard_normal((*lead_kv, L, d)).astype(np.float32)
    v = rng.standard_normal((*lead_kv, L, d_v)).astype(np.float32)
    return q, k, v


def causal_attention_by_hand(q, k, v):
    """float64, query head h on K/V head h // group, each (b, h) pair in a plain loop."""
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    out = np.empty(q.shape[:-1] + v.shape[-1:])
    group = q.shape[-3] // k.shape[-3]
    L, S = q.shape[-2], k.shape[-2]
    hidden = np.triu(np.ones((L, S), bool), 1)
    for index in np.ndindex(q.shape[:-2]):
        kv = index[:-1] + (index[-1] // group,)
        s = q64[index] @ k64[kv].T / np.sqrt(q.shape[-1])
        s[hidden] = -np.inf
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        out[index] = (p / p.sum(axis=-1, keepdims=True)) @ v64[kv]
    return out


@pytest.mark.parametrize("backend, fused", [("numpy", False), ("cpu", False), ("cpu", True)])
def test_grouped_heads_match_the_hand_loop(backend, fused):
    q, k, v = grouped_inputs()
    r = andrea_cli.attend(q, k, v, backend=backend, fused=fused)
    assert r.output.shape == (2, 8, 40, 24)
    np.testing.assert_allclose(r.output, causal_attention_by_hand(q, k, v), atol=2e-6)


def test_one_kv_head_for_every_query_head_3d():
    q, k, v = grouped_inputs(lead_q=(4,), lead_kv=(1,), L=33)
    r = andrea_cli.attend(q, k, v, backend="cpu")
    np.testing.assert_allclose(r.output, causal_attention_by_hand(q, k, v), atol=2e-6)


def test_a_head_count_that_does_not_divide_is_one_line():
    q, k, v = grouped_inputs(lead_kv=(2, 3))
    with pytest.raises(AndreaError, match="multiple of H_kv") as e:
        andrea_cli.attend(q, k, v, backend="numpy")
    assert "\n" not in str(e.value)


def test_bf16_tensor_cores_take_grouped_heads():
    q, k, v = grouped_inputs(lead_q=(4,), lead_kv=(2,), L=64, d=64, d_v=64)
    r = andrea_cli.attend(q, k, v, backend="cpu", fused=True, precision="bf16")
    # bf16 inputs (8 bits of mantissa): the float64 answer within a few bf16 roundings
    np.testing.assert_allclose(r.output, causal_attention_by_hand(q, k, v), atol=3e-2)
