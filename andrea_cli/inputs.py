"""Q, K, V for a run: seeded random N(0, 1) entries, or arrays read from .npy/.npz files.

Files are read with allow_pickle=False: a file's contents are data, never code to execute."""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from andrea_cli.errors import AndreaError


@dataclass
class QKV:
    """One head's Q, K, V, (T, d); or, from the Python API, H heads', (H, T, d), run in one launch.
    From the API they may also be GPU arrays (cupy, or DLPack tensors), used where they are.
    Q may have L = T rows against S rows of K and V (cross-attention, a decode step)."""

    q: Any  # (L, d_k) or (H, L, d_k) float32
    k: Any  # (S, d_k) or (H, S, d_k) float32
    v: Any  # (S, d_v) or (H, S, d_v) float32
    source: str  # how they were made, for the report
    on_device: bool = False  # GPU arrays: only the cuda backend takes them

    @property
    def T(self) -> int:
        """The queries, L (every run's T; S = T unless the keys are more or fewer)."""
        return self.q.shape[-2]

    @property
    def S(self) -> int:
        """The keys (and values)."""
        return self.k.shape[-2]

    @property
    def d_k(self) -> int:
        return self.q.shape[-1]

    @property
    def d_v(self) -> int:
        return self.v.shape[-1]

    @property
    def H(self) -> int | None:
        """The number of heads of (H, T, d) inputs; None for one head's (T, d)."""
        return self.q.shape[0] if len(self.q.shape) == 3 else None

    @property
    def H_kv(self) -> int | None:
        """K's and V's heads: H, or fewer (grouped: query head h reads K/V head h // (H / H_kv))."""
        return self.k.shape[0] if len(self.k.shape) == 3 else None


def check_sizes_match_files(sizes) -> None:
    """sizes: (flag, the size it asked for or None, the size the files have). A size given beside
    files must be theirs: the files win, and the flag that disagrees is blamed."""
    for flag, given, actual in sizes:
        if given is not None and given != actual:
            raise AndreaError(f"{flag} {given} disagrees with the input files ({actual}); drop {flag} or fix the files")


def check_sizes(T: int, d_k: int, d_v: int, S: int | None = None, *, flags: tuple[str, str] = ("--T", "--T")) -> None:
    """Every size >= 1; flags: what the query and key counts were given as (--T, or --T-q/--T-k)."""
    sizes = ((flags[0], T), *(((flags[1], S),) if S is not None else ()), ("--d-k", d_k), ("--d-v", d_v))
    for flag, value in sizes:
        if value < 1:
            raise AndreaError(f"{flag} must be >= 1 (got {value}): pass a positive size")


