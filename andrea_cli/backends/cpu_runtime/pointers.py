"""Pointers a launch would lose. A plain NumPy argument is copied into device memory for the
launch (guarded_memory.py), so a pointer to it that another argument holds (a node's `next`, a
table of array addresses) still points at the caller's copy: the kernel would read stale data
and its writes would vanish. Found before the launch, by the 8-byte words of each argument
that can hold a pointer; the fix is a device array (andrea_cli.device), whose address is one.
"""

from __future__ import annotations

import re

import numpy as np

from andrea_cli.backends.cpu_runtime.guarded_memory import region_of

_POINTER_KINDS = (np.dtype(np.uint64), np.dtype(np.int64))


def parameter_name(declaration: str, index: int) -> str:
    """`const Node* __restrict__ n` -> "argument 0 (n)"."""
    names = re.findall(r"[A-Za-z_]\w*", declaration)
    return f"argument {index} ({names[-1]})" if names else f"argument {index}"


def may_hold_pointers(arg: np.ndarray, pointee: str | None) -> bool:
    """Structs, raw words and void or pointer-to-pointer parameters can; float and int arrays not."""
    return bool(arg.dtype.fields) or arg.dtype.kind == "V" or arg.dtype in _POINTER_KINDS or \
        pointee is None or pointee[0] in "spv"


def lost_pointer(kernel: str, args: tuple, pointees: list[str | None], params: list[str],
                 copies_every_array: bool = False, build_flag: str = "sanitize=True") -> str | None:
    """The one-line error for the first argument that holds a pointer into a copied argument.
    copies_every_array: a sanitized or racecheck build, whose worker process gets a copy of device
    arrays too; build_flag: the option that chose that build, for the error's fix."""
    copied = [(i, a.ctypes.data, a.ctypes.data + a.nbytes) for i, a in enumerate(args)
              if isinstance(a, np.ndarray) and a.nbytes and (copies_every_array or region_of(a) is None)]
    if not copied:
        return None
    for j, arg in enumerate(args):
        if not isinstance(arg, np.ndarray) or arg.nbytes < 8 or not may_hold_pointers(arg, pointees[j]):
            continue
        raw = np.frombuffer(arg.view(np.uint8).reshape(-1)[:arg.nbytes // 8 * 8], dtype=np.uint64) \
            if arg.ctypes.data % 8 == 0 else None
        if raw is None:
            continue
        for i, lo, hi in copied:
            if np.any((raw >= lo) & (raw < hi)):
                holder, target = parameter_name(params[j], j), parameter_name(params[i], i)
                if copies_every_array:
                    build = "racecheck" if build_flag.startswith("racecheck") else "sanitized"
                    return (f"{kernel}: {holder} holds a pointer into {target}, and the {build} build runs "
                            "the kernel on copies of every array in its worker process, where that address "
                            f"is not the array: run this launch without {build_flag}")
                return (f"{kernel}: {holder} holds a pointer into {target}, a NumPy array the launch copies "
                        f"into device memory, so the kernel would follow it to the caller's copy: allocate "
                        f"{target.split('(')[-1].rstrip(')')} with andrea_cli.device.asarray(...) (one address "
                        "for host and kernels)")
    return None
