"""Device arrays of the CPU build: each in its own shared mapping, its last byte against a guard
page, so one element past the end faults at that access (read or write), like the GPU's
"illegal address" only sooner. The guard is 1 GiB of reserved address space on either side, so
an index that is far off (a million elements) faults too, and is still named after its array.
The bytes between the leading guard and the array's first byte are a canary (0xff, a NaN to any
float read) checked after each launch.

Every array lives in one arena: a range of address space reserved once per process at a fixed
address, backed by one memfd (file offset = address - arena base). A launch worker (worker.py)
reserves the same range and maps each array's pages from the same file at the same address, so
a kernel run there writes straight into the caller's array, and a pointer stored inside device
memory means the same in both processes. A forked child shares the mappings as well."""

from __future__ import annotations

import bisect
import collections
import ctypes
import functools
import mmap
import os
import threading

import numpy as np

PAGE = mmap.PAGESIZE
_CANARY = 0xFF

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
_MAP_FAILED = ctypes.c_void_p(-1).value
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)
_MAP_FIXED = 0x10  # Linux
_MAP_FIXED_NOREPLACE = 0x100000  # Linux >= 4.17; older kernels take it as a hint (checked below)
_FALLOC_PUNCH_HOLE = 0x01 | 0x02  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: give the pages back
_PROT_NONE = 0
_PROT_RW = mmap.PROT_READ | mmap.PROT_WRITE
GUARD_BYTES = 1 << 30  # reserved, never backed: address space costs nothing until it is mapped
# Where the arena goes: 16 TiB up, far below where Linux puts executables (~85 TiB), the heap
# and shared libraries (~127 TiB) on x86-64 and aarch64 with 47-48-bit addresses, so a freshly
# started worker finds the same range free. Smaller sizes where address space is limited
# (ulimit -v); each array takes its size plus 2 GiB of guards.
ARENA_BASE = 0x1000_0000_0000
ARENA_SIZES = (16 << 40, 1 << 40, 64 << 30)
# tracemalloc sees these arrays as it sees numpy's own (numpy's domain), so memory accounting
# such as bench's peak estimates holds for the CPU build too
_NUMPY_TRACE_DOMAIN = 389047
_track = ctypes.pythonapi.PyTraceMalloc_Track
_track.argtypes = [ctypes.c_uint, ctypes.c_size_t, ctypes.c_size_t]
_untrack = ctypes.pythonapi.PyTraceMalloc_Untrack
_untrack.argtypes = [ctypes.c_uint, ctypes.c_size_t]


def _reserve(address: int | None, size: int, flags: int = 0) -> int | None:
    """size bytes of inaccessible address space (at `address` exactly, if given), or None."""
    got = _libc.mmap(address, size, _PROT_NONE,
                     mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE | flags, -1, 0)
    if got in (None, _MAP_FAILED):
        return None
    if address is not None and got != address:  # a kernel that ignored MAP_FIXED_NOREPLACE
        _libc.munmap(got, size)
        return None
    return got


