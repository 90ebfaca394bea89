"""The issue's "busy machine" check, as one command: `andrea verify --backend cpu --quick` with
--racecheck and with --sanitize, RUNS times in a row each, while two other CPU-bound processes
keep every core of a 2-core machine taken. A correct kernel file must pass every run: the
watchdog judges progress, not wall time, so a slow machine never makes a kernel "endless".

    python scripts/racecheck_busy.py          # 5 runs of each
    python scripts/racecheck_busy.py 3 --racecheck

Prints each run's verdict and time, the load average while it ran, and a last line with the
count that passed; exits 1 if any run did not."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time

RUNS = 5
BUSY_PROCESSES = 2
QUICK = [sys.executable, "-m", "andrea_cli", "verify", "--backend", "cpu", "--quick", "--json"]


def spin() -> None:  # a process that only burns CPU until it is stopped
    while True:
        pass


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv and argv[0].isdigit() else RUNS
    tools = [a for a in argv if a in ("--racecheck", "--sanitize")] or ["--racecheck", "--sanitize"]
    busy = [multiprocessing.Process(target=spin, daemon=True) for _ in range(BUSY_PROCESSES)]
    for p in busy:
        p.start()
    failed = 0
    try:
        for tool in tools:
            for n in range(1, runs + 1):
                start = time.perf_counter()
                done = subprocess.run(QUICK + [tool], capture_output=True, text=True, check=False)
                seconds, load = time.perf_counter() - start, os.getloadavg()[0]
                verdict = "pass" if done.returncode == 0 else f"FAIL (exit {done.returncode})"
                failed += done.returncode != 0
                print(f"verify --quick {tool} run {n}/{runs}: {verdict} in {seconds:.1f} s, load {load:.1f}",
                      flush=True)
                if done.returncode != 0:
                    print("  " + (done.stderr.strip().splitlines() or ["(no message)"])[-1])
    finally:
        for p in busy:
            p.terminate()
    total = runs * len(tools)
    print(f"{total - failed} of {total} runs passed with {BUSY_PROCESSES} CPU-bound processes beside them")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
