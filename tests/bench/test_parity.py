"""Issue 22's GPU targets as scripts/gpu_check.py judges them (bench/parity.py), without a GPU:
the ratios and verdicts on bench documents whose figures are worked by hand, the published
anchors, the rows when torch is absent or a pinned backend refuses, and bench's new rows."""

from __future__ import annotations

import sys
from dataclasses import asdict

import pytest

from andrea_cli.bench import anchors
from andrea_cli.bench.parity import (PARITY_T, TARGET_VS_FA2_PUBLISHED, TARGET_VS_SDPA_FLASH, parity_impls,
                                     parity_report, verdict)
from andrea_cli.bench.roofline import attention_flops
from andrea_cli.bench.sweep import Impl, Measurement, select_impls, swept_mask
from andrea_cli.errors import AndreaError
from andrea_cli.render.parity import parity_lines

H = 12


def row(impl: str, d_k: int, causal: bool, ms: float | None, T: int = PARITY_T, skipped: str = "",
        speed_path: bool = True, chose: str | None = None) -> dict:
    """One bench measurement as `bench --json` writes it, its TFLOP/s by bench's FLOP count."""
    tflops = None if ms is None else attention_flops(H, T, d_k, causal) / (ms / 1e3) / 1e12
    return asdict(Measurement(impl, T, d_k, H, causal, ms, tflops=tflops, skipped=skipped, speed_path=speed_path,
                              precision="bf16", chose=chose))


def ms_for(tflops: float, d_k: int, causal: bool, T: int = PARITY_T) -> float:
    """The median that gives this TFLOP/s at the point: hand-picked figures in, times out."""
    return attention_flops(H, T, d_k, causal) / (tflops * 1e12) * 1e3


def gpu_doc(ours: dict, flash: dict, cudnn: dict | None = None) -> dict:
    """A GPU bench document: per (d_k, causal), the default kernel's (fused_bf16) and the flash backend's TFLOP/s."""
    measurements = []
    for (d_k, causal), tflops in ours.items():
        measurements.append(row("fused_bf16", d_k, causal, ms_for(tflops, d_k, causal)))
        measurements.append(row("torch_sdpa_bf16_flash", d_k, causal, ms_for(flash[d_k, causal], d_k, causal)))
        if cudnn and (d_k, causal) in cudnn:
            measurements.append(row("torch_sdpa_bf16_cudnn", d_k, causal, ms_for(cudnn[d_k, causal], d_k, causal)))
        measurements.append(row("torch_sdpa_bf16", d_k, causal, ms_for(100.0, d_k, causal), chose="flash"))
    return {"side": "gpu", "device": "NVIDIA H200", "torch": {"torch": "2.9.0", "cuda": "12.8", "cudnn": 91002},
            "measurements": measurements}


POINTS = [(64, False), (64, True), (128, False), (128, True)]


def ratios(report: dict) -> dict:
    return {(p["d_k"], p["causal"], r["label"]): r for p in report["points"] for r in p["ratios"]}


# ------------------------------------------------------------------------------------------------
# The published anchors.

def test_the_anchors_are_the_issues_figures_labelled_published_with_their_source():
    fa2, fa3 = "FlashAttention-2", "FlashAttention-3"
    assert anchors.published(fa2, 64, False) == 324 and anchors.published(fa2, 128, False) == 370
    assert anchors.published(fa2, 64, True) == 299 and anchors.published(fa2, 128, True) == 335
    assert anchors.published("cuDNN", 128, False) == 595
    assert anchors.published(fa3, 64, False) == 497 and anchors.published(fa3, 128, False) == 648
    # the issue quotes no cuDNN figure at d 64 and none with the mask for cuDNN or FlashAttention-3
    assert anchors.published("cuDNN", 64, False) is None and anchors.published(fa3, 128, True) is None
    table = anchors.anchors_json()
    assert table["label"] == "published, H100 SXM, not measured here" and table["T"] == 16384
    assert "Shah et al. 2024" in table["source"] and "H100" in table["source"] and len(table["figures"]) == 7


# ------------------------------------------------------------------------------------------------
# Ratios and verdicts, against figures worked by hand.

