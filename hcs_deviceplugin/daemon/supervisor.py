"""Backend supervisor: every call into a vendor backend runs here, never on the control loop.

Per backend one thread discovers, then runs the health stream, restarting it with back-off when it
fails (the backend's cards are marked Unhealthy meanwhile), and another thread executes partition
layouts one at a time. Results go back to the control loop as events, so a vendor library that hangs
for seconds delays only its own backend's news, never health events of others, probes or Allocate.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from hcs_deviceplugin.backend import PARTITION_FILL, Backend
from hcs_deviceplugin.daemon.events import (
    BackendFailed,
    Event,
    HealthChanged,
    LaidOut,
    Rediscovered,
)
from hcs_deviceplugin.model import Card, InventoryChanged
from hcs_deviceplugin.plugin.server import Backoff

if TYPE_CHECKING:
    from hcs_deviceplugin.layouts import LayoutRequest

log = logging.getLogger(__name__)

STREAM_END_GRACE_SECONDS = 1.0
"""How long before the daemon stops a backend's health stream may end without counting as a failure."""

Post = Callable[[Event], None]


class BackendSupervisor:
    """Runs the backends' blocking work on their own threads and posts what it learns."""

    def __init__(self, backends: Mapping[str, Backend], post: Post, retry: Backoff) -> None:
        self._backends = dict(backends)
        self._post = post
        self._retry = retry
        self._stop = threading.Event()
        self._discovered: dict[str, threading.Event] = {n: threading.Event() for n in self._backends}
        self._layouts: dict[str, queue.Queue[tuple[LayoutRequest, Card] | None]] = {
            n: queue.Queue() for n in self._backends
        }
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        for name, backend in self._backends.items():
            for target, prefix in ((self._run_backend, "health"), (self._run_layouts, "layout")):
                thread = threading.Thread(
                    target=target, args=(name, backend), name=f"{prefix}-{name}", daemon=True
                )
                self.threads.append(thread)
                thread.start()

    def wait_discovered(self, timeout: float) -> list[str]:
        """Wait for every first discovery up to ``timeout`` in total; the names still pending."""
        for event in self._discovered.values():
            event.wait(timeout)
            timeout = 0.0 if not event.is_set() else timeout
        return sorted(n for n, e in self._discovered.items() if not e.is_set())

    def lay_out(self, request: LayoutRequest, card: Card) -> None:
        """Queue a layout on its backend's layout thread; the result comes back as LaidOut."""
        self._layouts[request.backend].put((request, card))

    def stop(self) -> None:
        self._stop.set()
        for q in self._layouts.values():
            q.put(None)

    # -- threads ---------------------------------------------------------------------------------

    def _run_backend(self, name: str, backend: Backend) -> None:
        try:
            self._post(Rediscovered(name, backend.discover()))
        except Exception as exc:
            log.exception("backend %s discovery failed", name)
            self._post(BackendFailed(name, f"discovery failed: {exc}"))
        finally:
            self._discovered[name].set()
        self._health_loop(name, backend)

    def _health_loop(self, name: str, backend: Backend) -> None:
        """Run a backend's health stream; if it fails, mark its cards Unhealthy and retry."""
        delay = self._retry.initial
        while not self._stop.is_set():
            try:
                for event in backend.health_events():
                    if self._stop.is_set():
                        return
                    if isinstance(event, InventoryChanged):
                        log.info("backend %s: %s; discovering again", name, event.reason)
                        self._rediscover(name, backend)
                    else:
                        self._post(HealthChanged(name, event))
                    delay = self._retry.initial
                # A stream ends when its backend's stop event is set, which the runner does just
                # before stopping the daemon: give that shutdown a moment before calling it a failure.
                if self._stop.wait(STREAM_END_GRACE_SECONDS):
                    return
                raise RuntimeError("health stream ended unexpectedly")
            except Exception as exc:
                if self._stop.is_set():
                    return
                log.warning("backend %s health stream failed: %s; cards marked Unhealthy", name, exc)
                self._post(BackendFailed(name, str(exc)))
            if self._stop.wait(delay):
                return
            delay = self._retry.next(delay)
            self._rediscover(name, backend)

    def _rediscover(self, name: str, backend: Backend) -> None:
        """A failure keeps the old inventory (the cards stay as the health stream marked them)."""
        try:
            inventory = backend.discover()
        except Exception as exc:
            log.warning("backend %s rediscovery failed: %s", name, exc)
            return
        if not self._stop.is_set():
            self._post(Rediscovered(name, inventory))

    def _run_layouts(self, name: str, backend: Backend) -> None:
        jobs = self._layouts[name]
        while True:
            job = jobs.get()
            if job is None or self._stop.is_set():
                return
            request, card = job
            try:
                made = backend.partition(card, request.profile, PARTITION_FILL)
                inventory = backend.discover()
            except Exception as exc:
                message = (
                    f"pool {request.pool}: card {request.card_id}: cannot lay out {request.profile}: {exc}"
                )
                log.error("%s", message)
                self._post(LaidOut(request, None, message))
                continue
            log.info(
                "pool %s: card %s laid out as %d x %s",
                request.pool,
                request.card_id,
                len(made),
                request.profile,
            )
            self._post(LaidOut(request, inventory))
