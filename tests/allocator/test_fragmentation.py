"""The fragmentation tie-break (``Fragmentation`` in ``allocation.topology``): one named case per rule.

Every node here scores all candidate sets alike on load, groups, modules and links, so what the
request leaves free is what decides; each case says what a rule-blind allocator would take.
"""

from __future__ import annotations

import pytest

from hcs_deviceplugin.allocation import GROUP_ATTRIBUTE, GROUP_SIZES_ATTRIBUTE, MODULE_ATTRIBUTE, Topology
from hcs_deviceplugin.allocation.hierarchy import Islands
from hcs_deviceplugin.model import Card, Link, LinkKind, LinkMatrix, Unit


def _cards(numa: list[int], attributes: dict[str, str] | None = None) -> dict[str, Card]:
    return {
        f"c{i}": Card(f"c{i}", "t", "t", "t", i, numa_node=n, attributes=attributes or {})
        for i, n in enumerate(numa)
    }


def _mesh(ids: list[str], kind: LinkKind, count: int = 1) -> list[tuple[str, str, Link]]:
    return [(a, b, Link(kind, count)) for i, a in enumerate(ids) for b in ids[i + 1 :]]


def _preferred(cards: dict[str, Card], links: LinkMatrix, held: set[str], size: int) -> list[str]:
    units = {c: Unit(c, c, "t", numa_node=card.numa_node) for c, card in cards.items()}
    available = [c for c in cards if c not in held]
    return Topology.build(cards, links).preferred(available, [], size, units)


def test_host_bridges_are_an_island_level() -> None:
    # One socket, two host bridges of four GPUs, no fabric: pairs behind one bridge score 30, the
    # others 20. Bridge A has c1-c3 free, bridge B c6, c7. Two cards from one bridge either way;
    # emptying bridge B leaves A's three together. Without the bridge level, NUMA alone sees
    # 5 -> 3 either way and position takes c1, c2.
    cards = _cards([0] * 8)
    ids = list(cards)
    links = LinkMatrix.from_pairs(
        _mesh(ids[:4], LinkKind.PCIE_HOST_BRIDGE) + _mesh(ids[4:], LinkKind.PCIE_HOST_BRIDGE)
    )
    assert Topology.build(cards, links).levels[-1] == (0, 0, 0, 0, 1, 1, 1, 1)
    assert _preferred(cards, links, {"c0", "c4", "c5"}, 2) == ["c6", "c7"]


def test_the_request_size_is_protected_though_not_declared() -> None:
    # The backend declares only 8 (a whole-node job). Nine cards behind one host bridge, in two
    # NUMA nodes of 4 and 5 (sub-NUMA clustering): every pair scores 30. A 3-card request that
    # takes 1 + 2 leaves 3 + 3, room for another 3-card job; 3 from one NUMA node leaves 1 + 5,
    # room for one. Without its own size protected, fewer broken NUMA nodes wins: c0, c1, c2.
    cards = _cards([0] * 4 + [1] * 5, {GROUP_SIZES_ATTRIBUTE: "8"})
    links = LinkMatrix.from_pairs(_mesh(list(cards), LinkKind.PCIE_HOST_BRIDGE))
    assert Topology.build(cards, links).sizes == (8,)
    assert _preferred(cards, links, set(), 3) == ["c0", "c4", "c5"]


def _a3(sizes: str) -> tuple[dict[str, Card], LinkMatrix]:
    """Atlas 800T A3: 16 dies in one HCCS domain, modules of two dies, 8 dies per NUMA node."""
    cards = {
        f"d{i:02d}": Card(
            f"d{i:02d}",
            "t",
            "t",
            "t",
            i,
            numa_node=i // 8,
            attributes={GROUP_ATTRIBUTE: "0", MODULE_ATTRIBUTE: f"m{i // 2}", GROUP_SIZES_ATTRIBUTE: sizes},
        )
        for i in range(16)
    }
    return cards, LinkMatrix.from_pairs(_mesh(list(cards), LinkKind.HCCS))


@pytest.mark.parametrize(
    ("sizes", "expected"),
    [("1,2,4,6,8,10,12,14,16", ["d12", "d13"]), ("1,2,4,8,16", ["d02", "d03"])],
    ids=["a3-valid-sizes-keep-six-dies-whole", "powers-of-two-keep-four-instead"],
)
def test_every_valid_size_the_backend_declares_is_protected(sizes: str, expected: list[str]) -> None:
    # NUMA 0 has 6 free dies (module 0 held), NUMA 1 has 4 (modules 4 and 5 held). A module from
    # NUMA 1 keeps NUMA 0's six for a 6-die job (A3 accepts every even size); with powers of two
    # only, NUMA 1's four look worth more and the module comes from NUMA 0.
    cards, links = _a3(sizes)
    held = {"d00", "d01", "d08", "d09", "d10", "d11"}
    assert _preferred(cards, links, held, 2) == expected


@pytest.mark.parametrize(
    ("level", "free", "size", "taken", "expected"),
    [
        (0, 8, 8, 2, [-1, 0, -1, 0, -1, 0, -1]),
        (1, 6, 8, 2, [0, 0, 0, 0, 0, -1, 0]),
        (0, 5, 8, 1, [0, 0, 0, 0, 0, 0, 0]),
        (1, 3, 8, 3, [0, 0, 0, 0, 0, -1, 1]),
        (0, 4, 4, 1, [0, 0, -1, 0, -1, 0, -1]),
        (0, 4, 4, 0, [0, 0, 0, 0, 0, 0, 0]),
    ],
    ids=[
        "two-of-a-whole-eight-lose-a-set-of-each-size-and-break-it",
        "two-of-six-keep-the-4-set-and-lose-a-2-set",
        "one-of-five-loses-no-usable-set",
        "emptying-a-partial-island-ends-it",
        "one-of-a-whole-four-loses-its-4-set-and-breaks-it",
        "nothing-taken-changes-nothing",
    ],
)
def test_usable_sets_per_size_and_level(
    level: int, free: int, size: int, taken: int, expected: list[int]
) -> None:
    # Sizes 8, 4, 2 on two levels: entries (8, level 0), (8, 1), (4, 0), (4, 1), (2, 0), (2, 1),
    # then the partial-island change. A usable s-set is s free cards inside one island.
    islands = Islands((8, 4, 2), 2, fragmentation=True)
    assert islands.change(level, free, size, taken) == expected
    code = 0
    for entry in expected:
        code = (code << 32) + entry
    assert islands.code(level, free, size, taken) == code, "the integer form orders the same"


def test_no_fragmentation_for_shared_pools() -> None:
    assert Islands((8, 4, 2), 3, fragmentation=False).change(0, 8, 8, 2) == []
