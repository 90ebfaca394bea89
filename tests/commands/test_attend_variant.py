"""attend --fused --variant NAME (commands/fused_variant.py): the fused kernel named runs, the
screen and the JSON say so, its output is the equation within its precision's bound; a name that
is no kernel, one of the other precision, one the widths or the device cannot take are refused in
one line, exit 2; Python's variant= is the same choice."""

from __future__ import annotations

import numpy as np
import pytest

import andrea_cli
from andrea_cli import reference
from andrea_cli.backends.launch.catalogue import family
from andrea_cli.commands.fused_variant import check_variant_runs, choose_variant
from andrea_cli.commands.options.shared import VARIANT
from andrea_cli.errors import AndreaError
from andrea_cli.inputs import random_qkv
from andrea_cli.masks import MaskSpec
from andrea_cli.verification import bf16_attention

CPU = ("--backend", "cpu")
BF16 = ("--fused", "--precision", "bf16")
BF16_KERNELS, FP32_KERNELS = family("fused_bf16", "fused"), family("fused", "fused")


@pytest.mark.parametrize("name", ["kernel7", "7", "attention_fused_kernel7", "fused7_bf16", "Kernel7"])
def test_every_name_of_kernel7_runs_it_and_its_output_is_within_the_bf16_bound(cli, tmp_path, name):
    """kernel7 (TMA tensor maps, mbarriers, wgmma; emulated by the CPU build) picked by each of
    its names: the JSON names it, and its output agrees with the bf16 reference of its own
    arithmetic within the tolerance derived for it."""
    out = tmp_path / "out.npy"
    doc = cli.json("attend", "--T", 70, "--d-k", 64, *BF16, "--variant", name, "--out", out, *CPU)
    assert doc["kernel"] == "attention_fused_kernel7_d64" and doc["kernels"]["fused"] == doc["kernel"]
    x = random_qkv(70, 64, 64, 0)
    want, tol = bf16_attention.reference_and_tol(x.q[None], x.k[None], x.v[None], MaskSpec("causal"), True, variant=7)
    assert (np.abs(np.load(out) - want[0]) <= tol[0]).all()


@pytest.mark.parametrize("precision, variant", [("bf16", v) for v in BF16_KERNELS] + [("fp32", v) for v in FP32_KERNELS])
def test_the_screen_names_the_kernel_chosen(cli, precision, variant):
    entry = f"attention_fused_kernel{variant}_d64" if precision == "bf16" or variant == 3 else \
        f"attention_fused_kernel{variant}"
    screen = cli("attend", "--T", 40, "--d-k", 64, "--fused", "--precision", precision, "--variant", f"kernel{variant}",
                 *CPU).output
    assert f"fused kernel {entry}" in screen and "ran: " in screen
    assert entry in screen.split("ran: ", 1)[1].splitlines()[0]


def test_without_variant_the_launcher_picks_the_cpu_builds_default(cli):
    assert cli.json("attend", "--T", 40, "--d-k", 64, *BF16, *CPU)["kernel"] == "attention_fused_kernel5_d64"


@pytest.mark.parametrize("args, message", [
    ((*BF16, "--variant", "kernel9"), "error: --variant kernel9: no such bf16 fused kernel; choose from kernel4, "
                                      "kernel5, kernel6, kernel7 (or attention_fused_kernelN, or N)"),
    (("--fused", "--variant", "kernel7"), "error: --variant kernel7 is a bf16 kernel: add --precision bf16, or "
                                          "choose from kernel1, kernel2, kernel3"),
    ((*BF16, "--variant", "2"), "error: --variant 2 is an fp32 kernel: drop --precision bf16, or choose from "
                                "kernel4, kernel5, kernel6, kernel7"),
    (("--variant", "kernel7"), "error: --variant kernel7 picks a fused kernel: add --fused"),
    (("--fused", "--variant", "kernel3", "--d-k", "48"), "error: --variant kernel3: attention_fused_kernel3 needs "
                                                         "d_k = d_v, one of 64, 128 (got d_k 48, d_v 48)"),
])
def test_a_variant_that_cannot_run_is_one_line_exit_2(run_main, args, message):
    code, out, err = run_main("attend", "--T", 16, *args, *CPU)
    assert code == 2 and err == message + "\n" and out == ""


def test_a_wgmma_kernel_on_a_gpu_without_sm_90a_is_refused_before_it_runs(run_main, monkeypatch):
    """The device's compute capability decides (an A100's 8.0 here, the CPU build standing in for
    its kernels); kernel5 runs there, kernel6 and kernel7 are refused in one line naming the fix."""
    from andrea_cli.backends.launch import fused_bf16

    monkeypatch.setattr(fused_bf16, "device_cc", lambda dev: (8, 0))
    for variant in (6, 7):
        code, out, err = run_main("attend", "--T", 16, "--d-k", 64, *BF16, "--variant", variant, *CPU)
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"error: --variant kernel{variant}: attention_fused_kernel{variant} uses Hopper's wgmma")
        assert "this GPU has 8.0: run attention_fused_kernel5" in err
    code, _, err = run_main("attend", "--T", 16, "--d-k", 64, *BF16, "--variant", 5, *CPU)
    assert code == 0, err
    with pytest.raises(AndreaError, match="uses Hopper's wgmma"):
        check_variant_runs(7, "bf16", 64, 64, (9, 1))  # sm_90a alone, not a later Hopper-like part
    check_variant_runs(7, "bf16", 64, 64, (9, 0))
    check_variant_runs(7, "bf16", 64, 64, None)  # the CPU build emulates it


def test_pythons_variant_keyword_is_the_same_choice():
    x = random_qkv(40, 64, 64, 3)
    q, k, v = x.q, x.k, x.v
    result = andrea_cli.attend(q, k, v, backend="cpu", fused=True, precision="bf16", variant=7)
    assert result.report["kernel"] == "attention_fused_kernel7_d64"
    want, tol = bf16_attention.reference_and_tol(q[None], k[None], v[None], MaskSpec("causal"), True, variant=7)
    assert (np.abs(result.output - want[0]) <= tol[0]).all()
    # fp32 by number, against float64
    fp32 = andrea_cli.attend(q, k, v, backend="cpu", fused=True, variant=2)
    assert fp32.report["kernel"] == "attention_fused_kernel2"
    assert np.abs(fp32.output - reference.attention(q[None], k[None], v[None], MaskSpec("causal"))[0]).max() < 1e-5
    with pytest.raises(AndreaError, match=r"^variant=True: pass a fused kernel's name or number"):
        andrea_cli.attend(q, k, v, backend="cpu", fused=True, variant=True)
    with pytest.raises(AndreaError, match=r"^--variant kernel9: no such fp32 fused kernel"):
        andrea_cli.attend(q, k, v, backend="cpu", fused=True, variant="kernel9")


def test_the_help_names_the_kernel_tables_variants():
    """--help lists the variants without importing the table (the command line starts without
    NumPy): held to it here."""
    for kernels, what in ((FP32_KERNELS, "in fp32"), (BF16_KERNELS, "with --precision bf16")):
        assert f"kernel{min(kernels)}-{max(kernels)} {what}" in VARIANT.help
        assert list(kernels) == list(range(min(kernels), max(kernels) + 1))
    exact = [v for v, k in BF16_KERNELS.items() if k.cc_exact]
    assert f"kernel{exact[0]} and {exact[-1]} need sm_90a" in VARIANT.help and len(exact) == 2
    assert choose_variant(None, "bf16", True) is None
