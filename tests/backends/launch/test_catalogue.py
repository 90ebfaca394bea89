"""The kernel table (backends/launch/catalogue.py): one row per kernel of the kernel file, its
sizes read from the file as its catalogue comment states them, and every launcher reporting the
kernels it launched."""

import numpy as np
import pytest

from andrea_cli.backends.launch import backward, backward_bf16, catalogue, fused, fused_bf16, staged
from andrea_cli.backends.launch.catalogue import check_kernel_runs
from andrea_cli.bench.bound.geometry import RecordingDevice
from andrea_cli.errors import AndreaError
from andrea_cli.kernel_file import kernel_names, packaged_kernel_path
from andrea_cli.masks import MaskSpec
from andrea_cli.scale import course_scale


def test_the_table_names_every_kernel_of_the_file_once():
    entries = catalogue.entry_points()
    assert len(entries) == len(set(entries))
    assert sorted(entries) == sorted(kernel_names(packaged_kernel_path()))
    assert list(entries) == kernel_names(packaged_kernel_path()), "rows in the kernel file's order"


def test_labels_are_one_short_name_per_row():
    labels = [k.label for k in catalogue.KERNELS]
    assert len(labels) == len(set(labels))
    assert all(len(label) <= 16 and " " not in label for label in labels)  # a table column on 80 columns
    # the names verify's JSON and bench's --impl have shown
    assert [catalogue.kernel("fused", "fused", v).label for v in (1, 2, 3)] == ["fused1", "fused2", "fused3"]
    assert catalogue.kernel("fused_bf16", "fused", 5).label == "fused5_bf16"


# (entry, d) -> (rows per block, tile, threads, dynamic shared bytes), as the catalogue comment of
# cuda/microgpt_cuda.cu states them: the table reads them from the file's #defines and launch bounds
STATED = {
    ("scores_kernel2", None): (128, 0, 256, 0),
    ("av_kernel2", None): (64, 0, 64, 0),
    ("attention_fused_kernel3_d64", 64): (64, 64, 128, 50_176),
    ("attention_fused_kernel3_d128", 128): (64, 64, 128, 99_328),
    ("attention_fused_kernel4_d64", 64): (64, 64, 128, 46_080),
    ("attention_fused_kernel4_d128", 128): (64, 64, 128, 87_040),
    ("attention_fused_kernel5_d64", 64): (128, 64, 128, 55_296),
    ("attention_fused_kernel5_d128", 128): (128, 64, 128, 104_448),
    ("attention_fused_kernel6_d64", 64): (128, 64, 256, 51_200),
    ("attention_fused_kernel6_d128", 128): (128, 64, 256, 100_352),
    ("attention_fused_kernel7_d64", 64): (128, 64, 384, 51_360),
    ("attention_fused_kernel7_d128", 128): (128, 64, 384, 100_512),
    ("attention_backward_dkdv_kernel1", 128): (32, 8, 256, 43_264),
    ("attention_backward_dkdv_kernel2_d64", 64): (64, 64, 128, 56_320),
    ("attention_backward_dkdv_kernel2_d128", 128): (64, 32, 128, 70_144),
    ("attention_backward_dq_kernel2_d128", 128): (64, 64, 128, 104_448),
}


@pytest.mark.parametrize("entry, d", list(STATED))
def test_block_sizes_are_the_ones_the_catalogue_comment_states(entry, d):
    k = catalogue.row_of(entry)
    at = d if k.head_sizes else None
    assert (k.block_rows(at), k.tile_size(at), k.block_threads(at), k.shared_bytes(d or 0)) == STATED[entry, d]


def test_the_fp32_fused_kernels_shared_memory_at_8_rows():
    # the catalogue comment: 4 * (rows * d_k + 32 * (d_k | 1) + 32 * d_v), and (d_k + 4) for kernel2
    assert fused.shared_bytes(128, 128, 8, 1) == 36_992 and fused.shared_bytes(128, 128, 8, 2) == 37_376
    assert fused.shared_bytes(3, 5, 4, 1) == 4 * (4 * 3 + 32 * 3 + 32 * 5)


def test_variants_taken_and_defaults():
    assert fused.fused_variants(64, 64) == [1, 2, 3] and fused.fused_variants(40, 40) == [1, 2]
    assert fused.fused_variants(3, 5) == [1] and fused.fused_variants(256, 256) == []
    assert backward.lse_variants(64, 64) == [1, 2] and backward.lse_variants(6, 6) == [1]
    assert [fused_bf16.default_bf16_variant(cc) for cc in ((9, 0), (8, 0), (12, 0), None)] == [6, 5, 5, 5]
    assert catalogue.earlier_variants("fused_bf16", "fused") == [5, 4]
    assert catalogue.row_of("attention_fused_kernel6_d64").runs_on((9, 0))
    assert not catalogue.row_of("attention_fused_kernel6_d64").runs_on((10, 0))
    assert catalogue.row_of("to_bf16_kernel1").cc == (8, 0) and catalogue.row_of("scores_kernel1").cc is None


def test_a_variant_that_does_not_take_the_widths_says_what_it_needs():
    dev = RecordingDevice()
    with pytest.raises(Exception, match=r"attention_fused_kernel2 needs d_k and d_v divisible by 4 \(got d_k 6"):
        fused.launch_fused(dev, None, None, None, None, 1, 8, 6, 6, mask=MaskSpec("none"), scale=course_scale(6), variant=2)
    with pytest.raises(Exception, match=r"attention_fused_kernel3 needs d_k = d_v, one of 64, 128"):
        fused.launch_fused(dev, None, None, None, None, 1, 8, 32, 32, mask=MaskSpec("none"), scale=course_scale(32), variant=3)
    assert not dev.launches


