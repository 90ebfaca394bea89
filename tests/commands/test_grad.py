"""`andrea grad`: the JSON contract, the gradients against the float64 NumPy backward on every
backend here (NumPy, the CPU build staged and fused), the .npz it writes, the layer's gradients,
and bad input as one line with exit code 2."""

import numpy as np
import pytest

from andrea_cli import reference_backward
from andrea_cli.masks import MaskSpec
from andrea_cli.runs.layer_backward import layer_backward_reference


@pytest.fixture
def head_files(tmp_path):
    rng = np.random.default_rng(11)
    q, k = (rng.standard_normal((37, 12), dtype=np.float32) for _ in range(2))
    v, d_out = (rng.standard_normal((37, 20), dtype=np.float32) for _ in range(2))
    np.savez(tmp_path / "qkv.npz", q=q, k=k, v=v)
    np.save(tmp_path / "d_out.npy", d_out)
    return tmp_path, (q, k, v, d_out)


def test_json_contract(cli):
    doc = cli.json("grad", "--T", 20, "--d-k", 8, "--d-v", 4, "--backend", "numpy")
    assert {"backend", "T", "d_k", "d_v", "mask", "scale", "shapes", "grad_norms", "timings_ms"} <= set(doc)
    assert (doc["backend"], doc["T"], doc["d_k"], doc["d_v"], doc["mask"]) == ("numpy", 20, 8, 4, "causal")
    assert doc["scale"] == pytest.approx(8 ** -0.5)
    assert doc["shapes"] == {"dq": [20, 8], "dk": [20, 8], "dv": [20, 4], "d_scores": [20, 20]}
    assert set(doc["grad_norms"]) == {"d_out", "dv", "d_weights", "d_scores", "dq", "dk"}
    assert set(doc["timings_ms"]) == {"forward", "dv", "dp", "ds", "dq", "dk", "total"}
    assert 0 < doc["score_share"] < 1 and 0 <= doc["quiet_rows"] <= 1


@pytest.mark.parametrize("args", [("--backend", "numpy"), ("--backend", "cpu"), ("--backend", "cpu", "--fused"),
                                  ("--backend", "cpu", "--mask", "window:5", "--no-scale")],
                         ids=["numpy", "cpu", "cpu-fused", "cpu-window-unscaled"])
def test_gradients_match_the_float64_backward(cli, head_files, args):
    folder, (q, k, v, d_out) = head_files
    out = folder / "grads.npz"
    doc = cli.json("grad", "--qkv", folder / "qkv.npz", "--d-out", folder / "d_out.npy", "--out", out, *args)
    mask = MaskSpec("window", 5) if "window:5" in args else MaskSpec("causal")
    exact = reference_backward.backward(q[None], k[None], v[None], d_out[None], mask, "--no-scale" not in args)
    with np.load(out) as saved:
        assert set(saved.files) == {"dq", "dk", "dv"}
        for name in ("dq", "dk", "dv"):
            assert saved[name].dtype == np.float32
            expected = getattr(exact, name)[0]
            assert np.abs(saved[name] - expected).max() <= 1e-5 * np.abs(expected).max(), name
    assert max(doc["max_rel_error"].values()) < 1e-5
    if "--fused" in args:
        assert doc["grad_norms"]["d_scores"] is None and set(doc["timings_ms"]) == {"forward", "delta", "dkdv", "dq", "total"}
    kernels = {"numpy": None, "cpu": "dv_kernel2, dp_kernel2, ds_kernel1, dq_kernel2, dk_kernel2"}[args[1]]
    if "--fused" in args:
        kernels = "attention_backward_dkdv_kernel1 + attention_backward_dq_kernel1"
    assert (doc["precision"], doc["kernel"]) == ("fp32", kernels)


@pytest.mark.parametrize("d, mask", [(64, "causal"), (128, "window:40")])
def test_bf16_on_tensor_cores(cli, tmp_path, d, mask):
    """--fused --precision bf16: the tensor-core forward and backward; the JSON names both; its
    max_rel_error is the saved gradients' (measured here against float64), a bf16-sized error
    within 3x of the emulated bf16 autograd's it reports beside it (FlashAttention's rule)."""
    rng = np.random.default_rng(d)
    q, k, v, d_out = (rng.standard_normal((90, d), dtype=np.float32) for _ in range(4))
    np.savez(tmp_path / "qkv.npz", q=q, k=k, v=v)
    np.save(tmp_path / "d_out.npy", d_out)
    out = tmp_path / "grads.npz"
    doc = cli.json("grad", "--qkv", tmp_path / "qkv.npz", "--d-out", tmp_path / "d_out.npy", "--out", out,
                   "--backend", "cpu", "--fused", "--precision", "bf16", "--mask", mask)
    assert (doc["fused"], doc["precision"]) == (True, "bf16")
    assert doc["kernel"] == f"attention_backward_dkdv_kernel2_d{d} + attention_backward_dq_kernel2_d{d}"
    assert set(doc["timings_ms"]) == {"to_bf16", "forward", "delta", "dkdv", "dq", "total"}
    spec = MaskSpec("window", 40) if mask == "window:40" else MaskSpec("causal")
    exact = reference_backward.backward(q[None], k[None], v[None], d_out[None], spec, True)
    with np.load(out) as saved:
        for name in ("dq", "dk", "dv"):
            expected = getattr(exact, name)[0]
            err = np.abs(saved[name] - expected).max() / np.abs(expected).max()
            assert err == pytest.approx(doc["max_rel_error"][name])
            assert 1e-4 < err <= 3 * doc["autograd_bf16_rel_error"][name], name  # bf16, and within 3x


