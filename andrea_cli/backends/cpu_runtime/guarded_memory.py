"""Device arrays of the CPU build: each in its own shared mapping, its last byte against a guard
page, so one element past the end faults at that access (read or write), like the GPU's
"illegal address" only sooner. The guard is 1 GiB of reserved address space on either side, so
an index that is far off (a million elements) faults too, and is still named after its array.
The mapping is MAP_SHARED: a launch that runs in a forked child writes straight into the
caller's array. The bytes between the leading guard and the array's first byte are a canary
(0xff, a NaN to any float read) checked after each launch."""

from __future__ import annotations

import ctypes
import mmap

import numpy as np

PAGE = mmap.PAGESIZE
_CANARY = 0xFF

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)
_MAP_FIXED = 0x10  # Linux
_PROT_NONE = 0
GUARD_BYTES = 1 << 30  # reserved, never backed: address space costs nothing until it is mapped
# tracemalloc sees these arrays as it sees numpy's own (numpy's domain), so memory accounting
# such as bench's peak estimates holds for the CPU build too
_NUMPY_TRACE_DOMAIN = 389047
_track = ctypes.pythonapi.PyTraceMalloc_Track
_track.argtypes = [ctypes.c_uint, ctypes.c_size_t, ctypes.c_size_t]
_untrack = ctypes.pythonapi.PyTraceMalloc_Untrack
_untrack.argtypes = [ctypes.c_uint, ctypes.c_size_t]


class GuardedRegion:
    """One reservation: [guard][canary bytes | the array's bytes][guard], the middle shared."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        self.shape, self.dtype = tuple(int(n) for n in shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        data = -(-self.nbytes // PAGE) * PAGE
        self.size = data + 2 * GUARD_BYTES
        self.base, self._tracked = None, False
        base = _libc.mmap(None, self.size, _PROT_NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE,
                          -1, 0)
        if base in (None, _MAP_FAILED):
            raise MemoryError(f"cannot reserve {self.size} bytes of address space for a device array")
        self.base = base
        first = base + GUARD_BYTES
        if data and _libc.mmap(first, data, mmap.PROT_READ | mmap.PROT_WRITE,
                               mmap.MAP_SHARED | mmap.MAP_ANONYMOUS | _MAP_FIXED, -1, 0) != first:
            self._unmap()
            raise MemoryError(f"cannot map {data} bytes for a device array")
        self.start = first + data - self.nbytes  # the last byte touches the trailing guard
        self.gap = self.start - first
        if self.gap:
            ctypes.memset(first, _CANARY, self.gap)
        self._tracked = _track(_NUMPY_TRACE_DOMAIN, self.start, self.nbytes) == 0
        # descr: a structured dtype keeps its fields (typestr alone says only "|V8")
        self.__array_interface__ = {"shape": self.shape, "typestr": self.dtype.str, "descr": self.dtype.descr,
                                    "data": (self.start, False), "version": 3}

    def canary_hit(self) -> int | None:
        """The first canary byte a kernel wrote (counted back from the array's start), or None."""
        if not self.gap:
            return None
        gap = np.frombuffer((ctypes.c_ubyte * self.gap).from_address(self.start - self.gap), dtype=np.uint8)
        bad = np.flatnonzero(gap != _CANARY)
        return None if bad.size == 0 else int(self.gap - bad[0])

    def where(self, address: int) -> str | None:
        """"element 128, one past its end" or "element -1, before its start"; None if not near it."""
        if not self.base <= address < self.base + self.size:
            return None
        element = (address - self.start) // self.dtype.itemsize
        count = self.nbytes // self.dtype.itemsize
        if element >= count:
            return f"element {element}, past its end (it has {count})"
        return f"element {element}, before its start"

    def _unmap(self) -> None:
        if self.base is not None:
            if self._tracked:
                _untrack(_NUMPY_TRACE_DOMAIN, self.start)
            _libc.munmap(self.base, self.size)
            self.base = None

    def __del__(self):
        self._unmap()


def guarded_empty(shape, dtype=np.float32) -> np.ndarray:
    """An uninitialised array in its own guarded, shared mapping."""
    return np.asarray(GuardedRegion(tuple(np.atleast_1d(shape)), dtype))


def guarded_copy(a: np.ndarray) -> np.ndarray:
    out = guarded_empty(a.shape, a.dtype)
    out[...] = a
    return out


def region_of(a: np.ndarray) -> GuardedRegion | None:
    """The guarded mapping an array fills exactly (a view of part of one does not count)."""
    base = a.base
    while isinstance(base, np.ndarray):  # a reshape of one is a view of a view
        base = base.base
    if isinstance(base, GuardedRegion) and a.ctypes.data == base.start and a.nbytes == base.nbytes:
        return base
    return None
