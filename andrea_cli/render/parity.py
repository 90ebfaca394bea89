"""bench/parity.py's report as plain lines for an 80-column log (scripts/gpu_check.py prints
them): one row of TFLOP/s per (d_k, mask), the published FA2 figure and SDPA's choice, the
kernels and backends fastest first, each ratio with its target and verdict, then why a figure is
missing and where the published figures come from."""

from __future__ import annotations

import textwrap

from andrea_cli.bench.parity import RANKED, ROLES

WIDTH = 80
COLUMNS = tuple((role, role.removeprefix("sdpa_")) for role in ROLES)  # (role, its 7-wide header)


def _tflops(x: float | None) -> str:
    """One decimal where a GPU's figures are (tens to hundreds), two digits below 10 (the CPU)."""
    return "-" if x is None else f"{x:.1f}" if x >= 10 else f"{x:.2g}"


def _cell(f: dict) -> str:
    """A CPU-build figure (starred) with one digit, so that it keeps to its 7 columns."""
    if f["tflops"] is not None and not f["speed_path"]:
        return f"{f['tflops']:.0e}*" if f["tflops"] < 10 else f"{f['tflops']:.0f}*"
    return _tflops(f["tflops"])


def _mask(point: dict) -> str:
    return "causal" if point["causal"] else "none"


def _wrapped(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ")


def _torch_line(torch: dict | None) -> str:
    if torch is None:
        return "torch: no SDPA row asked for"
    if "reason" in torch:
        return f"torch: {torch['reason']}"
    return f"torch {torch['torch']}, CUDA {torch['cuda'] or 'none'}, cuDNN {torch['cudnn'] or 'none'}"


def _ratio_line(r: dict) -> str:
    value = "-" if r["value"] is None else f"{r['value']:.2f}"
    target = "(beside)" if r["target"] is None else f"target >= {r['target']:.1f}"
    return f"  {r['label']:<24} {value:>5}  {target:<14} {r['verdict']}"


def parity_lines(report: dict) -> list[str]:
    lines = [f"parity at T={report['T']}, H={report['H']}: bf16 forward TFLOP/s (4·T²·d·H, causal halved)",
             *_wrapped(f"measured on {report['device'] or 'an unnamed device'}", ""),
             *_wrapped(f"andrea: its default bf16 kernel, {report.get('andrea') or 'the launcher default'}", ""),
             _torch_line(report["torch"]),
             f"d_k mask   {' '.join(f'{name:>7}' for _, name in COLUMNS)}"]
    for p in report["points"]:
        cells = [_cell(p["measured"][role]) for role, _ in COLUMNS]
        lines.append(f"{p['d_k']:>3} {_mask(p):<6} {' '.join(f'{c:>7}' for c in cells)}")
        lines.append(f"  FA2 published {_tflops(p['published']['FlashAttention-2'])}; "
                     f"SDPA's default chose {p['sdpa_default_chose'] or '-'}")
        lines += _ranking_lines(p)
        lines += [_ratio_line(r) for r in p["ratios"]]
    if any(not f["speed_path"] for p in report["points"] for f in p["measured"].values() if f["tflops"]):
        lines.append("* the CPU build of the kernel file: a correctness tool, not a speed figure")
    lines.append(f"parity verdict: {report['verdict']}")
    lines += _why_missing(report["points"])
    return lines + _published(report["published"])


def _ranking_lines(point: dict) -> list[str]:
    """The ranking, and which figures it leaves out for being the CPU build's."""
    cpu_build = [role for role in RANKED if point["measured"][role]["tflops"] is not None
                 and not point["measured"][role]["speed_path"]]
    names = ", ".join(f"{r['role'].removeprefix('sdpa_')} {_tflops(r['tflops'])}" for r in point["ranking"])
    left_out = f" ({', '.join(cpu_build)}: CPU-build figures, not ranked)" if cpu_build else ""
    return _wrapped(f"fastest first: {names or 'nothing timed on a speed path'}{left_out}", "  ")


def _why_missing(points: list[dict]) -> list[str]:
    """Each missing figure's reason once, with the points it holds at; a ratio's reason only where
    it is not a missing figure's (a ratio with no kernel figure says nothing new)."""
    missing: dict[tuple[str, str], list[str]] = {}
    figure_whys = {f["why"] for p in points for f in p["measured"].values() if f["why"]}
    for p in points:
        where = f"d {p['d_k']} {_mask(p)}"
        for role, f in p["measured"].items():
            if f["why"]:
                missing.setdefault((role, f["why"]), []).append(where)
        for r in p["ratios"]:
            if r["why"] and r["why"] not in figure_whys:
                points_of = missing.setdefault(("ratios not judged", r["why"]), [])
                points_of += [] if where in points_of else [where]
    lines = []
    for (what, why), where in missing.items():
        at = "every point" if len(where) == len(points) else ", ".join(where)
        lines += _wrapped(f"{what} ({at}): {why}", "")
    return lines


def _published(anchors: dict) -> list[str]:
    by_impl: dict[str, list[str]] = {}
    for a in anchors["figures"]:
        by_impl.setdefault(a["impl"], []).append(f"d {a['d_k']}{' causal' if a['causal'] else ''} {a['tflops']:.0f}")
    figures = "; ".join(f"{impl} {', '.join(items)}" for impl, items in by_impl.items())
    # the label on a line of its own: no wrap may split "not measured here"
    return [f"{anchors['label']} (the FA2 pub column, and these):"] + _wrapped(
        f"TFLOP/s at T {anchors['T']}: {figures}. Source: {anchors['source']}", "  ")
