"""Ctrl-C (SIGINT, sent to a real `andrea` process): one line "interrupted" on stderr, exit 130,
no traceback, and on a terminal no progress line left behind. A long run says what it runs on
a progress line first, which is also when the signal is sent."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

LONG_RUN = ["attend", "--T", "8192", "--backend", "numpy"]  # about 10 s: interrupted long before its end
SAYS = b"attend T=8192 on numpy: 67,108,864 scores, five stages, then statistics"


def _env() -> dict:
    return {**os.environ, "COLUMNS": "80", "PYTHONPATH": os.getcwd()}


def _take_ctrl_c() -> None:
    """In the child before exec: SIGINT back to its default and unblocked. A shell without job
    control starts background commands with SIGINT ignored (as CI's runner may), an ignored
    signal stays ignored across exec, and Python then installs no KeyboardInterrupt handler:
    andrea would run to its end and exit 0, as a user's Ctrl-C never would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def test_ctrl_c_on_a_pipe_says_interrupted_and_exits_130():
    run = subprocess.Popen([sys.executable, "-m", "andrea_cli", *LONG_RUN], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=_env(), preexec_fn=_take_ctrl_c)
    first = run.stderr.readline()  # the progress line: the run has started
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=60)
    assert first.rstrip() == SAYS, first
    assert run.returncode == 130 and out == b""
    assert err.decode().splitlines() == ["interrupted"], err


@pytest.mark.slow  # a second process start (~2 s); the pipe test above keeps the word and the code in the default tier
@pytest.mark.skipif(not hasattr(os, "fork"), reason="a pseudo-terminal needs os.fork (POSIX)")
def test_ctrl_c_on_a_terminal_erases_the_progress_line():
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: andrea on the terminal's both ends
        _take_ctrl_c()
        os.execve(sys.executable, [sys.executable, "-m", "andrea_cli", *LONG_RUN], _env())
    seen, sent, deadline = b"", False, time.monotonic() + 60
    while time.monotonic() < deadline:
        if not sent and SAYS[:40] in seen:
            os.kill(pid, signal.SIGINT)
            sent = True
        if select.select([fd], [], [], 0.1)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    _, status = os.waitpid(pid, 0)
    assert sent, seen[-500:]
    assert os.waitstatus_to_exitcode(status) == 130
    text = seen.decode(errors="replace")
    assert "Traceback" not in text
    # after the last erase-line code only the word is left on screen: the progress line is gone
    assert text.rsplit("\x1b[2K", 1)[-1] == "interrupted\r\n", repr(text[-300:])


def test_a_short_run_prints_no_progress(run_main):
    code, _, err = run_main("attend", "--T", "64", "--d-k", "4", "--backend", "numpy")
    assert code == 0 and err == ""
