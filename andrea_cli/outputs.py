"""Writing result arrays: checked before the run, written to a temporary file and renamed, so a
failed run never leaves a half-written file or touches the one already there."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from andrea_cli.errors import AndreaError


def check_writable(path: Path | None, flag: str, suffix: str = ".npy") -> None:
    """Fail before any work if the file could not be written afterwards."""
    if path is None:
        return
    if path.suffix.lower() != suffix:
        kind = "a NumPy array file" if suffix == ".npy" else "NumPy arrays, one file"
        raise AndreaError(f"{flag} {path}: the file name must end in {suffix} ({kind})")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise AndreaError(f"{flag} {path}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK):
        raise AndreaError(f"{flag} {path}: the folder {folder} is not writable; choose another")
    if path.is_dir():
        raise AndreaError(f"{flag} {path}: is a folder; pass a file name ending in {suffix}")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_distinct(*flagged: tuple[str, Path | None]) -> None:
    """Two outputs written to one file would silently keep only the last."""
    seen: dict[Path, str] = {}
    for flag, path in flagged:
        if path is None:
            continue
        key = path.resolve()
        if key in seen:
            raise AndreaError(f"{seen[key]} and {flag} name the same file {path}: give each its own name")
        seen[key] = flag


def save_npy_atomic(path: Path, array: np.ndarray) -> None:
    _write_atomic(path, lambda f: np.save(f, np.ascontiguousarray(array, dtype=np.float32), allow_pickle=False))


def save_npz_atomic(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Named float32 arrays in one .npz (np.savez: uncompressed, readable with np.load)."""
    _write_atomic(path, lambda f: np.savez(f, **{name: np.ascontiguousarray(a, dtype=np.float32)
                                                  for name, a in arrays.items()}))


def _write_atomic(path: Path, write) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        # mkstemp creates the file readable by its owner only; a saved array gets the usual mode
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
