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
