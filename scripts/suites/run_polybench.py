"""PolyBench/GPU's CUDA benchmarks on the CPU build, unchanged: each benchmark's kernels go to
andrea_cli.RawModule as written (its .cu, host functions blanked), and its own main runs them
(host.py), then its own CPU reference and its own compareResults.

    PYTHONPATH=$PWD python scripts/suites/run_polybench.py --root ~/src/polybenchGpu [--only GEMM,LU]

--root: a checkout of https://github.com/sgrauerg/polybenchGpu (its CUDA/ and common/ folders).
Sizes are cut (every dataset dimension to --size, time steps to --steps) so the CPU build runs
each in seconds; a benchmark passes when its compareResults counts no output beyond its
threshold. Prints one line per benchmark and the totals.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from cuda_source import device_half  # noqa: E402
from host import HostBuildError, HostSource, build_host, run_program  # noqa: E402

from andrea_cli import RawModule  # noqa: E402
from andrea_cli.backends.cpu_runtime.errors import CpuRuntimeError  # noqa: E402

_STANDARD = re.compile(r"ifdef\s+STANDARD_DATASET(.*?)#\s*endif", re.S)
_DEFINE = re.compile(r"#\s*define\s+(\w+)\s+(\d+)")
# compareResults' line (DOITGEN and GEMVER print the count alone)
_MISMATCH = re.compile(r"(?:Non-Matching CPU-GPU Outputs Beyond Error Threshold of\s*([\d.]+) Percent|"
                       r"Number of misses):\s*(\d+)")
_STEPS = ("TSTEPS", "TMAX")
# Benchmarks wrong as written, found by reading them: the cause a failure of theirs has.
KNOWN_BUGS = {
    "GESUMMV": "its own bug: the kernel adds into tmp and y (+=), which its host code copies to the device "
               "uninitialized (posix_memalign): right only where malloc happens to hand back zeroed memory",
    "MVT": "its own bug: blocks of 32 x 8 threads for a kernel indexed by x alone, so 8 threads add "
           "into each x1[i] and x2[i] (a data race on a GPU; 8 times the sum here)",
}
# Host code that nvcc rejects too, and the least that makes it build (the kernels are untouched):
# DOITGEN calls rtclock() without including polybench.h, where it is declared.
HOST_FIXES = {"DOITGEN": ("double rtclock();\n", ("common/polybench.c",))}


def dataset_defines(cu: pathlib.Path, size: int, steps: int) -> list[str]:
    """-D for every dimension of the benchmark's standard dataset, cut to size (time steps to
    steps), and N, which skips the header's own choice."""
    header = cu.with_suffix(".cuh")
    if not header.exists():
        return []
    found = _STANDARD.search(header.read_text())
    names = dict(_DEFINE.findall(found.group(1))) if found else {}
    out = [f"{n}={min(int(v), steps if n in _STEPS else size)}" for n, v in names.items()]
    if "N" not in names:
        out.append(f"N={size}")
    return out


def run_one(cu: pathlib.Path, root: pathlib.Path, size: int, steps: int, work: pathlib.Path) -> tuple[str, str, str]:
    """(compiles, verdict, detail) for one benchmark."""
    defines = dataset_defines(cu, size, steps)
    options = [f"-D{d}" for d in defines] + ["-I", str(cu.parent)]
    try:
        kernels = RawModule(code=device_half(cu.read_text()), options=options)
    except CpuRuntimeError as exc:
        return "no", "-", str(exc).splitlines()[0]
    try:
        prelude, extra = HOST_FIXES.get(cu.parent.name, ("", ()))
        lib = build_host([HostSource(cu, cuda=True), *(HostSource(root / e) for e in extra)], [root / "common"],
                         defines, work, prelude)
    except HostBuildError as exc:
        return "yes", "not run", str(exc)
    result = run_program(kernels, lib, [], cwd=work, limit_s=300)
    counts = _MISMATCH.findall(result.output)
    if result.rc is None:
        return "yes", "FAIL", f"ran past 300 s ({result.seconds:.0f} s)"
    if result.rc != 0 or not counts:
        return "yes", "FAIL", f"exit {result.rc}: {result.output.strip().splitlines()[-1:] or 'no output'}"
    bad = sum(int(n) for _, n in counts)
    threshold = f"beyond {counts[0][0]}%" if counts[0][0] else "missed"
    detail = f"{bad} outputs {threshold} ({result.seconds:.1f} s)"
    if result.launch_error:
        return "yes", "FAIL", f"andrea: {result.launch_error}; its check: {detail}"
    if bad:
        return "yes", "FAIL", f"{detail}; {KNOWN_BUGS.get(cu.parent.name, 'no known cause')}"
    return "yes", "PASS", detail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=pathlib.Path, required=True, help="a checkout of sgrauerg/polybenchGpu")
    parser.add_argument("--only", default="", help="comma-separated benchmark folders (e.g. GEMM,LU)")
    parser.add_argument("--size", type=int, default=256, help="every dataset dimension cut to this (default 256)")
    parser.add_argument("--steps", type=int, default=2, help="time steps cut to this (default 2)")
    args = parser.parse_args(argv)
    folder = args.root / "CUDA"
    if not folder.is_dir():
        parser.error(f"--root {args.root}: no CUDA/ folder there (a checkout of sgrauerg/polybenchGpu?)")
    wanted = {w.strip().upper() for w in args.only.split(",") if w.strip()}
    benchmarks = sorted(p for p in folder.glob("*/*.cu") if not wanted or p.parent.name.upper() in wanted)
    totals = {"compile": 0, "pass": 0}
    with tempfile.TemporaryDirectory(prefix="andrea-polybench-") as tmp:
        for cu in benchmarks:
            compiles, verdict, detail = run_one(cu, args.root.resolve(), args.size, args.steps, pathlib.Path(tmp))
            totals["compile"] += compiles == "yes"
            totals["pass"] += verdict == "PASS"
            print(f"{cu.parent.name:<10} compiles: {compiles:<3} {verdict:<7} {detail}", flush=True)
    print(f"PolyBench-GPU: {len(benchmarks)} benchmarks, {totals['compile']} compile as written, "
          f"{totals['pass']} pass")
    return 0 if totals["pass"] == len(benchmarks) else 1


if __name__ == "__main__":
    sys.exit(main())
