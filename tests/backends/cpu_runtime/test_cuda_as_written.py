"""CUDA as public suites write it, on the CPU build (issue 20): each test is a small kernel of our
own that reproduces one thing Hetero-Mark, PolyBench-GPU, llm.c or cuda-samples needed, checked
against NumPy or against the C library. scripts/suites/ runs the suites themselves."""

from __future__ import annotations

import pathlib
import subprocess

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime import RawModule
from andrea_cli.backends.cpu_runtime.errors import CpuArgumentError


def _standard_headers() -> list[str]:
    """Every header of the C++ standard library the installed g++ ships (its top-level files)."""
    out = subprocess.run(["g++", "-x", "c++", "-E", "-v", "-"], input="", capture_output=True, text=True).stderr
    dirs = [pathlib.Path(line.strip()) for line in out.splitlines() if line.startswith(" /")]
    libstdcxx = next(d for d in dirs if (d / "memory").is_file() and (d / "vector").is_file())
    return sorted(p.name for p in libstdcxx.iterdir() if p.is_file())


@pytest.mark.slow
def test_every_standard_header_before_a_kernel():
    # g++ 12's <memory> writes __attribute__((__noinline__)), which CUDA's __noinline__ macro broke.
    headers = _standard_headers()
    assert {"memory", "future", "condition_variable", "cmath"} <= set(headers)
    code = "".join(f"#include <{h}>\n" for h in headers) + (
        "__noinline__ __device__ float twice(float x) { return 2.0f * x; }\n"
        "__global__ void k(float* a) { a[threadIdx.x] = twice(a[threadIdx.x]); }\n")
    a = np.arange(4, dtype=np.float32)
    RawModule(code=code).get_function("k")((1,), (4,), (a,))
    np.testing.assert_array_equal(a, [0, 2, 4, 6])


# CUDA's math API: every function with a float overload, its float variant's name, and the
# arguments it takes (x, y, z, w floats; i an int; pointers to outputs).
_ONE = ("acos acosh asin asinh atan atanh cbrt ceil cos cosh cospi erf erfc erfcinv erfcx erfinv exp exp10 exp2 "
        "expm1 fabs floor lgamma log log10 log1p log2 logb nearbyint normcdf normcdfinv rcbrt rint round rsqrt "
        "sin sinh sinpi sqrt tan tanh tgamma trunc").split()
_TWO = "atan2 copysign fdim fmax fmin fmod hypot nextafter pow remainder rhypot".split()
_CALLS = ([(f, f"{f}(x)", f"{f}f(x)") for f in _ONE] + [(f, f"{f}(x, y)", f"{f}f(x, y)") for f in _TWO] + [
    ("fma", "fma(x, y, z)", "fmaf(x, y, z)"), ("norm3d", "norm3d(x, y, z)", "norm3df(x, y, z)"),
    ("rnorm3d", "rnorm3d(x, y, z)", "rnorm3df(x, y, z)"), ("norm4d", "norm4d(x, y, z, w)", "norm4df(x, y, z, w)"),
    ("rnorm4d", "rnorm4d(x, y, z, w)", "rnorm4df(x, y, z, w)"), ("abs", "abs(x)", "fabsf(x)"),
    ("ldexp", "ldexp(x, i)", "ldexpf(x, i)"), ("scalbn", "scalbn(x, i)", "scalbnf(x, i)"),
    ("scalbln", "scalbln(x, (long)i)", "scalblnf(x, (long)i)"), ("pow(float, int)", "pow(x, i)", "powf(x, (float)i)"),
    ("frexp", "frexp(x, &e1)", "frexpf(x, &e2)"), ("modf", "modf(x, &p1)", "modff(x, &p2)"),
    ("remquo", "remquo(x, y, &e1)", "remquof(x, y, &e2)"),
])
_SIDE = [("sincos", "sincos(x, &p1, &q1)", "sincosf(x, &p2, &q2)"),
         ("sincospi", "sincospi(x, &p1, &q1)", "sincospif(x, &p2, &q2)")]


