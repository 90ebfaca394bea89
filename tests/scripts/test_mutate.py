"""scripts/mutate.py, the mutation score's harness, on four chosen mutants of the kernel file (the
whole campaign takes most of an hour: docs/reference.md, "Mutation score"): three it must tell apart without
running verify (same PTX, no compile, listed as equivalent), and one verify must kill."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # one quick verify of the original and one of a mutant: ~10 s
# the mutants it must tell apart without verify are told apart by NVRTC (same PTX, no compile): without
# it each would cost a verify run, minutes on the CPU build
pytest.importorskip("cupy", reason="scripts/mutate.py weeds out mutants with NVRTC (cupy's bindings): "
                    "pip install '.[test,bound]'")

# the Mask's rule hides the diagonal: every row loses its own key, in every kernel
KILLED = "return inside && (!causal || d + right > 0) && (window <= 0 || d < window || j < sinks);"
SAME_PTX = "if (c < d_v) acc[t] += pj * vj[c]; ⏎ continue;"  # the end of the loop body anyway: no code
NOT_CODE = "return inside && (!causal || d + right >== 0) && (window <= 0 || d < window || j < sinks);"
LISTED = "__shared__ float q_tile[TILE][TILE + 0];"  # in scripts/mutate_equivalents.txt: padding only


def test_mutate_script_classifies_four_mutants(tmp_path):
    out = tmp_path / "mutants.json"
    cmd = [sys.executable, "scripts/mutate.py", "--quick", "--json", str(out)]
    for text in (KILLED, SAME_PTX, NOT_CODE, LISTED):
        cmd += ["--mutant", text]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    outcomes = {r["mutant"]["mutated"]: r["outcome"] for r in doc["results"]}
    assert outcomes == {KILLED: "killed", SAME_PTX: "equivalent", NOT_CODE: "invalid", LISTED: "equivalent"}
    assert doc["counts"]["killed"] == 1 and doc["score"] == 1.0
    assert "mutation score: 1/1 = 100.0%" in proc.stdout
