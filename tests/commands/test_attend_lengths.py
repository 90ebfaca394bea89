"""`andrea attend` with L queries against S keys (--T-q/--T-k, or --q/--k/--v files of
different lengths): the output against a float64 computation written here from the definition
(bottom-right causal: query i sees keys 0..i + S - L), the JSON's sizes and shapes, the screen at
80 columns, and the one-line errors."""

import numpy as np
import pytest

from andrea_cli.inputs import random_qkv

NUMPY = ("--backend", "numpy")
CPU = ("--backend", "cpu")


def expected(q, k, v, mask: str) -> np.ndarray:
    """softmax(Q·K^T / sqrt(d_k) + hidden -inf) · V in float64, the mask built from its
    definition (not from MaskSpec): the queries are the last L of S positions."""
    L, S = q.shape[0], k.shape[0]
    s = q.astype(np.float64) @ k.astype(np.float64).T / np.sqrt(q.shape[1])
    i, j = np.arange(L)[:, None], np.arange(S)[None, :]
    if mask == "causal":
        s = np.where(j <= i + (S - L), s, -np.inf)
    out = np.zeros((L, v.shape[1]))
    for row in range(L):
        if np.isfinite(s[row]).any():
            e = np.exp(s[row] - s[row].max())
            out[row] = e / e.sum() @ v.astype(np.float64)
    return out


def save_files(tmp_path, L: int, S: int, d_k: int = 8, d_v: int = 5, seed: int = 1):
    rng = np.random.default_rng(seed)
    arrays = {"q": rng.standard_normal((L, d_k)), "k": rng.standard_normal((S, d_k)),
              "v": rng.standard_normal((S, d_v))}
    flags = []
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a.astype(np.float32))
        flags += [f"--{name}", tmp_path / f"{name}.npy"]
    return {name: a.astype(np.float32) for name, a in arrays.items()}, flags


@pytest.mark.parametrize("L, S", [(5, 37), (37, 5), (1, 40)])
@pytest.mark.parametrize("mask", ["causal", "none"])
def test_files_of_different_lengths_match_the_definition(cli, tmp_path, L, S, mask):
    x, flags = save_files(tmp_path, L, S)
    out = tmp_path / "o.npy"
    for backend in (NUMPY, CPU):
        doc = cli.json("attend", *flags, "--mask", mask, "--out", out, *backend)
        assert (doc["T"], doc["L"], doc["S"]) == (L, L, S)
        assert doc["shapes"] == {"q": [L, 8], "k": [S, 8], "v": [S, 5], "scores": [L, S], "weights": [L, S],
                                 "output": [L, 5]}
        np.testing.assert_allclose(np.load(out), expected(x["q"], x["k"], x["v"], mask), rtol=1e-5, atol=2e-6)
        blind = max(L - S, 0) if mask == "causal" else 0
        assert doc["rows_seeing_no_key"] == blind
        assert doc["row_sums"]["max_abs_dev"] < 1e-6  # over the rows that see a key
        assert doc["hidden_weight_max"] in (0.0, None)
        if backend == CPU:  # the run's own check of its sampled rows, L against S
            assert doc["check"]["agrees"], doc["check"]


def test_random_lengths_and_the_fused_kernel(cli, tmp_path):
    """--T-q/--T-k draw q (L, d_k), k and v (S, d): the same draws random_qkv makes; staged and
    fused agree with the definition, on L < S and L > S."""
    out = tmp_path / "o.npy"
    for L, S in ((20, 70), (70, 20)):
        x = random_qkv(L, 16, 16, 3, S=S)
        want = expected(x.q, x.k, x.v, "causal")
        for fused in ((), ("--fused",)):
            doc = cli.json("attend", "--T-q", L, "--T-k", S, "--d-k", 16, "--seed", 3, "--out", out, *fused, *CPU)
            assert (doc["L"], doc["S"], doc["shapes"]["k"]) == (L, S, [S, 16])
            np.testing.assert_allclose(np.load(out), want, rtol=1e-5, atol=2e-6)


def test_bf16_kernels_take_L_against_S(cli, tmp_path):
    """--precision bf16 (kernel5 in the CPU build) on L < S and L > S: within bf16's rounding of
    the definition (8 significant bits of Q, K, V and P; fp32 sums)."""
    out = tmp_path / "o.npy"
    for L, S in ((3, 70), (70, 3)):
        x = random_qkv(L, 64, 64, 5, S=S)
        doc = cli.json("attend", "--T-q", L, "--T-k", S, "--d-k", 64, "--seed", 5, "--fused", "--precision", "bf16",
                       "--out", out, *CPU)
        assert (doc["L"], doc["S"], doc["precision"]) == (L, S, "bf16")
        np.testing.assert_allclose(np.load(out), expected(x.q, x.k, x.v, "causal"), atol=2e-2)


