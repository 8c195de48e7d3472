"""Keep the cyclic garbage collector out of the way while the daemon starts, and its full passes
short once it is up.

A full (oldest-generation) collection walks every tracked object, and most of a daemon's are
built at start and live as long as it does: modules, classes, the backends' discovery, the first
pool state. Walking them costs about 3.5 ms a pass here, paid by whichever call (an Allocate, a
GetPreferredAllocation) happens to trigger it. Once the pools stream to kubelet, the garbage of
start-up is collected once and what survives is frozen (``gc.freeze``): later passes skip it.

Before that, the young-generation passes that allocation triggers (some 50 in a start, 4 to 5 %
of its CPU here) walk the same long-lived objects while they are being built, and find almost
nothing to free. The ``hcs-deviceplugin`` command therefore holds collection back from before it
loads its command line (``hcs_deviceplugin.__main__``; ``cli.main`` from its start) until the one
collection of :func:`settle`, which turns automatic collection back on: at the latest
:data:`SETTLE_WAIT_S` after the start returned, even if a pool cannot register (a start blocked on
another instance's lock allocates next to nothing meanwhile). Any other command, and a refused
start, collects as usual again at once.
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


def defer_collection() -> None:
    """No automatic collection until :func:`settle` (or :func:`resume_collection`); see the module doc."""
    gc.disable()


def resume_collection() -> None:
    gc.enable()


def stand_down() -> None:
    """Collect automatically again, without the pass that would walk start-up's heap: a stop's way
    out of the deferral.

    Collection was off since start, so every object made since is still in the youngest
    generation, and the first pass once it is back on walks them all: as long as the one full
    collection of :func:`settle`, for a heap the exit throws away. Frozen first (which moves the
    generations' lists, walking nothing), they are left alone."""
    gc.freeze()
    resume_collection()


def settle() -> int:
    """Collect start-up's garbage, freeze what is left and collect automatically again from here;
    the number of objects frozen."""
    gc.collect()
    gc.freeze()
    resume_collection()
    return gc.get_freeze_count()


def settle_when(
    ready: Callable[[float], object], stop: threading.Event, prepare: Callable[[], object] = lambda: None
) -> threading.Thread:
    """On a thread: once ``ready(seconds)`` returns (the pools stream) and unless ``stop`` is set,
    ``prepare()`` (what a start leaves for later but the first calls would pay for; loaded before
    the freeze, so it is frozen too), then :func:`settle`, even if ``ready`` (taken as timed out)
    or ``prepare`` failed: collection must come back on whatever happens. Returns the started thread.

    ``stop`` is looked at again after ``prepare``: a SIGTERM that came meanwhile skips the
    collection, which holds the interpreter lock for some 30 ms on an 8-GPU node and would hold
    up every thread of the stop behind it, for a heap the exit throws away."""

    def run() -> None:
        try:
            ready(SETTLE_WAIT_S)
        except Exception:  # as if it timed out: this thread alone turns collection back on
            log.exception("waiting for the pools to stream failed; settling the heap all the same")
        if stop.is_set():  # stopping: nothing to settle, and nothing left to defer for
            stand_down()
            return
        try:
            prepare()
        except Exception:  # left for the first calls to do: logged, and the heap settled all the same
            log.exception("preparing for the first calls after the start failed")
        if stop.is_set():  # stopped while preparing: no collection for the exit
            stand_down()
            return
        started = time.monotonic()
        frozen = settle()
        log.debug("froze %d start-up objects in %.1f ms", frozen, (time.monotonic() - started) * 1000)

    thread = threading.Thread(target=run, name="settle-heap", daemon=True)
    thread.start()
    return thread
