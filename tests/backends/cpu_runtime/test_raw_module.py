"""RawModule, cupy's shape on the CPU build: the reference's example as written (docs/reference.md), code= with options,
RawKernel, and the one-line errors for what it refuses."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime import RawKernel, RawModule
from andrea_cli.backends.cpu_runtime.errors import CpuRuntimeError
from andrea_cli.backends.cpu_runtime.raw_module import compiler_options

REFERENCE = pathlib.Path(__file__).resolve().parents[3] / "docs" / "reference.md"  # moved from the README


def test_readme_example_runs_and_matches_numpy():
    section = REFERENCE.read_text().split("### Your own kernel on the CPU", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, "docs/reference.md", "exec"), {})
    got, want = (float(v) for v in printed.getvalue().split())
    assert abs(got - want) <= 1e-4 * 100_000 ** 0.5  # float32 sums of 100,000 N(0, 1) values


@pytest.mark.usefixtures("snippet_builds")
def test_code_options_and_raw_kernel():
    code = ('extern "C" __global__ void fill(float* out, int n) {\n'
            "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) out[i] = VALUE + OFFSET;\n}\n")
    options = ("-std=c++17", "--use_fast_math", "-DVALUE=2.5f", "-D", "OFFSET=1", "-arch=sm_90")
    out = np.zeros(100, np.float32)
    RawModule(code=code, options=options).get_function("fill")((1,), (128,), (out, np.int32(100)))
    assert (out == 3.5).all()
    RawKernel(code, "fill", options=("-DVALUE=1.0f", "-DOFFSET=0"))((2,), (64,), (out, np.int32(100)))
    assert (out == 1).all()


@pytest.mark.parametrize("kwargs,match", [
    (dict(), r"exactly one of code= .* or path="),
    (dict(code="", path="x.cu"), r"exactly one of code="),
    (dict(path="/no/such/file.cu"), r"no such file"),
    (dict(code="", options=("--gpu-magic",)), r"option '--gpu-magic' is not understood"),
    (dict(code="", schedule="sideways"), r"schedule='sideways'"),
    (dict(code="", jitify=True), r"without jitify"),
])
def test_refusals_are_one_line(kwargs, match):
    with pytest.raises(CpuRuntimeError, match=match) as e:
        RawModule(**kwargs)
    assert "\n" not in str(e.value)


def test_option_translation():
    assert compiler_options(("-I/x", "--include-path=/y", "--define-macro=A=1", "-UB", "-lineinfo",
                             "--gpu-architecture=compute_90", "-maxrregcount=64")) == ("-I/x", "-I/y", "-DA=1", "-UB")


def test_info_lists_what_the_cpu_build_supports_and_refuses(cli):
    doc = cli.json("info")["cpu_build"]
    assert "cooperative groups" in doc["supports"] and "__nv_bfloat16" in doc["supports"]["types"]
    assert "inline PTX" in doc["refuses"] and "grid-wide sync" in doc["refuses"]
