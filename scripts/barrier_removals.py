"""Every `__syncthreads()` of the kernel file, removed one at a time: is it named as a race by
`verify --racecheck --quick`'s cases? Prints one line per barrier (line, kernel function, verdict)
and its runtime; exit 1 when a barrier survives that BARRIERS_UNNEEDED does not list with its
reason, or when one that it lists is named after all (the list would be stale).

Efficient, not parallel: ONE racecheck build of a copy of the file in which barrier number i
runs unless ANDREA_REMOVED_BARRIER=i (the worker process of each removal reads it; removing it
at run time is removing it from the source for every thread that reaches it), a first run of the
race sweep that records which cases reach which barrier, then per barrier a fresh worker and only
the cases that reach it.

    python scripts/barrier_removals.py [--kernel FILE] [--only LINE ...]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
UNNEEDED = ROOT / "scripts" / "barriers_unneeded.txt"  # "LINE-TEXT-KEY | reason", see the file
BARRIER = re.compile(r"__syncthreads\(\);")
RACE = "data race a GPU could expose"

# Put at the top of the copy: the hook each barrier goes through (the CPU build only; the runtime's
# RaceQuiet keeps ThreadSanitizer out of the hook's own bookkeeping).
PRELUDE = r"""
#ifdef ANDREA_CPU_BUILD
#include <cstdio>
#include <cstdlib>
static int andrea_env_int(const char* name) { const char* s = std::getenv(name); return s ? std::atoi(s) : -1; }
static const int andrea_removed_barrier = andrea_env_int("ANDREA_REMOVED_BARRIER");
static bool andrea_barrier_seen[4096];
static bool andrea_barrier(int i) {
    andrea::RaceQuiet quiet;
    const char* log = std::getenv("ANDREA_BARRIER_LOG");
    if (log && !andrea_barrier_seen[i]) {
        andrea_barrier_seen[i] = true;
        if (FILE* f = std::fopen(log, "a")) { std::fprintf(f, "%d\n", i); std::fclose(f); }
    }
    return i != andrea_removed_barrier;
}
#define ANDREA_SYNC(i) do { if (andrea_barrier(i)) __syncthreads(); } while (0)
#else
#define ANDREA_SYNC(i) __syncthreads()
#endif
"""


def barriers(text: str) -> list[tuple[int, str, str]]:
    """(line number, the line, the function it is in) of each `__syncthreads();` statement."""
    found, function = [], "?"
    for n, line in enumerate(text.splitlines(), 1):
        if re.match(r"^(?:extern \"C\" )?(?:__global__|__device__|static|inline)", line):
            names = [w for w in re.findall(r"(\w+)\s*\(", line) if w != "__launch_bounds__"]
            function = names[0] if names else function
        code = line.split("//", 1)[0]
        if BARRIER.search(code):
            found.append((n, line.strip(), function))
    return found


def instrumented(text: str, lines: list[int]) -> str:
    out = text.splitlines(keepends=True)
    for i, n in enumerate(lines):
        code, sep, comment = out[n - 1].partition("//")
        out[n - 1] = BARRIER.sub(f"ANDREA_SYNC({i});", code, count=1) + sep + comment
    return PRELUDE + "".join(out)


def unneeded() -> dict[str, str]:
    """{"function: line text": reason} of the barriers that are known not to be needed."""
    listed = {}
    if UNNEEDED.exists():
        for line in UNNEEDED.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                key, _, reason = line.partition(" | ")
                listed[key.strip()] = reason.strip()
    return listed


def run_cases(copy: pathlib.Path, cases, removed: int | None, log: str | None):
    """verify's run of these cases on a fresh racecheck worker; the errors it reports."""
    from andrea_cli.commands.verify import verify_backends
    from andrea_cli.verification import run_verify

    os.environ["ANDREA_REMOVED_BARRIER"] = str(-1 if removed is None else removed)
    if log:
        os.environ["ANDREA_BARRIER_LOG"] = log
    else:
        os.environ.pop("ANDREA_BARRIER_LOG", None)
    backends = verify_backends("cpu", copy, racecheck=True, schedules=("forward",))
    try:
        report = run_verify(backends, cases, kernel_file=str(copy))
    finally:
        for _, backend in backends:
            getattr(backend, "close", lambda: None)()
    return [r.error or "" for r in report.results if not r.passed]


def short(detail: str) -> str:
    """"backward: dv_kernel1: data race a GPU could expose: read after write on ..." -> "read after
    write in dv_kernel1" (the kind first: a cut line keeps it); any other detail as it is."""
    m = re.search(r"(\w+): data race a GPU could expose: (\w+ after \w+)", detail)
    return f"{m.group(2)} in {m.group(1)}" if m else detail


def line_of(row: dict) -> str:
    """One barrier's verdict in 80 columns: line, function, verdict, what names it."""
    verdict = {"not reached": "unreached"}.get(row["verdict"], row["verdict"])
    return f"{row['line']:5d} {row['function'][:26]:26s} {verdict:9s} {short(row['detail'])}"[:80]


def survey(kernel: pathlib.Path, only: list[int] | None = None, say=print) -> list[dict]:
    """One dict per barrier: line, text, function, verdict (race / unneeded / SURVIVOR / not reached
    / STALE), detail."""
    from andrea_cli.verification.race_sweep import race_cases

    text = kernel.read_text()
    found = barriers(text)
    cases = race_cases()
    listed = unneeded()
    with tempfile.TemporaryDirectory(prefix="andrea-barriers-") as tmp:
        copy = pathlib.Path(tmp) / kernel.name
        copy.write_text(instrumented(text, [n for n, _, _ in found]))
        reached: dict[int, list[int]] = {}
        for c, case in enumerate(cases):  # which cases reach which barrier (nothing removed)
            log = pathlib.Path(tmp) / f"reached{c}.txt"
            errors = run_cases(copy, [case], None, str(log))
            if errors:
                raise SystemExit(f"the unchanged file fails {case.label()}: {errors[0]}")
            for i in {int(x) for x in log.read_text().split()} if log.exists() else ():
                reached.setdefault(i, []).append(c)
        results = []
        for i, (n, line, function) in enumerate(found):
            if only and n not in only:
                continue
            key = f"{function}: {line}"
            row = {"line": n, "text": line, "function": function, "detail": ""}
            if i not in reached:
                row["verdict"] = "not reached"
            else:
                errors = run_cases(copy, [cases[c] for c in reached[i]], i, None)
                race = next((e for e in errors if RACE in e), None)
                if race:
                    row["verdict"], row["detail"] = ("STALE" if key in listed else "race"), race
                elif key in listed:
                    row["verdict"], row["detail"] = "unneeded", listed[key]
                else:
                    row["verdict"], row["detail"] = "SURVIVOR", (errors[0] if errors else "passes clean")
            say(line_of(row))
            results.append(row)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", type=pathlib.Path, default=ROOT / "cuda" / "microgpt_cuda.cu")
    parser.add_argument("--only", type=int, nargs="*", help="only the barriers on these lines")
    args = parser.parse_args()
    start = time.perf_counter()
    results = survey(args.kernel, args.only)
    bad = [r for r in results if r["verdict"] in ("SURVIVOR", "not reached", "STALE")]
    print(f"{len(results)} barriers, {sum(r['verdict'] == 'race' for r in results)} named as races, "
          f"{sum(r['verdict'] == 'unneeded' for r in results)} listed as unneeded, {len(bad)} not accounted "
          f"for; {time.perf_counter() - start:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
