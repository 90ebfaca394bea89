"""`andrea verify` from the command line: the quick sweep's JSON contract, one case and its table,
and one-line refusals (a kernel file that does not compile, numpy as a backend)."""

import json

import pytest

from andrea_cli.kernel_file import packaged_kernel_path


@pytest.mark.slow  # the whole quick sweep (29 cases, both schedules): ~15 s of CPU
def test_quick_sweep_passes_with_json_contract(cli):
    result = cli("verify", "--quick", "--backend", "cpu", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["backend"] == "cpu" and doc["passed"] is True and doc["n_failed"] == 0
    schedules = {c["schedule"] for c in doc["cases"]}
    assert schedules == {"forward", "reverse"}
    for case in doc["cases"]:
        assert set(case) >= {"T", "d_k", "d_v", "mask", "scaled", "passed", "stages"} and case["stages"]
        for check in case["stages"].values():  # every stage a case ran, within its tolerance
            assert set(check) >= {"max_abs_err", "max_rel_err", "tol"}
            assert check["max_abs_err"] <= check["tol"]
        assert all(case["invariants"].values())
    # the staged family runs on every case but those kept for one family (the decode edges, say)
    staged = [c for c in doc["cases"] if {"scores", "softmax", "av", "output"} <= set(c["stages"])]
    assert len(staged) >= 0.8 * len(doc["cases"]), len(staged)


def test_one_case_and_table(cli):
    result = cli("verify", "--backend", "cpu", "--T", 31, "--d-k", 3, "--d-v", 5, "--mask", "window:4")
    assert result.exit_code == 0, result.output
    assert "PASSED" in result.output and "window:4" in result.output


def test_a_kernel_that_does_not_compile_is_a_usage_error(run_main, tmp_path):
    broken = tmp_path / "broken.cu"
    broken.write_text(packaged_kernel_path().read_text().replace("float acc = 0.0f;", "float acc = 0.0f", 1))
    code, _, err = run_main("verify", "--quick", "--backend", "cpu", "--kernel", broken)
    assert code == 2 and len(err.strip().splitlines()) == 1, err


def test_numpy_is_not_a_verify_backend(run_main):
    code, _, err = run_main("verify", "--backend", "numpy")
    assert code == 2 and "reference" in err
