"""Card-to-card links for the allocator: xGMI from KFD links, the PCIe/NUMA host path from sysfs.

xGMI: every KFD ``io_links`` or ``p2p_links`` entry of ``type 11`` between two GPU nodes (ROCm's
allocator reads the same type, hygon.md §5) is one :data:`LinkKind.XGMI` link of ``count`` 1 per card
pair, whichever side lists it; ``max_bandwidth`` is MB/s in KFD, reported as GB/s (0 when absent).
Whether Hygon's KFD reports its links as type 11 is unverified, and its own link types (HYSWITCH,
XHCL) are only visible through ``libhydmi``; so this is best effort and the host path always
stands beside it. The host path (switch, host bridge, NUMA) comes from
:func:`vendors.pcisysfs.topology.host_path_links`.

A card that is away now (removed, unbound, KFD node gone) keeps the links an earlier pass saw, so
that it comes back with its place in the topology before the next discovery.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from hcs_deviceplugin.model import Link, LinkKind, LinkMatrix
from vendors.hygon import kfd
from vendors.hygon.drm import DrmMinors
from vendors.pcisysfs.pci import PciFunction
from vendors.pcisysfs.topology import host_path_links


class _Located(Protocol):
    @property
    def address(self) -> str: ...

    @property
    def minors(self) -> DrmMinors: ...


def kfd_nodes(topology: kfd.KfdTopology, cards: Mapping[str, _Located]) -> dict[int, str]:
    """KFD node number → card id, for the cards whose node is there and readable."""
    found: dict[int, str] = {}
    for card_id, facts in cards.items():
        node = topology.gpu_for(facts.address, facts.minors.render)
        if node is not None and node.error is None:
            found[node.index] = card_id
    return found


def xgmi_links(topology: kfd.KfdTopology, cards: Mapping[str, _Located]) -> LinkMatrix:
    """One xGMI link per connected pair of cards, from type-11 links between their KFD nodes."""
    owner = kfd_nodes(topology, cards)
    pairs: dict[frozenset[str], Link] = {}
    for node in topology.nodes:
        if node.index not in owner:
            continue
        for link in node.links:
            if link.link_type != kfd.LINK_TYPE_XGMI or link.node_to not in owner:
                continue
            a, b = owner[node.index], owner[link.node_to]
            if a == b:
                continue
            key = frozenset((a, b))
            gbps = link.max_bandwidth / 1000.0
            if key not in pairs or pairs[key].bandwidth_gbps < gbps:
                pairs[key] = Link(LinkKind.XGMI, count=1, bandwidth_gbps=gbps)
    return LinkMatrix({k: (v,) for k, v in pairs.items()})


def _carried(previous: LinkMatrix, away: Iterable[str], current: LinkMatrix) -> LinkMatrix:
    """Links of ``previous`` touching a card that is away now, of kinds ``current`` lacks for the pair."""
    gone = set(away)
    carried: dict[frozenset[str], tuple[Link, ...]] = {}
    for key, old in previous.links.items():
        if not key & gone:
            continue
        kinds = {link.kind for link in current.links.get(key, ())}
        missing = tuple(link for link in old if link.kind not in kinds)
        if missing:
            carried[key] = missing
    return LinkMatrix(carried)


def link_matrix(
    topology: kfd.KfdTopology,
    cards: Mapping[str, _Located],
    functions: Mapping[str, PciFunction],
    previous: LinkMatrix,
) -> LinkMatrix:
    """xGMI merged with the host path; cards away now keep the links ``previous`` had for them."""
    owner = set(kfd_nodes(topology, cards).values())
    current = xgmi_links(topology, cards).merged(host_path_links(functions))
    away = [c for c in cards if c not in owner or c not in functions]
    return current.merged(_carried(previous, away, current))
