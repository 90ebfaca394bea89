"""Python's keywords checked as the command line checks its options: a value of the option's
type, or one AndreaError line naming the keyword, its flag and an example."""

from __future__ import annotations

import os
import types
import typing
from pathlib import Path

from andrea_cli.errors import AndreaError, shown

KINDS = {int: ("a whole number", "1024"), float: ("a number", "2.0"), str: ("text", "'causal'"),
         bool: ("True or False", "True"), Path: ("a file path", "'file.npy'")}
LIST_KINDS = {int: ("whole numbers (one or a list)", "[64, 128]"), str: ("names (one or a list)", "['numpy']")}


def convert(value, hint):
    """value as the type `hint`, or ValueError. A single item is a list of one (T=64: T=[64])."""
    import numpy as np  # here, not at the top: the command line starts without NumPy

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return convert(value, arg)
            except ValueError:
                pass
        raise ValueError(hint)
    if origin is list:
        try:
            return [convert(value, args[0])]
        except ValueError:
            pass
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise ValueError(hint)
        return [convert(item, args[0]) for item in value]
    if hint is bool and isinstance(value, (bool, np.bool_)):
        return bool(value)
    is_bool = isinstance(value, (bool, np.bool_))
    if hint is int and isinstance(value, (int, np.integer)) and not is_bool:
        return int(value)
    if hint is float and isinstance(value, (int, float, np.integer, np.floating)) and not is_bool:
        return float(value)
    if hint is str and isinstance(value, str):
        return value
    if hint is Path and isinstance(value, (str, os.PathLike)):
        return Path(value)
    raise ValueError(hint)


def kind_of(hint) -> tuple[str, str]:
    """What a keyword of this type takes, in words, and an example."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    first = next(a for a in (typing.get_args(hint) if union else (hint,)) if a is not type(None))
    if typing.get_origin(first) is list:
        return LIST_KINDS[typing.get_args(first)[0]]
    return KINDS.get(first, (getattr(first, "__name__", str(first)), "..."))


def check_keyword(name: str, value, hint, flags: tuple[str, ...], default=None, kind: tuple[str, str] | None = None):
    """value converted to `hint`, or an AndreaError such as "seed=1.5: --seed takes a whole
    number; e.g. seed=0" (the example: the option's own default where it has one)."""
    try:
        return convert(value, hint)
    except ValueError:
        what, example = kind or kind_of(hint)
        if kind is None and default is not None and not isinstance(default, bool):
            example = repr(default)
        if not flags:
            raise AndreaError(f"{name}={shown(value)}: pass {what}") from None
        raise AndreaError(f"{name}={shown(value)}: {flags[0]} takes {what}; e.g. {name}={example}") from None
