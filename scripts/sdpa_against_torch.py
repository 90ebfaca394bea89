"""andrea_cli.scaled_dot_product_attention against torch's, case by case: the error of each
against the float64 reference (andrea_cli/reference_sdpa.py) on the same inputs. A case passes
when andrea's error is within 2x torch's fp32 (or float64) error, 3x torch's own error in
fp16/bf16, and the result has the input's type, dtype and shape. Each case runs on the NumPy
path (backend numpy) and on the kernel file's CPU build (backend cpu; what its kernels cannot
take yet runs the NumPy path there too, and the path column says so).

    python scripts/sdpa_against_torch.py            # every case, both backends; exit 1 if one fails
    python scripts/sdpa_against_torch.py --quick    # the few cases the default test tier runs
"""

from __future__ import annotations

import sys
import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, ".")
import andrea_cli  # noqa: E402
from andrea_cli.errors import KernelFallbackWarning  # noqa: E402
from andrea_cli.reference_sdpa import sdpa as reference  # noqa: E402

FACTOR = {"float32": 2.0, "float64": 2.0, "float16": 3.0, "bfloat16": 3.0}  # times torch's error


@dataclass(frozen=True)
class Case:
    name: str
    q: tuple  # query's shape (..., L, E); key and value (..., S, E) and (..., S, E_v)
    k: tuple
    v: tuple
    dtype: str = "float32"
    mask: str | None = None  # "bool" or "float": an attn_mask of shape mask_shape
    mask_shape: tuple = ()
    keywords: dict = field(default_factory=dict)  # is_causal, scale, enable_gqa
    library: str = "torch"  # the inputs' type: torch tensors or NumPy arrays
    requires_grad: bool = False
    quick: bool = False  # one of the few the default test tier runs


CASES = [
    Case("defaults (NumPy in)", (2, 4, 64, 32), (2, 4, 64, 32), (2, 4, 64, 32), library="numpy", quick=True),
    Case("defaults", (2, 4, 64, 32), (2, 4, 64, 32), (2, 4, 64, 32)),
    Case("is_causal, L = S", (2, 4, 64, 32), (2, 4, 64, 32), (2, 4, 64, 32), keywords={"is_causal": True},
         quick=True),
    Case("is_causal, L < S", (2, 2, 16, 32), (2, 2, 64, 32), (2, 2, 64, 32), keywords={"is_causal": True},
         quick=True),
    Case("is_causal, L > S", (2, 2, 64, 32), (2, 2, 16, 32), (2, 2, 16, 32), keywords={"is_causal": True}),
    Case("bool mask (L, S)", (2, 4, 48, 32), (2, 4, 48, 32), (2, 4, 48, 32), mask="bool", mask_shape=(48, 48),
         quick=True),
    Case("float mask (B,1,L,S)", (2, 4, 48, 32), (2, 4, 40, 32), (2, 4, 40, 32), mask="float",
         mask_shape=(2, 1, 48, 40)),
    Case("scale 0.3", (2, 4, 64, 32), (2, 4, 64, 32), (2, 4, 64, 32), keywords={"scale": 0.3}),
    Case("cross-attention", (2, 4, 24, 32), (2, 4, 80, 32), (2, 4, 80, 48)),
    Case("decode step, L = 1", (2, 4, 1, 64), (2, 4, 128, 64), (2, 4, 128, 64)),
    Case("GQA 8/2", (2, 8, 32, 32), (2, 2, 32, 32), (2, 2, 32, 32), keywords={"enable_gqa": True}, quick=True),
    Case("MQA 8/1, causal", (2, 8, 32, 32), (2, 1, 32, 32), (2, 1, 32, 32),
         keywords={"enable_gqa": True, "is_causal": True}),
    Case("GQA decode step", (1, 8, 1, 64), (1, 2, 96, 64), (1, 2, 96, 64), keywords={"enable_gqa": True}),
    Case("3-D (H, L, E)", (4, 64, 32), (4, 64, 32), (4, 64, 16)),
    Case("float16, causal", (2, 4, 64, 32), (2, 4, 64, 32), (2, 4, 64, 32), dtype="float16",
         keywords={"is_causal": True}, quick=True),
    Case("bfloat16, causal", (2, 4, 64, 32), (2, 4, 64, 32), (2, 4, 64, 32), dtype="bfloat16",
         keywords={"is_causal": True}),
    Case("bfloat16 GQA", (2, 8, 32, 64), (2, 2, 32, 64), (2, 2, 32, 64), dtype="bfloat16",
         keywords={"enable_gqa": True}),
    Case("float64, causal", (2, 4, 64, 32), (2, 4, 64, 32), (2, 4, 64, 32), dtype="float64",
         keywords={"is_causal": True}),
    Case("float16 (NumPy in)", (4, 32, 16), (4, 32, 16), (4, 32, 16), dtype="float16", library="numpy"),
    Case("requires_grad", (2, 4, 64, 32), (2, 4, 64, 32), (2, 4, 64, 32), keywords={"is_causal": True},
         requires_grad=True, quick=True),
]
BACKENDS = ("numpy", "cpu")


