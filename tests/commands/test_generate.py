"""`andrea generate` through the CLI and the API: generation equals one causal pass to rounding
(and the float64 equation within verify's bound), the unmasked pass does not, the kernels are named;
bad options are one line and exit 2; an edited copy whose merge drops a slice is caught."""

import json

import numpy as np
import pytest

import andrea_cli
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.reference import attention


def test_generation_is_the_causal_pass_and_not_the_unmasked_one(cli):
    doc = cli.json("generate", "--T", "150", "--d-k", "16", "--backend", "cpu")
    verdict = doc["generation_vs_causal"]
    assert verdict["agrees"] and verdict["max_abs_diff"] < 1e-5
    assert verdict["generation_error_over_bound"] <= 1 and verdict["causal_pass_error_over_bound"] <= 1
    unmasked = np.array(doc["unmasked_vs_generation"]["per_position"])
    # the first position saw 149 future keys in the unmasked pass; the last sees every key either way
    assert unmasked[0] > 0.1 and unmasked[-1] < 1e-5
    assert doc["kernels"] == {"append": "kv_append_kernel1", "decode": "attention_decode_kernel1",
                              "merge": "attention_decode_merge_kernel1", "pass": "attention_fused_kernel2"}
    assert [s["keys"] for s in doc["steps"]] == list(range(1, 151))
    assert doc["steps"][-1]["bytes_read"] == 150 * 32 * 4  # K and V rows, float32


def test_the_api_output_is_the_equation_row_by_row():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((40, 8), dtype=np.float32) for _ in range(3))
    r = andrea_cli.generate(q, k, v, backend="cpu", precision="bf16")
    assert r.output.shape == (40, 8) and r.report["precision"] == "bf16"
    assert r.report["kernels"]["decode"] == "attention_decode_kernel2"
    # against float64 on the exact inputs: the bf16 cache's rounding, no more
    np.testing.assert_allclose(r.output, attention(q[None], k[None], v[None], MaskSpec("causal"))[0], atol=2e-2)


def test_the_screen_names_the_verdicts_at_80_columns(run_main, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main("generate", "--T", "64", "--d-k", "8", "--backend", "cpu", "--mask", "window:9")
    assert code == 0
    text = " ".join(out.split())
    assert "the same, max |difference|" in text and "one unmasked pass instead" in text
    assert "attention_decode_kernel1" in text and "not a GPU figure" in text
    assert max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize("args, blamed", [
    (("--mask", "none"), "--mask none"),
    (("--backend", "numpy"), "--backend cuda or cpu"),
    (("--d-k", "130"), "--d-k"),
    (("--precision", "bf16", "--d-k", "7"), "--d-k must be even"),
    (("--T", "0"), "--T"),
])
def test_bad_options_are_one_line(run_main, args, blamed):
    code, _, err = run_main("generate", "--backend", "cpu", *args)
    assert code == 2 and blamed in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow  # a CPU build of the broken copy
def test_a_merge_that_drops_a_slice_is_not_the_same(cli, tmp_path, quick_builds):
    real = packaged_kernel_path().read_text()
    old = "for (int s = 0; s < splits; ++s) o += expf("
    assert real.count(old) == 1
    broken = tmp_path / "broken.cu"
    broken.write_text(real.replace(old, "for (int s = 0; s < splits - 1; ++s) o += expf("))
    result = cli("generate", "--T", "200", "--d-k", "16", "--backend", "cpu", "--kernel", broken, "--json")
    assert result.exit_code == 0, result.output
    assert not json.loads(result.stdout)["generation_vs_causal"]["agrees"]


def test_a_size_beside_files_must_be_theirs(run_main, tmp_path):
    import numpy as np

    paths = []
    for name in "qkv":
        paths += [f"--{name}", str(tmp_path / f"{name}.npy")]
        np.save(tmp_path / f"{name}.npy", np.ones((8, 4), np.float32))
    code, _, err = run_main("generate", "--backend", "cpu", *paths, "--T", "9")
    assert code == 2 and "--T 9 disagrees with the input files (8)" in err and len(err.strip().splitlines()) == 1, err
