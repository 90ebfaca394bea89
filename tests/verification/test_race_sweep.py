"""verify --racecheck --quick's sweep (verification/race_sweep.py): every kernel of the table runs,
each at a T where its tile loop goes round as often as its barriers need; the barrier-removal
survey (scripts/barrier_removals.py) names every barrier of the file or lists why it is unneeded."""

from __future__ import annotations

import pathlib
import sys

import pytest

from andrea_cli.backends.launch.catalogue import entry_points, row_of
from andrea_cli.verification import run as run_module
from andrea_cli.verification.race_sweep import race_cases, trips_needed

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_case_is_forward_only_and_small():
    cases = race_cases()
    assert 0 < len(cases) <= 10
    assert all(c.T <= 129 for c in cases)


@pytest.mark.slow  # the race sweep's 7 cases on the plain CPU build: seconds
def test_the_race_sweep_runs_every_kernel_at_its_trips(monkeypatch):
    from andrea_cli.backends.cpu_runtime import module
    from andrea_cli.commands.verify import verify_backends
    from andrea_cli.backends.launch.catalogue import resolve_kernel_path

    launched: dict[str, int] = {}  # entry -> the largest T it ran at
    current = {"T": 0}
    real_launch, real_check = module.CpuModule._launch, run_module.check_case

    def launch(self, kernel, grid, block, args, shared_mem):
        launched[kernel.name] = max(launched.get(kernel.name, 0), current["T"])
        return real_launch(self, kernel, grid, block, args, shared_mem)

    def check(backend, case, schedule, seed):
        current["T"] = case.T
        return real_check(backend, case, schedule, seed)

    monkeypatch.setattr(module.CpuModule, "_launch", launch)
    monkeypatch.setattr(run_module, "check_case", check)
    backends = verify_backends("cpu", resolve_kernel_path(None), schedules=("forward",))
    report = run_module.run_verify(backends, race_cases(), kernel_file="packaged")
    assert report.passed
    assert set(entry_points()) <= set(launched), sorted(set(entry_points()) - set(launched))
    for entry, T in launched.items():
        k = row_of(entry)
        d = int(entry.rsplit("_d", 1)[1]) if k.head_sizes else None
        assert T >= trips_needed(k, d), (entry, T, trips_needed(k, d))


@pytest.mark.slow  # one racecheck build and every barrier's removal: minutes (the script prints its runtime)
def test_every_barrier_removed_is_named_or_listed():
    sys.path.insert(0, str(ROOT / "scripts"))
    import barrier_removals

    results = barrier_removals.survey(ROOT / "cuda" / "microgpt_cuda.cu", say=lambda line: None)
    text = (ROOT / "cuda" / "microgpt_cuda.cu").read_text().splitlines()
    assert len(results) == sum("__syncthreads();" in line.split("//")[0] for line in text)
    unaccounted = [r for r in results if r["verdict"] not in ("race", "unneeded")]
    assert not unaccounted, unaccounted
    verdict = {(r["function"], r["line"]): r["verdict"] for r in results}
    # the three the issue found passing clean: kernel6's barrier after fence_proxy_async (wgmma
    # reads B through its descriptor), dp_kernel1's end of loop, the bf16 dq kernel's end of tile
    for function, after in (("attention_fused6", "fence_proxy_async();"), ("dp_kernel1", None),
                            ("attention_backward_dq_kernel2", None)):
        lines = [line for (f, line) in verdict if f == function]
        line = next(n for n in lines if after is None or after in text[n - 2]) if after else max(lines)
        assert verdict[(function, line)] == "race", (function, line)


def test_the_survey_finds_and_switches_each_barrier():
    """The survey's parsing: a barrier statement is found in its function (a comment's is not) and
    becomes the switch its removal turns off."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import barrier_removals

    text = "__device__ void f() {\n    __syncthreads();\n    // __syncthreads();\n}\n"
    assert [(n, f) for n, _, f in barrier_removals.barriers(text)] == [(2, "f")]
    assert "ANDREA_SYNC(0);" in barrier_removals.instrumented(text, [2])


def test_the_survey_says_each_barrier_in_80_columns():
    sys.path.insert(0, str(ROOT / "scripts"))
    import barrier_removals

    detail = ("bf16 backward (d 64): attention_backward_dkdv_kernel2_d64: data race a GPU could expose: write "
              "after read on extern __shared__ memory byte 4096: thread (3) ...")
    row = {"line": 3347, "function": "attention_backward_dkdv_kernel2", "verdict": "race", "detail": detail}
    line = barrier_removals.line_of(row)
    assert len(line) <= 80
    assert line == " 3347 attention_backward_dkdv_ke race      write after read in attention_backwar"
    row = {"line": 12, "function": "f", "verdict": "not reached", "detail": ""}
    assert barrier_removals.line_of(row).split() == ["12", "f", "unreached"]
