"""A pool's units as the allocator keeps them between requests (``units.py``), and the kept tables.

What is kept must never change an answer: the same request gets the same ids whether the units come
as a plain mapping (read afresh) or as :class:`PoolUnits` (kept), and whether the tree programme's
tables were built for this request or kept from earlier ones of other sizes and occupancies.
"""

from __future__ import annotations

import random
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hcs_deviceplugin.allocation import Topology
from hcs_deviceplugin.allocation import hierarchy as tree
from hcs_deviceplugin.allocation.policy import ReplicaPolicy
from hcs_deviceplugin.allocation.units import PoolUnits, UnitLayout
from hcs_deviceplugin.model import Unit
from tests.allocator.islands import IslandNode, island_node

SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


@cache
def node_of(cards: int) -> tuple[IslandNode, Topology]:
    node = island_node(cards)
    return node, Topology.build(node.cards, node.links)


def partitions(node: IslandNode) -> dict[str, Unit]:
    """Two partitions per card, two replicas each (time-sliced MIG)."""
    return {
        (uid := f"{c.id}-p{p}::{r}"): Unit(uid, c.id, "t", partition_id=f"{c.id}-p{p}", replica=r)
        for c in node.cards
        for p in range(2)
        for r in range(2)
    }


@settings(max_examples=60, deadline=None)
@given(
    seed=SEEDS,
    kind=st.sampled_from(["whole", "replicas", "partitions"]),
    policy=st.sampled_from(list(ReplicaPolicy)),
)
def test_kept_units_answer_as_a_plain_mapping_does(seed: int, kind: str, policy: ReplicaPolicy) -> None:
    node, topo = node_of(16)
    units = node.whole() if kind == "whole" else node.replicas(4) if kind == "replicas" else partitions(node)
    kept = PoolUnits(units)
    rng = random.Random(seed)
    ids = list(units)
    for _ in range(5):  # one PoolUnits across requests, as a pool's snapshot serves them
        available = [u for u in ids if rng.random() < 0.7] + ["not-a-unit"]
        must = rng.sample(ids, k=rng.choice([0, 0, 1, 2]))
        size = rng.randrange(1, 12)
        assert topo.preferred(available, must, size, kept, policy) == topo.preferred(
            available, must, size, units, policy
        )


def test_a_layout_is_kept_per_topology() -> None:
    node, topo = node_of(16)
    units = PoolUnits(node.replicas(2))
    layout = units.layout(topo)
    assert units.layout(topo) is layout, "derived once for the same topology"
    other = Topology.build(node.cards[:8], node.links)
    assert units.layout(other) is not layout, "another topology gets its own"
    assert len(units.layout(other).topology) == 16, "cards known only from units are covered"


def test_a_layout_counts_units_per_card_and_part() -> None:
    node, topo = node_of(16)
    layout = UnitLayout(topo, partitions(node))
    assert layout.shared and layout.partitioned
    assert layout.per_card == [4] * 16
    assert layout.per_hardware["g000-p1"] == 2
    assert layout.units_of[0] == ["g000-p0::0", "g000-p0::1", "g000-p1::0", "g000-p1::1"]
    assert not UnitLayout(topo, node.whole()).shared


def test_pool_units_is_a_read_only_mapping() -> None:
    node, _ = node_of(16)
    units = PoolUnits(node.whole().values())
    assert len(units) == 16 and "g003" in units and units["g003"].card_id == "g003"
    assert list(units) == node.ids
    with pytest.raises(TypeError):
        units["g000"] = units["g001"]  # type: ignore[index]


def test_kept_tables_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tree, "_TABLES", 8)
    node = island_node(64)
    topo = Topology.build(node.cards, node.links)
    hierarchy = topo.hierarchy
    assert hierarchy is not None
    rng = random.Random(3)
    for _ in range(20):
        topo.preferred([c for c in node.ids if rng.random() < 0.75], [], 8, node.whole())
        assert max(len(hierarchy.tables), len(hierarchy.tops), len(hierarchy.codes)) <= 8


def test_small_blocks_get_their_tables_when_a_topology_is_built() -> None:
    node = island_node(64)
    prepared = Topology.build(node.cards, node.links).hierarchy
    assert prepared is not None
    # Every free pattern of a switch (3), bridge (15) and island (255), for whole and shared pools.
    assert len(prepared.tables) == 2 * (3 + 15 + 255)
    plain = Topology.build(node.cards, node.links, prepare=False).hierarchy
    assert plain is not None and not plain.tables


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, size=st.sampled_from([1, 2, 3, 4, 8, 8, 12]), shared=st.booleans())
def test_tables_built_ahead_answer_as_tables_built_on_demand(seed: int, size: int, shared: bool) -> None:
    node, prepared = node_of(64)
    plain = Topology.build(node.cards, node.links, prepare=False)
    units = node.replicas(2) if shared else node.whole()
    rng = random.Random(seed)
    available = [u for u in units if rng.random() < 0.75]
    must = rng.sample(available, k=rng.choice([0, 0, 1]))
    assert prepared.preferred(available, must, size, units) == plain.preferred(available, must, size, units)
