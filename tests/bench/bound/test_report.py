"""`andrea bench --bound`: the static model against answers worked out by hand (small kernels
compiled by NVRTC and read by cuobjdump, no GPU), its SASS reading on fixed listings, and the
kernel file's own bounds (every kernel listed; kernel4 shared-memory bound, kernel3 under the
FP32 peak, scores_kernel1 shared-memory bound; no bound above its GPU's peak)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from andrea_cli.bench.bound.geometry import reference_launches
from andrea_cli.bench.bound.gpus import GPUS
from andrea_cli.bench.bound.model import Work, bound, occupancy, pipe_cycles
from andrea_cli.bench.bound.sass import (
    find_cuobjdump, find_nvdisasm, hgmma_flops, hgmma_shared_bytes, hmma_flops, hot_loop, ldsm_bytes, mix_of,
    parse_kernels, steady_state,
)
from andrea_cli.kernel_file import packaged_kernel_path

PROBES = Path(__file__).parents[2] / "kernels" / "bound_probes.cu"
H200, A100 = GPUS["h200"], GPUS["a100"]


def _need_tools():
    pytest.importorskip("cupy", reason="cupy brings the NVRTC bindings: pip install '.[bound]'")
    if find_cuobjdump() is None or find_nvdisasm() is None:
        pytest.skip("cuobjdump/nvdisasm not found: pip install '.[bound]'")


@pytest.fixture(scope="module")
def probes(isolated_cache):
    """{arch: ({kernel: instructions}, {kernel: resources})} of the hand-known kernels; sm_90a is
    Hopper's arch-specific target, the only one with wgmma."""
    _need_tools()
    from andrea_cli.bench.bound.report import kernel_resources, kernel_sass

    return {arch: (kernel_sass(PROBES, arch), kernel_resources(PROBES, arch)) for arch in ("sm_90", "sm_80", "sm_90a")}


def _mix(probes, arch: str, name: str):
    loop = hot_loop(probes[arch][0][name])
    assert loop is not None, f"{name} has no loop on {arch}"
    return mix_of(steady_state(loop))


def _work(flops: float = 0.0, array_bytes: int = 1 << 20) -> Work:
    return Work(warps=1 << 16, array_bytes=array_bytes, executed_flops=flops, useful_flops=flops)


# ------------------------------------------------------------------------------------------------
# Answers known by hand

def test_pure_ffma_runs_at_the_fp32_peak(probes):
    """One FFMA per issue slot: on Hopper (128 FP32 lanes = 4 warp FFMAs per clock, as many as
    the 4 schedulers issue) the loop overhead makes issue bind, at peak x FFMAs / instructions;
    on A100 (64 lanes) the FP32 pipe binds, at exactly the FP32 peak."""
    mix = _mix(probes, "sm_90", "ffma_loop")
    assert mix.ffma == mix.fp32 >= 0.9 * mix.instructions, mix.by_opcode
    b = bound(mix, _work(1e12), H200, warps_per_sm=64, looped=True)
    assert b.bottleneck == "issue" and b.runner_up == "fp32"
    assert b.tflops == pytest.approx(H200.fp32_peak_tflops * mix.ffma / mix.instructions)
    assert H200.fp32_peak_tflops == pytest.approx(66.9, abs=0.05)  # 132 SMs x 128 lanes x 2 x 1.98 GHz

    mix80 = _mix(probes, "sm_80", "ffma_loop")
    b80 = bound(mix80, _work(1e12), A100, warps_per_sm=64, looped=True)
    assert b80.bottleneck == "fp32" and b80.tflops == pytest.approx(A100.fp32_peak_tflops)
    assert A100.fp32_peak_tflops == pytest.approx(19.5, abs=0.01)  # the whitepaper's figure


def test_shared_copy_is_bound_by_shared_memory(probes):
    """Each LDS.128 and STS.128 moves 32 lanes x 16 bytes = 512 bytes: 4 clocks of the SM's
    128 bytes per clock."""
    mix = _mix(probes, "sm_90", "shared_copy")
    lds, sts = mix.by_opcode.get("LDS", 0), mix.by_opcode.get("STS", 0)
    assert lds == sts >= 1 and mix.shared_load_bytes == 512 * lds
    cycles = pipe_cycles(mix, H200, warps_per_sm=64)
    assert cycles["shared"] == 4 * (lds + sts)
    assert bound(mix, _work(), H200, 64, looped=True).bottleneck == "shared"


