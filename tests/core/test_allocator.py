"""Compatibility cases of ``preferred_allocation`` as the servicer calls it: units only, no topology."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.allocator import preferred_allocation
from hcs_deviceplugin.model import Unit


def replicas(card: str, n: int, numa: int | None = 0) -> list[Unit]:
    return [Unit(f"{card}::{i}", card, "simulated", replica=i, numa_node=numa) for i in range(n)]


UNITS = {u.id: u for u in replicas("A", 4, 0) + replicas("B", 4, 0) + replicas("C", 4, 1)}
ALL = sorted(UNITS)


@pytest.mark.parametrize(
    ("available", "must", "size", "expected"),
    [
        (ALL, [], 1, ["A::0"]),
        (ALL, [], 2, ["A::0", "B::0"]),
        (ALL, [], 3, ["A::0", "B::0", "C::0"]),
        (ALL, [], 4, ["A::0", "B::0", "C::0", "A::1"]),
        (ALL, ["C::2"], 2, ["C::2", "A::0"]),
        (ALL, ["A::1", "B::1"], 2, ["A::1", "B::1"]),
        (["A::0", "A::1"], [], 5, ["A::0", "A::1"]),
        (ALL, [], 0, []),
        (["X::0", "A::3"], [], 2, ["A::3", "X::0"]),
    ],
    ids=[
        "one",
        "spread-two-cards",
        "distinct-cards-before-numa",
        "then-same-numa-again",
        "must-include-then-spread",
        "must-include-fills",
        "short-of-size",
        "size-zero",
        "unknown-id-last",
    ],
)
def test_preferred_allocation(available: list[str], must: list[str], size: int, expected: list[str]) -> None:
    assert preferred_allocation(available, must, size, UNITS) == expected


def test_single_replica_goes_to_the_least_loaded_card() -> None:
    # A::0-2 and B::0 are held (not offered): B carries 1 replica, A 3, C none on NUMA 1.
    offered = ["A::3", "B::1", "B::2", "B::3"]
    assert preferred_allocation(offered, [], 1, UNITS) == ["B::1"]
    all_of_c = ["C::0", "C::1", "C::2", "C::3"]
    assert preferred_allocation([*offered, *all_of_c], [], 1, UNITS) == ["C::0"]


def test_result_is_deterministic_and_within_available() -> None:
    first = preferred_allocation(ALL, ["B::2"], 6, UNITS)
    assert first == preferred_allocation(ALL, ["B::2"], 6, UNITS)
    assert set(first) <= set(ALL) and len(first) == 6 and first[0] == "B::2"
