"""One row of the kernel table (catalogue.py): what a kernel is built for and its block's sizes,
read from the packaged kernel file's #defines and __launch_bounds__ when asked, never copied."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Callable, Union

from andrea_cli.errors import AndreaError
from andrea_cli.kernel_file import integer_defines, launch_bounds, packaged_kernel_path


@cache
def _file_sizes() -> tuple[dict[str, int], dict[str, int]]:
    text = packaged_kernel_path().read_text()
    return integer_defines(text), launch_bounds(text)


def define(name: str) -> int:
    """An integer #define of the packaged kernel file: TILE, FUSED_KEYS, TC_ROWS, ..."""
    return _file_sizes()[0][name]


# A size: a number the launcher chooses (the kernel takes any), a #define's name (`{d}` in it: the
# head size), or a rule over the sizes: the #defines and the row's own "d", "rows", "tile", "threads"
# ("threads" before the row's rule: its __launch_bounds__)
Size = Union[int, str, Callable[[dict], int]]


@dataclass(frozen=True)
class Numerics:
    """What verify's bf16 reference repeats of a tensor-core kernel's arithmetic."""

    softmax_keys: dict[int, int]  # d -> keys per online-softmax step (a running max per step)
    exp2_error_u: float  # its exp2's relative error bound, in units of u = 2^-24 (an ulp is <= 2u)
    flushes_subnormals: bool  # ex2.approx.ftz: weights below 2^-126 become 0


@dataclass(frozen=True)
class Kernel:
    stem: str  # its name in the kernel file; with head_sizes, each entry point adds _d64, _d128
    family: str  # staged, staged_backward, fused, fused_bf16, fused_backward, fused_bf16_backward
    stage: str  # the stage it times as (timings_ms): scores, ..., fused, to_bf16, forward, dkdv, dq
    variant: int
    label: str  # its one short name: verify's stage, bench's row, parity's role
    precision: str = "fp32"  # what it multiplies: fp32, or bf16 on tensor cores
    head_sizes: tuple[int, ...] | None = None  # d_k = d_v compiled in, one entry point each; None: any
    width_multiple: int = 1  # d_k and d_v must be multiples of it (float4 loads)
    max_d: Size | None = None  # d_k, d_v at most this
    cc: tuple[int, int] | None = None  # the oldest compute capability it runs on (None: any CUDA 12 GPU)
    cc_exact: bool = False  # on cc alone (wgmma: sm_90a)
    rows: Size = 0  # output rows one block owns (grid ceil(T / rows)): queries, or keys for dK/dV
    tile: Size = 0  # keys per tile of its loop (queries per tile for dK/dV); 0: no tiles
    threads: Size = 0  # per block
    shared: Callable[..., int] | None = None  # (sizes, d_k, d_v) -> dynamic shared bytes
    products: int = 0  # T×T×d matrix products it does (Q·K^T, P·V, ...): bench --bound's FLOPs
    numerics: Numerics | None = None
    tensor_maps: bool = False  # takes TMA tensor maps of K and V after its mask arguments (kernel7)
    default: bool = True  # may be the device's default (the fastest it runs), not only chosen by name

    def entry(self, d: int | None = None) -> str:
        """The entry point's name in the kernel file (d: the head size, where it is compiled in)."""
        if self.head_sizes is None:
            return self.stem
        if d not in self.head_sizes:
            raise AndreaError(f"{self.stem} is built for d_k = d_v = {' or '.join(map(str, self.head_sizes))} "
                              f"(got {d})")
        return f"{self.stem}_d{d}"

    def entries(self) -> tuple[str, ...]:
        return (self.stem,) if self.head_sizes is None else tuple(self.entry(d) for d in self.head_sizes)

    def sizes(self, d: int | None = None, rows: int | None = None) -> dict[str, int]:
        """Its block's sizes at head size d, "rows", "tile", "threads", beside the file's #defines."""
        defines, bounds = _file_sizes()
        sizes = {**defines, "d": d or 0, "threads": 0}
        if self.head_sizes is None or d in self.head_sizes:
            sizes["threads"] = bounds.get(self.entry(d), 0)
        for key, size in (("rows", self.rows if rows is None else rows), ("tile", self.tile),
                          ("threads", self.threads)):
            sizes[key] = _resolve(size, sizes) if size else sizes.get(key, 0)
        return sizes

    def block_rows(self, d: int | None = None) -> int:
        return self.sizes(d)["rows"]

    def tile_size(self, d: int | None = None) -> int:
        return self.sizes(d)["tile"]

    def block_threads(self, d: int | None = None, rows: int | None = None) -> int:
        return self.sizes(d, rows)["threads"]

    def shared_bytes(self, d_k: int = 0, d_v: int | None = None, rows: int | None = None, threads: int = 0) -> int:
        """Dynamic shared memory of one block (rows: a launch's own, where the kernel takes any)."""
        if self.shared is None:
            return 0
        sizes = self.sizes(d_k if self.head_sizes else None, rows)
        if threads:
            sizes["threads"] = threads
        return self.shared(sizes, d_k, d_k if d_v is None else d_v)

    def takes(self, d_k: int, d_v: int) -> bool:
        """Whether it is built for these widths."""
        if self.head_sizes is not None:
            return d_k == d_v and d_k in self.head_sizes
        limit = _resolve(self.max_d, self.sizes()) if self.max_d else None
        return (d_k % self.width_multiple == 0 and d_v % self.width_multiple == 0
                and (limit is None or max(d_k, d_v) <= limit))

    def needs(self) -> str:
        """What widths it takes, for an error message."""
        if self.head_sizes is not None:
            return f"d_k = d_v, one of {', '.join(map(str, self.head_sizes))}"
        if self.width_multiple > 1:
            return f"d_k and d_v divisible by {self.width_multiple}"
        return "any d_k and d_v" + (f" up to {_resolve(self.max_d, self.sizes())}" if self.max_d else "")

    def runs_on(self, cc: tuple[int, int] | None) -> bool:
        """cc None: the CPU build, which runs every kernel."""
        if cc is None or self.cc is None:
            return True
        return tuple(cc) == self.cc if self.cc_exact else tuple(cc) >= self.cc


def _resolve(size: Size, sizes: dict) -> int:
    if callable(size):
        return size(sizes)
    if isinstance(size, str):
        return sizes[size.format(**sizes)]
    return size
