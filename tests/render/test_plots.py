"""`attend --plot` and `bench --plot`: a PNG is written, is an image of the expected size, and is
not blank; bad --plot paths are refused before any work."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from andrea_cli.cli import app

pytest.importorskip("matplotlib", reason="the plot extra is not installed: pip install '.[plot]'")

runner = CliRunner()
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_pixels(path):
    """(height, width, channels) floats in 0..1, read back with matplotlib."""
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_SIGNATURE
    return matplotlib.image.imread(path)


def assert_real_picture(path, min_width=800):
    pixels = png_pixels(path)
    assert pixels.shape[1] >= min_width
    rgb = pixels[..., :3].reshape(-1, 3)
    colours = np.unique((rgb * 255).round().astype(np.uint8), axis=0)
    assert len(colours) > 200, "a plot with data has many colours; this one is nearly blank"
    return pixels


def test_attend_plot_draws_weights_masked_cells_grey(tmp_path):
    png = tmp_path / "weights.png"
    result = runner.invoke(app, ["attend", "--T", "64", "--d-k", "16", "--backend", "numpy", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert f"plot saved to {png}" in result.output
    pixels = assert_real_picture(png)
    grey = np.all(np.abs(pixels[..., :3] - 211 / 255) < 2 / 255, axis=-1)  # matplotlib's "lightgrey"
    assert grey.mean() > 0.05, "the causal mask hides half the matrix: its cells are drawn light grey"


def test_attend_plot_with_json_still_prints_only_json(tmp_path):
    png = tmp_path / "w.png"
    result = runner.invoke(app, ["attend", "--T", "16", "--d-k", "4", "--backend", "numpy", "--json", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    assert png.is_file()


@pytest.mark.parametrize("args, message", [
    (["--fused", "--backend", "cpu"], "--plot draws the T×T weights, which --fused never builds"),
    (["--plot-path-is-folder"], "cannot write there"),
])
def test_attend_plot_refusals(tmp_path, args, message):
    if args == ["--plot-path-is-folder"]:
        folder = tmp_path / "x.png"
        folder.mkdir()
        args = ["--plot", str(folder)]
    else:
        args = args + ["--plot", str(tmp_path / "w.png")]
    result = runner.invoke(app, ["attend", "--T", "16", "--d-k", "4", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "w.png").exists()


def test_bench_plot_draws_every_panel(tmp_path):
    png = tmp_path / "bench.png"
    result = runner.invoke(app, ["bench", "--side", "cpu", "--T", "16", "--T", "32", "--d-k", "8",
                                 "--repeats", "1", "--warmup", "0", "--no-cpu-build", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert f"plot saved to {png}" in result.output
    pixels = assert_real_picture(png)
    assert pixels.shape[1] > pixels.shape[0], "two columns side by side: no mask and causal"


def test_bench_plot_draws_the_roofline_from_a_gpu_result(tmp_path):
    from andrea_cli.bench.roofline import DevicePeak, attention_bytes, attention_flops
    from andrea_cli.bench.sweep import BenchResult, Measurement
    from andrea_cli.render.bench_plot import save_bench_plot

    peak = DevicePeak("a GPU", 132, 128, 1.98, 66.9, 4800.0)
    result = BenchResult("gpu", "a GPU", peak, "cupy", 1, 5)
    for T in (256, 1024, 4096):
        flops, nbytes = attention_flops(12, T, 64, True), attention_bytes(12, T, 64)
        for impl, share in (("fused", 0.1), ("cupy", 0.05)):  # a drawing test: made-up speeds
            ms = flops / (share * peak.peak_tflops * 1e12) * 1e3
            result.measurements.append(Measurement(impl, T, 64, 12, True, ms, tflops=flops / ms / 1e9,
                                                   roofline_ms=peak.roofline_ms(flops, nbytes), bound="compute"))
    with_roof, without = tmp_path / "gpu.png", tmp_path / "no_peak.png"
    save_bench_plot(result, with_roof)
    result.peak = None
    save_bench_plot(result, without)

    def dark(path):
        pixels = assert_real_picture(path, min_width=500)
        return (pixels[..., :3].max(axis=-1) < 0.2).sum()

    assert dark(with_roof) > dark(without) + 500, "the roofline is a black dashed line in each panel"
