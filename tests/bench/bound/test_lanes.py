"""bench/bound/lanes.py on fixed listings: each lane's shared address followed from threadIdx.x
through the integer arithmetic, its wavefronts counted; what it cannot follow left undecided."""

from __future__ import annotations

from andrea_cli.bench.bound.lanes import with_wavefronts
from andrea_cli.bench.bound.sass import mix_of, parse_kernels

LISTING = """
        Function : toy
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   S2UR UR5, SR_CgaCtaId ;
        /*0020*/                   UMOV UR4, 0x400 ;
        /*0030*/                   ULEA UR4, UR5, UR4, 0x18 ;
        /*0040*/                   LEA R2, R0, UR4, 0x4 ;
        /*0050*/                   STS.128 [R2], R4 ;
        /*0060*/                   IMAD.SHL.U32 R3, R0, 0x80, RZ ;
        /*0070*/                   LDS.128 R4, [R3+0x10] ;
        /*0080*/                   SHF.R.U32.HI R5, RZ, 0x3, R0 ;
        /*0090*/                   LOP3.LUT R6, R0, 0x7, RZ, 0xc0, !PT ;
        /*00a0*/                   IMAD R7, R6, 0x80, RZ ;
        /*00b0*/                   LEA R7, R5, R7, 0x4 ;
        /*00c0*/                   LDGSTS.E.BYPASS.128 [R7+UR4], desc[UR10][R8.64] ;
        /*00d0*/                   S2R R9, SR_TID.Y ;
        /*00e0*/                   IMAD R10, R9, 0x10, R2 ;
        /*00f0*/                   LDS.128 R12, [R10] ;
        /*0100*/                   LDC R11, c[0x0][0x0] ;
        /*0110*/                   IMAD R11, R11, R0, RZ ;
        /*0120*/                   LDS [R11], R12 ;
        /*0130*/                   LDS R13, [R0] ;
        /*0140*/                   LDS R14, [R13] ;
"""


def test_lane_addresses_followed_to_their_wavefronts():
    code = with_wavefronts(parse_kernels(LISTING)["toy"])
    by_address = {i.address: i for i in code}
    assert by_address[0x50].wavefronts == 4  # 16·tid plus the shared window's base: conflict-free
    assert by_address[0x70].wavefronts == 32  # 128·tid: a quarter-warp in banks 0-3
    # byte 16·(tid / 8) + 128·(tid % 8): kernel6's old K/V copy at d 64, 8 wavefronts a phase
    assert by_address[0xc0].wavefronts == 32
    assert by_address[0xf0].wavefronts is None  # threadIdx.y: not followed
    assert by_address[0x120].wavefronts is None  # blockDim.x · tid: an unknown factor
    assert by_address[0x130].wavefronts == 1  # 4-byte words at tid: one wavefront
    assert by_address[0x140].wavefronts is None  # an address loaded from memory
    mix = mix_of(code)
    assert (mix.shared_derived, mix.shared_assumed) == (4, 3)
    # beyond bytes / 128: 0 at 0x50 and 0x130, 32 - 4 at 0x70 and at 0xc0
    assert mix.shared_conflict_wavefronts == 56


PREDICATED = """
        Function : guarded
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   IMAD.SHL.U32 R2, R0, 0x10, RZ ;
        /*0020*/               @P0 IMAD.SHL.U32 R2, R0, 0x80, RZ ;
        /*0030*/                   STS.128 [R2], R4 ;
        /*0040*/               @P0 IADD3 R3, R2, 0x10, RZ ;
        /*0050*/                   IMAD.SHL.U32 R3, R0, 0x10, RZ ;
        /*0060*/               @P1 IMAD.SHL.U32 R3, R0, 0x10, RZ ;
        /*0070*/                   STS.128 [R3], R4 ;
"""


def test_a_guarded_write_the_reader_cannot_decide_leaves_the_address_unknown():
    code = {i.address: i for i in with_wavefronts(parse_kernels(PREDICATED)["guarded"])}
    assert code[0x30].wavefronts is None  # 16·tid or 128·tid: either may hold
    assert code[0x70].wavefronts == 4  # the same value either way
