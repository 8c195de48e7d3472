"""From kubelet's unit ids to a card-level choice and back: whole cards, replicas, partitions.

Kubelet sends unit ids (``available``, ``must_include``, ``size``); the topology is about cards. This
module maps one to the other and holds the rules that are about units rather than links:

* ``must_include`` is always returned, first and in kubelet's order; the answer never holds an id
  that is in neither ``available`` nor ``must_include``, and has exactly ``size`` ids when that many
  exist. Ids the pool does not know (no :class:`~hcs_deviceplugin.model.Unit`) come last, in
  kubelet's order: nothing is known of their card.
* Whole-card pools: one card-level choice over the free cards (see :mod:`.select`), with
  fragmentation counted.
* Shared pools (time-slice replicas, partitions such as MIG or vNPU, or replicas of partitions):
  units are grouped by their parent card, which is what topology and load are about. Load is
  inferred, not stored: a pool's units of a card that kubelet did not offer are held (kubelet offers
  every healthy unit no container holds). Under :attr:`ReplicaPolicy.SPREAD` a request first takes
  distinct cards, chosen by least load and then topology, and only then a second unit of a card
  (the card with the fewest units of this request, then the least loaded); two replicas of one card
  give a container no more hardware. Under :attr:`ReplicaPolicy.PACK` it fills the most loaded card
  first and continues on the card best linked to what it already took. Within a card the unit of
  the least used partition (or replica base) is taken, then the lowest id.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping, Sequence

from hcs_deviceplugin.allocation.links import SINGLE_CARD
from hcs_deviceplugin.allocation.select import CardRequest, choose
from hcs_deviceplugin.allocation.topology import Topology
from hcs_deviceplugin.model import Unit


class ReplicaPolicy(enum.StrEnum):
    """How a request for several shared units (replicas, partitions) is laid over cards."""

    SPREAD = "spread"
    """Distinct, least-loaded cards first (NVIDIA's ``distributed``): more hardware per container."""
    PACK = "pack"
    """Fill the most loaded card first (NVIDIA's ``packed``): keeps other cards free."""


def hardware_load(units: Mapping[str, Unit], free: set[str]) -> dict[str, int]:
    """Replicas in use per card or partition: the pool's units of it that kubelet did not offer.

    Kubelet offers every healthy unit that no container holds, so what is missing from its offer
    is (to within unhealthy units) what is allocated; no extra state is needed to balance load.
    """
    load: dict[str, int] = {}
    for uid, unit in units.items():
        if uid not in free:
            load[unit.hardware_id] = load.get(unit.hardware_id, 0) + 1
    return load


def is_shared(units: Mapping[str, Unit]) -> bool:
    """Whether the pool hands out pieces of cards (replicas or partitions) rather than whole cards."""
    return any(u.replica is not None or u.partition_id is not None for u in units.values())


def choose_units(
    topology: Topology,
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    units: Mapping[str, Unit],
    policy: ReplicaPolicy = ReplicaPolicy.SPREAD,
) -> list[str]:
    """Up to ``size`` unit ids: all of ``must_include`` first, then the best of ``available``."""
    if size <= 0:
        return []
    must = list(dict.fromkeys(must_include))
    if len(must) >= size:
        return must[:size]
    taken = set(must)
    offered = [uid for uid in dict.fromkeys(available) if uid not in taken]
    known = [uid for uid in offered if uid in units]
    unknown = [uid for uid in offered if uid not in units]
    topo = topology.covering(units)
    need = size - len(must)
    if is_shared(units):
        free = set(available) | taken
        picked = _shared(topo, known, must, need, units, free, policy)
    else:
        picked = _whole_cards(topo, known, must, need, units)
    return [*must, *picked, *unknown][:size]


def _whole_cards(
    topo: Topology, known: Sequence[str], must: Sequence[str], need: int, units: Mapping[str, Unit]
) -> list[str]:
    by_card: dict[int, str] = {}
    for uid in sorted(known):
        by_card.setdefault(topo.position[units[uid].card_id], uid)
    fixed = tuple(sorted({topo.position[units[uid].card_id] for uid in must if uid in units}))
    candidates = tuple(sorted(p for p in by_card if p not in fixed))
    added = choose(topo, CardRequest(fixed, candidates, need, fragmentation=True))
    return [by_card[p] for p in added]


class _Picker:
    """The shared-pool bookkeeping of one request: free units per card, picks per card and part.

    Offered ids are only bucketed by card up front (one pass); a card's ids are grouped by part
    (its partition, or the card itself for its replicas) and sorted the first time the card is
    taken from, so a request over hundreds of units sorts only the few cards it uses.
    """

    def __init__(self, topo: Topology, known: Sequence[str], must: Sequence[str], units: Mapping[str, Unit]):
        self.topo, self.units = topo, units
        self.by_card: dict[int, list[str]] = {}
        position = topo.position
        for uid in known:
            self.by_card.setdefault(position[units[uid].card_id], []).append(uid)
        self.left = {card: len(ids) for card, ids in self.by_card.items()}
        self.parts: dict[int, dict[str, list[str]]] = {}
        self.card_picks: Counter[int] = Counter()
        self.part_picks: Counter[str] = Counter()
        for uid in must:
            unit = units.get(uid)
            if unit is not None:
                self.card_picks[position[unit.card_id]] += 1
                self.part_picks[unit.hardware_id] += 1
        self.picked: list[str] = []

    def eligible(self) -> list[int]:
        return [p for p, n in self.left.items() if n]

    def _parts_of(self, card: int) -> dict[str, list[str]]:
        parts = self.parts.get(card)
        if parts is None:
            parts = {}
            for uid in self.by_card[card]:
                parts.setdefault(self.units[uid].hardware_id, []).append(uid)
            for ids in parts.values():
                ids.sort(reverse=True)  # lowest last, popped first
            self.parts[card] = parts
        return parts

    def take(self, card: int, hw_load: Mapping[str, int]) -> None:
        """The least used part of the card (fewest picks, then least load), its lowest free id."""
        parts = self._parts_of(card)

        def rank(part: str) -> tuple[int, int, str]:
            return (self.part_picks[part], hw_load.get(part, 0), parts[part][-1])

        part = min((p for p, ids in parts.items() if ids), key=rank)
        uid = parts[part].pop()
        self.left[card] -= 1
        self.card_picks[card] += 1
        self.part_picks[part] += 1
        self.picked.append(uid)


def _shared(
    topo: Topology,
    known: Sequence[str],
    must: Sequence[str],
    need: int,
    units: Mapping[str, Unit],
    free: set[str],
    policy: ReplicaPolicy,
) -> list[str]:
    hw_load: dict[str, int] = {}
    held = [0] * len(topo)
    position = topo.position
    for uid, unit in units.items():  # one pass: what kubelet did not offer is held (see hardware_load)
        if uid not in free:
            hw_load[unit.hardware_id] = hw_load.get(unit.hardware_id, 0) + 1
            held[position[unit.card_id]] += 1
    load = tuple(held)
    picker = _Picker(topo, known, must, units)
    if policy is ReplicaPolicy.PACK:
        while len(picker.picked) < need and picker.eligible():
            picker.take(max(picker.eligible(), key=lambda p: _pack_rank(topo, picker, load, p)), hw_load)
        return picker.picked
    fixed = tuple(sorted(p for p, n in picker.card_picks.items() if n))
    candidates = tuple(sorted(p for p in picker.by_card if p not in fixed))
    for card in choose(topo, CardRequest(fixed, candidates, need, load=load, fragmentation=False)):
        picker.take(card, hw_load)
    while len(picker.picked) < need and picker.eligible():
        card = min(picker.eligible(), key=lambda p: (picker.card_picks[p], load[p], p))
        picker.take(card, hw_load)
    return picker.picked


def _pack_rank(topo: Topology, picker: _Picker, load: Sequence[int], card: int) -> tuple[int, int, int, int]:
    """Stay on a card of this request, then the most loaded, then the best linked to what is taken."""
    used = [p for p, n in picker.card_picks.items() if n]
    link = min((topo.pair[card][p] for p in used if p != card), default=SINGLE_CARD)
    picks = picker.card_picks[card]
    return (int(picks > 0), load[card] + picks, link, -card)
