"""Mutation testing of `andrea verify`: flip one operator of the kernel file at a time (rules from
universalmutator, the regexp-based mutation tool), run `verify --backend cpu` on the copy, and
count the mutants verify kills. Prints killed / survived / equivalent, each survivor's line, and
the score: killed / (every mutant that is neither equivalent nor invalid).

    python scripts/mutate.py                        # the default sample of the whole file
    python scripts/mutate.py --kernels attention_fused_kernel2 --sample 0   # every mutant of one kernel
    python scripts/mutate.py --list --sample 0      # the mutants only, nothing run
    python scripts/mutate.py --json a.json & python scripts/mutate.py --start 60 --json b.json
                                                    # two halves at once (stop the first at 60)
    python scripts/mutate.py --rescore a.json b.json   # their score, with today's equivalents list

A mutant is
  invalid     it does not compile (NVRTC, or the CPU build): not counted
  equivalent  it compiles to the same PTX as the original (trivially equivalent), or it is
              listed with the reason in scripts/mutate_equivalents.txt: not counted
  killed      verify printed a FAIL line (or stopped with a one-line error about the kernel)
  crashed     verify died of a signal or ended without a verdict: counted, not killed
  hung        verify went quiet far longer than the original takes (Verifier): counted, not killed
  survived    verify passed: --quick, then the full sweep, then (where verify has --sanitize)
              --quick --sanitize
Where verify isolates each launch and stops endless ones itself, a crash or a hang is one of its
FAIL lines, and the mutant is killed like any other.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants import Mutant, generate, kernel_spans, load_equivalents, ptx_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "cuda" / "microgpt_cuda.cu"
EQUIVALENTS = Path(__file__).resolve().parent / "mutate_equivalents.txt"
DEFAULT_SAMPLE = 120
COUNTED = ("killed", "survived", "crashed", "hung")


class Verifier:
    """Runs `andrea verify --backend cpu` on a kernel file in a child process, at nice 10, and reads
    its progress lines (one per case). Stops it at the first FAIL line: one is enough to kill a
    mutant. A mutant that goes quiet for 15 s plus five times as long as the original took over the
    same case is hung. Kinds of run: "quick", "full", "sanitize" (--quick --sanitize)."""

    SLACK_S = 15.0

    def __init__(self, env: dict):
        self.env = env
        self.pace: dict[str, list[float]] = {}  # kind -> the original's seconds per progress line

    def command(self, kernel: Path, kind: str) -> list[str]:
        flags = {"quick": ["--quick"], "full": [], "sanitize": ["--quick", "--sanitize"]}[kind]
        return [sys.executable, "-m", "andrea_cli", "verify", "--backend", "cpu", "--kernel", str(kernel), *flags]

    def calibrate(self, kernel: Path, kind: str) -> None:
        """Time the unmutated kernel file; it must pass."""
        outcome, detail, pace = self._run(self.command(kernel, kind), lambda k: 600.0)
        if outcome != "survived":
            raise SystemExit(f"verify ({kind}) does not pass on the unmutated {kernel.name} ({outcome}: {detail}): "
                             "nothing to measure")
        self.pace[kind] = pace

    def run(self, kernel: Path, kind: str) -> tuple[str, str]:
        pace = self.pace[kind]
        outcome, detail, _ = self._run(self.command(kernel, kind),
                                       lambda k: self.SLACK_S + 5 * (pace[k] if k < len(pace) else max(pace)))
        return outcome, detail

    def _run(self, cmd: list[str], allowed) -> tuple[str, str, list[float]]:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=self.env,
                                cwd=ROOT, start_new_session=True, preexec_fn=lambda: os.nice(10))
        lines: list[str] = []
        times = [time.monotonic()]
        hung = threading.Event()

        def watchdog():
            while proc.poll() is None:
                if time.monotonic() - times[-1] > allowed(len(lines)):
                    hung.set()
                    _stop(proc)
                    return
                time.sleep(0.1)

        threading.Thread(target=watchdog, daemon=True).start()
        try:
            for line in proc.stderr:
                lines.append(line.rstrip())
                times.append(time.monotonic())
                if line.startswith("FAIL"):
                    return "killed", line.strip(), []
            rc = proc.wait()
        finally:
            _stop(proc)
        pace = [b - a for a, b in zip(times, times[1:])]
        tail = lines[-1] if lines else ""
        if hung.is_set():
            return "hung", f"no progress for {allowed(len(lines)):.0f} s after: {tail or 'the start'}", pace
        if rc == 0:
            return "survived", tail, pace
        if rc == 1:
            return "killed", tail, pace
        if rc == 2:  # a one-line error: the build failed (invalid), or the kernel did (killed)
            return ("invalid" if "compil" in tail else "killed"), tail, pace
        return "crashed", f"exit {rc}{f' (signal {-rc})' if rc < 0 else ''} after: {tail or 'the start'}", pace


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def verify_has_sanitize(env: dict) -> bool:
    out = subprocess.run([sys.executable, "-m", "andrea_cli", "verify", "--help"], capture_output=True, text=True,
                         env=env, cwd=ROOT).stdout
    return "--sanitize" in out


def judge(m: Mutant, path: Path, verifier: Verifier, kinds: list[str], original_ptx: str | None,
          equivalents: dict) -> tuple[str, str]:
    """Classify one mutant: cheap checks first (the equivalents list, NVRTC), then verify: quick,
    full, and sanitized, each only if the one before it passed."""
    reason = equivalents.get((m.kernel, m.original_code(), m.shown())) or \
        equivalents.get(("", m.original_code(), m.shown()))
    if reason:
        return "equivalent", reason
    if original_ptx is not None:
        ptx, error = ptx_of(path)
        if error:
            return "invalid", error
        if ptx == original_ptx:
            return "equivalent", "compiles to the same PTX as the original (trivial compiler equivalence)"
    outcome, detail = "survived", ""
    for kind in kinds:
        outcome, detail = verifier.run(path, kind)
        if outcome != "survived":
            return outcome, f"{kind}: {detail}"
    return outcome, detail


def parse_lines(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    first, _, last = text.partition("-")
    return int(first), int(last or first)


def select(mutants: list[Mutant], args) -> list[Mutant]:
    """A uniform random sample with a fixed seed: the score it gives estimates the whole set's."""
    if args.sample and len(mutants) > args.sample:
        mutants = sorted(random.Random(args.seed).sample(mutants, args.sample), key=lambda m: (m.line, m.mutated))
    return mutants


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% interval for a proportion measured on a sample (Wilson score interval)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", type=Path, default=KERNEL, help="the kernel file to mutate")
    ap.add_argument("--kernels", help="comma-separated kernel (or __device__ function) names to mutate; default all")
    ap.add_argument("--lines", help="only lines FIRST-LAST of the file")
    ap.add_argument("--sample", type=int, default=DEFAULT_SAMPLE, help=f"mutants drawn at random, 0 = all [{DEFAULT_SAMPLE}]")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed")
    ap.add_argument("--start", type=int, default=0, help="begin at this index of the selection (resume, or split a campaign)")
    ap.add_argument("--mutant", action="append", help="run only the mutant whose mutated line reads exactly this (repeatable)")
    ap.add_argument("--quick", action="store_true", help="verify --quick only, not then the full sweep")
    ap.add_argument("--no-sanitize", action="store_true", help="do not rerun survivors under verify --sanitize")
    ap.add_argument("--equivalents", type=Path, default=EQUIVALENTS, help="the reasoned list of equivalent mutants")
    ap.add_argument("--list", action="store_true", help="print the selected mutants and stop")
    ap.add_argument("--json", type=Path, help="write every mutant's outcome to this file (rewritten after each)")
    ap.add_argument("--rescore", type=Path, nargs="+", metavar="JSON",
                    help="run nothing: merge these --json files, apply the equivalents list again, print the score")
    return ap.parse_args(argv)


