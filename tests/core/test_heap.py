"""Once the pools stream, start-up's garbage is collected and the survivors frozen (hcs_deviceplugin.heap).

In a child interpreter: freezing is process-wide, and this test process must keep collecting."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc, threading, weakref
from hcs_deviceplugin.heap import settle_when

calls = []
def ready(timeout):
    calls.append(timeout)
    return True

class Cycle:
    def __init__(self): self.me = self

garbage = weakref.ref(Cycle())  # start-up garbage: collected before the freeze, not kept by it
assert gc.get_freeze_count() == 0
settle_when(ready, threading.Event()).join(10)
frozen = gc.get_freeze_count()
assert calls and frozen > 1000, (calls, frozen)
assert garbage() is None
stopped = threading.Event(); stopped.set()
gc.unfreeze()
settle_when(ready, stopped).join(10)
assert gc.get_freeze_count() == 0  # a daemon stopping before its pools stream settles nothing
print("ok")
"""


def test_settle_collects_then_freezes_once_ready_and_not_when_stopping() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], check=False, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
