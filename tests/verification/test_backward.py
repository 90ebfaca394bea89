"""The backward family of verify (verification/backward.py) has the power to fail: broken copies of
the staged and fused backward kernels each fail the stage they break."""

import json

import pytest

from andrea_cli.backends.launch.staged import DEFAULT_PLAN, KERNEL1_PLAN
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.verification import sweep

REAL = packaged_kernel_path().read_text()


# Broken backward kernels: (original, replacement, a stage that must fail). Compiling a copy for
# the CPU dominates these tests, so the copies are built at once, two at a time, and each is
# verified on one case (two heads, a partial 32-key tile, causal, both schedules).
# bug -> (text, its broken replacement, the stage that must fail, the plan whose staged backward
# runs the broken kernel: the default's dv/dp/dq/dk are kernel2, KERNEL1_PLAN's kernel1)
BROKEN_BACKWARD = {
    "rowsum term dropped": ("ds[row + j] = p[j] * (g[j] - row_dot);", "ds[row + j] = p[j] * g[j];", "ds",
                            DEFAULT_PLAN),
    "scale applied twice": ("dq[(long)i * d_k + c] = acc * scale;", "dq[(long)i * d_k + c] = acc * scale * scale;", "dq",
                            KERNEL1_PLAN),
    "scale applied twice (register-tiled)": ("kt.j_end, row0, blockIdx.x * 64,\n                                 0, scale);",
                                             "kt.j_end, row0, blockIdx.x * 64,\n                                 0, scale * scale);",
                                             "dq", DEFAULT_PLAN),
    # dkdv_kernel1 no longer asks the Mask: a hidden key's P and dS count
    "masked gradient not zero": ("no gradient through a -inf\n        if (mask.visible(i, j, i < L && j < S)) {",
                                 "no gradient through a -inf\n        if (i < L && j < S) {", "fused1_dk", DEFAULT_PLAN),
    "dK transposed wrong": ("for (int ii = 0; ii < TILE; ++ii) acc += a_tile[ii][ty] * b_tile[ii][tx];",
                            "for (int ii = 0; ii < TILE; ++ii) acc += a_tile[ty][ii] * b_tile[ii][tx];", "dk",
                            KERNEL1_PLAN),
    "dK transposed wrong (register-tiled)": ("gemm_tile_8x8<64, 64, false, true>(ds + kv_head * group * L * S, S, q",
                                             "gemm_tile_8x8<64, 64, false, false>(ds + kv_head * group * L * S, S, q",
                                             "dk", DEFAULT_PLAN),
}


@pytest.fixture(scope="module")
def broken_backward(tmp_path_factory):
    from concurrent.futures import ThreadPoolExecutor

    from andrea_cli.backends.cpu_runtime.build import build, scan

    folder = tmp_path_factory.mktemp("broken_backward")
    paths = {}
    for bug, (old, new, _, _) in BROKEN_BACKWARD.items():
        assert REAL.count(old) == 1, f"the kernel file changed: update the '{bug}' mutation"
        paths[bug] = folder / f"{bug.replace(' ', '_')}.cu"
        paths[bug].write_text(REAL.replace(old, new))
    with ThreadPoolExecutor(2) as pool:  # the compiler runs in subprocesses: two at once
        list(pool.map(lambda p: build(scan(p), sanitize=False), paths.values()))
    return paths


@pytest.mark.slow  # four broken copies built before the first test: ~20 s of CPU
@pytest.mark.parametrize("bug", BROKEN_BACKWARD)
def test_verify_catches_a_broken_backward_kernel(cli, broken_backward, bug):
    _, _, stage, plan = BROKEN_BACKWARD[bug]
    if plan != DEFAULT_PLAN:  # verify's one case runs the default plan: the sweep's KERNEL1_PLAN case instead
        from andrea_cli.backends.cpu import CpuBackend
        from andrea_cli.masks import MaskSpec
        from andrea_cli.verification import Case, check_case

        case = Case(33, 40, 16, MaskSpec("causal"), True, plan)
        assert case in sweep(quick=True)
        result = check_case(CpuBackend(broken_backward[bug]), case, "forward", 0)
        assert not result.passed and not result.stages[stage].passed, result.to_json()
        return
    result = cli("verify", "--backend", "cpu", "--kernel", broken_backward[bug], "--T", 33, "--d-k", 16, "--d-v", 16,
                 "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert not doc["passed"] and all(not case["stages"][stage]["passed"] for case in doc["cases"])
