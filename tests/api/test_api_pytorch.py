"""The Python API takes what a PyTorch user writes: SDPA's float `scale`, (..., T, d) inputs
with any leading batch and head dims, every command option as a keyword, and AndreaError (the
command's one line) for every bad argument, never a bare TypeError or ValueError."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import typer

import andrea_cli
from andrea_cli import api
from andrea_cli.cli import app
from andrea_cli.errors import AndreaError


def sdpa(q, k, v, scale, causal=True):
    """What torch.nn.functional.scaled_dot_product_attention computes, in float64 NumPy."""
    s = np.einsum("...id,...jd->...ij", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:
        T = s.shape[-1]
        s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v.astype(np.float64), p


@pytest.fixture
def qkv():
    rng = np.random.default_rng(11)
    return tuple(rng.standard_normal((12, 8), dtype=np.float32) for _ in range(3))


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_float_scale_is_used_as_given_and_recorded(qkv, backend):
    q, k, v = qkv
    r = andrea_cli.attend(q, k, v, scale=0.125 * 3, backend=backend)
    want, weights = sdpa(q, k, v, 0.375)
    np.testing.assert_allclose(r.output, want, atol=2e-5)
    np.testing.assert_allclose(r.weights, weights, atol=2e-6)
    assert r.report["scale"] == 0.375 and r.report["scaled"] is True
    fused = andrea_cli.attend(q, k, v, scale=0.375, backend="cpu", fused=True) if backend == "cpu" else r
    np.testing.assert_allclose(fused.output, want, atol=2e-5)


def test_none_true_and_false_keep_their_meaning(qkv):
    q, k, v = qkv
    by_default = andrea_cli.attend(q, k, v, backend="numpy")
    for scale, factor in ((None, 1 / math.sqrt(8)), (True, 1 / math.sqrt(8)), (False, 1.0)):
        r = andrea_cli.attend(q, k, v, scale=scale, backend="numpy")
        np.testing.assert_allclose(r.output, sdpa(q, k, v, factor)[0], atol=2e-6)
        assert r.report["scale"] == pytest.approx(factor)
    assert by_default.report["scale"] == pytest.approx(1 / math.sqrt(8))


@pytest.mark.parametrize("scale", ["yes", 0, -0.5, float("nan"), float("inf"), [0.1]])
def test_a_bad_scale_is_one_line(qkv, scale):
    with pytest.raises(AndreaError, match=r"^scale=.*: pass None \(1/sqrt\(d_k\)\), False \(no scaling\) or a positive"):
        andrea_cli.attend(*qkv, scale=scale, backend="numpy")


def test_grad_with_a_float_scale_matches_finite_differences(numeric_gradient):
    rng = np.random.default_rng(5)
    q, k, v, d_out = (rng.standard_normal((5, 3)) for _ in range(4))
    g = andrea_cli.grad(q, k, v, d_out, scale=0.7, backend="cpu")
    loss = lambda: float((d_out * sdpa(q, k, v, 0.7)[0]).sum())  # noqa: E731
    for name, x in (("dq", q), ("dk", k), ("dv", v)):
        np.testing.assert_allclose(getattr(g, name), numeric_gradient(loss, x), atol=1e-4, err_msg=name)
    assert g.report["scale"] == 0.7


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_leading_batch_and_head_dims_run_as_heads(backend):
    rng = np.random.default_rng(2)
    q, k = (rng.standard_normal((2, 3, 10, 4), dtype=np.float32) for _ in range(2))
    v = rng.standard_normal((2, 3, 10, 5), dtype=np.float32)
    r = andrea_cli.attend(q, k, v, backend=backend)
    assert r.output.shape == (2, 3, 10, 5) and r.weights.shape == (2, 3, 10, 10)
    for b in range(2):
        for h in range(3):
            want, weights = sdpa(q[b, h], k[b, h], v[b, h], 0.5)
            np.testing.assert_allclose(r.output[b, h], want, atol=2e-5)
            np.testing.assert_allclose(r.weights[b, h], weights, atol=2e-6)


def test_grad_takes_leading_dims_too():
    from andrea_cli import reference_backward
    from andrea_cli.masks import parse_mask

    rng = np.random.default_rng(3)
    q, k, v, d_out = (rng.standard_normal((2, 2, 7, 4), dtype=np.float32) for _ in range(4))
    g = andrea_cli.grad(q, k, v, d_out, backend="cpu")
    assert g.dq.shape == (2, 2, 7, 4)
    flat = [a.reshape(4, 7, 4) for a in (q, k, v, d_out)]
    exact = reference_backward.backward(*flat, parse_mask("causal"))
    np.testing.assert_allclose(g.dq, exact.dq.reshape(2, 2, 7, 4), atol=1e-5)
    np.testing.assert_allclose(g.dv, exact.dv.reshape(2, 2, 7, 4), atol=1e-5)


COMMANDS = {"attend": api.attend, "grad": api.grad, "verify": api.verify, "bench": api.benchmark, "info": api.info,
            "compare-scaling": api.compare_scaling, "generate": api.generate}


def test_every_command_option_is_a_keyword_of_its_function_with_its_default():
    """Both faces are built from one declaration: --d-k is d_k=, --json json=, --no-scale scale=False."""
    group = typer.main.get_command(app)
    assert set(group.commands) == set(COMMANDS)
    for name, command in group.commands.items():
        accepted = inspect.signature(COMMANDS[name]).parameters
        for param in command.params:
            if param.name == "help":
                continue
            assert param.name in accepted, f"andrea {name} {param.opts[0]}: {COMMANDS[name].__name__}() lacks it"
            if param.opts != ["--no-scale"]:  # a flag on the command line, scale=None in Python
                assert accepted[param.name].default == param.default, (name, param.name)


def test_options_the_signature_does_not_list_still_reach_the_command_or_are_named():
    with pytest.raises(AndreaError, match=r"^frobnicate: not an option of andrea attend; the options are"):
        andrea_cli.attend(T=8, backend="numpy", frobnicate=1)
    with pytest.raises(AndreaError, match=r"--precision bf16 runs the tensor-core fused kernels: add --fused"):
        andrea_cli.attend(T=8, backend="numpy", precision="bf16")


@pytest.mark.parametrize("call, message", [
    (lambda: andrea_cli.attend(T="16", backend="numpy"), "T='16': --T takes a whole number; e.g. T=1024"),
    (lambda: andrea_cli.attend(T=8, mask=3, backend="numpy"), "mask=3: --mask takes text; e.g. mask='causal'"),
    (lambda: andrea_cli.attend(T=8, fused="yes", backend="numpy"), "fused='yes': --fused takes True or False"),
    (lambda: andrea_cli.attend(T=8, kernel=3, backend="numpy"), "kernel=3: --kernel takes a file path"),
    (lambda: andrea_cli.grad(T=8.5, backend="numpy"), "T=8.5: --T takes a whole number"),
    (lambda: andrea_cli.compare_scaling(d_k="sixty", T=8), "--d-k"),
    (lambda: andrea_cli.compare_scaling(d_k=[64.5], T=8), "d_k=[64.5]: --d-k takes widths"),
    (lambda: andrea_cli.verify(T="5"), "T='5': --T takes a whole number"),
    (lambda: andrea_cli.benchmark(repeats="3"), "repeats='3': --repeats takes a whole number; e.g. repeats=5"),
    (lambda: andrea_cli.benchmark(side="cpu", blas_threads=0), "--blas-threads must be >= 1"),
    (lambda: andrea_cli.verify(scale=0.5), "verify checks the course's 1/sqrt(d_k)"),
    (lambda: andrea_cli.attend(T=8, backend="numpy", threads=0), "--threads 0: give a whole number of OS threads"),
    (lambda: andrea_cli.verify(threads="2"), "threads='2': --threads takes a whole number of OS threads"),
    (lambda: andrea_cli.attend(np.ones((2, 8, 4)), np.ones((2, 8, 4)), np.ones((2, 8, 4)), backend="numpy",
                               plot="w.png"), "plot draws one head's (T, T) weights"),
])
def test_bad_arguments_are_andrea_errors_with_the_cli_line(call, message):
    with pytest.raises(AndreaError) as caught:
        call()
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_compare_scaling_takes_one_width_as_an_int():
    r = andrea_cli.compare_scaling(d_k=16, T=8, backend="numpy")
    assert [row["d_k"] for row in r.report["rows"]] == [16]


def test_bench_and_info_are_functions_too():
    r = andrea_cli.benchmark(side="cpu", T=16, d_k=8, mask="none", repeats=2, warmup=0, no_cpu_build=True)
    assert {m["impl"] for m in r.report["measurements"]} >= {"numpy", "numpy_backward"}
    assert r.report["threads"]["limit"] == 1
    assert r.passed and all(m["within_tolerance"] for m in r.report["measurements"])
    assert "numpy" in andrea_cli.info().report["backends"]


def test_grad_with_the_layer_options_returns_the_layers_gradients():
    r = andrea_cli.grad(d_model=32, n_head=2, T=8, backend="numpy")
    assert r.dq is None
    assert {name: a.shape for name, a in r.grads.items()} == {
        "dx": (8, 32), "dw_q": (32, 32), "dw_k": (32, 32), "dw_v": (32, 32), "dw_o": (32, 32)}
    # the report's own check of these arrays against the float64 layer backward
    assert max(r.report["max_rel_error"].values()) < 1e-4


def test_attend_keeps_the_courses_causal_default_where_sdpa_has_none(qkv):
    q, k, v = qkv
    causal = andrea_cli.attend(q, k, v, backend="numpy").output
    np.testing.assert_allclose(causal, andrea_cli.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                               backend="numpy"), atol=2e-6)
    assert np.abs(causal - andrea_cli.scaled_dot_product_attention(q, k, v, backend="numpy")).max() > 0.1
    assert "causal" in api.attend.__doc__.split("\n\n")[0]


@pytest.mark.parametrize("call, message", [
    (lambda q: andrea_cli.attend(q, q, q, None, 0.0, True), r"^attend takes q, k, v by position .*\(3 more positional"),
    (lambda q: andrea_cli.attend(q, q, q, is_causal=True), r"^is_causal: an argument of andrea_cli.scaled_dot_"),
    (lambda q: andrea_cli.attend(query=q, key=q, value=q), r"^query: an argument of andrea_cli.scaled_dot_"),
    (lambda q: andrea_cli.attend(q, q, q, mask=np.ones((12, 12), bool)),
     r"^mask=ndarray of shape \(12, 12\), bool: attend's mask is text"),
    (lambda q: andrea_cli.attend(q, q, q, seed=np.ones(3)), r"^seed=ndarray of shape \(3,\), float64: --seed takes"),
])
def test_attend_called_as_torchs_sdpa_is_one_line_pointing_to_it(qkv, call, message):
    with pytest.raises(AndreaError, match=message) as caught:
        call(qkv[0])
    assert "\n" not in str(caught.value) and "True" not in str(caught.value)


def test_attend_reads_requires_grad_and_bf16_tensors():
    torch = pytest.importorskip("torch", reason="torch is an optional test dependency: pip install torch")
    q, k, v = (torch.randn(6, 8, requires_grad=True) for _ in range(3))
    r = andrea_cli.attend(q, k, v, backend="numpy")
    want = sdpa(*(t.detach().numpy() for t in (q, k, v)), 1 / math.sqrt(8))[0]
    np.testing.assert_allclose(r.output, want, atol=2e-6)
    half = andrea_cli.attend(*(t.bfloat16() for t in (q, k, v)), backend="numpy")
    assert half.output.dtype == np.float32
