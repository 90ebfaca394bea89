"""The tensor-core emulation tied to CUTLASS CuTe: tests/kernels/cute_layouts.cu (CuTe's MMA and copy
traits, compiled as host code with nvcc against the nvidia-cutlass wheel's headers) prints, for
mma.sync m16n8k16, ldmatrix x1/x2/x4 (.trans) and wgmma m64nNk16 RS, which element each thread's
register holds, wgmma SS's A view, and make_gmma_desc's descriptors for no-swizzle tiles, for A
tiles made of CuTe's canonical atoms, and for kernel6's own K and V tiles. tests/kernels/cute_checks.cu runs the kernel file's wrappers with operands placed by those
tables, in the CPU build: element by element, every product and every loaded value must be the
one CuTe's layout says. Planted errors (two registers swapped, LBO and SBO swapped, .trans
or trans-a ignored, A's m and k swapped) must make it fail, and a 128-byte-swizzled descriptor is refused, never misread."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest

from andrea_cli.backends.cpu_runtime.errors import CpuWarpError
from andrea_cli.backends.cpu_runtime.module import CpuModule
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.verification import bf16_attention

pytestmark = pytest.mark.slow  # an nvcc host compile of CuTe (a minute or more) and a CPU build

KERNELS = pathlib.Path(__file__).parents[2] / "kernels"
REL = 2.0**-20  # products of bf16 are exact; one fp32 rounding of the sum, or a few


def cutlass_include() -> pathlib.Path | None:
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        return None
    include = pathlib.Path(spec.origin).parent / "source" / "include"
    return include if (include / "cute" / "tensor.hpp").is_file() else None


def nvcc() -> str | None:
    return shutil.which("nvcc") or next((str(p) for p in [pathlib.Path("/usr/local/cuda/bin/nvcc")] if p.is_file()),
                                        None)


@pytest.fixture(scope="module")
def cute(tmp_path_factory) -> dict[str, np.ndarray]:
    """CuTe's tables by name (cute_layouts.cu's output)."""
    include, compiler = cutlass_include(), nvcc()
    if include is None:
        pytest.skip("the nvidia-cutlass wheel (CuTe's headers) is not installed: pip install '.[cutlass]'")
    if compiler is None:
        pytest.skip("nvcc is not on PATH (the CUDA toolkit compiles CuTe's headers as host code)")
    exe = tmp_path_factory.mktemp("cute") / "cute_layouts"
    built = subprocess.run([compiler, "-std=c++17", "-x", "cu", f"-I{include}", str(KERNELS / "cute_layouts.cu"),
                            "-o", str(exe)], capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    tables = {}
    for line in out.splitlines():  # CuTe prints "ERROR: cast_smem_ptr_to_uint ..." on the host: not ours
        name, *values = line.split()
        if re.fullmatch(r"\w+", name) and values and all(v.isdigit() for v in values):
            tables[name] = np.array([int(v) for v in values], dtype=object if name.startswith("desc_") else np.int64)
    return tables


@pytest.fixture(scope="module")
def checks(tmp_path_factory) -> CpuModule:
    path = tmp_path_factory.mktemp("cute_checks") / "cute_checks.cu"
    path.write_text(packaged_kernel_path().read_text() + "\n" + (KERNELS / "cute_checks.cu").read_text())
    return CpuModule(path)


def bf16(shape, seed):
    return bf16_attention.bf16_bits(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def as_float(bits):
    return bf16_attention.bf16_to_float(bits).astype(np.float64)


def close(got, a, b) -> bool:
    want = as_float(a) @ as_float(b)
    return bool((np.abs(got - want) <= REL * (np.abs(as_float(a)) @ np.abs(as_float(b))) + 1e-30).all())


# --- mma.sync m16n8k16 ---------------------------------------------------------------------------

def run_mma(checks, amap, bmap, cmap, seed=0):
    a, b = bf16((16, 16), seed), bf16((16, 8), seed + 1)  # (m, k), (k, n)
    out = np.full(128, np.nan, np.float32)
    checks.get_function("cute_mma")((1,), (32,), (a.T.reshape(-1).copy(), b.reshape(-1).copy(),  # m + 16k, n + 8k
                                                  amap.astype(np.int32), bmap.astype(np.int32),
                                                  cmap.astype(np.int32), out))
    return close(out.reshape(8, 16).T, a, b)  # out[m + 16 n]


def test_mma_sync_fragments_are_cutes(cute, checks):
    assert run_mma(checks, cute["mma_A"], cute["mma_B"], cute["mma_C"])


def test_mma_planted_swapped_registers_fail(cute, checks):
    a = cute["mma_A"].reshape(32, 4, 2)[:, [1, 0, 2, 3]].reshape(-1)  # registers a0 and a1 swapped
    assert not run_mma(checks, a, cute["mma_B"], cute["mma_C"])
    b = cute["mma_B"].reshape(32, 2, 2)[:, [1, 0]].reshape(-1)
    assert not run_mma(checks, cute["mma_A"], b, cute["mma_C"])
    c = cute["mma_C"].reshape(32, 2, 2)[:, [1, 0]].reshape(-1)  # D rows g and g + 8
    assert not run_mma(checks, cute["mma_A"], cute["mma_B"], c)


# --- ldmatrix ------------------------------------------------------------------------------------

def run_ldmatrix(checks, x: int, trans: bool, src, dst) -> np.ndarray:
    """Per (lane, element): got minus CuTe's, 0 everywhere when they agree."""
    rows = (src // 128).astype(np.int32)  # the row of 16 bytes lane t points at
    out = np.zeros(128, np.uint32)
    checks.get_function("cute_ldmatrix")((1,), (32,), (rows, out, np.int32(x), np.int32(trans)))
    regs = out.reshape(32, 4)
    e = np.arange(2 * x)
    got = (regs[:, e // 2] >> (16 * (e % 2)).astype(np.uint32)) & 0xFFFF  # element e: register e/2, low half first
    bits = dst.reshape(32, 2 * x)
    want = (bits // 128) * 8 + (bits % 128) // 16  # the code of the source row and column
    return got.astype(np.int64) - want


@pytest.mark.parametrize("x", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True], ids=["n", "trans"])
def test_ldmatrix_is_cutes(cute, checks, x, trans):
    name = f"x{x}{'_t' if trans else ''}"
    assert not run_ldmatrix(checks, x, trans, cute[f"ldsm_src_{name}"], cute[f"ldsm_dst_{name}"]).any()


@pytest.mark.parametrize("x", [1, 2, 4])
def test_ldmatrix_planted_trans_ignored_fails(cute, checks, x):
    # the .trans tables met by the plain instruction: what an emulation that ignored .trans gives
    assert run_ldmatrix(checks, x, False, cute[f"ldsm_src_x{x}_t"], cute[f"ldsm_dst_x{x}_t"]).any()


# --- wgmma m64nNk16 RS, descriptors --------------------------------------------------------------

def run_wgmma(checks, n: int, mn_major: bool, amap, cmap, offsets, desc: int, seed=0) -> bool:
    a, b = bf16((64, 16), seed), bf16((16, n), seed + 1)  # (m, k), (k, n)
    out = np.full(64 * n, np.nan, np.float32)
    kernel = checks.get_function(f"cute_wgmma_n{n}_{'mnmajor' if mn_major else 'kmajor'}")
    kernel((1,), (128,), (a.T.reshape(-1).copy(), b.T.reshape(-1).copy(),  # a[m + 64 k], b[16 n + k]
                          offsets.astype(np.int32), amap.astype(np.int32), cmap.astype(np.int32),
                          np.uint64(desc), out), shared_mem=2 * (int(offsets.max()) + 8))
    return close(out.reshape(n, 64).T, a, b)  # out[m + 64 n]


def swap_lbo_sbo(desc: int) -> int:
    lbo, sbo = desc >> 16 & 0x3FFF, desc >> 32 & 0x3FFF
    return desc & ~(0x3FFF << 16 | 0x3FFF << 32) | sbo << 16 | lbo << 32


TILES = [f"{major}_n{n}_lbo{lbo}_sbo{sbo}" for major in ("kmajor", "mnmajor")
         for n, lbo, sbo in ((64, 128, 256), (64, 1024, 128), (128, 128, 256), (128, 2048, 128))]


@pytest.mark.parametrize("tile", TILES)
def test_wgmma_a_d_and_descriptor_decoding_are_cutes(cute, checks, tile):
    n = int(re.search(r"_n(\d+)_", tile).group(1))
    desc = int(cute[f"desc_{tile}"][0])
    assert desc >> 62 == 0 and desc >> 49 & 7 == 0  # CuTe's no-swizzle (interleave) tile, base offset 0
    assert run_wgmma(checks, n, tile.startswith("mn"), cute[f"wgmma{n}_A"], cute[f"wgmma{n}_C"],
                     cute[f"offsets_{tile}"], desc)


def test_wgmma_planted_errors_fail(cute, checks):
    tile, n = "kmajor_n64_lbo128_sbo256", 64
    desc, offsets = int(cute[f"desc_{tile}"][0]), cute[f"offsets_{tile}"]
    amap, cmap = cute["wgmma64_A"], cute["wgmma64_C"]
    assert not run_wgmma(checks, n, False, amap, cmap, offsets, swap_lbo_sbo(desc))  # LBO and SBO swapped
    swapped = amap.reshape(128, 4, 2)[:, [1, 0, 2, 3]].reshape(-1)  # A registers a0, a1 swapped
    assert not run_wgmma(checks, n, False, swapped, cmap, offsets, desc)
    assert not run_wgmma(checks, n, True, amap, cmap, offsets, desc)  # K-major tile read as MN-major


def kernel6_descriptor_args(source: str) -> dict[str, tuple[str, str]]:
    """kernel6's wgmma_desc(k_s, LBO, SBO) and (v_s, ...) arguments as written in the kernel file
    (its own code only: kernel7, after it, builds descriptors of another layout)."""
    kernel6 = source[:source.index("void attention_fused7(")]
    return {name: m for name in ("k_s", "v_s")
            for m in re.findall(rf"wgmma_desc\({name}, (\w+), (\w+)\)", kernel6)}


@pytest.mark.parametrize("d", [64, 128])
def test_kernel6_descriptors_are_make_gmma_desc_on_the_same_tile(cute, checks, d):
    source = packaged_kernel_path().read_text()
    # the tile as kernel6 stores it: (row r, column c) at (r / 8) 8D + 8 (c / 8) 8 + 8 (r % 8) + c % 8
    assert "const int kv_dst = (kv_row / 8) * 8 * D + kv_col * 8 + (kv_row % 8) * 8;" in source
    assert "constexpr u32 GROUP_BYTES = 16 * D;" in source
    r, c = np.arange(64)[:, None], np.arange(16)[None, :]  # K: n = key r, k = column c (one k16 step)
    k_tile = (r // 8) * 8 * d + 8 * (c // 8) * 8 + 8 * (r % 8) + c % 8
    assert (cute[f"offsets_kernel6_k_d{d}"] == k_tile.reshape(-1)).all()
    cn, kr = np.arange(d)[:, None], np.arange(16)[None, :]  # V: n = column c, k = key r
    v_tile = (kr // 8) * 8 * d + 8 * (cn // 8) * 8 + 8 * (kr % 8) + cn % 8
    assert (cute[f"offsets_kernel6_v_d{d}"] == v_tile.reshape(-1)).all()
    values = {"128": 128, "GROUP_BYTES": 16 * d}
    for tile, (lbo, sbo) in kernel6_descriptor_args(source).items():
        name = {"k_s": "k", "v_s": "v"}[tile]
        out = np.zeros(1, np.uint64)
        checks.get_function("cute_file_desc")((1,), (128,), (out, np.uint32(values[lbo]), np.uint32(values[sbo])),
                                              shared_mem=16 * 64 * d)
        cute_desc = int(cute[f"desc_kernel6_{name}_d{d}"][0])
        assert int(out[0]) == cute_desc, f"{tile}: the kernel file's {int(out[0]):#x}, make_gmma_desc's {cute_desc:#x}"
        assert swap_lbo_sbo(int(out[0])) != cute_desc  # the planted swap would be seen
        # and the emulation reads kernel6's tile through that descriptor as CuTe lays it out
        n = 64 if name == "k" else d
        assert run_wgmma(checks, n, name == "v", cute[f"wgmma{n}_A"], cute[f"wgmma{n}_C"],
                         cute[f"offsets_kernel6_{name}_d{d}"], int(out[0]))


def test_a_swizzled_descriptor_is_refused(cute, checks):
    # CuTe's GmmaDescriptor: layout_type in bits 62-63, 1 = SWIZZLE_128B; on the tile CuTe described
    # without a swizzle, read as no-swizzle it would give other bytes: the emulation refuses it
    tile = "kmajor_n64_lbo128_sbo256"
    desc = int(cute[f"desc_{tile}"][0]) | 1 << 62
    with pytest.raises(CpuWarpError, match=r"layout type 1 \(128-byte swizzle\) and base offset 0: the CPU build "
                                           r"decodes only layout type 0"):
        run_wgmma(checks, 64, False, cute["wgmma64_A"], cute["wgmma64_C"], cute[f"offsets_{tile}"], desc)


# --- wgmma m64nNk16 SS: A through a descriptor too -------------------------------------------------

def run_wgmma_ss(checks, cute, atom: str, mn_major: bool, desc_a: int | None = None, aorder=None, seed=0) -> bool:
    """A in CuTe's atom-tiled tile (atom_a_<atom>), B in the K-major N 64 tile; A·B right?"""
    a, b = bf16((64, 16), seed), bf16((16, 64), seed + 1)  # (m, k), (k, n)
    btile = "kmajor_n64_lbo128_sbo256"
    offsets_a, offsets_b = cute[f"offsets_atom_a_{atom}"], cute[f"offsets_{btile}"]
    order = cute["wgmma_ss_A"].reshape(128, 1024)[0] if aorder is None else aorder
    out = np.full(64 * 64, np.nan, np.float32)
    kernel = checks.get_function(f"cute_wgmma_ss_{'mnmajor' if mn_major else 'kmajor'}")
    kernel((1,), (128,), (a.T.reshape(-1).copy(), b.T.reshape(-1).copy(),  # a[m + 64 k], b[16 n + k]
                          offsets_a.astype(np.int32), offsets_b.astype(np.int32), order.astype(np.int32),
                          cute["wgmma64_C"].astype(np.int32),
                          np.uint64(int(cute[f"desc_atom_a_{atom}"][0]) if desc_a is None else desc_a),
                          np.uint64(int(cute[f"desc_{btile}"][0])), out), shared_mem=16384)
    return close(out.reshape(64, 64).T, a, b)  # out[m + 64 n]


def test_wgmma_ss_a_view_is_the_whole_tile_for_every_thread(cute):
    # CuTe's SS ALayout: each of the 128 threads' value v is element v = m + 64 k of the tile (the
    # warpgroup reads A through the descriptor, no thread holds a share): element by element
    view = cute["wgmma_ss_A"].reshape(128, 1024)
    assert (view == np.arange(1024)[None, :]).all()


@pytest.mark.parametrize("atom", ["kmajor", "mnmajor"])
def test_wgmma_ss_a_layout_and_descriptor_are_cutes(cute, checks, atom):
    desc = int(cute[f"desc_atom_a_{atom}"][0])
    assert desc >> 62 == 0 and desc >> 49 & 7 == 0  # CuTe's atoms here: no swizzle, base offset 0
    assert run_wgmma_ss(checks, cute, atom, atom == "mnmajor")


def test_wgmma_ss_planted_errors_fail(cute, checks):
    desc = int(cute["desc_atom_a_kmajor"][0])
    assert not run_wgmma_ss(checks, cute, "kmajor", False, desc_a=swap_lbo_sbo(desc))  # A's LBO and SBO swapped
    assert not run_wgmma_ss(checks, cute, "mnmajor", False)  # trans-a ignored: an MN-major A read K-major
    assert not run_wgmma_ss(checks, cute, "kmajor", True)  # and a K-major A read MN-major
    order = cute["wgmma_ss_A"].reshape(128, 1024)[0]
    assert not run_wgmma_ss(checks, cute, "kmajor", False, aorder=(order % 16) * 64 + order // 16)  # m, k swapped