def test_T_sets_both_and_T_q_or_T_k_one(cli):
    assert [cli.json("attend", *args, "--d-k", 4, *NUMPY)["S"] for args in
            (("--T", 12), ("--T", 12, "--T-q", 3), ("--T-k", 9))] == [12, 12, 9]
    doc = cli.json("attend", "--T", 12, "--T-q", 3, "--d-k", 4, *NUMPY)
    assert (doc["L"], doc["S"]) == (3, 12)
    square = cli.json("attend", "--T", 12, "--d-k", 4, *NUMPY)  # L = S: the inputs are the square run's
    assert square["magnitude"] == cli.json("attend", "--T-q", 12, "--T-k", 12, "--d-k", 4, *NUMPY)["magnitude"]


def test_screen_names_L_S_and_where_the_queries_sit(cli):
    import os

    os.environ["COLUMNS"] = "80"
    try:
        result = cli("attend", "--T-q", 24, "--T-k", 8, "--d-k", 16, *NUMPY)
    finally:
        os.environ["COLUMNS"] = "120"
    assert result.exit_code == 0, result.output
    text = result.output
    for words in ("L=24 S=8", "(bottom-right)", "queries 0..15 see no key", "24 × 8 = 192 scores per head",
                  "rows that see no key"):
        assert words in text, words
    assert max(len(line) for line in text.splitlines()) <= 80


def test_help_says_bottom_right_and_names_the_sdpa_function(cli):
    text = " ".join(cli("attend", "--help").output.split())
    for words in ("--T-q", "--T-k", "bottom-right", "scaled_dot_product_attention", "top-left"):
        assert words in text, words


def test_bad_lengths_are_one_line(run_main, tmp_path):
    _, flags = save_files(tmp_path, 4, 9)
    np.save(tmp_path / "short.npy", np.ones((3, 5), np.float32))
    cases = [
        (["--T-q", 0], "--T-q must be >= 1"),
        (["--T-k", -2], "--T-k must be >= 1"),
        ([*flags, "--T-k", 7], "--T-k 7 disagrees with the input files (9)"),
        ([*flags[:4], "--v", tmp_path / "short.npy"], "K and V need the same T"),
        (["--T-q", 4, "--preset", "andrea-120m"], "drop --T-q/--T-k"),
    ]
    for args, words in cases:
        code, _, err = run_main("attend", *args)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (args, err)


@pytest.mark.slow  # matplotlib's figures: ~6 s on a busy 2-core machine
def test_plot_draws_L_rows_against_S_keys(cli, tmp_path):
    """The (L, S) weights drawn, rows that see no key included (no warning from their log(0))."""
    import warnings

    for L, S in ((6, 20), (20, 6)):
        path = tmp_path / f"w{L}.png"
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            result = cli("attend", "--T-q", L, "--T-k", S, "--d-k", 4, "--plot", path, *NUMPY)
        assert result.exit_code == 0, result.output
        assert path.stat().st_size > 10_000


def flavoured(q, k, v, left: int, right: int, sinks: int, slope: float) -> np.ndarray:
    """The definition with a mask flavour, written here: query i (position p = i + S - L) sees
    keys p - left .. p + right and keys 0..sinks-1 (never past p + right), ALiBi's -slope·(p - j)
    added to its scaled scores."""
    L, S = q.shape[0], k.shape[0]
    s = q.astype(np.float64) @ k.astype(np.float64).T / np.sqrt(q.shape[1])
    p, j = np.arange(L)[:, None] + (S - L), np.arange(S)[None, :]
    s = np.where((j <= p + right) & ((p - j <= left) | (j < sinks)), s - slope * (p - j), -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True) @ v.astype(np.float64)


@pytest.mark.parametrize("mask, terms", [("window:5,70", (5, 70, 0, 0.0)), ("sinks:65,window:10", (9, 0, 65, 0.0)),
                                         ("alibi", (10**6, 0, 0, 2.0 ** -8))])
def test_bf16_kernels_take_every_mask_flavour(cli, tmp_path, mask, terms):
    """--precision bf16 with a two-sided window, sinks and ALiBi (one head: m = 2^-8), L < S:
    within bf16's rounding of the definition."""
    out, (L, S) = tmp_path / "o.npy", (70, 150)
    x = random_qkv(L, 64, 64, 5, S=S)
    cli.json("attend", "--T-q", L, "--T-k", S, "--d-k", 64, "--seed", 5, "--fused", "--precision", "bf16",
             "--mask", mask, "--out", out, *CPU)
    np.testing.assert_allclose(np.load(out), flavoured(x.q, x.k, x.v, *terms), atol=2e-2)
