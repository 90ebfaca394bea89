"""Every table fits the screen without losing a verdict: drawn on consoles of a fixed width (80,
the terminal a learner opens, and 120), no line is wider than the console, no cell is cut to
"…", and a failing case still reads FAIL."""

from __future__ import annotations

import io

import pytest
from rich.cells import cell_len
from rich.console import Console

from andrea_cli.backends.launch.staged import DEFAULT_PLAN, KERNEL1_PLAN
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import FAMILIES, Case, CaseResult, StageCheck, VerifyReport

WIDTHS = (80, 120)


def draw(render, *args, width: int, **kwargs) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), highlight=False, color_system=None)
    render(console, *args, **kwargs)
    return console.export_text()


def assert_fits(text: str, width: int) -> None:
    for line in text.splitlines():
        assert cell_len(line) <= width, f"wider than {width}: {line!r}"
    assert "…" not in text, f"a cell was cut at {width} columns:\n{text}"


def assert_no_lone_centred_word(text: str) -> None:
    """A sentence under a table wraps at the console's width, not the table's: no line holds one
    word pushed to the middle (what Rich's centred caption did under a narrow table)."""
    for line in text.splitlines():
        words = line.split()
        assert not (len(words) == 1 and words[0].isalpha() and line.startswith("    ")), f"a lone word: {line!r}"


def verify_report(failing_stage: str = "softmax") -> VerifyReport:
    """Every stage of every family checked, one case failing at failing_stage, one that did not finish."""
    stages = [name for family in FAMILIES for name in family.stages]
    results = []
    for n, (case, schedule) in enumerate([(Case(33, 256, 16, MaskSpec("window", 33), False, KERNEL1_PLAN), "forward"),
                                          (Case(1024, 128, 128, MaskSpec("causal"), True), "reverse"),
                                          (Case(7, 3, 5, MaskSpec("none"), True, DEFAULT_PLAN), "gpu")]):
        r = CaseResult(case, schedule)
        for i, name in enumerate(stages):
            bad = n == 0 and name == failing_stage
            r.stages[name] = StageCheck(max_abs_err=(3e-3 if bad else 1e-7 * (i + 1)), max_rel_err=0.0, tol=1e-3,
                                        passed=not bad,
                                        first_bad={"index": [0, 1, 2], "got": 1.0, "expected": 0.5, "tol": 1e-3}
                                        if bad else None)
        r.invariants = {"rows sum to 1": n != 0, "masked weights are 0": True}
        results.append(r)
    results.append(CaseResult(Case(64, 80, 64, MaskSpec("causal"), True), "forward", error="deadlock in softmax_kernel2"))
    results.sort(key=lambda r: r.passed)
    return VerifyReport("cpu", "CPU (x86_64), kernel file compiled with the CUDA-on-CPU runtime", "/k/microgpt_cuda.cu",
                        results, 1.0)


@pytest.mark.parametrize("width", WIDTHS)
def test_verify_table_fits_and_keeps_every_verdict(width):
    from andrea_cli.render.verify import render_verify

    text = draw(render_verify, verify_report(), width=width)
    assert_fits(text, width)
    verdicts = [(line.strip("│ ").split() or [""])[0] for line in text.splitlines()]
    verdicts = [word for word in verdicts if word in ("ok", "FAIL")]
    assert verdicts == ["FAIL", "FAIL", "ok", "ok"], text
    assert "softmax" in text and "3.00" in text  # the failing stage's share of its tolerance, named
    assert "FAILED (2 failing)" in text


def test_verify_wide_console_shows_every_stage():
    from andrea_cli.render.verify import render_verify
    from andrea_cli.verification import STAGE_ORDER

    text = draw(render_verify, verify_report(), width=240)
    assert_fits(text, 240)
    lines = text.splitlines()
    top = next(n for n, line in enumerate(lines) if line.startswith("┏"))
    header = " ".join(lines[top + 1:next(n for n, line in enumerate(lines) if line.startswith("┡"))])  # may wrap
    assert "invariants" in header
    assert all(word in header for name in STAGE_ORDER for word in name.replace("_", " ").split())


def test_verify_layouts_narrow_with_the_console():
    from andrea_cli.render.verify import compact_table, family_table, full_table, verify_table

    report = verify_report()
    chosen = {width: verify_table(Console(width=width, file=io.StringIO()), report).title
              for width in (80, 120, 140, 240)}
    # a column per family needs about 130 columns since the decode family joined: at 120 the
    # compact table, which keeps every verdict
    assert chosen == {80: compact_table(report).title, 120: compact_table(report).title,
                      140: family_table(report).title, 240: full_table(report).title}


