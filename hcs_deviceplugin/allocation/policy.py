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
from collections.abc import Container, Mapping, Sequence

from hcs_deviceplugin.allocation.links import SINGLE_CARD
from hcs_deviceplugin.allocation.select import CardRequest, choose
from hcs_deviceplugin.allocation.topology import Topology
from hcs_deviceplugin.allocation.units import UnitLayout, layout_of
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


def choose_units(
    topology: Topology,
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    units: Mapping[str, Unit],
    policy: ReplicaPolicy = ReplicaPolicy.SPREAD,
) -> list[str]:
    """Up to ``size`` unit ids: all of ``must_include`` first, then the best of ``available``.

    Per request this reads only what kubelet sent; what it needs of the pool's units comes from
    their :class:`~.units.UnitLayout`, kept by a :class:`~.units.PoolUnits` between requests.
    """
    if size <= 0:
        return []
    must = list(dict.fromkeys(must_include))
    if len(must) >= size:
        return must[:size]
    layout = layout_of(topology, units)
    card = layout.card
    offered = dict.fromkeys(available)
    for uid in must:
        offered.pop(uid, None)
    known = [uid for uid in offered if uid in card]
    unknown = [uid for uid in offered if uid not in card] if len(known) < len(offered) else []
    need = size - len(must)
    if layout.shared:
        picked = _shared(layout, known, offered, must, need, policy)
    else:
        picked = _whole_cards(layout, known, must, need)
    return [*must, *picked, *unknown][:size]


def _whole_cards(layout: UnitLayout, known: Sequence[str], must: Sequence[str], need: int) -> list[str]:
    card = layout.card
    by_card: dict[int, str]  # the lowest offered id of each card
    if layout.one_per_card:  # one unit per card (the usual whole-card pool): pair them up in C
        by_card = dict(zip(map(card.__getitem__, known), known, strict=True))
    else:
        by_card = {}
        for uid in known:
            position = card[uid]
            first = by_card.get(position)
            if first is None or uid < first:
                by_card[position] = uid
    fixed = tuple(sorted({card[uid] for uid in must if uid in card}))
    candidates = tuple(sorted(by_card.keys() - set(fixed)))
    added = choose(layout.topology, CardRequest(fixed, candidates, need, fragmentation=True))
    return [by_card[p] for p in added]


class _Picker:
    """The shared-pool bookkeeping of one request: free units per card, picks per card and part.

    Up front only the offered units per card are counted (one pass, in C). A card is read only when
    it is taken from, so a request over hundreds of units reads only the few cards it uses: where
    cards are not partitioned its ids are walked in order from where the last pick stopped; else
    its offered ids are grouped by part (partition) to rank the parts.
    """

    def __init__(
        self, layout: UnitLayout, known: Sequence[str], offered: Container[str], must: Sequence[str]
    ) -> None:
        self.layout, self.known, self.offered = layout, known, offered
        card = layout.card
        self.must = [uid for uid in must if uid in card]
        self.left: Counter[int] = Counter(map(card.__getitem__, known))
        self.parts: dict[int, dict[str, list[str]]] = {}
        self.next_of: dict[int, int] = {}
        self.free_parts: Counter[str] | None = None
        self.card_picks: Counter[int] = Counter()
        self.part_picks: Counter[str] = Counter()
        for uid in must:
            position = card.get(uid)
            if position is not None:
                self.card_picks[position] += 1
                self.part_picks[layout.hardware[uid]] += 1
        self.picked: list[str] = []

    def held(self) -> tuple[int, ...]:
        """Units per card that are neither offered nor must-include: the load of :mod:`.select`."""
        held = list(self.layout.per_card)
        for position, offered in self.left.items():
            held[position] -= offered
        for uid in self.must:
            held[self.layout.card[uid]] -= 1
        return tuple(held)

    def eligible(self) -> list[int]:
        return [p for p, n in self.left.items() if n]

    def _parts_of(self, card: int) -> dict[str, list[str]]:
        """The card's offered ids per part, highest first (the lowest is popped from the end)."""
        parts = self.parts.get(card)
        if parts is None:
            parts = {}
            offered, hardware = self.offered, self.layout.hardware
            for uid in reversed(self.layout.units_of[card]):
                ids = parts.setdefault(hardware[uid], [])
                if uid in offered:
                    ids.append(uid)
            self.parts[card] = parts
        return parts

    def load_of(self, part: str) -> int:
        """Units of the card or partition that are neither offered nor must-include."""
        if self.free_parts is None:
            self.free_parts = Counter(map(self.layout.hardware.__getitem__, [*self.known, *self.must]))
        return self.layout.per_hardware[part] - self.free_parts[part]

    def take(self, card: int) -> None:
        """The least used part of the card (fewest picks, then least load), its lowest free id."""
        if not self.layout.partitioned:  # one part, the card: its next offered id in order
            units, offered = self.layout.units_of[card], self.offered
            i = self.next_of.get(card, 0)
            while units[i] not in offered:
                i += 1
            self.next_of[card] = i + 1
            self._took(card, self.layout.hardware[units[i]], units[i])
            return
        parts = self._parts_of(card)

        def rank(part: str) -> tuple[int, int, str]:
            return (self.part_picks[part], self.load_of(part), parts[part][-1])

        part = min((p for p, ids in parts.items() if ids), key=rank)
        self._took(card, part, parts[part].pop())

    def _took(self, card: int, part: str, uid: str) -> None:
        self.left[card] -= 1
        self.card_picks[card] += 1
        self.part_picks[part] += 1
        self.picked.append(uid)


def _shared(
    layout: UnitLayout,
    known: Sequence[str],
    offered: Container[str],
    must: Sequence[str],
    need: int,
    policy: ReplicaPolicy,
) -> list[str]:
    picker = _Picker(layout, known, offered, must)
    load = picker.held()
    topo = layout.topology
    if policy is ReplicaPolicy.PACK:
        while len(picker.picked) < need and picker.eligible():
            picker.take(max(picker.eligible(), key=lambda p: _pack_rank(topo, picker, load, p)))
        return picker.picked
    fixed = tuple(sorted(p for p, n in picker.card_picks.items() if n))
    candidates = tuple(sorted(p for p in picker.left if p not in fixed))
    for position in choose(topo, CardRequest(fixed, candidates, need, load=load, fragmentation=False)):
        picker.take(position)
    while len(picker.picked) < need and picker.eligible():
        picker.take(min(picker.eligible(), key=lambda p: (picker.card_picks[p], load[p], p)))
    return picker.picked


def _pack_rank(topo: Topology, picker: _Picker, load: Sequence[int], card: int) -> tuple[int, int, int, int]:
    """Stay on a card of this request, then the most loaded, then the best linked to what is taken."""
    used = [p for p, n in picker.card_picks.items() if n]
    link = min((topo.pair[card][p] for p in used if p != card), default=SINGLE_CARD)
    picks = picker.card_picks[card]
    return (int(picks > 0), load[card] + picks, link, -card)
