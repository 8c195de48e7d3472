"""A pool's units as the allocator reads them, derived once per snapshot rather than per request.

Every request needs, for each unit, the position of its card and its card or partition (hardware
id), and for each card and partition how many units the pool has: load is what kubelet did not
offer (:func:`~.policy.hardware_load`). None of it changes between requests, but it takes a pass
with attribute lookups over every unit of the pool, which on a 512-unit pool cost more than the
choice itself. :class:`PoolUnits` is a read-only mapping of units by id that derives it once per
topology (:class:`UnitLayout`); the plugin's snapshot of a pool holds one. Any other mapping is read
afresh per request, which gives the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from hcs_deviceplugin.allocation.topology import Topology
from hcs_deviceplugin.model import Unit


class UnitLayout:
    """What a request needs of a pool's units on one topology (see module doc).

    ``topology`` is the one given, extended with cards known only from units
    (:meth:`Topology.covering`). ``card`` and ``hardware`` map each unit id to its card's position
    and to its hardware id; ``per_card`` and ``per_hardware`` count the pool's units of each.
    ``units_of`` lists each card's unit ids in order. ``shared``: some unit is a replica or a
    partition (the pool hands out pieces of cards); ``partitioned``: some unit is a partition, so
    a card can hold parts of different load; ``one_per_card``: no card has two units.
    """

    __slots__ = (
        "card",
        "hardware",
        "one_per_card",
        "partitioned",
        "per_card",
        "per_hardware",
        "shared",
        "topology",
        "units_of",
    )

    def __init__(self, topology: Topology, units: Mapping[str, Unit]) -> None:
        self.topology = topology.covering(units)
        position = self.topology.position
        self.card: dict[str, int] = {}
        self.hardware: dict[str, str] = {}
        self.per_card = [0] * len(self.topology)
        self.per_hardware: dict[str, int] = {}
        self.units_of: list[list[str]] = [[] for _ in range(len(self.topology))]
        self.shared = self.partitioned = False
        for uid, unit in units.items():
            card = position[unit.card_id]
            hardware = unit.partition_id or unit.card_id
            self.card[uid] = card
            self.hardware[uid] = hardware
            self.per_card[card] += 1
            self.per_hardware[hardware] = self.per_hardware.get(hardware, 0) + 1
            self.units_of[card].append(uid)
            if unit.partition_id is not None:
                self.shared = self.partitioned = True
            elif unit.replica is not None:
                self.shared = True
        for ids in self.units_of:
            ids.sort()
        self.one_per_card = max(self.per_card, default=0) <= 1


class PoolUnits(Mapping[str, Unit]):
    """A pool's units by id, read-only, with their :class:`UnitLayout` kept for the last topology.

    Read-only is what makes keeping the layout sound: the units cannot change under it, and a
    topology is immutable, so the layout is reused exactly while both are the same objects.
    """

    __slots__ = ("_last", "_units")

    def __init__(self, units: Mapping[str, Unit] | Iterable[Unit]) -> None:
        self._units: dict[str, Unit] = dict(units) if isinstance(units, Mapping) else {u.id: u for u in units}
        self._last: tuple[Topology, UnitLayout] | None = None

    def __getitem__(self, unit_id: str) -> Unit:
        return self._units[unit_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._units)

    def __len__(self) -> int:
        return len(self._units)

    def __contains__(self, unit_id: object) -> bool:
        return unit_id in self._units

    def layout(self, topology: Topology) -> UnitLayout:
        """The layout on ``topology``, derived on first use (a reference swap: threads may race)."""
        last = self._last
        if last is not None and last[0] is topology:
            return last[1]
        layout = UnitLayout(topology, self._units)
        self._last = (topology, layout)
        return layout


def layout_of(topology: Topology, units: Mapping[str, Unit]) -> UnitLayout:
    """The layout of ``units`` on ``topology``: kept by a :class:`PoolUnits`, else derived now."""
    if isinstance(units, PoolUnits):
        return units.layout(topology)
    return UnitLayout(topology, units)
