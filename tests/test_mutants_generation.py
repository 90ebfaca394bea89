"""scripts/mutants.py's generation of mutants: which lines of the kernel file universalmutator gets
to mutate (fast: no compile, no verify)."""

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("universalmutator", reason="the mutation rules come from universalmutator: pip install '.[test]'")

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
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
    text = (Path(__file__).resolve().parents[1] / "cuda" / "microgpt_cuda.cu").read_text()
    spans = mutants.kernel_spans(text)
    found = {m.kernel for m in mutants.generate(text, spans)}
    # a function of more than a few lines with no mutant at all is a function the rules never saw
    unseen = [name for name, (first, last) in spans.items() if last - first > 3 and name not in found]
    assert not unseen, unseen
