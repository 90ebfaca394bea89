"""The Python API: the CLI's names and defaults, NumPy in and out, the report the CLI's --json
prints, one exception type with the CLI's messages, a light import, and (on a GPU) cupy arrays
used where they are."""

import json
import subprocess
import sys

import numpy as np
import pytest

import andrea_cli
from andrea_cli import reference
from andrea_cli.masks import parse_mask

def without_timings(document):
    """The document without its clock readings (keys ending in _ms or _s, at any depth): they
    differ between any two runs."""
    if isinstance(document, dict):
        return {key: without_timings(value) for key, value in document.items()
                if not key.endswith(("_ms", "_s"))}
    if isinstance(document, list):
        return [without_timings(value) for value in document]
    return document


def expected(q, k, v, mask="causal"):
    """float64 reference, per head for (H, T, d) inputs."""
    heads = [reference.attention(q[None] if q.ndim == 2 else q[h:h + 1], k[None] if k.ndim == 2 else k[h:h + 1],
                                 v[None] if v.ndim == 2 else v[h:h + 1], parse_mask(mask))[0]
             for h in range(1 if q.ndim == 2 else q.shape[0])]
    return heads[0] if q.ndim == 2 else np.stack(heads)


def test_import_is_light_and_the_api_needs_no_cupy_or_matplotlib_off_the_gpu():
    code = ("import sys, andrea_cli; light = not {'cupy', 'matplotlib'} & set(sys.modules); "
            "r = andrea_cli.attend(T=8, d_k=4, backend='numpy'); "
            "print(light, 'cupy' in sys.modules, 'matplotlib' in sys.modules, r.output.shape)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True", "False", "False", "(8,"] + ["4)"], done


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_report_is_the_cli_json_for_the_same_seed(cli, backend):
    args = ["attend", "--T", "24", "--d-k", "8", "--d-v", "4", "--seed", "3", "--mask", "window:5",
            "--backend", backend]
    from_cli = cli.json(*args)
    result = andrea_cli.attend(T=24, d_k=8, d_v=4, seed=3, mask="window:5", backend=backend)
    assert without_timings(result.report) == without_timings(from_cli)
    assert set(result.report["timings_ms"]) == set(from_cli["timings_ms"])
    assert result.report["backend"] == backend


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_numpy_in_numpy_out(backend):
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((2, 19, 8))
    v = rng.standard_normal((19, 5))
    r = andrea_cli.attend(q, k, v, backend=backend)
    assert isinstance(r.output, np.ndarray) and r.output.shape == (19, 5) and r.output.dtype == np.float32
    np.testing.assert_allclose(r.output, expected(q, k, v), atol=2e-6)
    np.testing.assert_allclose(r.scores, q @ k.T, rtol=1e-5, atol=1e-5)
    assert r.weights.shape == (19, 19) and (r.weights[np.triu_indices(19, 1)] == 0).all()
    assert r.report["source"] == "arrays passed to andrea_cli.attend"
    assert r.report["shapes"]["output"] == [19, 5]


def test_arrays_give_the_cli_report_of_the_same_files(cli, tmp_path):
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((12, 4), dtype=np.float32) for _ in range(3))
    np.savez(tmp_path / "qkv.npz", q=q, k=k, v=v)
    from_cli = cli.json("attend", "--qkv", tmp_path / "qkv.npz", "--backend", "cpu", "--mask", "none", "--no-scale")
    result = andrea_cli.attend(q, k, v, backend="cpu", mask="none", scale=False)
    differs = {"source"}
    assert {k: v for k, v in without_timings(result.report).items() if k not in differs} == \
        {k: v for k, v in without_timings(from_cli).items() if k not in differs}


def test_heads_run_in_one_launch_per_stage():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((3, 17, 8)) for _ in range(3))
    r = andrea_cli.attend(q, k, v, backend="cpu")
    assert r.output.shape == (3, 17, 8) and r.weights.shape == (3, 17, 17) and r.scores.shape == (3, 17, 17)
    np.testing.assert_allclose(r.output, expected(q, k, v), atol=2e-6)
    assert r.report["shapes"]["weights"] == [3, 17, 17]
    fused = andrea_cli.attend(q, k, v, backend="cpu", fused=True)
    assert fused.weights is None and fused.scores is None and fused.report["fused"] is True
    np.testing.assert_allclose(fused.output, expected(q, k, v), atol=2e-6)


