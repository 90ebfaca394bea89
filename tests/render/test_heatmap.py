"""The terminal heatmap: pooling keeps the triangle, the diagonal and a window's band; the first
rows print as the course writes them; --show-weights draws through the CLI."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import andrea_cli.cli
from andrea_cli.backends.numpy_backend import NumpyBackend
from andrea_cli.render.heatmap import course_rows, pool
from andrea_cli.inputs import random_qkv
from andrea_cli.masks import parse_mask

runner = CliRunner()


def weights_for(mask: str, T: int = 256) -> np.ndarray:
    qkv = random_qkv(T, 16, 16, seed=3)
    out = NumpyBackend().attention(qkv.q[None], qkv.k[None], qkv.v[None], mask=parse_mask(mask), scaled=True)
    return out.weights[0]


def test_pool_max_and_mean_on_a_known_matrix():
    w = np.arange(16, dtype=np.float64).reshape(4, 4)
    np.testing.assert_array_equal(pool(w, 2, 2), [[5, 7], [13, 15]])
    np.testing.assert_array_equal(pool(w, 2, 2, how="mean"), [[2.5, 4.5], [10.5, 12.5]])
    np.testing.assert_array_equal(pool(w, 9, 9), w)  # never upsampled


def test_pool_uneven_blocks_cover_everything():
    w = np.zeros((37, 37))
    w[36, 36] = 1.0
    pooled = pool(w, 5, 5)
    assert pooled.shape == (5, 5) and pooled[-1, -1] == 1.0 and pooled.sum() == 1.0


def test_causal_pooled_is_lower_triangular_with_a_lit_diagonal():
    pooled = pool(weights_for("causal"), 32, 32)
    assert (np.triu(pooled, k=1) == 0).all()
    assert (np.diag(pooled) > 0).all()
    assert (pooled[np.tril_indices(32)] > 0).all()  # every block on or below the diagonal sees a key


def test_window_band_is_visible_after_pooling():
    T, W, cells = 256, 24, 32  # blocks of 8: the band is 3 blocks wide, plus the diagonal block
    pooled = pool(weights_for(f"window:{W}", T), cells, cells)
    block = T // cells
    r, c = np.indices(pooled.shape)
    # a block shows weight iff some (i, j) in it has 0 <= i - j < W
    lit = (c * block <= r * block + block - 1) & (r * block - (c * block + block - 1) < W)
    assert ((pooled > 0) == lit).all()
    assert (pooled[r - c > W // block + 1] == 0).all()  # far past: masked


def test_course_rows():
    lines = course_rows(weights_for("causal", 16))
    assert lines[0] == "row 0: [1.0, 0, 0, 0, 0, 0, ...]"
    assert lines[1].startswith("row 1: [0.") and lines[1].endswith(", 0, 0, 0, 0, ...]")


@pytest.mark.parametrize("mask", ["causal", "window:16"])
def test_show_weights_through_the_cli(mask):
    result = runner.invoke(andrea_cli.cli.app, ["attend", "--T", "128", "--d-k", "16", "--backend", "numpy",
                                                "--mask", mask, "--show-weights"])
    assert result.exit_code == 0, result.output
    assert "row 0: [1.0, 0, 0, 0, 0, 0, ...]" in result.output
    picture = [line for line in result.output.splitlines() if line.startswith("|")]
    assert len(picture) >= 10
    first, last = picture[0].strip("|"), picture[-1].strip("|")
    assert first[0] != " " and first[-1] == " "  # row 0 sees only key 0
    if mask.startswith("window"):
        assert last[0] == " " and last[-1] != " "  # the last query no longer sees the start


def test_show_weights_with_json_is_a_usage_error():
    result = runner.invoke(andrea_cli.cli.app, ["attend", "--T", "16", "--backend", "numpy", "--json", "--show-weights"])
    assert result.exit_code == 2


@pytest.mark.parametrize("T", [12, 64])
def test_without_colour_each_line_is_one_query_row_as_the_header_says(T):
    result = runner.invoke(andrea_cli.cli.app, ["attend", "--T", str(T), "--d-k", "4", "--backend", "numpy",
                                                "--show-weights"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "each character one weight, each line one query row" in flat
    picture = [line.strip("|") for line in result.output.splitlines() if line.startswith("|")]
    assert len(picture) == T  # one line per query row, no rows packed together
    for i, line in enumerate(picture):  # causal: query i sees keys 0..i, each a character
        assert len(line) == T and " " not in line[:i + 1] and line[i + 1:] == " " * (T - i - 1)


def test_without_colour_a_long_T_says_how_many_rows_a_line_pools():
    result = runner.invoke(andrea_cli.cli.app, ["attend", "--T", "300", "--d-k", "4", "--backend", "numpy",
                                                "--show-weights"])
    flat = " ".join(result.output.split())
    picture = [line for line in result.output.splitlines() if line.startswith("|")]
    rows, keys = 300 / len(picture), 300 / (len(picture[0]) - 2)  # whole rows and keys per block, never 5.08
    assert f"each character the largest weight of {int(rows)}–{int(rows) + 1} queries × " \
           f"{int(keys)}–{int(keys) + 1} keys" in flat, flat


def test_a_pooled_legend_counts_whole_rows_and_keys():
    from andrea_cli.render.heatmap import block_sizes

    assert block_sizes(1000, 115) == (8, 9)  # 1000 / 115 = 8.7: blocks of 8 and 9, as pool draws them
    assert block_sizes(1024, 128) == (8, 8) and block_sizes(7, 7) == (1, 1)
    from andrea_cli.render.weights import _count

    assert _count((8, 9), "query", "queries") == "8–9 queries" and _count((1, 1), "key", "keys") == "1 key"
