"""The CPU build (cpu_runtime/build.py): a compile error names the file and line, a missing compiler
is one clear error, and a library is cached under its source's key and rebuilt when it changes."""

import sys

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime import build as cpu_build
from andrea_cli.backends.cpu_runtime.errors import CompilerNotFoundError, CpuCompileError
from andrea_cli.backends.cpu_runtime.module import CpuModule


def test_compile_error_names_file_and_line(tmp_path):
    src = tmp_path / "broken.cu"
    src.write_text('extern "C" __global__ void k(float* out) {\n'
                   "    out[threadIdx.x] = undeclared_name;\n}\n")
    with pytest.raises(CpuCompileError, match=r"broken\.cu:2:\d+: error: .*undeclared_name") as e:
        CpuModule(src)
    assert "undeclared_name" in e.value.log


def test_missing_compiler_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float* out) {}\n')
    with pytest.raises(CompilerNotFoundError, match="apt-get install g\\+\\+"):
        CpuModule(src)


def test_cache_hit_and_key(tmp_path, monkeypatch):
    src = tmp_path / "tiny.cu"
    src.write_text('extern "C" __global__ void k(float* out) { out[threadIdx.x] = 1.0f; }\n')
    first = CpuModule(src)
    stat = first.library_path.stat()

    def no_compiler(*args, **kwargs):
        raise AssertionError(f"the cached library should have been loaded, not rebuilt: {args}")

    monkeypatch.setattr(cpu_build.subprocess, "run", no_compiler)
    second = CpuModule(src)
    assert second.library_path == first.library_path
    again = second.library_path.stat()
    assert (again.st_ino, again.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
    monkeypatch.undo()
    src.write_text(src.read_text().replace("1.0f", "2.0f"))
    changed = CpuModule(src)
    assert changed.library_path != first.library_path
    out = np.zeros(4, np.float32)
    changed.get_function("k")((1,), (4,), (out,))
    assert (out == 2).all()


# A stand-in for g++ that only counts its compiles: slow enough (0.5 s) that a second build of the
# key starts while the first still runs, if nothing makes it wait.
FAKE_COMPILER = r"""
import pathlib, sys, time
args = sys.argv[1:]
if "--version" in args:
    print("fake-g++ 1.0")
    sys.exit(0)
time.sleep(0.5)
with open(pathlib.Path(sys.argv[0]).with_name("compiles"), "a") as log:
    log.write("compile\n")
pathlib.Path(args[args.index("-o") + 1]).write_bytes(b"not a library")
pathlib.Path(args[args.index("-MF") + 1]).write_text(f"out.o: {args[-1]} {sys.argv[0]}\n")  # read: itself
"""


def test_one_key_is_compiled_once_when_two_ask_at_once(tmp_path, monkeypatch):
    # two threads, or two `pytest -n 2` workers sharing a cache: the second waits for the first's
    # library (the per-key lock) instead of compiling the same source again
    from concurrent.futures import ThreadPoolExecutor

    fake = tmp_path / "fake-g++"
    fake.write_text(f"#!{sys.executable}\n{FAKE_COMPILER}")
    fake.chmod(0o755)
    monkeypatch.setenv("CXX", str(fake))
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float* out) {}\n')
    kernel = cpu_build.scan(src)
    with ThreadPoolExecutor(2) as pool:
        libs = list(pool.map(lambda _: cpu_build.build(kernel, sanitize=False), range(2)))
    assert libs[0] == libs[1] and libs[0].read_bytes() == b"not a library"
    assert (tmp_path / "compiles").read_text().count("compile") == 1


def test_a_compiler_stopped_by_ctrl_c_is_an_interrupt_not_a_compile_error(tmp_path, monkeypatch):
    """Ctrl-C reaches g++ too (the terminal's whole process group): its death by SIGINT ends the
    command as "interrupted", not as a compile error quoting an empty log."""
    import signal
    import subprocess

    real_run = subprocess.run

    def compiler_interrupted(cmd, *args, **kwargs):
        if "-MMD" in cmd:  # the kernel file's compile; the version query runs for real
            return subprocess.CompletedProcess(cmd, -signal.SIGINT, "", "")
        return real_run(cmd, *args, **kwargs)

    src = tmp_path / "interrupted.cu"
    src.write_text('extern "C" __global__ void k(float* out) { out[threadIdx.x] = 3.0f; }\n')
    monkeypatch.setattr(cpu_build.subprocess, "run", compiler_interrupted)
    with pytest.raises(KeyboardInterrupt):
        CpuModule(src)
def test_a_compile_is_announced_and_a_cached_build_is_not(tmp_path, quick_builds):
    """What attend's transient line shows while the first build runs: what compiles and about
    how long; the second build of the same file hits the cache and announces nothing."""
    from andrea_cli.backends.cpu_runtime.build_notice import announce_builds

    src = tmp_path / "announced.cu"
    src.write_text('extern "C" __global__ void k(float* out) { out[threadIdx.x] = 2.0f; }\n')
    lines, ends = [], []
    with announce_builds(lines.append, lambda: ends.append(1)):
        cpu_build.build(cpu_build.scan(src), sanitize=False)
        assert [line for line in lines if "announced.cu" in line] == [
            "compiling announced.cu for the CPU (once, then cached; about 1 s)"]
        assert len(ends) == len(lines)  # every line taken down again
        before = len(lines)
        cpu_build.build(cpu_build.scan(src), sanitize=False)
    assert len(lines) == before  # cached: nothing said
