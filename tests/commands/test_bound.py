"""`andrea bench --bound` refuses in one line what it does not take (commands/bound.py): a GPU the
bound has no model of, --gpu without --bound, the sweep's options, alike from the command line and
from Python. (The bound itself: tests/bench/bound/.)"""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("args, says", [
    (("--bound", "--gpu", "b200"), "--gpu 'b200' is not a GPU the bound knows"),
    (("--gpu", "h100"), "add --bound"),
    (("--bound", "--T", "1024"), "drop --T"),
])
def test_cli_refuses_in_one_line(run_main, args, says):
    code, out, err = run_main("bench", *args)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_the_sweeps_options_are_refused_alike_by_the_command_line_and_python(run_main):
    """--bound's conflicts are declared once (BOUND_TAKES): both faces name the same flags."""
    import andrea_cli

    code, _, err = run_main("bench", "--bound", "--T", "64", "--threads", "2", "--plot", "b.png", "--json")
    with pytest.raises(andrea_cli.AndreaError) as caught:
        andrea_cli.benchmark(bound=True, T=64, threads=2, plot="b.png", json=True)
    assert code == 2 and err.strip() == f"error: {caught.value}"
    assert str(caught.value).endswith("drop --T, --threads, --plot")


def test_without_nvrtc_the_bound_names_its_own_extra(run_main, monkeypatch):
    """No NVRTC (cupy's bindings do not import): the line names `.[bound]`, which brings NVRTC,
    cuobjdump and nvdisasm, not a GPU extra (which brings no cuobjdump), and nothing compiles."""
    import importlib.util
    import sys

    monkeypatch.setitem(sys.modules, "cupy.cuda.nvrtc", None)  # `from cupy.cuda import nvrtc` fails
    if importlib.util.find_spec("cupy") is not None:  # (without cupy it fails already)
        import cupy.cuda

        monkeypatch.delattr(cupy.cuda, "nvrtc", raising=False)
    code, out, err = run_main("bench", "--bound")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert 'NVRTC, which is not available here: pip install ".[bound]"' in err and "cuda13" not in err


def test_without_cuobjdump_the_bound_names_its_extra(run_main, monkeypatch):
    from andrea_cli.bench.bound import report

    monkeypatch.setattr(report, "nvrtc_version", lambda: (13, 0))  # NVRTC there or not (a `.[test]` install): the cuobjdump check is this test's
    monkeypatch.setattr(report, "find_cuobjdump", lambda: None)
    code, out, err = run_main("bench", "--bound")
    assert code == 2 and "cuobjdump, which is not found: pip install \".[bound]\"" in err, err