def test_global_copy_is_bound_by_hbm(probes):
    """Two 1 GiB arrays (read one, write the other) at 4.8 TB/s: 447 us on an H200."""
    mix = _mix(probes, "sm_90", "global_copy")
    assert mix.global_load_bytes == mix.global_store_bytes > 0 and mix.shared_bytes == 0
    nbytes = 2 << 30
    b = bound(mix, _work(array_bytes=nbytes), H200, 64, looped=True)
    assert b.bottleneck == "hbm" and b.tflops is None
    assert b.time_s == pytest.approx(nbytes / 4.8e12)
    assert b.trips == pytest.approx(nbytes / mix.global_bytes)


def test_mma_loop_runs_at_the_tensor_peak(probes):
    """HMMA.16816 is 2 x 16 x 8 x 16 = 4096 flops per warp; nothing else in the loop binds."""
    for arch, gpu in (("sm_90", H200), ("sm_80", A100)):
        mix = _mix(probes, arch, "mma_loop")
        assert mix.hmma >= 8 and mix.tensor_flops == 4096 * mix.hmma
        b = bound(mix, _work(1e12), gpu, 64, looped=True)
        assert b.bottleneck == "tensor" and b.tflops == pytest.approx(gpu.bf16_peak_tflops)
    assert A100.tensor_flops_per_clock == pytest.approx(2048, rel=1e-3)  # the A100 whitepaper's rate


def test_wgmma_loop_runs_at_the_tensor_peak(probes):
    """wgmma m64n128k16 with A from registers, B from shared memory through a descriptor: each of
    the warpgroup's 4 warps issues the HGMMA and does its 16 rows, 2 x 64 x 128 x 16 / 4 = 65,536
    flops; B is 16 x 128 bf16 = 4,096 bytes, read once per warpgroup instruction: 1,024 per warp.
    Per HGMMA and warp the tensor pipe needs 65,536 / 3,784 = 17.3 SM clocks and shared memory
    1,024 / 128 = 8: the tensor pipe binds, at the peak. (Were B read by every warp, shared memory
    would need 32 clocks and bind instead: the reading FlashAttention-3's speed rules out.)"""
    assert GPUS["h200"].arch == GPUS["h100"].arch == "sm_90a" and A100.arch == "sm_80"
    mix = _mix(probes, "sm_90a", "wgmma_loop")
    assert mix.hgmma >= 4 and mix.hgmma % 4 == 0 and mix.hmma == 0, mix.by_opcode
    assert set(mix.by_opcode) >= {"HGMMA", "WARPGROUP"}
    assert mix.tensor_flops == 65536 * mix.hgmma and mix.wgmma_shared_bytes == 1024 * mix.hgmma
    assert mix.shared_load_bytes == mix.shared_store_bytes == 0 and mix.shared_bytes == mix.wgmma_shared_bytes
    cycles = pipe_cycles(mix, H200, warps_per_sm=8)
    assert cycles["shared"] == 8 * mix.hgmma
    assert cycles["tensor"] == pytest.approx(65536 / (989e12 / (132 * 1.98e9)) * mix.hgmma)
    assert 4 * cycles["shared"] > cycles["tensor"] > cycles["shared"]
    b = bound(mix, _work(1e12), H200, 8, looped=True)
    assert b.bottleneck == "tensor" and b.runner_up == "shared" and b.tflops == pytest.approx(H200.bf16_peak_tflops)
    assert b.trips == pytest.approx(1e12 / (65536 * mix.hgmma))

    # A and B both through descriptors, m64n64k16: 32,768 flops and (64 x 16 + 16 x 64) x 2 / 4 bytes per warp
    ss = _mix(probes, "sm_90a", "wgmma_ss_loop")
    assert ss.hgmma >= 4 and ss.tensor_flops == 32768 * ss.hgmma and ss.wgmma_shared_bytes == 1024 * ss.hgmma
    # compiled for plain sm_90 (or Ampere) the wgmma code is not there: why Hopper is read as sm_90a
    for arch in ("sm_90", "sm_80"):
        assert not any(i.opcode.startswith("HGMMA") for i in probes[arch][0]["wgmma_loop"]), arch


