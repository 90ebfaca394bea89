"""`andrea attend` through the CLI: the tables, the JSON contract, files in and out, a copy of the
kernel file, and every bad input. (attend --fused: tests/runs/test_fused.py; the layer:
tests/runs/test_layer.py.)"""

import math
from pathlib import Path

import numpy as np
import pytest

from andrea_cli import reference
from andrea_cli.masks import MaskSpec

NUMPY = ("--backend", "numpy")


def test_tables_show_every_section(cli):
    result = cli("attend", "--T", 64, "--d-k", 16, *NUMPY)
    assert result.exit_code == 0, result.output
    for text in ("Shapes", "(64, 16)", "(64, 64)", "Score magnitudes", "row sums", "Timings", "softmax", "4,096 scores per head"):
        assert text in result.output


def test_default_run_is_andrea_120m_head(cli):
    doc = cli.json("attend", *NUMPY)
    assert (doc["T"], doc["d_k"], doc["d_v"], doc["mask"], doc["scaled"]) == (1024, 64, 64, "causal", True)
    assert doc["shapes"]["scores"] == [1024, 1024]
    assert doc["scale"] == 1 / 8


def test_json_contract(cli):
    doc = cli.json("attend", "-T", 50, "--d-k", 32, "--d-v", 8, *NUMPY)
    for key in ("backend", "device", "T", "d_k", "d_v", "mask", "scale", "shapes", "row_sums", "magnitude", "softmax", "timings_ms"):
        assert key in doc
    assert doc["shapes"] == {"q": [50, 32], "k": [50, 32], "v": [50, 8], "scores": [50, 50], "weights": [50, 50], "output": [50, 8]}
    assert set(doc["row_sums"]) >= {"min", "max", "max_abs_dev"}
    for side in ("unscaled", "scaled"):
        assert set(doc["magnitude"][side]) >= {"mean_abs", "std", "max_abs"}
    assert set(doc["softmax"]) >= {"mean_max_weight", "mean_entropy"}
    assert set(doc["timings_ms"]) >= {"scores", "scale", "mask", "softmax", "av", "total"}
    assert doc["row_sums"]["max_abs_dev"] < 1e-6
    assert doc["hidden_weight_max"] == 0.0
    # the scaled magnitudes are the unscaled ones divided by sqrt(d_k)
    un, sc = doc["magnitude"]["unscaled"], doc["magnitude"]["scaled"]
    assert math.isclose(sc["std"], un["std"] / math.sqrt(32), rel_tol=1e-5)


def test_no_scale_and_no_mask_skip_their_stages(cli):
    doc = cli.json("attend", "-T", 20, "--d-k", 4, "--no-scale", "--mask", "none", *NUMPY)
    assert "scale" not in doc["timings_ms"] and "mask" not in doc["timings_ms"]
    assert doc["hidden_weight_max"] is None and doc["scale"] == 1.0


def test_seed_changes_and_repeats_the_inputs(cli):
    a, b, c = (cli.json("attend", "-T", 16, "--d-k", 4, "--seed", s, *NUMPY) for s in (1, 1, 2))
    assert a["magnitude"] == b["magnitude"] != c["magnitude"]


