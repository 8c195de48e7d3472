"""Keep the cyclic garbage collector's full passes short once the daemon is up.

A full (oldest-generation) collection walks every tracked object, and most of a daemon's are
built at start and live as long as it does: modules, classes, the backends' discovery, the first
pool state. Walking them costs about 3.5 ms a pass here, paid by whichever call (an Allocate, a
GetPreferredAllocation) happens to trigger it. Once the pools stream to kubelet, the garbage of
start-up is collected once and what survives is frozen (``gc.freeze``): later passes skip it.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

SETTLE_WAIT_S = 5.0
"""How long to wait for the pools to stream before settling anyway (a pool that cannot register)."""


def settle() -> int:
    """Collect start-up's garbage, then freeze what is left; the number of objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def settle_when(ready: Callable[[float], object], stop: threading.Event) -> threading.Thread:
    """On a thread: once ``ready(seconds)`` returns (the pools stream) and unless ``stop`` is set,
    :func:`settle`. Returns the started thread."""

    def run() -> None:
        ready(SETTLE_WAIT_S)
        if stop.is_set():
            return
        started = time.monotonic()
        frozen = settle()
        log.debug("froze %d start-up objects in %.1f ms", frozen, (time.monotonic() - started) * 1000)

    thread = threading.Thread(target=run, name="settle-heap", daemon=True)
    thread.start()
    return thread
