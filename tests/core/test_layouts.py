"""Which cards a Partition pool may lay out, as a table."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.layouts import LayoutRequest, layout_requests
from hcs_deviceplugin.model import Card, DeviceSelector, Inventory, Partition, Pool, PoolSet, UnitKind
from hcs_deviceplugin.reconciler import HeldCard

CARDS = (Card("G0", "sim", "v", "m", 0), Card("G1", "sim", "v", "m", 1))


def mig_pool(name: str, profile: str, *cards: str) -> Pool:
    return Pool(
        name=name,
        resource_name=f"gpu.deckhouse.io/{name}",
        unit=UnitKind.PARTITION,
        profile=profile,
        devices=tuple(DeviceSelector(uuid=c) for c in cards),
    )


@pytest.mark.parametrize(
    ("partitions", "held", "held_known", "attempted", "expected"),
    [
        ((), {}, True, (), ["G0"]),
        ((Partition("M0", "G0", "1g.10gb"),), {}, True, (), []),
        ((Partition("M0", "G0", "3g.40gb"),), {}, True, (), ["G0"]),
        ((Partition("M0", "G0", "3g.40gb"),), {}, False, (), []),
        ((), {}, False, (), ["G0"]),
        ((), {"G0": HeldCard("r", frozenset({"G0"}))}, True, (), []),
        ((), {}, True, (("G0", "1g.10gb"),), []),
    ],
    ids=[
        "fresh",
        "already-laid-out",
        "other-profile-free",
        "other-profile-unknown-holds",
        "fresh-unknown-holds",
        "held",
        "failed-before",
    ],
)
def test_layout_requests(
    partitions: tuple[Partition, ...],
    held: dict[str, HeldCard],
    held_known: bool,
    attempted: tuple[tuple[str, str], ...],
    expected: list[str],
) -> None:
    poolset = PoolSet((mig_pool("m", "1g.10gb", "G0"),))
    requests = layout_requests(poolset, Inventory(CARDS, partitions), "n", held, held_known, attempted)
    assert [r.card_id for r in requests] == expected
    assert all(r == LayoutRequest(r.card_id, "sim", "1g.10gb", "m") for r in requests)


def test_a_card_claimed_by_two_pools_is_never_laid_out() -> None:
    poolset = PoolSet((mig_pool("a", "1g.10gb", "G0", "G1"), mig_pool("b", "3g.40gb", "G0")))
    requests = layout_requests(poolset, Inventory(CARDS), "n", {}, True)
    assert [(r.card_id, r.pool) for r in requests] == [("G1", "a")]


def test_a_card_blocked_until_pod_resources_answers_is_never_laid_out() -> None:
    """After a restart a card with no record may be in use as a whole card: no MIG made on it."""
    poolset = PoolSet((mig_pool("m", "1g.10gb", "G0", "G1"),))
    requests = layout_requests(poolset, Inventory(CARDS), "n", {}, False, (), blocked={"G0"})
    assert [r.card_id for r in requests] == ["G1"]
