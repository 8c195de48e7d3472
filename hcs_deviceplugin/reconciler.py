"""Turning (PoolSet, Inventory, health, held cards) into the pools to serve, and diffing that.

Pure functions only: the daemon owns the state and applies the plan. Keeping the decisions pure lets
the invariants be tested in tables and properties without sockets:

* no card is advertised by two pools (a card claimed by several pools stays where it was, or goes
  nowhere if it was nowhere, and the conflict is reported);
* a card that a running container holds is not advertised under any other resource, nor as units
  other than the ones held (exclusive → time-sliced, say), until it is released ("draining");
* a change touches only the pools it changes (see :func:`plan_changes`);
* a card goes to a pool with a ``sharing`` mode only if its backend enforces that mode
  (``unsupported``), and the cards to share are handed to backends as :func:`sharing_requests`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import (
    Card,
    DeviceSelector,
    Health,
    Inventory,
    Partition,
    Pool,
    PoolApi,
    PoolSet,
    SharingRequest,
    Unit,
    UnitKind,
    inventory_id,
    pattern_matches,
    replica_unit_id,
)


@field_repr
@dataclass(frozen=True, repr=False)
class DesiredPool:
    """One pool as it should be served: its definition, its cards and the units they make."""

    pool: Pool
    cards: tuple[str, ...]
    units: tuple[Unit, ...]


@field_repr
@dataclass(frozen=True, repr=False)
class HeldCard:
    """A card some running container holds: under which resource, and as which unit ids."""

    resource: str
    unit_ids: frozenset[str]


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class Desired:
    """The whole node as it should be served, plus what could not be placed and why."""

    pools: Mapping[str, DesiredPool] = field(default_factory=lambda: MappingProxyType({}))
    assignment: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    conflicts: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    draining: Mapping[str, tuple[str, str]] = field(default_factory=lambda: MappingProxyType({}))
    awaiting: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """card id → the pool that wants it, for cards held back until pod-resources says what is held."""
    unsupported: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """card id → why the pool that wants it cannot have it: its backend does not offer the pool's
    sharing mode."""


def device_plugin_pools(pools: Mapping[str, DesiredPool]) -> dict[str, DesiredPool]:
    """The pools a device plugin server serves (the others are the DRA front end's)."""
    return {name: want for name, want in pools.items() if want.pool.api is PoolApi.DEVICE_PLUGIN}


def dra_pools(pools: Mapping[str, DesiredPool]) -> dict[str, DesiredPool]:
    """The pools the DRA front end publishes and prepares."""
    return {name: want for name, want in pools.items() if want.pool.api is PoolApi.DRA}


# Made and read within one apply, on the applier's thread: not frozen, so a start compiles no
# __setattr__ or __delattr__ for it; never compared.
@field_repr
@dataclass(eq=False, repr=False)
class Plan:
    """What the daemon must do to go from running to desired, pool by pool."""

    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    replace: tuple[str, ...] = ()
    update: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.start or self.stop or self.replace or self.update)


def effective_health(device_id: str, default: Health, health: Mapping[str, Health]) -> Health:
    return health.get(device_id, default)


class _CardIndex:
    """This node's cards by each exact identity a selector can name, so that a selector costs one
    dict lookup rather than a scan over the cards: 1,000 pools × 16 cards was 16,000 matches per
    reconcile. A ``pattern`` (a substring match) scans, unless it has no wildcard and is not found
    in all the card ids together: a DKP pool's pattern is one card's UUID, most of them another
    node's. Agrees with :func:`selector_matches`, which stays the definition (a property test holds
    the two together).
    """

    def __init__(self, cards: tuple[Card, ...], node_name: str) -> None:
        self.cards = cards
        self.node_name = node_name
        # A literal pattern in a card's id is in this; one in this may still span two ids.
        self.all_ids = "\n".join(card.id for card in cards)
        self.by_uuid: dict[str, list[int]] = {}
        self.by_inventory_id: dict[str, list[int]] = {}
        self.by_pci_address: dict[str, list[int]] = {}
        for position, card in enumerate(cards):
            self.by_uuid.setdefault(card.id, []).append(position)
            self.by_inventory_id.setdefault(inventory_id(node_name, card), []).append(position)
            self.by_pci_address.setdefault(card.pci_address.lower(), []).append(position)

    def matches(self, selector: DeviceSelector) -> list[int]:
        """Positions of the cards ``selector`` names on this node (the precedence of
        :func:`selector_matches`: the first identity key set decides)."""
        if selector.node is not None and selector.node != self.node_name:
            return []
        if selector.uuid is not None:
            return self.by_uuid.get(selector.uuid, [])
        if selector.inventory_id is not None:
            return self.by_inventory_id.get(selector.inventory_id, [])
        if selector.pci_address is not None:
            return self.by_pci_address.get(selector.pci_address.lower(), [])
        if selector.pattern is not None:
            if "*" not in selector.pattern and selector.pattern not in self.all_ids:
                return []
            return [n for n, card in enumerate(self.cards) if pattern_matches(selector.pattern, card.id)]
        return []


