"""What attend says it ran (runs/header.py, render/kernels.py) and `--plan textbook`
(commands/backend.py): each stage's kernel and the kernel file it came from, on the screen and in
the JSON; the course's five textbook kernels one flag away, and an edit to them that shows."""

from pathlib import Path

import numpy as np
import pytest

from andrea_cli import reference
from andrea_cli.inputs import random_qkv
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.masks import MaskSpec

CPU = ("--backend", "cpu")
FAST = {"scores": "scores_kernel2", "scale": "scale_kernel1", "mask": "mask_kernel1", "softmax": "softmax_kernel3",
        "av": "av_kernel2"}
TEXTBOOK = {"scores": "scores_kernel1", "scale": "scale_kernel1", "mask": "mask_kernel1",
            "softmax": "softmax_kernel1", "av": "av_kernel1"}


def test_attend_names_each_stages_kernel_and_the_installed_file(cli):
    doc = cli.json("attend", "--T", 24, "--d-k", 8, *CPU)
    assert doc["kernels"] == FAST and list(doc["kernels"]) == list(FAST)  # in launch order
    assert Path(doc["kernel_file"]) == packaged_kernel_path() and doc["kernel_file_installed"] is True
    screen = cli("attend", "--T", 24, "--d-k", 8, *CPU).output
    assert "ran: scores_kernel2, scale_kernel1, mask_kernel1, softmax_kernel3, av_kernel2" in screen
    assert "from the installed kernel file (an edited copy: --kernel cuda/microgpt_cuda.cu)" in screen


def test_the_numpy_path_says_no_kernel_ran(cli):
    doc = cli.json("attend", "--T", 8, "--d-k", 4, "--backend", "numpy")
    assert doc["kernels"] == {} and doc["kernel_file"] is None
    assert "ran: no kernels, the NumPy reference" in cli("attend", "--T", 8, "--d-k", 4, "--backend", "numpy").output


def test_textbook_plan_runs_the_five_textbook_kernels_and_matches_the_equation(cli, tmp_path):
    out = tmp_path / "out.npy"
    doc = cli.json("attend", "--T", 37, "--d-k", 20, "--plan", "textbook", "--out", out, *CPU)
    assert doc["kernels"] == TEXTBOOK
    x = random_qkv(37, 20, 20, 0)
    exact = reference.attention(x.q[None], x.k[None], x.v[None], MaskSpec("causal"))[0]
    assert np.abs(np.load(out) - exact).max() < 1e-5


def test_grad_names_its_kernels_too(cli):
    doc = cli.json("grad", "--T", 12, "--d-k", 4, *CPU)
    assert doc["kernels"]["scores"] == "scores_kernel2" and doc["kernels"]["dq"].startswith("dq_kernel")
    assert doc["kernel_file_installed"] is True


@pytest.mark.parametrize("args, message", [
    (("--plan", "texbook"), "--plan 'texbook' is not a plan: use one of fast, textbook"),
    (("--plan", "textbook", "--fused"), "--plan textbook picks the staged kernels; --fused runs one fused kernel"),
    (("--plan", "textbook", "--backend", "numpy"), "--plan textbook runs the kernel file's own kernels, which the "
                                                   "numpy backend does not: use --backend cpu"),
])
def test_a_plan_that_cannot_run_is_one_line(run_main, args, message):
    code, out, err = run_main("attend", "--T", 8, "--d-k", 4, *args)
    assert code == 2 and message in err and err.count("\n") == 1


@pytest.mark.slow  # a CPU build of the edited copy: ~10 s
def test_an_edit_to_scores_kernel1_changes_the_textbook_run_and_not_the_default(cli, tmp_path):
    """The learner's loop: edit the textbook kernel in a copy, run it with --kernel --plan textbook,
    see the numbers move; the default plan (scores_kernel2) is untouched by that edit."""
    real = packaged_kernel_path().read_text()
    store = "    if (i < L && j < S) scores[(long)i * S + j] = acc;\n}"
    assert real.count(store) == 1, "scores_kernel1 changed: update this edit"
    copy = tmp_path / "edited.cu"
    copy.write_text(real.replace(store, store.replace("= acc;", "= 2.0f * acc;")))
    runs = {}
    for plan in ("textbook", "fast"):
        out = tmp_path / f"{plan}.npy"
        doc = cli.json("attend", "--T", 40, "--d-k", 16, "--kernel", copy, "--plan", plan, "--out", out, *CPU)
        assert doc["kernel_file"] == str(copy) and doc["kernel_file_installed"] is False
        runs[plan] = doc, np.load(out)
    x = random_qkv(40, 16, 16, 0)
    exact = reference.attention(x.q[None], x.k[None], x.v[None], MaskSpec("causal"))[0]
    assert np.abs(runs["fast"][1] - exact).max() < 1e-5
    assert np.abs(runs["textbook"][1] - exact).max() > 1e-2
    doubled, plain = (runs[p][0]["magnitude"]["unscaled"]["std"] for p in ("textbook", "fast"))
    assert doubled == pytest.approx(2 * plain, rel=1e-5)
    screen = cli("attend", "--T", 40, "--d-k", 16, "--kernel", copy, "--plan", "textbook", *CPU).output
    assert f"from --kernel {copy}" in screen.replace("\n", "")
