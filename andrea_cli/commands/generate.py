"""What `andrea generate` runs: the options checked, Q, K, V made or loaded, the backend chosen
(the decode kernels run on cuda or the CPU build, never NumPy), T steps of generation, then the
two passes they are compared with (runs/generate.py)."""

from __future__ import annotations

from andrea_cli.backends import check_timeout
from andrea_cli.backends.launch.decode import check_decode_shape
from andrea_cli.backends.launch.fused import check_fused_shape
from andrea_cli.backends.launch.catalogue import resolve_kernel_path
from andrea_cli.commands.backend import choose_backend
from andrea_cli.commands.options import GenerateOptions
from andrea_cli.defaults import head_sizes
from andrea_cli.errors import AndreaError
from andrea_cli.inputs import (QKV, check_fits_in_memory, check_seed, check_sizes, check_sizes_match_files, load_qkv,
                               random_qkv)
from andrea_cli.masks import MaskSpec, parse_mask
from andrea_cli.runs.generate import GenerateReport, run_generate


def check_generate_options(o: GenerateOptions) -> MaskSpec:
    check_seed(o.seed)
    check_timeout(o.timeout)
    mask = parse_mask(o.mask)
    if not mask.hides_future:
        raise AndreaError("--mask none lets every position see the future, which a step of generation has not "
                          "made yet: use --mask causal (or window:W); generate compares with the unmasked pass "
                          "itself")
    if mask.right:
        raise AndreaError(f"--mask {mask}: a window's right reach shows later positions, which a step of "
                          "generation has not made yet: use window:W (or window:L,0)")
    if o.backend == "numpy":
        raise AndreaError("generate runs the decode kernels, on --backend cuda or cpu (or auto); the NumPy path "
                          "has none")
    return mask


def run_generate_command(o: GenerateOptions, progress=None, data: QKV | None = None) -> GenerateReport:
    """data: one head's Q, K, V the Python API was given as (T, d) arrays."""
    mask = check_generate_options(o)
    if data is not None:
        if o.has_qkv_files or any(x is not None for x in (o.T, o.d_k, o.d_v)):
            raise AndreaError("q, k, v are given as arrays: drop the files and T, d_k, d_v (the arrays give the sizes)")
        if data.H is not None:
            raise AndreaError(f"generate runs one head: pass (T, d) arrays (got q of shape {tuple(data.q.shape)})")
        if data.S != data.T:
            raise AndreaError(f"generate runs one sequence, a query per key: q has {data.T} rows and k {data.S}; "
                              "pass q, k, v of the same T")
    elif o.has_qkv_files:
        data = load_qkv(o.q, o.k, o.v, o.qkv, one_length=True)
        check_sizes_match_files((("--T", o.T, data.T), ("--d-k", o.d_k, data.d_k), ("--d-v", o.d_v, data.d_v)))
    else:
        T, d_k, d_v = head_sizes(o.T, o.d_k, o.d_v)
        check_sizes(T, d_k, d_v)
        data = None
    T, d_k, d_v = (data.T, data.d_k, data.d_v) if data else (T, d_k, d_v)
    check_decode_shape(d_k, d_v, o.precision)
    check_fused_shape(d_k, d_v)  # the causal and unmasked passes it is compared with
    check_fits_in_memory(1, T, d_k, d_v, square=True)  # the float64 equation it is held to is T×T
    if data is None:
        data = random_qkv(T, d_k, d_v, o.seed)
    backend, notices = choose_backend(o.backend, o.kernel, fused=True, timeout=o.timeout)
    return run_generate(backend, data.q, data.k, data.v, mask=mask, precision=o.precision, seed=o.seed,
                        source=data.source, kernel_file=str(resolve_kernel_path(o.kernel)), notices=notices,
                        scaled=o.scaled, progress=progress)
