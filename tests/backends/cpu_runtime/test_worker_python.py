"""The sanitized and racecheck workers start on the interpreter's own standard library, even when
the folder andrea is installed in holds a module that shadows it (the `test` extra's
universalmutator -> comby -> typing==3.7.4.3 puts a typing.py in site-packages)."""

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import textwrap

import pytest

from andrea_cli.backends.cpu_runtime.errors import CompilerNotFoundError, CpuCompileError, CpuSetupError
from andrea_cli.backends.cpu_runtime.sanitize import SanitizedLibrary
from andrea_cli.backends.cpu_runtime.worker_python import is_stdlib, worker_command, worker_path
from andrea_cli.cli import fail_on
from andrea_cli.errors import AndreaError

ROOT = pathlib.Path(__file__).parents[3]
BASICS = ROOT / "tests" / "kernels" / "basics.cu"
SHADOW = 'raise ImportError("the site-packages typing.py shadowed the standard library\'s")\n'


def test_the_standard_library_comes_first(tmp_path):
    path = worker_path(str(tmp_path))
    stdlib = [i for i, p in enumerate(path) if is_stdlib(p)]
    assert stdlib and stdlib == list(range(len(stdlib)))  # every stdlib entry before any other
    assert os.path.normpath(sysconfig.get_path("stdlib")) in map(os.path.normpath, path)
    assert path[-1] == str(tmp_path)  # the package root, if it was not on the path, last
    assert not is_stdlib(sysconfig.get_path("purelib"))  # site-packages is not the stdlib


def test_the_command_is_isolated_from_pythonpath():
    cmd = worker_command("andrea_cli.backends.cpu_runtime.sanitize", "a", "b")
    assert cmd[:3] == [sys.executable, "-I", "-c"] and cmd[-2:] == ["a", "b"]


def _installed_with_a_shadow(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder laid out as site-packages after `pip install ".[test]"`: the package, its cuda/
    files, and a typing.py that is not the standard library's."""
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "andrea_cli", site / "andrea_cli", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "cuda", site / "andrea_cli" / "cuda", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "typing.py").write_text(SHADOW)
    return site


@pytest.mark.slow  # a ThreadSanitizer and an AddressSanitizer worker: a few seconds each, once built
@pytest.mark.parametrize("flavour", ["racecheck", "sanitize"])
def test_a_worker_launches_past_a_shadowing_typing_module(tmp_path, flavour):
    site = _installed_with_a_shadow(tmp_path)
    script = textwrap.dedent(f"""
        import sys
        # after the standard library, as site-packages is (before the venv's editable andrea)
        sys.path.insert(next(i for i, p in enumerate(sys.path) if "site-packages" in p), {str(site)!r})
        import numpy as np
        from andrea_cli.backends.cpu_runtime.module import CpuModule
        assert CpuModule.__module__ and __import__("andrea_cli").__file__.startswith({str(site)!r})
        mod = CpuModule({str(BASICS)!r}, {flavour}=True)
        x = np.arange(16, dtype=np.float32); y = np.zeros(16, np.float32)
        mod.get_function("scale")((1,), (32,), (x, y, np.int32(16), np.float32(2)))
        assert (y == 2 * x).all(), y
        print("launched")
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert done.returncode == 0 and "launched" in done.stdout, done.stderr[-2000:]


def test_a_worker_that_cannot_start_is_a_setup_problem(monkeypatch):
    # what any breakage of the worker's Python looks like (a module it cannot import): one line
    # naming the worker and the fix, exit 1 (the environment, not the input and not the kernel)
    monkeypatch.setattr(SanitizedLibrary, "WORKER", "andrea_cli.no_such_worker")
    with pytest.raises(CpuSetupError, match=r"^the sanitized worker process could not start \(.*No module named "
                                            r"andrea_cli.no_such_worker\): .*reinstall andrea") as caught:
        SanitizedLibrary(pathlib.Path("/no/such/library.so"), [])
    assert "\n" not in str(caught.value)
    assert fail_on(caught.value).exit_code == 1
    assert fail_on(CompilerNotFoundError("no C++ compiler")).exit_code == 1
    assert fail_on(AndreaError("--T must be >= 1")).exit_code == 2


def test_a_library_the_worker_cannot_load_is_said_as_a_load_here_would_say_it():
    with pytest.raises(CpuCompileError, match=r"^loading the CPU build of library.so failed"):
        SanitizedLibrary(pathlib.Path("/no/such/library.so"), [])