def choose(args: argparse.Namespace, text: str) -> list[Mutant]:
    spans = kernel_spans(text)
    wanted = args.kernels.split(",") if args.kernels else None
    unknown = [k for k in wanted or [] if k not in spans]
    if unknown:
        raise SystemExit(f"--kernels: {', '.join(unknown)} not in {args.kernel.name} (it has {', '.join(spans)})")
    mutants = generate(text, spans, kernels=wanted, lines=parse_lines(args.lines))
    return [m for m in mutants if m.shown() in args.mutant] if args.mutant else select(mutants, args)


def calibrate(args: argparse.Namespace, verifier: Verifier) -> tuple[str | None, list[str]]:
    """The original's PTX (None without NVRTC) and the kinds of verify run each mutant meets;
    exits when the original does not compile or does not pass."""
    original_ptx, error = ptx_of(args.kernel)
    if error and error.startswith("NVRTC unavailable"):
        print(f"note: {error}; compile errors and equivalent PTX are then found by verify alone", file=sys.stderr)
    elif error:
        raise SystemExit(f"{args.kernel.name} itself {error}")
    kinds = ["quick"] if args.quick else ["quick", "full"]
    if not args.no_sanitize and verify_has_sanitize(verifier.env):
        kinds.append("sanitize")
    for kind in kinds:
        verifier.calibrate(args.kernel, kind)
    return original_ptx, kinds


