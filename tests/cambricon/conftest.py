"""Harness for Cambricon backend tests: fake MLU hosts under tmp dirs, backends, health streams.

Everything below the backend is real files laid out as the MLU driver lays them out
(``vendors/cambricon/fake``); the backend above it is the real code. Health runs on the bounded re-scan
(``udev=off``) every 50 ms, and every wait is on a condition with a deadline.
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
from vendors.cambricon import CambriconBackend, create_backend
from vendors.cambricon.fake.tree import FakeMluNode, NodeSpec, write_cambricon_node

FAST = {"rescanSeconds": "0.05", "udev": "off"}
WAIT = 10.0


@dataclass
class Harness:
    """Writes fake hosts and creates backends on them; stops every health stream at teardown."""

    tmp_path: Path
    streams: list[HealthStream] = field(default_factory=list)
    stepped: list[SteppedStream] = field(default_factory=list)
    stops: list[threading.Event] = field(default_factory=list)
    _count: int = 0

    def node(self, spec: NodeSpec) -> FakeMluNode:
        self._count += 1
        return write_cambricon_node(self.tmp_path / f"host{self._count}", spec)

    def backend(self, node: FakeMluNode | Path, **options: str) -> CambriconBackend:
        root = node if isinstance(node, Path) else node.host_root
        stop = threading.Event()
        self.stops.append(stop)
        return create_backend(BackendConfig(host_root=root, options={**FAST, **options}, stop=stop))

    def watch(self, backend: CambriconBackend) -> HealthStream:
        stream = HealthStream(backend, self.stops[-1])
        self.streams.append(stream)
        return stream

    def step(self, backend: CambriconBackend) -> SteppedStream:
        """The stream read one item per ``next()``, rediscovery left to the test (see stepped.py)."""
        stream = SteppedStream(backend.health_events(), self.stops[-1])
        self.stepped.append(stream)
        return stream

    def close(self) -> None:
        for stop in self.stops:
            stop.set()
        for stream in self.streams:
            stream.join()
        for stepped in self.stepped:
            stepped.close()


@pytest.fixture
def mlu(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    try:
        yield harness
    finally:
        harness.close()


class HealthStream:
    """Consumes ``health_events()`` on a thread as the daemon does: an InventoryChanged makes it call
    ``discover()`` again before reading on."""

    def __init__(self, backend: CambriconBackend, stop: threading.Event) -> None:
        self._stop = stop
        self._backend = backend
        self._events: queue.Queue[HealthEvent | InventoryChanged] = queue.Queue()
        self.seen: list[HealthEvent | InventoryChanged] = []
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._backend.health_events():
                if isinstance(event, InventoryChanged):
                    self._backend.discover()
                self._events.put(event)
        except BaseException as exc:  # surfaced by next(); a test must not hang on a dead thread
            self.failure = exc

    def next(self, timeout: float = WAIT) -> HealthEvent | InventoryChanged:
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"no health event within {timeout}s (stream failure: {self.failure!r}); seen: {self.seen}"
            ) from None
        self.seen.append(event)
        return event

    def wait_for(self, device_id: str, health: Health, timeout: float = WAIT) -> HealthEvent:
        """The first event for ``device_id`` with ``health``; earlier events stay in :attr:`seen`."""
        while True:
            event = self.next(timeout)
            if isinstance(event, HealthEvent) and event.device_id == device_id and event.health == health:
                return event

    def wait_inventory_changed(self, timeout: float = WAIT) -> InventoryChanged:
        while True:
            event = self.next(timeout)
            if isinstance(event, InventoryChanged):
                return event

    def events_for(self, device_id: str) -> list[HealthEvent]:
        return [e for e in self.seen if isinstance(e, HealthEvent) and e.device_id == device_id]

    def join(self) -> None:
        self._stop.set()
        self._thread.join(WAIT)
        assert not self._thread.is_alive(), "health stream did not end after stop"


def healths(backend: CambriconBackend) -> Mapping[str, Health]:
    return {c.id: c.health for c in backend.discover().cards}