@pytest.fixture(scope="module")
def scaling_report():
    from andrea_cli.commands.compare_scaling import ScalingOptions, run_compare_scaling

    return run_compare_scaling(ScalingOptions(d_k="64,256,4096", T=48, backend="numpy"))


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_scaling_tables_fit(scaling_report, width):
    from andrea_cli.render.scaling import render_scaling

    text = draw(render_scaling, scaling_report, width=width)
    assert_fits(text, width)
    assert "The backward pass" in text and "quiet" in text
    # every figure of the backward table is printed whole: the unscaled ‖dQ‖ at d_k 4096
    from andrea_cli.render.common import fmt

    assert fmt(scaling_report.rows[-1].gradients["unscaled"].dq_norm) in text
    assert_no_lone_centred_word(text)


def test_compare_scaling_summary_rounds_as_its_tables(scaling_report):
    """Each share of rows the conclusion quotes is one the tables print, to the same decimal: a
    table's 0.1% is never summed up as 0%."""
    import re

    from andrea_cli.render.scaling import render_scaling

    text = draw(render_scaling, scaling_report, width=200)
    tables, conclusion = text.split(scaling_report.conclusion[:30])[0], scaling_report.conclusion
    shares = re.findall(r"\d+(?:\.\d+)?%", conclusion)
    assert len(shares) == 4, conclusion  # rows over 0.99 and quiet rows, unscaled and scaled
    for share in shares:
        assert re.fullmatch(r"\d+\.\d%", share) and f" {share} " in tables, (share, conclusion)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_cpu_builds_timing_note_wraps_at_the_console(width):
    from andrea_cli.backends.numpy_backend import NumpyBackend
    from andrea_cli.inputs import random_qkv
    from andrea_cli.render.head import render_head
    from andrea_cli.runs.head import run_attention

    report = run_attention(random_qkv(8, 4, 4, seed=0), NumpyBackend(), MaskSpec("causal"), True)
    report.backend = "cpu"  # the note belongs to the CPU build's timings
    text = draw(render_head, report, width=width)
    assert_fits(text, width)
    assert_no_lone_centred_word(text)
    assert "these times say nothing about a GPU" in " ".join(text.split())


