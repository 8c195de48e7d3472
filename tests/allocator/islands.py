"""Large NVLink-island nodes and an independent exhaustive reference for them.

The node (what HGX/DGX-style boards look like at 64-128 GPUs): islands of 8 GPUs joined by
NVSwitch (12 NVLinks a pair), each island made of two PCIe host bridges with two PCIe switches of
two GPUs each; two islands per NUMA node, NUMA nodes across sockets. Pair scores, strongest first:
same switch, same host bridge, same island, same NUMA node, across NUMA nodes.

The reference (:func:`reference`) does not use the allocator's search. It scores, with the
allocator's public objective, *every* set inside every block of the finest level (single card,
switch, host bridge, island, NUMA node, node) that can hold the request. That is the whole
optimum, not a sample of it: a set that does not fit inside one block of that level has a pair
across two of its blocks, and every such pair scores below every pair inside one block, so its
weakest pair (item 3 of the key, after load, groups and modules, which are equal here) loses to
any set inside a block. What is exhaustive is the enumeration inside those blocks; what makes it
tractable is that the blocks are small.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from hcs_deviceplugin.allocation.select import Key, Objective
from hcs_deviceplugin.model import Card, Link, LinkKind, LinkMatrix, Unit, replica_unit_id

ISLAND, BRIDGE, SWITCH, NUMA = 8, 4, 2, 16


@dataclass(frozen=True)
class IslandNode:
    cards: list[Card]
    links: LinkMatrix
    blocks: tuple[tuple[tuple[str, ...], ...], ...]
    """Card ids per block, finest level first: cards, switches, bridges, islands, NUMA nodes, node."""

    @property
    def ids(self) -> list[str]:
        return [c.id for c in self.cards]

    def whole(self) -> dict[str, Unit]:
        return {c.id: Unit(c.id, c.id, "t", numa_node=c.numa_node) for c in self.cards}

    def replicas(self, per_card: int) -> dict[str, Unit]:
        return {
            (uid := replica_unit_id(c.id, r)): Unit(uid, c.id, "t", replica=r, numa_node=c.numa_node)
            for c in self.cards
            for r in range(per_card)
        }


def island_node(count: int) -> IslandNode:
    """``count`` GPUs (a multiple of 16) built as the module doc describes."""
    cards = [Card(f"g{i:03d}", "t", "t", "t", i, numa_node=i // NUMA) for i in range(count)]
    ids = [c.id for c in cards]
    pairs: list[tuple[str, str, Link]] = []
    for a in range(count):
        for b in range(a + 1, count):
            if a // ISLAND != b // ISLAND:
                continue  # across islands nothing is listed: the NUMA fallback scores the pair
            pairs.append((ids[a], ids[b], Link(LinkKind.NVLINK, 12)))
            if a // SWITCH == b // SWITCH:
                pairs.append((ids[a], ids[b], Link(LinkKind.PCIE_SWITCH)))
            elif a // BRIDGE == b // BRIDGE:
                pairs.append((ids[a], ids[b], Link(LinkKind.PCIE_HOST_BRIDGE)))
    blocks = tuple(
        tuple(tuple(ids[s : s + width]) for s in range(0, count, width))
        for width in (1, SWITCH, BRIDGE, ISLAND, NUMA, count)
    )
    return IslandNode(cards, LinkMatrix.from_pairs(pairs), blocks)


def reference(
    objective: Objective, count: int, blocks: Sequence[Sequence[Sequence[int]]], limit: int = 50_000
) -> tuple[int, ...] | None:
    """The best ``count`` candidates by the objective (see module doc); None if over ``limit`` sets.

    ``blocks`` are positions per block, finest level first.
    """
    if count <= 0:
        return ()
    fixed = set(objective.fixed)
    free = set(objective.candidates)
    for level in blocks:
        holding = [
            sorted(free.intersection(b))
            for b in level
            if fixed <= set(b) and len(free.intersection(b)) >= count
        ]
        if holding:
            break
    else:
        return None
    if sum(math.comb(len(h), count) for h in holding) > limit:
        return None
    best: Key | None = None
    tied: list[tuple[int, ...]] = []
    for h in holding:
        for combo in combinations(h, count):
            k = objective.prefix(combo)
            if best is None or k > best:
                best, tied = k, [combo]
            elif k == best:
                tied.append(combo)
    return max(tied, key=objective.key)


def positions(objective: Objective, node: IslandNode) -> list[list[list[int]]]:
    """``node.blocks`` as topology positions."""
    pos = objective.topology.position
    return [[[pos[c] for c in block] for block in level] for level in node.blocks]
