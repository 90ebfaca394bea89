"""bench/yardstick.py: a bench row is held to a multiple of a plain implementation's own error at
its precision on the sampled rows (FlashAttention's rule). Right paths keep to it, wrong ones (a
mask left out, a 1% scale, bf16 taken for fp32) do not, and a wrong row is red, named on the
screen, unranked by parity, and bench exits 1."""

from __future__ import annotations

import numpy as np
import pytest
from rich.console import Console

from andrea_cli.bench import yardstick
from andrea_cli.bench.cpu import numpy_impl, perf_counter_timer
from andrea_cli.bench.sweep import CAUSAL, NO_MASK, Impl, Side, exact_rows, run_sweep, sample_tolerance

rng = np.random.default_rng(3)
Q, K, V = (rng.standard_normal((1, 200, 64), dtype=np.float32) for _ in range(3))


@pytest.mark.parametrize("mask", [NO_MASK, CAUSAL], ids=["none", "causal"])
def test_the_plain_paths_are_off_by_rounding_and_held_to_a_multiple_of_it(mask):
    rows, exact = exact_rows(Q, K, V, mask, "forward")
    fp32 = yardstick.plain_output_rows(Q[0], K[0], V[0], mask, rows, "fp32")
    bf16 = yardstick.plain_output_rows(Q[0], K[0], V[0], mask, rows, "bf16")
    e32, e16 = (float(np.abs(p - exact).max()) for p in (fp32, bf16))
    assert 0 < e32 < 1e-5 and 1e-4 < e16 < 3e-2, (e32, e16)  # float32's rounding; bf16's 8-bit mantissa
    tol32, tol16 = (sample_tolerance(Q, K, V, mask, "forward", p) for p in ("fp32", "bf16"))
    assert tol32 >= 2 * e32 and tol16 >= 3 * e16 and tol32 < 1e-5 < tol16
    # a bf16 path is no fp32 one: its error is far over the fp32 tolerance
    assert e16 > 10 * tol32


def test_the_backward_yardstick_is_dq_of_the_sampled_rows():
    rows, exact = exact_rows(Q, K, V, CAUSAL, "backward")
    from andrea_cli.bench.sweep import upstream_gradient

    plain = yardstick.plain_dq_rows(Q[0], K[0], V[0], upstream_gradient(Q)[0], CAUSAL, rows, "fp32")
    err = float(np.abs(plain - exact).max())
    assert 0 < err < 1e-5
    assert 1.01 * float(np.abs(exact).max()) - float(np.abs(exact).max()) > sample_tolerance(
        Q, K, V, CAUSAL, "backward", "fp32")  # a 1% error in dQ is caught


def _side() -> Side:
    return Side("cpu", "test", perf_counter_timer, lambda: 2**40)


def test_a_wrong_implementation_is_over_its_tolerance_and_a_right_one_within():
    numpy = numpy_impl()

    def no_mask(q, k, v, mask):  # forgets the causal mask
        return numpy.prepare(q, k, v, NO_MASK)

    def one_percent(q, k, v, mask):
        run = numpy.prepare(q, k, v, mask)
        return lambda: run() * np.float32(1.01)

    impls = [numpy, Impl("no_mask", no_mask), Impl("one_percent", one_percent)]
    result = run_sweep(_side(), impls, Ts=(96,), d_ks=(32,), masks=(CAUSAL,), warmup=0, repeats=1, baseline="numpy")
    by = {m.impl: m for m in result.measurements}
    assert by["numpy"].within_tolerance is True and by["numpy"].max_abs_err <= by["numpy"].tolerance
    for name in ("no_mask", "one_percent"):
        assert by[name].within_tolerance is False and by[name].max_abs_err > by[name].tolerance, name
    assert by["no_mask"].median_ms is not None  # timed all the same: the screen says what the time is of

    from andrea_cli.render.bench import render_bench, wrong_rows

    lines = wrong_rows(result)
    assert [line.split(" (")[0] for line in lines] == ["WRONG: no_mask", "WRONG: one_percent"]
    console = Console(width=80, record=True, highlight=False)
    render_bench(console, result)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "WRONG: no_mask (T=96 d_k=32 causal)" in text.replace("\n", " ")


def test_parity_neither_judges_nor_ranks_a_wrong_row():
    from dataclasses import asdict

    from andrea_cli.bench.parity import figure
    from andrea_cli.bench.sweep import Measurement

    m = Measurement("fused_bf16", 4096, 64, 12, False, 1.0, tflops=500.0, precision="bf16",
                    max_abs_err=0.3, tolerance=0.02, within_tolerance=False)
    f = figure({"measurements": [asdict(m)]}, "andrea", 64, False, 4096)
    assert f.tflops is None and "wrong output" in f.why and "3.0e-01" in f.why


def test_bench_exits_1_on_a_wrong_row_and_0_on_right_ones(cli, monkeypatch):
    import andrea_cli.bench.sweep as sweep

    args = ("bench", "--side", "cpu", "-T", "32", "--d-k", "16", "--mask", "causal", "--impl", "numpy",
            "--no-cpu-build", "--repeats", "1", "--warmup", "0")
    right = cli(*args)
    assert right.exit_code == 0, right.output
    assert "WRONG" not in right.output
    monkeypatch.setattr(sweep, "tolerance_on", lambda *a: 0.0)  # nothing keeps to no error at all
    wrong = cli(*args)
    assert wrong.exit_code == 1 and "WRONG: numpy (T=32 d_k=16 causal)" in " ".join(wrong.output.split())
    as_json = cli(*args, "--json")
    assert as_json.exit_code == 1 and '"within_tolerance": false' in as_json.stdout
