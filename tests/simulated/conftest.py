"""Shared helpers: building backends from inline descriptions and draining health streams safely."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from hcs_deviceplugin.model import HealthEvent
from vendors.simulated import SimulatedBackend, parse_node_description

WAIT = 3.0
"""Upper bound for anything a test waits on; generous so a loaded CI machine does not flake."""


def card(card_id: str, **extra: Any) -> dict[str, Any]:
    """A minimal valid card entry for inline descriptions."""
    return {"id": card_id, "vendor": "nvidia", "model": "NVIDIA H100 80GB HBM3", **extra}


def make_backend(data: dict[str, Any], stop: threading.Event | None = None) -> SimulatedBackend:
    return SimulatedBackend(parse_node_description(data, "test"), stop=stop)


@dataclass
class Drain:
    """A health stream consumed on its own thread, as the core does, with arrival times."""

    stop: threading.Event
    thread: threading.Thread
    started: float
    received: queue.Queue[tuple[float, HealthEvent]] = field(default_factory=queue.Queue)

    def next(self, timeout: float = WAIT) -> tuple[float, HealthEvent]:
        """The next event and its arrival, in seconds since the drain started; fails after ``timeout``."""
        try:
            return self.received.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no health event within {timeout} s")

    def assert_quiet(self, seconds: float) -> None:
        with pytest.raises(queue.Empty):
            self.received.get(timeout=seconds)


@pytest.fixture
def drain() -> Iterator[Callable[[SimulatedBackend, threading.Event], Drain]]:
    """Start consuming a backend's stream on a thread; stop and join it at teardown."""
    drains: list[Drain] = []

    def start(backend: SimulatedBackend, stop: threading.Event) -> Drain:
        stream = backend.health_events()
        started = time.monotonic()
        result: queue.Queue[tuple[float, HealthEvent]] = queue.Queue()

        def run() -> None:
            for event in stream:
                result.put((time.monotonic() - started, event))

        thread = threading.Thread(target=run, name="health-drain", daemon=True)
        d = Drain(stop=stop, thread=thread, started=started, received=result)
        drains.append(d)
        thread.start()
        return d

    yield start
    for d in drains:
        d.stop.set()
        d.thread.join(WAIT)
        assert not d.thread.is_alive(), "health stream did not end after stop"
