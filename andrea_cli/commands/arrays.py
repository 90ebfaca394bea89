"""The Python API's arrays: q, k, v (and grad's d_out) with any leading batch and head dims,
folded into heads for one run and shaped back after; .npy paths go to the options instead."""

from __future__ import annotations

import os

import numpy as np

from andrea_cli.array_types import detached, library_of, to_host
from andrea_cli.errors import AndreaError
from andrea_cli.inputs import QKV, as_matrix, is_gpu_array, qkv_from_arrays


def is_path(a) -> bool:
    return isinstance(a, (str, os.PathLike))


def split_inputs(q, k, v) -> tuple[dict, tuple | None]:
    """Paths go to the options as --q/--k/--v; arrays are returned apart."""
    given = [a is not None for a in (q, k, v)]
    if not any(given):
        return {}, None
    paths = [is_path(a) for a in (q, k, v) if a is not None]
    if all(paths):
        return {"q": q, "k": k, "v": v}, None
    if any(paths):
        raise AndreaError("q, k, v: pass all three as arrays or all three as .npy paths")
    if not all(given):
        raise AndreaError("pass all of q, k, v (or none, for random inputs of size T, d_k, d_v)")
    return {}, (q, k, v)


def as_array(a, name: str):
    """A NumPy array, or a GPU array left where it is; torch CPU tensors read detached (requires_grad
    ones included), bf16 widened to float32."""
    a = detached(a)
    if is_gpu_array(a) or isinstance(a, np.ndarray):
        return a
    if library_of(a) == "torch":
        return to_host(a)
    try:
        return np.asarray(a)
    except (TypeError, ValueError) as exc:
        raise AndreaError(f"{name}: not an array of numbers ({exc}); pass a NumPy array") from None


def fold_heads(arrays: dict) -> tuple[dict, tuple]:
    """(..., T, d) arrays -> (H, T, d) with H the product of the leading dims (more than one of
    them); returns the arrays and the leading dims to shape the results back with."""
    arrays = {name: as_array(a, name) for name, a in arrays.items()}
    shapes = {name: tuple(a.shape) for name, a in arrays.items()}
    if any(len(shape) < 2 for shape in shapes.values()):
        bad = next(name for name, shape in shapes.items() if len(shape) < 2)
        raise AndreaError(f"{bad}: expected (..., T, d) with T and d last, got shape {shapes[bad]}")
    lead = {shape[:-2] for shape in shapes.values()}
    if len(lead) > 1:
        shown = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise AndreaError(f"{shown}: the leading (batch, head) dims must agree")
    dims = lead.pop()
    if len(dims) <= 1:
        return arrays, ()
    return {name: a.reshape((-1, *a.shape[-2:])) for name, a in arrays.items()}, dims


def unfold(a, dims: tuple):
    return a if a is None or not dims else a.reshape((*dims, *a.shape[-2:]))


def heads_of(arrays: tuple) -> tuple[QKV, tuple]:
    """q, k, v as one run's heads, and the leading dims to shape its results back with (the
    output's: q's). K and V may have fewer heads than Q in dim -3 (grouped, as grad takes them)."""
    named, shapes = shaped_arrays(dict(zip("qkv", arrays)))
    if not kv_grouping(shapes):
        folded, dims = fold_heads(named)
        return qkv_from_arrays(folded["q"], folded["k"], folded["v"]), dims
    folded = fold_each(named)
    return qkv_from_arrays(folded["q"], folded["k"], folded["v"], grouped=True), folded_dims(shapes["q"])


def shaped_arrays(arrays: dict) -> tuple[dict, dict]:
    """The arrays (as_array) and their shapes, each (..., T, d) or a one-line error naming it."""
    named = {name: as_array(a, name) for name, a in arrays.items()}
    shapes = {name: tuple(a.shape) for name, a in named.items()}
    if any(len(shape) < 2 for shape in shapes.values()):
        bad = next(name for name, shape in shapes.items() if len(shape) < 2)
        raise AndreaError(f"{bad}: expected (..., T, d) with T and d last, got shape {shapes[bad]}")
    return named, shapes


def fold_each(named: dict) -> dict:
    """Grouped K/V heads: each array's leading dims folded on its own, q (and d_out) to
    (B·H_q, L, d), k and v to (B·H_kv, S, d), so flat query head h still reads h // group."""
    return {name: a.reshape((-1, *a.shape[-2:])) if len(a.shape) > 3 else a for name, a in named.items()}


def folded_dims(shape: tuple) -> tuple:
    """The leading dims fold_each folded away (none where there was one or none)."""
    return shape[:-2] if len(shape) > 3 else ()


def kv_grouping(shapes: dict) -> bool:
    """grad's K/V heads: Q's leading dims (False), or fewer heads in dim -3, each read by a whole
    number of query heads (True: query head h reads K/V head h // (H_q / H_kv), as torch's SDPA
    with enable_gqa); anything else is one line naming the fix."""
    q, k, v = (shapes[name][:-2] for name in "qkv")
    if k != v:
        raise AndreaError(f"k {shapes['k']}, v {shapes['v']}: K and V need the same leading (batch, head) dims, "
                          "one value per key")
    if q == k:
        return False
    if not q or len(q) != len(k) or q[:-1] != k[:-1]:
        raise AndreaError(f"q {shapes['q']}, k {shapes['k']}: the leading (batch, head) dims must agree, or differ "
                          "in the head dim (-3) alone, for grouped K/V heads")
    if q[-1] % k[-1]:
        raise AndreaError(f"q has {q[-1]} heads (dim -3), k and v {k[-1]}: grouped K/V heads need H_q a multiple "
                          f"of H_kv; pass k, v with a head count dividing {q[-1]}")
    return True


def backward_inputs(arrays: tuple, d_out) -> tuple[QKV, np.ndarray | None, tuple[tuple, tuple]]:
    """grad's q, k, v and (when given as an array) d_out as one run's heads, on the host; the
    leading dims to shape dQ back with, and dK's and dV's (K/V may have fewer heads: grouped)."""
    named, shapes = shaped_arrays({**dict(zip("qkv", arrays)), **({} if d_out is None else {"d_out": d_out})})
    grouped = kv_grouping(shapes)
    if not grouped:
        folded, dims = fold_heads(named)
        dims = (dims, dims)
    else:  # q, d_out fold to (B·H_q, L, d) and k, v to (B·H_kv, S, d): flat head h still reads h // group
        lead = {name: shape[:-2] for name, shape in shapes.items()}
        if "d_out" in lead and lead["d_out"] != lead["q"]:
            raise AndreaError(f"d_out is {shapes['d_out']} but the output is {shapes['q'][:-1] + shapes['v'][-1:]}: "
                              "dO must have the output's shape")
        folded = fold_each(named)
        dims = tuple(folded_dims(shapes[name]) for name in "qk")
    data = qkv_from_arrays(folded["q"], folded["k"], folded["v"], grouped=grouped)
    if data.on_device:
        raise AndreaError("grad takes NumPy arrays: copy GPU arrays to the host first")
    if "d_out" not in folded:
        return data, None, dims
    upstream = as_matrix(np.asarray(folded["d_out"]), "d_out", heads=True)
    # the output is q's rows (L queries) by v's width, (..., L, d_v): not v's S rows
    if upstream.shape != data.q.shape[:-1] + (data.d_v,):
        raise AndreaError(f"d_out is {tuple(np.shape(d_out))} but the output is "
                          f"{tuple(np.shape(arrays[0]))[:-1] + (data.d_v,)}: dO must have the output's shape")
    return data, upstream, dims
