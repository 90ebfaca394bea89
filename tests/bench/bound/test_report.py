"""bench/bound/report.py, `andrea bench --bound` on the kernel file's own kernels: every kernel
listed (kernel4 shared-memory bound, kernel3 under the FP32 peak, scores_kernel1 shared-memory bound,
kernel6 on the tensor pipe, the bf16 backward's target), no bound above its GPU's peak, the table in
80 columns, the JSON rows and the Python API. (The model on hand-worked kernels: test_model.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from andrea_cli.bench.bound.gpus import GPUS
from andrea_cli.kernel_file import packaged_kernel_path


H200, A100 = GPUS["h200"], GPUS["a100"]


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
def h200_report(isolated_cache, bound_tools, with_extra):
    from andrea_cli.bench.bound.report import compute_bounds

    lines = []
    report = compute_bounds(with_extra, "h200", progress=lines.append)
    report.progress_lines = lines  # for test_progress_names_each_step_and_counts_the_kernels
    return report


@pytest.mark.slow
def test_progress_names_each_step_and_counts_the_kernels(h200_report):
    """The compile takes 15-40 s: a progress line says what runs, then counts the kernels."""
    lines, n = h200_report.progress_lines, len(h200_report.kernels)
    assert lines[0].startswith("compiling the kernel file for sm_90a with NVRTC"), lines
    assert any("cuobjdump" in line for line in lines)
    assert lines[-n:] == [f"[{i}/{n}] bounding {k.kernel}" for i, k in enumerate(h200_report.kernels, 1)]


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
    # ldmatrix; its eighth of the block's copy of the next tile by cp.async: d/32 LDGSTS.128 each of
    # K and V, whose lane addresses the reader follows: 4 wavefronts each since issue 34's remap (a
    # quarter-warp's 8 lanes fill one 128-byte core matrix; before it, 32). Bound: the exponentials
    # and conversions at d 64 (50 on the 16-a-clock pipe per warp and tile), the tensor pipe at d 128
    # (at the peak, with the assumptions that put it there named)
    for d in (64, 128):
        k6 = by_name[f"attention_fused_kernel6_d{d}"]
        m = k6.mix
        assert (m.hmma, m.hgmma, m.shared_load_bytes) == (0, d // 16 + 4, 0), (d, m.by_opcode)
        assert m.tensor_flops == (d // 16) * 2 * 64 * 64 * 16 // 4 + 4 * 2 * 64 * d * 16 // 4, d
        assert m.wgmma_shared_bytes == 2 * 64 * d * 2 // 4 and m.global_load_bytes == 2 * 64 * d * 2 // 8, d
        assert k6.spill_bytes == 0
        copies = [i for i in k6.trip if i.opcode.startswith("LDGSTS")]
        assert len(copies) == d // 16 and {i.wavefronts for i in copies} == {4}, [i.wavefronts for i in copies]
        assert m.shared_conflict_wavefronts == 0 and m.shared_assumed == 0, d
        assert (m.mufu, m.convert) == (50, 16), d  # 34 MUFU.EX2 and 16 F2FP packing P
        assert k6.full.bottleneck == ("mufu" if d == 64 else "tensor"), (d, k6.full.bottleneck, k6.full.seconds)
        assert bool(k6.full.at_peak_because) == (d == 128), k6.full.at_peak_because
        # one block per SM at both (the catalogue's: the overlap holds S, P, O and Q's fragments at once)
        assert k6.warps_per_sm == 8, (d, k6.warps_per_sm)
        # kernel7's consumer loop: kernel6's products a tile, no copy (the producer warp's TMA), not
        # the range an mbarrier wait's out-of-line retry branches back over (2,709 instructions)
        k7 = by_name[f"attention_fused_kernel7_d{d}"].mix
        assert (k7.hgmma, k7.tensor_flops, k7.global_load_bytes) == (m.hgmma, m.tensor_flops, 0), (d, k7.by_opcode)
        assert k7.instructions < 1.2 * m.instructions, (d, k7.instructions, m.instructions)
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
                if b.tflops >= 0.995 * b.peak_tflops:  # at a peak: the report names what puts it there
                    assert b.at_peak_because, (k.kernel, b.tflops)
                    assert b is k.causal or any("only if" in n for n in k.notes), k.notes
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
def test_cli_json(cli, isolated_cache, bound_tools, with_extra):
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


@pytest.mark.slow
def test_python_api(isolated_cache, bound_tools):
    import andrea_cli

    result = andrea_cli.bench_bound(gpu="a100")
    assert isinstance(result.report, list) and result.raw.gpu.key == "a100"
    row = next(r for r in result.report if r["kernel"] == "attention_fused_kernel4_d128")
    assert row["bottleneck"] and 0 < row["peak_fraction"] <= 1 and row["gpu"] == "NVIDIA A100 SXM4 80GB"
    with pytest.raises(andrea_cli.AndreaError, match="not a GPU the bound knows"):
        andrea_cli.bench_bound(gpu="v100")
