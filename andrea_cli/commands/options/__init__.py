"""Each command's options, declared once: a dataclass per command (by_command.py) whose fields
carry their Option (flags, default, help; declare.py), the shared ones written in shared.py.
cli.py builds the Typer commands from them, api.py the functions' checked keywords (keyword.py).

Adding an option to attend is one field of AttendOptions, and the code in commands/attend.py
that reads it: --help, the command line, the Python keyword and its check follow."""

from andrea_cli.commands.options.by_command import (BOUND_TAKES, AttendOptions, BenchOptions, GenerateOptions,
                                                    GradOptions, InfoOptions, RunOptions, ScalingOptions,
                                                    VerifyOptions)
from andrea_cli.commands.options.declare import (Declared, Option, declared, from_command_line, from_keywords,
                                                 given_flags, on_command_line, python_signature)
from andrea_cli.commands.options.keyword import check_keyword

__all__ = ["AttendOptions", "BenchOptions", "GenerateOptions", "GradOptions", "InfoOptions", "RunOptions",
           "ScalingOptions", "VerifyOptions", "BOUND_TAKES", "Declared", "Option", "declared", "on_command_line", "from_command_line",
           "from_keywords", "given_flags", "python_signature", "check_keyword"]
