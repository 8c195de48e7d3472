"""Harness for Hygon backend tests: fake host trees under tmp_path, backends, health streams.

Health runs with ``udev=off`` and a 50 ms re-scan, so a change in the fake tree is seen within one
interval; every wait is on the next event with a bounded timeout, never a sleep.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.model import Health, HealthEvent, InventoryChanged
from tests.pcisysfs.stepped import SteppedStream
from vendors.hygon import HygonBackend, create_backend
from vendors.hygon.fake import FakeHygonNode, HygonNodeSpec, write_hygon_node

FAST = {"udev": "off", "rescanSeconds": "0.05"}
WAIT = 10.0

StreamItem = HealthEvent | InventoryChanged


class HealthStream:
    """Consumes ``backend.health_events()`` on a thread, as the daemon does."""

    def __init__(self, backend: HygonBackend, stop: threading.Event) -> None:
        self._stop = stop
        self._items: queue.Queue[StreamItem] = queue.Queue()
        self.seen: list[StreamItem] = []
        self._thread = threading.Thread(target=self._run, args=(backend,), daemon=True)
        self._thread.start()

    def _run(self, backend: HygonBackend) -> None:
        for item in backend.health_events():
            self._items.put(item)

    def next(self, timeout: float = WAIT) -> StreamItem:
        try:
            item = self._items.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"nothing on the health stream within {timeout}s; seen: {self.seen}"
            ) from None
        self.seen.append(item)
        return item

    def wait_for(self, device_id: str, health: Health, timeout: float = WAIT) -> HealthEvent:
        """The first event for ``device_id`` with ``health``; others stay in :attr:`seen`."""
        while True:
            item = self.next(timeout)
            if isinstance(item, HealthEvent) and item.device_id == device_id and item.health == health:
                return item

    def wait_inventory_changed(self, timeout: float = WAIT) -> InventoryChanged:
        while True:
            item = self.next(timeout)
            if isinstance(item, InventoryChanged):
                return item

    def close(self) -> None:
        self._stop.set()
        self._thread.join(WAIT)
        assert not self._thread.is_alive(), "health stream did not end after stop"


@dataclass
class Harness:
    """Writes fake nodes and creates backends on them; stops every health stream at teardown."""

    tmp_path: Path
    streams: list[HealthStream | SteppedStream] = field(default_factory=list)
    stops: dict[int, threading.Event] = field(default_factory=dict)
    _count: int = 0

    def node(self, spec: HygonNodeSpec) -> FakeHygonNode:
        self._count += 1
        return write_hygon_node(self.tmp_path / f"root{self._count}", spec)

    def backend(self, node: FakeHygonNode | Path, options: Mapping[str, str] | None = None) -> HygonBackend:
        root = node if isinstance(node, Path) else node.host_root
        stop = threading.Event()
        backend = create_backend(
            BackendConfig(host_root=root, options={**FAST, **(options or {})}, stop=stop)
        )
        self.stops[id(backend)] = stop
        return backend

    def watch(self, backend: HygonBackend) -> HealthStream:
        stream = HealthStream(backend, self.stops[id(backend)])
        self.streams.append(stream)
        return stream

    def step(self, backend: HygonBackend) -> SteppedStream:
        stream = SteppedStream(backend.health_events(), self.stops[id(backend)])
        self.streams.append(stream)
        return stream

    def close(self) -> None:
        for stream in self.streams:
            stream.close()


@pytest.fixture
def hygon(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    try:
        yield harness
    finally:
        harness.close()
