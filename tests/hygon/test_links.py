"""Links for the allocator: xGMI from KFD io_links/p2p_links, the PCIe/NUMA host path beside it."""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

from hcs_deviceplugin.model import Link, LinkKind, LinkMatrix
from tests.hygon.conftest import Harness
from vendors.hygon.fake import pcie_node, xgmi_node


def xgmi_pairs(matrix: LinkMatrix) -> set[frozenset[str]]:
    return {k for k, links in matrix.links.items() if any(x.kind == LinkKind.XGMI for x in links)}


def host_kind(matrix: LinkMatrix, a: str, b: str) -> LinkKind | None:
    kinds = [x.kind for x in matrix.between(a, b) if x.kind != LinkKind.XGMI]
    assert len(kinds) <= 1
    return kinds[0] if kinds else None


def test_all_to_all_xgmi_node(hygon: Harness) -> None:
    backend = hygon.backend(hygon.node(xgmi_node(8)))
    cards = [c.id for c in backend.discover().cards]
    links = backend.links()
    assert xgmi_pairs(links) == {frozenset(p) for p in combinations(cards, 2)}
    assert [x for x in links.between(cards[0], cards[5]) if x.kind == LinkKind.XGMI] == [
        Link(LinkKind.XGMI, count=1, bandwidth_gbps=50.0)
    ], "one link per pair, whichever side lists it; KFD MB/s as GB/s"


def test_two_hives_link_only_inside_a_hive(hygon: Harness) -> None:
    backend = hygon.backend(hygon.node(xgmi_node(8, hives=2)))
    cards = [c.id for c in backend.discover().cards]
    hives = [cards[0::2], cards[1::2]]
    assert xgmi_pairs(backend.links()) == {frozenset(p) for hive in hives for p in combinations(hive, 2)}


def test_host_path_switch_numa_and_unknown(hygon: Harness) -> None:
    backend = hygon.backend(hygon.node(xgmi_node(8)))
    cards = [c.id for c in backend.discover().cards]
    links = backend.links()
    assert host_kind(links, cards[0], cards[3]) == LinkKind.PCIE_SWITCH
    assert host_kind(links, cards[4], cards[6]) == LinkKind.PCIE_SWITCH
    assert host_kind(links, cards[0], cards[4]) == LinkKind.CROSS_SOCKET
    assert host_kind(links, cards[0], cards[7]) is None, "card 7's numa_node is -1: nothing known"


def test_xgmi_in_p2p_links_reads_the_same(hygon: Harness) -> None:
    backend = hygon.backend(hygon.node(replace(xgmi_node(4), xgmi_in_p2p_links=True)))
    cards = [c.id for c in backend.discover().cards]
    assert xgmi_pairs(backend.links()) == {frozenset(p) for p in combinations(cards, 2)}


def test_pcie_node_has_no_xgmi(hygon: Harness) -> None:
    backend = hygon.backend(hygon.node(pcie_node(16)))  # four switches of four, two per NUMA node
    cards = [c.id for c in backend.discover().cards]
    links = backend.links()
    assert xgmi_pairs(links) == set()
    assert host_kind(links, cards[0], cards[3]) == LinkKind.PCIE_SWITCH
    assert host_kind(links, cards[0], cards[4]) == LinkKind.SAME_NUMA
    assert host_kind(links, cards[0], cards[8]) == LinkKind.CROSS_SOCKET


def test_malformed_link_file_drops_only_that_link(hygon: Harness) -> None:
    node = hygon.node(xgmi_node(4))
    backend = hygon.backend(node)
    cards = [c.id for c in backend.discover().cards]
    # card 0 lists xGMI to 1, 2, 3 as io_links/1..3; break its link to card 1 on both sides
    node.corrupt(node.kfd_node_dir(node.addresses[0]) / "io_links/1/properties", "type eleven\n")
    node.corrupt(node.kfd_node_dir(node.addresses[1]) / "io_links/1/properties", "type eleven\n")
    inventory = backend.discover()
    assert xgmi_pairs(inventory.links) == {frozenset(p) for p in combinations(cards, 2)} - {
        frozenset(cards[:2])
    }
    assert all(c.health.value == "Healthy" for c in inventory.cards), "links are hints, not health"


def test_a_removed_card_keeps_its_links(hygon: Harness) -> None:
    node = hygon.node(xgmi_node(4))
    backend = hygon.backend(node)
    cards = [c.id for c in backend.discover().cards]
    before = backend.links()
    node.remove_card(node.addresses[2])
    inventory = backend.discover()
    assert [c.id for c in inventory.cards] == cards
    assert inventory.links.between(cards[2], cards[0]) == before.between(cards[2], cards[0])
    assert xgmi_pairs(inventory.links) == xgmi_pairs(before)
