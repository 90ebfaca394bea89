"""The suite runners' machinery (scripts/suites/) on a CUDA program of our own: the device half
is the file as written less its host functions, line for line; the host half runs the program's
own main, whose <<<...>>> launches go through RawModule on device memory with one address."""

from __future__ import annotations

import pathlib
import sys

import pytest

from andrea_cli.backends.cpu_runtime import RawModule

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts" / "suites"))

from cuda_source import device_half, host_half  # noqa: E402
from host import HostSource, build_host, run_program  # noqa: E402

PROGRAM = r"""#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__device__ float twice(float v) { return 2.0f * v; }

__global__ void saxpy(int n, float a, const float* x, float* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i + OFFSET] + twice(y[i]);
}

static void saxpy_cpu(int n, float a, const float* x, float* y) {
    for (int i = 0; i < n; i++) y[i] = a * x[i] + 2.0f * y[i];
}

int main(int argc, char** argv) {
    const int n = 1000;
    float* x = (float*)malloc(n * sizeof(float));
    float* y = (float*)malloc(n * sizeof(float));
    float* back = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) { x[i] = i * 0.5f; y[i] = 1000.0f - i; }
    float *dx, *dy;
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc((void**)&dy, n * sizeof(float));
    cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
    saxpy<<<(n + 255) / 256, 256>>>(n, 3.0f, dx, dy);
    cudaMemcpy(back, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    saxpy_cpu(n, 3.0f, x, y);
    int bad = 0;
    for (int i = 0; i < n; i++) bad += back[i] != y[i];
    printf("mismatches: %d\n", bad);
    cudaFree(dx);
    cudaFree(dy);
}
"""


def test_the_device_half_keeps_every_line_and_drops_host_code():
    half = device_half(PROGRAM)
    assert half.count("\n") == PROGRAM.count("\n")
    assert "__global__ void saxpy" in half and "__device__ float twice" in half
    assert "main" not in half and "saxpy_cpu" not in half and "<<<" not in half
    host = host_half(PROGRAM)
    assert 'andrea_host::launcher<decltype(&saxpy)>("saxpy", (n + 255) / 256, 256)(' in host
    assert "twice" not in host and "a * x[i + OFFSET]" not in host


@pytest.mark.slow
@pytest.mark.parametrize("offset,verdict", [(0, "mismatches: 0"), (1, "read x (argument 2) at element 4000, past its end")])
def test_a_program_runs_unchanged_with_its_launches_on_the_cpu_build(tmp_path, offset, verdict):
    source = tmp_path / "saxpy.cu"
    source.write_text(PROGRAM)
    kernels = RawModule(code=device_half(PROGRAM), options=(f"-DOFFSET={offset}",))
    library = build_host([HostSource(source, cuda=True)], [], [f"OFFSET={offset}"], tmp_path / "work")
    result = run_program(kernels, library, [], limit_s=120)
    assert result.rc == 0
    if offset == 0:
        assert result.launch_error is None and verdict in result.output
    else:  # one float past the end: andrea names the kernel, the argument and the byte (cudaMalloc's
        # arrays are bytes: it knows no type)
        assert verdict in result.launch_error and result.launch_error.startswith("CpuFaultError: saxpy: thread")


def test_an_apps_library_headers_come_from_pkg_config(tmp_path, monkeypatch):
    # be's header includes <opencv2/opencv.hpp>: its include folders are pkg-config's, as the
    # app's CMake find_package gives them; none where pkg-config knows no such package
    import os

    import run_heteromark

    fake = tmp_path / "pkg-config"
    fake.write_text('#!/bin/sh\n[ "$2" = opencv4 ] && echo "-I/opt/cv/include/opencv4 -I/opt/cv/extra" || exit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert run_heteromark.package_includes("be") == [pathlib.Path("/opt/cv/include/opencv4"),
                                                     pathlib.Path("/opt/cv/extra")]
    assert run_heteromark.package_includes("bs") == []
    monkeypatch.setitem(run_heteromark.APP_PACKAGES, "bs", "nosuchlib")
    assert run_heteromark.package_includes("bs") == []
