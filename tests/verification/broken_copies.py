"""A broken copy of the kernel file verified: the one way the verification tests plant a bug
(replace one exact text, which must stand in the file once, so a moved line is noticed) and run
verify on the CPU build of the copy, in both schedules."""

from __future__ import annotations

from andrea_cli.commands.verify import verify_backends
from andrea_cli.kernel_file import packaged_kernel_path
from andrea_cli.verification import run_verify

REAL = packaged_kernel_path().read_text()


def verify_broken_copy(tmp_path, bug: str, old: str, new: str, cases: list):
    """verify's report on the copy with old replaced by new; it must fail (every case run in both
    schedules). bug: the name the mutation goes by, for the message when old is not found once."""
    assert REAL.count(old) == 1, f"the kernel file changed: update the '{bug}' mutation"
    broken = tmp_path / "broken.cu"
    broken.write_text(REAL.replace(old, new))
    report = run_verify(verify_backends("cpu", broken), cases, kernel_file=str(broken))
    assert not report.passed and len(report.results) == 2 * len(cases)
    return report


def failed_stages(result) -> set[str]:
    """The stages one case's result failed."""
    assert result.error is None, result.error
    return {name for name, stage in result.stages.items() if not stage.passed}