def test_ratios_against_fa2_published_and_the_flash_backend_measured_in_the_same_run():
    kernel5 = {(64, False): 300.0, (64, True): 270.0, (128, False): 370.0, (128, True): 400.0}
    flash = {(64, False): 280.0, (64, True): 300.0, (128, False): 370.0, (128, True): 320.0}
    report = parity_report(gpu_doc(kernel5, flash, cudnn={(128, False): 592.0}))
    assert report["T"] == 16384 and report["H"] == 12
    got = ratios(report)
    # andrea / FA2 published: 300/324, 270/299, 370/370, 400/335
    for (d_k, causal), hand, verdict_ in [((64, False), 0.92593, "pass"), ((64, True), 0.90301, "pass"),
                                         ((128, False), 1.0, "pass"), ((128, True), 1.19403, "pass")]:
        r = got[d_k, causal, "andrea / FA2 published"]
        assert r["value"] == pytest.approx(hand, abs=1e-5) and r["target"] == TARGET_VS_FA2_PUBLISHED
        assert r["verdict"] == verdict_
    # andrea / SDPA flash: 300/280 pass, 270/300 = 0.9 short, 370/370 = 1.0 pass (the target is >=), 400/320
    for (d_k, causal), hand, verdict_ in [((64, False), 1.07143, "pass"), ((64, True), 0.9, "short"),
                                         ((128, False), 1.0, "pass"), ((128, True), 1.25, "pass")]:
        r = got[d_k, causal, "andrea / SDPA flash"]
        assert r["value"] == pytest.approx(hand, abs=1e-5) and r["target"] == TARGET_VS_SDPA_FLASH
        assert r["verdict"] == verdict_
    # cuDNN beside, not judged by a target: 370/592 = 0.625; where it has no row it says so
    assert got[128, False, "andrea / SDPA cuDNN"]["value"] == pytest.approx(0.625)
    assert got[128, False, "andrea / SDPA cuDNN"]["verdict"] == "beside"
    assert got[64, False, "andrea / SDPA cuDNN"]["verdict"] == "not judged"
    assert "torch_sdpa_bf16_cudnn" in got[64, False, "andrea / SDPA cuDNN"]["why"]
    assert report["verdict"] == "short"  # one target short at one point is short
    point = report["points"][0]
    assert point["sdpa_default_chose"] == "flash" and point["published"]["FlashAttention-2"] == 324
    assert point["published"]["FlashAttention-3"] == 497 and point["published"]["cuDNN"] is None


def test_the_ratio_is_the_peers_time_over_the_kernels_at_equal_work():
    """TFLOP/s over TFLOP/s at one point is a ratio of times: both by FlashAttention's count."""
    doc = {"side": "gpu", "torch": {}, "measurements": [row("fused_bf16", 128, True, 4.0),
                                                         row("torch_sdpa_bf16_flash", 128, True, 5.0)]}
    r = ratios(parity_report(doc))[128, True, "andrea / SDPA flash"]
    assert r["value"] == pytest.approx(5.0 / 4.0) and r["verdict"] == "pass"


def test_every_target_met_everywhere_is_a_pass_and_nothing_judged_is_not_judged():
    kernel5 = dict.fromkeys(POINTS, 400.0)
    assert parity_report(gpu_doc(kernel5, dict.fromkeys(POINTS, 399.0)))["verdict"] == "pass"
    judged = [{"ratios": [{"target": 0.9, "verdict": "not judged"}, {"target": None, "verdict": "beside"}]}]
    assert verdict(judged) == "not judged"
    assert verdict(judged + [{"ratios": [{"target": 1.0, "verdict": "pass"}]}]) == "not judged"


# ------------------------------------------------------------------------------------------------
# Rows that say why: no torch, a backend that refuses, the CPU build, another T.

def test_without_torch_every_sdpa_figure_says_torch_is_not_importable():
    doc = {"side": "gpu", "torch": {"reason": "torch is not importable (ModuleNotFoundError)"},
           "measurements": [row("fused_bf16", d_k, causal, ms_for(350.0, d_k, causal)) for d_k, causal in POINTS]}
    report = parity_report(doc)
    for p in report["points"]:
        for role in ("sdpa_flash", "sdpa_cudnn", "sdpa_default"):
            assert p["measured"][role] == {"tflops": None, "why": "torch is not importable (ModuleNotFoundError)",
                                           "speed_path": True, "chose": None, "max_abs_err": None}
        assert p["measured"]["kernel4"]["why"] == "no fused4_bf16 or cpu_build_fused4_bf16 row in bench's output"
    got = ratios(report)
    assert got[64, False, "andrea / SDPA flash"]["verdict"] == "not judged"
    assert got[64, False, "andrea / FA2 published"]["value"] == pytest.approx(350 / 324)  # still judged
    assert report["verdict"] == "not judged"


