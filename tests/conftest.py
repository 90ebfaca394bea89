"""Shared test helpers: a fixed console width, the CLI runner, and the GPU gate."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from typer.testing import CliRunner

from andrea_cli.cli import app, main

os.environ["COLUMNS"] = "120"  # Rich tables wrap at the terminal width: keep test output stable


class Cli:
    def __init__(self):
        self.runner = CliRunner()

    def __call__(self, *args: str):
        return self.runner.invoke(app, [str(a) for a in args])

    def json(self, *args: str) -> dict:
        result = self(*args, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)


@pytest.fixture(scope="session")
def isolated_cache(tmp_path_factory):
    """A fresh CPU-build cache for the session: tests see real compiles and never litter ~/.cache."""
    path = tmp_path_factory.mktemp("andrea-cpu-cache")
    old = os.environ.get("ANDREA_CACHE_DIR")
    os.environ["ANDREA_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        del os.environ["ANDREA_CACHE_DIR"]
    else:
        os.environ["ANDREA_CACHE_DIR"] = old


@pytest.fixture
def cli() -> Cli:
    return Cli()


@pytest.fixture
def run_main(capsys):
    """Run the real entry point (one-line usage errors included); returns (code, stdout, stderr)."""

    def run(*args: str):
        with pytest.raises(SystemExit) as exit_info:
            main([str(a) for a in args])
        captured = capsys.readouterr()
        return exit_info.value.code, captured.out, captured.err

    return run


@pytest.fixture
def numeric_gradient():
    """Central finite differences of a float64 scalar function f() with respect to the array x,
    perturbed in place one entry at a time: truncation ~EPS^2, cancellation ~1e-16 / EPS."""
    eps = 1e-6

    def gradient(f, x):
        grad = np.zeros_like(x)
        for index in np.ndindex(x.shape):
            saved = x[index]
            x[index] = saved + eps
            up = f()
            x[index] = saved - eps
            down = f()
            x[index] = saved
            grad[index] = (up - down) / (2 * eps)
        return grad

    return gradient


def pytest_collection_modifyitems(config, items):
    """`gpu` tests run only where a CUDA device answers; elsewhere they skip with cupy's reason.
    (cupy imports fine without a GPU, so an import check would not be enough.)"""
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    from andrea_cli.backends.cuda import cuda_availability

    status = cuda_availability()
    if status.ok:
        return
    skip = pytest.mark.skip(reason=f"no GPU: {status.reason}")
    for item in gpu_items:
        item.add_marker(skip)
