"""Deciding which cards need partitioning (MIG, vNPU) for the Partition pools that name them.

Pure: the daemon executes the requests through ``Backend.partition`` and rediscovers. A card is laid
out only when exactly one pool claims it, it holds no partition of the pool's profile yet, no running
container holds any of it, and, when we cannot read what is held (no pod-resources), only if it has
no partitions at all, since we could not prove the old ones free. A request that failed is not
retried until the pools or the inventory change, so a card without MIG mode is reported once
instead of on every apply.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import Inventory, PoolSet, UnitKind
from hcs_deviceplugin.reconciler import HeldCard, claims_by_card


@field_repr
@dataclass(frozen=True, repr=False)
class LayoutRequest:
    """Fill ``card_id`` (owned by ``backend``) with partitions of ``profile`` for ``pool``."""

    card_id: str
    backend: str
    profile: str
    pool: str


def layout_requests(
    poolset: PoolSet,
    inventory: Inventory,
    node_name: str,
    held: Mapping[str, HeldCard],
    held_known: bool,
    attempted: Collection[tuple[str, str]] = (),
    blocked: Collection[str] = (),
) -> list[LayoutRequest]:
    """The partition layouts to make now, in pool then card order; ``blocked`` cards are left alone
    (after a restart, cards whose holders pod-resources has not confirmed yet)."""
    claims = claims_by_card(poolset, inventory.cards, node_name)
    cards = {c.id: c for c in inventory.cards}
    requests: list[LayoutRequest] = []
    for pool in poolset.pools:
        if pool.unit is not UnitKind.PARTITION or pool.profile is None:
            continue
        for card_id in sorted(c for c, names in claims.items() if names == [pool.name]):
            parts = [p for p in inventory.partitions if p.card_id == card_id]
            if any(p.profile == pool.profile for p in parts):
                continue
            if card_id in held or card_id in blocked or (not held_known and parts):
                continue
            if (card_id, pool.profile) in attempted:
                continue
            requests.append(LayoutRequest(card_id, cards[card_id].backend, pool.profile, pool.name))
    return requests