def summary(results: list[dict], elapsed: float) -> dict:
    counts = {k: sum(r["outcome"] == k for r in results) for k in (*COUNTED, "equivalent", "invalid")}
    counted = sum(counts[k] for k in COUNTED)
    low, high = wilson(counts["killed"], counted)
    score = counts["killed"] / counted if counted else 1.0
    print()
    for kind in ("survived", "crashed", "hung"):
        for r in (r for r in results if r["outcome"] == kind):
            mm = r["mutant"]
            print(f"{kind.upper()} {mm['kernel']} line {mm['line']}: {mm['mutated']}   [{r['detail']}]")
    print(", ".join(f"{v} {k}" for k, v in counts.items()))
    print(f"mutation score: {counts['killed']}/{counted} = {score:.1%} of non-equivalent mutants killed "
          f"(95% interval {low:.1%}-{high:.1%}), {elapsed:.0f} s")
    return {"counts": counts, "score": score, "interval": [low, high]}


def rescore(files: list[Path], equivalents: dict) -> int:
    """The score of finished campaigns, with survivors since shown equivalent moved out of it."""
    results = [r for f in files for r in json.loads(f.read_text())["results"]]
    for r in results:
        m = r["mutant"]
        reason = equivalents.get((m["kernel"], m["original"], m["mutated"])) or equivalents.get(("", m["original"], m["mutated"]))
        if reason and r["outcome"] != "equivalent":
            r["outcome"], r["detail"] = "equivalent", reason
    summary(results, sum(r["seconds"] for r in results))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally clauses stop verify and clean up
    if args.rescore:
        return rescore(args.rescore, load_equivalents(args.equivalents))
    text = args.kernel.read_text()
    mutants = choose(args, text)[args.start:]
    if args.list:
        for n, m in enumerate(mutants):
            print(f"{n:4d} {m.where()}: {m.shown()}")
        print(f"{len(mutants)} mutants")
        return 0

    equivalents = load_equivalents(args.equivalents)
    work = Path(tempfile.mkdtemp(prefix="andrea-mutate-"))
    env = dict(os.environ, ANDREA_CACHE_DIR=str(work / "cache"), PYTHONPATH=str(ROOT))
    try:
        verifier = Verifier(env)
        original_ptx, kinds = calibrate(args, verifier)
        print(f"{len(mutants)} mutants of {args.kernel.name} ({args.kernels or 'every kernel'}, "
              f"{'lines ' + args.lines if args.lines else 'all lines'}); verify runs, each if the one before "
              f"passed: {', '.join(kinds)}", flush=True)
        results: list[dict] = []
        start = time.monotonic()
        for n, m in enumerate(mutants):
            path = work / f"m{n}" / args.kernel.name
            path.parent.mkdir()
            path.write_text(m.apply(text))
            began = time.monotonic()
            outcome, detail = judge(m, path, verifier, kinds, original_ptx, equivalents)
            results.append({"mutant": m.to_json(), "outcome": outcome, "detail": detail,
                            "seconds": round(time.monotonic() - began, 1)})
            print(f"{n + 1:4d}/{len(mutants)} {outcome:10s} {m.where()}: {m.shown()}", flush=True)
            if args.json:
                args.json.write_text(json.dumps({"kernel": str(args.kernel), "sample": args.sample, "seed": args.seed,
                                                 "verify_runs": kinds, "results": results}, indent=1))
        totals = summary(results, time.monotonic() - start)
        if args.json:
            doc = json.loads(args.json.read_text()) if results else {}
            args.json.write_text(json.dumps({**doc, **totals}, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
