"""andrea_cli.scaled_dot_product_attention: torch's signature and defaults, positional calls, the
input's type and dtype back, the NumPy path and the CPU build against the float64 reference, the
fallback that says why, and one AndreaError line for every bad argument. (Against torch itself:
tests/scripts/test_sdpa_against_torch.py.)"""

from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pytest

import andrea_cli
from andrea_cli.errors import AndreaError, KernelFallbackWarning
from andrea_cli.reference_sdpa import sdpa as reference

sdpa = andrea_cli.scaled_dot_product_attention


def arrays(*shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


def test_the_signature_is_torchs():
    params = inspect.signature(sdpa).parameters
    positional = [(p.name, p.default) for p in params.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == [("query", inspect.Parameter.empty), ("key", inspect.Parameter.empty),
                          ("value", inspect.Parameter.empty), ("attn_mask", None), ("dropout_p", 0.0),
                          ("is_causal", False), ("scale", None), ("enable_gqa", False)]
    assert {p.name for p in params.values() if p.kind is p.KEYWORD_ONLY} == {"backend", "kernel"}


def test_no_mask_by_default_and_a_positional_call_means_what_torchs_does():
    q, k, v = arrays((2, 9, 4), (2, 9, 4), (2, 9, 4))
    np.testing.assert_allclose(sdpa(q, k, v, backend="numpy"), reference(q, k, v), atol=2e-6)
    out = sdpa(q, k, v, None, 0.0, True, 0.3, False, backend="numpy")
    np.testing.assert_allclose(out, reference(q, k, v, is_causal=True, scale=0.3), atol=2e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_result_has_the_inputs_dtype(dtype):
    q, k, v = arrays((3, 8, 4), (3, 8, 4), (3, 8, 6), dtype=dtype)
    out = sdpa(q, k, v, is_causal=True, backend="numpy")
    assert out.dtype == dtype and out.shape == (3, 8, 6)
    exact = reference(q, k, v, is_causal=True)
    # float16: computed in float32, rounded once; float64: the float64 path
    tolerance = {np.float16: 1e-3, np.float32: 2e-6, np.float64: 1e-14}[dtype]
    np.testing.assert_allclose(out.astype(np.float64), exact, atol=tolerance)


@pytest.mark.parametrize("shapes, keywords", [
    (((2, 3, 17, 8), (2, 3, 17, 8), (2, 3, 17, 5)), {}),
    (((2, 3, 17, 8), (2, 3, 17, 8), (2, 3, 17, 5)), {"is_causal": True}),
    (((2, 3, 17, 8), (2, 3, 17, 8), (2, 3, 17, 5)), {"scale": 0.7}),
    (((2, 5, 8), (2, 11, 8), (2, 11, 8)), {"is_causal": True}),  # L < S: top-left
    (((2, 11, 8), (2, 5, 8), (2, 5, 8)), {"is_causal": True}),  # L > S
    (((2, 4, 6, 8), (2, 2, 9, 8), (2, 2, 9, 8)), {"enable_gqa": True, "is_causal": True}),
    # mask arrays: the fused fp32 kernels, one (L, S) for all heads or one per head
    (((2, 6, 8), (2, 6, 8), (2, 6, 8)), {"attn_mask": np.tril(np.ones((6, 6), bool))}),
    (((2, 2, 5, 8), (2, 2, 7, 8), (2, 2, 7, 3)),
     {"attn_mask": -np.arange(14, dtype=np.float32).reshape(2, 1, 1, 7) * np.float32(0.3)}),
])
def test_the_cpu_build_runs_what_its_kernels_take_without_a_warning(shapes, keywords):
    q, k, v = arrays(*shapes)
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelFallbackWarning)
        out = sdpa(q, k, v, backend="cpu", **keywords)
    np.testing.assert_allclose(out, reference(q, k, v, **keywords), atol=2e-6)


@pytest.mark.parametrize("shapes, keywords, why", [
    (((4, 6, 8), (2, 6, 8), (1, 6, 8)), {"enable_gqa": True}, "heads 4/2/1"),
])
def test_what_the_kernels_cannot_take_runs_the_numpy_path_and_says_why(shapes, keywords, why):
    q, k, v = arrays(*shapes)
    with pytest.warns(KernelFallbackWarning, match=rf"^backend cpu: .*{re.escape(why)}.*; ran the NumPy path in float32$"):
        out = sdpa(q, k, v, backend="cpu", **keywords)
    np.testing.assert_allclose(out, reference(q, k, v, **keywords), atol=2e-6)


def test_gqa_on_the_numpy_path_reads_kv_head_h_over_the_group():
    q, k, v = arrays((1, 6, 5, 4), (1, 2, 7, 4), (1, 3, 7, 4))
    out = sdpa(q, k, v, enable_gqa=True, backend="numpy")
    np.testing.assert_allclose(out, reference(q, k, v, enable_gqa=True), atol=2e-6)
    np.testing.assert_allclose(out[0, 5], reference(q[0, 5], k[0, 1], v[0, 2]), atol=2e-6)  # 5 // 3, 5 // 2


def test_leading_dims_broadcast_as_torchs_do():
    q, k, v = arrays((2, 3, 4, 8), (1, 3, 6, 8), (3, 6, 5))
    out = sdpa(q, k, v, attn_mask=np.zeros((4, 6), np.float32), backend="numpy")
    assert out.shape == (2, 3, 4, 5)
    np.testing.assert_allclose(out, reference(q, k, v), atol=2e-6)


BAD = [
    (dict(dropout_p=0.1), r"^dropout_p=0\.1: andrea has no dropout"),
    (dict(is_causal=True, attn_mask=np.ones((6, 6), bool)), r"^is_causal=True with an attn_mask: pass one of them"),
    (dict(attn_mask=np.ones((5, 6), bool)), r"^attn_mask: shape \(5, 6\) does not broadcast to the scores"),
    (dict(attn_mask=np.ones((6, 6), np.int64)), r"^attn_mask: dtype int64; pass a bool mask"),
    (dict(attn_mask=np.full((6, 6), np.nan, np.float32)), r"^attn_mask holds NaN or \+inf"),
    (dict(attn_mask=np.ones(6, bool)), r"^attn_mask: shape \(6,\) must have 2 to 3 dims"),
    (dict(scale=True), r"^scale=True: pass None"),
    (dict(scale=float("nan")), r"^scale=nan: pass None"),
    (dict(is_causal="yes"), r"^is_causal='yes': pass True or False"),
    (dict(enable_gqa=1), r"^enable_gqa=1: pass True or False"),
    (dict(backend="gpu"), r"^backend='gpu' is not a backend"),
    (dict(backend=3), r"^backend=3: pass 'auto'"),
    (dict(kernel=3), r"^kernel=3: pass the path"),
]


@pytest.mark.parametrize("keywords, message", BAD)
def test_every_bad_argument_is_one_andrea_error_line_naming_it(keywords, message):
    q, k, v = arrays((2, 6, 4), (2, 6, 4), (2, 6, 4))
    with pytest.raises(AndreaError, match=message) as caught:
        sdpa(q, k, v, **{"backend": "numpy", **keywords})
    assert "\n" not in str(caught.value) and "True," not in str(caught.value)  # no mask array dumped


@pytest.mark.parametrize("q, k, v, message", [
    ((2, 6, 4), (2, 6, 5), (2, 6, 4), r"^query \(2, 6, 4\), key \(2, 6, 5\): their last dims"),
    ((2, 6, 4), (2, 6, 4), (2, 7, 4), r"^key \(2, 6, 4\), value \(2, 7, 4\): one value per key"),
    ((4, 6, 4), (3, 6, 4), (3, 6, 4), r"the leading \(batch, head\) dims do not broadcast \(fewer K/V heads: enable"),
    ((6, 4), (6, 4), (6,), r"^value: shape \(6,\) has fewer than 2 dims"),
    ((0, 4), (6, 4), (6, 4), r"^query: shape \(0, 4\) has an empty dim"),
])
def test_shapes_that_do_not_fit_are_named(q, k, v, message):
    with pytest.raises(AndreaError, match=message):
        sdpa(*arrays(q, k, v), backend="numpy")


def test_gqa_heads_that_do_not_divide_and_other_bad_arrays():
    q, k, v = arrays((4, 6, 4), (3, 6, 4), (3, 6, 4))
    with pytest.raises(AndreaError, match=r"^enable_gqa: key has 3 heads \(dim -3\), which does not divide query's 4"):
        sdpa(q, k, v, enable_gqa=True)
    with pytest.raises(AndreaError, match=r"^enable_gqa=True groups heads, dim -3"):
        sdpa(*arrays((6, 4), (6, 4), (6, 4)), enable_gqa=True)
    q, k, v = arrays((6, 4), (6, 4), (6, 4))
    with pytest.raises(AndreaError, match=r"^query float32, key float64, value float32: pass one dtype"):
        sdpa(q, k.astype(np.float64), v)
    with pytest.raises(AndreaError, match=r"^key: dtype int64 is not a float type"):
        sdpa(q, k.astype(np.int64), v)
    with pytest.raises(AndreaError, match=r"^value is None"):
        sdpa(q, k, None)
    q[2, 1] = np.inf
    with pytest.raises(AndreaError, match=r"^query holds NaN or Inf"):
        sdpa(q, k, v)


def test_requires_grad_and_bf16_tensors_come_back_as_tensors_of_their_dtype():
    torch = pytest.importorskip("torch", reason="torch is an optional test dependency: pip install torch")
    q, k, v = (torch.randn(2, 3, 10, 8, requires_grad=True) for _ in range(3))
    out = sdpa(q, k, v, is_causal=True, backend="cpu")
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and not out.requires_grad
    exact = reference(*(t.detach().double().numpy() for t in (q, k, v)), is_causal=True)
    np.testing.assert_allclose(out.numpy(), exact, atol=2e-6)
    half = sdpa(*(t.bfloat16() for t in (q, k, v)), backend="numpy")
    assert half.dtype == torch.bfloat16 and half.shape == (2, 3, 10, 8)


def random_call(rng):
    """A random SDPA call: 2 to 4 dims, broadcast and grouped K/V heads, every mask kind, scales."""
    nd, gqa = int(rng.integers(2, 5)), bool(rng.integers(0, 2))
    gqa = gqa and nd >= 3
    L, S, E, E_v = (int(x) for x in rng.integers(1, 9, size=4))
    lead = [int(x) for x in rng.integers(1, 4, size=nd - 2)]

    def kv_lead():
        dims = [1 if rng.random() < 0.3 else d for d in lead]
        if gqa:
            dims[-1] = int(rng.choice([d for d in range(1, lead[-1] + 1) if lead[-1] % d == 0]))
        return dims

    k_lead = kv_lead()
    v_lead = k_lead if rng.random() < 0.7 else kv_lead()
    causal = bool(rng.integers(0, 2))
    mask = None
    if not causal and rng.random() < 0.6:
        mask_nd = int(rng.integers(2, nd + 1))
        shape = [d if rng.random() < 0.6 else 1 for d in lead[len(lead) - (mask_nd - 2):]] if mask_nd > 2 else []
        shape += [L if rng.random() < 0.8 else 1, S]
        mask = rng.random(shape) < 0.7 if rng.random() < 0.5 else rng.standard_normal(shape).astype(np.float32)
    scale = None if rng.random() < 0.5 else float(rng.uniform(-1, 2))
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in (lead + [L, E], k_lead + [S, E], v_lead + [S, E_v]))
    return (q, k, v, mask), dict(is_causal=causal, scale=scale, enable_gqa=gqa)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_random_calls_agree_with_torch_errors_included(backend):
    torch = pytest.importorskip("torch", reason="torch is an optional test dependency: pip install torch")
    rng = np.random.default_rng(7)
    for _ in range(25):
        (q, k, v, mask), keywords = random_call(rng)
        try:
            want = torch.nn.functional.scaled_dot_product_attention(
                *map(torch.from_numpy, (q, k, v)), attn_mask=None if mask is None else torch.from_numpy(mask),
                **keywords).numpy()
        except (RuntimeError, IndexError):  # what torch refuses, andrea refuses
            with pytest.raises(AndreaError):
                sdpa(q, k, v, mask, backend=backend, **keywords)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KernelFallbackWarning)
            out = sdpa(q, k, v, mask, backend=backend, **keywords)
        assert out.shape == want.shape
        np.testing.assert_allclose(out, want, atol=1e-5, err_msg=str((q.shape, k.shape, v.shape, keywords)))
