"""The tensor-core building blocks, native against emulated: the check kernels of
tests/kernels/tensor_cores.cu (appended to the kernel file) run through the CPU build (the
emulated bodies) and, where a GPU answers, through cupy (the PTX ones), on the same inputs; each
side is compared with NumPy's reading of the PTX ISA layouts, and the two sides with each other.
Conversions, ldmatrix and cp.async must agree bit for bit; mma within one fp32 rounding (the
hardware's summation order inside one mma is unspecified). Prints one JSON document; exit 1 if a
check fails. Run from the repository root: python scripts/tensor_core_check.py"""

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
    }


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


def compare(name: str, got: np.ndarray, want: np.ndarray) -> dict:
    if name.startswith("mma"):
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        bound = MMA_REL * np.abs(want.astype(np.float64)) + 1e-30
        return {"max_abs_diff": float(err.max()), "worst_of_bound": float((err / bound).max()),
                "passed": bool((err <= bound).all())}
    differ = int(np.sum(got.view(np.uint32) != want.astype(got.dtype).view(np.uint32)))
    return {"elements_differing": differ, "passed": differ == 0}


def main() -> int:
    from andrea_cli.backends.cpu_runtime.module import CpuModule
    from andrea_cli.backends.cuda import cuda_availability

    source = packaged_kernel_path().read_text() + "\n" + CHECKS.read_text()
    x = inputs()
    want = numpy_side(x)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tensor_core_checks.cu"
        path.write_text(source)
        emulated = run_side(CpuModule(path), np.asarray, np.asarray, x)
    report = {"emulated_vs_numpy": {k: compare(k, emulated[k], want[k]) for k in want}}
    status = cuda_availability()
    if status.ok:
        import cupy

        module = cupy.RawModule(code=source, options=("-std=c++17",))
        native = run_side(module, cupy.asarray, cupy.asnumpy, x)
        report["native_vs_numpy"] = {k: compare(k, native[k], want[k]) for k in want}
        report["native_vs_emulated"] = {k: compare(k, native[k], emulated[k]) for k in want}
    else:
        report["native"] = f"not run: {status.reason}"
    passed = all(c["passed"] for group in report.values() if isinstance(group, dict) for c in group.values())
    report["passed"] = passed
    print(json.dumps(report, indent=2))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
