"""`andrea grad`'s layer with grouped K/V heads (--n-kv-head, as attend's layer takes it): W_K
and W_V (d_model, n_kv_head·d_k), query head h reading K/V head h // (n_head / n_kv_head). The
saved gradients against torch's autograd of the same layer in float64 (K/V heads repeated
explicitly), on the NumPy path and the CPU build; the option's help, its one-line errors, the
screen at 80 columns; and the layer's memory check counting K and V per K/V head."""

from __future__ import annotations

import numpy as np
import pytest

from andrea_cli.commands.options.shared import N_KV_HEAD

T, D_MODEL, N_HEAD = 13, 64, 8  # d_k = 8; T odd, so no tile divides it
D_K = D_MODEL // N_HEAD


def layer_files(tmp_path, n_kv_head: int, seed: int):
    rng = np.random.default_rng(seed)
    kv = n_kv_head * D_K
    arrays = {"x": rng.standard_normal((T, D_MODEL)), "d_out": rng.standard_normal((T, D_MODEL))}
    w = {"w_q": rng.normal(0, 0.3, (D_MODEL, D_MODEL)), "w_k": rng.normal(0, 0.3, (D_MODEL, kv)),
         "w_v": rng.normal(0, 1, (D_MODEL, kv)), "w_o": rng.normal(0, 0.1, (D_MODEL, D_MODEL))}
    arrays, w = ({n: a.astype(np.float32) for n, a in d.items()} for d in (arrays, w))
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a)
    np.savez(tmp_path / "w.npz", **w)
    flags = ["--x", tmp_path / "x.npy", "--weights", tmp_path / "w.npz", "--d-out", tmp_path / "d_out.npy"]
    return arrays, w, flags


