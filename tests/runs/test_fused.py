"""`attend --fused` (runs/fused.py): the single-head JSON contract with a sample of rows, the
same output as the staged path, what it refuses; and `--precision bf16` on the tensor-core kernel
(JSON and tables say the precision, bad combinations are one-line exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from andrea_cli.masks import MaskSpec
from andrea_cli.verification import bf16_attention


def test_attend_fused_bf16_json_says_the_precision_and_matches_the_reference(cli, tmp_path):
    out = tmp_path / "o.npy"
    doc = cli.json("attend", "--fused", "--precision", "bf16", "--backend", "cpu", "--T", 70, "--d-k", 64,
                   "--mask", "window:40", "--out", out, "--sample-rows", 4)
    assert doc["precision"] == "bf16" and doc["kernel"] == "attention_fused_kernel5_d64"  # the default
    assert set(doc["timings_ms"]) >= {"to_bf16", "fused", "total"} and doc["timings_ms"]["fused"] > 0
    assert any("bf16" in n for n in doc["notices"])
    from andrea_cli.inputs import random_qkv

    qkv = random_qkv(70, 64, 64, 0)
    want, tol = bf16_attention.reference_and_tol(qkv.q[None], qkv.k[None], qkv.v[None], MaskSpec("window", 40), True)
    assert (np.abs(np.load(out) - want[0]) <= tol[0]).all()
    fp32 = cli.json("attend", "--fused", "--backend", "cpu", "--T", 8, "--d-k", 64)
    assert fp32["precision"] == "fp32" and fp32["kernel"] == "attention_fused_kernel3_d64"  # the entry point that ran


def test_attend_bf16_table_names_kernel_and_conversion(cli):
    result = cli("attend", "--fused", "--precision", "bf16", "--backend", "cpu", "--T", 16, "--d-k", 128)
    assert result.exit_code == 0, result.output
    assert "attention_fused_kernel5_d128, bf16" in result.output and "to_bf16" in result.output


@pytest.mark.parametrize("args, match", [
    (["--precision", "bf16"], "add --fused"),
    (["--fused", "--precision", "fp16"], "not one of fp32, bf16"),
    (["--fused", "--precision", "bf16", "--d-k", "80"], "d_k = d_v = 64 or 128"),
    (["--fused", "--precision", "bf16", "--d-k", "64", "--d-v", "128"], "d_k = d_v = 64 or 128"),
])
def test_bad_precision_is_one_line_exit_2(run_main, args, match):
    code, _, err = run_main("attend", "--backend", "cpu", "--T", "8", *args)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1, err


def test_attend_fused_json_keeps_the_single_head_contract():
    from typer.testing import CliRunner

    from andrea_cli.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["attend", "--fused", "--backend", "cpu", "--T", "40", "--d-k", "8",
                                 "--sample-rows", "5", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["fused"] is True and doc["sampled_rows"] == 5 and doc["backend"] == "cpu"
    assert any("sample" in n for n in doc["notices"])
    assert doc["sample"]["row_sums"]["max_abs_dev"] < 1e-6 and doc["sample"]["output_max_abs_err"] < 1e-5
    assert doc["statistics_from"] == "a sample of 5 rows" and doc["row_sums"] == doc["sample"]["row_sums"]
    for key in ("magnitude", "softmax", "shapes"):
        assert doc[key] is not None
    assert set(doc["timings_ms"]) >= {"scores", "softmax", "av", "total", "fused"}
    assert doc["timings_ms"]["scores"] is None and doc["timings_ms"]["fused"] > 0

    without_sample = json.loads(runner.invoke(app, ["attend", "--fused", "--backend", "cpu", "--T", "8", "--json"]).output)
    assert without_sample["row_sums"] is None and without_sample["statistics_from"] is None


def test_attend_fused_refuses_the_numpy_path_and_auto_runs_the_kernel():
    from typer.testing import CliRunner

    from andrea_cli.backends.cuda import cuda_availability
    from andrea_cli.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["attend", "--fused", "--backend", "numpy", "--T", "8"])
    assert result.exit_code == 2 and "cuda or cpu" in result.output
    if not cuda_availability().ok:
        doc = json.loads(runner.invoke(app, ["attend", "--fused", "--T", "8", "--json"]).output)
        assert doc["backend"] == "cpu" and any("--backend cpu" in n or "cpu" in n for n in doc["notices"])


def test_attend_fused_cpu_matches_staged(tmp_path, cpu_device):
    from typer.testing import CliRunner

    from andrea_cli.cli import app

    runner = CliRunner()
    fused, staged = tmp_path / "fused.npy", tmp_path / "staged.npy"
    for extra, path in ((["--fused"], fused), ([], staged)):
        result = runner.invoke(app, ["attend", *extra, "--backend", "cpu", "--T", "21", "--d-k", "16",
                                     "--mask", "window:4", "--out", str(path), "--json"])
        assert result.exit_code == 0, result.output
    np.testing.assert_allclose(np.load(fused), np.load(staged), rtol=1e-4, atol=1e-5)


def test_sample_rows_needs_fused_and_fused_refuses_save_weights(tmp_path):
    from typer.testing import CliRunner

    from andrea_cli.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["attend", "--backend", "numpy", "--T", "8", "--sample-rows", "3"])
    assert result.exit_code == 2 and "--fused" in result.output
    result = runner.invoke(app, ["attend", "--fused", "--backend", "cpu", "--T", "8",
                                 "--save-weights", str(tmp_path / "w.npy")])
    assert result.exit_code == 2 and "--save-weights" in result.output