def test_a_pinned_backend_that_refused_gives_its_reason_and_the_cpu_build_is_not_judged():
    refused = "failed: SDPA's cudnn backend cannot run this on cpu: No viable backend"
    doc = {"side": "cpu", "torch": {"torch": "2.13.0+cpu", "cuda": None, "cudnn": None},
           "measurements": [row("cpu_build_fused_bf16", 64, False, 5.0, T=64, speed_path=False),
                            row("torch_sdpa_bf16_flash", 64, False, 0.05, T=64),
                            row("torch_sdpa_bf16_cudnn", 64, False, None, T=64, skipped=refused)]}
    report = parity_report(doc)
    assert report["T"] == 64
    point = report["points"][0]
    assert point["measured"]["sdpa_cudnn"]["why"] == refused and point["measured"]["andrea"]["speed_path"] is False
    for r in point["ratios"]:
        assert r["value"] is None and r["verdict"] == "not judged"
    assert "not a speed path" in point["ratios"][1]["why"]
    assert point["published"]["FlashAttention-2"] is None  # published figures are at T 16,384 only


def test_the_published_ratio_needs_the_published_sequence_length():
    doc = {"side": "gpu", "torch": {}, "measurements": [row("fused_bf16", 64, False, 1.0, T=4096)]}
    r = ratios(parity_report(doc))[64, False, "andrea / FA2 published"]
    assert r["verdict"] == "not judged" and "T 16384" in r["why"] and "T 4096" in r["why"]


def test_the_parity_screen_fits_80_columns_with_every_verdict():
    kernel5 = {(64, False): 300.0, (64, True): 270.0, (128, False): 370.0, (128, True): 400.0}
    flash = {(64, False): 280.0, (64, True): 300.0, (128, False): 370.0, (128, True): 320.0}
    report = parity_report(gpu_doc(kernel5, flash))
    lines = parity_lines(report)
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    verdicts = [line.split()[-1] for line in lines if line.startswith("  andrea /")]
    assert verdicts.count("pass") == 7 and verdicts.count("short") == 1 and verdicts.count("judged") == 4
    assert "parity verdict: short" in text
    assert "torch 2.9.0, CUDA 12.8, cuDNN 91002" in text and "not measured here" in text
    assert "measured on NVIDIA H200" in text
    assert "300.0" in text and "0.90" in text  # kernel5's figure and the short ratio, as computed
    no_torch = parity_report({"side": "cpu", "torch": {"reason": "torch is not importable (ModuleNotFoundError)"},
                              "measurements": []})
    lines = parity_lines(no_torch)
    assert max(len(line) for line in lines) <= 80 and "torch: torch is not importable" in "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# bench's side of it: --impl, the rows asked for, the backend the default ran. (torch's pure
# helpers: test_torch_sdpa.py.)

def test_impl_selection_keeps_the_baseline_refuses_an_unknown_name_and_leaves_out_on_request_rows():
    impls = [Impl(name, prepare=lambda *a: None) for name in ("numpy", "a", "b")]
    impls.append(Impl("c", prepare=lambda *a: None, on_request=True))
    assert [i.name for i in select_impls(impls, None, "numpy", "cpu")] == ["numpy", "a", "b"]
    assert [i.name for i in select_impls(impls, ["c", "b"], "numpy", "cpu")] == ["numpy", "b", "c"]
    assert [i.name for i in select_impls(impls, ["a", "gone"], "numpy", "cpu", unavailable=["gone"])] == ["numpy", "a"]
    with pytest.raises(AndreaError, match=r"--impl nope: no such implementation on the cpu side; choose from numpy, a"):
        select_impls(impls, ["nope"], "numpy", "cpu")
    # the default and every tensor-core kernel by name, then SDPA by default and pinned to each backend
    torch = ["torch_sdpa_bf16", "torch_sdpa_bf16_flash", "torch_sdpa_bf16_cudnn"]
    assert parity_impls("gpu") == ["fused_bf16", "fused4_bf16", "fused5_bf16", "fused6_bf16", "fused7_bf16", *torch]
    assert parity_impls("cpu") == ["cpu_build_fused_bf16", "cpu_build_fused4_bf16", "cpu_build_fused5_bf16",
                                   "cpu_build_fused6_bf16", "cpu_build_fused7_bf16", *torch]