class Arena:
    """The process's device-array address range and the memfd behind it; first fit, with
    neighbouring free slots merged. `live` maps each array's pages (address -> length): what a
    worker must have mapped; `version` changes whenever `live` does."""

    def __init__(self):
        self.base = self.size = 0
        for size in ARENA_SIZES:
            got = _reserve(ARENA_BASE, size, _MAP_FIXED_NOREPLACE)
            if got is not None:
                self.base, self.size = got, size
                break
        self.fixed = bool(self.base)
        if not self.fixed:  # the fixed range is taken: anywhere (a worker may then not match it)
            for size in ARENA_SIZES:
                got = _reserve(None, size)
                if got is not None:
                    self.base, self.size = got, size
                    break
        if not self.base:
            raise MemoryError("cannot reserve address space for device arrays (is `ulimit -v` set?)")
        self.fd = os.memfd_create("andrea-device-arrays", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, self.size)  # sparse: pages exist only where arrays are written
        self._free = [(self.base, self.size)]  # (start, size), sorted, never adjacent
        self._lock = threading.Lock()
        self.live: dict[int, int] = {}
        self.version = 0
        # Slots of arrays the garbage collector freed, released at the next allocate/snapshot: a
        # collection can start at any allocation, inside this class's own locked sections too, so
        # __del__ must never take the lock (it would wait on itself). deque.append takes none.
        self._dead: collections.deque = collections.deque()

    def bury(self, release) -> None:
        """Queue a freed slot's release (a callable), for a __del__ to call safely."""
        self._dead.append(release)

    def _release_dead(self) -> None:
        while True:
            try:
                release = self._dead.popleft()
            except IndexError:
                return
            release()

    def allocate(self, size: int) -> int:
        self._release_dead()
        with self._lock:
            for i, (start, free) in enumerate(self._free):
                if free >= size:
                    self._free[i:i + 1] = [(start + size, free - size)] if free > size else []
                    return start
        raise MemoryError(f"the device-array arena ({self.size >> 30} GiB of address space) is full")

    def release(self, start: int, size: int) -> None:
        with self._lock:
            i = bisect.bisect(self._free, (start, size))
            if i < len(self._free) and self._free[i][0] == start + size:  # merge the next
                size += self._free.pop(i)[1]
            if i > 0 and sum(self._free[i - 1]) == start:  # and the previous
                start, size = self._free[i - 1][0], self._free[i - 1][1] + size
                i -= 1
                self._free.pop(i)
            self._free.insert(i, (start, size))

    def map_data(self, address: int, length: int) -> bool:
        got = _libc.mmap(address, length, _PROT_RW, mmap.MAP_SHARED | _MAP_FIXED, self.fd, address - self.base)
        if got != address:
            return False
        with self._lock:
            self.live[address] = length
            self.version += 1
        return True

    def unmap_data(self, address: int, length: int) -> None:
        """Back to reserved address space, the file's pages handed back to the system."""
        with self._lock:
            if self.live.pop(address, None) is not None:
                self.version += 1
        _libc.mmap(address, length, _PROT_NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE | _MAP_FIXED,
                   -1, 0)
        _libc.fallocate(self.fd, _FALLOC_PUNCH_HOLE, address - self.base, length)

    def snapshot(self) -> tuple[int, dict[int, int]]:
        self._release_dead()
        with self._lock:
            return self.version, dict(self.live)


_arena: Arena | None = None
_arena_lock = threading.Lock()


def arena() -> Arena:
    global _arena
    if _arena is None:
        with _arena_lock:
            if _arena is None:
                _arena = Arena()
    return _arena


class GuardedRegion:
    """One slot of the arena: [guard][canary bytes | the array's bytes][guard], the middle shared."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        self.shape, self.dtype = tuple(int(n) for n in shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.data = -(-self.nbytes // PAGE) * PAGE
        self.size = self.data + 2 * GUARD_BYTES
        self.base, self._tracked = None, False
        self._arena = arena()
        self.base = self._arena.allocate(self.size)
        first = self.base + GUARD_BYTES
        if self.data and not self._arena.map_data(first, self.data):
            self._unmap()
            raise MemoryError(f"cannot map {self.data} bytes for a device array")
        self.start = first + self.data - self.nbytes  # the last byte touches the trailing guard
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
            _release_slot(self._arena, self.base, self.size, self.data, self.start if self._tracked else None)
            self.base = None

    def __del__(self):
        # Possibly inside an arena method (see Arena._dead): the arena releases the slot later.
        if self.base is not None:
            self._arena.bury(functools.partial(_release_slot, self._arena, self.base, self.size, self.data,
                                               self.start if self._tracked else None))
            self.base = None


def _release_slot(arena_: Arena, base: int, size: int, data: int, tracked_start: int | None) -> None:
    """A slot back to the arena: its data pages unmapped and handed back, the range free again."""
    if tracked_start is not None:
        _untrack(_NUMPY_TRACE_DOMAIN, tracked_start)
    if data:
        arena_.unmap_data(base + GUARD_BYTES, data)
    arena_.release(base, size)


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
