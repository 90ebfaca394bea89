"""The sanitizer build (cpu_runtime/sanitize.py), AddressSanitizer and UndefinedBehaviorSanitizer:
small kernels' out-of-bounds read and integer overflow reported with their lines (tests/kernels/basics.cu);
the project's kernel file through a sweep of awkward shapes gives no report, and an out-of-bounds
read planted in a copy of the file is caught on the CPU, with the kernel file's line."""

import pathlib
import subprocess

import numpy as np
import pytest

from andrea_cli import reference, reference_backward
from andrea_cli.backends.cpu import CpuBackend
from andrea_cli.backends.cpu_runtime.errors import CpuDeadlockError, CpuSanitizerError
from andrea_cli.backends.cpu_runtime.module import CpuModule
from andrea_cli.backends.launch.staged import ALL_PLANS, KERNEL1_PLAN
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec

pytestmark = pytest.mark.slow  # one sanitized build: ~20 s the first time, cached afterwards

BASICS = pathlib.Path(__file__).parents[2] / "kernels" / "basics.cu"

SHAPES = [(1, 1, 1), (2, 3, 5), (17, 4, 8), (33, 16, 16), (65, 80, 48)]
MASKS = [MaskSpec("causal"), MaskSpec("none"), MaskSpec("window", 5)]


def inputs(T, d_k, d_v, seed=0):
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal((2, T, d_k), dtype=np.float32) for _ in range(2))
    return q, k, rng.standard_normal((2, T, d_v), dtype=np.float32)


def test_every_kernel_runs_clean_under_the_sanitizers():
    backend = CpuBackend(packaged_kernel_path(), sanitize=True)
    for n, (T, d_k, d_v) in enumerate(SHAPES):
        q, k, v = inputs(T, d_k, d_v, n)
        mask = MASKS[n % len(MASKS)]
        expected = reference.attention(q, k, v, mask)
        # every launch geometry on one shape, the default one on the others (the sanitized build
        # runs several times slower than the plain one)
        for plan in ALL_PLANS if (T, d_k) == (33, 16) else ALL_PLANS[:1]:
            out = backend.attention(q, k, v, mask=mask, scaled=True, plan=plan)
            np.testing.assert_allclose(out.output, expected, atol=1e-5)
        for variant in ([1, 2] if d_k % 4 == 0 and d_v % 4 == 0 else [1]):
            fused = backend.attention_fused(q, k, v, mask=mask, scaled=True, variant=variant)
            np.testing.assert_allclose(fused.output, expected, atol=1e-5)
        # the backward kernels, staged and fused
        d_out = np.random.default_rng(n + 100).standard_normal(v.shape, dtype=np.float32)
        exact = reference_backward.backward(q, k, v, d_out, mask)
        for got in (backend.attention_backward(q, k, v, d_out, mask=mask, scaled=True),
                    backend.attention_backward_fused(q, k, v, d_out, mask=mask, scaled=True)):
            for name in ("dq", "dk", "dv"):
                np.testing.assert_allclose(getattr(got, name), getattr(exact, name), atol=1e-5, err_msg=name)


def line_of(text: str, fragment: str, after: int = 0) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if n > after and fragment in line)


def test_planted_overruns_are_caught_with_their_lines(tmp_path, run_main):
    # One copy, one sanitized build, three one-element mistakes in three kernels: a read one row
    # past Q, a float4 written one past the fused kernel's shared-memory tile, and acc[4] of a
    # four-element local array.
    source = packaged_kernel_path().read_text()
    plants = [("q_tile[ty][tx] = (qr < L && c < d_k)", "q_tile[ty][tx] = (qr <= L && c < d_k)"),
              ("idx < FUSED_KEYS * dv4; idx += n_threads", "idx <= FUSED_KEYS * dv4; idx += n_threads"),
              ("for (int t = 0; t < FUSED_MAX_D / 32; ++t) acc[t] = 0.0f;",
               "for (int t = 0; t <= FUSED_MAX_D / 32; ++t) acc[t] = 0.0f;")]
    for good, bad in plants:
        assert good in source, good
        source = source.replace(good, bad, 1)  # the first: the forward kernels come first
    broken = tmp_path / "microgpt_cuda.cu"
    broken.write_text(source)
    backend = CpuBackend(broken, sanitize=True)
    q, k, v = inputs(33, 16, 16)
    causal = MaskSpec("causal")
    with pytest.raises(CpuSanitizerError, match=rf"READ .* in scores_kernel1 at .*microgpt_cuda.cu:{line_of(source, plants[0][1])}"):
        backend.attention(q, k, v, mask=causal, scaled=True, plan=KERNEL1_PLAN)  # scores_kernel1
    with pytest.raises(CpuSanitizerError, match=rf"microgpt_cuda.cu:{line_of(source, plants[2][1])}:.*index 4 out of bounds"):
        backend.attention_fused(q, k, v, mask=causal, scaled=True, variant=1)
    store = line_of(source, "((float4*)v_s)[idx] = ", after=line_of(source, plants[1][1]))  # in that loop
    with pytest.raises(CpuSanitizerError, match=rf"heap-buffer-overflow, WRITE of size 16 in attention_fused\w* "
                                                rf"at .*microgpt_cuda.cu:{store}"):
        backend.attention_fused(q, k, v, mask=causal, scaled=True, variant=2)
    # verify --sanitize reports it as the case's FAIL line, with the line, and exits 1
    code, out, err = run_main("verify", "--sanitize", "--T", "33", "--d-k", "16", "--kernel", broken)
    assert code == 1 and "FAIL" in err
    assert err.startswith("verify: building the kernel file under AddressSanitizer")  # the wait before case 1, said
    planted = {f"microgpt_cuda.cu:{line_of(source, bad)}" for _, bad in plants}  # the first one a case reaches
    assert any(line in "".join(out.split()) for line in planted), out


@pytest.mark.slow  # builds the kernels with ASan+UBSan (~10 s) and starts worker processes
def test_sanitizer_catches_out_of_bounds_read():
    if subprocess.run(["g++", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip() \
            in ("", "libasan.so"):
        pytest.skip("g++ has no libasan")
    mod = CpuModule(BASICS, sanitize=True)
    x, y = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    mod.get_function("scale")((1,), (32,), (x, y, np.int32(16), np.float32(2)))  # in bounds: no report
    np.testing.assert_array_equal(y, 2 * x)  # results come back from the sanitized process
    with pytest.raises(CpuSanitizerError, match=r"heap-buffer-overflow.*basics\.cu:\d+") as e:
        mod.get_function("out_of_bounds")((1,), (17,), (x, y, np.int32(16)))
    assert "READ of size 4" in e.value.report
    with pytest.raises(CpuSanitizerError, match=r"UndefinedBehaviorSanitizer: .*basics\.cu:\d+.*signed integer overflow"):
        mod.get_function("overflow")((1,), (1,), (np.zeros(1, np.int32), np.int32(4)))
    with pytest.raises(CpuDeadlockError):  # errors other than reports keep their type
        mod.get_function("deadlock")((1,), (32,), (y,))
    mod.get_function("scale")((1,), (16,), (x, y, np.int32(16), np.float32(3)))  # a fresh worker
    np.testing.assert_array_equal(y, 3 * x)
