"""The layer with grouped K/V heads (`attend --n-kv-head`): W_K and W_V have n_kv_head·d_k
columns and query head h reads K/V head h // (n_head / n_kv_head). Checked through the CLI on the
NumPy path and on the CPU build of the kernel file against a float64 layer written out here, whose
K/V heads are repeated explicitly (no code of andrea's in the yardstick)."""

from __future__ import annotations

import json

import numpy as np
import pytest

T, D_MODEL, N_HEAD = 13, 64, 8  # d_k = 8; T odd, so no tile divides it
D_K = D_MODEL // N_HEAD


def grouped_layer(x, w, n_kv_head: int) -> np.ndarray:
    """Causal grouped-query attention layer in float64, K/V heads copied out to every query head."""
    x = x.astype(np.float64)
    w = {name: a.astype(np.float64) for name, a in w.items()}
    q = (x @ w["w_q"]).reshape(T, N_HEAD, D_K).transpose(1, 0, 2)  # (8, T, d_k)
    k, v = ((x @ w[n]).reshape(T, n_kv_head, D_K).transpose(1, 0, 2) for n in ("w_k", "w_v"))
    group = N_HEAD // n_kv_head
    k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)  # query head h -> K/V head h // group
    for h in range(N_HEAD):
        np.testing.assert_array_equal(k[h], k[(h // group) * group])
    s = q @ k.transpose(0, 2, 1) / np.sqrt(D_K)
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    heads = p @ v  # (8, T, d_k)
    return heads.transpose(1, 0, 2).reshape(T, D_MODEL) @ w["w_o"]


def layer_files(tmp_path, n_kv_head: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, D_MODEL)).astype(np.float32)
    kv = n_kv_head * D_K
    w = {"w_q": rng.normal(0, 0.2, (D_MODEL, D_MODEL)), "w_k": rng.normal(0, 0.2, (D_MODEL, kv)),
         "w_v": rng.normal(0, 1, (D_MODEL, kv)), "w_o": rng.normal(0, 0.1, (D_MODEL, D_MODEL))}
    w = {n: a.astype(np.float32) for n, a in w.items()}
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "w.npz", **w)
    return x, w


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("n_kv_head", [4, 1])
def test_grouped_layer_matches_float64(cli, tmp_path, backend, n_kv_head):
    x, w = layer_files(tmp_path, n_kv_head, seed=n_kv_head)
    doc = cli.json("attend", "--backend", backend, "--x", tmp_path / "x.npy", "--weights", tmp_path / "w.npz",
                   "--n-head", N_HEAD, "--n-kv-head", n_kv_head, "--strict", "--out", tmp_path / "o.npy")
    want = grouped_layer(x, w, n_kv_head)
    got = np.load(tmp_path / "o.npy")
    assert got.shape == (T, D_MODEL)
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-5
    assert doc["n_kv_head"] == n_kv_head and doc["n_head"] == N_HEAD
    assert doc["shapes"]["k"] == [n_kv_head, T, D_K] and doc["shapes"]["w_v"] == [D_MODEL, n_kv_head * D_K]
    # float32 K and V for T tokens: 2 · T · heads · d_k · 4 bytes
    assert doc["kv_cache"]["bytes"] == 2 * T * n_kv_head * D_K * 4
    assert doc["kv_cache"]["bytes_saved"] == 2 * T * (N_HEAD - n_kv_head) * D_K * 4
    if backend == "cpu":
        assert doc["kernels"], doc  # the kernel file ran, not the NumPy path


def test_n_kv_head_comes_from_the_weights_file(cli, tmp_path):
    x, w = layer_files(tmp_path, 2, seed=7)
    result = cli("attend", "--backend", "numpy", "--x", tmp_path / "x.npy", "--weights", tmp_path / "w.npz",
                 "--n-head", N_HEAD, "--out", tmp_path / "o.npy")
    assert result.exit_code == 0, result.output
    assert "K/V heads 2 (4 query heads each)" in result.stdout
    want = grouped_layer(x, w, 2)
    assert np.abs(np.load(tmp_path / "o.npy") - want).max() / np.abs(want).max() < 1e-5


def test_preset_keeps_one_kv_head_per_query_head(cli):
    doc = cli.json("attend", "--backend", "numpy", "--preset", "andrea-120m", "--T", "8")
    assert doc["n_head"] == 12 and doc["n_kv_head"] == 12 and doc["kv_cache"]["bytes_saved"] == 0
    screen = cli("attend", "--backend", "numpy", "--preset", "andrea-120m", "--T", "8", "--n-kv-head", "4")
    assert screen.exit_code == 0, screen.output
    assert "K/V heads 4 (3 query heads each)" in screen.stdout
    assert "(67%) against 12 K/V heads" in screen.stdout
    assert max(len(line) for line in screen.stdout.splitlines()) <= 120


@pytest.mark.parametrize("args,expected", [
    (["--d-model", "48", "--n-head", "12", "--n-kv-head", "5"], "--n-kv-head 5 does not divide n_head 12"),
    (["--d-model", "48", "--n-head", "12", "--n-kv-head", "0"], "--n-kv-head must be >= 1"),
    (["--preset", "andrea-120m", "--n-kv-head", "24"], "--n-kv-head 24 does not divide n_head 12"),
])
def test_bad_n_kv_head_is_one_line_and_exit_2(cli, args, expected):
    result = cli("attend", "--backend", "numpy", *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], result.stderr
    assert result.stdout == ""


def test_weights_file_disagreeing_with_n_kv_head(cli, tmp_path):
    layer_files(tmp_path, 4, seed=1)
    result = cli("attend", "--backend", "numpy", "--x", tmp_path / "x.npy", "--weights", tmp_path / "w.npz",
                 "--n-head", N_HEAD, "--n-kv-head", "2")
    assert result.exit_code == 2 and "fix the file or --n-kv-head" in result.stderr, result.output


def test_weights_file_with_too_many_kv_columns_blames_the_file(cli, tmp_path):
    x, w = layer_files(tmp_path, 1, seed=2)
    np.savez(tmp_path / "w.npz", **{**w, "w_k": np.ones((D_MODEL, 2 * D_MODEL), np.float32)})
    result = cli("attend", "--backend", "numpy", "--x", tmp_path / "x.npy", "--weights", tmp_path / "w.npz",
                 "--n-head", N_HEAD)
    assert result.exit_code == 2 and "w_k is (64, 128)" in result.stderr and "--n-kv-head" not in result.stderr, \
        result.output
