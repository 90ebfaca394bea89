"""One module per command: options -> the core -> a report (no Typer, no Rich; cli.py parses and render/ draws)."""
