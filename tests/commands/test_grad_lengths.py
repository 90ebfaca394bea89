"""`andrea grad` with L queries against S keys (--T-q/--T-k, or --q/--k/--v files of different
lengths), as attend takes them: the saved gradients (dQ (L, d_k), dK and dV (S, d)) against the
float64 NumPy backward on every backend here, L < S and L > S (rows that see no key), the JSON's
sizes, the screen at 80 columns, and the one-line errors."""

import numpy as np
import pytest

from andrea_cli import reference_backward
from andrea_cli.inputs import random_qkv
from andrea_cli.masks import MaskSpec
from andrea_cli.runs.gradient_flow import d_out_for


def save_files(folder, L: int, S: int, d_k: int = 12, d_v: int = 20, seed: int = 3):
    rng = np.random.default_rng(seed)
    arrays = {"q": rng.standard_normal((L, d_k)), "k": rng.standard_normal((S, d_k)),
              "v": rng.standard_normal((S, d_v)), "d_out": rng.standard_normal((L, d_v))}
    flags = []
    for name, a in arrays.items():
        np.save(folder / f"{name}.npy", a.astype(np.float32))
        flags += [f"--{name.replace('_', '-')}", folder / f"{name}.npy"]
    return {name: a.astype(np.float32) for name, a in arrays.items()}, flags


def max_rel(got, expected) -> float:
    return float(np.abs(got - expected).max() / np.abs(expected).max())


@pytest.mark.parametrize("L, S", [(9, 37), (37, 9)])
@pytest.mark.parametrize("args", [("--backend", "numpy"), ("--backend", "cpu"), ("--backend", "cpu", "--fused")],
                         ids=["numpy", "cpu", "cpu-fused"])
def test_gradients_of_L_queries_against_S_keys(cli, tmp_path, L, S, args):
    x, flags = save_files(tmp_path, L, S)
    out = tmp_path / "grads.npz"
    doc = cli.json("grad", *flags, "--out", out, *args)
    assert (doc["T"], doc["L"], doc["S"]) == (L, L, S)
    assert doc["shapes"] == {"dq": [L, 12], "dk": [S, 12], "dv": [S, 20], "d_scores": [L, S]}
    exact = reference_backward.backward(*(x[n][None] for n in ("q", "k", "v", "d_out")), MaskSpec("causal"), True)
    with np.load(out) as saved:
        for name in ("dq", "dk", "dv"):
            expected = getattr(exact, name)[0]
            assert saved[name].shape == expected.shape
            assert max_rel(saved[name], expected) <= 1e-5, name
    assert max(doc["max_rel_error"].values()) < 1e-5
    if "--fused" not in args:
        assert 0 <= doc["quiet_rows"] <= 1


def test_T_q_and_T_k_draw_the_inputs_and_dO(cli, tmp_path):
    """The seeded inputs are attend's (random_qkv at L, S) and dO is the output's shape, (L, d_v)."""
    out = tmp_path / "grads.npz"
    doc = cli.json("grad", "--T-q", 6, "--T-k", 21, "--d-k", 8, "--d-v", 4, "--seed", 2, "--backend", "cpu",
                   "--mask", "window:5", "--out", out)
    assert (doc["T"], doc["S"], doc["shapes"]["dq"], doc["shapes"]["dv"]) == (6, 21, [6, 8], [21, 4])
    data = random_qkv(6, 8, 4, 2, S=21)
    d_out = d_out_for(6, 4, 2)[0]
    exact = reference_backward.backward(data.q[None], data.k[None], data.v[None], d_out[None], MaskSpec("window", 5))
    with np.load(out) as saved:
        for name in ("dq", "dk", "dv"):
            assert max_rel(saved[name], getattr(exact, name)[0]) <= 1e-5, name


def test_bf16_L_against_S(cli, tmp_path):
    """The tensor-core backward on L > S (the first L - S rows see no key), within 3x of the
    emulated bf16 autograd's error, which grad reports beside its own (now for L != S too)."""
    x, flags = save_files(tmp_path, 70, 40, 64, 64)
    out = tmp_path / "grads.npz"
    doc = cli.json("grad", *flags, "--out", out, "--backend", "cpu", "--fused", "--precision", "bf16")
    exact = reference_backward.backward(*(x[n][None] for n in ("q", "k", "v", "d_out")), MaskSpec("causal"), True)
    with np.load(out) as saved:
        for name in ("dq", "dk", "dv"):
            err = max_rel(saved[name], getattr(exact, name)[0])
            assert err == pytest.approx(doc["max_rel_error"][name])
            assert 1e-4 < err <= 3 * doc["autograd_bf16_rel_error"][name], name


def test_screen_says_L_and_S_in_80_columns(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = cli("grad", "--T-q", 5, "--T-k", 12, "--d-k", 8, "--backend", "numpy")
    assert result.exit_code == 0, result.output
    assert "L=5 S=12" in result.output and "query i sees keys up to i + 7" in result.output
    assert "(12, 8)" in result.output and "(5, 12)" in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80


def test_bad_lengths_are_one_line(run_main, tmp_path):
    x, flags = save_files(tmp_path, 4, 9)
    np.save(tmp_path / "keys_shape.npy", np.ones((9, 20), np.float32))
    cases = [
        (["--T-q", 0], "--T-q must be >= 1"),
        ([*flags[:6], "--T-k", 7], "--T-k 7 disagrees with the input files (9)"),
        ([*flags[:6], "--d-out", tmp_path / "keys_shape.npy"], "the output is (4, 20)"),
        (["--T-q", 4, "--preset", "andrea-120m"], "drop --T-q/--T-k"),
    ]
    for args, words in cases:
        code, _, err = run_main("grad", *args, "--backend", "numpy")
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (args, err)


def test_the_python_api_takes_L_queries_against_S_keys():
    """andrea_cli.grad on two heads of 9 queries against 20 keys: dO is the output's shape
    (2, 9, d_v), not V's (2, 20, d_v), which is refused in one line naming the output's."""
    import andrea_cli
    from andrea_cli.errors import AndreaError

    rng = np.random.default_rng(4)
    q, d_out = rng.standard_normal((2, 9, 8), dtype=np.float32), rng.standard_normal((2, 9, 6), dtype=np.float32)
    k, v = rng.standard_normal((2, 20, 8), dtype=np.float32), rng.standard_normal((2, 20, 6), dtype=np.float32)
    got = andrea_cli.grad(q, k, v, d_out=d_out, backend="cpu")
    exact = reference_backward.backward(q, k, v, d_out, MaskSpec("causal"))
    for name in ("dq", "dk", "dv"):
        assert max_rel(getattr(got, name), getattr(exact, name)) <= 1e-5, name
    with pytest.raises(AndreaError, match=r"the output is \(2, 9, 6\)"):
        andrea_cli.grad(q, k, v, d_out=v, backend="cpu")
