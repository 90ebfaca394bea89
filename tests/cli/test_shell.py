"""Shell habits: NO_COLOR is honoured (the weight picture falls back to characters), and Typer's
shell completion is on."""

import re
import subprocess
import sys

from typer.testing import CliRunner

from andrea_cli.cli import app

runner = CliRunner()
COLOUR = re.compile(r"\x1b\[[0-9;]*(3[0-9]|4[0-9]|9[0-7]|10[0-7])(;[0-9;]*)?m")  # a foreground or background colour
ARGS = ["attend", "--T", "16", "--d-k", "4", "--backend", "numpy", "--show-weights"]


def test_colours_on_a_terminal_and_none_with_no_color():
    coloured = runner.invoke(app, ARGS, env={"FORCE_COLOR": "1", "NO_COLOR": None, "TERM": "xterm-256color"})
    assert coloured.exit_code == 0, coloured.output
    assert COLOUR.search(coloured.output), "FORCE_COLOR alone: the heatmap is drawn in colour"
    plain = runner.invoke(app, ARGS, env={"FORCE_COLOR": "1", "NO_COLOR": "1", "TERM": "xterm-256color"})
    assert plain.exit_code == 0, plain.output
    assert not COLOUR.search(plain.output), "NO_COLOR: no colour codes at all"
    assert "scale: '.' 0.0001 .. '@' 1 (log); blank: exactly 0 (masked)" in plain.output
    assert re.search(r"^\|[ .:\-=+*#%@]+\|$", plain.output, re.M), "the weights drawn as characters"


def test_completion_is_offered_and_completes_commands():
    help_text = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    assert "--install-completion" in help_text and "--show-completion" in help_text
    done = subprocess.run([sys.executable, "-m", "andrea_cli"], capture_output=True, text=True, timeout=60,
                          env={"_ANDREA_COMPLETE": "complete_bash", "COMP_WORDS": "andrea comp", "COMP_CWORD": "1",
                               "PATH": ""})
    assert done.stdout.split() == ["compare-scaling"], done
