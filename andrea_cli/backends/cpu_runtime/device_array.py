"""Device arrays of the CPU build, in cupy's shape: `empty`, `zeros`, `asarray`, and `.get()` for a
plain NumPy copy. Each lives in its own guarded shared mapping (guarded_memory.py) for as long as
the array does, so host and kernels see it at one address in every launch: a pointer stored in
one (a linked structure, a table of pointers to other arrays) reaches the same bytes in the
kernel, and the kernel's writes are there when the launch returns. A plain NumPy argument is
copied into such a mapping for each launch instead; a pointer into it is refused (pointers.py).
"""

from __future__ import annotations

import numpy as np

from andrea_cli.backends.cpu_runtime.guarded_memory import guarded_empty, region_of


class DeviceArray(np.ndarray):
    """A NumPy array in device memory: every NumPy operation works on it in place."""

    @property
    def ptr(self) -> int:
        """Its address, the same in the host and in every kernel (cupy: `a.data.ptr`)."""
        return self.ctypes.data

    def get(self) -> np.ndarray:
        """A plain NumPy copy (cupy's `.get()`)."""
        return np.array(self, copy=True, subok=False)


def empty(shape, dtype=np.float32) -> DeviceArray:
    return guarded_empty(shape, dtype).view(DeviceArray)


def zeros(shape, dtype=np.float32) -> DeviceArray:
    out = empty(shape, dtype)
    out.view(np.uint8)[...] = 0
    return out


def asarray(a, dtype=None) -> DeviceArray:
    """a itself when it is a device array of that dtype already, else a device copy of it."""
    if isinstance(a, np.ndarray) and region_of(a) is not None and (dtype is None or a.dtype == np.dtype(dtype)):
        return a.view(DeviceArray)
    src = np.asarray(a, dtype=dtype)
    out = empty(src.shape, src.dtype)
    out[...] = src
    return out