def test_a_kernel_with_spills_says_so(probes):
    from andrea_cli.bench.bound.report import kernel_bound

    code, resources = probes["sm_90"]
    kb = kernel_bound("spilling", code["spilling"], resources["spilling"], None, H200)
    assert kb.spill_bytes > 0 and kb.mix.local_bytes > 0
    assert any("spills" in note for note in kb.notes), kb.notes
    assert any("no reference geometry" in note for note in kb.notes) and kb.full is None
    assert kb.to_json()["spill_bytes"] == kb.spill_bytes


def test_occupancy_by_hand():
    """kernel4_d64 on an H200: 131 registers -> 17 x 256 per warp, 4 warps -> 17,408 per block,
    3 blocks in 65,536 (shared memory would allow 4 of 46,080 + 1,024 in 228 KB)."""
    occ = occupancy(H200, 131, 46080, 4)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limit) == (3, 12, "registers")
    occ = occupancy(A100, 208, 99328, 4)  # kernel3_d128 on an A100: one 100,352-byte block in 164 KB
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limit) == (1, 4, "shared memory")
    assert occupancy(A100, 32, 200_000, 4).limit == "does not fit"


# ------------------------------------------------------------------------------------------------
# Reading SASS

LISTING = """
        Function : toy
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDSM.16.M88.4 R4, [R2] ;
        /*0020*/              @!PT LDS RZ, [RZ] ;
        /*0030*/               @P1 BRA 0x60 ;
        /*0040*/                   ISETP.GE.AND P0, PT, R3, R4, PT ;
        /*0050*/                   FSEL R5, R5, -INF , P0 ;
        /*0060*/                   HMMA.16816.F32.BF16 R8, R4, R6, R8 ;
        /*0070*/                   FFMA R9, R4, R8, R9 ;
        /*0080*/               @P0 BRA 0x10 ;
        /*0090*/                   EXIT ;
        /*00a0*/                   BRA 0xa0;
"""


def test_sass_classes_and_steady_state():
    code = parse_kernels(LISTING)["toy"]
    assert code[2].opcode == "NOP"  # @!PT never runs
    assert hmma_flops("HMMA.16816.F32.BF16") == 4096 and hmma_flops("HMMA.1688.F32.TF32") == 2048
    assert ldsm_bytes("LDSM.16.M88.4") == 512 and ldsm_bytes("LDSM.16.MT88.2") == 256
    loop = hot_loop(code)
    assert (loop.start, loop.end) == (0x10, 0x80)
    # the masked fix-up (no arithmetic, no global memory) behind the forward branch is dropped
    kept = [i.opcode.split(".")[0] for i in steady_state(loop)]
    assert kept == ["LDSM", "NOP", "BRA", "HMMA", "FFMA", "BRA"]
    mix = mix_of(steady_state(loop))
    assert (mix.hmma, mix.ffma, mix.shared_load_bytes, mix.alu) == (1, 1, 512, 0)


HGMMA_LISTING = """
        Function : toy_wgmma
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   WARPGROUP.ARRIVE ;
        /*0020*/                   HGMMA.64x128x16.F32.BF16 R24, R88, gdesc[UR8], R24 ;
        /*0030*/                   HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0 ;
        /*0040*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0050*/                   R2UR UR9, R3 ;
        /*0060*/               @P0 BRA 0x10 ;
        /*0070*/                   EXIT ;
"""


def test_hgmma_is_a_warp_s_quarter_of_the_warpgroup_s_work():
    assert hgmma_flops("HGMMA.64x128x16.F32.BF16") == 2 * 64 * 128 * 16 // 4
    assert hgmma_flops("HGMMA.64x256x32.F32.E4M3") == 2 * 64 * 256 * 32 // 4
    # B only (A from registers), then A and B (the operand after the destination a descriptor too)
    assert hgmma_shared_bytes("HGMMA.64x128x16.F32.BF16", "R24, R88, gdesc[UR8], R24") == 128 * 16 * 2 // 4
    assert hgmma_shared_bytes("HGMMA.64x64x16.F32.BF16", "R24, gdesc[UR4], RZ, !UPT") == (64 * 16 + 16 * 64) * 2 // 4
    assert hgmma_shared_bytes("HGMMA.64x64x8.F32.TF32", "R24, gdesc[UR4], R24") == (64 * 8 + 8 * 64) * 4 // 4
    (loop,) = [hot_loop(parse_kernels(HGMMA_LISTING)["toy_wgmma"])]
    mix = mix_of(steady_state(loop))
    assert (mix.hgmma, mix.hmma, mix.instructions) == (2, 0, 6)
    assert mix.tensor_flops == 65536 + 32768 and mix.wgmma_shared_bytes == 1024 + 1024
    # WARPGROUP.ARRIVE / DEPBAR and R2UR take an issue slot and nothing else
    assert (mix.alu, mix.fp32, mix.mufu, mix.bar, mix.shared_load_bytes) == (0, 0, 0, 0, 0)
    b = bound(mix, _work(1e12), H200, 8, looped=True)
    assert b.bottleneck == "tensor" and b.peak_tflops == H200.bf16_peak_tflops


