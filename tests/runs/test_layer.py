"""The multi-head layer: x -> projections -> heads -> attention -> concat -> W_O, against a
float64 reference, and `attend --d-model/--n-head/--preset` through the CLI."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from typer.testing import CliRunner

from andrea_cli import reference
from andrea_cli.backends.numpy_backend import NumpyBackend
from andrea_cli.cli import app
from andrea_cli.layer_inputs import W_O_STD, random_layer
from andrea_cli.masks import MaskSpec
from andrea_cli.runs.layer import concat_heads, layer_reference, run_layer, split_heads

runner = CliRunner()
ENV = {"COLUMNS": "120"}


def _relative_error(got, want) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("T,d_model,n_head", [(7, 12, 3), (32, 768, 12), (1, 4, 4), (5, 6, 1)])
@pytest.mark.parametrize("mask", ["causal", "none"])
@pytest.mark.parametrize("scaled", [True, False])
def test_layer_matches_the_float64_reference(T, d_model, n_head, mask, scaled):
    inputs = random_layer(T, d_model, seed=T + d_model)
    spec = MaskSpec(mask)
    report = run_layer(inputs, n_head, NumpyBackend(), spec, scaled=scaled)
    want = layer_reference(inputs.x, inputs.weights, n_head, spec, scaled)
    assert report.output.shape == (T, d_model) and report.output.dtype == np.float32
    # float32 projections on the host against float64 throughout: a few ulps of fp32.
    assert _relative_error(report.output, want) < 1e-5


def test_head_h_owns_columns_h_dk():
    a = np.arange(5 * 12, dtype=np.float32).reshape(5, 12)
    heads = split_heads(a, 3)  # (3, 5, 4)
    assert heads.shape == (3, 5, 4) and heads.flags.c_contiguous
    for h in range(3):
        np.testing.assert_array_equal(heads[h], a[:, h * 4:(h + 1) * 4])
    np.testing.assert_array_equal(concat_heads(heads), a)


def test_each_head_is_single_head_attention_on_its_slice():
    inputs = random_layer(9, 12, seed=3)
    spec = MaskSpec("causal")
    report = run_layer(inputs, 3, NumpyBackend(), spec, scaled=True)
    x = inputs.x.astype(np.float64)
    for h in range(3):
        cols = slice(4 * h, 4 * (h + 1))
        q, k, v = (x @ inputs.weights[n][:, cols].astype(np.float64) for n in ("w_q", "w_k", "w_v"))
        p = reference.softmax(reference.mask(reference.scale(reference.scores(q[None], k[None]), 4), spec))[0]
        np.testing.assert_allclose(report.weights[h], p, rtol=1e-4, atol=1e-6)


def test_invariants_per_head():
    report = run_layer(random_layer(33, 48, seed=1), 4, NumpyBackend(), MaskSpec("causal"), scaled=True)
    assert report.weights.shape == (4, 33, 33)
    for h in report.heads:
        assert h.weight_stats.row_sums.max_abs_dev < 1e-5
        assert h.weight_stats.hidden_weight_max == 0.0
        assert 0 < h.weight_stats.softmax.mean_max_weight <= 1
    assert (report.weights >= 0).all()
    assert np.all(np.triu(report.weights, k=1) == 0)


def test_initialisation_gives_scores_of_order_one():
    inputs = random_layer(64, 768, seed=0)
    assert abs(inputs.x.std() - 1) < 0.01
    assert abs(inputs.weights["w_q"].std() - 0.02) < 1e-3
    assert abs(inputs.weights["w_o"].std() - W_O_STD) < 1e-4
    report = run_layer(inputs, 12, NumpyBackend(), MaskSpec("none"), scaled=True)
    assert 0.1 < report.weight_stats.magnitude_scaled.std < 1.0


def _run(*args):
    return runner.invoke(app, ["attend", "--backend", "numpy", *args], env=ENV)


def test_cli_json_keeps_the_single_head_contract_and_adds_heads(tmp_path):
    single = _run("--T", "8", "--d-k", "4", "--json")
    layer = _run("--d-model", "12", "--n-head", "3", "--T", "8", "--json", "--out", str(tmp_path / "o.npy"))
    assert single.exit_code == 0 and layer.exit_code == 0, layer.output
    one, doc = json.loads(single.stdout), json.loads(layer.stdout)
    assert set(one) <= set(doc)
    assert doc["n_head"] == 3 and doc["d_model"] == 12 and doc["d_k"] == 4
    assert [h["head"] for h in doc["heads"]] == [0, 1, 2]
    assert doc["heads"][2]["columns"] == [8, 12]
    assert set(doc["heads"][0]) >= {"row_sums", "magnitude", "softmax", "hidden_weight_max"}
    assert doc["shapes"]["scores"] == [3, 8, 8] and doc["shapes"]["output"] == [8, 12]
    assert set(doc["layer_timings_ms"]) >= {"projections", "w_o", "attention", "total"}
    # The CLI draws x and the weights as random_layer does for the same seed.
    inputs = random_layer(8, 12, seed=0)
    want = layer_reference(inputs.x, inputs.weights, 3, MaskSpec("causal"))
    assert _relative_error(np.load(tmp_path / "o.npy"), want) < 1e-5


def test_cli_preset_and_table():
    result = _run("--preset", "andrea-120m", "--T", "16")
    assert result.exit_code == 0, result.output
    assert "d_model=768 n_head=12 d_k=64" in result.stdout
    assert "704:768" in result.stdout and "W_O" in result.stdout
    # one numbering: the header's heads are the table's, 0 .. 11 (as --head N counts them)
    assert "concat(head_0 .. head_11)" in result.stdout and "head_12" not in result.stdout
    rows = [line.split()[0] for line in result.stdout.splitlines() if ":" in line and line.split()[0].isdigit()]
    assert rows[0] == "0" and rows[-1] == "11", result.stdout


def test_cli_loads_x_and_weights(tmp_path):
    inputs = random_layer(6, 8, seed=2)
    np.save(tmp_path / "x.npy", inputs.x)
    np.savez(tmp_path / "w.npz", **inputs.weights)
    result = _run("--x", str(tmp_path / "x.npy"), "--weights", str(tmp_path / "w.npz"), "--n-head", "2",
                  "--mask", "none", "--out", str(tmp_path / "o.npy"))
    assert result.exit_code == 0, result.output
    want = layer_reference(inputs.x, inputs.weights, 2, MaskSpec("none"))
    assert _relative_error(np.load(tmp_path / "o.npy"), want) < 1e-5


def test_without_layer_flags_attend_is_single_head():
    doc = json.loads(_run("--T", "8", "--d-k", "4", "--json").stdout)
    assert "heads" not in doc and doc["shapes"]["scores"] == [8, 8]


def _bad_inputs(tmp_path) -> list[tuple[str, list[str]]]:
    w = random_layer(4, 8, seed=0).weights
    np.save(tmp_path / "x.npy", np.ones((4, 8), np.float32))
    np.savez(tmp_path / "missing.npz", w_q=w["w_q"], w_k=w["w_k"], w_v=w["w_v"])
    np.savez(tmp_path / "shape.npz", **{**w, "w_o": np.ones((8, 6), np.float32)})
    np.savez(tmp_path / "nan.npz", **{**w, "w_k": np.full((8, 8), np.nan, np.float32)})
    np.save(tmp_path / "flat.npy", np.ones(8, np.float32))
    np.save(tmp_path / "pickled.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with open(tmp_path / "pickled.npz", "wb") as f:
        pickle.dump(w, f)
    return [
        ("not divisible", ["--d-model", "12", "--n-head", "5"]),
        ("no array named w_o", ["--x", str(tmp_path / "x.npy"), "--weights", str(tmp_path / "missing.npz"), "--n-head", "2"]),
        ("must be (d_model, d_model)", ["--x", str(tmp_path / "x.npy"), "--weights", str(tmp_path / "shape.npz"), "--n-head", "2"]),
        ("expected a 2-D array", ["--x", str(tmp_path / "flat.npy"), "--n-head", "2"]),
        ("NaN", ["--x", str(tmp_path / "x.npy"), "--weights", str(tmp_path / "nan.npz"), "--n-head", "2"]),
        ("pickled", ["--x", str(tmp_path / "pickled.npy"), "--n-head", "2"]),
        ("unpickling", ["--d-model", "8", "--weights", str(tmp_path / "pickled.npz"), "--n-head", "2"]),
        ("pass --n-head", ["--x", str(tmp_path / "x.npy")]),
        ("pass one or the other", ["--d-model", "8", "--q", str(tmp_path / "x.npy")]),
        ("disagrees with --x", ["--x", str(tmp_path / "x.npy"), "--d-model", "16"]),
        ("disagrees with d_model / n_head", ["--d-model", "12", "--n-head", "3", "--d-k", "8"]),
        ("not a preset", ["--preset", "gpt-5"]),
        ("no such file", ["--x", str(tmp_path / "nope.npy"), "--n-head", "2"]),
    ]


def test_cli_bad_inputs_are_one_line_and_exit_2(tmp_path):
    for expected, args in _bad_inputs(tmp_path):
        result = _run(*args)
        assert result.exit_code == 2, (expected, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (expected, result.stderr)
        assert expected in lines[0], (expected, lines[0])
        assert result.stdout == ""
