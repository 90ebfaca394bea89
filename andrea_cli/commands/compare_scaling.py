"""`andrea compare-scaling`: options checked -> the backend chosen -> the ScalingReport. Like
every command: run_compare_scaling(options) -> the report.

check_scaling_options is public so the CLI can refuse a bad option before it checks the --plot
file (a render concern): every bad option is refused before any work, in the same order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from andrea_cli.commands.backend import choose_backend
from andrea_cli.commands.options import ScalingOptions
from andrea_cli.inputs import check_seed, check_sizes
from andrea_cli.masks import MaskSpec, parse_mask
from andrea_cli.runs.scaling import ScalingReport, check_distribution, compare_scaling, parse_d_k_list


@dataclass
class ScalingRequest:
    """The options, checked: what compare_scaling runs."""

    widths: list[int]
    T: int
    mask: MaskSpec
    dist: str
    seed: int
    backend: str
    kernel: Path | None


def check_scaling_options(o: ScalingOptions) -> ScalingRequest:
    widths = parse_d_k_list(o.d_k)
    check_sizes(o.T, 1, 1)
    check_seed(o.seed)
    mask = parse_mask(o.mask)
    check_distribution(o.dist)
    return ScalingRequest(widths, o.T, mask, o.dist, o.seed, o.backend, o.kernel)


def run_compare_scaling(o: ScalingOptions) -> ScalingReport:
    r = check_scaling_options(o)
    backend, notices = choose_backend(r.backend, r.kernel)
    return compare_scaling(backend, r.widths, r.T, r.mask, r.dist, r.seed, notices=notices)
