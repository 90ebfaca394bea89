"""What the pictures draw, read back from the figures: the layer's every head in a grid (or the
one --head names), a narrow window's band straightened at full size, and compare-scaling's
gradient panel with ‖dQ_i‖ per row, each against numbers computed apart."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from andrea_cli.render import attend_plot, plot_common, scaling_plot  # noqa: E402


@pytest.fixture
def figures(monkeypatch):
    """The figures the plots save, kept instead of written."""
    kept = []

    def keep(fig, path):
        kept.append(fig)

    for module in (plot_common, attend_plot, scaling_plot):
        monkeypatch.setattr(module, "save_figure", keep)
    return kept


def images(fig):
    return [ax for ax in fig.axes if ax.images]


def test_the_layer_draws_every_head_in_a_grid_and_head_n_alone(figures, tmp_path):
    import andrea_cli

    r = andrea_cli.attend(d_model=32, n_head=4, T=20, backend="numpy")
    attend_plot.save_attend_report_plot(r.raw, tmp_path / "grid.png")
    panels = images(figures[-1])
    assert len(panels) == 4
    for h, ax in enumerate(panels):
        drawn = ax.images[0].get_array()
        visible = ~np.ma.getmaskarray(drawn)
        np.testing.assert_allclose(np.asarray(drawn)[visible], np.maximum(r.weights[h], drawn.min())[visible])
        assert ax.get_title().startswith(f"head {h}")
    attend_plot.save_attend_report_plot(r.raw, tmp_path / "h2.png", head=2)
    heat = images(figures[-1])[0]
    np.testing.assert_allclose(np.ma.filled(heat.images[0].get_array(), 0)[np.tril_indices(20)],
                               np.maximum(r.weights[2], 1e-8)[np.tril_indices(20)], rtol=1e-6)
    assert "head 2 of 4" in figures[-1]._suptitle.get_text()


def test_head_is_checked_against_the_layer(run_main, tmp_path):
    code, _, err = run_main("attend", "--d-model", "32", "--n-head", "4", "--T", "8", "--backend", "numpy",
                            "--head", "4", "--plot", str(tmp_path / "x.png"))
    assert code == 2 and err.strip() == "error: --head 4: the layer has 4 heads, numbered 0 to 3"
    code, _, err = run_main("attend", "--T", "8", "--head", "0", "--plot", str(tmp_path / "x.png"))
    assert code == 2 and "--head 0 picks one of the layer's heads" in err


def test_window_band_straightens_the_diagonal():
    rng = np.random.default_rng(0)
    w = rng.random((9, 9))
    band = attend_plot.window_band(w, 3)
    for i in range(9):
        for o in range(3):
            assert (np.isnan(band[i, o]) if i - o < 0 else band[i, o] == w[i, i - o])


def test_a_narrow_window_gets_the_band_panel(figures, tmp_path):
    import andrea_cli

    r = andrea_cli.attend(T=200, d_k=8, mask="window:8", backend="numpy")
    attend_plot.save_attend_report_plot(r.raw, tmp_path / "w.png")
    heat, band = images(figures[-1])
    drawn = band.images[0].get_array()
    assert drawn.shape == (200, 8)
    want = attend_plot.window_band(r.weights.astype(np.float64), 8)
    ok = ~np.isnan(want)
    np.testing.assert_allclose(np.asarray(drawn)[ok], np.maximum(want[ok], drawn.min()), rtol=1e-6)
    r = andrea_cli.attend(T=40, d_k=8, mask="window:30", backend="numpy")  # wide against T: no band
    attend_plot.save_attend_report_plot(r.raw, tmp_path / "w.png")
    assert len(images(figures[-1])) == 1


def test_compare_scaling_draws_the_gradient_each_row_receives(figures, tmp_path):
    from andrea_cli import reference_backward
    from andrea_cli.commands.compare_scaling import ScalingOptions, run_compare_scaling
    from andrea_cli.inputs import random_qkv
    from andrea_cli.masks import parse_mask
    from andrea_cli.runs.gradient_flow import d_out_for
    from andrea_cli.runs.scaling import D_V

    report = run_compare_scaling(ScalingOptions(d_k="16,256", T=40, backend="numpy", seed=3))
    scaling_plot.save_scaling_plot(report, tmp_path / "s.png")
    fig = figures[-1]
    panels = [ax for ax in fig.axes if ax.get_title().startswith("gradient per query row")]
    assert len(panels) == 2
    for ax, row in zip(panels, report.rows):
        qkv = random_qkv(40, row.d_k, D_V, 3)
        for line, scaled in zip(ax.get_lines(), (False, True)):
            exact = reference_backward.backward(qkv.q[None], qkv.k[None], qkv.v[None], d_out_for(40, D_V, 3),
                                                parse_mask("causal"), scaled)
            per_row = np.sqrt((exact.dq[0] ** 2).sum(axis=-1))
            np.testing.assert_allclose(line.get_ydata(), np.maximum(per_row, 1e-12), rtol=1e-4, atol=1e-6)
        u, s = row.gradients["unscaled"].quiet_rows, row.gradients["scaled"].quiet_rows
        assert f"quiet rows: {u:.1%} unscaled, {s:.1%} scaled" in ax.get_title()