def test_files_in_output_out(cli, tmp_path):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((9, 5)).astype(np.float32) for _ in range(3))
    np.savez(tmp_path / "qkv.npz", q=q, k=k, v=v)
    out, weights = tmp_path / "o.npy", tmp_path / "w.npy"
    doc = cli.json("attend", "--qkv", tmp_path / "qkv.npz", "--out", out, "--save-weights", weights, *NUMPY)
    assert doc["T"] == 9 and "file" in doc["source"]
    expected = reference.attention(q[None], k[None], v[None], MaskSpec("causal"))[0]
    saved = np.load(out)
    assert saved.dtype == np.float32 and saved.shape == (9, 5)
    np.testing.assert_allclose(saved, expected, rtol=1e-5, atol=1e-6)
    assert np.load(weights).shape == (9, 9)
    for name, a in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", a)
    doc2 = cli.json("attend", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy", *NUMPY)
    assert doc2["magnitude"] == doc["magnitude"]
    assert list(tmp_path.glob(".*tmp")) == []  # no temporary file left behind


def _bad(tmp_path: Path) -> dict[str, list]:
    """Each bad-input case: the arguments, and a word the one-line error must contain."""
    good = np.ones((4, 3), np.float32)
    np.save(tmp_path / "good.npy", good)
    np.save(tmp_path / "three_d.npy", np.ones((2, 4, 3), np.float32))
    np.save(tmp_path / "wide.npy", np.ones((4, 5), np.float32))
    np.save(tmp_path / "long.npy", np.ones((6, 3), np.float32))
    np.save(tmp_path / "nan.npy", np.array([[1, np.nan, 0]] * 4, np.float32))
    np.save(tmp_path / "inf.npy", np.array([[1, np.inf, 0]] * 4, np.float32))
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}] * 12, dtype=object).reshape(4, 3), allow_pickle=True)
    (tmp_path / "text.npy").write_text("not numpy at all")
    (tmp_path / "empty.npy").write_bytes(b"")
    (tmp_path / "data.csv").write_text("1,2,3\n")
    np.savez(tmp_path / "partial.npz", q=good, k=good)
    g = str(tmp_path / "good.npy")
    files = lambda q: ("--q", q, "--k", g, "--v", g)  # noqa: E731
    return {
        "missing file": [[*files(tmp_path / "absent.npy")], "no such file"],
        "not npy": [[*files(tmp_path / "data.csv")], ".npy"],
        "garbage npy": [[*files(tmp_path / "text.npy")], "not a .npy file, it does not start with NumPy's header"],
        "empty npy": [[*files(tmp_path / "empty.npy")], "the file is empty"],
        "seed negative": [["-T", 4, "--seed", -1], "--seed -1: a seed is a whole number >= 0"],
        "huge d_k blames --d-k": [["-T", 16, "--d-k", 1_000_000_000], "use a smaller --d-k"],
        "huge fused T blames --T": [["-T", 100_000_000, "--fused", "--backend", "numpy"], "use a smaller --T (or --d-k)"],
        "fused with show-weights": [["-T", 4, "--fused", "--show-weights"], "--show-weights draws the T×T weights"],
        "preset with show-weights": [["--preset", "andrea-120m", "--show-weights"],
                                     "--show-weights works on one head: drop --show-weights"],
        "pickled objects": [[*files(tmp_path / "objects.npy")], "pickl"],
        "3-D array": [[*files(tmp_path / "three_d.npy")], "2-D"],
        "d_k disagrees": [[*files(tmp_path / "wide.npy")], "d_k"],
        "K and V rows disagree": [["--q", g, "--k", g, "--v", tmp_path / "long.npy"], "K and V need the same T"],
        "NaN": [[*files(tmp_path / "nan.npy")], "NaN"],
        "Inf": [[*files(tmp_path / "inf.npy")], "Inf"],
        "missing --v": [["--q", g, "--k", g], "--v"],
        "npz lacks v": [["--qkv", tmp_path / "partial.npz"], "v"],
        "T zero": [["--T", 0], "--T"],
        "d_k zero": [["--d-k", 0], "--d-k"],
        "d_v negative": [["--d-v", -3], "--d-v"],
        "too big": [["--T", 10_000_000], "GiB"],
        "out folder missing": [["-T", 4, "--out", tmp_path / "nowhere" / "o.npy"], "does not exist"],
        "bad mask": [["-T", 4, "--mask", "window:0"], "window"],
        "bad backend": [["-T", 4, "--backend", "tpu"], "backend"],
        "T disagrees with files": [[*files(g), "--T", 7], "disagrees"],
    }


def test_every_bad_input_is_one_line_and_exit_2(run_main, tmp_path):
    for case, (args, word) in _bad(tmp_path).items():
        code, out, err = run_main("attend", *args)
        assert code == 2, case
        assert out == "", case
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (case, err)
        assert word.lower() in lines[0].lower(), (case, lines[0])
        assert "Traceback" not in err