def claims_by_card(poolset: PoolSet, cards: tuple[Card, ...], node_name: str) -> dict[str, list[str]]:
    """card id → names of the pools whose device lists name it on this node (pools in order, and
    within a pool the cards in inventory order, as a scan of every pool × card would find them)."""
    index = _CardIndex(cards, node_name)
    claims: dict[str, list[str]] = {}
    for pool in poolset.pools:
        named: set[int] = set()
        for selector in pool.devices:
            named.update(index.matches(selector))
        for position in sorted(named):
            claims.setdefault(cards[position].id, []).append(pool.name)
    return claims


def desired_state(
    poolset: PoolSet,
    inventory: Inventory,
    node_name: str,
    health: Mapping[str, Health] | None = None,
    previous_assignment: Mapping[str, str] | None = None,
    held: Mapping[str, HeldCard] | None = None,
    blocked: frozenset[str] = frozenset(),
    sharing_support: Mapping[str, frozenset[str]] | None = None,
    shared_as: Mapping[str, str] | None = None,
) -> Desired:
    """Decide which pool serves which card, and the units each pool advertises.

    ``health`` overrides discovered health per card or partition id. ``previous_assignment`` maps
    card id → pool that served it before (conflicts keep it there). ``held`` maps card id → what a
    running container holds of it; such a card goes only to a pool that would advertise it under the
    same resource with the held unit ids, otherwise it drains (``draining``: card → (held resource,
    wanted pool)). ``blocked`` cards go nowhere (``awaiting``): after a restart, cards whose holders
    nobody can vouch for until pod-resources answers. ``sharing_support`` maps backend name → the
    sharing modes it enforces; a card whose pool wants another mode goes nowhere (``unsupported``).
    ``shared_as`` maps card id → the sharing mode it is served under now (``""``: none), where known: a
    held card whose pool would share it otherwise drains too, even under the same resource and ids
    (DKP's ``MPS`` → ``TimeSlicing`` keeps ``nvidia.com/gpu`` and its replica ids). Holders are
    compared with :meth:`Pool.holder_key`, so a card prepared for a ResourceClaim (held under
    ``dra:``…) drains before a device plugin pool gets it, and the other way round.
    """
    health = health or {}
    previous_assignment = previous_assignment or {}
    held = held or {}
    claims = claims_by_card(poolset, inventory.cards, node_name)
    pools_by_name = poolset.by_name()
    cards_by_id = {c.id: c for c in inventory.cards}

    assignment: dict[str, str] = {}
    conflicts: dict[str, tuple[str, ...]] = {}
    draining: dict[str, tuple[str, str]] = {}
    awaiting: dict[str, str] = {}
    unsupported: dict[str, str] = {}
    support = sharing_support or {}
    modes = shared_as or {}
    for card_id, claimants in claims.items():
        target: str | None = claimants[0]
        if len(claimants) > 1:
            conflicts[card_id] = tuple(claimants)
            before = previous_assignment.get(card_id)
            target = before if before in claimants else None
        if target is None:
            continue
        wanted = pools_by_name[target]
        backend = cards_by_id[card_id].backend
        if wanted.sharing and wanted.sharing not in support.get(backend, frozenset()):
            unsupported[card_id] = (
                f"pool {target} shares its cards by {wanted.sharing!r}, which backend {backend} of card "
                f"{card_id} does not offer"
            )
            continue
        if card_id in blocked:
            awaiting[card_id] = target
            continue
        holder = held.get(card_id)
        if holder is not None:
            pool = pools_by_name[target]
            offered = {u.id for u in units_for_card(pool, cards_by_id[card_id], inventory.partitions, health)}
            mode_changes = card_id in modes and modes[card_id] != pool.sharing
            if holder.resource != pool.holder_key() or not holder.unit_ids <= offered or mode_changes:
                draining[card_id] = (holder.resource, target)
                continue
        assignment[card_id] = target

    by_pool: dict[str, list[Card]] = {p.name: [] for p in poolset.pools}
    for card in sorted(inventory.cards, key=lambda c: c.id):
        pool_name = assignment.get(card.id)
        if pool_name is not None:
            by_pool[pool_name].append(card)

    pools: dict[str, DesiredPool] = {}
    for pool in poolset.pools:
        cards = by_pool[pool.name]
        if pool.max_devices_per_node is not None:
            for dropped in cards[pool.max_devices_per_node :]:
                assignment.pop(dropped.id, None)
            cards = cards[: pool.max_devices_per_node]
        units = tuple(
            unit for card in cards for unit in units_for_card(pool, card, inventory.partitions, health)
        )
        pools[pool.name] = DesiredPool(pool, tuple(c.id for c in cards), units)

    return Desired(
        pools=MappingProxyType(pools),
        assignment=MappingProxyType(assignment),
        conflicts=MappingProxyType(conflicts),
        draining=MappingProxyType(draining),
        awaiting=MappingProxyType(awaiting),
        unsupported=MappingProxyType(unsupported),
    )


