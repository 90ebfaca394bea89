"""What racecheck costs: `andrea verify --quick` and `andrea verify --racecheck --quick` on the CPU
build, each with its build already cached (a first, untimed run of each compiles it), timed in
turns, ROUNDS times, in this one run: on a machine shared with other work the load changes from
minute to minute, so each round's ratio compares two sweeps run back to back. Prints each round,
then the median ratio and the spread (the README quotes them; the target is at most 10x)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

QUICK = [sys.executable, "-m", "andrea_cli", "verify", "--backend", "cpu", "--quick", "--json"]
ROUNDS = 3


def timed(args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    code = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
    return time.perf_counter() - start, code


def main(rounds: int = ROUNDS) -> int:
    runs = {"verify --quick": QUICK, "verify --racecheck --quick": QUICK + ["--racecheck"]}
    for args in runs.values():  # compile (or find in the cache) each build first
        warm = QUICK[:6] + ["--T", "8", "--d-k", "8"] + [a for a in args if a == "--racecheck"]
        subprocess.run(warm, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    ratios = []
    for n in range(1, rounds + 1):
        seconds = {}
        for name, args in runs.items():
            seconds[name], code = timed(args)
            if code != 0:
                print(f"{name} did not pass (exit {code}): the cost of a failing sweep is not the cost of racecheck")
                return 1
        ratios.append(seconds["verify --racecheck --quick"] / seconds["verify --quick"])
        print(f"round {n}: plain {seconds['verify --quick']:6.1f} s, racecheck "
              f"{seconds['verify --racecheck --quick']:6.1f} s, {ratios[-1]:5.1f}x", flush=True)
    print(f"racecheck / plain: median {statistics.median(ratios):.1f}x, spread {min(ratios):.1f}x to "
          f"{max(ratios):.1f}x over {rounds} rounds (target: at most 10x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS))
