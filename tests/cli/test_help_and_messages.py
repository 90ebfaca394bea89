"""What a learner meets first: --help shows every default and no placeholder on a flag (and
imports no cupy); a bad seed is one line and exit 2 on every command and in the API; the
fallback line without a GPU says what `andrea info` says."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import andrea_cli
from andrea_cli.errors import AndreaError

COMMANDS = ("attend", "grad", "verify", "bench", "info", "compare-scaling")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_the_defaults_and_no_bool_placeholder(run_main, command):
    code, out, _ = run_main(command, "--help")
    assert code == 0
    assert "<bool>" not in out
    assert not re.search(r"\w \.\s", out), "a help text lost its bracketed default: " + out
    if command in ("attend", "grad"):
        flat = " ".join(out.split())
        assert "Sequence length [default: 1024]." in flat and "Query/key width per head [default: 64]." in flat


@pytest.mark.parametrize("command", ("attend", "grad", "compare-scaling"))
@pytest.mark.parametrize("seed", ("-1", "-12345678901234567890"))
def test_a_bad_seed_is_one_line_exit_2(run_main, command, seed):
    code, out, err = run_main(command, "--T", "8", "--backend", "numpy", "--seed", seed)
    assert code == 2 and out == ""
    assert err.strip() == f"error: --seed {seed}: a seed is a whole number >= 0; pass e.g. --seed 0"


@pytest.mark.parametrize("call", [
    lambda: andrea_cli.attend(T=8, backend="numpy", seed=-1),
    lambda: andrea_cli.grad(T=8, backend="numpy", seed=-1),
    lambda: andrea_cli.compare_scaling(d_k=[4], T=8, backend="numpy", seed=-1),
])
def test_a_bad_seed_in_the_api_is_andrea_error(call):
    with pytest.raises(AndreaError, match=r"--seed .*: a seed is a whole number >= 0"):
        call()


def test_a_seed_that_is_no_whole_number_is_named():
    with pytest.raises(AndreaError, match=r"^seed=1\.5: --seed takes a whole number; e\.g\. seed=0$"):
        andrea_cli.attend(T=8, backend="numpy", seed=1.5)


def test_a_good_seed_still_draws_the_same_inputs(run_main):
    a = andrea_cli.attend(T=8, d_k=4, backend="numpy", seed=7)
    b = andrea_cli.attend(T=8, d_k=4, backend="numpy", seed=7)
    assert (a.output == b.output).all()


def test_without_a_driver_the_fallback_line_says_so_as_info_does():
    from andrea_cli.backends.cuda import cuda_availability
    from andrea_cli.backends.toolchain.cuda_setup import read_cuda_setup

    pytest.importorskip("cupy")
    if read_cuda_setup().driver is not None:
        pytest.skip("an NVIDIA driver is installed here")
    status = cuda_availability()
    assert not status.ok and status.reason.startswith("no NVIDIA driver here")
    assert "cudaError" not in status.reason
    result = andrea_cli.attend(T=8, d_k=4)  # auto: the fallback notice
    assert any("no NVIDIA driver here" in notice for notice in result.raw.notices)


def test_help_does_not_import_cupy():
    code = "import sys; from andrea_cli.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit: pass\nprint('cupy' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip().endswith("False"), result.stdout + result.stderr