def _math_kernel() -> str:
    lines = ["__device__ unsigned bits(float v) { unsigned u; memcpy(&u, &v, 4); return u; }",
             "__global__ void k(const float* in, int* size, int* same) {",
             "    const float x = in[0], y = in[1], z = in[2], w = in[3]; const int i = 3;",
             "    int e1 = 0, e2 = 0; float p1 = 0, p2 = 0, q1 = 0, q2 = 0; (void)e1; (void)p1; (void)q1;"]
    for n, (_, call, variant) in enumerate(_CALLS):
        lines.append(f"    size[{n}] = sizeof({call}); same[{n}] = bits({call}) == bits({variant}) && e1 == e2 "
                     "&& bits(p1) == bits(p2);")
    for n, (_, call, variant) in enumerate(_SIDE, start=len(_CALLS)):
        lines.append(f"    {call}; {variant}; size[{n}] = 4; same[{n}] = bits(p1) == bits(p2) && bits(q1) == bits(q2);")
    return "\n".join(lines + ["}"]) + "\n"


@pytest.mark.parametrize("inputs", [(0.3, 0.7, 1.3, -2.1), (2.5, -0.4, 0.05, 7.0)])
def test_math_functions_of_a_float_are_the_float_functions(inputs):
    # Without <math.h>, as Hetero-Mark's bs writes it: exp(float) is expf, 4 bytes, to the bit.
    count = len(_CALLS) + len(_SIDE)
    size, same = np.zeros(count, np.int32), np.zeros(count, np.int32)
    RawModule(code=_math_kernel()).get_function("k")((1,), (1,), (np.array(inputs, np.float32), size, same))
    names = [c[0] for c in _CALLS + _SIDE]
    assert [n for n, s in zip(names, size) if s != 4] == []
    assert [n for n, s in zip(names, same) if not s] == []


def test_cuda_only_math_functions_against_the_c_library():
    # The functions C lacks, against their definitions in double (math.erfc, math.hypot, ...).
    import math
    code = ("__global__ void k(const float* x, float* out) {\n"
            "    out[0] = erfcx(x[0]); out[1] = normcdfinv(x[1]); out[2] = rcbrt(x[2]); out[3] = rhypot(x[0], x[2]);\n"
            "    out[4] = norm4d(x[0], x[1], x[2], x[3]); out[5] = erfcx(x[3] * 10.0f); out[6] = exp10(x[1]);\n}\n")
    x = np.array([0.8, 0.3, 2.0, 3.5], np.float32)
    out = np.zeros(7, np.float32)
    RawModule(code=code).get_function("k")((1,), (1,), (x, out))
    a, b, c, d = (float(v) for v in x)
    erfcx_big = 1.0 / (35.0 * math.sqrt(math.pi)) * (1 - 1 / (2 * 35.0 ** 2) + 3 / (4 * 35.0 ** 4))
    from statistics import NormalDist
    want = [math.exp(a * a) * math.erfc(a), NormalDist().inv_cdf(b), c ** (-1 / 3), 1 / math.hypot(a, c),
            math.sqrt(a * a + b * b + c * c + d * d), erfcx_big, 10 ** b]
    np.testing.assert_allclose(out, np.array(want, np.float32), rtol=2e-6)


@pytest.mark.usefixtures("snippet_builds")
def test_an_edited_header_rebuilds(tmp_path):
    # The cache key covers every file the build read (g++ -MMD), not only the kernel file.
    (tmp_path / "value.cuh").write_text("#define VALUE 1.0f\n")
    kernel = tmp_path / "k.cu"
    kernel.write_text('#include "value.cuh"\n__global__ void k(float* a) { a[0] = VALUE; }\n')
    a = np.zeros(1, np.float32)
    RawModule(path=kernel).get_function("k")((1,), (1,), (a,))
    assert a[0] == 1.0
    (tmp_path / "value.cuh").write_text("#define VALUE 2.0f\n")
    RawModule(path=kernel).get_function("k")((1,), (1,), (a,))
    assert a[0] == 2.0


@pytest.mark.usefixtures("snippet_builds")
def test_a_macro_option_does_not_reach_the_runtime():
    # PolyBench passes -DN=4096; the runtime's own templates have parameters named N.
    code = "__global__ void k(int* a) { a[0] = N + M; }\n"
    a = np.zeros(1, np.int32)
    RawModule(code=code, options=("-DN=40", "-DM", "-UM", "-DM=2")).get_function("k")((1,), (1,), (a,))
    assert a[0] == 42


