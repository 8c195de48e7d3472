"""The request rules and the backend data contract, independent of any one vendor's topology."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.allocation import (
    GROUP_ATTRIBUTE,
    GROUP_SIZES_ATTRIBUTE,
    MODULE_ATTRIBUTE,
    Topology,
    select,
)
from hcs_deviceplugin.allocator import preferred_allocation
from hcs_deviceplugin.model import Card, Link, LinkKind, LinkMatrix, Unit


def card(cid: str, index: int, numa: int | None = 0, attributes: dict[str, str] | None = None) -> Card:
    return Card(cid, "t", "t", "t", index, numa_node=numa, attributes=attributes or {})


def whole(cards: dict[str, Card]) -> dict[str, Unit]:
    return {c.id: Unit(c.id, c.id, "t", numa_node=c.numa_node) for c in cards.values()}


RINGS = {
    f"n{i}": card(f"n{i}", i, 0, {GROUP_ATTRIBUTE: str(i // 4), GROUP_SIZES_ATTRIBUTE: "1,2,4,8"})
    for i in range(8)
}


def test_groups_alone_keep_a_request_inside_one_ring() -> None:
    # No links at all (a backend that knows the rings but cannot read pair links): still one ring.
    units = whole(RINGS)
    ids = list(RINGS)
    assert preferred_allocation(ids, [], 4, units, cards=RINGS) == ["n0", "n1", "n2", "n3"]
    held_one = [i for i in ids if i != "n2"]
    assert preferred_allocation(held_one, [], 4, units, cards=RINGS) == ["n4", "n5", "n6", "n7"]
    assert preferred_allocation(held_one, [], 2, units, cards=RINGS) == ["n0", "n1"]
    assert preferred_allocation(held_one, ["n6"], 2, units, cards=RINGS) == ["n6", "n4"]


def test_groups_come_before_links() -> None:
    # A backend's declared group is a hardware rule: a stronger link across groups does not win.
    links = LinkMatrix.from_pairs([("n3", "n4", Link(LinkKind.NVLINK, 8))])
    units = whole(RINGS)
    assert preferred_allocation(["n3", "n4", "n5"], [], 2, units, cards=RINGS, links=links) == ["n4", "n5"]


def test_modules_are_taken_whole_and_single_dies_from_broken_modules() -> None:
    dies = {f"d{i}": card(f"d{i}", i, 0, {MODULE_ATTRIBUTE: f"m{i // 2}"}) for i in range(8)}
    units = whole(dies)
    ids = list(dies)
    assert preferred_allocation(ids, [], 2, units, cards=dies) == ["d0", "d1"]
    assert preferred_allocation([i for i in ids if i != "d2"], [], 1, units, cards=dies) == ["d3"]
    assert preferred_allocation([i for i in ids if i not in ("d0", "d3")], [], 2, units, cards=dies) == [
        "d4",
        "d5",
    ]
    assert preferred_allocation(ids, ["d5"], 2, units, cards=dies) == ["d5", "d4"]


def test_group_sizes_attribute() -> None:
    cards = {
        "a": card("a", 0, 0, {GROUP_SIZES_ATTRIBUTE: "1, 2,4,x,,8"}),
        "b": card("b", 1, 0, {GROUP_SIZES_ATTRIBUTE: "6"}),
    }
    assert Topology.build(cards).sizes == (8, 6, 4, 2), "union over cards, size 1 and junk ignored"
    plain = {f"c{i}": card(f"c{i}", i) for i in range(9)}
    assert Topology.build(plain).sizes == (8, 4, 2), "default: powers of two up to the card count"


def test_cards_known_only_through_units_are_placed_by_numa() -> None:
    units = {
        "x::0": Unit("x::0", "x", "t", replica=0, numa_node=1),
        "y::0": Unit("y::0", "y", "t", replica=0, numa_node=0),
        "z::0": Unit("z::0", "z", "t", replica=0, numa_node=0),
    }
    topo = Topology.build([card("x", 0, None)], LinkMatrix())
    assert topo.preferred(list(units), [], 2, units) == ["y::0", "z::0"]
    assert topo.covering(units) is not topo and len(topo.covering(units)) == 3
    assert topo.covering({"x::0": units["x::0"]}) is topo


@pytest.mark.parametrize(
    ("available", "must", "size", "expected"),
    [
        (["a", "b", "c"], ["c", "b", "a"], 2, ["c", "b"]),
        (["a", "b", "c"], ["b", "b"], 2, ["b", "a"]),
        (["a", "a", "b"], [], 3, ["a", "b"]),
        (["a", "b"], [], -1, []),
        (["q", "a", "p"], [], 3, ["a", "q", "p"]),
        (["a"], ["zz"], 2, ["zz", "a"]),
    ],
    ids=[
        "must-over-size-keeps-kubelet-order",
        "must-deduplicated",
        "available-deduplicated",
        "negative-size",
        "unknown-ids-last-in-kubelet-order",
        "unknown-must-kept",
    ],
)
def test_request_edges(available: list[str], must: list[str], size: int, expected: list[str]) -> None:
    cards = {c: card(c, i) for i, c in enumerate("abc")}
    assert preferred_allocation(available, must, size, whole(cards), cards=cards) == expected


def _big_node(count: int) -> tuple[dict[str, Card], LinkMatrix]:
    """``count`` GPUs in NVLink islands of 8 (NVSwitch), two islands per NUMA node."""
    cards = {f"g{i:03d}": card(f"g{i:03d}", i, i // 16) for i in range(count)}
    ids = list(cards)
    pairs = [
        (a, b, Link(LinkKind.NVLINK, 12))
        for start in range(0, count, 8)
        for j, a in enumerate(ids[start : start + 8])
        for b in ids[start + j + 1 : start + 8]
    ]
    return cards, LinkMatrix.from_pairs(pairs)


def test_large_nodes_are_not_enumerated(monkeypatch: pytest.MonkeyPatch) -> None:
    cards, links = _big_node(512)
    topo = Topology.build(cards, links)

    def refuse(*_: object) -> object:
        raise AssertionError("enumerated every subset of a large node")

    monkeypatch.setattr(select, "combinations", refuse)
    units = whole(cards)
    held = {f"g{i:03d}" for i in range(0, 512, 3)}
    available = [c for c in cards if c not in held]
    chosen = topo.preferred(available, [], 8, units)  # its latency: bench allocator, "8 of 512 cards"
    assert len(chosen) == 8 and set(chosen) <= set(available)
    fresh = topo.preferred(list(cards), [], 8, units)
    assert fresh == [f"g{i:03d}" for i in range(8)], "a whole free NVLink island"


def test_a_whole_free_island_is_found_beyond_the_exhaustive_limit() -> None:
    cards, links = _big_node(64)
    units = whole(cards)
    held = {"g000", "g009", "g018", "g027", "g036", "g045", "g063"}
    available = [c for c in cards if c not in held]
    chosen = preferred_allocation(available, [], 8, units, links=links, cards=cards)
    assert chosen == [f"g{i:03d}" for i in range(48, 56)]
    two = preferred_allocation(available, [], 2, units, links=links, cards=cards)
    assert two == ["g001", "g002"], "from a broken island (the first), not from the whole one"


def test_groups_are_kept_on_the_greedy_path_too() -> None:
    # 32 chips in rings of 4 declared by attribute only: C(29, 4) sets, far past the exhaustive limit.
    chips = {f"r{i:02d}": card(f"r{i:02d}", i, i // 16, {GROUP_ATTRIBUTE: str(i // 4)}) for i in range(32)}
    units = whole(chips)
    held = {"r00", "r05", "r10"}
    available = [c for c in chips if c not in held]
    assert preferred_allocation(available, [], 4, units, cards=chips) == ["r12", "r13", "r14", "r15"]
    eight = preferred_allocation(available, [], 8, units, cards=chips)
    assert eight == [f"r{i:02d}" for i in range(16, 24)], "two whole rings, on one NUMA node"
    three = preferred_allocation(available, [], 3, units, cards=chips)
    assert three == ["r01", "r02", "r03"], "a ring with exactly three free"