def test_usage_errors_are_one_line_too(run_main):
    for args in (["attend", "--T", "many"], ["attend", "--frobnicate"]):
        code, _, err = run_main(*args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: ")


def test_a_huge_T_is_refused_before_anything_is_drawn(run_main, monkeypatch):
    import andrea_cli.commands.attend

    def must_not_run(*args, **kwargs):
        raise AssertionError("inputs were drawn before the size was checked")

    monkeypatch.setattr(andrea_cli.commands.attend, "random_qkv", must_not_run)
    for args in (["--T", 2_000_000], ["--T", 10**9, "--fused"], ["--d-k", 10**9, "--fused"]):
        code, _, err = run_main("attend", *args, "--backend", "cpu")
        assert code == 2 and err.startswith("error: "), (args, err)


def test_failed_run_leaves_existing_out_untouched(run_main, tmp_path):
    out = tmp_path / "o.npy"
    np.save(out, np.arange(3.0))
    before = out.read_bytes()
    code, _, _ = run_main("attend", "--T", 4, "--d-k", 0, "--out", out)
    assert code == 2 and out.read_bytes() == before


def test_kernel_copy_missing_a_kernel_is_refused(run_main, tmp_path):
    from andrea_cli.kernel_file import packaged_kernel_path

    copy = tmp_path / "mine.cu"
    copy.write_text(packaged_kernel_path().read_text().replace("softmax_kernel2(", "softmax_kernel_two("))
    code, _, err = run_main("attend", "-T", 8, "--backend", "cpu", "--kernel", copy)
    assert code == 2 and "softmax_kernel2" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_main("attend", "-T", 8, "--backend", "cpu", "--kernel", tmp_path / "absent.cu")
    assert code == 2 and "no such file" in err


def test_cpu_backend_attend_matches_numpy(cli):
    cpu = cli.json("attend", "-T", 45, "--d-k", 12, "--d-v", 7, "--mask", "window:9", "--backend", "cpu")
    ref = cli.json("attend", "-T", 45, "--d-k", 12, "--d-v", 7, "--mask", "window:9", "--backend", "numpy")
    assert cpu["backend"] == "cpu" and cpu["hidden_weight_max"] == 0.0
    for side in ("unscaled", "scaled"):
        for key, value in ref["magnitude"][side].items():
            assert math.isclose(cpu["magnitude"][side][key], value, rel_tol=1e-5)
    assert math.isclose(cpu["softmax"]["mean_entropy"], ref["softmax"]["mean_entropy"], rel_tol=1e-5)


def test_kernel_copy_without_c_linkage_is_refused(run_main, tmp_path):
    from andrea_cli.kernel_file import packaged_kernel_path

    copy = tmp_path / "mine.cu"
    copy.write_text(packaged_kernel_path().read_text().replace('extern "C" __global__ void mask_kernel1', "__global__ void mask_kernel1"))
    code, _, err = run_main("attend", "-T", 8, "--backend", "cpu", "--kernel", copy)
    assert code == 2 and "mask_kernel1" in err


def test_the_mask_stages_corner_is_the_scaled_scores_with_minus_inf(cli):
    """The JSON's masked_corner is the mask kernel's output: Q·K^T / sqrt(d_k) where a key is
    visible (against float64), "-inf" where it is hidden, on the causal and the window mask."""
    from andrea_cli.inputs import random_qkv

    qkv = random_qkv(12, 4, 4, 0)
    want = (qkv.q.astype(np.float64) @ qkv.k.astype(np.float64).T / 2.0)[:8, :8]
    for mask, hidden in (("causal", lambda i, j: j > i), ("window:3", lambda i, j: j > i or j < i - 2)):
        doc = cli.json("attend", "-T", 12, "--d-k", 4, "--backend", "numpy", "--mask", mask)
        got = doc["masked_corner"]
        for i in range(8):
            for j in range(8):
                if hidden(i, j):
                    assert got[i][j] == "-inf" and doc["corner"][i][j] == 0, (mask, i, j)
                else:
                    assert abs(got[i][j] - want[i, j]) < 1e-5, (mask, i, j)


def _mask_files(tmp_path):
    rng = np.random.default_rng(5)
    keep = rng.random((24, 24)) < 0.5
    keep[:2] = False  # two rows that see no key
    bias = (-0.25 * np.abs(np.arange(24)[:, None] - np.arange(24)[None])).astype(np.float32)
    nan = bias.copy()
    nan[3, 4] = np.nan
    for name, array in (("keep", keep), ("bias", bias), ("nan", nan), ("short", keep[:5]),
                        ("text", np.array(["a"] * 24 * 24).reshape(24, 24))):
        np.save(tmp_path / f"{name}.npy", array)
    return keep, bias


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_mask_file_bool_and_bias_match_the_reference(cli, tmp_path, backend):
    from andrea_cli.masks import mask_array

    keep, bias = _mask_files(tmp_path)
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((24, 8)).astype(np.float32) for _ in range(3))
    for name, array in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", array)
    for mask, array in (("keep", keep), ("bias", bias)):
        out = tmp_path / f"out_{mask}.npy"
        doc = cli.json("attend", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy",
                       "--mask-file", tmp_path / f"{mask}.npy", "--backend", backend, "--out", out)
        exact = reference.attention(q[None], k[None], v[None], mask_array(array, 24, 24))[0]
        assert np.abs(np.load(out) - exact).max() < 1e-5
        assert doc["mask"] == ("array:bool" if mask == "keep" else "array:bias")
    assert (np.load(tmp_path / "out_keep.npy")[:2] == 0).all()  # the rows that see no key: zeros
    assert not any("see no key" in n for n in doc["notices"])  # the bias hides no whole row
    doc = cli.json("attend", "-T", 24, "--d-k", 8, "--mask-file", tmp_path / "keep.npy", "--backend", backend)
    assert any("2 of 24 rows see no key" in n for n in doc["notices"])