@pytest.mark.usefixtures("snippet_builds")
def test_host_types_in_device_headers():
    # A header shared with host code: a class with stream and event members, host dim3, cuda.h.
    code = ("#include <cuda.h>\n#include <cuda_runtime.h>\n"
            "class Benchmark { cudaStream_t stream_; cudaEvent_t start_; dim3 grid_{4, 2}; cudaError_t err_ = cudaSuccess;\n"
            "  cudaDeviceProp prop_; CUdeviceptr raw_ = 0; public: int blocks() const { return grid_.x * grid_.y; } };\n"
            "__global__ void k(int* a) { a[0] = CUDA_VERSION >= 11000; a[1] = (int)sizeof(cudaStream_t); }\n")
    a = np.zeros(2, np.int32)
    RawModule(code=code).get_function("k")((1,), (1,), (a,))
    assert list(a) == [1, 8]


_TILES = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
template <unsigned TILE>
__global__ void tile_sums(const float* in, float* sums, float* shifted, int* votes) {
    __shared__ cg::block_tile_memory<256> scratch;
    cg::thread_block block = cg::this_thread_block(scratch);
    cg::thread_block_tile<TILE> tile = cg::tiled_partition<TILE>(block);
    const float v = in[block.thread_rank()];
    const float total = cg::reduce(tile, v, cg::plus<float>());
    if (tile.thread_rank() == 0) sums[tile.meta_group_rank()] = total;
    shifted[block.thread_rank()] = tile.shfl_down(v, 1);
    tile.sync();
    votes[block.thread_rank()] = tile.any(v > 250.0f) * 2 + tile.all(v >= 0.0f);
}
"""


@pytest.mark.usefixtures("snippet_builds")
@pytest.mark.parametrize("tile", [32, 64, 128, 256])
def test_tiles_beyond_a_warp(tile):
    # cuda-samples' reduction: cg::block_tile_memory and tiled_partition<64 .. 256>.
    x = np.arange(256, dtype=np.float32)
    sums, shifted, votes = np.zeros(256 // tile, np.float32), np.zeros(256, np.float32), np.zeros(256, np.int32)
    mod = RawModule(code=_TILES, name_expressions=(f"tile_sums<{tile}>",))
    mod.get_function(f"tile_sums<{tile}>")((1,), (256,), (x, sums, shifted, votes))
    np.testing.assert_array_equal(sums, x.reshape(-1, tile).sum(axis=1))
    rank = np.arange(256) % tile
    np.testing.assert_array_equal(shifted, np.where(rank < tile - 1, x + 1, x))
    np.testing.assert_array_equal(votes, np.where(np.arange(256) // tile == 255 // tile, 3, 1))


_NODES = np.dtype([("value", "i4"), ("pad", "i4"), ("next", "u8")])
_LINKED = ("struct Node { int value; int pad; Node* next; };\n"
           "__global__ void follow(Node* n) { n[0].next->value = 42; }\n")


@pytest.mark.usefixtures("snippet_builds")
def test_a_pointer_stored_in_device_memory_reaches_the_same_array():
    from andrea_cli import device
    nodes = device.zeros(2, _NODES)
    nodes["next"][0] = nodes.ptr + _NODES.itemsize  # node 0 points at node 1
    RawModule(code=_LINKED).get_function("follow")((1,), (1,), (nodes,))
    assert nodes["value"].tolist() == [0, 42]
    assert nodes.get()["value"].tolist() == [0, 42] and type(nodes.get()) is np.ndarray


@pytest.mark.slow
@pytest.mark.parametrize("build, flag", [("sanitized", "sanitize"), ("racecheck", "racecheck")])
def test_a_stored_pointer_in_a_sanitizer_build_is_refused(build, flag):
    # Its worker process runs the kernel on copies, device arrays included.
    from andrea_cli import device
    nodes = device.zeros(2, _NODES)
    nodes["next"][0] = nodes.ptr + _NODES.itemsize
    with pytest.raises(CpuArgumentError, match=rf"follow: argument 0 \(n\) holds a pointer into argument 0 \(n\), "
                                               rf"and the {build} build .* run this launch without {flag}=True$"):
        RawModule(code=_LINKED, **{flag: True}).get_function("follow")((1,), (1,), (nodes,))


@pytest.mark.usefixtures("snippet_builds")
def test_a_pointer_into_a_copied_array_is_refused():
    nodes = np.zeros(2, _NODES)
    nodes["next"][0] = nodes.ctypes.data + _NODES.itemsize  # into the caller's NumPy memory
    with pytest.raises(CpuArgumentError, match=r"follow: argument 0 \(n\) holds a pointer into argument 0 \(n\)"
                       r".*andrea_cli\.device") as e:
        RawModule(code=_LINKED).get_function("follow")((1,), (1,), (nodes,))
    assert "\n" not in str(e.value)


@pytest.mark.usefixtures("snippet_builds")
def test_structured_arrays_pass_as_their_bytes():
    # Hetero-Mark's knn: an array of LatLong structs as a NumPy structured dtype.
    code = ("struct LatLong { float lat, lng; };\n"
            "__global__ void dist(const LatLong* p, float* d, int n, float lat, float lng) {\n"
            "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "    if (i < n) d[i] = sqrtf((p[i].lat - lat) * (p[i].lat - lat) + (p[i].lng - lng) * (p[i].lng - lng));\n}\n")
    points = np.zeros(100, np.dtype([("lat", "f4"), ("lng", "f4")]))
    points["lat"], points["lng"] = np.linspace(-5, 5, 100), np.linspace(3, -2, 100)
    d = np.zeros(100, np.float32)
    RawModule(code=code).get_function("dist")((2,), (64,), (points, d, np.int32(100), np.float32(1), np.float32(2)))
    want = np.hypot(points["lat"] - np.float32(1), points["lng"] - np.float32(2))
    np.testing.assert_allclose(d, want, rtol=1e-6)
    with pytest.raises(CpuArgumentError, match=r"argument 0 \(const LatLong\* p\) points to 8-byte elements, "
                                               r"got an array of 12-byte elements") as e:
        RawModule(code=code).get_function("dist")((2,), (64,), (np.zeros(100, "f4,f4,f4"), d, np.int32(100),
                                                               np.float32(1), np.float32(2)))
    assert "\n" not in str(e.value)


@pytest.mark.usefixtures("snippet_builds")
def test_other_plain_dtypes_pass_as_their_bytes():
    # complex64 for a float2*, float16 for a __half*: plain data of the element's size.
    code = ("#include <cuda_fp16.h>\n"
            "__global__ void k(const float2* z, const __half* h, float* out) {\n"
            "    out[threadIdx.x] = z[threadIdx.x].x * z[threadIdx.x].y + __half2float(h[threadIdx.x]);\n}\n")
    z = (np.arange(4) + 1j * np.arange(4, 8)).astype(np.complex64)
    h = np.array([0.5, 1.5, -2.0, 8.0], np.float16)
    out = np.zeros(4, np.float32)
    RawModule(code=code).get_function("k")((1,), (4,), (z, h, out))
    np.testing.assert_array_equal(out, z.real * z.imag + h.astype(np.float32))


@pytest.mark.usefixtures("snippet_builds")
def test_every_vector_type_and_its_alignment():
    # cuda-samples' scan and histogram use uint4, shfl_scan uchar4: the whole of vector_types.h.
    code = ("#include <vector_types.h>\n"
            "__global__ void k(int* out) {\n"
            "    uint4 u = make_uint4(1, 2, 3, 4); uchar4 c = make_uchar4(5, 6, 7, 8); short2 s = make_short2(9, 10);\n"
            "    longlong2 l = make_longlong2(11, 12); double4 d = make_double4(13, 14, 15, 16); char1 c1 = make_char1(17);\n"
            "    out[0] = u.w + c.x + s.y + (int)l.x + (int)d.w + c1.x;\n"
            "    out[1] = alignof(uint4); out[2] = alignof(uchar4); out[3] = alignof(short2); out[4] = alignof(longlong2);\n"
            "    out[5] = alignof(double4); out[6] = sizeof(ushort3); out[7] = alignof(ulong2); out[8] = umin(3u, 7u) + umax(3u, 7u);\n"
            "}\n")
    out = np.zeros(9, np.int32)
    RawModule(code=code).get_function("k")((1,), (1,), (out,))
    assert list(out) == [4 + 5 + 10 + 11 + 16 + 17, 16, 4, 4, 16, 16, 6, 16, 10]


@pytest.mark.usefixtures("snippet_builds")
def test_a_kernel_file_may_define_its_own_lerp():
    # llm.c's adamw defines lerp; C++20's std::lerp must not be pulled into the global namespace.
    code = ("__device__ inline float lerp(float a, float b, float w) { return fma(w, b, fma(-w, a, a)); }\n"
            "#include <cuda_profiler_api.h>\n"
            "__global__ void k(float* a) { a[0] = lerp(a[0], a[1], 0.25f); }\n")
    a = np.array([2.0, 6.0], np.float32)
    RawModule(code=code).get_function("k")((1,), (1,), (a,))
    assert a[0] == 3.0


_GROUPS = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__device__ int group_sum(cg::thread_group g, int* x, int v) {
    for (int i = g.size() / 2; i > 0; i /= 2) {
        x[g.thread_rank()] = v;
        g.sync();
        if (g.thread_rank() < i) v += x[g.thread_rank() + i];
        g.sync();
    }
    return v;
}
struct Wide { unsigned a, b, c, d; };
__global__ void groups(int* sums, unsigned* wide) {
    __shared__ int x[64];
    cg::thread_block block = cg::this_thread_block();
    const int whole = group_sum(block, x, threadIdx.x);
    if (threadIdx.x == 0) sums[0] = whole;
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    const int part = group_sum(tile, x + 16 * tile.meta_group_rank(), threadIdx.x);
    if (tile.thread_rank() == 0) sums[1 + tile.meta_group_rank()] = part;
    cg::thread_group dynamic = cg::tiled_partition(block, 8);
    const int eighth = group_sum(dynamic, x + 8 * (threadIdx.x / 8), 1);
    if (dynamic.thread_rank() == 0) sums[5 + threadIdx.x / 8] = eighth;
    block.sync();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    Wide w{threadIdx.x, threadIdx.x * 2, threadIdx.x * 3, threadIdx.x * 4};
    w = warp.shfl_xor(w, 1);
    wide[4 * threadIdx.x] = w.a; wide[4 * threadIdx.x + 3] = w.d;
}
"""


