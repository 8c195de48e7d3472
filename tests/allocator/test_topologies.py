"""Table tests on real node shapes (``topologies/*.yaml``): what a whole-card pool gets per request."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.allocator import Topology, preferred_allocation
from tests.allocator.loader import Case, Node, all_nodes

NODES = all_nodes()
CASES = [(node, case) for node in NODES for case in node.cases]


@pytest.mark.parametrize(("node", "case"), CASES, ids=[f"{n.name}:{c.name}" for n, c in CASES])
def test_table(node: Node, case: Case) -> None:
    chosen = preferred_allocation(
        node.available(case), list(case.must), case.size, node.units, links=node.links, cards=node.cards
    )
    assert chosen == list(case.expect)


@pytest.mark.parametrize("node", NODES, ids=[n.name for n in NODES])
def test_precomputed_topology_answers_the_same(node: Node) -> None:
    topology = Topology.build(node.cards, node.links)
    for case in node.cases:
        chosen = topology.preferred(node.available(case), list(case.must), case.size, node.units)
        assert chosen == list(case.expect), case.name


def test_every_required_shape_and_size_is_covered() -> None:
    names = {n.name for n in NODES}
    assert {
        "dgx-h100-nvswitch",
        "nvlink-2x4-pcie",
        "ascend-910b-8",
        "ascend-910-4x2",
        "xgmi-8-dcu",
        "mlu-link-ring",
    } <= names
    for node in NODES:
        sizes = {c.size for c in node.cases}
        assert {1, 2, 4} <= sizes and max(sizes) == len(node.cards), node.name
        assert any(c.must for c in node.cases) and any(not c.must for c in node.cases), node.name
