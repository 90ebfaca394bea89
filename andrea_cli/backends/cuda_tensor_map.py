"""A TMA tensor map on a GPU: the driver's cuTensorMapEncodeTiled (libcuda, through ctypes: cupy
does not wrap it), the 128 opaque bytes then copied to device memory, where kernel7 reads them
(a map in global memory, written before the launch). Untested on a GPU in this project so far
(no H100 / H200 measured): the CPU build's maps are cpu_runtime/tensor_map.py's."""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from andrea_cli.errors import AndreaError

_DTYPES = {2: 1, 4: 2}  # element bytes -> CU_TENSOR_MAP_DATA_TYPE_UINT16, _UINT32 (bits are copied as they are)
_SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}  # CU_TENSOR_MAP_SWIZZLE_NONE, _32B, _64B, _128B


@functools.cache
def _encoder():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise AndreaError(f"TMA tensor maps need the CUDA driver (libcuda.so.1): {exc}") from None
    f = lib.cuTensorMapEncodeTiled
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                  ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                  ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                  ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    return f


def encode_tiled(address: int, itemsize: int, shape: tuple[int, ...], box: tuple[int, ...],
                 swizzle: int = 0) -> np.ndarray:
    """The map of a C-order tensor of `shape` at device `address` (box innermost last, like the
    shape): 128 bytes. Outside the tensor a box reads zeros (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)."""
    if itemsize not in _DTYPES:
        raise AndreaError(f"a TMA tensor map of {itemsize}-byte elements: andrea encodes 2 or 4")
    rank = len(shape)
    dims = (ctypes.c_uint64 * rank)(*shape[::-1])
    strides_bytes = [itemsize * int(np.prod(shape[i + 1:])) for i in range(rank)][::-1][1:]
    strides = (ctypes.c_uint64 * max(1, rank - 1))(*strides_bytes)
    boxes = (ctypes.c_uint32 * rank)(*box[::-1])
    ones = (ctypes.c_uint32 * rank)(*([1] * rank))
    out = (ctypes.c_uint8 * 192)()  # a CUtensorMap is 128 bytes, 64-byte aligned
    at = (ctypes.addressof(out) + 63) // 64 * 64
    err = _encoder()(at, _DTYPES[itemsize], rank, address, dims, strides, boxes, ones,
                     0, _SWIZZLES[swizzle], 2, 0)  # no interleave, L2 promotion 128 B, zero fill
    if err:
        raise AndreaError(f"cuTensorMapEncodeTiled failed (CUresult {err}) for shape {shape}, box {box}")
    return np.frombuffer(ctypes.string_at(at, 128), np.uint8).copy()
