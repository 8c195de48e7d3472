"""MLU-Link between the chips of one board and from the operator file; PCIe/NUMA host paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hcs_deviceplugin.allocation.topology import Topology
from hcs_deviceplugin.model import Health, Link, LinkKind, Unit
from tests.cambricon.conftest import Harness
from vendors.cambricon.fake.tree import mlulink_node, pcie_node
from vendors.cambricon.links import LinkFileError, parse_link_file

BOARD0 = ("MLU-1916a000-0", "MLU-1916a000-1")
BOARD1 = ("MLU-1916a001-0", "MLU-1916a001-1")
BOARD2 = ("MLU-1916a002-0", "MLU-1916a002-1")


def kinds(links: tuple[Link, ...]) -> set[tuple[LinkKind, int]]:
    return {(link.kind, link.count) for link in links}


def test_chips_of_one_board_are_mlu_linked_behind_their_switch(mlu: Harness) -> None:
    backend = mlu.backend(mlu.node(mlulink_node(8)))
    backend.discover()
    matrix = backend.links()
    assert kinds(matrix.between(*BOARD0)) == {(LinkKind.MLU_LINK, 1), (LinkKind.PCIE_SWITCH, 1)}
    assert kinds(matrix.between(BOARD0[0], BOARD1[0])) == {(LinkKind.PCIE_HOST_BRIDGE, 1)}
    assert kinds(matrix.between(BOARD0[0], BOARD2[0])) == {(LinkKind.CROSS_SOCKET, 1)}


def test_topology_file_joins_boards(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    assert node.link_file is not None
    backend = mlu.backend(node, mluLinkFile=str(node.link_file))
    backend.discover()
    matrix = backend.links()
    assert backend.link_file_error is None
    for a in BOARD0:
        for b in BOARD1:
            assert (LinkKind.MLU_LINK, 1) in kinds(matrix.between(a, b))
    assert (LinkKind.MLU_LINK, 1) in kinds(matrix.between("MLU-1916a002-1", "MLU-1916a003-0"))
    assert kinds(matrix.between(BOARD1[0], BOARD2[0])) == {(LinkKind.CROSS_SOCKET, 1)}


def test_preferred_pair_is_one_board_and_four_is_two_linked_boards(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    backend = mlu.backend(node, mluLinkFile=str(node.link_file))
    cards = backend.discover().cards
    topology = Topology.build(cards, backend.links())
    units = {c.id: Unit(c.id, c.id, "cambricon", numa_node=c.numa_node) for c in cards}
    free = [c.id for c in cards if c.id not in BOARD0[:1]]  # one chip of board 0 is taken
    pair = topology.preferred(free, [], 2, units)
    assert set(pair) in ({*BOARD1}, {*BOARD2}, {"MLU-1916a003-0", "MLU-1916a003-1"})
    four = topology.preferred([c.id for c in cards], [], 4, units)
    assert set(four) in ({*BOARD0, *BOARD1}, {*BOARD2, "MLU-1916a003-0", "MLU-1916a003-1"})


def test_file_by_card_id_in_json(mlu: Harness, tmp_path: Path) -> None:
    node = mlu.node(pcie_node(3))
    link_file = tmp_path / "links.json"
    link_file.write_text(json.dumps([{"a": "MLU-3700b000", "b": "0000:06:00.0", "links": 4}]))
    backend = mlu.backend(node, mluLinkFile=str(link_file))
    backend.discover()
    assert (LinkKind.MLU_LINK, 4) in kinds(backend.links().between("MLU-3700b000", "MLU-3700b002"))
    assert not any(
        link.kind == LinkKind.MLU_LINK for link in backend.links().between("MLU-3700b000", "MLU-3700b001")
    )


def test_entries_naming_absent_cards_are_skipped(mlu: Harness, tmp_path: Path) -> None:
    node = mlu.node(pcie_node(2))
    link_file = tmp_path / "links.yaml"
    link_file.write_text("- {a: 0000:02:00.0, b: 0000:ff:00.0}\n- {a: 0000:02:00.0, b: 0000:04:00.0}\n")
    backend = mlu.backend(node, mluLinkFile=str(link_file))
    backend.discover()
    assert backend.link_file_error is None
    assert (LinkKind.MLU_LINK, 1) in kinds(backend.links().between("MLU-3700b000", "MLU-3700b001"))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{a: 1}", "expected a list of {a, b, links} entries, got dict"),
        ("- [a, b]", "entry 1 is not a mapping"),
        ("- {a: x}", "entry 1: 'b' must name a card"),
        ("- {a: x, b: y, links: 0}", "entry 1: links must be a positive integer, not '0'"),
        ("- {a: x, b: y, links: two}", "links must be a positive integer, not 'two'"),
        ("- {a: x, b: X}", "a card cannot link to itself"),
        ("- {a: x, b: y, speed: 3}", "unknown key(s) speed"),
        ("- {a: x, b: [", "not YAML or JSON"),
    ],
)
def test_malformed_link_file_text(text: str, reason: str) -> None:
    with pytest.raises(LinkFileError) as err:
        parse_link_file(Path("/etc/mlulink.yaml"), text)
    assert str(err.value).startswith("/etc/mlulink.yaml: ")
    assert reason in str(err.value)


def test_malformed_link_file_is_reported_and_discovery_goes_on(mlu: Harness, tmp_path: Path) -> None:
    node = mlu.node(mlulink_node(4))
    link_file = tmp_path / "bad.yaml"
    link_file.write_text("- {a: 0000:12:00.0, b: 0000:22:00.0, links: -1}\n")
    backend = mlu.backend(node, mluLinkFile=str(link_file))
    cards = backend.discover().cards
    assert len(cards) == 4
    assert backend.link_file_error is not None and str(link_file) in backend.link_file_error
    assert kinds(backend.links().between(*BOARD0)) == {(LinkKind.MLU_LINK, 1), (LinkKind.PCIE_SWITCH, 1)}
    assert not any(link.kind == LinkKind.MLU_LINK for link in backend.links().between(BOARD0[0], BOARD1[0]))


def test_missing_link_file_names_it(mlu: Harness, tmp_path: Path) -> None:
    backend = mlu.backend(mlu.node(pcie_node(1)), mluLinkFile=str(tmp_path / "nope.yaml"))
    backend.discover()
    assert backend.link_file_error == f"{tmp_path / 'nope.yaml'}: No such file or directory"


def test_a_removed_card_keeps_its_links(mlu: Harness) -> None:
    node = mlu.node(mlulink_node(8))
    backend = mlu.backend(node, mluLinkFile=str(node.link_file))
    backend.discover()
    before = backend.links()
    node.remove("0000:12:00.0")
    inventory = backend.discover()
    card = inventory.card(BOARD0[0])
    assert card is not None and card.health == Health.UNHEALTHY
    assert inventory.links == before
