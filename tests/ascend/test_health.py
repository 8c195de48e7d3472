"""Health both ways through real DCMI polling of the fake: alarms, drops, hangs, re-init, recovery.

Every wait is on a condition (the next health event) with a bounded timeout. "Did not happen" is shown
by ordering: all chips are polled in the same pass with the same interval, so by the time a second
chip has gone down and up again after a change, the first chip has been polled after that change too.
"""

from __future__ import annotations

import threading

import pytest

from hcs_deviceplugin.backend import BackendAbsent
from hcs_deviceplugin.model import Health, HealthEvent
from tests.ascend.backend_harness import FAST, Harness
from tests.ascend.backend_harness import ascend_fixture as ascend_fixture  # noqa: PLC0414
from vendors.ascend import abi
from vendors.ascend.fake import node_310p_duo, node_910b
from vendors.ascend.health import Reading, classify, parse_codes
from vendors.ascend.library import DcmiError
from vendors.ascend.timeouts import CallTimedOut

FAULT = 0x80E01801


def test_critical_alarm_marks_unhealthy_then_recovers(ascend: Harness) -> None:
    node = ascend.node(node_910b(2))
    backend = ascend.backend(node, FAST)
    chip = backend.discover().cards[1]
    stream = ascend.watch(backend)
    node.control.set_error_codes(1, [FAULT])
    node.control.set_health(1, abi.HEALTH_CRITICAL)

    down = stream.wait_for(chip.id, Health.UNHEALTHY)
    assert down.reason == "critical alarm (health 3), fault codes 0x80E01801"
    assert [c.health for c in backend.discover().cards] == [Health.HEALTHY, Health.UNHEALTHY]

    node.control.set_health(1, abi.HEALTH_OK)
    up = stream.wait_for(chip.id, Health.HEALTHY)
    assert "healthy again" in up.reason and "critical alarm" in up.reason
    assert [c.health for c in backend.discover().cards] == [Health.HEALTHY, Health.HEALTHY]
    assert stream.health_events() == [(chip.id, Health.UNHEALTHY), (chip.id, Health.HEALTHY)]


def test_minor_alarm_and_allow_listed_faults_stay_healthy(ascend: Harness) -> None:
    node = ascend.node(node_910b(3))
    backend = ascend.backend(node, FAST, ignoredFaultCodes=f"0x{FAULT:X}")
    cards = backend.discover().cards
    stream = ascend.watch(backend)
    node.control.set_health(0, abi.HEALTH_MINOR)
    node.control.set_error_codes(1, [FAULT])
    node.control.set_health(1, abi.HEALTH_MAJOR)
    node.control.set_error_codes(2, [FAULT, 0x1])
    node.control.set_health(2, abi.HEALTH_MAJOR)

    down = stream.wait_for(cards[2].id, Health.UNHEALTHY)
    assert down.reason == "major alarm (health 2), fault codes 0x80E01801,0x00000001"
    node.control.set_health(2, abi.HEALTH_OK)
    stream.wait_for(cards[2].id, Health.HEALTHY)
    assert {device for device, _ in stream.health_events()} == {cards[2].id}


def test_dropped_card_is_unhealthy_until_it_is_back(ascend: Harness) -> None:
    node = ascend.node(node_910b(2))
    backend = ascend.backend(node, FAST)
    chip = backend.discover().cards[0]
    stream = ascend.watch(backend)
    node.control.drop(0)
    down = stream.wait_for(chip.id, Health.UNHEALTHY)
    assert down.reason.startswith("card dropped (fault 0x40F84E00): dcmi_get_device_health returned -8012")
    node.control.undrop(0)
    stream.wait_for(chip.id, Health.HEALTHY)


