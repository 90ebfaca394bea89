"""The layer's backward: the float64 reference against central finite differences of
L = sum(dOut ∘ layer(x)), and the backends (NumPy, the CPU build) against the reference."""

import numpy as np
import pytest

from andrea_cli.backends.numpy_backend import NumpyBackend
from andrea_cli.layer_inputs import random_layer
from andrea_cli.masks import MaskSpec
from andrea_cli.runs.layer import layer_reference
from andrea_cli.runs.layer_backward import layer_backward_reference, run_layer_backward


def test_layer_reference_matches_finite_differences(numeric_gradient):
    rng = np.random.default_rng(7)
    T, d_model, n_head = 4, 6, 2
    x = rng.standard_normal((T, d_model))
    w = {name: rng.standard_normal((d_model, d_model)) * 0.5 for name in ("w_q", "w_k", "w_v", "w_o")}
    d_out = rng.standard_normal((T, d_model))
    mask = MaskSpec("causal")
    grads = layer_backward_reference(x, w, n_head, d_out, mask)

    def loss():
        return float((d_out * layer_reference(x, w, n_head, mask)).sum())

    for name, array in (("dx", x), ("dw_q", w["w_q"]), ("dw_k", w["w_k"]), ("dw_v", w["w_v"]), ("dw_o", w["w_o"])):
        np.testing.assert_allclose(grads[name], numeric_gradient(loss, array), rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("side", ["numpy", "cpu"])
def test_backends_agree_with_the_reference(cpu_backend, side):
    backend = NumpyBackend() if side == "numpy" else cpu_backend()
    inputs = random_layer(37, 48, seed=2)
    d_out = np.random.default_rng(3).standard_normal((37, 48), dtype=np.float32)
    report = run_layer_backward(inputs, 3, d_out, backend, MaskSpec("causal"), scaled=True)
    assert set(report.arrays()) == {"dx", "dw_q", "dw_k", "dw_v", "dw_o"}
    assert max(report.max_rel_error.values()) < 1e-5, report.max_rel_error
    assert report.arrays()["dx"].shape == (37, 48) and report.arrays()["dw_o"].shape == (48, 48)
