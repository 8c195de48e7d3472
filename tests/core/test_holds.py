"""What counts as held: pod-resources listings plus provisional holds from Allocate."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.holds import HoldBook, ProvisionalHold, hardware_id_of, held_cards, settle_provisional
from hcs_deviceplugin.model import Card, Inventory, Partition
from hcs_deviceplugin.reconciler import HeldCard

INV = Inventory(
    cards=(Card("GPU-0", "sim", "v", "m", 0), Card("GPU-1", "sim", "v", "m", 1)),
    partitions=(Partition("MIG-a", "GPU-1", "1g.10gb"),),
)


@pytest.mark.parametrize(
    ("unit", "hardware"),
    [("GPU-0", "GPU-0"), ("GPU-0::3", "GPU-0"), ("MIG-a::12", "MIG-a"), ("odd::name", "odd::name")],
)
def test_hardware_id_strips_only_a_numeric_replica_suffix(unit: str, hardware: str) -> None:
    assert hardware_id_of(unit) == hardware


def test_listed_and_provisional_holds_map_to_cards() -> None:
    listed = {"r/a": frozenset({"GPU-0::1", "other-plugin-device"}), "r/m": frozenset({"MIG-a"})}
    provisional = [
        ProvisionalHold("r/b", frozenset({"GPU-0::2"}), since=0.0, expires=10.0),
        ProvisionalHold("r/c", frozenset({"GPU-1"}), since=0.0, expires=1.0),
    ]
    held = held_cards(INV, listed, provisional, now=5.0)
    assert held == {
        "GPU-0": HeldCard("r/a", frozenset({"GPU-0::1"})),
        "GPU-1": HeldCard("r/m", frozenset({"MIG-a"})),
    }


@pytest.mark.parametrize(
    ("listed", "listed_at", "kept"),
    [
        ({"r": frozenset({"GPU-0"})}, 0.5, False),
        ({}, 0.5, True),
        ({}, 2.5, False),
        ({"r": frozenset({"GPU-9"})}, 1.9, True),
    ],
    ids=["confirmed", "too-early-to-tell", "settled-absent", "other-ids-listed"],
)
def test_settle_provisional(listed: dict[str, frozenset[str]], listed_at: float, kept: bool) -> None:
    hold = ProvisionalHold("r", frozenset({"GPU-0"}), since=0.0, expires=30.0)
    assert (settle_provisional([hold], listed, listed_at, settle_seconds=2.0) == [hold]) is kept


MULTI = ProvisionalHold("r", frozenset({"GPU-0::0", "GPU-1::0"}), since=0.0, expires=30.0)


@pytest.mark.parametrize(
    ("listed", "listed_at", "kept"),
    [
        ({"r": frozenset({"GPU-0::0"})}, 1.9, True),
        ({"r": frozenset({"GPU-0::0"}), "other": frozenset({"GPU-1::0"})}, 1.9, True),
        ({"r": frozenset({"GPU-0::0"})}, 2.0, False),
        ({"r": frozenset({"GPU-0::0", "GPU-1::0", "GPU-9"})}, 0.1, False),
    ],
    ids=["partial-listing", "rest-under-another-resource", "settled-partial", "all-listed"],
)
def test_a_multi_id_hold_is_confirmed_only_by_all_its_ids(
    listed: dict[str, frozenset[str]], listed_at: float, kept: bool
) -> None:
    """Kubelet may list a container's devices in pieces (one entry per NUMA node, a listing taken
    mid-admission): a hold whose ids are only partly listed is not confirmed, else the unlisted
    card would be free to move while the container is starting on it."""
    assert (settle_provisional([MULTI], listed, listed_at, settle_seconds=2.0) == [MULTI]) is kept


def test_holdbook_keeps_a_partly_listed_hold_until_the_settle_time() -> None:
    book = HoldBook(hold_seconds=30.0)
    book.add("r", MULTI.unit_ids, now=0.0)
    partial = {"r": frozenset({"GPU-0::0"})}
    assert not book.settle(partial, listed_at=1.0, settle_seconds=2.0)
    assert [h.unit_ids for h in book.active(now=1.0)] == [MULTI.unit_ids]
    held = held_cards(INV, partial, book.active(now=1.0), now=1.0)
    assert held == {
        "GPU-0": HeldCard("r", frozenset({"GPU-0::0"})),
        "GPU-1": HeldCard("r", frozenset({"GPU-1::0"})),
    }
    assert book.settle(partial, listed_at=2.5, settle_seconds=2.0)
    assert book.active(now=2.5) == []
