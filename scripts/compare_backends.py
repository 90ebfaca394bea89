"""The same inputs through the cuda backend and the CPU build of the kernel file: per stage, the
largest difference. Run by gpu-check.sh; prints JSON. With argument `cpu` (no GPU) it compares
the CPU build's two schedules instead, which checks this script itself."""

from __future__ import annotations

import json
import sys

import numpy as np

sys.path.insert(0, ".")
from andrea_cli.backends.cpu import CpuBackend  # noqa: E402
from andrea_cli.kernel_file import packaged_kernel_path  # noqa: E402
from andrea_cli.masks import MaskSpec  # noqa: E402

SHAPES = [(1, 1, 1), (33, 80, 16), (257, 64, 64), (1024, 64, 64)]


def main() -> int:
    kernel = packaged_kernel_path()
    if len(sys.argv) > 1 and sys.argv[1] == "cpu":
        first, second = CpuBackend(kernel), CpuBackend(kernel, schedule="reverse")
        SHAPES.pop()  # the largest shape costs seconds on the CPU build
    else:
        from andrea_cli.backends.cuda import CudaBackend

        first, second = CudaBackend(kernel), CpuBackend(kernel)
    status = second.available()
    if not status.ok:  # no C++ compiler on this machine: say so in the JSON, do not fail the check
        print(json.dumps({"first": first.name, "second": None, "skipped": f"{status.reason}; {status.fix}", "cases": []}))
        return 0
    rows = []
    for T, d_k, d_v in SHAPES:
        rng = np.random.default_rng(T)
        q, k = (rng.standard_normal((1, T, d_k), dtype=np.float32) for _ in range(2))
        v = rng.standard_normal((1, T, d_v), dtype=np.float32)
        a = first.attention(q, k, v, mask=MaskSpec("causal"), scaled=True)
        b = second.attention(q, k, v, mask=MaskSpec("causal"), scaled=True)
        diffs = {}
        for stage in ("scores", "scaled", "weights", "output"):
            x, y = getattr(a, stage), getattr(b, stage)
            diffs[stage] = float(np.abs(x.astype(np.float64) - y).max())
        masked_equal = bool(np.array_equal(np.isneginf(a.masked), np.isneginf(b.masked)))
        rows.append({"T": T, "d_k": d_k, "d_v": d_v, "max_abs_diff": diffs, "same_masked_positions": masked_equal})
    print(json.dumps({"first": first.name, "second": f"{second.name} ({second.schedule})", "cases": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
