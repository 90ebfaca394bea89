"""Benchmark of the CPU build's runtime: where a launch runs, the emulator's stages, its threads.

    python scripts/bench_cpu_runtime.py                       # every part, this tree only
    python scripts/bench_cpu_runtime.py --baseline 81aac72    # and the same commands on that commit
    python scripts/bench_cpu_runtime.py --part isolation --repeat 5

Parts (each runs the `andrea` CLI in a child process, as a user would):
  isolation  `verify --backend cpu --quick` with each ANDREA_CPU_ISOLATION mode: none (in-process,
             the floor), fork (a forked child per launch, the former way), worker (a long-lived
             launch worker); issue 19's target is worker at most 1.3x none.
  stages     `attend --backend cpu -T 1024`: the kernels' stage times (attend --json).
  threads    `attend --backend cpu --fused -T 4096` with --threads 1 and 2 (when the tree has it),
             and the fused launch in-process with each OS thread's CPU time: how evenly the blocks
             split, which a busy shared machine (no idle second core) does not show in wall time.

Each figure is the median of --repeat runs, interleaved so that a busy moment of a shared
machine falls on every variant alike; CPU time (user + sys of the child and everything it
waited for, worker processes included) is the figure that load disturbs least. The first run
of each tree and command is a warm-up (it may compile) and is not counted. Figures are
measurements of this machine at this moment, not constants: no test asserts them.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent


@dataclass
class Run:
    wall: float
    user: float
    sys: float
    stdout: str

    @property
    def cpu(self) -> float:
        return self.user + self.sys


def run_cli(tree: pathlib.Path, args: list[str], env: dict[str, str]) -> Run:
    """One `python -m andrea_cli ...` from `tree`, timed (wall, and CPU of it and its children)."""
    full_env = {**os.environ, "PYTHONPATH": str(tree), **env}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "andrea_cli", *args], cwd=tree, env=full_env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"`andrea {' '.join(args)}` failed in {tree} (exit {proc.returncode}): "
                         f"{(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    return Run(wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, proc.stdout)


def export_tree(rev: str, into: pathlib.Path) -> pathlib.Path:
    """The files of commit `rev` (git archive), to run the same commands on."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev], capture_output=True,
                             check=True).stdout
    target = into / rev
    target.mkdir()
    with tempfile.TemporaryFile() as f:
        f.write(archive)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(target)
    return target


def measure(variants: dict[str, tuple[pathlib.Path, list[str], dict[str, str]]], repeat: int) -> dict[str, list[Run]]:
    """Every variant `repeat` times, interleaved, after one warm-up run each."""
    runs: dict[str, list[Run]] = {name: [] for name in variants}
    for name, (tree, args, env) in variants.items():
        run_cli(tree, args, env)
    for _ in range(repeat):
        for name, (tree, args, env) in variants.items():
            runs[name].append(run_cli(tree, args, env))
    return runs


def median(values) -> float:
    return statistics.median(list(values))


def print_runs(title: str, runs: dict[str, list[Run]], floor: str | None) -> None:
    print(f"\n{title}")
    print(f"  {'variant':<26}{'wall s':>9}{'user s':>9}{'sys s':>8}{'cpu s':>8}"
          + (f"{'cpu/' + floor:>13}{'wall/' + floor:>14}" if floor else ""))
    base = runs.get(floor) if floor else None
    for name, rs in runs.items():
        wall, user, sys_, cpu = (median(getattr(r, k) for r in rs) for k in ("wall", "user", "sys", "cpu"))
        line = f"  {name:<26}{wall:9.2f}{user:9.2f}{sys_:8.2f}{cpu:8.2f}"
        if base:
            line += f"{cpu / median(r.cpu for r in base):12.2f}x{wall / median(r.wall for r in base):13.2f}x"
        print(line)


def isolation(trees: dict[str, pathlib.Path], repeat: int) -> None:
    args = ["verify", "--backend", "cpu", "--quick"]
    variants = {f"{mode}": (trees["this tree"], args, {"ANDREA_CPU_ISOLATION": mode})
                for mode in ("none", "fork", "worker")}
    for label, tree in trees.items():  # the baseline as it is: its default isolation
        if label != "this tree":
            variants[f"{label} (default)"] = (tree, args, {})
    runs = measure(variants, repeat)
    print_runs(f"`andrea {' '.join(args)}` by ANDREA_CPU_ISOLATION, median of {repeat}", runs, "none")


def stages(trees: dict[str, pathlib.Path], repeat: int) -> None:
    args = ["attend", "--backend", "cpu", "-T", "1024", "--json"]
    runs = measure({label: (tree, args, {}) for label, tree in trees.items()}, repeat)
    print(f"\n`andrea {' '.join(args)}`: stage times in ms, median of {repeat}")
    per_tree = {label: [json.loads(r.stdout)["timings_ms"] for r in rs] for label, rs in runs.items()}
    labels = list(per_tree)
    print(f"  {'stage':<10}" + "".join(f"{label:>14}" for label in labels)
          + (f"{'ratio':>10}" if len(labels) == 2 else ""))
    for stage in per_tree[labels[0]][0]:
        values = [median(t[stage] for t in per_tree[label]) for label in labels]
        ratio = f"{values[0] / values[1]:9.2f}x" if len(values) == 2 and values[1] else ""
        print(f"  {stage:<10}" + "".join(f"{v:14.1f}" for v in values) + ratio)
    print_runs("  the whole command", runs, labels[0] if len(labels) == 2 else None)


