"""HCCS topology: links between chips and the allocator's group/module attributes (pure).

Two sources, best first:
1. ``dcmi_get_topo_info_by_device_id`` per chip pair, which works on 910B and A3 only (§2.7). HCCS
   and HCCS_SW become an HCCS link, SIO (the die-to-die link inside an A3 module) an HCCS link of
   count 2 - the facts give SIO no bandwidth, so it is ranked just above one HCCS link, enough to
   keep the two dies of a module together - and the PCIe kinds map as GPUStack maps them (PIX and
   PXB → PCIe-switch, PHB → host bridge, SYS → cross-socket). HCCS groups are then the connected
   components of the HCCS links, which is the improvement §3.3 suggests over hard-coded groups.
2. The scheduler rules of §3.3 where the query is not available or answers nothing useful: 910 A1
   chips 0-3 and 4-7 form two full-mesh rings, 910B chips form meshes of 8, the 16 dies of an A3
   node one HCCS domain, with the two dies of a module also linked by SIO.

Attributes follow the allocator contract (``hcs_deviceplugin/allocation/topology.py``): ``linkGroup``
for chips of an HCCS group, ``linkGroupSizes`` with the request sizes Huawei's scheduler uses
("1,2,4,8" on A1 and 910B x8), and ``linkModule`` = card id for chips that share a card (A3 modules,
which must be handed out together, and multi-chip 310/310P cards, where it is a preference).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hcs_deviceplugin.allocation.topology import GROUP_ATTRIBUTE, GROUP_SIZES_ATTRIBUTE, MODULE_ATTRIBUTE
from hcs_deviceplugin.model import Link, LinkKind, LinkMatrix
from vendors.ascend import abi
from vendors.ascend.families import Family, group_rule

TOPO_LINKS: Mapping[int, Link] = {
    abi.TOPO_HCCS: Link(LinkKind.HCCS),
    abi.TOPO_HCCS_SW: Link(LinkKind.HCCS),
    abi.TOPO_SIO: Link(LinkKind.HCCS, count=2),
    abi.TOPO_PIX: Link(LinkKind.PCIE_SWITCH),
    abi.TOPO_PXB: Link(LinkKind.PCIE_SWITCH),
    abi.TOPO_PHB: Link(LinkKind.PCIE_HOST_BRIDGE),
    abi.TOPO_SYS: Link(LinkKind.CROSS_SOCKET),
}
SIO_LINK = TOPO_LINKS[abi.TOPO_SIO]
HCCS_LINK = TOPO_LINKS[abi.TOPO_HCCS]


@dataclass(frozen=True)
class TopoChip:
    """What topology needs of one chip."""

    id: str
    card_id: int
    phy_id: int
    family: Family


Pair = frozenset[str]


@dataclass(frozen=True)
class Topology:
    links: LinkMatrix
    attributes: Mapping[str, Mapping[str, str]]


def _label_components(chips: Sequence[TopoChip], edges: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Group label per chip for components of two or more, numbered by their lowest phy id."""
    parent = {c.id: c.id for c in chips}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        if a in parent and b in parent:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[rb] = ra
    members: dict[str, list[TopoChip]] = {}
    for chip in chips:
        members.setdefault(find(chip.id), []).append(chip)
    ordered = sorted((m for m in members.values() if len(m) > 1), key=lambda m: min(c.phy_id for c in m))
    return {chip.id: str(n) for n, group in enumerate(ordered) for chip in group}


def build(chips: Sequence[TopoChip], pair_types: Mapping[Pair, int]) -> Topology:
    """Links and attributes for ``chips``; ``pair_types`` holds what the DCMI topology query answered."""
    pairs: list[tuple[str, str, Link]] = []
    fabric_edges: list[tuple[str, str]] = []
    queried = {chip_id for pair in pair_types for chip_id in pair}
    queried_families = {c.family for c in chips if c.id in queried}
    chips_on_node = len(chips)
    rules = {c.family: group_rule(c.family, chips_on_node) for c in chips}
    per_card: dict[int, int] = {}
    for chip in chips:
        per_card[chip.card_id] = per_card.get(chip.card_id, 0) + 1

    for i, a in enumerate(chips):
        for b in chips[i + 1 :]:
            topo = pair_types.get(frozenset((a.id, b.id)))
            link = TOPO_LINKS.get(topo) if topo is not None else None
            if link is None and a.family is b.family and a.family not in queried_families:
                link = _rule_link(
                    a, b, rules[a.family].group_of(a.phy_id), rules[b.family].group_of(b.phy_id)
                )
            if link is None:
                continue
            pairs.append((a.id, b.id, link))
            if link.kind is LinkKind.HCCS:
                fabric_edges.append((a.id, b.id))

    groups = _label_components(chips, fabric_edges)
    attributes: dict[str, dict[str, str]] = {c.id: {} for c in chips}
    for chip in chips:
        attrs = attributes[chip.id]
        group = groups.get(chip.id)
        if group is not None:
            attrs[GROUP_ATTRIBUTE] = group
            sizes = [s for s in rules[chip.family].sizes if s <= chips_on_node]
            if sizes:
                attrs[GROUP_SIZES_ATTRIBUTE] = ",".join(str(s) for s in sizes)
        if per_card[chip.card_id] > 1:
            attrs[MODULE_ATTRIBUTE] = str(chip.card_id)
    return Topology(LinkMatrix.from_pairs(pairs), attributes)


def _rule_link(a: TopoChip, b: TopoChip, group_a: str | None, group_b: str | None) -> Link | None:
    """The link §3.3's rules imply: SIO between the dies of an A3 module, HCCS inside a group."""
    if a.family is Family.ASCEND910A3 and a.card_id == b.card_id:
        return SIO_LINK
    if group_a is not None and group_a == group_b:
        return HCCS_LINK
    return None