@pytest.mark.parametrize("width", WIDTHS)
def test_info_prints_the_kernel_path_whole(width):
    from andrea_cli.commands.info import describe_environment
    from andrea_cli.render.info import render_info

    doc = describe_environment()
    long_path = "/home/a-learner/.local/share/virtualenvs/andrea-course/lib/python3.11/site-packages/" \
                "andrea_cli/cuda/microgpt_cuda.cu"
    doc["kernel_file"] = long_path
    console = Console(width=width, record=True, file=io.StringIO(), highlight=False, color_system=None)
    render_info(console, doc)
    text = console.export_text(styles=False)
    assert long_path in text.replace("\n", "") and "kernel file:\n  /home/a-learner/" in text
    table_part = text.split("kernel file:")[0]
    assert_fits(table_part, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_info_never_splits_a_path_that_fits_a_line(width):
    """A path too long to go beside its label goes on a line of its own: the terminal would
    otherwise split it mid-name at the console's edge."""
    from andrea_cli.commands.info import describe_environment
    from andrea_cli.render.info import render_info

    doc = describe_environment()
    path = "/home/learner/" + "a" * (width - 40) + "/andrea_cli/cuda/microgpt_cuda.cu"  # width - 7 long
    doc["kernel_file"] = path
    text = draw(render_info, doc, width=width)
    lines = text.splitlines()
    assert "kernel file:" in lines and f"  {path}" in lines, text
    short = "/k/microgpt_cuda.cu"
    doc["kernel_file"] = short
    assert f"kernel file: {short}" in draw(render_info, doc, width=width).splitlines()


def bench_result(with_peer: bool = True):
    from andrea_cli.bench.sweep import BenchResult, Measurement

    result = BenchResult("cpu", "CPU x86_64 (2 logical cores), NumPy 2.4", None, "numpy", 1, 5,
                         notes=["BLAS/OpenMP threads pinned to 1 per measurement"], threads={"limit": 1, "libraries": {}})
    # every implementation of the CPU side, torch faster than the baseline (ratios below 1)
    names = ["numpy", "numpy_backward", "torch_sdpa", "torch_sdpa_backward", "cpu_build_fused",
             "cpu_build_fused_bf16", "cpu_build_fused_backward", "cpu_build_fused_bf16_backward"]
    for causal in (False, True):
        for T in (128, 1024):
            for n, name in enumerate(names):
                build = name.startswith("cpu_build")
                ms = 0.0853 * (n + 1) * T / 128 * (300 if build else 0.1 if name.startswith("torch") else 1)
                low = 0.0296 if T == 128 and name == "numpy" else ms * 0.9  # the widest min–max: 0.0296–1.07
                result.measurements.append(Measurement(
                    name, T, 64, 1, causal, ms, min_ms=low, max_ms=ms * 12.5, repeats=1 if build else 5,
                    tflops=1e-3 * T, gbs=12.5, ratio=ms / 0.0853, max_abs_err=2.5e-7, speed_path=not build,
                    vs_peer=1.25 if with_peer and name == "torch_sdpa" else None))
    return result


@pytest.mark.parametrize("width", WIDTHS)
def test_bench_table_fits_and_tells_the_implementations_apart(width):
    from andrea_cli.render.bench import render_bench

    result = bench_result()
    text = draw(render_bench, result, width=width)
    assert_fits(text, width)
    for name in ("cpu_build_fused*", "cpu_build_fused_bf16*", "cpu_build_fused_backward*", "numpy_backward"):
        assert f" {name} " in text
    assert "1.23–17.1" in text  # numpy_backward at T = 1024: min–max of its repeats
    if width == 80:
        assert "TFLOP/s, GB/s, vs peer: in a wider terminal, or with --json" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_bench_table_keeps_every_number_and_header(width):
    """Each row's figures whole, beside its implementation's name, and every header of the layout
    drawn: at 80 columns a squeezed column once printed `0.0…`, `24…` and `nu…`."""
    from andrea_cli.render.bench import _ms, _spread, render_bench

    result = bench_result()
    text = draw(render_bench, result, width=width)
    assert_fits(text, width)
    header = next(line for line in text.splitlines() if " impl " in line)
    assert all(name in header.split("  ") or name in header for name in ("impl", "T", "ms", "min–max", "× numpy", "max err"))
    lines = text.splitlines()
    for m in result.measurements:
        shown = [f"{m.impl}{'' if m.speed_path else '*'}", str(m.T), _ms(m.median_ms), _spread(m), _ms(m.ratio),
                 f"{m.max_abs_err:.1e}"]
        assert any(line.split()[:2] == shown[:2] and all(f" {cell} " in f"{line} " for cell in shown) for line in lines), \
            (shown, text)
    assert " 0.3 " in text  # torch_sdpa against numpy at T 128: a ratio below 1, whole


def test_bench_table_shows_every_column_when_wide():
    from andrea_cli.render.bench import render_bench

    text = draw(render_bench, bench_result(), width=200)
    assert_fits(text, 200)
    header = next(line for line in text.splitlines() if "impl" in line)
    assert all(name in header for name in ("d_k", "mask", "min–max", "TFLOP/s", "GB/s", "× numpy", "max err", "vs peer"))


@pytest.mark.parametrize("width", (80, 120, 200))
def test_a_gpu_bench_table_with_bounds_fits_and_shows_the_ratio_where_it_can(width):
    """On a modelled GPU the kernel rows carry measured / static bound: the one wide table shows it
    as "÷ bound"; the per-panel layouts drop it first and name it among what a wider terminal shows."""
    from andrea_cli.bench.roofline import DevicePeak
    from andrea_cli.render.bench import render_bench

    result = bench_result()
    result.side, result.device, result.baseline = "gpu", "NVIDIA H200 (sm_90, 132 SMs)", "fused"
    result.peak = DevicePeak("NVIDIA H200", 132, 128, 1.98, 66.9, 4800.0, 989.0)
    for n, m in enumerate(result.measurements):
        m.impl = m.impl.replace("cpu_build_", "").replace("numpy", "fused")
        m.speed_path, m.pct_peak, m.roofline_ms, m.bound = True, 12.5, 0.123, "compute"
        if m.impl != "torch_sdpa":
            m.bound_tflops, m.measured_over_bound = 44.6, 0.25 + n / 100
    text = draw(render_bench, result, width=width)
    assert_fits(text, width)
    header = next(line for line in text.splitlines() if "impl" in line)
    if width == 80:  # the 80-column per-panel tables: the ratio goes first, and the note says where it is
        assert "÷ bound" not in header and "÷ bound: in a wider terminal, or with --json" in " ".join(text.split())
    elif width == 120:  # per-panel tables, one space between columns, keep it
        assert "÷ bound" in header
    else:
        assert "÷ bound" in header and " 0.28 " in text  # the fourth row's ratio (the third is torch: none)


def test_progress_is_one_transient_line_on_a_terminal_and_plain_lines_elsewhere():
    from andrea_cli.render.progress import progress_lines

    echoed = []
    terminal = Console(file=io.StringIO(), force_terminal=True, width=80)
    with progress_lines(terminal, echoed.append) as progress:
        for n in range(1, 4):
            progress(f"[{n}/3] ok   T=7 d_k=3 d_v=5 causal scaled")
    assert echoed == []  # nothing left on screen line by line: Rich redraws one line
    drawn = terminal.file.getvalue()
    assert "\x1b[2K" in drawn  # and erases it at the end (transient), leaving only what follows
    piped = Console(file=io.StringIO(), force_terminal=False, width=80)
    with progress_lines(piped, echoed.append) as progress:
        progress("[1/1] ok   T=7")
    assert echoed == ["[1/1] ok   T=7"] and piped.file.getvalue() == ""


def test_verify_progress_lines_count_the_cases(run_main):
    code, out, err = run_main("verify", "--backend", "cpu", "--T", "5", "--d-k", "3")
    assert code == 0
    lines = err.strip().splitlines()
    assert lines[0].startswith("[1/2] ok ") and lines[1].startswith("[2/2] ok ")  # forward and reverse schedules
    assert "PASSED: 2 cases" in out


@pytest.mark.parametrize("width", WIDTHS)
def test_stages_are_named_as_the_course_names_them(width):
    """Every table says "weighted sum" for the last stage, beside its key "av" (the kernel's stem
    and the JSON's key); a masked score reads -inf, its weight 0."""
    from andrea_cli.backends.numpy_backend import NumpyBackend
    from andrea_cli.inputs import random_qkv
    from andrea_cli.render.head import render_head
    from andrea_cli.render.verify import render_verify
    from andrea_cli.runs.head import run_attention

    report = run_attention(random_qkv(8, 4, 4, seed=0), NumpyBackend(), MaskSpec("causal"), True)
    text = draw(render_head, report, width=width)
    assert_fits(text, width)
    assert "│ weighted sum (av) " in text and "│ av " not in text
    lines = text.splitlines()
    scores_at = next(n for n, line in enumerate(lines) if line.startswith("Scores after the mask"))
    weights_at = next(n for n, line in enumerate(lines) if line.startswith("Weights, first"))
    row_1 = [line for line in lines[scores_at:weights_at] if line.startswith("│ 1 ")][0].strip("│ ").split("│")
    assert [cell.strip() for cell in row_1[3:]] == ["-inf"] * 6  # query 1 sees keys 0 and 1 only
    weights_row_1 = [line for line in lines[weights_at:] if line.startswith("│ 1 ")][0].strip("│ ").split("│")
    assert [cell.strip() for cell in weights_row_1[3:]] == ["0"] * 6
    verify_text = draw(render_verify, verify_report(failing_stage="av"), width=width)
    assert_fits(verify_text, width)
    if width == 80:  # the worst stage by name (its cell may wrap, its words whole); 120 shows families
        assert "weighted" in verify_text and "sum (av)" in verify_text and "3.00" in verify_text
    assert "FAILED (2 failing)" in verify_text
    wide = draw(render_verify, verify_report(failing_stage="av"), width=240)  # a column per stage
    header = [line for line in wide.splitlines() if line.startswith("┃")]
    assert any("weighted" in line for line in header) and any("(av)" in line for line in header)



def test_verify_compact_rows_stay_on_one_line():
    """At 80 columns every passing case of the real sweeps is one line: its worst stage, even
    the longest-named ("weighted sum (av)"), and its share are not wrapped under it."""
    from andrea_cli.render.verify import compact_table
    from andrea_cli.verification.run import sweep

    results = []
    for quick in (True, False):
        for case in sweep(quick):
            r = CaseResult(case, "reverse")
            r.stages = {"av": StageCheck(max_abs_err=9e-5, max_rel_err=0.0, tol=1e-3, passed=True, first_bad=None)}
            r.invariants = {"rows sum to 1": True}
            results.append(r)
    report = VerifyReport("cpu", "CPU", "/k/microgpt_cuda.cu", results, 1.0)
    text = draw(lambda console, table: console.print(table), compact_table(report), width=80)
    assert_fits(text, 80)
    rows = [line for line in text.splitlines() if line.strip().startswith("ok")]
    assert len(rows) == len(results) and all(line.rstrip().endswith("(av) 0.09") for line in rows), \
        [line for line in rows if not line.rstrip().endswith("(av) 0.09")][:3]


def test_verify_compact_names_a_broken_invariant():
    from andrea_cli.render.verify import compact_table

    text = draw(lambda console, table: console.print(table), compact_table(verify_report()), width=80)
    assert_fits(text, 80)
    assert "softmax 3.00 · rows sum" in text  # the failing row may wrap; its stage and invariant are named
