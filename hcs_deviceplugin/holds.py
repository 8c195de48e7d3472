"""What running containers hold, as the reconciler needs it: card id → HeldCard.

Two inputs: kubelet's pod-resources ``List`` (authoritative, polled) and ids we just handed out in
Allocate (provisional, until a List taken after them can confirm; they expire so a pod that failed
admission does not pin a card for ever). Pure functions over plain values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hcs_deviceplugin.model import REPLICA_SEPARATOR, Inventory
from hcs_deviceplugin.reconciler import HeldCard


@dataclass(frozen=True)
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