def check_seed(seed) -> None:
    """Seeds are whole numbers >= 0 (NumPy's generators take no negative seed)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise AndreaError(f"--seed {seed!r}: a seed is a whole number >= 0; pass e.g. --seed 0")


def random_qkv(T: int, d_k: int, d_v: int, seed: int, *, dist: str = "normal", S: int | None = None) -> QKV:
    """Entries drawn N(0, 1) (the course's "unit vectors": unit-variance entries), or with
    dist="unit", each row scaled to unit length. T queries against S keys and values (S = T
    unless given); drawn q, k, v in that order, so a square run's inputs do not depend on S's path."""
    S = T if S is None else S
    check_sizes(T, d_k, d_v, S)
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal((rows, d_k), dtype=np.float32) for rows in (T, S))
    v = rng.standard_normal((S, d_v), dtype=np.float32)
    if dist == "unit":
        q, k = (x / np.linalg.norm(x, axis=1, keepdims=True) for x in (q, k))
        return QKV(q, k, v, f"random unit-norm rows (seed {seed})")
    return QKV(q, k, v, f"random N(0, 1) entries (seed {seed})")


NPY_MAGIC = b"\x93NUMPY"  # every file np.save writes starts with it
NPZ_MAGIC = b"PK"  # a .npz is a zip archive


def check_magic(path: Path, flag: str, magic: bytes, what: str, header: str, fix: str) -> None:
    """A file that is not what its name says (a text or CSV file named .npy) is named as such,
    before NumPy reads it and blames pickling."""
    with open(path, "rb") as f:
        head = f.read(len(magic))
    if not head:
        raise AndreaError(f"{flag} {path}: the file is empty; {fix}")
    if head[:1] == b"\x80":  # pickle's protocol opcode
        raise AndreaError(f"{flag} {path}: a Python pickle, not a {what}; andrea never does the unpickling "
                          f"that would run code from a file: {fix}")
    if head != magic:
        raise AndreaError(f"{flag} {path}: not a {what}, it does not start with {header} "
                          f"(a text or CSV file renamed?); {fix}")


def load_npy_matrix(path: Path, flag: str) -> np.ndarray:
    return as_matrix(load_npy(path, flag), f"{flag} {path}")


def load_npy(path: Path, flag: str) -> np.ndarray:
    """One array of a .npy file as it was saved (any dtype but objects), or a one-line AndreaError."""
    check_readable(path, flag, (".npy",))
    check_magic(path, flag, NPY_MAGIC, ".npy file", "NumPy's header", "save the array with np.save")
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise AndreaError(f"{flag} {path}: not a numeric .npy array (reading it would mean unpickling objects, which andrea never does); save a float array with np.save") from None
        raise AndreaError(f"{flag} {path}: not a valid .npy file ({exc}); save it with np.save") from None
    except (OSError, EOFError) as exc:
        raise AndreaError(f"{flag} {path}: cannot read it as .npy ({exc.__class__.__name__}); save it with np.save") from None
    if not isinstance(array, np.ndarray):
        raise AndreaError(f"{flag} {path}: not a .npy array; save one array with np.save")
    return array


def load_npz_matrices(path: Path, flag: str, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The named arrays of one .npz, each a finite 2-D float32 matrix."""
    fix = f"save with np.savez(path, {', '.join(f'{n}={n}' for n in names)})"
    check_readable(path, flag, (".npz",))
    check_magic(path, flag, NPZ_MAGIC, ".npz archive", "a zip header", fix)
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [name for name in names if name not in archive.files]
            if missing:
                raise AndreaError(
                    f"{flag} {path}: no array named {', '.join(missing)} (it has {', '.join(archive.files) or 'none'}); {fix}"
                )
            return {name: as_matrix(archive[name], f"{flag} {path} [{name}]") for name in names}
    except AndreaError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise AndreaError(f"{flag} {path}: holds object arrays (reading them would mean unpickling, which andrea never does); save float arrays with np.savez") from None
        raise AndreaError(f"{flag} {path}: not a valid .npz file ({exc}); {fix}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise AndreaError(f"{flag} {path}: cannot read it as .npz ({exc.__class__.__name__}); {fix}") from None


def check_readable(path: Path, flag: str, suffixes: tuple[str, ...]) -> None:
    if not path.exists():
        raise AndreaError(f"{flag} {path}: no such file; check the path")
    if not path.is_file():
        raise AndreaError(f"{flag} {path}: not a file; pass a {'/'.join(suffixes)} file")
    if path.suffix.lower() not in suffixes:
        raise AndreaError(f"{flag} {path}: expected a {'/'.join(suffixes)} file (saved with NumPy), got '{path.suffix or 'no extension'}'")
    if not os.access(path, os.R_OK):
        raise AndreaError(f"{flag} {path}: not readable (permission denied); check its permissions")


def as_matrix(array: np.ndarray, what: str, *, heads: bool = False) -> np.ndarray:
    """A finite, contiguous float32 (T, d) matrix; with heads=True (the Python API) also (H, T, d)."""
    if array.dtype.kind not in "fiu":
        raise AndreaError(f"{what}: dtype {array.dtype} is not real numbers; save a float32 array")
    if array.ndim != 2 and not (heads and array.ndim == 3):
        raise AndreaError(f"{what}: expected a 2-D array (T, d){' or 3-D (H, T, d)' if heads else ''}, "
                          f"got shape {array.shape}")
    if 0 in array.shape:
        raise AndreaError(f"{what}: shape {array.shape} is empty; T and d must be >= 1")
    with np.errstate(over="ignore"):
        matrix = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(matrix).all():
        bad = np.argwhere(~np.isfinite(matrix))[0]
        where = ", ".join(f"{axis} {i}" for axis, i in zip(("head", "row", "column")[-len(bad):], bad))
        raise AndreaError(f"{what}: holds NaN or Inf (first at {where}, after conversion to float32); clean the input")
    return matrix


def check_qkv_shapes(q, k, v, *, one_length: bool = False, grouped: bool = False) -> None:
    """Q, K, V fit together: scores = Q·K^T needs one d_k, every key a value, and (H, ., d)
    inputs as many heads each (grouped: K and V may have H_kv heads, H a multiple of H_kv). Q's
    rows (L queries) may differ from K's and V's (S keys), unless one_length (a run over one
    sequence, as generate's)."""
    if q.shape[-1] != k.shape[-1]:
        raise AndreaError(f"Q is {tuple(q.shape)} and K is {tuple(k.shape)}: their d_k (columns) must agree, "
                          "since scores = Q · K^T")
    shapes = f"Q {tuple(q.shape)}, K {tuple(k.shape)}, V {tuple(v.shape)}"
    kv_fit = grouped and len(q.shape) == len(k.shape) == 3 and q.shape[0] % k.shape[0] == 0
    if (q.shape[:-2] != k.shape[:-2] and not kv_fit) or k.shape[:-2] != v.shape[:-2]:
        raise AndreaError(f"{shapes}: all three need the same heads")
    if k.shape[-2] != v.shape[-2]:
        raise AndreaError(f"{shapes}: K and V need the same T (rows), a value for every key")
    if one_length and q.shape[-2] != k.shape[-2]:
        raise AndreaError(f"{shapes}: all three need the same T (rows), one per position")


def is_gpu_array(a) -> bool:
    """A cupy array or a CUDA tensor offering DLPack (torch on a GPU), told apart without importing
    either: kDLCUDA (2), kDLCUDAHost (3) and kDLCUDAManaged (13) are DLPack's CUDA devices."""
    if isinstance(a, np.ndarray):
        return False
    if hasattr(a, "__cuda_array_interface__"):
        return True
    try:
        return a.__dlpack_device__()[0] in (2, 3, 13)
    except (AttributeError, TypeError, RuntimeError):
        return False


def qkv_from_arrays(q, k, v, *, grouped: bool = False) -> QKV:
    """The Python API's inputs: NumPy (or anything np.asarray takes), (T, d) or (H, T, d),
    checked like files are; or GPU arrays, checked for shape only and left where they are.
    grouped: K and V may have fewer heads than Q (H_kv dividing H; grad's)."""
    names = ("q", "k", "v")
    on_gpu = [is_gpu_array(a) for a in (q, k, v)]
    if any(on_gpu) and not all(on_gpu):
        raise AndreaError("q, k, v: some are GPU arrays and some are not; pass all three on the GPU or all as NumPy")
    if all(on_gpu):
        for name, a in zip(names, (q, k, v)):
            if len(a.shape) not in (2, 3) or 0 in tuple(a.shape):
                raise AndreaError(f"{name}: expected a 2-D (T, d) or 3-D (H, T, d) array, got shape {tuple(a.shape)}")
        arrays = (q, k, v)
    else:
        try:
            arrays = tuple(as_matrix(np.asarray(a), name, heads=True) for name, a in zip(names, (q, k, v)))
        except (TypeError, ValueError) as exc:
            raise AndreaError(f"q, k, v: not arrays of numbers ({exc}); pass NumPy arrays") from None
    if len({len(a.shape) for a in arrays}) > 1:
        raise AndreaError(f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: pass all three (T, d) or all (H, T, d)")
    check_qkv_shapes(*arrays, grouped=grouped)
    where = "GPU arrays" if all(on_gpu) else "arrays"
    return QKV(*arrays, source=f"{where} passed to andrea_cli.attend", on_device=all(on_gpu))


def load_qkv(q_path: Path | None, k_path: Path | None, v_path: Path | None, qkv_path: Path | None, *,
             one_length: bool = False) -> QKV:
    """From --q/--k/--v (all three) or --qkv; checks that the shapes fit together: q (L, d_k),
    k (S, d_k), v (S, d_v), L = S where one_length."""
    separate = [p for p in (q_path, k_path, v_path) if p is not None]
    if qkv_path is not None and separate:
        raise AndreaError("pass either --qkv FILE.npz or --q/--k/--v, not both")
    if qkv_path is not None:
        arrays = load_npz_matrices(qkv_path, "--qkv", ("q", "k", "v"))
        q, k, v = arrays["q"], arrays["k"], arrays["v"]
        source = f"file {qkv_path}"
    else:
        if len(separate) != 3:
            missing = [flag for flag, p in (("--q", q_path), ("--k", k_path), ("--v", v_path)) if p is None]
            raise AndreaError(f"missing {', '.join(missing)}: pass all of --q, --k, --v (or one --qkv FILE.npz)")
        q, k, v = load_npy_matrix(q_path, "--q"), load_npy_matrix(k_path, "--k"), load_npy_matrix(v_path, "--v")
        source = f"files {q_path}, {k_path}, {v_path}"
    check_qkv_shapes(q, k, v, one_length=one_length)
    return QKV(q, k, v, source)


def available_memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


# Host bytes per T×T entry a staged run holds at its peak: the float32 intermediates brought back
# (scores, scaled, masked, weights), the NumPy path's float64 stages, and the statistics' float64
# temporaries. An estimate on the generous side, so a refusal comes before any allocation.
HOST_BYTES_PER_SCORE = 64


# Host bytes per Q/K/V/output entry at a run's peak: the float32 inputs, the copies a backend
# makes of them and of its output, and a float64 copy for the statistics' reference.
HOST_BYTES_PER_INPUT = 32


def require_memory(need: int, what: str, fix: str, available: int | None = None) -> None:
    """Refuse, before allocating, a run that would not fit in the memory this machine has free."""
    have = available_memory_bytes() if available is None else available
    if need > 0.8 * have:
        raise AndreaError(f"{what} would need about {need / 2**30:.1f} GiB, more than the "
                          f"{have / 2**30:.1f} GiB available: {fix}")


def input_bytes(n_heads: int, T: int, d_k: int, d_v: int, *, S: int | None = None,
                kv_heads: int | None = None) -> int:
    """Q and the output for n_heads query heads, K and V for kv_heads (n_heads unless grouped:
    the kernels read the K/V heads as they are, no copy per query head), max(T, S) rows each."""
    S = T if S is None else S
    kv_heads = n_heads if kv_heads is None else kv_heads
    return (n_heads + kv_heads) * max(T, S) * (d_k + d_v) * HOST_BYTES_PER_INPUT


def check_fits_in_memory(n_heads: int, T: int, d_k: int = 1, d_v: int = 1, *, square: bool = True,
                         bytes_per_score: int = HOST_BYTES_PER_SCORE, available: int | None = None,
                         S: int | None = None, kv_heads: int | None = None) -> None:
    """The T×S score matrices of every (query) head (S = T unless given; none if the run never
    builds them) and the inputs (kv_heads K/V heads, grouped); the message blames what takes the
    most: the scores, or the widths."""
    S = T if S is None else S
    inputs = input_bytes(n_heads, T, d_k, d_v, S=S, kv_heads=kv_heads)
    scores = n_heads * T * S * bytes_per_score if square else 0
    if scores >= inputs:
        if S == T:
            what, fix = f"T={T} with its {n_heads}×{T}×{T} score matrices", "use a smaller --T"
        else:
            what, fix = f"L={T} queries against S={S} keys, {n_heads}×{T}×{S} scores", "use a smaller --T-q or --T-k"
    else:
        # the inputs grow as T·(d_k + d_v): blame the larger factor, T or the widest width
        widest, width = ("--d-k", d_k) if d_k >= d_v else ("--d-v", d_v)
        what = f"T={T}, d_k={d_k}, d_v={d_v} ({n_heads} head{'s' if n_heads > 1 else ''}): Q, K, V and the output"
        fix = f"use a smaller --T (or {widest})" if T >= width else f"use a smaller {widest} (or --T)"
    require_memory(inputs + scores, what, fix, available)
