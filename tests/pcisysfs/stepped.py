"""A health stream read one item at a time, in the order the supervisor reads it.

The supervisor rediscovers inside its loop over a backend's health stream, so between two items the
generator is suspended and no check runs. A test that rediscovers or changes the fake tree between
two :meth:`SteppedStream.next` calls reproduces that order exactly, with no timing left to chance;
the thread only bounds each wait.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from hcs_deviceplugin.model import Health, HealthEvent, InventoryChanged

WAIT = 10.0

StreamItem = HealthEvent | InventoryChanged


class SteppedStream:
    """Pulls one item from ``events`` per :meth:`next`; ``stop`` is the backend's stop event."""

    def __init__(self, events: Iterator[StreamItem], stop: threading.Event) -> None:
        self._stop = stop
        self._events = events
        self._asks: queue.Queue[bool] = queue.Queue()
        self._items: queue.Queue[StreamItem | None] = queue.Queue()
        self.seen: list[StreamItem] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._asks.get():
            self._items.put(next(self._events, None))

    def next(self, timeout: float = WAIT) -> StreamItem:
        self._asks.put(True)
        try:
            item = self._items.get(timeout=timeout)
        except queue.Empty:
            seen = self.seen
            raise AssertionError(f"nothing on the health stream within {timeout}s; seen: {seen}") from None
        assert item is not None, "the health stream ended"
        self.seen.append(item)
        return item

    def next_inventory_changed(self, timeout: float = WAIT) -> InventoryChanged:
        while True:
            item = self.next(timeout)
            if isinstance(item, InventoryChanged):
                return item

    def next_for(self, device_id: str, health: Health, timeout: float = WAIT) -> HealthEvent:
        while True:
            item = self.next(timeout)
            if isinstance(item, HealthEvent) and item.device_id == device_id and item.health == health:
                return item

    def close(self) -> None:
        self._stop.set()
        self._asks.put(False)
        self._thread.join(WAIT)
        assert not self._thread.is_alive(), "health stream did not end after stop"