def threads(trees: dict[str, pathlib.Path], repeat: int) -> None:
    tree = trees["this tree"]
    args = ["attend", "--backend", "cpu", "--fused", "-T", "4096", "--json"]
    usage = subprocess.run([sys.executable, "-m", "andrea_cli", "attend", "--help"], cwd=tree, capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "200"}).stdout
    if "--threads" not in usage:
        print("\nthreads: this tree's attend has no --threads option (skipped)")
        return
    runs = measure({f"--threads {n}": (tree, args + ["--threads", str(n)], {}) for n in (1, 2)}, repeat)
    print(f"\n`andrea {' '.join(args)} --threads N`, median of {repeat}")
    for name, rs in runs.items():
        print(f"  {name:<12} fused stage {median(json.loads(r.stdout)['timings_ms']['total'] for r in rs):10.1f} ms")
    one, two = (median(json.loads(r.stdout)["timings_ms"]["total"] for r in rs) for rs in runs.values())
    print(f"  speed-up on 2 threads: {one / two:.2f}x (issue 19's target: at least 1.7x)")
    machine_parallelism(repeat)
    print_runs("  the whole command", runs, "--threads 1")


# In-process (ANDREA_CPU_ISOLATION=none), one fused launch at T 4096 on N threads: each OS
# thread's CPU time (/proc/self/task/*/schedstat, ns), so the split of the work shows even when
# a busy machine gives the process no second core.
SPLIT_PROBE = r"""
import os, sys, time, numpy as np
from andrea_cli.backends.cpu_runtime.module import CpuModule
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec

def cpu_by_task():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            out[tid] = int(f.read().split()[0]) / 1e9
    return out

threads, T, d = int(sys.argv[1]), 4096, 64  # attend --fused's kernel at d 64: kernel3, 64 rows a block
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((T, d)).astype(np.float32) for _ in range(3))
out = np.zeros((T, d), np.float32)
kernel = CpuModule(packaged_kernel_path(), threads=threads).get_function("attention_fused_kernel3_d64")
# (L, S, group, scale, the Mask's six fields): L = S = T, one head
args = (q, k, v, out, np.int32(T), np.int32(T), np.int32(1), np.float32(0.125),
        *MaskSpec("causal").kernel_args(T, T, heads=1))
launch = lambda: kernel((T // 64, 1, 1), (128, 1, 1), args, shared_mem=4 * (192 * d + 256))
launch()  # the pool's threads start here
before, wall = cpu_by_task(), time.perf_counter()
launch()
wall, after = time.perf_counter() - wall, cpu_by_task()
busy = sorted((after[t] - before.get(t, 0.0) for t in after), reverse=True)[:threads]
print(wall, *busy)
"""


def machine_parallelism(repeat: int) -> None:
    """What two OS threads can gain here at all now: one busy-loop process alone, then two at once
    (the same work each). On a quiet 2-core machine: about 2x; a shared one gives less."""
    spin = [sys.executable, "-c", "sum(range(30_000_000))"]
    ratios = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(spin, check=True)
        one = time.perf_counter() - start
        start = time.perf_counter()
        procs = [subprocess.Popen(spin) for _ in range(2)]
        for p in procs:
            p.wait()
        ratios.append(2 * one / (time.perf_counter() - start))
    print(f"  the machine itself: two busy processes at once run {median(ratios):.2f}x the work of one in the "
          "same time (2.00x: two idle cores)")


def split(trees: dict[str, pathlib.Path], repeat: int) -> None:
    tree = trees["this tree"]
    env = {**os.environ, "PYTHONPATH": str(tree), "ANDREA_CPU_ISOLATION": "none"}
    print("\nthe fused kernel at T 4096 in-process, each OS thread's CPU seconds (median of "
          f"{repeat}); estimate for idle cores: total CPU / the busiest thread's")
    for n in (1, 2):
        rows = []
        for _ in range(repeat):
            done = subprocess.run([sys.executable, "-c", SPLIT_PROBE, str(n)], cwd=tree, env=env,
                                  capture_output=True, text=True, check=True)
            rows.append([float(x) for x in done.stdout.split()])
        wall = median(r[0] for r in rows)
        per_thread = [median(r[1 + i] for r in rows) for i in range(n)]
        total = sum(per_thread)
        print(f"  --threads {n}: wall {wall:6.2f} s, CPU by thread {' + '.join(f'{c:.2f}' for c in per_thread)}"
              f" = {total:.2f} s; estimated speed-up on {n} idle cores {total / max(per_thread):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("isolation", "stages", "threads", "all"), default="all")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", metavar="REV", help="also run the same commands on this commit")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="andrea-bench-") as tmp:
        trees = {"this tree": ROOT}
        if options.baseline:
            trees = {f"baseline {options.baseline}": export_tree(options.baseline, pathlib.Path(tmp)), **trees}
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
        if options.part in ("isolation", "all"):
            isolation(trees, options.repeat)
        if options.part in ("stages", "all"):
            stages(trees, options.repeat)
        if options.part in ("threads", "all"):
            threads(trees, options.repeat)
            split(trees, options.repeat)
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
