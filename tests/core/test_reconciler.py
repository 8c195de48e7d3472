"""The reconciler's decisions as tables: placement, conflicts, draining, units and the diff."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.model import (
    Card,
    DeviceSelector,
    Health,
    Inventory,
    Partition,
    Pool,
    PoolSet,
    SharingRequest,
    UnitKind,
)
from hcs_deviceplugin.reconciler import HeldCard, desired_state, plan_changes, shared_as_now, sharing_requests

CARDS = tuple(
    Card(id=f"GPU-{i}", backend="simulated", vendor="v", model="m", index=i, numa_node=i // 2)
    for i in range(4)
)
PARTS = (
    Partition("MIG-a", "GPU-3", "1g.10gb"),
    Partition("MIG-b", "GPU-3", "1g.10gb"),
    Partition("MIG-c", "GPU-3", "3g.40gb"),
)
INVENTORY = Inventory(cards=CARDS, partitions=PARTS)


def pool(name: str, *cards: str, **kw: object) -> Pool:
    return Pool(
        name=name,
        resource_name=f"gpu.deckhouse.io/{name}",
        devices=tuple(DeviceSelector(uuid=c) for c in cards),
        **kw,  # type: ignore[arg-type]
    )


def ids(poolset: PoolSet, **kw: object) -> dict[str, list[str]]:
    desired = desired_state(poolset, INVENTORY, "node-1", **kw)  # type: ignore[arg-type]
    return {name: [u.id for u in d.units] for name, d in desired.pools.items()}


def test_exclusive_pools_get_their_cards_in_id_order() -> None:
    got = ids(PoolSet((pool("a", "GPU-1", "GPU-0"), pool("b", "GPU-2"))))
    assert got == {"a": ["GPU-0", "GPU-1"], "b": ["GPU-2"]}


def test_time_slicing_advertises_n_replicas_per_card() -> None:
    got = ids(PoolSet((pool("a", "GPU-0", "GPU-1", slices_per_unit=3),)))
    assert got == {"a": ["GPU-0::0", "GPU-0::1", "GPU-0::2", "GPU-1::0", "GPU-1::1", "GPU-1::2"]}


def test_partition_pool_advertises_partitions_of_its_profile_only() -> None:
    got = ids(PoolSet((pool("m", "GPU-3", unit=UnitKind.PARTITION, profile="1g.10gb", slices_per_unit=2),)))
    assert got == {"m": ["MIG-a::0", "MIG-a::1", "MIG-b::0", "MIG-b::1"]}


def test_cards_not_on_this_node_are_ignored() -> None:
    assert ids(PoolSet((pool("a", "GPU-0", "GPU-on-other-node"),))) == {"a": ["GPU-0"]}


def test_max_devices_per_node_caps_in_card_id_order() -> None:
    desired = desired_state(
        PoolSet((pool("a", "GPU-2", "GPU-0", "GPU-1", max_devices_per_node=2),)), INVENTORY, "node-1"
    )
    assert [u.id for u in desired.pools["a"].units] == ["GPU-0", "GPU-1"]
    assert "GPU-2" not in desired.assignment


@pytest.mark.parametrize(
    ("previous", "expected_a", "expected_b"),
    [({}, ["GPU-1"], []), ({"GPU-0": "b"}, ["GPU-1"], ["GPU-0"]), ({"GPU-0": "c"}, ["GPU-1"], [])],
    ids=["new-card-goes-nowhere", "stays-where-it-was", "was-elsewhere-goes-nowhere"],
)
def test_card_claimed_twice_goes_to_neither_new_claimant(
    previous: dict[str, str], expected_a: list[str], expected_b: list[str]
) -> None:
    poolset = PoolSet((pool("a", "GPU-0", "GPU-1"), pool("b", "GPU-0")))
    desired = desired_state(poolset, INVENTORY, "node-1", previous_assignment=previous)
    assert [u.id for u in desired.pools["a"].units] == expected_a
    assert [u.id for u in desired.pools["b"].units] == expected_b
    assert desired.conflicts == {"GPU-0": ("a", "b")}


def test_held_card_moving_pools_is_draining_and_advertised_by_none() -> None:
    poolset = PoolSet((pool("a", "GPU-1"), pool("b", "GPU-0")))
    held = {"GPU-0": HeldCard("gpu.deckhouse.io/a", frozenset({"GPU-0"}))}
    desired = desired_state(poolset, INVENTORY, "node-1", held=held)
    assert [u.id for u in desired.pools["b"].units] == []
    assert desired.draining == {"GPU-0": ("gpu.deckhouse.io/a", "b")}
    released = desired_state(poolset, INVENTORY, "node-1", held={})
    assert [u.id for u in released.pools["b"].units] == ["GPU-0"]


@pytest.mark.parametrize(
    ("held_ids", "slices", "drains"),
    [
        ({"GPU-0"}, 1, False),
        ({"GPU-0"}, 4, True),
        ({"GPU-0::1"}, 4, False),
        ({"GPU-0::1"}, 1, True),
        ({"GPU-0::3"}, 2, True),
    ],
    ids=["same-units", "exclusive-to-sliced", "replica-kept", "sliced-to-exclusive", "replica-gone"],
)
def test_held_card_changing_mode_drains_until_released(held_ids: set[str], slices: int, drains: bool) -> None:
    poolset = PoolSet((pool("a", "GPU-0", slices_per_unit=slices),))
    held = {"GPU-0": HeldCard("gpu.deckhouse.io/a", frozenset(held_ids))}
    desired = desired_state(poolset, INVENTORY, "node-1", held=held)
    assert ("GPU-0" in desired.draining) is drains
    assert bool(desired.pools["a"].units) is not drains


def test_health_overrides_reach_units_and_partitions_follow_their_card() -> None:
    poolset = PoolSet(
        (
            pool("a", "GPU-0", slices_per_unit=2),
            pool("m", "GPU-3", unit=UnitKind.PARTITION, profile="3g.40gb"),
        )
    )
    desired = desired_state(
        poolset, INVENTORY, "node-1", health={"GPU-0": Health.UNHEALTHY, "GPU-3": Health.UNHEALTHY}
    )
    assert {u.health for u in desired.pools["a"].units} == {Health.UNHEALTHY}
    assert [u.health for u in desired.pools["m"].units] == [Health.UNHEALTHY]


def test_units_carry_numa_and_backend_for_routing() -> None:
    desired = desired_state(PoolSet((pool("a", "GPU-2"),)), INVENTORY, "node-1")
    (unit,) = desired.pools["a"].units
    assert (unit.numa_node, unit.backend, unit.card_id) == (1, "simulated", "GPU-2")


def test_plan_touches_only_changed_pools() -> None:
    before = desired_state(
        PoolSet((pool("keep", "GPU-0"), pool("grow", "GPU-1"), pool("gone", "GPU-2"), pool("mode", "GPU-3"))),
        INVENTORY,
        "node-1",
    ).pools
    after = desired_state(
        PoolSet(
            (
                pool("keep", "GPU-0"),
                pool("grow", "GPU-1", "GPU-2"),
                pool("mode", "GPU-3", slices_per_unit=4),
                pool("new"),
            )
        ),
        INVENTORY,
        "node-1",
    ).pools
    plan = plan_changes(before, after)
    assert (plan.start, plan.stop, plan.replace, plan.update) == (("new",), ("gone",), ("mode",), ("grow",))
    assert plan_changes(after, after).empty


def test_a_card_goes_to_a_pool_with_a_sharing_mode_only_if_its_backend_offers_it() -> None:
    poolset = PoolSet((pool("m", "GPU-0", "GPU-1", slices_per_unit=2, sharing="mps"),))
    refused = desired_state(poolset, INVENTORY, "node-1")
    assert refused.pools["m"].units == ()
    assert set(refused.unsupported) == {"GPU-0", "GPU-1"}
    assert (
        "shares its cards by 'mps', which backend simulated of card GPU-0 does not offer"
        in (refused.unsupported["GPU-0"])
    )
    served = desired_state(poolset, INVENTORY, "node-1", sharing_support={"simulated": frozenset({"mps"})})
    assert served.unsupported == {}
    assert [u.id for u in served.pools["m"].units] == ["GPU-0::0", "GPU-0::1", "GPU-1::0", "GPU-1::1"]


def test_sharing_requests_cover_the_pools_cards_and_held_cards_shared_before() -> None:
    support = {"simulated": frozenset({"mps"})}
    poolset = PoolSet(
        (pool("m", "GPU-0", slices_per_unit=4, sharing="mps", memory_per_replica=1 << 30), pool("t", "GPU-1"))
    )
    desired = desired_state(poolset, INVENTORY, "node-1", sharing_support=support)
    first = sharing_requests(desired, {}, {})
    assert first == {"GPU-0": SharingRequest("GPU-0", "mps", 4, 1 << 30)}
    # GPU-0 moves to the time-sliced pool while a container holds it: it drains, still shared.
    moved = PoolSet((pool("m", slices_per_unit=4, sharing="mps"), pool("t", "GPU-1", "GPU-0")))
    held = {"GPU-0": HeldCard("gpu.deckhouse.io/m", frozenset({"GPU-0::2"}))}
    draining = desired_state(moved, INVENTORY, "node-1", held=held, sharing_support=support)
    assert "GPU-0" in draining.draining
    assert sharing_requests(draining, held, first) == first
    released = desired_state(moved, INVENTORY, "node-1", sharing_support=support)
    assert sharing_requests(released, {}, first) == {}


@pytest.mark.parametrize(
    ("shared_as", "sharing", "drains"),
    [
        ({}, "", False),
        ({"GPU-0": "mps"}, "mps", False),
        ({"GPU-0": "mps"}, "", True),
        ({"GPU-0": ""}, "mps", True),
        ({}, "mps", False),
    ],
    ids=["unknown", "same-mode", "mps-to-time-slicing", "time-slicing-to-mps", "unknown-after-restart"],
)
def test_a_held_card_whose_sharing_mode_changes_drains_even_with_the_same_ids(
    shared_as: dict[str, str], sharing: str, drains: bool
) -> None:
    poolset = PoolSet((pool("a", "GPU-0", slices_per_unit=4, sharing=sharing),))
    held = {"GPU-0": HeldCard("gpu.deckhouse.io/a", frozenset({"GPU-0::1"}))}
    support = {"simulated": frozenset({"mps"})}
    desired = desired_state(
        poolset, INVENTORY, "node-1", held=held, sharing_support=support, shared_as=shared_as
    )
    assert ("GPU-0" in desired.draining) is drains
    after = shared_as_now(desired, held, shared_as)
    assert after.get("GPU-0") == (shared_as.get("GPU-0") if drains else sharing)
