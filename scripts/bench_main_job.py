"""The main job's wait, as a user has it: `andrea attend --d-k 64 --T 1024` (the default backend:
without a GPU the CPU build of the kernel file) in a child process, wall time from start to exit.

    python scripts/bench_main_job.py              # median of 5 warm runs (issue 31's bound: <= 1 s)
    python scripts/bench_main_job.py --repeat 9 -- --plan textbook

The first run is a warm-up (it may compile the kernel file: ~10 s once) and is not counted.
Also printed: CPU time (user + sys of the child and its launch worker), the figure a busy shared
machine disturbs least, and the kernels' own stage total from --json. A measurement of this
machine now, not a constant: no test asserts it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

COMMAND = ["attend", "--d-k", "64", "--T", "1024"]


def run_once(extra: list[str]) -> tuple[float, float, dict]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "andrea_cli", *COMMAND, *extra, "--json"],
                          capture_output=True, text=True, check=False, env=os.environ)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"andrea {' '.join(COMMAND + extra)} failed ({proc.returncode}): {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("extra", nargs="*", help="more attend options, after --")
    args = parser.parse_args()
    run_once(args.extra)  # warm-up: the build, the page cache
    runs = [run_once(args.extra) for _ in range(args.repeat)]
    walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
    doc = runs[-1][2]
    kernels = statistics.median(r[2]["timings_ms"]["total"] for r in runs)
    print(f"andrea {' '.join(COMMAND + args.extra)}: backend {doc['backend']}, "
          f"{', '.join(doc.get('kernels', {}).values()) or 'kernels not named'}")
    print(f"wall  median {statistics.median(walls):.3f} s of {args.repeat} warm runs "
          f"(min {min(walls):.3f}, max {max(walls):.3f})")
    print(f"cpu   median {statistics.median(cpus):.3f} s (user + sys, the launch worker included)")
    print(f"kernels' stage total, median {kernels:.1f} ms; the check: "
          f"{'agrees' if (doc.get('check') or {}).get('agrees', True) else 'NOT the equation'}")


if __name__ == "__main__":
    main()