def test_a_cpu_bench_asked_for_the_parity_rows_without_torch_records_why(cli, monkeypatch):
    import json

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails as where it is not installed
    args = ["bench", "--side", "cpu", "--T", "16", "--d-k", "8", "--mask", "none", "--repeats", "1",
            "--warmup", "0", "--no-cpu-build", "--json"]
    result = cli(*args, *[a for name in parity_impls("cpu") for a in ("--impl", name)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["torch"] == {"reason": "torch is not importable (ModuleNotFoundError)"}
    assert [m["impl"] for m in doc["measurements"]] == ["numpy"]  # the baseline alone
    point = parity_report(doc, T=16)["points"]
    assert point[0]["d_k"] == 64 and point[0]["measured"]["sdpa_flash"]["why"].startswith("torch is not importable")
    result = cli(*args, "--impl", "no_such_impl")
    assert result.exit_code == 2 and "--impl no_such_impl" in result.output


def test_the_bench_screen_says_which_backend_the_default_ran():
    from rich.console import Console

    from andrea_cli.bench.sweep import BenchResult
    from andrea_cli.render.bench import render_bench

    result = BenchResult("gpu", "a GPU", None, "fused", 1, 5)
    result.measurements = [Measurement("fused", T, 64, 12, False, 1.0, repeats=5) for T in (1024, 4096)]
    result.measurements += [Measurement("torch_sdpa_bf16", 1024, 64, 12, False, 0.5, repeats=5, chose="flash"),
                            Measurement("torch_sdpa_bf16", 4096, 64, 12, False, 2.0, repeats=5, chose="cudnn")]
    console = Console(width=80, record=True)
    render_bench(console, result)
    text = console.export_text()
    assert "torch_sdpa_bf16 ran SDPA's flash backend at T=1024" in text
    assert "torch_sdpa_bf16 ran SDPA's cudnn backend at T=4096" in text


def test_the_gpu_sides_parity_rows_on_a_device_that_reports_an_h200(monkeypatch, bench_gpu_as_h200):
    """bench_gpu asked for the parity step's rows, its kernels run by the CPU build and timed by
    the host clock (no GPU here), torch hidden: the default's and every tensor-core kernel's rows
    (kernel7 through its tensor maps), the baseline, torch's reason, and a report whose published
    ratios are not judged at T 64."""
    from andrea_cli.backends.launch.fused_bf16 import BF16_KERNELS
    from andrea_cli.bench.bound import measured
    from andrea_cli.kernel_file import packaged_kernel_path

    bench_gpu = bench_gpu_as_h200
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(measured, "attach_bounds", lambda *args, **kwargs: None)  # the static bound: test_bound's
    result = bench_gpu.bench_gpu(packaged_kernel_path(), Ts=(64,), d_ks=(64,), masks=(swept_mask(True),), H=2, warmup=0,
                                 repeats=1, progress=lambda s: None, only=parity_impls("gpu"))
    names = ["fused", "fused_bf16", "fused7_bf16", "fused6_bf16", "fused5_bf16", "fused4_bf16"]
    assert [m.impl for m in result.measurements] == names
    assert all(m.median_ms and m.max_abs_err < 0.05 for m in result.measurements)
    rows = {m.impl: m for m in result.measurements}
    for v, k in BF16_KERNELS.items():  # each row ran its own kernel: the one its name says
        assert rows[k.label].kernels == [k.entry(64)]
    assert result.torch == {"reason": "torch is not importable (ModuleNotFoundError)"}
    report = parity_report(result.to_json())
    point = report["points"][1]  # d 64 causal
    for v in BF16_KERNELS:
        assert point["measured"][f"kernel{v}"]["tflops"] == rows[f"fused{v}_bf16"].tflops
    assert point["measured"]["sdpa_flash"]["why"] == "torch is not importable (ModuleNotFoundError)"
    assert [r["role"] for r in point["ranking"]] == sorted((f"kernel{v}" for v in BF16_KERNELS),
                                                          key=lambda role: -point["measured"][role]["tflops"])
    assert "T 16384" in point["ratios"][0]["why"] and report["verdict"] == "not judged"


# ------------------------------------------------------------------------------------------------
# The ranking: every kernel and SDPA's pinned backends, fastest first, at each point.

def test_the_ranking_orders_every_kernel_and_backend_by_its_measured_tflops_and_leaves_out_the_cpu_build():
    figures = {"fused4_bf16": 210.0, "fused5_bf16": 330.0, "fused6_bf16": 450.0, "fused7_bf16": 470.0,
               "torch_sdpa_bf16_flash": 340.0, "torch_sdpa_bf16_cudnn": 520.0, "torch_sdpa_bf16": 520.0,
               "fused_bf16": 450.0}
    measurements = [row(impl, 128, False, ms_for(tflops, 128, False)) for impl, tflops in figures.items()]
    versions = {"torch": "2.9.0", "cuda": "12.8", "cudnn": 91002}
    report = parity_report({"side": "gpu", "torch": versions, "measurements": measurements})
    point = next(p for p in report["points"] if (p["d_k"], p["causal"]) == (128, False))
    # andrea's default and SDPA's are a kernel and a backend already ranked: not twice
    assert [r["role"] for r in point["ranking"]] == ["sdpa_cudnn", "kernel7", "kernel6", "sdpa_flash", "kernel5",
                                                     "kernel4"]
    assert [r["tflops"] for r in point["ranking"]] == pytest.approx([520.0, 470.0, 450.0, 340.0, 330.0, 210.0])
    lines = parity_lines(report)
    unwrapped = " ".join(line.strip() for line in lines)
    assert "fastest first: cudnn 520.0, kernel7 470.0, kernel6 450.0, flash 340.0, kernel5 330.0, kernel4 210.0" in unwrapped
    assert max(len(line) for line in lines) <= 80
    # a point with no figures ranks nothing, and says so
    empty = next(p for p in report["points"] if (p["d_k"], p["causal"]) == (64, False))
    assert empty["ranking"] == []
    # the CPU build's figures are no speed figures: never ranked, named as left out
    cpu = [row("cpu_build_fused7_bf16", 64, True, 30.0, T=64, speed_path=False),
           row("cpu_build_fused4_bf16", 64, True, 20.0, T=64, speed_path=False),
           row("torch_sdpa_bf16_flash", 64, True, 0.5, T=64)]
    report = parity_report({"side": "cpu", "torch": versions, "measurements": cpu}, T=64)
    point = next(p for p in report["points"] if (p["d_k"], p["causal"]) == (64, True))
    assert [r["role"] for r in point["ranking"]] == ["sdpa_flash"]
    unwrapped = " ".join(line.strip() for line in parity_lines(report))
    # flash: 4·64²·64·12 / 2 = 6,291,456 FLOPs in 0.5 ms, 0.0126 TFLOP/s
    assert "fastest first: flash 0.013 (kernel4, kernel7: CPU-build figures, not ranked)" in unwrapped


def test_the_parity_steps_dry_run_on_the_cpu_build_times_every_kernel_checked_against_float64(cli):
    """gpu-check's parity step without a GPU (its arguments, bench/parity.py), cut to one point:
    every tensor-core kernel's CPU-build row, kernel7's among them, checked against the float64
    reference before it is timed, named as the kernel it ran, and labelled not a speed path."""
    import json

    from andrea_cli.backends.launch.fused_bf16 import BF16_KERNELS
    from andrea_cli.bench.parity import DRY_RUN, parity_bench_args

    args = parity_bench_args(gpu=False)
    assert args[:4] == ["bench", "--side", "cpu", "--T"] and args[4] == str(DRY_RUN["T"])
    result = cli(*args, "--d-k", "64", "--mask", "causal")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rows = {m["impl"]: m for m in doc["measurements"]}
    for v, k in BF16_KERNELS.items():
        m = rows[f"cpu_build_{k.label}"]
        assert m["kernels"] == [k.entry(64)] and m["speed_path"] is False and m["precision"] == "bf16"
        assert m["median_ms"] is not None and m["max_abs_err"] < 2e-2  # bf16 inputs: about 1e-3
    point = parity_report(doc)["points"][1]  # d 64 causal
    assert point["measured"]["kernel7"]["tflops"] == rows["cpu_build_fused7_bf16"]["tflops"]
    assert all(r["role"].startswith("sdpa") for r in point["ranking"])
