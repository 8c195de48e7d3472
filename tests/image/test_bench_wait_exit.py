"""The start bench times SIGTERM → exit by the exit itself: ``Popen.wait(timeout=...)`` sleeps
1, 2, 4 ... 50 ms between looks, which rounded every stop up to 63 or 113 ms."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench.start_bench import wait_exit

WAIT_FOR_STDIN = "import sys; sys.stdin.read(); sys.exit(3)"


def _no_sleeping(_seconds: float) -> None:
    raise AssertionError("wait_exit polled on a clock (time.sleep) instead of waiting for the exit")


def exit_seen_without_sleeping(monkeypatch: pytest.MonkeyPatch) -> int:
    """``wait_exit`` on a child that exits 3 once its stdin closes, with ``time.sleep`` forbidden:
    ``Popen.wait(timeout=...)`` loops on it; a pidfd (or a waitpid thread) never sleeps."""
    child = subprocess.Popen([sys.executable, "-c", WAIT_FOR_STDIN], stdin=subprocess.PIPE)
    assert child.stdin is not None
    monkeypatch.setattr(time, "sleep", _no_sleeping)
    try:
        child.stdin.close()  # the child reads EOF and exits 3
        return wait_exit(child, 30)
    finally:
        monkeypatch.undo()
        if child.poll() is None:
            child.kill()
            child.wait()


def test_wait_exit_is_woken_by_the_exit_not_a_polling_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    assert exit_seen_without_sleeping(monkeypatch) == 3


def test_wait_exit_without_pidfd_waits_on_a_reaper_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    assert exit_seen_without_sleeping(monkeypatch) == 3


def test_wait_exit_gives_up_after_its_timeout() -> None:
    child = subprocess.Popen([sys.executable, "-c", WAIT_FOR_STDIN], stdin=subprocess.PIPE)
    assert child.stdin is not None
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_exit(child, 0.05)
    finally:
        child.stdin.close()
        child.wait(timeout=30)
