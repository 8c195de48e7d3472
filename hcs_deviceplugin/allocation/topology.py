"""The node's topology as the allocator needs it, computed once per inventory change.

:meth:`Topology.build` turns cards and their :class:`~hcs_deviceplugin.model.LinkMatrix` into a pair
score matrix (see :mod:`.links`) and into *islands*: partitions of the cards whose free cards are
worth keeping together for the next request. A pool builds it when its cards or links change and
calls :meth:`Topology.preferred` per ``GetPreferredAllocation``; nothing here is recomputed per call.

Data contract for backends (all optional; vendor-neutral names)
    Links
        One :class:`~hcs_deviceplugin.model.Link` per connection and pair: a fabric kind (NVLink,
        HCCS, xGMI, MLU-Link) with ``count`` = number of links (or lanes), and/or the host-path kind
        (PCIe-switch, PCIe-host-bridge, same-NUMA, cross-socket). ``bandwidth_gbps`` is GB/s per
        direction and is informative only. Pairs with nothing listed fall back to NUMA.
    ``Card.numa_node``
        Used for the NUMA fallback and as an island level.
    ``Card.attributes["linkGroup"]``
        Cards with the same value form one group that collectives must not leave: the request is
        placed in as few groups as possible before anything else is compared. Ascend 910 (A1): the
        HCCS ring, ``"0"`` for chips 0-3 and ``"1"`` for 4-7, plus HCCS links inside each ring;
        910B 800T/800I A2: ``"0"`` for all 8 chips (one full mesh); 910B x16: ``"0"``/``"1"`` for
        the left and right eight; A3: one value per HCCS domain.
    ``Card.attributes["linkGroupSizes"]``
        Comma-separated request sizes (in cards) the hardware and its schedulers use, e.g.
        ``"1,2,4,8"`` for 910 A1. They decide which leftovers count as useful (see "Fragmentation");
        unparsable entries are ignored, since an allocator must never fail a request. Without it the
        powers of two up to the number of cards are used.
    ``Card.attributes["linkModule"]``
        Cards (dies) with the same value share one module and are handed out together when the size
        allows: the request spans as few modules as possible, right after groups. Ascend A3: the
        card (module) id for both dies, so an even request takes whole modules and a single die is
        taken from a module whose other die is already in use.

Fragmentation
    Among equally good sets the allocator keeps what is left free most useful. The *protected
    sizes* are every size the backend declares valid (``linkGroupSizes``; powers of two up to the
    card count without it) plus the size of the request itself: a node that serves one 6-card job
    is likely to serve another. For each protected size ``s`` (largest first) and each island level
    it counts the *usable sets*: how many disjoint ``s``-sets the leftover free cards still hold
    inside one island (``sum(free // s)`` per island: sets that straddle two islands are not usable
    at that level), then prefers fewer partially used islands. Island levels, coarse to fine:
    ``linkGroup``, fabric components (cards joined by any fabric link), NUMA node, host bridge
    (cards joined by ``PCIe-host-bridge`` or ``PCIe-switch`` links), PCIe switch (cards joined by
    ``PCIe-switch`` links), ``linkModule``. On a 910 A1 node this reproduces Volcano's ring priority
    for one chip (a ring with 1 free, then 3, then 2, then 4) and for two chips (2, then 4 or 3);
    for two chips from a ring with 3 free versus one with 4 free it keeps the whole ring for a later
    4-chip job, where Volcano's table takes from the full ring.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING

from hcs_deviceplugin.allocation.hierarchy import Hierarchy, Islands, warm
from hcs_deviceplugin.allocation.hierarchy import build as build_hierarchy
from hcs_deviceplugin.allocation.links import FABRIC_KINDS, SetScore, pair_score, set_score
from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import Card, LinkKind, LinkMatrix, Unit

if TYPE_CHECKING:
    from hcs_deviceplugin.allocation.policy import ReplicaPolicy

GROUP_ATTRIBUTE = "linkGroup"
GROUP_SIZES_ATTRIBUTE = "linkGroupSizes"
MODULE_ATTRIBUTE = "linkModule"


@field_repr
@dataclass(frozen=True, repr=False)
class CardInfo:
    """What the allocator keeps of a card: identity, order, NUMA node, and the contract attributes."""

    id: str
    index: int | None = None
    numa_node: int | None = None
    attributes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@field_repr
@dataclass(frozen=True, repr=False)
class Topology:
    """Pair scores and islands of a fixed set of cards; immutable, shareable between threads.

    Cards are numbered by *position*: sorted by ``Card.index`` (cards without one, such as those only
    known from units, after), then by id. Every tie in the allocator goes to lower positions, so the
    answer is deterministic and reads naturally (GPU 0 before GPU 1). Per position:

    * ``pair[a][b]``: the pair score of :mod:`.links` (symmetric; the diagonal is unused);
    * ``group``/``module``: the ``linkGroup``/``linkModule`` value, or a value of the card's own when
      it has none; ``has_groups``/``has_modules`` say whether any two cards share one;
    * ``levels``: island number per card on each island level that has an island of two or more
      (coarse to fine, duplicates dropped), ``island_sizes`` the card count of each island;
    * ``sizes``: the backend's valid request sizes above one, largest first (each request adds its
      own, see "Fragmentation");
    * ``strongest``: the card's best pair score, where greedy seeds start on irregular topologies.
    """

    cards: tuple[CardInfo, ...]
    links: LinkMatrix
    position: Mapping[str, int]
    pair: tuple[tuple[int, ...], ...]
    group: tuple[str, ...]
    module: tuple[str, ...]
    levels: tuple[tuple[int, ...], ...]
    island_sizes: tuple[tuple[int, ...], ...]
    sizes: tuple[int, ...]
    has_groups: bool
    has_modules: bool
    strongest: tuple[int, ...]

    @staticmethod
    def build(
        cards: Iterable[Card] | Mapping[str, Card] = (),
        links: LinkMatrix | None = None,
        units: Iterable[Unit] | Mapping[str, Unit] = (),
        *,
        prepare: bool = True,
    ) -> Topology:
        """Precompute everything per-request work needs, the tree of blocks and the tables of its
        small blocks included (:func:`~.hierarchy.warm`, the tree search's; not with ``prepare``
        false, for a topology that serves one request); O(cards²) once.

        ``units`` only adds cards that ``cards`` does not name (a pool without an inventory at hand)
        and fills in their NUMA node.
        """
        card_values = list(cards.values()) if isinstance(cards, Mapping) else list(cards)
        unit_values = list(units.values()) if isinstance(units, Mapping) else list(units)
        infos = {c.id: CardInfo(c.id, c.index, c.numa_node, c.attributes) for c in card_values}
        for unit in unit_values:
            if unit.card_id not in infos:
                infos[unit.card_id] = CardInfo(unit.card_id, None, unit.numa_node)
            elif infos[unit.card_id].numa_node is None and unit.numa_node is not None:
                known = infos[unit.card_id]
                infos[unit.card_id] = CardInfo(known.id, known.index, unit.numa_node, known.attributes)
        topology = _build(tuple(infos.values()), links or LinkMatrix())
        tree = topology.hierarchy  # built here, when a pool's cards change, not on its first request
        if tree is not None and prepare and not (topology.has_groups or topology.has_modules):
            levels = len(topology.levels)  # and the tables its first requests would build
            warm(tree, [Islands(topology.sizes, levels, fragmentation) for fragmentation in (True, False)])
        return topology

    def covering(self, units: Mapping[str, Unit]) -> Topology:
        """This topology, or one extended with the cards of ``units`` it does not know yet."""
        missing = {u.card_id: u for u in units.values() if u.card_id not in self.position}
        if not missing:
            return self
        extra = tuple(CardInfo(cid, None, u.numa_node) for cid, u in missing.items())
        return _build(self.cards + extra, self.links)

    def __len__(self) -> int:
        return len(self.cards)

    @cached_property
    def hierarchy(self) -> Hierarchy | None:
        """The tree of blocks when the node is built in levels (see :mod:`.hierarchy`), else None.

        Computed on first use and kept with the topology, which a pool keeps until its cards or
        links change: per-request work never repeats it.
        """
        return build_hierarchy(self.pair, self.levels)

    def score(self, card_ids: Iterable[str]) -> SetScore:
        """The collective score (weakest pair, then sum) of a set of known cards."""
        pos = sorted({self.position[c] for c in card_ids})
        return set_score(self.pair[a][b] for i, a in enumerate(pos) for b in pos[i + 1 :])

    def preferred(
        self,
        available: Sequence[str],
        must_include: Sequence[str],
        size: int,
        units: Mapping[str, Unit],
        policy: ReplicaPolicy | None = None,
    ) -> list[str]:
        """``GetPreferredAllocation`` for one container (see ``allocator.preferred_allocation``)."""
        from hcs_deviceplugin.allocation.policy import ReplicaPolicy, choose_units

        return choose_units(
            self, available, must_include, size, units, ReplicaPolicy.SPREAD if policy is None else policy
        )


def _sort_key(card: CardInfo) -> tuple[int, int, str]:
    return (0, card.index, card.id) if card.index is not None else (1, 0, card.id)


def _build(cards: tuple[CardInfo, ...], links: LinkMatrix) -> Topology:
    ordered = tuple(sorted(cards, key=_sort_key))
    position = {c.id: i for i, c in enumerate(ordered)}
    n = len(ordered)
    pair = [[0] * n for _ in range(n)]
    listed: dict[tuple[int, int], int] = {}
    fabric_edges: list[tuple[int, int]] = []
    switch_edges: list[tuple[int, int]] = []
    bridge_edges: list[tuple[int, int]] = []
    for key, pair_links in links.links.items():
        ends = sorted(position[c] for c in key if c in position)
        if len(ends) != 2:
            continue
        a, b = ends
        listed[(a, b)] = pair_score(pair_links, ordered[a].numa_node, ordered[b].numa_node)
        if any(link.kind in FABRIC_KINDS for link in pair_links):
            fabric_edges.append((a, b))
        if any(link.kind is LinkKind.PCIE_SWITCH for link in pair_links):
            switch_edges.append((a, b))
        if any(link.kind in (LinkKind.PCIE_SWITCH, LinkKind.PCIE_HOST_BRIDGE) for link in pair_links):
            bridge_edges.append((a, b))
    for a in range(n):
        for b in range(a + 1, n):
            score = listed.get((a, b))
            if score is None:
                score = pair_score((), ordered[a].numa_node, ordered[b].numa_node)
            pair[a][b] = pair[b][a] = score
    group = tuple(_attribute_key(c, GROUP_ATTRIBUTE, i) for i, c in enumerate(ordered))
    module = tuple(_attribute_key(c, MODULE_ATTRIBUTE, i) for i, c in enumerate(ordered))
    numa = tuple(f"n:{c.numa_node}" if c.numa_node is not None else f"c:{i}" for i, c in enumerate(ordered))
    candidates = [
        _relabel(group),
        _components(n, fabric_edges),
        _relabel(numa),
        _components(n, bridge_edges),
        _components(n, switch_edges),
        _relabel(module),
    ]
    levels: list[tuple[int, ...]] = []
    for level in candidates:
        if len(set(level)) < n and level not in levels:
            levels.append(level)
    island_sizes = tuple(_island_sizes(level) for level in levels)
    return Topology(
        cards=ordered,
        links=links,
        position=MappingProxyType(position),
        pair=tuple(tuple(row) for row in pair),
        group=group,
        module=module,
        levels=tuple(levels),
        island_sizes=island_sizes,
        sizes=_useful_sizes(ordered),
        has_groups=len(set(group)) < n,
        has_modules=len(set(module)) < n,
        strongest=tuple(
            max((s for j, s in enumerate(row) if j != i), default=0) for i, row in enumerate(pair)
        ),
    )


def _attribute_key(card: CardInfo, name: str, pos: int) -> str:
    value = card.attributes.get(name)
    return f"a:{value}" if value else f"c:{pos}"


def _relabel(keys: Sequence[str]) -> tuple[int, ...]:
    """Island numbers in order of first appearance, so equal partitions compare equal."""
    seen: dict[str, int] = {}
    return tuple(seen.setdefault(k, len(seen)) for k in keys)


def _components(n: int, edges: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return _relabel([str(find(i)) for i in range(n)])


def _island_sizes(level: Sequence[int]) -> tuple[int, ...]:
    sizes = [0] * (max(level) + 1 if level else 0)
    for island in level:
        sizes[island] += 1
    return tuple(sizes)


def _useful_sizes(cards: Sequence[CardInfo]) -> tuple[int, ...]:
    """The backend's valid request sizes above one card, largest first (see "Fragmentation")."""
    declared: set[int] = set()
    for card in cards:
        for token in card.attributes.get(GROUP_SIZES_ATTRIBUTE, "").split(","):
            if token.strip().isdigit():
                declared.add(int(token))
    if not declared:
        size = 2
        while size <= len(cards):
            declared.add(size)
            size *= 2
    return tuple(sorted((s for s in declared if s > 1), reverse=True))