def test_geometry_comes_from_the_launchers():
    references = reference_launches()
    assert references.failures == []
    launches = references.launches
    k4 = launches["attention_fused_kernel4_d64"]
    assert k4.full.grid == (64, 1, 12) and k4.full.block == (128, 1, 1) and k4.full.dynamic_shared == 46080
    assert k4.sees_mask and not launches["scores_kernel1"].sees_mask
    assert launches["attention_fused_kernel4_d128"].head_size == 128
    assert "mask_kernel1" in launches  # launched only under a mask
    # Q, K, V bf16 (3 x 12 x 4096 x 64 x 2 bytes) and O float32
    assert k4.full.array_bytes == 3 * 12 * 4096 * 64 * 2 + 12 * 4096 * 64 * 4


# ------------------------------------------------------------------------------------------------
# The kernel file itself

EXTRA = '\nextern "C" __global__ void extra_kernel(float* x) { x[threadIdx.x] *= 2.0f; }\n'
# The kernel file's own wgmma wrappers in a loop (one warpgroup, B a 16 x 64 bf16 tile): read on an
# H200 it must show as HGMMA, which only the sm_90a compile the bound does for Hopper has.
EXTRA_WGMMA = """
extern "C" __global__ void extra_wgmma_kernel(float* out, int n) {
    __shared__ __align__(128) unsigned short b[16 * 64];
    for (int i = threadIdx.x; i < 16 * 64; i += blockDim.x) b[i] = (unsigned short)i;
    fence_proxy_async();
    __syncthreads();
    const u32 a[4] = {threadIdx.x, threadIdx.x + 1, threadIdx.x + 2, threadIdx.x + 3};
    float d[32] = {};
    for (int i = 0; i < n; ++i) {
        wgmma_fence();
        wgmma_bf16_m64nNk16<64, false>(d, a, wgmma_desc(b, 128, 256), true);
        wgmma_commit();
        wgmma_wait<0>();
    }
    out[threadIdx.x] = d[0] + d[31];
}
"""