def test_mask_file_fused_runs_kernel3_and_names_it(cli, run_main, tmp_path):
    """d 64: the register-tiled kernel3 reads the array (its bias tile), the screen and JSON say so."""
    from andrea_cli.masks import mask_array

    rng = np.random.default_rng(7)
    bias = np.where(rng.random((70, 70)) < 0.3, -np.inf, rng.standard_normal((70, 70))).astype(np.float32)
    np.save(tmp_path / "bias.npy", bias)
    q, k, v = (rng.standard_normal((70, 64)).astype(np.float32) for _ in range(3))
    for name, array in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", array)
    files = ("--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy",
             "--mask-file", tmp_path / "bias.npy", "--fused", "--backend", "cpu")
    out = tmp_path / "out.npy"
    doc = cli.json("attend", *files, "--out", out)
    assert doc["kernel"] == "attention_fused_kernel3_d64"
    exact = reference.attention(q[None], k[None], v[None], mask_array(bias, 70, 70))[0]
    assert np.abs(np.load(out) - exact).max() < 1e-5
    code, screen, _ = run_main("attend", *files)
    assert code == 0 and "ran: attention_fused_kernel3_d64" in screen


def test_mask_file_bad_inputs_are_one_line_and_exit_2(run_main, tmp_path):
    _mask_files(tmp_path)
    cases = {
        "short": (["--mask-file", tmp_path / "short.npy"], "shape (5, 24) is not (24, 24)"),
        "nan": (["--mask-file", tmp_path / "nan.npy"], "NaN"),
        "text": (["--mask-file", tmp_path / "text.npy"], "neither bool"),
        "fused": (["--mask-file", tmp_path / "keep.npy", "--fused"], "drop --fused"),
        "beside --mask": (["--mask-file", tmp_path / "keep.npy", "--mask", "none"], "drop one of them"),
        "missing": (["--mask-file", tmp_path / "nowhere.npy"], "no such file"),
    }
    for case, (args, words) in cases.items():
        code, out, err = run_main("attend", "-T", 24, "--d-k", 8, *args, "--backend", "numpy")
        lines = err.strip().splitlines()
        assert code == 2 and out == "" and len(lines) == 1, (case, err)
        assert words in lines[0], (case, lines[0])
