"""Health both ways through real NVML events from the fake: Xids, lost GPUs, a failing library, recovery.

Every wait is on a condition (the next health event) with a bounded timeout; recovery times are
short so the tests stay fast, and "did not happen" is shown by ordering, never by sleeping.
"""

from __future__ import annotations

import threading

import pytest

from hcs_deviceplugin.model import Health
from tests.nvidia.conftest import Harness
from vendors.nvidia.fake.node import mig_node, pcie_node
from vendors.nvidia.health import DEFAULT_IGNORED_XIDS, RecoveryTracker, XidPolicy

FAST = {"healthWaitMs": "50", "recoverySeconds": "0.2", "retryBackoffSeconds": "0.05"}


def test_critical_xid_marks_unhealthy_then_recovers(nvidia: Harness) -> None:
    node = nvidia.node(pcie_node(2))
    backend = nvidia.backend(node, FAST)
    card = backend.discover().cards[1]
    stream = nvidia.watch(backend)
    node.control.xid(1, 79)

    down = stream.wait_for(card.id, Health.UNHEALTHY)
    assert down.reason == "critical Xid 79"
    assert [c.health for c in backend.discover().cards] == [Health.HEALTHY, Health.UNHEALTHY]

    up = stream.wait_for(card.id, Health.HEALTHY)
    assert "NVML answers" in up.reason
    assert [c.health for c in backend.discover().cards] == [Health.HEALTHY, Health.HEALTHY]
    assert [e.device_id for e in stream.seen] == [card.id, card.id]


def test_application_xids_are_ignored(nvidia: Harness) -> None:
    node = nvidia.node(pcie_node(2))
    backend = nvidia.backend(node, FAST)
    cards = backend.discover().cards
    stream = nvidia.watch(backend)
    for xid in sorted(DEFAULT_IGNORED_XIDS):
        node.control.xid(0, xid)
    node.control.xid(1, 48)  # delivered after the ignored ones: its event proves they were seen and dropped
    assert stream.next().device_id == cards[1].id
    assert [e.device_id for e in stream.seen] == [cards[1].id]


def test_ignored_xids_are_configurable(nvidia: Harness) -> None:
    node = nvidia.node(pcie_node(2))
    backend = nvidia.backend(node, FAST, ignoredXids="79,94")
    cards = backend.discover().cards
    stream = nvidia.watch(backend)
    node.control.xid(0, 94)
    node.control.xid(1, 13)  # no longer in the ignore list
    event = stream.next()
    assert (event.device_id, event.health, event.reason) == (cards[1].id, Health.UNHEALTHY, "critical Xid 13")


