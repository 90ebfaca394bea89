"""--help and the command list rewrap a docstring's paragraphs to the terminal: a paragraph wrapped
in the source must not come out with its source line breaks (ragged lines in 80 columns)."""

from typer.testing import CliRunner

from andrea_cli.cli import app, one_line_paragraphs


def test_source_line_breaks_inside_a_paragraph_are_joined():
    doc = """First line of a paragraph
    that goes on here.

    A second paragraph."""
    assert one_line_paragraphs(doc) == "First line of a paragraph that goes on here.\n\nA second paragraph."


def test_the_command_list_fits_80_columns_without_ragged_lines():
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert all(len(line) <= 80 for line in lines)
    generate = [i for i, line in enumerate(lines) if line.startswith("│ generate")][0]
    # the wrapped lines of generate's summary are filled: none ends far short of the box's edge
    # but the last (the source-wrapped docstring left a line at "attending" before)
    summary = [lines[generate]] + [l for l in lines[generate + 1:generate + 6] if l.startswith("│   ")]
    body = [line.rstrip("│ ").rstrip() for line in summary[:-1]]
    assert all(len(line) >= 60 for line in body), body