def test_hung_chip_blocks_only_itself(ascend: Harness) -> None:
    node = ascend.node(node_910b(4))
    backend = ascend.backend(node, FAST)
    cards = backend.discover().cards
    stream = ascend.watch(backend)
    node.control.hang(1, 60)

    down = stream.wait_for(cards[1].id, Health.UNHEALTHY)
    assert down.reason == "DCMI call dcmi_get_device_health timed out after 0.3s"
    node.control.set_health(3, abi.HEALTH_CRITICAL)
    stream.wait_for(cards[3].id, Health.UNHEALTHY)
    node.control.set_health(3, abi.HEALTH_OK)
    stream.wait_for(cards[3].id, Health.HEALTHY)
    assert list(backend.blocked_calls()) == [cards[1].id], "the hung call is still blocked"
    assert backend.blocked_calls()[cards[1].id].startswith("dcmi_get_device_health blocked for")

    node.control.hang(1, 0)
    stream.wait_for(cards[1].id, Health.HEALTHY)
    assert backend.blocked_calls() == {}


def test_recovery_waits_for_recovery_seconds(ascend: Harness) -> None:
    node = ascend.node(node_910b(2))
    backend = ascend.backend(node, FAST, recoverySeconds="1000")
    cards = backend.discover().cards
    stream = ascend.watch(backend)
    node.control.set_health(0, abi.HEALTH_CRITICAL)
    stream.wait_for(cards[0].id, Health.UNHEALTHY)
    node.control.set_health(0, abi.HEALTH_OK)
    node.control.drop(1)
    stream.wait_for(cards[1].id, Health.UNHEALTHY)
    assert (cards[0].id, Health.HEALTHY) not in stream.health_events()


def test_removed_card_is_unhealthy_and_a_new_card_asks_for_discovery(ascend: Harness) -> None:
    node = ascend.node(node_310p_duo(2))
    node.control.remove_card(2)
    backend = ascend.backend(node, FAST)
    assert len(backend.discover().cards) == 2
    stream = ascend.watch(backend)
    node.control.restore_card(2)
    assert "new card(s) [2]" in stream.wait_inventory_changed().reason
    cards = backend.discover().cards
    assert len(cards) == 4

    node.control.remove_card(1)
    down = stream.wait_for(cards[0].id, Health.UNHEALTHY)
    assert "-8008" in down.reason
    node.control.restore_card(1)
    stream.wait_for(cards[0].id, Health.HEALTHY)


def test_library_failing_everywhere_is_reinitialised(ascend: Harness) -> None:
    node = ascend.node(node_910b(2))
    backend = ascend.backend(node, FAST)
    cards = backend.discover().cards
    stream = ascend.watch(backend)
    node.control.fail_init(-8005)
    with pytest.raises(BackendAbsent, match="dcmi_init failed"):
        ascend.backend(node)  # a second init fails: the library now answers -8005 to everyone
    down = {e.reason for e in stream.wait_for_all([c.id for c in cards], Health.UNHEALTHY)}
    assert down == {"DCMI failing: dcmi_get_device_health returned -8005 (ERR_CODE_INNER_ERR)"}
    node.control.fail_init(0)
    stream.wait_for_all([c.id for c in cards], Health.HEALTHY)  # only a new dcmi_init can have healed it


def test_chip_stale_at_discovery_comes_back_healthy(ascend: Harness) -> None:
    node = ascend.node(node_910b(3))
    backend = ascend.backend(node, FAST)
    backend.discover()
    node.control.drop(2)
    stale = backend.discover().cards[2]
    assert stale.health is Health.UNHEALTHY
    stream = ascend.watch(backend)
    node.control.undrop(2)
    up = stream.wait_for(stale.id, Health.HEALTHY)
    assert "reported Unhealthy by discovery" in up.reason or "card dropped" in up.reason


def test_vnpus_follow_their_chip(ascend: Harness) -> None:
    node = ascend.node(node_910b(2))
    backend = ascend.backend(node, FAST)
    chip = backend.discover().cards[0]
    made = backend.partition(chip, "vir10_3c_32g", 2)
    stream = ascend.watch(backend)
    node.control.set_health(0, abi.HEALTH_MAJOR)
    stream.wait_for(chip.id, Health.UNHEALTHY)
    inventory = backend.discover()
    assert {p.id: p.health for p in inventory.partitions} == {p.id: Health.UNHEALTHY for p in made}


