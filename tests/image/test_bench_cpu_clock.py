"""The start bench reads a daemon's CPU time from the kernel's per-process CPU clock, to the
nanosecond, not from ``/proc`` in 10 ms ticks that hide a change of a few milliseconds."""

from __future__ import annotations

import subprocess
import sys

from bench.start_bench import cpu_seconds

BURN = """
import sys, time
began = time.process_time()
while time.process_time() - began < 0.2:
    pass
print(repr(time.process_time()), flush=True)
sys.stdin.read()
"""


def test_cpu_seconds_is_the_processs_own_clock_not_whole_ticks() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        own = float(child.stdout.readline())  # the child's CPU time as it finished burning
        seen = cpu_seconds(child.pid)
    finally:
        child.communicate("", timeout=30)
    # Read after the child's own reading, so never below it; a tick count (truncated to 10 ms)
    # would be below it nine times in ten, and only ever a whole number of ticks.
    assert own <= seen < own + 0.05
    assert round(seen * 100) != seen * 100
