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
