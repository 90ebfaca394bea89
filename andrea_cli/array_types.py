"""The array types the Python API takes (NumPy, cupy, torch tensors, anything np.asarray takes),
told apart by duck typing so that neither torch nor cupy is imported: their dtype in words, a
host copy to compute on, and the result handed back as the caller's type, dtype and device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

HALF_TYPES = ("float16", "bfloat16")  # computed in float32, as the kernels do, and rounded back once
FLOAT_TYPES = (*HALF_TYPES, "float32", "float64")


def library_of(a) -> str:
    """"torch", "cupy" or "numpy" (NumPy arrays and whatever np.asarray takes)."""
    root = type(a).__module__.split(".")[0]
    return root if root in ("torch", "cupy") else "numpy"


def dtype_name(a) -> str:
    """float32, bfloat16, int64, bool, ...: NumPy's names, torch's without "torch."."""
    if library_of(a) == "torch":
        return str(a.dtype).removeprefix("torch.")
    return np.dtype(a.dtype).name if hasattr(a, "dtype") else np.asarray(a).dtype.name


def detached(a):
    """A torch tensor without its autograd graph (requires_grad inputs are data here); others as given."""
    return a.detach() if library_of(a) == "torch" else a


def on_gpu(a) -> bool:
    if library_of(a) == "torch":
        return a.device.type == "cuda"
    return library_of(a) == "cupy"


def to_host(a, dtype=None) -> np.ndarray:
    """A NumPy copy (or view) of a; bf16 torch tensors widened to float32 on their device first,
    since NumPy has no bfloat16. dtype: converted to it as well."""
    library = library_of(a)
    if library == "torch":
        a = a.detach()
        if dtype_name(a) == "bfloat16":
            a = a.float()
        a = a.cpu().numpy()
    elif library == "cupy":
        a = a.get()
    return np.asarray(a) if dtype is None else np.asarray(a, dtype=dtype)


def widened(a):
    """a in float32 where it lives (fp16/bf16 torch or cupy arrays on a GPU, for the kernels)."""
    if dtype_name(a) not in HALF_TYPES:
        return a
    return a.float() if library_of(a) == "torch" else a.astype("float32")


@dataclass(frozen=True)
class ArrayKind:
    """What the caller passed, so that the result can be handed back as the same."""

    library: str  # "numpy", "cupy" or "torch"
    dtype: str  # FLOAT_TYPES
    gpu: bool
    like: Any  # the query: a torch result is made with its .new_tensor (its dtype and device)

    @classmethod
    def of(cls, a) -> ArrayKind:
        return cls(library_of(a), dtype_name(a), on_gpu(a), detached(a))

    def back(self, out):
        """out (NumPy, or a cupy array from the GPU) as the caller's type, dtype and device."""
        if self.library == "torch":
            return self.like.new_tensor(out)  # torch rounds float32 to fp16/bf16 once, to nearest even
        if self.library == "cupy":
            if isinstance(out, np.ndarray):
                from andrea_cli.backends.cuda import to_gpu

                out = to_gpu(out)
            return out.astype(self.dtype)
        return np.asarray(out).astype(self.dtype, copy=False)
