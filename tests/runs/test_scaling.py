"""compare-scaling: the figures land where the mathematics says, the JSON contract, the plot, and
one-line errors for bad lists and windows."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import andrea_cli.cli
from andrea_cli.backends.numpy_backend import NumpyBackend
from andrea_cli.errors import AndreaError
from andrea_cli.masks import MaskSpec, parse_mask
from andrea_cli.reference import attention_loops
from andrea_cli.runs.scaling import compare_scaling, parse_d_k_list

runner = CliRunner()
command = andrea_cli.cli.app
D_KS = [64, 256, 1024]
T = 256


@pytest.fixture(scope="module")
def report():
    return compare_scaling(NumpyBackend(), D_KS, T, MaskSpec("causal"), "normal", seed=0)


def test_raw_std_near_sqrt_d_k_and_scaled_near_one(report):
    for row in report.rows:
        assert row.unscaled.magnitude.std == pytest.approx(math.sqrt(row.d_k), rel=0.10)
        assert row.scaled.magnitude.std == pytest.approx(1.0, rel=0.10)


def test_unscaled_is_peakier_for_every_d_k(report):
    for row in report.rows:
        u, s = row.unscaled.softmax, row.scaled.softmax
        assert u.mean_max_weight > s.mean_max_weight
        assert u.mean_entropy < s.mean_entropy
        assert u.share_rows_over_99 >= s.share_rows_over_99
    # and it gets worse as d_k grows
    peaks = [row.unscaled.softmax.mean_max_weight for row in report.rows]
    assert peaks == sorted(peaks)


def test_conclusion_is_read_off_the_numbers(report):
    text = report.conclusion
    assert f"{report.rows[-1].unscaled.magnitude.std:.3g}" in text
    assert "peakier at 3 of 3 widths" in text


def test_unit_norm_rows_shrink_as_one_over_sqrt_d_k():
    r = compare_scaling(NumpyBackend(), [64, 1024], 128, MaskSpec("causal"), "unit", seed=1)
    for row in r.rows:
        assert row.unscaled.magnitude.std == pytest.approx(1 / math.sqrt(row.d_k), rel=0.10)
        assert row.scaled.magnitude.std == pytest.approx(1 / row.d_k, rel=0.10)
    assert "unit-variance entries" in r.conclusion


def test_json_contract():
    result = runner.invoke(command, ["compare-scaling", "--d-k", "64,256", "--T", "128", "--backend", "numpy", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["T"] == 128 and doc["distribution"] == "normal" and doc["mask"] == "causal"
    assert [row["d_k"] for row in doc["rows"]] == [64, 256]
    keys = {"std", "mean_abs", "max_abs", "mean_max_weight", "mean_entropy", "mean_effective_positions",
            "share_rows_over_99", "mean_jacobian_norm", "median_jacobian_norm", "expected_std"}
    for row in doc["rows"]:
        for side in ("unscaled", "scaled"):
            assert keys <= set(row[side]), keys - set(row[side])
    assert isinstance(doc["conclusion"], str) and doc["conclusion"]


def test_table_says_the_distribution():
    result = runner.invoke(command, ["compare-scaling", "--d-k", "64", "--T", "64", "--backend", "numpy", "--dist", "unit"])
    assert result.exit_code == 0, result.output
    assert "unit-variance" in result.output and "--dist normal" in result.output


def test_plot_is_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "scaling.png"
    result = runner.invoke(command, ["compare-scaling", "--d-k", "64,256", "--T", "128", "--backend", "numpy",
                                     "--plot", str(path)])
    assert result.exit_code == 0, result.output
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert 20_000 < len(data) < 2_000_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 600 and height >= 600


@pytest.mark.parametrize("text", ["", ",", "0", "64,0", "-64", "64,abc", "64,,256", "6.4"])
def test_bad_d_k_lists(text):
    with pytest.raises(AndreaError):
        parse_d_k_list(text)


def _main_exit(args, capsys):
    with pytest.raises(SystemExit) as exc:
        andrea_cli.cli.main(args)
    err = capsys.readouterr().err
    return exc.value.code, err


@pytest.mark.parametrize("args", [
    ["--d-k", ""], ["--d-k", "0"], ["--d-k", "64,abc"], ["--d-k=-8"],
    ["--mask", "window:0"], ["--mask", "window:x"], ["--dist", "sphere"], ["--T", "0"],
])
def test_bad_arguments_exit_2_with_one_line(args, capsys):
    code, err = _main_exit(["compare-scaling", "--backend", "numpy", "--T", "16", *args], capsys)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err


def test_plot_without_matplotlib_names_the_extra(monkeypatch, tmp_path, capsys):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    code, err = _main_exit(["compare-scaling", "--T", "16", "--backend", "numpy", "--plot", str(tmp_path / "p.png")], capsys)
    assert code == 2 and 'pip install "andrea[plot]"' in err


@pytest.mark.parametrize("W", [1, 3, 7])
def test_window_mask_numpy_path_against_loops(W):
    rng = np.random.default_rng(W)
    q, k, v = (rng.standard_normal((2, 9, 5)).astype(np.float32) for _ in range(3))
    spec = parse_mask(f"window:{W}")
    out = NumpyBackend().attention(q, k, v, mask=spec, scaled=True)
    np.testing.assert_allclose(out.output, attention_loops(q, k, v, spec), rtol=1e-5, atol=1e-6)
    weights = out.weights
    i, j = np.indices((9, 9))
    assert (weights[:, (j > i) | (i - j >= W)] == 0).all()
    assert (weights[:, (j <= i) & (i - j < W)] > 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1, rtol=1e-6)


def test_backward_pass_measures_vanishing_gradients(report):
    """Unscaled, the typical row's dQ collapses and most rows pass back almost nothing as d_k grows."""
    for row in report.rows:
        u, s = row.gradients["unscaled"], row.gradients["scaled"]
        assert u.quiet_rows > s.quiet_rows
    last = report.rows[-1].gradients
    assert last["unscaled"].median_row_dq_norm < 0.1 * last["scaled"].median_row_dq_norm
    assert last["unscaled"].quiet_rows > 0.5
    assert f"{last['unscaled'].dq_norm:.3g}" in report.conclusion and "backward pass" in report.conclusion


def test_backward_kernels_measure_what_numpy_measures(cpu_backend):
    args = ([16, 256], 48, MaskSpec("causal"), "normal")
    kernels = compare_scaling(cpu_backend(), *args, seed=2)
    numpy = compare_scaling(NumpyBackend(), *args, seed=2)
    for a, b in zip(kernels.rows, numpy.rows):
        for which in ("unscaled", "scaled"):
            assert a.gradients[which].dq_norm == pytest.approx(b.gradients[which].dq_norm, rel=1e-5)
            assert a.gradients[which].dk_norm == pytest.approx(b.gradients[which].dk_norm, rel=1e-5)