def test_fused_with_a_row_sample():
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((40, 8)) for _ in range(3))
    r = andrea_cli.attend(q, k, v, backend="cpu", fused=True, sample_rows=5)
    assert r.report["sampled_rows"] == 5 and r.report["sample"]["output_max_abs_err"] < 1e-5
    np.testing.assert_allclose(r.output, expected(q, k, v), atol=2e-6)


def test_bad_input_raises_the_one_error_type_with_the_cli_line(run_main):
    code, _, err = run_main("attend", "--T", "8", "--mask", "window:0")
    assert code == 2
    with pytest.raises(andrea_cli.AndreaError) as caught:
        andrea_cli.attend(T=8, mask="window:0")
    assert err.strip() == f"error: {caught.value}"
    q = np.ones((4, 3))
    cases = [
        ((q, q, np.ones((5, 3))), {}, "same T"),
        ((q, np.ones((4, 2)), q), {}, "d_k"),
        ((np.array([[1, np.nan, 0]] * 4), q, q), {}, "holds NaN or Inf (first at row 0, column 1"),
        ((q, q, None), {}, "pass all of q, k, v"),
        ((q, q, q), {"T": 4}, "drop them"),
        ((q, q, q), {"backend": "tpu"}, "is not a backend"),
        ((q, q, q), {"fused": True, "backend": "numpy"}, "no fused kernel"),
        ((np.ones((2, 2, 2, 2)), q, q), {}, "the leading (batch, head) dims must agree"),
        ((np.ones(4), q, q), {}, "expected (..., T, d)"),
        ((q.astype(str), q, q), {}, "not real numbers"),
    ]
    for args, options, words in cases:
        with pytest.raises(andrea_cli.AndreaError, match=None) as caught:
            andrea_cli.attend(*args, **options)
        assert words in str(caught.value) and "\n" not in str(caught.value), (words, str(caught.value))


def test_scores_past_float32_warn_in_words_not_numpys_raw_warning():
    """1e20 entries: Q·K^T = 4e40 overflows float32. The command says so in a line; from Python the
    same line comes as one AndreaWarning, and NumPy's "overflow encountered in cast" stays out."""
    import warnings

    from andrea_cli.errors import AndreaWarning

    q = np.full((8, 4), 1e20)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = andrea_cli.attend(q, q, q, backend="numpy")
    assert [w.category for w in caught] == [AndreaWarning], [str(w.message) for w in caught]
    assert str(caught[0].message) == result.report["notices"][-1]
    assert "past float32's largest value" in str(caught[0].message) and caught[0].filename == __file__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        andrea_cli.attend(np.ones((8, 4)), np.ones((8, 4)), np.ones((8, 4)), backend="numpy")
    assert caught == []  # inputs of ordinary size: nothing to say


def test_the_api_functions_share_no_name_with_a_module_of_the_package():
    """verify's sweep is the package andrea_cli.verification: importing it leaves verify() the function."""
    import andrea_cli.verification.run  # noqa: F401
    from andrea_cli.verification.run import run_verify

    assert callable(run_verify)
    assert andrea_cli.verify.__module__ == "andrea_cli.api" and andrea_cli.grad.__module__ == "andrea_cli.api"
    assert {"attend", "grad", "verify", "compare_scaling", "AndreaError"} <= set(dir(andrea_cli))


def test_verify_and_compare_scaling_match_their_commands(cli):
    result = andrea_cli.verify(backend="cpu", T=9, d_k=4)
    assert result.passed is True and result.report["passed"] is True
    from_cli = json.loads(cli("verify", "--backend", "cpu", "--T", "9", "--d-k", "4", "--json").stdout)
    assert without_timings(result.report) == without_timings(from_cli)
    scaling = andrea_cli.compare_scaling(d_k=[4, 16], T=32, backend="numpy")
    from_cli = cli.json("compare-scaling", "--d-k", "4,16", "--T", "32", "--backend", "numpy")
    assert without_timings(scaling.report) == without_timings(from_cli)


