"""bench/bound/banks.py: wavefronts of one warp's shared access from its lane addresses, by hand."""

from __future__ import annotations

from andrea_cli.bench.bound.banks import ideal_wavefronts, phase_lanes, wavefronts


def test_wavefronts_by_hand():
    # 4 bytes a lane: one phase of 32 lanes
    assert wavefronts([4 * lane for lane in range(32)], 4) == 1
    assert wavefronts([8 * lane for lane in range(32)], 4) == 2  # two lanes per bank, distinct words
    assert wavefronts([128 * lane for lane in range(32)], 4) == 32  # every lane in bank 0
    assert wavefronts([0] * 32, 4) == 1  # one word: a broadcast
    assert wavefronts([2 * lane for lane in range(32)], 2) == 1  # 16-bit: two lanes share a word
    # 16 bytes a lane: quarter-warps of 8 lanes, conflicts inside a phase only
    assert phase_lanes(16) == 8 and phase_lanes(8) == 16 and phase_lanes(4) == 32
    assert wavefronts([16 * lane for lane in range(32)], 16) == 4 == ideal_wavefronts(32, 16)
    # a quarter-warp's 8 lanes at 128-byte steps: all in banks 0-3, 8 words each
    assert wavefronts([128 * lane for lane in range(32)], 16) == 32
    # kernel6's old K/V copy at d 64: lane = 8·row + chunk, byte 16·row + 128·chunk (rows 0-3)
    old = [16 * (lane // 8) + 128 * (lane % 8) for lane in range(32)]
    assert wavefronts(old, 16) == 32
    # the remapped copy: lane = 8·chunk + row, byte 16·row + 128·chunk: each phase one core matrix
    new = [16 * (lane % 8) + 128 * (lane // 8) for lane in range(32)]
    assert wavefronts(new, 16) == 4
    # 8 bytes a lane: half-warps
    assert wavefronts([8 * lane for lane in range(32)], 8) == 2
    # lanes that do not take part
    assert wavefronts([0, None, 128, None] + [None] * 28, 4) == 2
    assert ideal_wavefronts(8, 16) == 1 and ideal_wavefronts(32, 2) == 1
