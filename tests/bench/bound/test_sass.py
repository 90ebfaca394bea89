"""bench/bound/sass.py on fixed listings: instruction classes, the hot loop and its steady state,
the work and shared-memory bytes of HMMA, LDSM and HGMMA per warp."""

from __future__ import annotations

from andrea_cli.bench.bound.gpus import GPUS
from andrea_cli.bench.bound.model import Work, bound
from andrea_cli.bench.bound.sass import (
    hgmma_flops, hgmma_shared_bytes, hmma_flops, hot_loop, ldsm_bytes, mix_of, parse_kernels, steady_state,
)


H200 = GPUS["h200"]


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


PACKED_LISTING = """
        Function : toy_pack
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   MUFU.EX2 R4, R4 ;
        /*0020*/               @P1 BRA 0x50 ;
        /*0030*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0040*/                   F2FP.BF16.F32.PACK_AB R8, R5, R4 ;
        /*0050*/               @P2 BRA 0x70 ;
        /*0060*/                   FSEL R5, R5, -INF , P0 ;
        /*0070*/               @P0 BRA 0x10 ;
        /*0080*/                   EXIT ;
"""


def test_a_branch_that_waits_for_wgmma_is_tile_work():
    # kernel6 waits for its P·V and packs the next P (F2FP) behind a branch of its own, taken every
    # trip but the last: kept, while the fix-up with no arithmetic (FSEL) is dropped
    loop = hot_loop(parse_kernels(PACKED_LISTING)["toy_pack"])
    kept = [i.opcode.split(".")[0] for i in steady_state(loop)]
    assert kept == ["MUFU", "BRA", "WARPGROUP", "F2FP", "BRA", "BRA"]
    assert mix_of(steady_state(loop)).mufu == 2


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
    b = bound(mix, Work(warps=1 << 16, array_bytes=1 << 20, executed_flops=1e12, useful_flops=1e12), H200, 8, looped=True)
    assert b.bottleneck == "tensor" and b.peak_tflops == H200.bf16_peak_tflops


# Two copies of one tile loop, as a kernel with a flavoured instantiation compiles: the same mma,
# the second with ALiBi's FFMA a score. The first waits on an mbarrier whose retry ptxas put out of
# line after EXIT, branching back into the loop: a backward branch, but no loop of its own (its
# target does not dominate it), and its address range would hold both copies' mma.
COPIES_LISTING = """
        Function : toy_copies
        /*0000*/               @P3 BRA 0x80 ;
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [R2], R3 ;
        /*0020*/              @!P1 BRA 0xf0 ;
        /*0030*/                   HMMA.16816.F32.BF16 R8, R4, R6, R8 ;
        /*0040*/                   MUFU.EX2 R9, R9 ;
        /*0050*/               @P0 BRA 0x10 ;
        /*0060*/                   EXIT ;
        /*0070*/                   NOP ;
        /*0080*/                   HMMA.16816.F32.BF16 R8, R4, R6, R8 ;
        /*0090*/                   FFMA R9, R4, R5, R9 ;
        /*00a0*/                   FFMA R10, R4, R5, R10 ;
        /*00b0*/                   FSEL R9, R9, -INF , P2 ;
        /*00c0*/                   MUFU.EX2 R9, R9 ;
        /*00d0*/               @P0 BRA 0x80 ;
        /*00e0*/                   EXIT ;
        /*00f0*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [R2], R3 ;
        /*0100*/              @!P1 BRA 0xf0 ;
        /*0110*/                   BRA 0x30 ;
"""


def test_the_hot_loop_is_the_plain_copy_and_a_retry_is_no_loop():
    from andrea_cli.bench.bound.sass import find_loops, flow_graph

    code = parse_kernels(COPIES_LISTING)["toy_copies"]
    loops = {(lp.start, lp.end) for lp in find_loops(code)}
    # the retry's self-loop and the two tile loops; not the range 0x30 .. 0x110 the retry returns over
    assert loops == {(0x10, 0x50), (0x80, 0xd0), (0xf0, 0x100)}, sorted(loops)
    graph = flow_graph(code)
    assert graph.dominates(0x10, 0x110) and not graph.dominates(0x30, 0x110) and not graph.dominates(0x80, 0x50)
    # equal tensor work: the copy without the flavour's FFMA, the shorter, is the steady state
    loop = hot_loop(code)
    assert (loop.start, loop.end) == (0x10, 0x50)


# A kernel without a loop: an if whose sides both end in EXIT, a shuffle whose divergent fallback
# (BRA.DIV) and a division's slow path (CALL) ptxas lays out after the end.
STRAIGHT_LISTING = """
        Function : toy_straight
        /*0000*/                   LDG.E.128 R4, [R2.64] ;
        /*0010*/                   BRA.DIV UR4, 0xa0 ;
        /*0020*/                   SHFL.BFLY PT, R8, R4, 0x1, 0x1f ;
        /*0030*/              @!P3 BRA 0x70 ;
        /*0040*/                   CALL.REL.NOINC 0xc0 ;
        /*0050*/                   STG.E.128 [R2.64], R4 ;
        /*0060*/                   EXIT ;
        /*0070*/                   STG.E [R2.64], R4 ;
        /*0080*/                   STG.E [R2.64+0x4], R5 ;
        /*0090*/                   EXIT ;
        /*00a0*/                   WARPSYNC.COLLECTIVE R9, 0xb0 ;
        /*00b0*/                   BRA 0x30 ;
        /*00c0*/                   MUFU.RCP R6, R5 ;
        /*00d0*/                   RET.REL.NODEC R10 0x0 ;
"""


def test_a_kernel_without_a_loop_counts_one_blocks_path():
    from andrea_cli.bench.bound.sass import find_loops, straight_line

    code = parse_kernels(STRAIGHT_LISTING)["toy_straight"]
    # the fallback's branch back to 0x30 is no loop: 0x30 does not dominate it
    assert find_loops(code) == [] and hot_loop(code) is None
    assert [i.address for i in straight_line(code)] == [0x0, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60]