def torch_layer_gradients(x, w, d_out, n_kv_head: int) -> dict[str, np.ndarray]:
    """dx, dW_* of sum(dOut ∘ layer(x)) by torch's autograd in float64: causal grouped-query
    attention with K and V copied out to every query head (repeat_interleave: h -> h // group)."""
    torch = pytest.importorskip("torch", reason="torch is not installed: no autograd to hold grad to")
    leaves = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True) for n, a in {"x": x, **w}.items()}
    xt = leaves["x"]
    q = (xt @ leaves["w_q"]).reshape(T, N_HEAD, D_K).transpose(0, 1)
    k, v = ((xt @ leaves[n]).reshape(T, n_kv_head, D_K).transpose(0, 1) for n in ("w_k", "w_v"))
    k, v = (a.repeat_interleave(N_HEAD // n_kv_head, dim=0) for a in (k, v))
    s = q @ k.transpose(1, 2) / D_K ** 0.5
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    heads = torch.softmax(s, dim=-1) @ v  # (H, T, d_k)
    out = heads.transpose(0, 1).reshape(T, D_MODEL) @ leaves["w_o"]
    out.backward(torch.tensor(d_out, dtype=torch.float64))
    return {("dx" if n == "x" else f"d{n}"): t.grad.numpy() for n, t in leaves.items()}


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("n_kv_head", [2, 1])
def test_grouped_layer_gradients_match_torch_autograd(cli, tmp_path, backend, n_kv_head):
    arrays, w, flags = layer_files(tmp_path, n_kv_head, seed=n_kv_head)
    out = tmp_path / "grads.npz"
    doc = cli.json("grad", "--backend", backend, *flags, "--n-head", N_HEAD, "--n-kv-head", n_kv_head, "--out", out)
    want = torch_layer_gradients(arrays["x"], w, arrays["d_out"], n_kv_head)
    with np.load(out) as saved:
        for name, exact in want.items():
            assert saved[name].shape == exact.shape, name  # dw_k, dw_v: (d_model, n_kv_head·d_k)
            assert np.abs(saved[name] - exact).max() / np.abs(exact).max() < 1e-5, name
    assert doc["n_head"] == N_HEAD and doc["n_kv_head"] == n_kv_head
    assert doc["shapes"]["dk"] == [n_kv_head, T, D_K] and doc["shapes"]["dw_v"] == [D_MODEL, n_kv_head * D_K]
    assert max(doc["max_rel_error"].values()) < 1e-5
    if backend == "cpu":
        assert doc["kernels"], doc  # the kernel file ran, not the NumPy path


def test_n_kv_head_comes_from_the_weights_file(cli, tmp_path):
    """No flag: W_K's columns say the K/V heads, as attend reads them."""
    arrays, w, flags = layer_files(tmp_path, 4, seed=7)
    out = tmp_path / "grads.npz"
    doc = cli.json("grad", "--backend", "numpy", *flags, "--n-head", N_HEAD, "--out", out)
    assert doc["n_kv_head"] == 4
    want = torch_layer_gradients(arrays["x"], w, arrays["d_out"], 4)
    with np.load(out) as saved:
        assert np.abs(saved["dw_k"] - want["dw_k"]).max() / np.abs(want["dw_k"]).max() < 1e-5


def test_the_option_is_attends_and_the_screen_fits_80_columns(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    for command in ("grad", "attend"):
        result = cli(command, "--help")
        flat = " ".join(result.output.replace("│", " ").split())
        assert "--n-kv-head" in result.output and " ".join(N_KV_HEAD.help.split()[:6]) in flat, command
    result = cli("grad", "--backend", "numpy", "--d-model", 64, "--n-head", 8, "--n-kv-head", 2, "--T", 9)
    assert result.exit_code == 0, result.output
    assert "8 heads (4 per K/V head, 2 K/V)" in " ".join(result.output.split())
    assert "(64, 16)" in result.output and "(2, 9, 8)" in result.output  # dW_K, dK
    assert max(len(line) for line in result.output.splitlines()) <= 80


@pytest.mark.parametrize("args, expected", [
    (["--d-model", "48", "--n-head", "12", "--n-kv-head", "5"], "--n-kv-head 5 does not divide n_head 12"),
    (["--d-model", "48", "--n-head", "12", "--n-kv-head", "0"], "--n-kv-head must be >= 1"),
    (["--preset", "andrea-120m", "--n-kv-head", "24"], "--n-kv-head 24 does not divide n_head 12"),
    (["--n-kv-head", "2", "--fused"], "--fused works on one head"),
    (["--n-kv-head", "2"], "--n-kv-head groups the layer's K/V heads: size the layer too"),
])
@pytest.mark.parametrize("command", ["grad", "attend"])
def test_bad_n_kv_head_is_one_line_and_exit_2(cli, args, expected, command):
    result = cli(command, "--backend", "numpy", *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], result.stderr
    assert result.stdout == ""


def test_n_kv_head_with_one_heads_files_is_refused(run_main, tmp_path):
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", np.ones((4, 8), np.float32))
    code, out, err = run_main("grad", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v",
                              tmp_path / "v.npy", "--n-kv-head", 1, "--backend", "numpy")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--n-kv-head" in err, err


def layer_need(n_head: int, n_kv_head: int, T: int, d_k: int, bytes_per_score: int) -> int:
    """The layer's estimate, written out: every query head's T×T scores, Q and the output per
    query head, K and V per K/V head (32 host bytes an entry at the peak)."""
    return n_head * T * T * bytes_per_score + (n_head + n_kv_head) * T * 2 * d_k * 32


def test_grouped_layer_memory_counts_k_and_v_per_kv_head():
    from andrea_cli.inputs import input_bytes
    from andrea_cli.layer_inputs import weight_bytes

    # K and V are half the inputs: with 8 query heads on 2 K/V heads that half is 4x smaller
    ungrouped, grouped = input_bytes(8, 100, 16, 16), input_bytes(8, 100, 16, 16, kv_heads=2)
    assert ungrouped == 2 * 8 * 100 * 32 * 32 and ungrouped - grouped == (ungrouped // 2) * 3 // 4
    assert weight_bytes(64, 64) == 4 * 64 * 64 * 32 and weight_bytes(64, 16) == (2 * 64 * 64 + 2 * 64 * 16) * 32


@pytest.mark.parametrize("command", ["grad", "attend"])
def test_a_layer_that_fits_only_grouped_runs_and_the_ungrouped_one_is_refused(run_main, monkeypatch, command):
    """Memory set between the two estimates: 8 K/V heads are refused (one line, exit 2) and 1
    runs, so the check counts n_kv_head. T 64 with d_k 8, the scores' share small enough that
    K/V's part tells the two apart."""
    from andrea_cli.commands.grad import BACKWARD_BYTES_PER_SCORE
    from andrea_cli.inputs import HOST_BYTES_PER_SCORE

    per_score = BACKWARD_BYTES_PER_SCORE if command == "grad" else HOST_BYTES_PER_SCORE
    T, d_k = 64, 8
    full, grouped = (layer_need(8, kv, T, d_k, per_score) for kv in (8, 1))
    monkeypatch.setattr("andrea_cli.inputs.available_memory_bytes", lambda: int((full + grouped) / 2 / 0.8))
    args = (command, "--backend", "numpy", "--d-model", 64, "--n-head", 8, "--T", T, "--json")
    code, _, err = run_main(*args, "--n-kv-head", 8)
    assert code == 2 and "would need about" in err and len(err.strip().splitlines()) == 1, err
    code, out, err = run_main(*args, "--n-kv-head", 1)
    assert code == 0 and '"n_kv_head": 1' in out, err