def test_upstream_healthcheck_env_vars(nvidia: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DP_DISABLE_HEALTHCHECKS", "xids")
    monkeypatch.setenv("DP_ENABLE_HEALTHCHECKS", "48")
    node = nvidia.node(pcie_node(2))
    backend = nvidia.backend(node, FAST)
    cards = backend.discover().cards
    stream = nvidia.watch(backend)
    node.control.xid(0, 79)
    node.control.xid(1, 48)
    assert stream.next().device_id == cards[1].id


def test_all_checks_disabled_gives_an_idle_stream_that_stops(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(pcie_node(1)), FAST, disableHealthChecks="all")
    stream = nvidia.watch(backend)
    stream.close()
    assert stream.seen == []


def test_event_sent_before_the_stream_started_is_delivered(nvidia: Harness) -> None:
    node = nvidia.node(pcie_node(2))
    backend = nvidia.backend(node, FAST)
    card = backend.discover().cards[0]
    node.control.xid(0, 79)
    stream = nvidia.watch(backend)
    assert stream.wait_for(card.id, Health.UNHEALTHY).reason == "critical Xid 79"


def test_scheduled_events_in_the_node_file(nvidia: Harness) -> None:
    description = pcie_node(2)
    description["events"] = [{"after_ms": 0, "op": "xid", "gpu": 1, "xid": 94}]
    node = nvidia.node(description)
    backend = nvidia.backend(node, FAST)
    cards = backend.discover().cards
    stream = nvidia.watch(backend)
    assert stream.wait_for(cards[1].id, Health.UNHEALTHY).reason == "critical Xid 94"


def test_card_without_event_support_is_not_unhealthy(nvidia: Harness) -> None:
    description = pcie_node(2)
    description["not_supported"] = ["nvmlDeviceRegisterEvents"]  # a driver too old for events (PR #1562)
    node = nvidia.node(description)
    backend = nvidia.backend(node, FAST)
    cards = backend.discover().cards
    node.control.lost(1)
    stream = nvidia.watch(backend)
    # Card 0 is tried first in the same registration pass, so an event for it would come first.
    first = stream.next()
    assert (first.device_id, first.health) == (cards[1].id, Health.UNHEALTHY)
    node.control.restore(1)
    stream.wait_for(cards[1].id, Health.HEALTHY)
    assert cards[0].id not in {e.device_id for e in stream.seen}


def test_non_xid_events_are_skipped(nvidia: Harness) -> None:
    node = nvidia.node(pcie_node(2))
    backend = nvidia.backend(node, FAST)
    cards = backend.discover().cards
    stream = nvidia.watch(backend)
    node.control.event(0, 0x2)  # double-bit ECC: logged, as upstream, not acted on
    node.control.xid(1, 79)
    assert stream.next().device_id == cards[1].id


def test_xid_on_a_mig_device_marks_only_that_device(nvidia: Harness) -> None:
    node = nvidia.node(mig_node())
    backend = nvidia.backend(node, FAST)
    inventory = backend.discover()
    single = inventory.cards[1]
    part = [p for p in inventory.partitions if p.card_id == single.id][2]
    stream = nvidia.watch(backend)

    node.control.xid(part.id, 79)  # the fake fills in the instance ids of that MIG device
    event = stream.next()
    assert (event.device_id, event.health) == (part.id, Health.UNHEALTHY)
    after = backend.discover()
    assert [p.id for p in after.partitions if p.health == Health.UNHEALTHY] == [part.id]
    assert {c.health for c in after.cards} == {Health.HEALTHY}

    node.control.xid(1, 79)  # no instance ids: the whole card, and with it every MIG device
    assert stream.wait_for(single.id, Health.UNHEALTHY)
    unhealthy = {p.id for p in backend.discover().partitions if p.health == Health.UNHEALTHY}
    assert unhealthy == {p.id for p in inventory.partitions if p.card_id == single.id}
    assert stream.wait_for(part.id, Health.HEALTHY)
    assert stream.wait_for(single.id, Health.HEALTHY)


def test_lost_gpu_is_unhealthy_until_it_answers_again(nvidia: Harness) -> None:
    node = nvidia.node(pcie_node(2))
    backend = nvidia.backend(node, {**FAST, "recoverySeconds": "0.05"})
    cards = backend.discover().cards
    stream = nvidia.watch(backend)
    node.control.xid(0, 79)
    stream.wait_for(cards[0].id, Health.UNHEALTHY)  # the loop is running with both cards registered

    node.control.lost(1)
    down = stream.wait_for(cards[1].id, Health.UNHEALTHY)
    assert "GPU is lost" in down.reason
    assert [c.health for c in backend.discover().cards][1] == Health.UNHEALTHY

    # Card 0 recovers, goes down again and recovers again: that second recovery is due after card 1's
    # was, so card 1 has been probed by then and, not answering, stayed Unhealthy.
    stream.wait_for(cards[0].id, Health.HEALTHY)
    node.control.xid(0, 79)
    stream.wait_for(cards[0].id, Health.UNHEALTHY)
    stream.wait_for(cards[0].id, Health.HEALTHY)
    assert (cards[1].id, Health.HEALTHY) not in [(e.device_id, e.health) for e in stream.seen]

    node.control.restore(1)
    stream.wait_for(cards[1].id, Health.HEALTHY)
    assert {c.health for c in backend.discover().cards} == {Health.HEALTHY}


def test_gpu_lost_before_registration_is_registered_once_back(nvidia: Harness) -> None:
    node = nvidia.node(pcie_node(2))
    backend = nvidia.backend(node, FAST)
    cards = backend.discover().cards
    node.control.lost(1)
    stream = nvidia.watch(backend)
    down = stream.wait_for(cards[1].id, Health.UNHEALTHY)
    assert down.reason.startswith("NVML event registration failed")
    node.control.restore(1)
    stream.wait_for(cards[1].id, Health.HEALTHY)
    node.control.xid(1, 79)  # registered now: its Xids arrive
    assert stream.wait_for(cards[1].id, Health.UNHEALTHY).reason == "critical Xid 79"


def test_library_failing_at_run_time_marks_all_and_recovers(nvidia: Harness) -> None:
    node = nvidia.node(pcie_node(3))
    backend = nvidia.backend(node, FAST)
    cards = backend.discover().cards
    stream = nvidia.watch(backend)

    node.control.fail(999)
    down = {stream.next().device_id for _ in cards}
    assert down == {c.id for c in cards}
    assert {e.health for e in stream.seen} == {Health.UNHEALTHY}

    node.control.heal()
    # Every card comes back, in whatever order the monitor probes them (registration may or may not
    # have happened before the failure, which changes the order).
    up: set[str] = set()
    while up != {c.id for c in cards}:
        event = stream.next()
        if event.health is Health.HEALTHY:
            up.add(event.device_id)


def test_stream_ends_soon_after_stop(nvidia: Harness) -> None:
    backend = nvidia.backend(nvidia.node(pcie_node(1)), healthWaitMs="300")
    done = threading.Event()
    stop = nvidia.stops[id(backend)]

    def consume() -> None:
        for _ in backend.health_events():
            pass
        done.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    stop.set()
    assert done.wait(5.0)  # one wait of at most healthWaitMs, then the loop sees stop


@pytest.mark.parametrize(
    ("ignored", "disable", "enable", "critical", "harmless"),
    [
        (None, None, None, {79, 48, 94, 999}, set(DEFAULT_IGNORED_XIDS)),
        ("", None, None, {13, 79}, set()),
        ("79", None, None, {13}, {79}),
        (None, "94, 95,oops", None, {79}, {13, 94, 95}),
        (None, "all", None, set(), {79, 48}),
        (None, "xids", "48,13", {48, 13}, {79}),
        (None, None, "31", {31, 79}, {13}),
    ],
)
def test_xid_policy(
    ignored: str | None, disable: str | None, enable: str | None, critical: set[int], harmless: set[int]
) -> None:
    policy = XidPolicy.parse(ignored, disable, enable)
    assert {x for x in critical | harmless if policy.is_critical(x)} == critical


def test_recovery_tracker_waits_for_quiet_time_and_retries_probes() -> None:
    tracker = RecoveryTracker(recovery_seconds=60, retry_seconds=1)
    assert tracker.mark("gpu", "gpu", "Xid 79", now=0)
    assert not tracker.mark("gpu", "gpu", "Xid 79", now=30)  # already Unhealthy: no new event
    assert tracker.due(now=89) == []
    assert tracker.due(now=90) == [("gpu", "gpu")]
    tracker.probe_failed("gpu", now=90)
    assert tracker.due(now=90.5) == []
    assert tracker.seconds_to_next_probe(now=90.5) == 0.5
    tracker.clear("gpu")
    assert tracker.due(now=1000) == []


def test_negative_recovery_time_never_recovers() -> None:
    tracker = RecoveryTracker(recovery_seconds=-1, retry_seconds=1)
    tracker.mark("gpu", "gpu", "Xid 79", now=0)
    assert tracker.due(now=1e9) == []
    assert tracker.seconds_to_next_probe(now=0) is None
