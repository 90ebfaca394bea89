"""verify's huge-score cases (Q, K uniform in +-100, d 128: scaled scores ~1e4): in the sweep, quick
and full, with the inputs they say, and passed by every fp32 fused kernel on the CPU build."""

import numpy as np

from andrea_cli.verification.case import draw_inputs
from andrea_cli.verification.run import check_case, sweep


def extreme(quick: bool):
    return [c for c in sweep(quick=quick) if c.input_uniform is not None]


def test_the_sweep_holds_huge_score_cases():
    assert len(extreme(True)) == 1 and len(extreme(False)) == 2
    case = extreme(True)[0]
    x = draw_inputs(case, 0)
    assert np.abs(x.q).max() <= 100 and np.abs(x.q).max() > 99 and x.q.dtype == np.float32
    scores = x.q[0].astype(np.float64) @ x.k[0].astype(np.float64).T / np.sqrt(case.d_k)
    assert np.abs(scores).max() > 5e3  # scores of magnitude 1e4
    assert "uniform ±100" in case.label()


def test_every_fused_fp32_kernel_passes_them(cpu_backend):
    for case in extreme(False):
        result = check_case(cpu_backend(), case, "forward", 0)
        assert result.passed and set(result.stages) == {"fused1", "fused2", "fused3"}, result.to_json()