@pytest.fixture(scope="module")
def with_extra(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bound") / "microgpt_cuda.cu"
    path.write_text(packaged_kernel_path().read_text() + EXTRA + EXTRA_WGMMA)
    return path


@pytest.fixture(scope="module")
def h200_report(isolated_cache, with_extra):
    _need_tools()
    from andrea_cli.bench.bound.report import compute_bounds

    return compute_bounds(with_extra, "h200")


@pytest.mark.slow
def test_the_kernel_files_bounds_on_an_h200(h200_report):
    by_name = {k.kernel: k for k in h200_report.kernels}
    from andrea_cli.kernel_file import kernel_names

    assert set(kernel_names(packaged_kernel_path())) <= set(by_name)
    for name, k in by_name.items():
        if not name.startswith("extra_"):
            assert k.full is not None and k.full.bottleneck, name
    for d in (64, 128):
        k4 = by_name[f"attention_fused_kernel4_d{d}"].full
        # shared memory binds, or ties with the runner-up (within 5%)
        assert "shared" in (k4.bottleneck, k4.runner_up) and k4.seconds["shared"] >= 0.95 * k4.time_s, d
        assert 250 <= k4.tflops <= 700, (d, k4.tflops)
        k3 = by_name[f"attention_fused_kernel3_d{d}"].full
        assert k3.tflops <= H200.fp32_peak_tflops
    # one 64-key tile of kernel4_d64, per warp, by hand: Q·K^T and P·V are 2 x (16 x 64 x 64) MACs =
    # 64 m16n8k16; its K and V fragments 2 x 64 x 64 bf16 = 16 KB by ldmatrix; its share of the
    # block's copy of the next K and V tiles 16 KB / 4 warps = 4 KB by cp.async (the copy loop's
    # peeled remainder and the first tile's Q fragments left out)
    mix = by_name["attention_fused_kernel4_d64"].mix
    assert (mix.hmma, mix.shared_load_bytes, mix.global_load_bytes) == (64, 16384, 4096)
    # kernel5 by hand, per warp and 64-key tile: 32 query rows (two m16 tiles) x (Q·K^T + P·V) =
    # 2 x 2 x (d/16) x 8 m16n8k16; all of K and V by ldmatrix, 2 x 64 x d bf16; a quarter of the
    # block's copy of the next tile by cp.async, counted once (the hot loop holds one copy path)
    for d in (64, 128):
        k5 = by_name[f"attention_fused_kernel5_d{d}"]
        assert (k5.mix.hmma, k5.mix.shared_load_bytes, k5.mix.global_load_bytes) == (d * 2, 256 * d, 64 * d), d
    # kernel6 by hand, per warp and 64-key tile (its 16 rows of a warpgroup's 64, sm_90a): S = Q·K^T
    # is d/16 wgmma m64n64k16, O += P·V 4 wgmma m64n(d)k16; each warp's share of their flops is a
    # quarter, of K's and V's tiles (B, 2 x 64 x d bf16) read through descriptors a quarter too, no
    # ldmatrix; its eighth of the block's copy of the next tile by cp.async. Issue 22's target: its
    # bound is the tensor pipe (at d 64 the exponentials come within 2%: the test allows a tie)
    for d in (64, 128):
        k6 = by_name[f"attention_fused_kernel6_d{d}"]
        m = k6.mix
        assert (m.hmma, m.hgmma, m.shared_load_bytes) == (0, d // 16 + 4, 0), (d, m.by_opcode)
        assert m.tensor_flops == (d // 16) * 2 * 64 * 64 * 16 // 4 + 4 * 2 * 64 * d * 16 // 4, d
        assert m.wgmma_shared_bytes == 2 * 64 * d * 2 // 4 and m.global_load_bytes == 2 * 64 * d * 2 // 8, d
        assert k6.spill_bytes == 0
        assert k6.full.bottleneck == "tensor", (d, k6.full.bottleneck, k6.full.seconds)
        assert k6.warps_per_sm == (16 if d == 64 else 8), (d, k6.warps_per_sm)  # d 64: two blocks per SM
    assert by_name["scores_kernel1"].full.bottleneck == "shared"
    assert by_name["softmax_kernel3"].full.bottleneck == "hbm"
    assert any("no reference geometry" in n for n in by_name["extra_kernel"].notes)
    # the file's wgmma m64n64k16 (A from registers): 2 x 64 x 64 x 16 / 4 flops and a quarter of
    # B's 16 x 64 bf16 per warp and instruction
    wgmma = by_name["extra_wgmma_kernel"].mix
    assert wgmma.hgmma >= 1 and wgmma.hmma == 0, wgmma.by_opcode
    assert (wgmma.tensor_flops, wgmma.wgmma_shared_bytes) == (32768 * wgmma.hgmma, 512 * wgmma.hgmma)


@pytest.mark.slow
def test_the_bf16_backward_bound_on_an_h200(h200_report):
    """Issue 24's static target: the bf16 backward at least 200 TFLOP/s on the H200 by
    FlashAttention's count (5 products of T×T×d for the whole backward), its two kernels one after
    the other; each without spills, its hot loop a tile's mma by hand: dkdv 4 products of 16 keys
    x 64 queries x 64 (d 64) or of 16 x 32 x 128 (d 128) = 128 m16n8k16 per warp; dq 3 of 16 x 64
    x d = 96 or 192."""
    from andrea_cli.bench.bound.geometry import REFERENCE_HEADS, REFERENCE_T

    by_name = {k.kernel: k for k in h200_report.kernels}
    for d in (64, 128):
        dkdv, dq = by_name[f"attention_backward_dkdv_kernel2_d{d}"], by_name[f"attention_backward_dq_kernel2_d{d}"]
        assert (dkdv.mix.hmma, dq.mix.hmma) == (128, 96 if d == 64 else 192), d
        assert dkdv.spill_bytes == 0 and dq.spill_bytes == 0
        flops = 5 * 2.0 * REFERENCE_T**2 * d * REFERENCE_HEADS
        tflops = flops / (dkdv.full.time_s + dq.full.time_s) / 1e12
        assert 200 <= tflops <= 989, (d, tflops)


@pytest.mark.slow
@pytest.mark.parametrize("gpu", ["h200", "a100"])
def test_no_bound_exceeds_its_gpus_peak(gpu, isolated_cache, h200_report):
    from andrea_cli.bench.bound.report import compute_bounds

    report = h200_report if gpu == "h200" else compute_bounds(packaged_kernel_path(), gpu)
    for k in report.kernels:
        for b in (k.full, k.causal):
            if b is not None and b.tflops is not None:
                assert b.tflops <= b.peak_tflops * (1 + 1e-9), (k.kernel, b.tflops)
                assert b.peak_tflops in (GPUS[gpu].fp32_peak_tflops, GPUS[gpu].bf16_peak_tflops)


@pytest.mark.slow
def test_the_table_fits_80_columns(h200_report):
    from andrea_cli.render.bound import render_bound, short_name

    console = Console(width=80, record=True, highlight=False)
    render_bound(console, h200_report)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "static bound, not a measurement" in text and "…" not in text
    for k in h200_report.kernels:
        assert short_name(k.kernel) in text


@pytest.mark.slow
def test_cli_json(cli, isolated_cache, with_extra):
    _need_tools()
    result = cli("bench", "--bound", "--gpu", "h100", "--kernel", with_extra, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert isinstance(rows, list) and len(rows) >= 27
    for row in rows:
        assert {"kernel", "registers", "shared_bytes", "warps_per_sm", "bottleneck", "bound_tflops",
                "peak_fraction"} <= set(row)
        assert row["what"] == "static bound, not a measurement" and row["gpu"] == "NVIDIA H100 SXM5"
    extra = next(r for r in rows if r["kernel"] == "extra_kernel")
    assert extra["bottleneck"] is None and extra["notes"]


@pytest.mark.parametrize("args, says", [
    (("--bound", "--gpu", "b200"), "--gpu 'b200' is not a GPU the bound knows"),
    (("--gpu", "h100"), "add --bound"),
    (("--bound", "--T", "1024"), "drop --T"),
])
def test_cli_refuses_in_one_line(run_main, args, says):
    code, out, err = run_main("bench", *args)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_the_sweeps_options_are_refused_alike_by_the_command_line_and_python(run_main):
    """--bound's conflicts are declared once (BOUND_TAKES): both faces name the same flags."""
    import andrea_cli

    code, _, err = run_main("bench", "--bound", "--T", "64", "--threads", "2", "--plot", "b.png", "--json")
    with pytest.raises(andrea_cli.AndreaError) as caught:
        andrea_cli.benchmark(bound=True, T=64, threads=2, plot="b.png", json=True)
    assert code == 2 and err.strip() == f"error: {caught.value}"
    assert str(caught.value).endswith("drop --T, --threads, --plot")


@pytest.mark.slow
def test_python_api(isolated_cache):
    _need_tools()
    import andrea_cli

    result = andrea_cli.bench_bound(gpu="a100")
    assert isinstance(result.report, list) and result.raw.gpu.key == "a100"
    row = next(r for r in result.report if r["kernel"] == "attention_fused_kernel4_d128")
    assert row["bottleneck"] and 0 < row["peak_fraction"] <= 1 and row["gpu"] == "NVIDIA A100 SXM4 80GB"
    with pytest.raises(andrea_cli.AndreaError, match="not a GPU the bound knows"):
        andrea_cli.bench_bound(gpu="v100")


# ------------------------------------------------------------------------------------------------
# On a GPU, `andrea bench` puts each kernel row's bound beside its measured figure. No GPU here:
# the rows are fed as the GPU sweep would leave them, the device named as an H200 reports itself.

class _RecordingBackend:
    """What the GPU bench's implementations need of a backend when only their launches matter."""

    def device(self):
        from andrea_cli.bench.bound.geometry import RecordingDevice

        return RecordingDevice()


def _gpu_rows(impls, shapes, ms: float):
    """The BenchResult a GPU sweep would leave: every implementation measured at `ms` per shape."""
    from andrea_cli.bench.sweep import BenchResult, Measurement, costs

    result = BenchResult("gpu", "NVIDIA H200 (sm_90, 132 SMs)", None, "fused", 1, 5)
    for impl in impls:
        for H, T, d_k, causal in shapes:
            flops, _ = costs(impl.direction, H, T, d_k, causal)
            result.measurements.append(Measurement(impl.name, T, d_k, H, causal, ms, tflops=flops / (ms / 1e3) / 1e12,
                                                   direction=impl.direction, precision=impl.precision))
    return result


def test_a_device_name_finds_its_model():
    from andrea_cli.bench.bound.gpus import spec_for_device

    assert spec_for_device("NVIDIA H200", 132)[0] is GPUS["h200"]
    assert spec_for_device("NVIDIA H100 80GB HBM3", 132)[0] is GPUS["h100"]
    assert spec_for_device("NVIDIA A100-SXM4-80GB", 108)[0] is A100
    for name, sms, why in (("NVIDIA H100 PCIe", 114, "PCIE part"), ("NVIDIA H200", 100, "has 100 SMs"),
                           ("NVIDIA GeForce RTX 4090", 128, "no model of NVIDIA GeForce RTX 4090")):
        spec, said = spec_for_device(name, sms)
        assert spec is None and why in said, said


def test_an_unknown_gpu_or_missing_tools_leave_the_bound_out_in_one_line(monkeypatch):
    from andrea_cli.bench import gpu as bench_gpu
    from andrea_cli.bench.bound import measured

    impls = [bench_gpu.fused_gpu_impl(_RecordingBackend())]

    def never(*args):
        raise AssertionError("compiled for a GPU without a model")

    result = _gpu_rows(impls, [(2, 256, 64, False)], 1.0)
    measured.attach_bounds(result, impls, "NVIDIA L4", 58, packaged_kernel_path(), compile_bounds=never)
    assert result.notes == ["no static bound beside the measured figures: no model of NVIDIA L4: the bound knows "
                            "NVIDIA H200 SXM, NVIDIA H100 SXM5, NVIDIA A100 SXM4 80GB"]
    monkeypatch.setattr(measured, "find_cuobjdump", lambda: None)
    result = _gpu_rows(impls, [(2, 256, 64, False)], 1.0)
    measured.attach_bounds(result, impls, "NVIDIA H200", 132, packaged_kernel_path(), compile_bounds=never)
    assert result.notes == ["no static bound beside the measured figures: cuobjdump not found: pip install '.[bound]'"]
    m = result.measurements[0]
    assert m.bound_tflops is None and m.measured_over_bound is None


def test_a_row_whose_launches_cannot_be_recorded_loses_its_bound_only(monkeypatch):
    from andrea_cli.bench import gpu as bench_gpu
    from andrea_cli.bench.bound import measured
    from andrea_cli.bench.sweep import Impl, swept_mask

    def refuses(dev, q, k, v, mask):
        raise ValueError("no such launch")

    impls = [Impl("broken", None, prepare_on=refuses), bench_gpu.fused_gpu_impl(_RecordingBackend())]
    result = _gpu_rows(impls, [(2, 256, 64, False)], 1.0)

    class Bounds:  # a bound of 0.5 ms for whatever the fused row launches
        def tflops(self, impl, m):
            assert measured.recorded_launches(impl, m.H, m.T, m.d_k, swept_mask(m.causal))
            return 2.0 * m.tflops

    monkeypatch.setattr(measured, "find_cuobjdump", lambda: "cuobjdump")
    measured.attach_bounds(result, impls, "NVIDIA H200", 132, packaged_kernel_path(), compile_bounds=lambda p, s: Bounds())
    broken, fused = result.measurements
    assert broken.bound_tflops is None and fused.measured_over_bound == pytest.approx(0.5)
    assert "no static bound for 1 row(s), first broken at T=256 d_k=64: no such launch" in result.notes


@pytest.mark.slow
def test_bench_rows_on_an_h200_carry_their_bound_at_their_own_shape(isolated_cache):
    """The fused row at T 4096, 12 heads, d 64 is the reference launch `bench --bound` reads, so its
    bound time is that report's; at T 1024, 2 heads the launchers' geometry at that shape gives it.
    measured / bound is the bound's time over the measured one; cupy (not a kernel of ours) has none."""
    _need_tools()
    from andrea_cli.bench.bound.geometry import reference_launches
    from andrea_cli.bench.bound.measured import RowBounds, attach_bounds
    from andrea_cli.bench.bound.report import compute_bounds, kernel_bound
    from andrea_cli.bench.gpu import fused_gpu_impl, staged_gpu_impl
    from andrea_cli.bench.sweep import Impl, costs
    from andrea_cli.render.bench import render_bench

    path = packaged_kernel_path()
    backend = _RecordingBackend()
    impls = [fused_gpu_impl(backend), staged_gpu_impl(backend), Impl("cupy", lambda q, k, v, mask: None)]
    ms = 2.0
    shapes = [(12, 4096, 64, False), (12, 4096, 64, True), (2, 1024, 64, True)]
    result = _gpu_rows(impls, shapes, ms)
    attach_bounds(result, impls, "NVIDIA H200", 132, path)
    rows = {(m.impl, m.H, m.T, m.causal): m for m in result.measurements}

    report = {k.kernel: k for k in compute_bounds(path, "h200").kernels}["attention_fused_kernel3_d64"]
    for causal, b in ((False, report.full), (True, report.causal)):
        m = rows["fused", 12, 4096, causal]
        assert m.measured_over_bound == pytest.approx(b.time_s / (ms / 1e3), rel=1e-9)
        assert m.bound_tflops == pytest.approx(costs("forward", 12, 4096, 64, causal)[0] / b.time_s / 1e12, rel=1e-9)
    bounds = RowBounds.compile(path, H200)
    small = reference_launches(T=1024, H=2).launches["attention_fused_kernel3_d64"]
    name = "attention_fused_kernel3_d64"
    want = kernel_bound(name, bounds.code[name], bounds.resources[name], small, H200, T=1024, H=2).causal.time_s
    assert rows["fused", 2, 1024, True].measured_over_bound == pytest.approx(want / (ms / 1e3), rel=1e-9)
    assert rows["fused", 2, 1024, True].measured_over_bound < rows["fused", 12, 4096, True].measured_over_bound / 10
    for (impl, *_), m in rows.items():
        assert (m.bound_tflops is None) == (impl == "cupy"), impl
    assert 0 < rows["staged", 12, 4096, False].bound_tflops <= H200.fp32_peak_tflops
    assert any("÷ bound" in note and "NVIDIA H200 SXM" in note for note in result.notes)

    row = result.to_json()["measurements"][0]
    assert row["bound_tflops"] == rows["fused", 12, 4096, False].bound_tflops
    assert row["measured_over_bound"] == rows["fused", 12, 4096, False].measured_over_bound
    console = Console(width=200, record=True)
    render_bench(console, result)
    text = console.export_text()
    assert "÷ bound" in text and f"{rows['fused', 12, 4096, False].measured_over_bound:.2f}" in text
    console = Console(width=80, record=True)
    render_bench(console, result)
    assert max(len(line) for line in console.export_text().splitlines() if "│" in line or "─" in line) <= 80


@pytest.mark.slow
def test_bench_gpu_on_a_device_that_reports_an_h200_joins_timings_and_bounds(monkeypatch, bench_gpu_as_h200,
                                                                           isolated_cache):
    """bench_gpu itself, with the device's properties those of an H200 and its kernels run by the
    CPU build (timed by the host clock): the rows it returns carry the bound the model gives the
    same launches at their shape, and measured / bound is that bound's time over the median."""
    _need_tools()
    import dataclasses

    from andrea_cli.bench.bound.measured import RowBounds
    from andrea_cli.bench.cpu import numpy_impl
    from andrea_cli.bench.sweep import CAUSAL, costs

    bench_gpu = bench_gpu_as_h200
    monkeypatch.setattr(bench_gpu, "cupy_impl", lambda: dataclasses.replace(numpy_impl(), name="cupy"))
    result = bench_gpu.bench_gpu(packaged_kernel_path(), Ts=(64,), d_ks=(64,), masks=(CAUSAL,), H=2, warmup=0,
                                 repeats=1, progress=lambda s: None)
    rows = {m.impl: m for m in result.measurements if m.median_ms is not None}
    assert {"fused", "fused1", "staged", "fused_backward"} <= {n for n, m in rows.items() if m.bound_tflops}
    assert rows["cupy"].bound_tflops is None
    bounds = RowBounds.compile(packaged_kernel_path(), GPUS["h200"])
    impls = {impl.name: impl for impl in (bench_gpu.fused_gpu_impl(_RecordingBackend()),
                                          bench_gpu.staged_gpu_impl(_RecordingBackend()))}
    for name, impl in impls.items():
        m, seconds = rows[name], bounds.seconds(impl, 2, 64, 64, CAUSAL)
        assert m.measured_over_bound == pytest.approx(seconds / (m.median_ms / 1e3), rel=1e-9), name
        assert m.bound_tflops == pytest.approx(costs("forward", 2, 64, 64, True)[0] / seconds / 1e12, rel=1e-9)
    assert any("÷ bound" in note for note in result.notes)