def test_table(cli):
    result = cli("grad", "--T", 16, "--d-k", 8, "--backend", "numpy")
    assert result.exit_code == 0, result.output
    for text in ("dS = P ∘ (dP − rowsum(dP ∘ P))", "‖dS‖ / ‖dP‖", "pass back almost nothing", "float64"):
        assert text in result.output


def test_layer_gradients(cli, tmp_path):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((9, 16), dtype=np.float32)
    w = {name: rng.standard_normal((16, 16), dtype=np.float32) * np.float32(0.3) for name in ("w_q", "w_k", "w_v", "w_o")}
    d_out = rng.standard_normal((9, 16), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "w.npz", **w)
    np.save(tmp_path / "d_out.npy", d_out)
    out = tmp_path / "layer.npz"
    doc = cli.json("grad", "--x", tmp_path / "x.npy", "--weights", tmp_path / "w.npz", "--n-head", 2,
                   "--d-out", tmp_path / "d_out.npy", "--backend", "cpu", "--out", out)
    assert doc["n_head"] == 2 and doc["shapes"]["dw_o"] == [16, 16]
    exact = layer_backward_reference(x, w, 2, d_out, MaskSpec("causal"))
    with np.load(out) as saved:
        assert set(saved.files) == {"dx", "dw_q", "dw_k", "dw_v", "dw_o"}
        for name, expected in exact.items():
            assert np.abs(saved[name] - expected).max() <= 1e-5 * np.abs(expected).max(), name


def test_preset_layer(cli):
    doc = cli.json("grad", "--preset", "andrea-120m", "--T", 8, "--backend", "numpy")
    assert (doc["d_model"], doc["n_head"], doc["d_k"]) == (768, 12, 64)
    assert doc["shapes"]["dx"] == [8, 768] and max(doc["max_rel_error"].values()) < 1e-5


@pytest.mark.parametrize("args, needle", [
    (("--T", 8, "--d-out", "WRONG"), "dO must have the output's shape"),
    (("--T", 8, "--fused", "--backend", "numpy"), "no fused kernel"),
    (("--d-model", 16, "--fused"), "--fused works on one head"),
    (("--T", 8, "--out", "grads.npy"), "must end in .npz"),
    (("--T", 8, "--d-k", 129, "--fused", "--backend", "cpu"), "d_k <= 128"),
    (("--T", 8, "--mask", "diagonal"), "--mask"),
    (("--T", 8, "--d-k", 64, "--precision", "bf16"), "add --fused"),
    (("--T", 8, "--d-k", 64, "--fused", "--precision", "fp16", "--backend", "cpu"), "--precision 'fp16'"),
    (("--T", 8, "--d-k", 80, "--fused", "--precision", "bf16", "--backend", "cpu"), "--d-k 64 or 128"),
])
def test_bad_input_is_one_line_and_exit_2(run_main, tmp_path, args, needle):
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((3, 3), dtype=np.float32))
    args = [wrong if a == "WRONG" else (tmp_path / a if str(a).endswith(".npy") else a) for a in args]
    code, out, err = run_main("grad", *args)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_failed_run_leaves_an_existing_output_alone(run_main, tmp_path):
    out = tmp_path / "grads.npz"
    out.write_bytes(b"keep me")
    code, _, _ = run_main("grad", "--T", 8, "--d-out", tmp_path / "missing.npy", "--out", out)
    assert code == 2 and out.read_bytes() == b"keep me"


def test_out_says_where_it_saved(run_main, tmp_path):
    """Every file a run writes gets its line, as --plot's does."""
    npz = tmp_path / "g.npz"
    code, out, _ = run_main("grad", "--T", "8", "--d-k", "4", "--backend", "numpy", "--out", npz)
    assert code == 0 and npz.exists() and f"gradients saved to {npz}" in out.replace("\n", "")
    o, w = tmp_path / "o.npy", tmp_path / "w.npy"
    code, out, _ = run_main("attend", "--T", "8", "--d-k", "4", "--backend", "numpy", "--out", o, "--save-weights", w)
    flat = out.replace("\n", "")
    assert code == 0 and f"output saved to {o}" in flat and f"weights saved to {w}" in flat
    code, out, _ = run_main("grad", "--T", "8", "--d-k", "4", "--backend", "numpy", "--out", npz, "--json")
    assert code == 0 and "saved" not in out  # --json: stdout is the document alone