def test_grad_matches_its_command_and_the_float64_backward(cli):
    from andrea_cli import reference_backward

    from_cli = cli.json("grad", "--T", "20", "--d-k", "8", "--seed", "4", "--backend", "cpu")
    result = andrea_cli.grad(T=20, d_k=8, seed=4, backend="cpu")
    assert without_timings(result.report) == without_timings(from_cli)
    rng = np.random.default_rng(8)
    q, k, v, d_out = (rng.standard_normal((15, 6)) for _ in range(4))
    g = andrea_cli.grad(q, k, v, d_out, backend="cpu", mask="window:4")
    exact = reference_backward.backward(q[None], k[None], v[None], d_out[None], parse_mask("window:4"))
    for name in ("dq", "dk", "dv"):
        np.testing.assert_allclose(getattr(g, name), getattr(exact, name)[0], atol=1e-5, err_msg=name)
    with pytest.raises(andrea_cli.AndreaError, match="dO must have the output's shape"):
        andrea_cli.grad(q, k, v, d_out[:3])
    assert "GradResult" in repr(g) and "<pre" in g._repr_html_()
    # bf16 on tensor cores, as `grad --fused --precision bf16` runs it
    from_cli = cli.json("grad", "--T", "70", "--d-k", "64", "--seed", "4", "--backend", "cpu", "--fused",
                        "--precision", "bf16")
    result = andrea_cli.grad(T=70, d_k=64, seed=4, backend="cpu", fused=True, precision="bf16")
    assert without_timings(result.report) == without_timings(from_cli) and from_cli["precision"] == "bf16"


def test_results_show_the_terminal_tables_in_jupyter_and_rich():
    from rich.console import Console

    r = andrea_cli.attend(T=16, d_k=4, backend="numpy")
    html = r._repr_html_()
    assert html.startswith("<pre") and "Softmax weights" in html and "Shapes" in html
    console = Console(record=True, width=100, force_terminal=False)
    console.print(r)
    assert "Softmax weights" in console.export_text()
    assert "AttendResult(backend='numpy', T=16, d_k=4, mask='causal'" in repr(r)
    assert "passed" in andrea_cli.verify(backend="cpu", T=5, d_k=3)._repr_html_().lower()


def test_result_plot_writes_the_attend_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = andrea_cli.attend(T=24, d_k=4, backend="numpy").plot(tmp_path / "w.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.gpu
def test_cupy_arrays_are_used_where_they_are():
    import cupy

    from andrea_cli.backends import cuda

    rng = np.random.default_rng(4)
    host = [rng.standard_normal((2, 300, 64), dtype=np.float32) for _ in range(3)]
    q, k, v = (cupy.asarray(a) for a in host)
    seen = []
    original = cuda._CupyDevice.to_device

    def spy(self, a):
        placed = original(self, a)
        seen.append((a, placed))
        return placed

    cuda._CupyDevice.to_device = spy
    try:
        for fused in (False, True):
            seen.clear()
            r = andrea_cli.attend(q, k, v, fused=fused)
            assert r.report["backend"] == "cuda"
            assert isinstance(r.output, cupy.ndarray) and r.output.shape == (2, 300, 64)
            np.testing.assert_allclose(cupy.asnumpy(r.output), expected(*host), atol=5e-5)
            assert [placed.data.ptr for _, placed in seen] == [a.data.ptr for a in (q, k, v)], \
                "the inputs were not used in place"
    finally:
        cuda._CupyDevice.to_device = original
    with pytest.raises(andrea_cli.AndreaError, match="GPU arrays"):
        andrea_cli.attend(q, k, v, backend="cpu")


@pytest.mark.gpu
def test_torch_cuda_tensors_through_dlpack():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    q, k, v = (torch.randn(128, 32, device="cuda") for _ in range(3))
    r = andrea_cli.attend(q, k, v)
    want = expected(*(t.cpu().numpy() for t in (q, k, v)))
    np.testing.assert_allclose(r.output.get(), want, atol=5e-5)
