"""``/report``: the node report in the ComputeNode device shape, and its health-score rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hcs_deviceplugin.model import Card, Health, Unit
from hcs_deviceplugin.observability.report import allocated_bytes, health_score
from tests.integration.conftest import H100, resource
from tests.observability.conftest import ABSENT, H100_BYTES, NODE_NAME, Busy


def fetch(busy: Busy) -> dict[str, Any]:
    status, body = busy.obs.get("/report")
    assert status == 200, body
    report: dict[str, Any] = json.loads(body)
    return report


def device(report: dict[str, Any], card: str) -> dict[str, Any]:
    (found,) = [d for d in report["devices"] if d["id"] == card]
    return dict(found)


def test_report_top_level_shape(busy: Busy) -> None:
    report = fetch(busy)
    assert set(report) == {
        "node",
        "devices",
        "allocations",
        "pools",
        "conflicts",
        "draining",
        "configErrors",
        "layoutErrors",
        "backends",
    }
    assert report["node"] == NODE_NAME
    assert len(report["devices"]) == 10
    assert report["conflicts"] == [] and report["draining"] == [] and report["configErrors"] == []
    assert report["backends"] == [
        {"name": "ascend", "state": "absent", "reason": ABSENT["ascend"]},
        {"name": "simulated", "state": "running", "reason": ""},
    ]


def test_held_card_reports_its_pool_units_vram_and_links(busy: Busy) -> None:
    held = device(fetch(busy), busy.held_card)
    assert held["vendor"] == "nvidia" and held["model"] == "NVIDIA H100 80GB HBM3"
    assert held["vram"] == H100_BYTES
    assert held["vramAllocatable"] == H100_BYTES
    assert held["vramAllocated"] == H100_BYTES
    assert held["healthScore"] == 100 and held["health"] == "Healthy"
    assert held["pool"] == "a"
    assert held["units"] == [busy.held_card]
    assert held["heldUnits"] == [busy.held_card]
    assert held["heldResource"] == resource("a")
    assert held["heldBy"] == ["default/trainer/main"]
    topology = held["topology"]
    assert topology["numaNode"] in (0, 1) and topology["busId"].startswith("0000:")
    assert {link["peer"] for link in topology["links"]} == set(H100) - {busy.held_card}
    assert all(
        (link["type"], link["count"], link["bandwidth"]) == ("NVLink", 6, 1200.0)
        for link in topology["links"]
    )


def test_allocations_name_the_pod_container_and_card(busy: Busy) -> None:
    assert fetch(busy)["allocations"] == [
        {
            "namespace": "default",
            "pod": "trainer",
            "container": "main",
            "resource": resource("a"),
            "device": busy.held_card,
            "card": busy.held_card,
        }
    ]


def test_free_sick_and_unassigned_cards(busy: Busy) -> None:
    report = fetch(busy)
    free = device(report, busy.free_card)
    assert (free["vramAllocated"], free["heldUnits"], free["heldResource"]) == (0, [], None)
    assert free["heldBy"] == []
    assert free["vramAllocatable"] == H100_BYTES

    sick = device(report, busy.sick_card)
    assert sick["healthScore"] == 0 and sick["health"] == "Unhealthy"
    assert sick["pool"] == "b" and sick["units"] == [f"{busy.sick_card}::0", f"{busy.sick_card}::1"]
    assert sick["vramAllocatable"] == 0

    mig_card = device(report, H100[3])
    assert mig_card["pool"] is None and mig_card["units"] == [] and mig_card["vramAllocatable"] == 0
    assert mig_card["topology"] == {
        "busId": "0000:bb:00.0",
        "numaNode": 1,
        "links": [
            {"peer": peer, "type": "NVLink", "count": 6, "bandwidth": 1200.0} for peer in sorted(H100[:3])
        ],
    }


def test_pools_in_the_report(busy: Busy) -> None:
    pools = {p["name"]: p for p in fetch(busy)["pools"]}
    assert pools["a"] == {
        "name": "a",
        "resource": resource("a"),
        "mode": "Exclusive",
        "unit": "Card",
        "slicesPerUnit": 1,
        "profile": None,
        "sharing": None,
        "memoryPerReplica": None,
        "units": 2,
        "healthy": 2,
        "allocated": 1,
        "registration": {"status": "registered", "registrations": 1, "lastError": "", "openStreams": 1},
    }
    assert (pools["b"]["mode"], pools["b"]["slicesPerUnit"]) == ("TimeSlice", 2)
    assert (pools["b"]["units"], pools["b"]["healthy"], pools["b"]["allocated"]) == (2, 0, 0)


CARD = Card("c", backend="fake", vendor="v", model="m", index=0, memory_bytes=8 << 30)


def units(healthy: int, unhealthy: int = 0) -> list[Unit]:
    good = [Unit(f"p{i}", card_id="c", backend="fake") for i in range(healthy)]
    bad = [Unit(f"q{i}", card_id="c", backend="fake", health=Health.UNHEALTHY) for i in range(unhealthy)]
    return good + bad


@pytest.mark.parametrize(
    ("case", "card", "card_units", "flags", "score"),
    [
        ("healthy, advertised", CARD, units(1), {}, 100),
        ("healthy, in no pool", CARD, [], {}, 100),
        ("card unhealthy", Card("c", "fake", "v", "m", 0, health=Health.UNHEALTHY), units(1), {}, 0),
        ("backend failed", CARD, units(1), {"backend_failed": True}, 0),
        ("one of two partitions bad", CARD, units(1, 1), {}, 50),
        ("draining", CARD, [], {"draining": True}, 75),
        ("in a pool conflict", CARD, [], {"conflicted": True}, 50),
        (
            "draining and conflict and a bad partition",
            CARD,
            units(1, 1),
            {"draining": True, "conflicted": True},
            0,
        ),
    ],
)
def test_health_score_rule(
    case: str, card: Card, card_units: list[Unit], flags: dict[str, bool], score: int
) -> None:
    assert health_score(card, card_units, **flags) == score, case


def test_allocated_bytes_is_the_held_share() -> None:
    assert allocated_bytes(CARD, units(4), []) == 0
    assert allocated_bytes(CARD, units(4), ["p0"]) == 2 << 30  # one time-slice of four
    assert allocated_bytes(CARD, units(1), ["p0"]) == 8 << 30
    assert allocated_bytes(CARD, [], ["c"]) == 8 << 30  # held while draining: all of it
