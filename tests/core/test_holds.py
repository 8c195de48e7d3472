"""What counts as held: pod-resources listings plus provisional holds from Allocate."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.holds import ProvisionalHold, hardware_id_of, held_cards, settle_provisional
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
