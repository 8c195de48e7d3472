"""No daemon outlives its test.

The scenarios (bench/reliability.py) run ``hcs-deviceplugin run`` as child processes and stop them in
``finally`` blocks. This guard makes a leak a failure of the test that caused it, and kills what is
left, so one broken scenario (or a timeout that cut its cleanup short) never leaves a daemon holding
a plugin dir, a port and CPU for the rest of the suite.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

DAEMON_MODULE = b"hcs_deviceplugin.cli"


def daemon_children() -> list[int]:
    """Pids of this process's live children running the daemon's CLI (zombies have no cmdline)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == me and DAEMON_MODULE in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def no_daemon_outlives_its_test() -> Iterator[None]:
    yield
    left = daemon_children()
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in left:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    assert not left, f"daemon processes still running after the test: {left}"
