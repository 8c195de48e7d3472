"""What running containers hold, as the reconciler needs it: card id → HeldCard.

Two inputs: kubelet's pod-resources ``List`` (authoritative, polled) and ids we just handed out in
Allocate (provisional, until a List taken after them can confirm; they expire so a pod that failed
admission does not pin a card for ever). Pure functions over plain values, plus :class:`HoldBook`,
the one thread-safe store of provisional holds that Allocate writes to.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import REPLICA_SEPARATOR, Inventory
from hcs_deviceplugin.reconciler import HeldCard


@field_repr
@dataclass(frozen=True, repr=False)
class ProvisionalHold:
    """Unit ids answered in an Allocate under ``resource`` at ``since``, trusted until ``expires``."""

    resource: str
    unit_ids: frozenset[str]
    since: float
    expires: float


def settle_provisional(
    holds: list[ProvisionalHold],
    listed: Mapping[str, frozenset[str]],
    listed_at: float,
    settle_seconds: float,
) -> list[ProvisionalHold]:
    """Holds still worth keeping after a pod-resources List that started at ``listed_at``.

    A hold the List shows is confirmed (the List itself keeps the card held from now on). A hold
    the List does not show is dropped once the List started ``settle_seconds`` after the Allocate:
    by then kubelet has recorded the allocation or the pod never got it (or already ended).
    """
    kept = []
    for hold in holds:
        if hold.unit_ids <= listed.get(hold.resource, frozenset()):
            continue
        if listed_at - hold.since >= settle_seconds:
            continue
        kept.append(hold)
    return kept


def hardware_id_of(unit_id: str) -> str:
    """The card or partition id a unit id stands for (strip a ``::<replica>`` suffix)."""
    base, sep, replica = unit_id.rpartition(REPLICA_SEPARATOR)
    return base if sep and replica.isdigit() else unit_id


def held_cards(
    inventory: Inventory,
    listed: Mapping[str, frozenset[str]],
    provisional: list[ProvisionalHold],
    now: float,
) -> dict[str, HeldCard]:
    """Merge listed and unexpired provisional holds into card id → HeldCard.

    Ids that name no card or partition of this node are ignored (other plugins' resources). A card
    held under two resources at once keeps the first in sorted order; the reconciler then drains it
    from every other pool, which is the safe side.
    """
    card_of = {c.id: c.id for c in inventory.cards}
    card_of.update({p.id: p.card_id for p in inventory.partitions})
    by_card: dict[str, dict[str, set[str]]] = {}
    sources = [(res, ids) for res, ids in listed.items()]
    sources += [(h.resource, h.unit_ids) for h in provisional if h.expires > now]
    for resource, ids in sources:
        for unit_id in ids:
            card_id = card_of.get(hardware_id_of(unit_id))
            if card_id is not None:
                by_card.setdefault(card_id, {}).setdefault(resource, set()).add(unit_id)
    result: dict[str, HeldCard] = {}
    for card_id, per_resource in by_card.items():
        resource = sorted(per_resource)[0]
        result[card_id] = HeldCard(resource, frozenset(per_resource[resource]))
    return result


HoldKey = tuple[str, frozenset[str]]


class HoldBook:
    """Provisional holds, written by Allocate on gRPC threads and read by the control loop.

    Allocate only stores one entry under this object's own lock (a dict keyed by resource and ids,
    so a repeated Allocate costs the same however many holds there are), never touching the control
    loop's state, so answering kubelet never waits for or wakes the control thread. The server applier
    reads it once more after withdrawing cards and before advertising them elsewhere: an Allocate
    that got in before the withdrawal is seen there, and one that comes after cannot name the
    withdrawn units any more. ``version`` changes on every change so readers can skip re-reads.
    """

    def __init__(self, hold_seconds: float) -> None:
        self._hold_seconds = hold_seconds
        self._lock = threading.Lock()
        self._holds: dict[HoldKey, ProvisionalHold] = {}
        self._version = 0

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    def add(self, resource: str, unit_ids: frozenset[str], now: float | None = None) -> bool:
        """Hold ``unit_ids`` under ``resource``; True if that holds something not already held.

        Kubelet may call Allocate for the same ids again (init containers, retries): that only
        refreshes the expiry of the existing hold, which keeps its place among the others.
        """
        now = time.monotonic() if now is None else now
        hold = ProvisionalHold(resource, unit_ids, now, now + self._hold_seconds)
        key = (resource, unit_ids)
        with self._lock:
            self._version += 1
            new = key not in self._holds
            self._holds[key] = hold
            return new

    def remove(self, resource: str, unit_ids: frozenset[str]) -> None:
        """Drop a hold whose Allocate was refused after all (see the servicer's second look)."""
        with self._lock:
            if self._holds.pop((resource, unit_ids), None) is not None:
                self._version += 1

    def restore(self, holds: list[ProvisionalHold]) -> None:
        """Take back holds persisted by a previous run (their times already on our clock)."""
        with self._lock:
            for hold in holds:
                self._holds.setdefault((hold.resource, hold.unit_ids), hold)
            self._version += 1

    def active(self, now: float) -> list[ProvisionalHold]:
        """Unexpired holds (expired ones are dropped for good)."""
        with self._lock:
            kept = [h for h in self._holds.values() if h.expires > now]
            if len(kept) != len(self._holds):
                self._replace_locked(kept)
            return kept

    def settle(self, listed: Mapping[str, frozenset[str]], listed_at: float, settle_seconds: float) -> bool:
        """Apply :func:`settle_provisional` for a List that started at ``listed_at``; True if changed."""
        with self._lock:
            kept = settle_provisional(list(self._holds.values()), listed, listed_at, settle_seconds)
            if len(kept) == len(self._holds):
                return False
            self._replace_locked(kept)
            return True

    def _replace_locked(self, holds: list[ProvisionalHold]) -> None:
        self._holds = {(h.resource, h.unit_ids): h for h in holds}
        self._version += 1