@pytest.mark.usefixtures("snippet_builds")
def test_thread_group_and_wide_tile_shuffles():
    # simpleCooperativeGroups' thread_group parameter; shfl_scan's tile.shfl_xor of a uint4.
    sums, wide = np.zeros(13, np.int32), np.zeros(4 * 64, np.uint32)
    RawModule(code=_GROUPS).get_function("groups")((1,), (64,), (sums, wide))
    ranks = np.arange(64)
    assert sums[0] == ranks.sum()
    assert list(sums[1:5]) == list(ranks.reshape(4, 16).sum(axis=1))
    assert list(sums[5:13]) == [8] * 8
    partner = ranks ^ 1
    assert list(wide[0::4]) == list(partner) and list(wide[3::4]) == list(4 * partner)


@pytest.mark.usefixtures("snippet_builds")
def test_kernels_defined_in_an_included_header_are_launchable(tmp_path):
    # cuda-samples keep kernels in *_kernel.cuh files the .cu includes; a prototype is no kernel.
    (tmp_path / "scale_kernel.cuh").write_text(
        '#include "decl.cuh"\n__global__ void scale(float* a, float s) { a[threadIdx.x] *= s; }\n')
    (tmp_path / "decl.cuh").write_text("__global__ void defined_elsewhere(float* a);\n")
    (tmp_path / "main.cu").write_text('#include "scale_kernel.cuh"\n__global__ void add(float* a) { a[threadIdx.x] += 1; }\n')
    a = np.arange(4, dtype=np.float32)
    mod = RawModule(path=tmp_path / "main.cu")
    assert sorted(mod.kernel_names) == ["add", "scale"]
    mod.get_function("scale")((1,), (4,), (a, np.float32(3)))
    code = RawModule(code='#include "scale_kernel.cuh"\n', options=("-I", str(tmp_path)))
    code.get_function("scale")((1,), (4,), (a, np.float32(0.5)))
    np.testing.assert_array_equal(a, np.arange(4) * 1.5)