def test_stream_ends_soon_after_stop(ascend: Harness) -> None:
    backend = ascend.backend(ascend.node(node_910b(1)), healthIntervalSeconds="30")
    backend.discover()
    done = threading.Event()
    stop = ascend.stops[id(backend)]

    def consume() -> None:
        for _ in backend.health_events():
            pass
        done.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    stop.set()
    assert done.wait(5.0)


@pytest.mark.parametrize(
    ("reading", "ignored", "reason"),
    [
        (Reading(value=0), frozenset(), None),
        (Reading(value=1, codes=(FAULT,)), frozenset(), None),
        (Reading(value=2), frozenset(), "major alarm (health 2)"),
        (Reading(value=3, codes=(FAULT,)), frozenset({FAULT}), None),
        (
            Reading(value=3, codes=(FAULT, 2)),
            frozenset({FAULT}),
            "critical alarm (health 3), fault codes 0x80E01801,0x00000002",
        ),
        (Reading(value=0xFFFFFFFF), frozenset(), "device absent (health 0xFFFFFFFF)"),
        (Reading(value=4), frozenset(), "unknown health value 4"),
        (
            Reading(error=DcmiError(-8010, "dcmi_get_device_health")),
            frozenset(),
            "DCMI failing: dcmi_get_device_health returned -8010 (ERR_CODE_SEND_MSG_FAIL)",
        ),
        (
            Reading(error=CallTimedOut("dcmi_get_device_health", 5)),
            frozenset(),
            "DCMI call dcmi_get_device_health timed out after 5s",
        ),
    ],
)
def test_classification_policy(reading: Reading, ignored: frozenset[int], reason: str | None) -> None:
    assert classify(reading, ignored) == reason


def test_fault_code_lists() -> None:
    assert parse_codes(" 0x80E01801, 17 ,") == {0x80E01801, 17}
    with pytest.raises(ValueError, match="'x'"):
        parse_codes("x")


def test_health_events_are_only_changes(ascend: Harness) -> None:
    node = ascend.node(node_910b(2))
    backend = ascend.backend(node, FAST)
    cards = backend.discover().cards
    stream = ascend.watch(backend)
    node.control.set_health(0, abi.HEALTH_CRITICAL)
    stream.wait_for(cards[0].id, Health.UNHEALTHY)
    node.control.set_health(1, abi.HEALTH_MAJOR)
    stream.wait_for(cards[1].id, Health.UNHEALTHY)
    node.control.set_health(1, abi.HEALTH_OK)
    stream.wait_for(cards[1].id, Health.HEALTHY)
    events = [e for e in stream.seen if isinstance(e, HealthEvent)]
    assert [(e.device_id, e.health) for e in events] == [
        (cards[0].id, Health.UNHEALTHY),
        (cards[1].id, Health.UNHEALTHY),
        (cards[1].id, Health.HEALTHY),
    ], "chip 0 polled many times while critical, reported once"


def test_a_restarted_stream_can_still_report_recovery(ascend: Harness) -> None:
    node = ascend.node(node_910b(2))
    backend = ascend.backend(node, FAST)
    cards = backend.discover().cards
    first = ascend.watch(backend)
    node.control.set_health(1, abi.HEALTH_CRITICAL)
    first.wait_for(cards[1].id, Health.UNHEALTHY)
    first.close()  # the daemon opens a new stream after a failure; the chip is still Unhealthy

    ascend.stops[id(backend)].clear()
    second = ascend.watch(backend)
    node.control.set_health(1, abi.HEALTH_OK)
    second.wait_for(cards[1].id, Health.HEALTHY)
    assert {c.health for c in backend.discover().cards} == {Health.HEALTHY}
