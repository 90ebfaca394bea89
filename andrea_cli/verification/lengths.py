"""The cases beyond one square head: L queries against S keys (L < S, L > S, a decode step of
L = 1) and grouped K/V heads (2 and 8 query heads per K/V head, one K/V head for all), each on
the edges of the tiles that carry the diagonal's offset S - L. A family runs them once it takes
them (Case.square says which do not need them)."""

from __future__ import annotations

from andrea_cli.backends.launch.staged import ALL_PLANS, DEFAULT_PLAN
from andrea_cli.masks import MaskSpec
from andrea_cli.verification.case import Case

CAUSAL, NONE, TOP_LEFT = MaskSpec("causal"), MaskSpec("none"), MaskSpec("causal", align="top_left")

# (L, S, d_k, d_v, mask): the offset S - L on and off the 16-, 32- and 64-key tiles: 48 (three
# 16-tiles), 64, 33 (one past a 32-key tile), -48 and -33 (the first L - S rows see no key), a
# decode step (L = 1) on a tile's last key and one past it, and the SDPA (top-left) diagonal
LENGTHS = [
    (17, 65, 16, 16, CAUSAL),
    (33, 97, 64, 64, CAUSAL),
    (31, 64, 12, 20, MaskSpec("window", 33)),
    (65, 17, 16, 16, CAUSAL),
    (97, 64, 64, 64, MaskSpec("window", 5)),
    (40, 33, 64, 64, TOP_LEFT),
    (17, 65, 16, 16, TOP_LEFT),
    (1, 64, 64, 64, CAUSAL),
    (1, 97, 3, 5, NONE),
    (70, 129, 128, 128, CAUSAL),
]
QUICK_LENGTHS = [LENGTHS[0], LENGTHS[3], LENGTHS[7]]

# (H, H_kv, L, S, d, mask): 2 and 8 query heads per K/V head, and one K/V head for all (MQA)
GROUPS = [
    (4, 2, 33, 33, 64, CAUSAL),
    (8, 1, 17, 65, 16, MaskSpec("window", 9)),
    (16, 2, 1, 40, 64, CAUSAL),
    (4, 1, 65, 33, 64, NONE),
]
QUICK_GROUPS = [GROUPS[0], GROUPS[1]]


def length_cases(quick: bool) -> list[Case]:
    cases = [Case(L, d_k, d_v, mask, True, T_k=S) for L, S, d_k, d_v, mask in (QUICK_LENGTHS if quick else LENGTHS)]
    cases += [Case(L, d, d, mask, True, T_k=None if S == L else S, heads=H, kv_heads=H_kv)
              for H, H_kv, L, S, d, mask in (QUICK_GROUPS if quick else GROUPS)]
    # the other launch geometries (the staged kernel1s, softmax 1 and 2) on one case each way
    others = [plan for plan in ALL_PLANS if plan != DEFAULT_PLAN]
    shapes = [(17, 40, CAUSAL, 4, 2), (40, 17, MaskSpec("window", 7), 2, 1)]
    cases += [Case(L, 16, 24, mask, True, plan, T_k=S, heads=H, kv_heads=H_kv)
              for plan in (others[:1] if quick else others) for L, S, mask, H, H_kv in shapes]
    return cases
