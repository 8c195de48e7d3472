"""HCCS links and group attributes, and what the allocator makes of them on real Ascend inventories."""

from __future__ import annotations

import time

from hcs_deviceplugin.allocation.topology import Topology
from hcs_deviceplugin.model import Card, Inventory, LinkKind, Unit
from tests.ascend.backend_harness import Harness
from tests.ascend.backend_harness import ascend_fixture as ascend_fixture  # noqa: PLC0414
from vendors.ascend import abi
from vendors.ascend.fake import node_910_a1, node_910b, node_a3
from vendors.ascend.families import Family
from vendors.ascend.topology import TopoChip, build


def _preferred(inventory: Inventory, available: list[Card], size: int) -> list[int]:
    units = {
        c.id: Unit(id=c.id, card_id=c.id, backend="ascend", numa_node=c.numa_node) for c in inventory.cards
    }
    topology = Topology.build(inventory.cards, inventory.links, units.values())
    chosen = topology.preferred([c.id for c in available], [], size, units)
    index = {c.id: c.index for c in inventory.cards}
    return sorted(index[c] for c in chosen)


def test_910_a1_preferred_allocations_keep_to_one_ring(ascend: Harness) -> None:
    inventory = ascend.backend(ascend.node(node_910_a1())).discover()
    cards = list(inventory.cards)
    assert _preferred(inventory, cards, 4) in ([0, 1, 2, 3], [4, 5, 6, 7])
    # Ring 0 has 3 free, ring 1 has 4: a 4-chip job can only go to ring 1, a 2-chip job to ring 0.
    free = [c for c in cards if c.index != 1]
    assert _preferred(inventory, free, 4) == [4, 5, 6, 7]
    assert set(_preferred(inventory, free, 2)) <= {0, 2, 3}
    # One chip: Volcano's priority prefers the ring with 3 free over the ring with 4 free.
    assert _preferred(inventory, free, 1)[0] in {0, 2, 3}


def test_a3_even_requests_take_whole_modules(ascend: Harness) -> None:
    inventory = ascend.backend(ascend.node(node_a3(8))).discover()
    cards = list(inventory.cards)
    free = [c for c in cards if c.index not in (0, 3)]  # modules 0 and 1 each half used
    chosen = _preferred(inventory, free, 4)
    modules = {i // 2 for i in chosen}
    assert len(modules) == 2 and all(i // 2 not in (0, 1) for i in chosen)
    single = _preferred(inventory, free, 1)
    assert single[0] in (1, 2), "a single die comes from a module whose other die is taken"


def test_910b_x16_has_two_meshes_of_eight(ascend: Harness) -> None:
    inventory = ascend.backend(ascend.node(node_910b(16))).discover()
    cards = inventory.cards
    assert [c.attributes["linkGroup"] for c in cards] == ["0"] * 8 + ["1"] * 8
    assert {c.attributes["linkGroupSizes"] for c in cards} == {"1,2,4,8,16"}
    assert inventory.links.between(cards[0].id, cards[8].id)[0].kind is LinkKind.CROSS_SOCKET
    assert _preferred(inventory, [c for c in cards if c.index != 0], 8) == list(range(8, 16))


def _chips(n: int, family: Family, per_card: int = 1) -> list[TopoChip]:
    return [TopoChip(f"c{i}", i // per_card, i, family) for i in range(n)]


def test_910b_without_hccs_has_no_groups() -> None:
    chips = _chips(4, Family.ASCEND910B)
    answers = {frozenset((a.id, b.id)): abi.TOPO_PIX for a in chips for b in chips if a.id < b.id}
    result = build(chips, answers)
    assert all(attrs == {} for attrs in result.attributes.values())
    assert {link.kind for links in result.links.links.values() for link in links} == {LinkKind.PCIE_SWITCH}


def test_910b_without_the_query_uses_a_mesh_of_eight() -> None:
    result = build(_chips(8, Family.ASCEND910B), {})
    assert len(result.links.links) == 28
    assert {a["linkGroup"] for a in result.attributes.values()} == {"0"}


def test_superpod_hccs_switch_counts_as_hccs() -> None:
    chips = _chips(4, Family.ASCEND910A3, per_card=2)
    answers = {
        frozenset((a.id, b.id)): abi.TOPO_SIO if a.card_id == b.card_id else abi.TOPO_HCCS_SW
        for a in chips
        for b in chips
        if a.id < b.id
    }
    result = build(chips, answers)
    assert [result.attributes[c.id]["linkModule"] for c in chips] == ["0", "0", "1", "1"]
    assert {result.attributes[c.id]["linkGroup"] for c in chips} == {"0"}
    assert result.links.between("c0", "c2")[0].count == 1
    assert result.links.between("c0", "c1")[0].count == 2


def test_unknown_topology_answers_add_no_link() -> None:
    chips = _chips(2, Family.ASCEND910B)
    result = build(chips, {frozenset(("c0", "c1")): 9})
    assert result.links.links == {} and result.attributes["c0"] == {}


def test_chip_hung_at_first_discovery_gets_its_links_once_back(ascend: Harness) -> None:
    node = ascend.node(node_910b(8))
    backend = ascend.backend(node, callTimeoutSeconds="0.3")
    node.control.hang(3, 60)
    during = backend.discover()
    assert [c.index for c in during.cards] == [0, 1, 2, 4, 5, 6, 7]
    assert len(during.links.links) == 21, "the pairs of the seven chips that answer"
    node.control.hang(3, 0)

    deadline = time.monotonic() + 10  # the hung call returns within ~5 ms of the hang's end
    after = backend.discover()
    while len(after.cards) < 8:
        assert time.monotonic() < deadline, "chip 3 never answered again"
        after = backend.discover()
    assert len(after.links.links) == 28
    assert {c.attributes["linkGroup"] for c in after.cards} == {"0"}
