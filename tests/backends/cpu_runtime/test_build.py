"""The CPU build (cpu_runtime/build.py): a compile error names the file and line, a missing compiler
is one clear error, and a library is cached under its source's key and rebuilt when it changes."""

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


def test_a_compile_is_announced_and_a_cached_build_is_not(tmp_path):
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