def _launched(run) -> tuple[dict, list[str]]:
    dev = RecordingDevice()
    returned = run(dev)
    return returned, [launch.kernel for launch in dev.launches]


@pytest.mark.parametrize("mask", [MaskSpec("none"), MaskSpec("causal")], ids=str)
def test_every_launcher_returns_the_kernels_it_launched(mask):
    H, T, d = 2, 200, 64
    arrays = lambda dev, n, shape=(H, T, d): [dev.empty(shape) for _ in range(n)]  # noqa: E731
    for plan in staged.ALL_PLANS:
        def run(dev, plan=plan):
            buf = staged.allocate_stages(dev, H, T, d, mask=mask, scaled=True)
            return staged.launch_stages(dev, *arrays(dev, 3), buf, T=T, d_k=d, d_v=d, H=H, mask=mask, scale=course_scale(d),
                                        plan=plan)
        returned, launched = _launched(run)
        assert list(returned.values()) == launched and returned["scores"] == f"scores_kernel{plan.gemm_variant}"
    for variant in fused.fused_variants(d, d):
        returned, launched = _launched(lambda dev: fused.launch_fused(dev, *arrays(dev, 4), H, T, d, d, mask=mask,
                                                                     scale=course_scale(d), variant=variant))
        assert list(returned.values()) == launched == [fused.FUSED[variant].entry(d if variant == 3 else None)]
    for variant in fused_bf16.BF16_KERNELS:
        returned, launched = _launched(lambda dev: fused_bf16.launch_fused_bf16(dev, *arrays(dev, 4), H, T, d, mask=mask,
                                                                               variant=variant))
        assert list(returned.values()) == launched == [f"attention_fused_kernel{variant}_d{d}"]
    for gemm_variant in (1, 2):
        returned, launched = _launched(lambda dev: backward.launch_staged_backward(
            dev, *arrays(dev, 1, (H, T, T)), *arrays(dev, 4), *arrays(dev, 2, (H, T, T)), *arrays(dev, 3), T=T, d_k=d,
            d_v=d, H=H, mask=mask, scale=course_scale(d), gemm_variant=gemm_variant))
        assert list(returned.values()) == launched and returned["ds"] == "ds_kernel1"
    returned, launched = _launched(lambda dev: backward.launch_fused_backward(
        dev, *arrays(dev, 5), *arrays(dev, 2, (H, T)), *arrays(dev, 3), T=T, d_k=d, d_v=d, H=H, mask=mask, scale=course_scale(d)))
    assert list(returned.values()) == launched == ["attention_backward_delta_kernel1", "attention_backward_dkdv_kernel1",
                                                   "attention_backward_dq_kernel1"]
    returned, launched = _launched(lambda dev: backward_bf16.launch_backward_bf16(
        dev, *arrays(dev, 6), *arrays(dev, 2, (H, T)), *arrays(dev, 3), H=H, T=T, d=d, mask=mask, scale=course_scale(d)))
    assert launched == list(returned.values())
    assert returned["dkdv"] == "attention_backward_dkdv_kernel2_d64" and returned["dq"] == "attention_backward_dq_kernel2_d64"


def test_a_run_reports_its_kernels(cpu_backend):
    backend = cpu_backend()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 16, 64), dtype=np.float32) for _ in range(3))
    causal = MaskSpec("causal")
    assert backend.attention_fused(q, k, v, mask=causal, scaled=True).kernel == "attention_fused_kernel3_d64"
    bf16 = backend.attention_fused(q, k, v, mask=causal, scaled=True, precision="bf16")
    assert bf16.kernels == {"to_bf16": "to_bf16_kernel1", "fused": "attention_fused_kernel5_d64"}
    assert backend.attention(q, k, v, mask=MaskSpec("none"), scaled=False).kernels == {
        "scores": "scores_kernel2", "softmax": "softmax_kernel3", "av": "av_kernel2"}


def test_tensor_core_kernels_are_refused_below_sm_80_in_one_line():
    check_kernel_runs("attention_fused_kernel2", (7, 5))  # fp32 kernels run anywhere
    check_kernel_runs("attention_fused_kernel4_d64", (8, 0))
    with pytest.raises(AndreaError, match="to_bf16_kernel1 uses Ampere instructions"):
        check_kernel_runs("to_bf16_kernel1", (7, 5))
    with pytest.raises(AndreaError) as caught:
        check_kernel_runs("attention_fused_kernel4_d128", (7, 5))
    message = str(caught.value)
    assert "\n" not in message and "compute capability 8.0" in message and "this GPU has 7.5" in message
    # the bf16 backward and the forward that feeds it are tensor-core code too; the FP32 backward is not
    check_kernel_runs("attention_backward_dkdv_kernel1", (7, 5))
    for name in ("attention_fused_lse_kernel4_d64", "attention_backward_dkdv_kernel2_d128",
                 "attention_backward_dq_kernel2_d64"):
        with pytest.raises(AndreaError, match=f"{name} uses Ampere instructions"):
            check_kernel_runs(name, (7, 5))


def test_wgmma_kernels_run_on_compute_capability_9_0_only():
    check_kernel_runs("attention_fused_kernel6_d64", (9, 0))
    for cc, shown in (((8, 0), "8.0"), ((8, 9), "8.9"), ((10, 0), "10.0"), ((12, 0), "12.0"), ((7, 5), "7.5")):
        with pytest.raises(AndreaError) as caught:
            check_kernel_runs("attention_fused_kernel6_d128", cc)
        message = str(caught.value)
        assert "\n" not in message and "wgmma" in message and f"this GPU has {shown}" in message
        assert "sm_90a" in message and "attention_fused_kernel5" in message
    check_kernel_runs("attention_fused_kernel5_d64", (12, 0))  # mma.sync runs on newer GPUs