def sharing_requests(
    desired: Desired, held: Mapping[str, HeldCard], previous: Mapping[str, SharingRequest]
) -> dict[str, SharingRequest]:
    """Card id → how its backend must share it now: the cards of pools with a ``sharing`` mode, plus
    cards shared before that a running container still holds (they drain under the old mode: tearing
    it down would break the holder)."""
    requests: dict[str, SharingRequest] = {}
    for card_id, pool_name in desired.assignment.items():
        pool = desired.pools[pool_name].pool
        if pool.sharing:
            requests[card_id] = SharingRequest(
                card_id, pool.sharing, pool.slices_per_unit, pool.memory_per_replica
            )
    for card_id in held:
        if card_id not in requests and card_id in previous:
            requests[card_id] = previous[card_id]
    return requests


def shared_as_now(
    desired: Desired, held: Mapping[str, HeldCard], before: Mapping[str, str]
) -> dict[str, str]:
    """Card id → the sharing mode it is served under after ``desired`` (``""``: none): assigned cards
    take their pool's, held cards not assigned (draining) keep the one they had."""
    modes = {card: desired.pools[name].pool.sharing for card, name in desired.assignment.items()}
    for card_id in held:
        if card_id not in modes and card_id in before:
            modes[card_id] = before[card_id]
    return modes


def units_for_card(
    pool: Pool, card: Card, partitions: tuple[Partition, ...], health: Mapping[str, Health]
) -> list[Unit]:
    """The units ``pool`` advertises for ``card``: the card or its partitions, times replicas."""
    card_health = effective_health(card.id, card.health, health)
    bases: list[tuple[str, str | None, Health]] = []
    if pool.unit is UnitKind.CARD:
        bases.append((card.id, None, card_health))
    else:
        for part in sorted(partitions, key=lambda p: p.id):
            if part.card_id != card.id or part.profile != pool.profile:
                continue
            part_health = effective_health(part.id, part.health, health)
            worst = Health.HEALTHY if Health.UNHEALTHY not in (card_health, part_health) else Health.UNHEALTHY
            bases.append((part.id, part.id, worst))
    units: list[Unit] = []
    for base_id, partition_id, unit_health in bases:
        ids = (
            [replica_unit_id(base_id, n) for n in range(pool.slices_per_unit)]
            if pool.time_sliced
            else [base_id]
        )
        for n, uid in enumerate(ids):
            units.append(
                Unit(
                    id=uid,
                    card_id=card.id,
                    backend=card.backend,
                    partition_id=partition_id,
                    replica=n if pool.time_sliced else None,
                    numa_node=card.numa_node,
                    health=unit_health,
                )
            )
    return units


def plan_changes(running: Mapping[str, DesiredPool], desired: Mapping[str, DesiredPool]) -> Plan:
    """Pool-by-pool diff: new pools start, vanished ones stop, a changed resource name, unit kind,
    replica count or profile replaces the server, and anything else is an update on the live stream.
    """
    start = tuple(sorted(desired.keys() - running.keys()))
    stop = tuple(sorted(running.keys() - desired.keys()))
    replace: list[str] = []
    update: list[str] = []
    for name in sorted(running.keys() & desired.keys()):
        old, new = running[name], desired[name]
        # One pool object (a parse reuses an unchanged entry's) needs no serving key compared.
        if old.pool is not new.pool and old.pool.serving_key() != new.pool.serving_key():
            replace.append(name)
        elif old != new:
            update.append(name)
    return Plan(start=start, stop=stop, replace=tuple(replace), update=tuple(update))