@dataclass
class Row:
    case: Case
    backend: str
    path: str  # "kernels" or "numpy" (the NumPy path; on cpu a fallback, said why)
    error: float  # andrea's largest difference from the float64 reference
    torch_error: float  # torch's, in the case's dtype
    same_type: bool  # the input's type, dtype and torch's shape

    @property
    def allowed(self) -> float:
        return FACTOR[self.case.dtype] * self.torch_error

    @property
    def passed(self) -> bool:
        return self.same_type and self.error <= self.allowed


def inputs(case: Case, torch):
    """q, k, v (and the mask) as the case's library and dtype, from one seed; the float64 copies
    of exactly those values for the reference."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))  # one seed per case, every run
    arrays = [rng.standard_normal(shape) for shape in (case.q, case.k, case.v)]
    mask = None
    if case.mask == "bool":
        mask = rng.random(case.mask_shape) < 0.7
        mask[..., 3, :] = False  # one query sees no key: zeros, as torch gives
    elif case.mask == "float":
        mask = rng.standard_normal(case.mask_shape).astype(np.float32)
        mask[..., ::5] = -np.inf
    tensors = [torch.tensor(a, dtype=getattr(torch, case.dtype), requires_grad=case.requires_grad) for a in arrays]
    exact = [t.detach().double().numpy() for t in tensors]
    given = tensors if case.library == "torch" else [t.detach().numpy() for t in tensors]
    torch_mask = None if mask is None else torch.from_numpy(mask)
    return given, tensors, exact, mask, torch_mask


def run_case(case: Case, backend: str, torch) -> Row:
    given, tensors, exact, mask, torch_mask = inputs(case, torch)
    want = reference(*exact, attn_mask=mask, **case.keywords)
    theirs = torch.nn.functional.scaled_dot_product_attention(*tensors, attn_mask=torch_mask, **case.keywords)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", KernelFallbackWarning)
        ours = andrea_cli.scaled_dot_product_attention(*given, attn_mask=mask, backend=backend, **case.keywords)
    fell_back = any(issubclass(w.category, KernelFallbackWarning) for w in caught)
    path = "numpy" if backend == "numpy" or fell_back else "kernels"
    if case.library == "torch":
        same = isinstance(ours, torch.Tensor) and ours.dtype == given[0].dtype and ours.shape == theirs.shape
        ours64 = ours.double().numpy()
    else:
        same = isinstance(ours, np.ndarray) and ours.dtype == given[0].dtype and ours.shape == tuple(theirs.shape)
        ours64 = ours.astype(np.float64)
    return Row(case, backend, path, float(np.abs(ours64 - want).max()),
               float(np.abs(theirs.detach().double().numpy() - want).max()), same)


def table(rows: list[Row]) -> str:
    """One line per case and backend, 80 columns."""
    lines = [f"{'case':<22} {'backend':<7} {'path':<7} {'dtype':<8} {'andrea':>8} {'torch':>8} {'ratio':>5}  ok",
             "-" * 78]
    for r in rows:
        ratio = r.error / r.torch_error if r.torch_error else float("inf") if r.error else 0.0
        verdict = "yes" if r.passed else "TYPE" if not r.same_type else "NO"
        lines.append(f"{r.case.name:<22} {r.backend:<7} {r.path:<7} {r.case.dtype:<8} {r.error:>8.1e} "
                     f"{r.torch_error:>8.1e} {ratio:>5.2f}  {verdict}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    try:
        import torch
    except ImportError:
        print("torch is not installed: pip install torch (the CPU wheel is enough)", file=sys.stderr)
        return 1
    cases = [c for c in CASES if c.quick] if "--quick" in argv else CASES
    rows = [run_case(case, backend, torch) for case in cases for backend in BACKENDS]
    print(table(rows))
    failed = [r for r in rows if not r.passed]
    print(f"{len(rows) - len(failed)} of {len(rows)} within {FACTOR['float32']:g}x torch's error "
          f"({FACTOR['float16']:g}x in fp16/bf16), the input's type and dtype; torch {torch.__version__}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
