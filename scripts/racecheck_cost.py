"""What racecheck costs: `andrea verify --quick` and `andrea verify --racecheck --quick` on the CPU
build, one after the other in this run, each with its build already cached (a first, untimed run
of each compiles it). Prints both wall-clock times and their ratio (the README quotes it; the
target is at most 10x). Takes minutes on a 2-core machine."""

from __future__ import annotations

import subprocess
import sys
import time

QUICK = [sys.executable, "-m", "andrea_cli", "verify", "--backend", "cpu", "--quick", "--json"]


def timed(args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    code = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
    return time.perf_counter() - start, code


def main() -> int:
    runs = {"verify --quick": QUICK, "verify --racecheck --quick": QUICK + ["--racecheck"]}
    for args in runs.values():  # compile (or find in the cache) each build first
        warm = QUICK[:6] + ["--T", "8", "--d-k", "8"] + [a for a in args if a == "--racecheck"]
        subprocess.run(warm, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    seconds = {}
    for name, args in runs.items():
        seconds[name], code = timed(args)
        print(f"{name:28s} {seconds[name]:7.1f} s  (exit {code})", flush=True)
        if code != 0:
            print(f"{name} did not pass: the cost of a failing sweep is not the cost of racecheck")
            return 1
    ratio = seconds["verify --racecheck --quick"] / seconds["verify --quick"]
    print(f"{'racecheck / plain':28s} {ratio:7.1f}x  (target: at most 10x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
