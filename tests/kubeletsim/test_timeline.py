"""The timeline checker, on hand-built timelines: it must see short overlaps and only real ones."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.kubeletsim.timeline import (
    DOUBLE_ADVERTISED,
    HELD_ELSEWHERE,
    Kind,
    TimelineEvent,
    check_timeline,
    describe,
    strip_replica,
)

A, B = "r/a", "r/b"


def ev(t: float, kind: Kind, resource: str, *ids: str) -> TimelineEvent:
    return TimelineEvent(t, kind, resource, frozenset(ids))


def test_a_move_with_withdrawal_first_is_clean() -> None:
    events = [
        ev(0.0, Kind.LIST, A, "X", "Y"),
        ev(0.0, Kind.LIST, B, "Z"),
        ev(1.0, Kind.LIST, A, "Y"),
        ev(1.001, Kind.LIST, B, "Z", "X"),
    ]
    assert check_timeline(events) == []


def test_a_move_advertised_before_withdrawn_is_an_overlap_with_its_duration() -> None:
    events = [ev(0.0, Kind.LIST, A, "X"), ev(1.0, Kind.LIST, B, "X::0", "X::1"), ev(1.003, Kind.LIST, A)]
    (violation,) = check_timeline(events)
    assert (violation.rule, violation.card, violation.resources) == (DOUBLE_ADVERTISED, "X", (A, B))
    assert violation.duration(last=9.0) == pytest.approx(0.003)
    assert "3.0 ms" in describe([violation], last=9.0)


def test_an_ended_endpoint_advertises_nothing() -> None:
    events = [ev(0.0, Kind.LIST, A, "X"), ev(1.0, Kind.END, A), ev(1.0, Kind.LIST, B, "X")]
    assert check_timeline(events) == []


def test_a_held_card_advertised_elsewhere_until_released() -> None:
    events = [
        ev(0.0, Kind.LIST, A, "X"),
        ev(0.5, Kind.ALLOC, A, "X"),
        ev(1.0, Kind.LIST, A),
        ev(1.1, Kind.LIST, B, "X"),
        ev(2.0, Kind.FREE, A, "X"),
    ]
    (violation,) = check_timeline(events)
    assert (violation.rule, violation.card, violation.start, violation.end) == (HELD_ELSEWHERE, "X", 1.1, 2.0)


def test_holds_count_per_allocation_and_open_violations_have_no_end() -> None:
    events = [
        ev(0.0, Kind.ALLOC, A, "X::0"),
        ev(0.1, Kind.ALLOC, A, "X::1"),
        ev(0.2, Kind.FREE, A, "X::0"),
        ev(0.3, Kind.LIST, B, "X"),  # one replica is still held under A
    ]
    (violation,) = check_timeline(events)
    assert violation.rule == HELD_ELSEWHERE and violation.end is None


def test_partitions_map_to_their_card_through_the_callers_function() -> None:
    parent = {"MIG-1": "GPU-0", "MIG-2": "GPU-0"}
    events = [ev(0.0, Kind.LIST, A, "MIG-1"), ev(0.1, Kind.LIST, B, "MIG-2::3")]
    assert check_timeline(events) == []  # by unit id alone they look unrelated
    (violation,) = check_timeline(events, lambda u: parent.get(strip_replica(u), strip_replica(u)))
    assert violation.card == "GPU-0"


def test_events_are_replayed_in_receive_time_order_not_append_order() -> None:
    """A withdrawal received before the advertisement elsewhere is no overlap, even when its stream's
    thread got the simulator's lock later (appended later); and the reverse is one."""
    appended_late = [ev(0.0, Kind.LIST, A, "X"), ev(1.005, Kind.LIST, B, "X"), ev(1.0, Kind.LIST, A)]
    assert check_timeline(appended_late) == []
    received_late = [ev(0.0, Kind.LIST, A, "X"), ev(1.0, Kind.LIST, B, "X"), ev(1.005, Kind.LIST, A)]
    (violation,) = check_timeline(received_late)
    assert violation.duration(last=9.0) == pytest.approx(0.005)


def test_registrations_and_stream_opens_advertise_nothing_by_themselves() -> None:
    """Kubelet keeps a resource's last list until the new endpoint sends one: a re-registration
    neither clears it (hiding an overlap) nor adds to it."""
    events = [
        ev(0.0, Kind.LIST, A, "X"),
        TimelineEvent(0.5, Kind.REGISTER, A, endpoint="/dp/a.sock"),
        TimelineEvent(0.6, Kind.OPEN, A, endpoint="/dp/a.sock"),
        ev(0.7, Kind.LIST, B, "X"),
        ev(0.9, Kind.LIST, A),
    ]
    (violation,) = check_timeline(events)
    assert (violation.start, violation.end) == (0.7, 0.9)
