"""Reading the topology table files in ``topologies/``: cards, links and the cases to check on them.

A file describes one real node shape::

    name: ...                      # also the test id prefix
    description: ...               # where the shape comes from
    cards:                         # position order = list order (index defaults to it)
      - {id: gpu0, numa: 0, attributes: {linkGroup: "0"}}
    mesh:                          # every pair of `cards` gets this link
      - {cards: [gpu0, gpu1], kind: NVLink, count: 18}
    ring:                          # consecutive cards, last back to first
      - {cards: [...], kind: MLU-Link, count: 2}
    links:                         # single pairs
      - {a: gpu0, b: gpu1, kind: PCIe-switch}
    cases:
      - {name: ..., size: 2, must: [gpu3], held: [gpu0], expect: [gpu3, gpu2]}

``held`` cards are not offered (a container has them); every other card is, ``must`` included.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import yaml

from hcs_deviceplugin.model import Card, Link, LinkKind, LinkMatrix, Unit

TOPOLOGIES = Path(__file__).parent / "topologies"


@dataclass(frozen=True)
class Case:
    name: str
    size: int
    must: tuple[str, ...]
    held: tuple[str, ...]
    expect: tuple[str, ...]


@dataclass(frozen=True)
class Node:
    name: str
    cards: dict[str, Card]
    links: LinkMatrix
    cases: tuple[Case, ...]

    @property
    def units(self) -> dict[str, Unit]:
        """One whole-card unit per card, named like the card (an exclusive pool of all of them)."""
        return {c.id: Unit(c.id, c.id, c.backend, numa_node=c.numa_node) for c in self.cards.values()}

    def available(self, case: Case) -> list[str]:
        return [c for c in self.cards if c not in case.held]


def _link(spec: dict[str, Any]) -> Link:
    count, bandwidth = int(spec.get("count", 1)), float(spec.get("bandwidthGbps", 0))
    return Link(LinkKind(spec["kind"]), count=count, bandwidth_gbps=bandwidth)


def load(path: Path) -> Node:
    doc = yaml.safe_load(path.read_text())
    known = {"name", "description", "cards", "mesh", "ring", "links", "cases"}
    assert set(doc) <= known, f"{path.name}: unknown keys {set(doc) - known}"
    cards: dict[str, Card] = {}
    for i, spec in enumerate(doc["cards"]):
        card = Card(
            id=spec["id"],
            backend="table",
            vendor="table",
            model=doc["name"],
            index=int(spec.get("index", i)),
            numa_node=spec.get("numa"),
            attributes={k: str(v) for k, v in (spec.get("attributes") or {}).items()},
        )
        cards[card.id] = card
    pairs: list[tuple[str, str, Link]] = []
    for spec in doc.get("mesh", []):
        pairs += [(a, b, _link(spec)) for a, b in combinations(spec["cards"], 2)]
    for spec in doc.get("ring", []):
        ids = spec["cards"]
        pairs += [(a, b, _link(spec)) for a, b in zip(ids, [*ids[1:], ids[0]], strict=True)]
    for spec in doc.get("links", []):
        pairs.append((spec["a"], spec["b"], _link(spec)))
    for a, b, _ in pairs:
        assert a in cards and b in cards, f"{path.name}: link {a}-{b} names an unknown card"
    cases = tuple(
        Case(
            name=c["name"],
            size=int(c["size"]),
            must=tuple(c.get("must", ())),
            held=tuple(c.get("held", ())),
            expect=tuple(c["expect"]),
        )
        for c in doc.get("cases", [])
    )
    return Node(doc["name"], cards, LinkMatrix.from_pairs(pairs), cases)


def all_nodes() -> list[Node]:
    return [load(p) for p in sorted(TOPOLOGIES.glob("*.yaml"))]
