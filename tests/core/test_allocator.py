"""Table tests for the first preferred-allocation policy (a pure function)."""

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


def test_result_is_deterministic_and_within_available() -> None:
    first = preferred_allocation(ALL, ["B::2"], 6, UNITS)
    assert first == preferred_allocation(ALL, ["B::2"], 6, UNITS)
    assert set(first) <= set(ALL) and len(first) == 6 and first[0] == "B::2"
