"""HoldBook: Allocate's provisional holds, shared between gRPC threads and the control loop."""

from __future__ import annotations

from hcs_deviceplugin.holds import HoldBook

R = "gpu.deckhouse.io/a"


def test_add_is_new_once_and_refreshes_expiry_on_repeat() -> None:
    book = HoldBook(hold_seconds=10.0)
    assert book.add(R, frozenset({"A"}), now=0.0)
    assert not book.add(R, frozenset({"A"}), now=5.0)
    assert [h.expires for h in book.active(now=12.0)] == [15.0]
    assert book.active(now=15.0) == []


def test_every_change_moves_the_version() -> None:
    book = HoldBook(hold_seconds=1.0)
    v0 = book.version
    book.add(R, frozenset({"A"}), now=0.0)
    v1 = book.version
    book.active(now=0.5)
    assert book.version == v1 > v0  # nothing expired: no change
    book.active(now=2.0)
    assert book.version > v1


def test_settle_drops_confirmed_and_stale_holds_only() -> None:
    book = HoldBook(hold_seconds=30.0)
    book.add(R, frozenset({"A", "B"}), now=0.0)
    book.add(R, frozenset({"C"}), now=0.0)
    book.add(R, frozenset({"D"}), now=9.5)
    partial = {R: frozenset({"A"})}  # a partial listing does not confirm a two-id hold
    assert not book.settle(partial, listed_at=1.0, settle_seconds=2.0)
    assert book.settle({R: frozenset({"A", "B"})}, listed_at=10.0, settle_seconds=2.0)
    assert [h.unit_ids for h in book.active(now=10.0)] == [frozenset({"D"})]
