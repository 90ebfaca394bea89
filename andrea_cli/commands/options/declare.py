"""How an option is declared: an Option (flags, help, default) beside the dataclass field that
holds it. The command line and the Python API both read the declarations from here."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from dataclasses import dataclass, replace
from typing import Any, Callable

from andrea_cli.commands.options.keyword import check_keyword
from andrea_cli.errors import AndreaError


@dataclass(frozen=True)
class Option:
    """One option of a command; its type is the annotation of the field that holds it."""

    flags: tuple[str, ...]  # the command line's names, the long one first; () for a keyword of Python's only
    help: str = ""  # what --help says
    default: Any = None
    metavar: str | None = None  # what --help shows for the value (N, SECONDS), where not the type
    kind: tuple[str, str] | None = None  # what a bad keyword is told the option takes, and an example
    check: Callable[[Any], Any] | None = None  # Python's own check of the keyword, where the type's is not enough
    off_switch: bool = False  # the command line's flag sets the option to False: --no-scale is scale=False

    def but(self, **changes) -> Option:
        """The same option with another help or default (verify's one case, bench's lists)."""
        return replace(self, **changes)

    def field(self):
        """The dataclass field that holds this option's value."""
        return dataclasses.field(default=self.default, metadata={"option": self})

    @property
    def flag(self) -> str:
        return self.flags[0]


def option(*flags: str, help: str, default: Any = None, **more) -> Any:
    """A command's own option, declared where its dataclass field is."""
    return Option(flags, help, default, **more).field()


@dataclass(frozen=True)
class Declared:
    """One field of an options dataclass: its name (Python's keyword), type and Option."""

    name: str
    hint: Any
    option: Option

    def checked(self, value):
        """Python's keyword as this option's value, or an AndreaError naming it."""
        if self.option.check is not None:
            return self.option.check(value)
        return check_keyword(self.name, value, self.hint, self.option.flags, self.option.default, self.option.kind)


def declared(options_class) -> list[Declared]:
    """The options of a command, in the order its --help lists them."""
    hints = typing.get_type_hints(options_class)
    return [Declared(f.name, hints[f.name], f.metadata["option"])
            for f in dataclasses.fields(options_class) if "option" in f.metadata]


def on_command_line(options_class) -> list[Declared]:
    return [d for d in declared(options_class) if d.option.flags]


def from_command_line(options_class, values: dict):
    """The dataclass from what the command line parsed (Typer's values by field name)."""
    for d in on_command_line(options_class):
        if d.option.off_switch:  # the flag given: False; not given: the option's default
            values[d.name] = False if values[d.name] else d.option.default
    return options_class(**values)


def from_keywords(options_class, command: str, keywords: dict):
    """The dataclass from Python's keywords, each checked as its option declares, so that a bad
    one is an AndreaError naming it, as the command line names a bad flag."""
    options = {d.name: d for d in declared(options_class)}
    for name in keywords:
        if name not in options:
            names = ", ".join(sorted(options))
            raise AndreaError(f"{name}: not an option of andrea {command}; the options are {names}")
    return options_class(**{name: options[name].checked(value) for name, value in keywords.items()})


def python_signature(options_class, function) -> inspect.Signature:
    """function's signature for help() and editors: its own parameters (q, k, v), then every
    option as a keyword, with its type and default."""
    own = inspect.signature(function)
    first = [p for p in own.parameters.values() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    keywords = [inspect.Parameter(d.name, inspect.Parameter.KEYWORD_ONLY, default=d.option.default,
                                  annotation=d.hint)
                for d in declared(options_class) if d.name not in own.parameters]
    return own.replace(parameters=first + keywords)


def given_flags(options, leaving_out: tuple[str, ...] = ()) -> list[str]:
    """The flags of the options set to something other than their default, in --help order."""
    return [d.option.flag for d in on_command_line(type(options))
            if d.name not in leaving_out and getattr(options, d.name) not in (d.option.default, [], ())]
