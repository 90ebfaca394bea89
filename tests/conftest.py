"""Shared test helpers: a fixed console width, one fresh build cache per run, the CPU build of the
kernel file, the CLI runner, finite differences, and the GPU gate. A fixture that serves one folder
lives in that folder's conftest.py (bench/, bench/bound/)."""

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


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """One fresh CPU-build cache for the whole run, every test's: tests see real compiles (a cold
    cache, as on a fresh clone), share what one of them built, and never litter ~/.cache. The
    environment carries it to the `andrea` and script subprocesses a test starts. Under pytest-xdist
    (-n) the run's workers share one (in the run's base temporary folder, so still fresh per run):
    the build's per-key lock lets one worker compile a key while the other waits for it."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        path = tmp_path_factory.getbasetemp().parent / "andrea-cpu-cache"  # beside the popen-gwN folders
        path.mkdir(exist_ok=True)
    else:
        path = tmp_path_factory.mktemp("andrea-cpu-cache")
    old = os.environ.get("ANDREA_CACHE_DIR")
    os.environ["ANDREA_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        del os.environ["ANDREA_CACHE_DIR"]
    else:
        os.environ["ANDREA_CACHE_DIR"] = old


@pytest.fixture
def quick_builds(monkeypatch):
    """CPU builds at -O0 for this test (build.OPTIMIZATION; its own cache key): for broken copies
    of the kernel file, built only to be caught failing on a few small cases, where -O2's compile
    is most of the test's time. The real kernel file keeps -O2's build, shared by the run."""
    from andrea_cli.backends.cpu_runtime import build

    monkeypatch.setattr(build, "OPTIMIZATION", "-O0")


@pytest.fixture
def snippet_builds(quick_builds):
    """CPU builds at -O0 for a test that compiles a small snippet of its own (RawModule(code=...))
    to check what the runtime accepts or how it passes arguments: the snippet's -O2 compile is
    mostly the runtime's own code, and nothing the test checks depends on the optimiser. Not for
    tests whose subject is the product's -O2 build (the guard page, math functions and rounding,
    test_surface.py), nor for ones that also build the packaged kernel file (which would then be
    a second, -O0 build of it instead of the run's shared one), nor for heavy launches (the -O0
    runtime switches fibers more slowly)."""


@pytest.fixture(scope="session")
def cpu_backend():
    """The packaged kernel file's CPU build, one backend per schedule for the whole run:
    cpu_backend() runs each block's threads in order, cpu_backend("reverse") last to first (a
    missing barrier shows). .device() is what its kernels launch on. Skips where the CPU build
    cannot run (no C++ compiler), with the reason."""
    from andrea_cli.backends.cpu import CpuBackend
    from andrea_cli.kernel_file import packaged_kernel_path

    backends = {}

    def get(schedule: str = "forward") -> CpuBackend:
        if schedule not in backends:
            backend = CpuBackend(packaged_kernel_path(), schedule=schedule)
            status = backend.available()
            if not status.ok:
                pytest.skip(f"the CPU build cannot run here: {status.reason}")
            backends[schedule] = backend
        return backends[schedule]

    return get


@pytest.fixture(scope="session")
def cpu_device(cpu_backend):
    """The packaged kernel file's CPU build, threads in order: get_function(name)(grid, block, args)."""
    return cpu_backend().device()


@pytest.fixture(params=["forward", "reverse"])
def cpu_each_schedule(request, cpu_backend):
    """cpu_backend in each schedule in turn: a test that takes it runs once per schedule."""
    return cpu_backend(request.param)


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
