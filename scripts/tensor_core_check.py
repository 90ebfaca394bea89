"""The tensor-core building blocks, native against emulated: the check kernels of
tests/kernels/tensor_cores.cu (appended to the kernel file) run through the CPU build (the
emulated bodies) and, where a GPU answers, through cupy (the PTX ones), on the same inputs; each
side is compared with NumPy's reading of the PTX ISA layouts, and the two sides with each other.
Conversions, ldmatrix and cp.async must agree bit for bit; mma within one fp32 rounding (the
hardware's summation order inside one mma is unspecified). wgmma (Hopper's warpgroup mma, B
read from shared memory through a descriptor, the K-major and MN-major no-swizzle layouts) runs
natively only on compute capability 9.0, from a cubin NVRTC builds for sm_90a; elsewhere the
report says why it did not run. Prints one JSON document; exit 1 if a check fails. Run from the
repository root: python scripts/tensor_core_check.py"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")
from andrea_cli.kernel_file import packaged_kernel_path  # noqa: E402
from andrea_cli.verification.bf16_attention import bf16_bits, bf16_to_float  # noqa: E402

CHECKS = Path("tests/kernels/tensor_cores.cu")
MMA_REL = 2.0**-22  # one fp32 rounding of the result, plus the hardware's own order of the sums
# wgmma: K 64 in 4 k-steps, each rounded to fp32 (the emulation) or a few times more (the
# hardware's order): a few ulp of the sum of the terms' magnitudes, as
# tests/backends/cpu_runtime/test_wgmma.py
WGMMA_REL = 2.0**-20
WGMMA_K = 64
# (N, MN-major, flags): flags 1 accumulate onto C, 2 a commit group per wgmma, 4 SBO 128 (the
# core matrices n-blocks first); see check_wgmma_* in tests/kernels/tensor_cores.cu
WGMMA_CASES = [(n, mn, flags) for n in (64, 128) for mn in (False, True) for flags in (0, 7)]


def wgmma_case_name(n: int, mn_major: bool, flags: int) -> str:
    return f"wgmma_n{n}_{'mnmajor' if mn_major else 'kmajor'}_flags{flags}"


def tf32_rna(x: np.ndarray) -> np.ndarray:
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x1000) & 0xFFFFE000).astype(np.uint32)


def inputs() -> dict:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(2000), [1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11, -(1 + 2**-11)]])
    return {
        "x": x.astype(np.float32),
        "a16": bf16_bits(rng.standard_normal((16, 16)).astype(np.float32)),
        "bn16": bf16_bits(rng.standard_normal((8, 16)).astype(np.float32)),
        "a8": rng.standard_normal((16, 8)).astype(np.float32),
        "bn8": rng.standard_normal((8, 8)).astype(np.float32),
        "c": rng.standard_normal((16, 8)).astype(np.float32),
        "m": np.arange(32 * 32, dtype=np.uint16).reshape(32, 32),
        "rows": rng.permutation(32).astype(np.int32),
        "cols": rng.integers(0, 4, 32).astype(np.int32),
        "src": np.arange(256, dtype=np.float32) + 1,
        "wg_a": bf16_bits(rng.standard_normal((128, WGMMA_K)).astype(np.float32)),  # two warpgroups' rows
        "wg_b": bf16_bits(rng.standard_normal((WGMMA_K, 128)).astype(np.float32)),
        "wg_c": rng.standard_normal((128, 128)).astype(np.float32),
    }


def run_wgmma_side(module, to_dev, to_host, x: dict) -> dict:
    """The wgmma check kernels (two warpgroups, 256 threads) on one side."""
    out = {}
    for n, mn_major, flags in WGMMA_CASES:
        d = to_dev(np.zeros((128, n), np.float32))
        b, c = np.ascontiguousarray(x["wg_b"][:, :n]), np.ascontiguousarray(x["wg_c"][:, :n])
        module.get_function(f"check_wgmma_n{n}_{'mnmajor' if mn_major else 'kmajor'}")(
            (1,), (256,), (to_dev(x["wg_a"]), to_dev(b), to_dev(c), d, np.int32(flags), np.int32(0)),
            shared_mem=WGMMA_K * n * 2)
        out[wgmma_case_name(n, mn_major, flags)] = to_host(d)
    return out


def numpy_wgmma(x: dict) -> tuple[dict, dict]:
    """What each wgmma case returns and its tolerance."""
    want, tol = {}, {}
    a = bf16_to_float(x["wg_a"]).astype(np.float64)
    for n, mn_major, flags in WGMMA_CASES:
        b = bf16_to_float(np.ascontiguousarray(x["wg_b"][:, :n])).astype(np.float64)
        c = x["wg_c"][:, :n].astype(np.float64) if flags & 1 else 0.0
        name = wgmma_case_name(n, mn_major, flags)
        want[name] = a @ b + c
        tol[name] = WGMMA_REL * (np.abs(a) @ np.abs(b) + np.abs(c))
    return want, tol


def run_side(module, to_dev, to_host, x: dict) -> dict:
    """Every check kernel on one side; results as NumPy arrays."""
    out = {}
    n = x["x"].size
    packed, tf32 = to_dev(np.zeros(n, np.uint32)), to_dev(np.zeros(n, np.uint32))
    module.get_function("check_conversions")((1,), (64,), (to_dev(x["x"]), packed, tf32, np.int32(n)))
    out["bf16x2"], out["tf32"] = to_host(packed), to_host(tf32)
    d = to_dev(np.zeros((16, 8), np.float32))
    module.get_function("check_mma_bf16")((1,), (32,), (to_dev(x["a16"]), to_dev(x["bn16"]), to_dev(x["c"]), d))
    out["mma_bf16"] = to_host(d)
    for convert in (1, 0):
        d = to_dev(np.zeros((16, 8), np.float32))
        module.get_function("check_mma_tf32")((1,), (32,), (to_dev(x["a8"]), to_dev(x["bn8"]), to_dev(x["c"]), d,
                                                             np.int32(convert)))
        out[f"mma_tf32_{'converted' if convert else 'raw'}"] = to_host(d)
    regs = to_dev(np.zeros((6, 32, 4), np.uint32))
    module.get_function("check_ldmatrix")((1,), (32,), (to_dev(x["m"]), to_dev(x["rows"]), to_dev(x["cols"]), regs))
    out["ldmatrix"] = to_host(regs)
    before, after1, after0 = (to_dev(np.zeros(k, np.float32)) for k in (128, 256, 256))
    module.get_function("check_cp_async")((1,), (32,), (to_dev(x["src"]), before, after1, after0))
    out["cp_async_group_a"] = to_host(after1).reshape(32, 2, 4)[:, 0]  # retired by wait_group 1
    out["cp_async_all"] = to_host(after0)
    return out


def numpy_side(x: dict) -> dict:
    """What the PTX ISA says each check returns, computed apart from either side."""
    out = {"bf16x2": bf16_bits(x["x"]).astype(np.uint32) | bf16_bits(-x["x"]).astype(np.uint32) << 16,
           "tf32": tf32_rna(x["x"])}
    a, b = (bf16_to_float(m).astype(np.float64) for m in (x["a16"], x["bn16"]))
    out["mma_bf16"] = a @ b.T + x["c"]
    for name, conv in (("converted", tf32_rna), ("raw", lambda m: m.view(np.uint32) & np.uint32(0xFFFFE000))):
        a, b = (conv(m).view(np.float32).astype(np.float64) for m in (x["a8"], x["bn8"]))
        out[f"mma_tf32_{name}"] = a @ b.T + x["c"]
    m, rows, cols, lane = x["m"], x["rows"], x["cols"], np.arange(32)
    mats = [np.stack([m[rows[8 * i + r], 8 * cols[8 * i + r]:][:8] for r in range(8)]) for i in range(4)]
    regs = np.zeros((6, 32, 4), np.uint32)
    for form, (count, trans) in enumerate([(1, False), (2, False), (4, False), (1, True), (2, True), (4, True)]):
        for i in range(count):
            mat = mats[i].T if trans else mats[i]
            lo, hi = (mat[lane // 4, 2 * (lane % 4) + h].astype(np.uint32) for h in (0, 1))
            regs[form, :, i] = lo | hi << 16
    out["ldmatrix"] = regs
    rows_src = x["src"].reshape(32, 2, 4).copy()
    out["cp_async_group_a"] = rows_src[:, 0]
    rows_src[1::2, 1] = 0  # odd lanes zero-fill their second row
    out["cp_async_all"] = rows_src.reshape(-1)
    return out


def compare(name: str, got: np.ndarray, want: np.ndarray, bound: np.ndarray | None = None) -> dict:
    if bound is not None:  # wgmma: a bound per element
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        return {"max_abs_diff": float(err.max()), "worst_of_bound": float((err / (bound + 1e-30)).max()),
                "passed": bool((err <= bound).all())}
    if name.startswith("mma"):
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        bound = MMA_REL * np.abs(want.astype(np.float64)) + 1e-30
        return {"max_abs_diff": float(err.max()), "worst_of_bound": float((err / bound).max()),
                "passed": bool((err <= bound).all())}
    differ = int(np.sum(got.view(np.uint32) != want.astype(got.dtype).view(np.uint32)))
    return {"elements_differing": differ, "passed": differ == 0}


def run_native_wgmma(path: Path, x: dict) -> tuple[dict | None, str]:
    """The wgmma cases on this GPU from an sm_90a cubin, or (None, why not)."""
    import cupy

    from andrea_cli.backends.toolchain.cuda_arch import WGMMA_CC, CompileTarget
    from andrea_cli.backends.toolchain.nvrtc import compiled_kernel_file, nvrtc_version

    cc = tuple(int(v) for v in cupy.cuda.Device().compute_capability)  # "90" -> (9, 0)
    if cc != WGMMA_CC:
        return None, (f"this GPU has compute capability {cc[0]}.{cc[1]}; wgmma exists only on "
                      f"{WGMMA_CC[0]}.{WGMMA_CC[1]} (sm_90a: H100, H200)")
    if nvrtc_version() < (12, 0):
        return None, f"NVRTC {nvrtc_version()} predates sm_90a (CUDA 12.0)"
    module = cupy.RawModule(path=str(compiled_kernel_file(path, CompileTarget("sm_90a", "cubin"))))
    return run_wgmma_side(module, cupy.asarray, cupy.asnumpy, x), ""


def main() -> int:
    from andrea_cli.backends.cpu_runtime.module import CpuModule
    from andrea_cli.backends.cuda import cuda_availability

    source = packaged_kernel_path().read_text() + "\n" + CHECKS.read_text()
    x = inputs()
    want = numpy_side(x)
    want_wgmma, tol_wgmma = numpy_wgmma(x)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tensor_core_checks.cu"
        path.write_text(source)
        cpu = CpuModule(path)
        emulated = run_side(cpu, np.asarray, np.asarray, x)
        emulated_wgmma = run_wgmma_side(cpu, np.asarray, np.asarray, x)
        report = {"emulated_vs_numpy": {k: compare(k, emulated[k], want[k]) for k in want}}
        report["emulated_vs_numpy"].update(
            {k: compare(k, emulated_wgmma[k], want_wgmma[k], tol_wgmma[k]) for k in want_wgmma})
        status = cuda_availability()
        if status.ok:
            import cupy

            module = cupy.RawModule(code=source, options=("-std=c++17",))
            native = run_side(module, cupy.asarray, cupy.asnumpy, x)
            report["native_vs_numpy"] = {k: compare(k, native[k], want[k]) for k in want}
            report["native_vs_emulated"] = {k: compare(k, native[k], emulated[k]) for k in want}
            native_wgmma, why_not = run_native_wgmma(path, x)
            if native_wgmma is None:
                report["native_wgmma"] = f"not run: {why_not}"
            else:
                report["native_vs_numpy"].update(
                    {k: compare(k, native_wgmma[k], want_wgmma[k], tol_wgmma[k]) for k in want_wgmma})
                report["native_vs_emulated"].update(  # two fp32 sums of the same terms: twice the bound
                    {k: compare(k, native_wgmma[k], emulated_wgmma[k], 2 * tol_wgmma[k]) for k in want_wgmma})
        else:
            report["native"] = f"not run: {status.reason}"
    passed = all(c["passed"] for group in report.values() if isinstance(group, dict) for c in group.values())
    report["passed"] = passed
    print(json.dumps(report, indent=2))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
