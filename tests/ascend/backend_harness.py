"""Harness for Ascend backend tests: fake nodes, backends that always close, a health-stream consumer.

Every test gets its own node folder (the fake re-reads a node file whose path changed at ``dcmi_init``,
and each backend calls ``dcmi_init`` when it is created), so several backends can live in one process
on the one loaded fake library. At teardown the health streams are stopped, every hang and fault is
cleared (a hung call must not outlive its test) and the backends are closed.

Use it from a test module with ``from tests.ascend.backend_harness import ascend_fixture  # noqa: F401``;
the fixture is named ``ascend``. It builds on ``prepare_fake_ascend_node`` of ``tests/ascend/conftest.py``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from hcs_deviceplugin.backend import BackendConfig
from hcs_deviceplugin.model import Health, HealthEvent, InventoryChanged
from vendors.ascend import AscendBackend, create_backend
from vendors.ascend.fake import FakeAscendNode

FAST = {"healthIntervalSeconds": "0.02", "callTimeoutSeconds": "0.3"}
"""Options for health tests: poll every 20 ms, give up on a DCMI call after 0.3 s."""


@dataclass
class Harness:
    """Writes fake nodes and creates backends on them; cleans everything up at teardown."""

    prepare: Callable[..., FakeAscendNode]
    backends: list[AscendBackend] = field(default_factory=list)
    nodes: list[FakeAscendNode] = field(default_factory=list)
    stops: dict[int, threading.Event] = field(default_factory=dict)
    streams: list[HealthStream] = field(default_factory=list)

    def node(self, description: Mapping[str, Any], omit: Iterable[str] = ()) -> FakeAscendNode:
        """A fresh fake node (library without ``omit`` symbols); the environment points at it."""
        node = self.prepare(description, omit=omit)
        self.nodes.append(node)
        return node

    def backend(
        self, node: FakeAscendNode, options: Mapping[str, str] | None = None, **extra: str
    ) -> AscendBackend:
        """A backend on ``node`` with the node's library and ``options`` / ``extra``."""
        stop = threading.Event()
        all_options = {**node.backend_options, **(options or {}), **extra}
        backend = create_backend(BackendConfig(host_root=node.host_root, options=all_options, stop=stop))
        self.backends.append(backend)
        self.stops[id(backend)] = stop
        return backend

    def watch(self, backend: AscendBackend) -> HealthStream:
        """Start consuming the backend's health stream; it is stopped at teardown."""
        stream = HealthStream(backend, self.stops[id(backend)])
        self.streams.append(stream)
        return stream

    def close(self) -> None:
        for node in self.nodes:
            node.control.clear()
        for stream in self.streams:
            stream.close()
        for backend in self.backends:
            backend.close()


@pytest.fixture(name="ascend")
def ascend_fixture(prepare_fake_ascend_node: Callable[..., FakeAscendNode]) -> Iterator[Harness]:
    harness = Harness(prepare_fake_ascend_node)
    try:
        yield harness
    finally:
        harness.close()


class HealthStream:
    """Consumes ``backend.health_events()`` on a thread, as the core does; waits on conditions only."""

    def __init__(self, backend: AscendBackend, stop: threading.Event) -> None:
        self._stop = stop
        self._events: queue.Queue[HealthEvent | InventoryChanged] = queue.Queue()
        self.seen: list[HealthEvent | InventoryChanged] = []
        self._thread = threading.Thread(target=self._run, args=(backend,), daemon=True)
        self._thread.start()

    def _run(self, backend: AscendBackend) -> None:
        for event in backend.health_events():
            self._events.put(event)

    def next(self, timeout: float = 10.0) -> HealthEvent | InventoryChanged:
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no health event within {timeout}s; seen so far: {self.seen}") from None
        self.seen.append(event)
        return event

    def wait_for(self, device_id: str, health: Health, timeout: float = 10.0) -> HealthEvent:
        """The first event for ``device_id`` with ``health``; events before it stay in :attr:`seen`."""
        while True:
            event = self.next(timeout)
            if isinstance(event, HealthEvent) and event.device_id == device_id and event.health == health:
                return event

    def wait_for_all(
        self, device_ids: Iterable[str], health: Health, timeout: float = 10.0
    ) -> list[HealthEvent]:
        """One event with ``health`` for each of ``device_ids``, in whatever order they come."""
        missing = set(device_ids)
        found: list[HealthEvent] = []
        while missing:
            event = self.next(timeout)
            if isinstance(event, HealthEvent) and event.health == health and event.device_id in missing:
                missing.discard(event.device_id)
                found.append(event)
        return found

    def wait_inventory_changed(self, timeout: float = 10.0) -> InventoryChanged:
        while True:
            event = self.next(timeout)
            if isinstance(event, InventoryChanged):
                return event

    def health_events(self) -> list[tuple[str, Health]]:
        return [(e.device_id, e.health) for e in self.seen if isinstance(e, HealthEvent)]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10.0)
        assert not self._thread.is_alive(), "health stream did not end after stop"
