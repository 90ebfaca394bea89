"""Shared-memory bank conflicts from the addresses a warp's lanes touch: how many wavefronts
(passes through the 32 banks, one per SM clock) one shared load or store takes.

The model, and where it comes from:
  - 32 banks, each 4 bytes wide; byte address a is in bank (a / 4) mod 32 [PG-SMEM, gpus.py].
  - Lanes reading or writing the same 4-byte word are served at once (a broadcast for loads;
    for stores one write wins): a word counts once however many lanes touch it [PG-SMEM].
  - A warp's request is served in phases: all 32 lanes at once for accesses of 4 bytes or less
    per lane, half-warps (16 lanes) for 8 bytes, quarter-warps (8 lanes: lanes 0-7, 8-15, ...)
    for 16. The CUDA C++ Programming Guide states this split for compute capability 3.x;
    for later GPUs it is the assumption CUTLASS's shared-memory layouts are designed for (a
    "phase" of 8 threads each storing 16 bytes must cover all 32 banks) and the one
    ldmatrix's 8-lane matrices follow. Conflicts are counted inside a phase only.
  - A phase takes as many wavefronts as the most distinct words any one bank holds among its
    lanes' accesses; the access takes the sum over its phases. The least a full warp can take is
    its bytes / 128: 4 for 16 bytes a lane, 1 for 4.
Pure arithmetic on integers; lanes.py derives the addresses from the SASS."""

from __future__ import annotations

from collections.abc import Sequence

BANKS = 32
WORD_BYTES = 4
BYTES_PER_WAVEFRONT = BANKS * WORD_BYTES  # 128: what the banks deliver in one clock


def phase_lanes(lane_bytes: int) -> int:
    """Lanes served together: 8 for 16-byte accesses, 16 for 8-byte ones, 32 otherwise."""
    return {16: 8, 8: 16}.get(lane_bytes, 32)


def words(address: int, lane_bytes: int) -> range:
    """The 4-byte words one lane's access covers (a narrower access still occupies its word)."""
    first = address // WORD_BYTES
    return range(first, first + max(1, lane_bytes // WORD_BYTES))


def phase_wavefronts(addresses: Sequence[int], lane_bytes: int) -> int:
    """One phase: the most distinct words any bank holds (0 for a phase with no active lane)."""
    per_bank: dict[int, set[int]] = {}
    for a in addresses:
        for w in words(a, lane_bytes):
            per_bank.setdefault(w % BANKS, set()).add(w)
    return max((len(ws) for ws in per_bank.values()), default=0)


def wavefronts(addresses: Sequence[int | None], lane_bytes: int) -> int:
    """Wavefronts of one warp-wide access: addresses[lane] in bytes, None for a lane that does not
    take part. E.g. 32 lanes storing 16 bytes at 16·lane: 4 (each quarter-warp one 128-byte row);
    at 128·lane: 32 (each quarter-warp's 8 lanes all in banks 0-3)."""
    n = phase_lanes(lane_bytes)
    total = 0
    for start in range(0, len(addresses), n):
        active = [a for a in addresses[start:start + n] if a is not None]
        total += phase_wavefronts(active, lane_bytes)
    return total


def ideal_wavefronts(lanes: int, lane_bytes: int) -> int:
    """The least any layout can take: the bytes over 128, at least one."""
    return max(1, -(-lanes * lane_bytes // BYTES_PER_WAVEFRONT))
