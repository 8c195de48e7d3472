"""The pure fold of events into NodeState: what each event means, without threads."""

from __future__ import annotations

from hcs_deviceplugin.daemon.events import (
    BackendFailed,
    HealthChanged,
    HeldListed,
    LaidOut,
    PoolsChanged,
    Recompute,
    Rediscovered,
    Stop,
)
from hcs_deviceplugin.daemon.state import NodeState, fold, start_layouts
from hcs_deviceplugin.layouts import LayoutRequest
from hcs_deviceplugin.model import Card, Health, HealthEvent, Inventory, Partition, Pool, PoolSet

A = Card("GPU-A", "sim", "v", "m", 0)
B = Card("GPU-B", "sim", "v", "m", 1)
INV = Inventory(cards=(A, B))
POOLS = PoolSet((Pool("p", "gpu.deckhouse.io/p"),))
REQUEST = LayoutRequest("GPU-A", "sim", "1g", "p")


def with_inventory() -> NodeState:
    return fold(NodeState(), Rediscovered("sim", INV)).state


def test_pools_change_replaces_poolset_and_errors_and_forgets_layout_failures() -> None:
    state = with_inventory()
    state = fold(state, LaidOut(REQUEST, None, "no MIG")).state
    assert state.layout_attempts == {("GPU-A", "1g"): "no MIG"}
    same = fold(state, PoolsChanged(PoolSet(), ("bad file",)))
    assert same.changed and same.state.config_errors == ("bad file",)
    assert same.state.layout_attempts == {("GPU-A", "1g"): "no MIG"}  # same (empty) poolset: kept
    changed = fold(state, PoolsChanged(POOLS, ())).state
    assert changed.poolset == POOLS and changed.layout_attempts == {}


def test_health_change_is_a_change_once_and_reports_one_transition() -> None:
    state = with_inventory()
    first = fold(state, HealthChanged("sim", HealthEvent("GPU-A", Health.UNHEALTHY, "xid 79")))
    assert first.changed and first.state.health["GPU-A"] is Health.UNHEALTHY
    assert [(t.device_id, t.health, t.reason) for t in first.transitions] == [
        ("GPU-A", Health.UNHEALTHY, "xid 79")
    ]
    again = fold(first.state, HealthChanged("sim", HealthEvent("GPU-A", Health.UNHEALTHY, "xid 79")))
    assert not again.changed and again.transitions == ()


def test_backend_failure_marks_only_its_cards_unhealthy() -> None:
    other = Inventory(cards=(Card("X", "other", "v", "m", 0),))
    state = fold(with_inventory(), Rediscovered("other", other)).state
    failed = fold(state, BackendFailed("sim", "library gone"))
    assert failed.state.failed == {"sim": "library gone"}
    assert failed.state.health == {"GPU-A": Health.UNHEALTHY, "GPU-B": Health.UNHEALTHY}
    assert {t.device_id for t in failed.transitions} == {"GPU-A", "GPU-B"}


def test_rediscovery_clears_failure_and_health_overrides_of_that_backend() -> None:
    state = fold(with_inventory(), BackendFailed("sim", "boom")).state
    back = fold(state, Rediscovered("sim", INV)).state
    assert back.failed == {} and back.health == {}
    assert back.inventory().cards == (A, B)


def test_held_listing_marks_holds_known_and_reports_when_it_started() -> None:
    listed = {"gpu.deckhouse.io/p": frozenset({"GPU-A"})}
    first = fold(with_inventory(), HeldListed(listed, 12.5))
    assert first.changed and first.state.held_known and first.listed_at == 12.5
    same = fold(first.state, HeldListed(listed, 13.0))
    assert not same.changed and same.listed_at == 13.0


def test_layouts_in_flight_are_remembered_until_their_result() -> None:
    state = start_layouts(with_inventory(), frozenset({("GPU-A", "1g")}))
    assert state.layouts_running == {("GPU-A", "1g")}
    parts = Inventory(cards=(A, B), partitions=(Partition("MIG-1", "GPU-A", "1g"),))
    done = fold(state, LaidOut(REQUEST, parts)).state
    assert done.layouts_running == frozenset()
    assert done.layout_attempts == {("GPU-A", "1g"): ""}
    assert done.inventory().partitions == parts.partitions


def test_recompute_is_a_change_and_stop_is_not() -> None:
    state = with_inventory()
    assert fold(state, Recompute("holds")).changed
    assert not fold(state, Stop()).changed
