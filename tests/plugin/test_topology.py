"""PoolTopology: a pool's topology built once, on first use."""

from __future__ import annotations

from hcs_deviceplugin.allocation.topology import Topology
from hcs_deviceplugin.model import Card, Link, LinkKind, LinkMatrix, Unit
from hcs_deviceplugin.plugin.topology import PoolTopology

CARDS = [Card(f"c{i}", "sim", "sim", "X", i, numa_node=i // 2) for i in range(4)]
LINKS = LinkMatrix.from_pairs(
    [("c0", "c1", Link(LinkKind.NVLINK, 4)), ("c2", "c3", Link(LinkKind.NVLINK, 4))]
)
UNITS = [Unit(c.id, c.id, "sim", numa_node=c.numa_node) for c in CARDS]


def test_built_on_first_use_once_and_as_the_allocator_builds_it() -> None:
    pending = PoolTopology(CARDS, LINKS, UNITS)
    assert not pending.built
    built = pending.get()
    assert pending.built and pending.get() is built
    fresh = Topology.build(CARDS, LINKS, UNITS)
    assert (built.position, built.pair, built.levels) == (fresh.position, fresh.pair, fresh.levels)
