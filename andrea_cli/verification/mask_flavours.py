"""The cases of the mask flavours beyond causal and window:W: a two-sided window (window:L,R),
attention sinks beside a window (sinks:N,window:W) and ALiBi (alibi, alibi,window:W), on the
staged kernels (mask_kernel1, av's key ranges), the fused fp32 kernels 1-3, the fp32 backward
(staged: the query and key ranges of dv, dq, dk; fused: the ranges and ALiBi's bias in each
recomputed P) and, where the mask hides the future, decode. Each is placed at a tile edge: a
right-hand reach one past a 32-key tile (kernels 1, 2, the fused dK/dV's key blocks) or a 64-key
tile (kernel3, the staged backward's kernel2), sinks that span a whole key tile and end one past
it, an ALiBi over a head count that is no power of two (the paper's second rule); L != S and
grouped K/V heads in the full sweep. (The bf16 backward's kernels take every flavour, but its
forward, kernel4's lse twin, takes the two bounds only: tests/backends/launch/test_backward_bf16.py
runs them on the float64 forward's output and logsumexp.) The tensor-core forward kernels 4-7
have cases of their own, at their tiles' edges (bf16_flavour_cases)."""

from __future__ import annotations

from andrea_cli.backends.launch.staged import KERNEL1_PLAN
from andrea_cli.masks import MaskSpec
from andrea_cli.verification.case import Case

FORWARD = ("staged", "fused", "backward")  # a right-hand window: no decode (generation has no later keys)
CAUSAL = FORWARD + ("decode",)  # sinks and ALiBi hide the future: decode's rows too
BF16 = ("fused_bf16",)  # the tensor-core kernels 4-7: 64-key tiles, 64-row (4) and 128-row (5-7) blocks
STAGED = ("staged", "backward")  # one-output-per-thread geometry: the fused families run on the default


def two_sided(left: int, right: int) -> MaskSpec:
    """window:L,R: keys p-L .. p+R."""
    return MaskSpec("window", left + 1, right=right)


def sinks(n: int, window: int) -> MaskSpec:
    return MaskSpec("window", window, sinks=n)


ALIBI = MaskSpec("causal", alibi=True)


def flavour_cases(quick: bool) -> list[Case]:
    cases = [
        # R = 33: an 8-row block's reach ends one past the first 32-key tile; kernel3's 64-row
        # block (d = 64) reaches 63 + 33 = 96, past its first 64-key tile
        Case(70, 64, 64, two_sided(4, 33), True, families=FORWARD),
        # 33 sinks: a whole 32-key tile and one key of the next, then a window shorter than a tile
        Case(70, 64, 64, sinks(33, 20), True, families=CAUSAL),
        # three heads: slopes 2^-4, 2^-8 (n = 2), then 2^-2 (every other slope of 4 heads)
        Case(40, 64, 64, ALIBI, True, heads=3, families=CAUSAL),
    ]
    if not quick:
        cases += [
            # L != S: the offset S - L under both bounds, kernels 1 and 2 (d_k != d_v)
            Case(40, 16, 24, two_sided(6, 9), True, T_k=97, families=FORWARD),
            Case(150, 128, 128, two_sided(63, 64), True, families=("staged", "fused")),  # kernel3, both edges on a tile's
            # kernel3 and the staged backward's kernel2: sinks span a 64-key tile (the fused
            # dK/dV's 32-key blocks: two and one key)
            Case(130, 64, 64, sinks(65, 16), True, families=CAUSAL),
            # the backward's own: L > S with a right reach (rows before L - S see keys up to
            # p + R), one K/V head for four query heads; kernel1's 16-tiles with sinks one past
            # a tile, 17 queries against 75 keys, two query heads a K/V head
            Case(45, 16, 16, two_sided(3, 5), True, T_k=30, heads=4, kv_heads=1, families=FORWARD),
            Case(17, 16, 24, sinks(17, 8), True, KERNEL1_PLAN, T_k=75, heads=4, kv_heads=2, families=STAGED),
            Case(40, 16, 16, MaskSpec("window", 20, alibi=True), True, KERNEL1_PLAN, T_k=56, heads=3,
                 families=STAGED),
            # decode's last row: 70 sinks and a 60-key window, 130 keys in two slices of 65, the
            # second holding the last 5 sinks and the window: the seam inside a slice
            Case(200, 32, 48, sinks(70, 60), True, families=("staged", "fused", "decode")),
            Case(97, 32, 32, MaskSpec("window", 33, alibi=True), True, heads=4, kv_heads=2, families=FORWARD),
            Case(70, 64, 64, ALIBI, True, T_k=100, families=FORWARD),  # ALiBi's distance from p = i + 30
            Case(129, 128, 128, MaskSpec("window", 40, alibi=True), True, heads=8,
                 families=("staged", "fused", "decode")),
        ]
    return cases


def bf16_flavour_cases(quick: bool) -> list[Case]:
    """The flavours on the tensor-core kernels, at their edges: 64-key tiles, kernel4's 64-row and
    kernel5-7's 128-row blocks, kernel5's flavoured copy at d 128 (Q re-read, its own loop)."""
    cases = [
        # R = 65: kernel4's first block (row 63) reaches key 128, kernel5-7's (row 127) key 192: one
        # past a 64-key tile each
        Case(130, 64, 64, two_sided(4, 65), True, families=BF16),
        # 65 sinks: a whole 64-key tile and one key of the next, then a window shorter than a tile
        Case(130, 64, 64, sinks(65, 40), True, families=BF16),
        # three heads (no power of two), every tile biased: the diagonal's and those below it
        Case(150, 128, 128, ALIBI, True, heads=3, families=BF16),
    ]
    if not quick:
        cases += [
            Case(129, 64, 64, two_sided(63, 64), True, families=BF16),  # both edges on a tile's
            Case(70, 64, 64, two_sided(6, 9), True, T_k=200, families=BF16),  # L != S: offset 130
            # sinks ending on a tile edge (64) beside a window of one tile, at d 128; grouped heads
            Case(130, 128, 128, sinks(64, 64), True, kv_heads=1, families=BF16),
            Case(100, 64, 64, sinks(1, 16), True, T_k=200, kv_heads=1, families=BF16),
            Case(130, 64, 64, MaskSpec("window", 70, alibi=True), True, heads=3, families=BF16),
            Case(97, 64, 64, ALIBI, True, T_k=160, kv_heads=1, families=BF16),  # ALiBi's p = i + 63
        ]
    return cases
