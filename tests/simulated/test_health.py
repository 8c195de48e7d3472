"""Health: scripted events, injected events, discovery agreeing with the stream, and stopping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from hcs_deviceplugin.model import Health, HealthEvent
from tests.simulated.conftest import WAIT, Drain, card, make_backend
from vendors.simulated import SimulatedBackend

Starter = Callable[[SimulatedBackend, threading.Event], Drain]

UNHEALTHY = Health.UNHEALTHY
HEALTHY = Health.HEALTHY


def wait_until(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    """Poll a cheap condition; tests use it only for state that has no event to wait on."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(0.01)


def test_scripted_events_arrive_in_order_not_early(drain: Starter) -> None:
    stop = threading.Event()
    before = time.monotonic()
    backend = make_backend(
        {
            "cards": [card("a"), card("b")],
            "events": [
                {"after": 0.3, "device": "a", "health": "Healthy", "reason": "recovered"},
                {"after": 0.15, "device": "a", "health": "Unhealthy", "reason": "XID 79"},
                {"after": 0.2, "device": "b", "health": "Unhealthy", "reason": "XID 48"},
            ],
        },
        stop,
    )
    d = drain(backend, stop)
    got = [d.next() for _ in range(3)]
    assert [e for _, e in got] == [
        HealthEvent("a", UNHEALTHY, "XID 79"),
        HealthEvent("b", UNHEALTHY, "XID 48"),
        HealthEvent("a", HEALTHY, "recovered"),
    ]
    offset = d.started - before
    for (arrived, _), due in zip(got, (0.15, 0.2, 0.3), strict=True):
        assert arrived + offset >= due - 0.005, "a scripted event came before its time"
        assert arrived < due + 2.0
    d.assert_quiet(0.2)


def test_discover_reflects_scripted_events_without_a_stream() -> None:
    backend = make_backend(
        {"cards": [card("a")], "events": [{"after": 0.05, "device": "a", "health": "Unhealthy"}]}
    )
    wait_until(lambda: backend.discover().cards[0].health is UNHEALTHY)


def test_inject_reaches_stream_and_discover(drain: Starter) -> None:
    stop = threading.Event()
    backend = make_backend({"cards": [card("a"), card("b")]}, stop)
    d = drain(backend, stop)
    backend.inject(HealthEvent("b", UNHEALTHY, "ECC"))
    assert d.next()[1] == HealthEvent("b", UNHEALTHY, "ECC")
    assert [c.health for c in backend.discover().cards] == [HEALTHY, UNHEALTHY]
    backend.inject(HealthEvent("b", HEALTHY, "ok"))
    assert d.next()[1] == HealthEvent("b", HEALTHY, "ok")
    assert [c.health for c in backend.discover().cards] == [HEALTHY, HEALTHY]


def test_inject_unknown_device_is_refused() -> None:
    backend = make_backend({"cards": [card("a")]})
    with pytest.raises(ValueError, match="no simulated card or partition with id 'z'"):
        backend.inject(HealthEvent("z", UNHEALTHY))


def test_every_open_stream_gets_every_event(drain: Starter) -> None:
    stop = threading.Event()
    backend = make_backend({"cards": [card("a")]}, stop)
    first, second = drain(backend, stop), drain(backend, stop)
    backend.inject(HealthEvent("a", UNHEALTHY))
    assert first.next()[1] == second.next()[1] == HealthEvent("a", UNHEALTHY)


def test_stream_subscribes_when_opened_not_when_iterated() -> None:
    stop = threading.Event()
    backend = make_backend({"cards": [card("a")]}, stop)
    stream = backend.health_events()
    backend.inject(HealthEvent("a", UNHEALTHY, "between discover and iteration"))
    assert next(stream) == HealthEvent("a", UNHEALTHY, "between discover and iteration")
    stop.set()
    assert list(stream) == []


def test_events_before_a_stream_opens_are_in_discover_not_replayed(drain: Starter) -> None:
    stop = threading.Event()
    backend = make_backend({"cards": [card("a")]}, stop)
    backend.inject(HealthEvent("a", UNHEALTHY))
    d = drain(backend, stop)
    assert backend.discover().cards[0].health is UNHEALTHY
    d.assert_quiet(0.2)


def test_card_event_makes_its_partitions_unhealthy() -> None:
    backend = make_backend(
        {"cards": [card("a", partitions=[{"id": "p1", "profile": "1g"}, {"id": "p2", "profile": "1g"}])]}
    )
    backend.inject(HealthEvent("p1", UNHEALTHY))
    assert [p.health for p in backend.discover().partitions] == [UNHEALTHY, HEALTHY]
    backend.inject(HealthEvent("a", UNHEALTHY))
    assert [p.health for p in backend.discover().partitions] == [UNHEALTHY, UNHEALTHY]
    backend.inject(HealthEvent("a", HEALTHY))
    inventory = backend.discover()
    assert inventory.cards[0].health is HEALTHY
    assert [p.health for p in inventory.partitions] == [UNHEALTHY, HEALTHY], "p1's own fault remains"


def test_stop_ends_a_waiting_stream_promptly() -> None:
    stop = threading.Event()
    backend = make_backend(
        {"cards": [card("a")], "events": [{"after": 60, "device": "a", "health": "Unhealthy"}]}, stop
    )
    ended = threading.Event()

    def consume() -> None:
        for _ in backend.health_events():
            pass
        ended.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    stopped_at = time.monotonic()
    stop.set()
    assert ended.wait(WAIT), "stream did not end after stop"
    thread.join(WAIT)
    assert time.monotonic() - stopped_at < 1.0


def test_stream_of_a_stopped_backend_is_empty() -> None:
    stop = threading.Event()
    stop.set()
    backend = make_backend({"cards": [card("a")]}, stop)
    assert list(backend.health_events()) == []


def test_abandoned_streams_do_not_accumulate_events() -> None:
    backend = make_backend({"cards": [card("a")]})
    for _ in range(3):
        backend.health_events()  # opened and dropped without iterating
    backend.inject(HealthEvent("a", UNHEALTHY))
    assert len(backend._subscribers) == 0
