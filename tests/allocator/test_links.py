"""Pair and set scores: the weights of ``allocation.links`` and why a set is judged by its weakest pair."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.allocation import SetScore, Topology, pair_score, set_score
from hcs_deviceplugin.allocation.links import SINGLE_CARD
from hcs_deviceplugin.allocator import preferred_allocation
from hcs_deviceplugin.model import Card, Link, LinkKind, LinkMatrix, Unit

NV = LinkKind.NVLINK


@pytest.mark.parametrize(
    ("links", "numa", "expected"),
    [
        ((Link(NV, 18), Link(LinkKind.PCIE_SWITCH)), (0, 0), 1850),
        ((Link(NV, 18),), (0, 0), 1820),
        ((Link(NV, 18),), (0, 1), 1810),
        ((Link(NV, 18),), (None, 0), 1800),
        ((Link(LinkKind.HCCS),), (0, 1), 110),
        ((Link(LinkKind.XGMI, 2), Link(LinkKind.PCIE_HOST_BRIDGE)), (0, 0), 230),
        ((Link(LinkKind.MLU_LINK, 2), Link(LinkKind.CROSS_SOCKET)), (0, 0), 210),
        ((Link(LinkKind.PCIE_SWITCH), Link(LinkKind.SAME_NUMA)), (0, 0), 50),
        ((Link(LinkKind.PCIE_HOST_BRIDGE),), (None, None), 30),
        ((Link(LinkKind.CROSS_SOCKET),), (0, 0), 10),
        ((), (0, 0), 20),
        ((), (0, 1), 10),
        ((), (None, 1), 0),
    ],
    ids=[
        "nvswitch-same-pcie-switch",
        "nvlink-same-numa-fallback",
        "nvlink-cross-numa-fallback",
        "nvlink-numa-unknown",
        "hccs-cross-socket",
        "xgmi-counts-links",
        "listed-host-path-beats-numa",
        "best-host-path-listed",
        "host-bridge",
        "cross-socket-listed",
        "nothing-listed-same-numa",
        "nothing-listed-cross-numa",
        "nothing-known",
    ],
)
def test_pair_score(links: tuple[Link, ...], numa: tuple[int | None, int | None], expected: int) -> None:
    assert pair_score(links, *numa) == expected


def test_any_fabric_link_beats_any_pcie_path() -> None:
    weakest_fabric = pair_score((Link(LinkKind.HCCS, 1),), 0, 1)
    best_pcie = pair_score((Link(LinkKind.PCIE_SWITCH),), 0, 0)
    assert weakest_fabric > best_pcie


def test_bandwidth_is_not_scored_because_its_units_vary_by_backend() -> None:
    gbytes = pair_score((Link(NV, 18, bandwidth_gbps=450.0),), 0, 0)
    gbits = pair_score((Link(NV, 18, bandwidth_gbps=3600.0),), 0, 0)
    assert gbytes == gbits == pair_score((Link(NV, 18),), 0, 0)


def test_set_score_is_weakest_pair_then_sum() -> None:
    assert set_score([]) == SetScore(SINGLE_CARD, 0)
    assert set_score([50, 20, 50]) == SetScore(20, 120)
    assert SetScore(20, 30) > SetScore(10, 1000), "a stronger weakest pair beats any sum"
    assert SetScore(20, 130) > SetScore(20, 120), "equal weakest pairs: more total link wins"


def _cards(numa: dict[str, int]) -> dict[str, Card]:
    return {cid: Card(cid, "t", "t", "t", i, numa_node=n) for i, (cid, n) in enumerate(numa.items())}


def test_three_nvlinked_plus_a_stranded_card_lose_to_four_behind_one_switch() -> None:
    # go-gpuallocator's sum would take A, B, C (NVLink) plus D (across the socket): the collective
    # would run at D's cross-socket PCIe speed. Four cards behind one switch are better together.
    cards = _cards({"A": 0, "B": 0, "C": 0, "D": 1, "E": 1, "F": 1, "G": 1, "H": 1})
    pairs = [(a, b, Link(NV, 4)) for a, b in [("A", "B"), ("A", "C"), ("B", "C")]]
    pairs += [(a, b, Link(LinkKind.PCIE_SWITCH)) for a in "EFGH" for b in "EFGH" if a < b]
    links = LinkMatrix.from_pairs(pairs)
    topo = Topology.build(cards, links)
    assert topo.score("ABCD") < topo.score("EFGH")
    assert topo.score("ABCD").total > topo.score("EFGH").total
    units = {c: Unit(c, c, "t") for c in cards}
    assert preferred_allocation(list(cards), [], 4, units, links=links, cards=cards) == ["E", "F", "G", "H"]
    assert preferred_allocation(list(cards), [], 3, units, links=links, cards=cards) == ["A", "B", "C"]
