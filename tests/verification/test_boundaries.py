"""verify's sweep against the kernels' tile rules: every edge a tile-skipping rule has (a partial
tile, a window starting on a tile's first or last key, the clamp at key 0...) is reached by some
case, for the family whose kernels hold the rule (verification/boundaries.py lists them)."""

import pytest

from andrea_cli.backends.launch.fused import FUSED_KEYS
from andrea_cli.verification.boundaries import BLOCK_ROWS, edges_reached, window_cases, window_lengths
from andrea_cli.verification.run import families_for, sweep


class EveryKernel:
    """A backend with every family's kernels, to ask which families run on a case."""

    attention_fused = attention_backward = object()


def families(case):
    return {family.name for family in families_for(EveryKernel(), case)}


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_sweep_reaches_every_tile_edge(quick):
    edges = edges_reached(sweep(quick), families)
    if quick:  # the quick sweep: the window start's tile boundary from both sides
        edges = {k: v for k, v in edges.items() if k.endswith(("% 32 == 0", "% 32 == 31"))}
    missed = [edge for edge, reached in edges.items() if not reached]
    assert not missed, f"no case of the {'quick' if quick else 'full'} sweep reaches: {missed}"


def test_windows_cover_every_residue_of_a_block_start():
    assert {W % BLOCK_ROWS for W in window_lengths()} == set(range(BLOCK_ROWS))
    assert {FUSED_KEYS - 1, FUSED_KEYS, FUSED_KEYS + 1} <= set(window_lengths())
    assert all(c.d_k % 4 == 0 and c.d_v % 4 == 0 and c.T > c.mask.window + FUSED_KEYS for c in window_cases(False))


def test_the_edges_can_be_missed():
    """The check has teeth: without the window cases, the window-start edges go unreached."""
    no_windows = [c for c in sweep() if c.mask.kind != "window"]
    edges = edges_reached(no_windows, families)
    assert not edges[f"window: first key of a block's window % {FUSED_KEYS} == 31"]
    assert not edges_reached([c for c in sweep() if c.T < 1000], families)["scale: a second grid-stride trip"]
