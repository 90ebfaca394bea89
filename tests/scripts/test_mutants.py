"""scripts/mutants.py's generation of mutants: which lines of the kernel file universalmutator gets
to mutate (fast: no compile, no verify)."""

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("universalmutator", reason="the mutation rules come from universalmutator: pip install '.[test]'")

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
_spec = importlib.util.spec_from_file_location("mutants", SCRIPTS / "mutants.py")
mutants = importlib.util.module_from_spec(_spec)
sys.modules["mutants"] = mutants
_spec.loader.exec_module(mutants)

TEXT = """__device__ float first(float a) {
    float m[2] = {-INFINITY, -INFINITY};
    return a + m[0];
}

__device__ float second(float b) {
    return b * 2.0f;
}
"""


def test_an_initialiser_that_opens_with_minus_does_not_end_the_mutants():
    # universalmutator reads "{-" as a Haskell block comment's start: without the harness's mask
    # nothing after `{-INFINITY` would ever be mutated (the whole backward of the kernel file)
    found = mutants.generate(TEXT, mutants.kernel_spans(TEXT))
    lines = {m.line for m in found}
    assert 3 in lines and 7 in lines, sorted(lines)
    # and a mutant of the masked line itself keeps the original "{-" where it did not mutate it
    on_line_2 = [m for m in found if m.line == 2]
    assert on_line_2 and all("{ -" not in m.mutated for m in on_line_2)


def test_every_function_of_the_kernel_file_has_mutants():
    text = (Path(__file__).resolve().parents[2] / "cuda" / "microgpt_cuda.cu").read_text()
    spans = mutants.kernel_spans(text)
    found = {m.kernel for m in mutants.generate(text, spans)}
    # a function of more than a few lines with no mutant at all is a function the rules never saw
    unseen = [name for name, (first, last) in spans.items() if last - first > 3 and name not in found]
    assert not unseen, unseen


@pytest.mark.slow  # NVRTC compiles the kernel file twice: ~10 s
def test_a_mutant_of_the_wgmma_kernel_changes_its_ptx(tmp_path):
    # scripts/mutants.py tells mutants that compile to the original's PTX apart without running
    # verify; for an architecture without wgmma kernel6 traps at its first wgmma and everything
    # after it is dead code: its mutants would all pass for equivalent
    pytest.importorskip("cupy", reason="NVRTC comes with cupy's bindings: pip install '.[test,bound]'")
    path = Path(__file__).resolve().parents[2] / "cuda" / "microgpt_cuda.cu"
    text = path.read_text()
    original = "            pf[kk][2] = pack_bf16x2(s[8 * kk + 4], s[8 * kk + 5]);"
    assert text.count(original) == 1
    mutant = tmp_path / "mutant.cu"
    mutant.write_text(text.replace(original, original.replace("s[8 * kk + 5]", "s[8 - kk + 5]")))
    original_copy = tmp_path / "original.cu"
    original_copy.write_text(text)
    (ptx_a, err_a), (ptx_b, err_b) = mutants.ptx_of(original_copy), mutants.ptx_of(mutant)
    assert err_a is None and err_b is None, (err_a, err_b)
    assert ptx_a != ptx_b
