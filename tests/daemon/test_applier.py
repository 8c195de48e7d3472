"""The applier's last check before advertising: a card allocated while it moved stays back."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.daemon.applier import newly_held_elsewhere, without_cards
from hcs_deviceplugin.model import Pool, Unit
from hcs_deviceplugin.reconciler import DesiredPool, HeldCard

B = "gpu.deckhouse.io/b"


def pool(name: str, *cards: str, slices: int = 1) -> DesiredPool:
    units = tuple(
        Unit(id=f"{c}::{n}" if slices > 1 else c, card_id=c, backend="sim")
        for c in cards
        for n in range(slices)
    )
    return DesiredPool(Pool(name, f"gpu.deckhouse.io/{name}", slices_per_unit=slices), cards, units)


@pytest.mark.parametrize(
    ("holder", "excluded"),
    [
        (None, set()),
        (HeldCard("gpu.deckhouse.io/a", frozenset({"X"})), {"X"}),  # held under the pool it left
        (HeldCard(B, frozenset({"X"})), set()),  # held under the pool it joins, same id
        (HeldCard(B, frozenset({"X::3"})), {"X"}),  # same resource, a unit the pool does not offer
    ],
)
def test_cards_held_elsewhere_are_kept_back(holder: HeldCard | None, excluded: set[str]) -> None:
    fresh = {"X": holder} if holder is not None else {}
    assert newly_held_elsewhere({"b": pool("b", "X", "Y")}, fresh) == excluded


def test_without_cards_drops_the_cards_and_their_units_only() -> None:
    want = pool("b", "X", "Y", slices=2)
    kept = without_cards(want, frozenset({"X"}))
    assert kept.cards == ("Y",)
    assert [u.id for u in kept.units] == ["Y::0", "Y::1"]
    assert without_cards(want, frozenset({"Z"})) is want
