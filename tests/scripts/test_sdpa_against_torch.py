"""scripts/sdpa_against_torch.py: andrea's SDPA against torch's on the NumPy path and the CPU
build (a few cases in the default tier, every case in the slow one), and that its verdict fails
a planted error and a result of the wrong type. torch is optional: without it these skip."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is an optional test dependency: pip install torch")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sdpa_against_torch.py"
_spec = importlib.util.spec_from_file_location("sdpa_against_torch", SCRIPT)
script = importlib.util.module_from_spec(_spec)
sys.modules["sdpa_against_torch"] = script  # dataclasses look their module up there
_spec.loader.exec_module(script)

QUICK = [case for case in script.CASES if case.quick]


@pytest.mark.parametrize("backend", script.BACKENDS)
@pytest.mark.parametrize("case", QUICK, ids=[case.name for case in QUICK])
def test_a_quick_case_is_within_torchs_error(case, backend):
    row = script.run_case(case, backend, torch)
    assert row.passed, script.table([row])


@pytest.mark.slow
def test_every_case_of_the_script_passes(capsys):
    assert script.main([]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert f"{2 * len(script.CASES)} of {2 * len(script.CASES)} within 2x" in out
    assert max(len(line) for line in out.splitlines()[:-1]) <= 80


def test_the_verdict_fails_a_planted_error_and_a_wrong_type(monkeypatch):
    case = QUICK[0]
    real = script.andrea_cli.scaled_dot_product_attention
    assert script.run_case(case, "numpy", torch).passed
    monkeypatch.setattr(script.andrea_cli, "scaled_dot_product_attention",
                        lambda *a, **kw: real(*a, **kw) + 3e-6)  # a few times fp32's error
    assert not script.run_case(case, "numpy", torch).passed
    monkeypatch.setattr(script.andrea_cli, "scaled_dot_product_attention",
                        lambda *a, **kw: real(*a, **kw).astype("float64"))
    row = script.run_case(case, "numpy", torch)
    assert not row.same_type and "TYPE" in script.table([row])
