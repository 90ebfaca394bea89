"""The command line that starts a sanitized or racecheck worker: this interpreter, its own
standard library first, then the rest of this process's sys.path.

The worker cannot inherit sys.path through PYTHONPATH: that puts whatever it names before the
standard library, and an installed package root (site-packages) can hold a backport that
shadows it (the `test` extra's universalmutator -> comby -> typing==3.7.4.3 installs a
site-packages/typing.py that breaks Python 3.10+). So the worker starts isolated (-I: no
PYTHON* variables, no user site, no current folder) and sets its sys.path from this list."""

from __future__ import annotations

import os
import pathlib
import sys
import sysconfig


def _stdlib_dirs() -> set[str]:
    """The folders of the interpreter's own standard library (its zip, lib-dynload included)."""
    dirs = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
    dirs |= {os.path.join(d, "lib-dynload") for d in list(dirs)}
    return {os.path.normpath(d) for d in dirs if d}


def is_stdlib(entry: str) -> bool:
    """Whether a sys.path entry is the standard library's (not a site-packages or other folder)."""
    path = os.path.normpath(entry or ".")
    if path in _stdlib_dirs():
        return True
    base = os.path.normpath(sys.base_prefix)
    return path.endswith(".zip") and path.startswith(base) and "site-packages" not in path


def worker_path(package_root: str) -> list[str]:
    """This process's sys.path, the standard library moved first; the folder andrea_cli was
    imported from last if it is not there already (an editable install may find it otherwise)."""
    here = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    ordered = [p for p in here if is_stdlib(p)] + [p for p in here if not is_stdlib(p)]
    if package_root not in ordered:
        ordered.append(package_root)
    return list(dict.fromkeys(ordered))


def worker_command(module: str, *args: str) -> list[str]:
    """`python -I -c ...` running `module` as __main__ with sys.path from worker_path()."""
    package_root = str(pathlib.Path(__file__).resolve().parents[3])
    code = (f"import sys; sys.path[:] = {worker_path(package_root)!r}; import runpy; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-I", "-c", code, *args]
