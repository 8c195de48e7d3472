"""Polling kubelet's pod-resources API on one thread, coalescing every request for a fresh read.

Each Allocate asks for a read (the new holder should be confirmed soon), but kubelet rate-limits the
API (100 QPS for all clients), so requests only wake the poller: however many arrive, reads start at
most ``1 / min_gap`` times a second, and at least every ``interval`` seconds. Results go to
``on_listed`` with the time the read started, which is what settling provisional holds needs; who
holds each device (namespace, pod, container) is kept as :attr:`PodResourcesPoller.allocations`.

A poke's read starts ``poke_delay`` after it, never while the Allocate that poked is still being
answered: kubelet records an allocation only once our answer has reached it, so an earlier List could
not show it anyway, and the read (and the control loop work its result brings) would compete with
that answer for the interpreter.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from hcs_deviceplugin.kubelet.podresources import (
    DeviceAllocation,
    PodResourcesUnavailable,
    held_devices,
    list_allocations,
)

log = logging.getLogger(__name__)

MIN_GAP_SECONDS = 0.1
"""At most ten reads a second whatever the Allocate rate."""
POKE_DELAY_SECONDS = 0.02
"""From a poke to its read: the Allocate answer that poked is on its way to kubelet by then."""

ListedCallback = Callable[[Mapping[str, frozenset[str]], float], None]


class PodResourcesPoller:
    """Reads held devices every ``interval`` and soon after :meth:`poke`; ``start``/``stop``."""

    def __init__(
        self,
        socket_path: Path,
        interval: float,
        on_listed: ListedCallback,
        min_gap: float = MIN_GAP_SECONDS,
        deadline: float = 5.0,
        poke_delay: float = POKE_DELAY_SECONDS,
    ) -> None:
        self.socket_path = socket_path
        self._interval = interval
        self._on_listed = on_listed
        self._min_gap = min_gap
        self._poke_delay = poke_delay
        self._deadline = deadline
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._last_error = ""
        self._reads = 0
        self._allocations: tuple[DeviceAllocation, ...] = ()
        self._thread = threading.Thread(target=self._loop, name="pod-resources", daemon=True)

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    @property
    def last_error(self) -> str:
        """Why the last read failed, or "" if it succeeded."""
        with self._lock:
            return self._last_error

    @property
    def allocations(self) -> tuple[DeviceAllocation, ...]:
        """Who held what at the last successful read (kept across failed reads, like the holds)."""
        with self._lock:
            return self._allocations

    @property
    def reads(self) -> int:
        """Reads attempted so far (for tests of the coalescing)."""
        with self._lock:
            return self._reads

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def poke(self) -> None:
        """Ask for a read soon; cheap and safe from any thread (a flag test, one Event.set at most)."""
        if not self._wake.is_set():
            self._wake.set()

    def _loop(self) -> None:
        last_start = -float("inf")
        while not self._stop.is_set():
            gap = last_start + self._min_gap - time.monotonic()
            if gap > 0 and self._stop.wait(gap):
                return
            self._wake.clear()
            last_start = time.monotonic()
            self._read_once(last_start)
            if self._wake.wait(self._interval) and self._stop.wait(self._poke_delay):
                return

    def _read_once(self, started_at: float) -> None:
        with self._lock:
            self._reads += 1
        try:
            allocations = list_allocations(self.socket_path, deadline=self._deadline)
        except PodResourcesUnavailable as exc:
            with self._lock:
                first = str(exc) != self._last_error
                self._last_error = str(exc)
            if first:
                log.warning("cannot read held devices (keeping the last known): %s", exc)
            return
        with self._lock:
            recovered = bool(self._last_error)
            self._last_error = ""
            self._allocations = allocations
        if recovered:
            log.info("pod-resources readable again")
        if not self._stop.is_set():
            self._on_listed(held_devices(allocations), started_at)
