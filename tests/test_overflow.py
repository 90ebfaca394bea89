"""Scores past float32's range are said in one plain line; no raw Python warning reaches the terminal."""

import subprocess
import sys

import numpy as np

from andrea_cli.overflow import FLOAT32_MAX, largest_score, overflow_notice


def test_largest_score_is_the_float64_maximum_of_qk():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 7, 3))
    exact = max(np.abs(q[h] @ k[h].T).max() for h in range(2))
    assert largest_score(q, k) == exact


def test_ordinary_inputs_get_no_notice_and_huge_ones_do():
    q = np.ones((4, 8), np.float32)
    assert overflow_notice(q, q) is None
    big = np.full((4, 8), 1e30, np.float32)
    notice = overflow_notice(big, big)
    assert notice is not None and "8e+60" in notice and f"{FLOAT32_MAX:.3g}" in notice and "divide Q and K" in notice


def test_attend_on_overflowing_inputs_says_so_without_raw_warnings(tmp_path):
    rng = np.random.default_rng(1)
    qkv = tmp_path / "big.npz"
    q, k, v = (1e30 * rng.standard_normal((16, 8))).astype(np.float32), (1e30 * rng.standard_normal((16, 8))).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)
    np.savez(qkv, q=q, k=k, v=v)
    run = subprocess.run([sys.executable, "-m", "andrea_cli", "attend", "--qkv", str(qkv), "--backend", "numpy"],
                         capture_output=True, text=True, timeout=120)
    text = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 0, text
    assert "past float32's largest value" in text
    assert "Warning" not in text and "Traceback" not in text
