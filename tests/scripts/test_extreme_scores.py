"""scripts/extreme_scores.py: on huge scores (Q, K uniform in +-100, d 128) each fp32 fused kernel's
error is exactly that of its Q·K^T's float32 roundings (emulated in NumPy, the rest in float64),
and its median over seeds is within FlashAttention's 2x of torch's fp32 error."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import extreme_scores  # noqa: E402


@pytest.mark.slow  # T 1000 through three kernels of the CPU build, twice (~15 s); at small T the
# scores' error no longer dwarfs the softmax's, and the attribution is not exact
def test_the_error_is_the_dot_products_and_within_2x_torch(cpu_device):
    pytest.importorskip("torch", reason="torch is an optional test dependency: pip install torch")
    rows = extreme_scores.measure(1000, 128, 100.0, False, range(2), cpu_device)
    names = set(rows[0].kernels)
    assert names == {"attention_fused_kernel1", "attention_fused_kernel2", "attention_fused_kernel3_d128"}
    for r in rows:
        for n in names:  # the softmax arithmetic adds nothing visible: the dot alone gives the same error
            assert r.kernels[n] == pytest.approx(r.dot_only[n], rel=1e-3), (r.seed, n)
        assert r.floor < min(r.kernels.values())  # scores rounded once: below every kernel
    for n in names:
        assert np.median([r.kernels[n] for r in rows]) <= 2.0, n


def test_emulated_dot_products_round_as_float32():
    q = np.array([[1.0, 2.0 ** -24]], np.float32)
    k = np.array([[1.0, 1.0]], np.float32)
    assert extreme_scores.sequential_dot(q, k)[0, 0] == np.float32(1.0)  # 1 + 2^-24 rounds to 1 (ties to even)


def test_the_emulated_fused_dot_is_fours_and_kahan():
    q = np.array([[1.0, 0.0, 0.0, 0.0, 2.0 ** -24, 2.0 ** -24, 0.0, 0.0]], np.float32)
    k = np.ones((1, 8), np.float32)
    assert extreme_scores.sequential_dot(q, k)[0, 0] == np.float32(1.0)  # one chain: each 2^-24 lost
    # in fours the second four's 2^-24 + 2^-24 = 2^-23 is summed apart, and survives the addition to 1
    assert extreme_scores.fours_dot(q, k, False)[0, 0] == np.float32(1.0 + 2.0 ** -23)
    q = np.array([[1.0, 0.0, 0.0, 0.0, 2.0 ** -24, 0.0, 0.0, 0.0, 2.0 ** -24, 0, 0, 0]], np.float32)
    k = np.ones((1, 12), np.float32)
    assert extreme_scores.fours_dot(q, k, False)[0, 0] == np.float32(1.0)  # each 2^-24 rounded away
    assert extreme_scores.fours_dot(q, k, True)[0, 0] == np.float32(1.0 + 2.0 ** -23)  # Kahan gives it back


def test_summing_in_fours_and_compensating_cut_the_score_error():
    """The RMS error of the scores, the measure without a maximum's noise: fours below one chain,
    Kahan below fours, the rounded-once floor below all; folding scale·log2 e into Q moves none."""
    pytest.importorskip("torch", reason="torch is an optional test dependency: pip install torch")
    e = extreme_scores.order_errors(96, 128, 100.0, range(2))
    chain, fours = e["one chain (kernel1, kernel3 before)"], e["fours, Q prescaled (kernel3)"]
    assert e["rounded once"] < e["fours + Kahan (kernels 1, 2)"] < 0.75 * fours
    assert fours < 0.75 * chain
    assert e["one chain, Q prescaled (base 2)"] == pytest.approx(chain, rel=0.1)
    assert e["fours (kernel2 before)"] == pytest.approx(fours, rel=0.1)
