"""Hetero-Mark's CUDA applications on the CPU build, unchanged: each app's kernels go to
andrea_cli.RawModule as written (its *_cuda_benchmark.cu, the host member functions blanked),
and its own main, option parser, CPU reference and Verify() run them (host.py) with `-q -v -w 0`
(no warm-up run: ga's Verify counts the matches of every run against one CPU pass).

    PYTHONPATH=$PWD python scripts/suites/run_heteromark.py --root ~/src/Hetero-Mark [--only bs,fir]

--root: a checkout of https://github.com/NUCAR-DEV/Hetero-Mark. The apps that read an input
file get a small one generated here (seeded) in the format the app's loader reads, since the
suite's data download is gone; be needs OpenCV (its include folder from pkg-config) and a video. An app passes when it exits 0,
andrea raised nothing, and its Verify() printed its success line. One line per app, then totals.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from cuda_source import device_half  # noqa: E402
from host import HostBuildError, HostSource, build_host, run_program  # noqa: E402

from andrea_cli import RawModule  # noqa: E402
from andrea_cli.backends.cpu_runtime.errors import CpuRuntimeError  # noqa: E402


def _aes(d: pathlib.Path, rng: random.Random) -> list[str]:
    (d / "plain.txt").write_text("".join(f"{rng.randrange(256):02x}" for _ in range(16 * 256)))
    (d / "key.txt").write_text("".join(f"{rng.randrange(256):02x}" for _ in range(32)))
    return ["-i", str(d / "plain.txt"), "-k", str(d / "key.txt")]


def _ga(d: pathlib.Path, rng: random.Random) -> list[str]:
    query = "".join(rng.choice("ACGT") for _ in range(64))
    target = [rng.choice("ACGT") for _ in range(8192)]
    for at in (100, 3000, 7000):  # the query planted three times
        target[at:at + len(query)] = query
    (d / "ga.txt").write_text(query + "\n" + "".join(target) + "\n")
    return ["-i", str(d / "ga.txt")]


def _kmeans(d: pathlib.Path, rng: random.Random) -> list[str]:
    centers = [[rng.uniform(-10, 10) for _ in range(8)] for _ in range(5)]
    lines = [" ".join([str(i)] + [f"{c + rng.gauss(0, 1):.4f}" for c in centers[i % 5]]) for i in range(512)]
    (d / "kmeans.txt").write_text("\n".join(lines) + "\n")
    return ["-i", str(d / "kmeans.txt")]


def _knn(d: pathlib.Path, rng: random.Random) -> list[str]:
    # Records of 48 characters: latitude at columns 28-32, longitude at 33-37.
    rows = [f"{'STORM %04d' % i:<28}{rng.uniform(0, 90):5.1f}{rng.uniform(0, 180):5.1f}".ljust(48)
            for i in range(1024)]
    (d / "knn.db").write_text("\n".join(rows) + "\n")
    (d / "knn.list").write_text(str(d / "knn.db") + "\n")
    return ["-i", str(d / "knn.list")]


def _pr(d: pathlib.Path, rng: random.Random) -> list[str]:
    nodes = 256
    rows = [sorted(rng.sample(range(nodes), rng.randrange(1, 8))) for _ in range(nodes)]
    offsets, cols, values = [0], [], []
    for row in rows:
        cols += row
        values += [1.0 / len(row)] * len(row)
        offsets.append(len(cols))
    text = f"{len(cols)} {nodes}\n" + " ".join(map(str, offsets)) + "\n" + " ".join(map(str, cols)) + "\n" + \
        " ".join(f"{v:.6f}" for v in values) + "\n"
    (d / "pr.txt").write_text(text)
    return ["-i", str(d / "pr.txt")]


# app -> (its options, beyond -q -v; an input maker; the line its Verify() prints on success)
APPS = {
    "aes": ([], _aes, "Passed"),
    "be": ([], None, "Passed"),
    "bs": (["-x", "4096"], None, "Passed"),
    "bst": (["-n", "200"], None, None),  # its Verify() is empty
    "ep": (["-m", "20", "-x", "256"], None, "Passed"),
    "fir": (["-x", "256", "-y", "16"], None, "Passed"),
    "ga": ([], _ga, "Passed"),
    "hist": (["-x", "16384"], None, "Passed"),
    "kmeans": ([], _kmeans, "Passed"),
    "knn": ([], _knn, "correctly matched"),
    "pr": (["-m", "20"], _pr, "Passed"),
}


# Host code that no C++ compiler takes, and the least change that makes it C++ (kernels untouched).
HOST_FIXES = {
    "knn_cuda_benchmark.cu": (("reinterpret_cast<int *> gpu_worklist_", "reinterpret_cast<int *>(gpu_worklist_)"),
                              ("reinterpret_cast<int *> cpu_worklist_", "reinterpret_cast<int *>(cpu_worklist_)"),
                              ("findLowest(records_,", "findLowest(&records_,")),
}


# Libraries an app's own build finds with CMake's find_package: their include folders, from
# pkg-config, go to RawModule and the host build as -I (be's header includes <opencv2/opencv.hpp>).
APP_PACKAGES = {"be": "opencv4"}


def package_includes(app: str) -> list[pathlib.Path]:
    """The include folders pkg-config gives for the app's library; none where it has none (the
    compile then names the missing header)."""
    package = APP_PACKAGES.get(app)
    if package is None:
        return []
    try:
        flags = subprocess.run(["pkg-config", "--cflags-only-I", package], capture_output=True, text=True,
                               check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return []
    return [pathlib.Path(f[2:]) for f in flags if f.startswith("-I")]


def host_sources(root: pathlib.Path, app: str) -> list[HostSource]:
    """The app's main, its CUDA benchmark's host half, its shared benchmark code and the suite's
    common library (no tests)."""
    src = root / "src"
    files = [HostSource(p, cuda=p.suffix == ".cu", fixes=HOST_FIXES.get(p.name, ()))
             for p in sorted((src / app / "cuda").glob("*.c[cu]"))]
    files += [HostSource(p) for p in sorted((src / app).glob("*.cc")) if not p.stem.endswith("_test")]
    for common in ("benchmark", "command_line_option", "time_measurement"):
        files += [HostSource(p) for p in sorted((src / "common" / common).glob("*.cc")) if not p.stem.endswith("_test")]
    return files


def run_one(root: pathlib.Path, app: str, work: pathlib.Path) -> tuple[str, str, str]:
    options, make_input, success = APPS[app]
    cu = next((root / "src" / app / "cuda").glob("*_cuda_benchmark.cu"))
    includes = [root, *package_includes(app)]
    try:
        kernels = RawModule(code=device_half(cu.read_text()),
                            options=tuple(arg for d in includes for arg in ("-I", str(d))))
    except CpuRuntimeError as exc:
        return "no", "-", str(exc).splitlines()[0]
    try:
        lib = build_host(host_sources(root, app), includes, [], work)
    except HostBuildError as exc:
        return "yes", "not run", str(exc)
    inputs = work / app
    inputs.mkdir(exist_ok=True)
    argv = ["-q", "-v", "-w", "0", *options, *(make_input(inputs, random.Random(20)) if make_input else [])]
    result = run_program(kernels, lib, argv, cwd=inputs, limit_s=600)
    tail = " | ".join(result.output.strip().splitlines()[-2:])
    if result.launch_error:
        return "yes", "FAIL", f"andrea: {result.launch_error}"
    if result.rc is None:
        return "yes", "FAIL", f"ran past 600 s"
    if result.rc != 0:
        return "yes", "FAIL", f"exit {result.rc}: {tail}"
    if success is None:
        return "yes", "ran", f"no success line of its own to check ({result.seconds:.1f} s)"
    if success not in result.output:
        return "yes", "FAIL", f"no '{success}' line: {tail}"
    return "yes", "PASS", f"{tail} ({result.seconds:.1f} s)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=pathlib.Path, required=True, help="a checkout of NUCAR-DEV/Hetero-Mark")
    parser.add_argument("--only", default="", help="comma-separated apps (e.g. bs,fir)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "src" / "common").is_dir():
        parser.error(f"--root {args.root}: no src/common there (a checkout of NUCAR-DEV/Hetero-Mark?)")
    wanted = [a.strip() for a in args.only.split(",") if a.strip()] or list(APPS)
    counts = {"compile": 0, "PASS": 0, "ran": 0}
    with tempfile.TemporaryDirectory(prefix="andrea-heteromark-") as tmp:
        for app in wanted:
            compiles, verdict, detail = run_one(root, app, pathlib.Path(tmp))
            counts["compile"] += compiles == "yes"
            counts[verdict] = counts.get(verdict, 0) + 1
            print(f"{app:<7} compiles: {compiles:<3} {verdict:<7} {detail}", flush=True)
    print(f"Hetero-Mark: {len(wanted)} apps, {counts['compile']} compile as written, {counts['PASS']} pass their "
          f"Verify(), {counts['ran']} run without a check of their own")
    return 0


if __name__ == "__main__":
    sys.exit(main())
