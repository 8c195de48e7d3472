"""Card-to-card links: NVLink from per-link remote PCI info, PCIe from the NVML common ancestor.

Both follow go-gpuallocator (nvidia.md §3.9): NVLinks are counted by walking every link, keeping
the ENABLED ones and matching the remote bus id against the other cards; the PCIe relation is
``nvmlDeviceGetTopologyCommonAncestor``. Unlike go-gpuallocator, links that end on an NVSwitch are
counted too (every pair of switch-attached cards is connected through the fabric), and a card or
library without NVLink calls simply has no NVLink links (PCIe links only): topology never fails
discovery.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import Link, LinkKind, LinkMatrix
from vendors.nvidia import nvml

log = logging.getLogger(__name__)

# nvmlGpuTopologyLevel_t → the coarser kinds of the model.
LEVEL_KINDS: dict[int, LinkKind] = {
    0: LinkKind.PCIE_SWITCH,  # INTERNAL: same board
    10: LinkKind.PCIE_SWITCH,  # SINGLE: one PCIe switch
    20: LinkKind.PCIE_SWITCH,  # MULTIPLE: several switches, no host bridge
    30: LinkKind.PCIE_HOST_BRIDGE,  # HOSTBRIDGE
    40: LinkKind.SAME_NUMA,  # NODE: same CPU socket
    50: LinkKind.CROSS_SOCKET,  # SYSTEM: across the CPU interconnect
}

# Per-link, per-direction bandwidth in GB/s by NVLink version (P100: 20; V100, A100, H100: 25; B200: 50).
NVLINK_GBPS: dict[int, float] = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}


PLACEHOLDER_ADDRESSES = frozenset({"", "0000:00:00.0"})
"""Remote PCI addresses that name no one device: a driver or hypervisor that cannot say where a link
ends may report zeros (or nothing) for every such link, whatever is at the far end."""


def names_a_device(address: str) -> bool:
    """Whether a link's remote PCI address (normalised) is one device's, so that its far-end type,
    asked once, holds for every link ending there; a placeholder is asked per link."""
    return address not in PLACEHOLDER_ADDRESSES


def normalise_bus_id(bus_id: str) -> str:
    """``00000000:17:00.0`` → ``0000:17:00.0`` (lower case, 4-digit domain), the sysfs and pool form."""
    text = bus_id.strip().lower()
    parts = text.split(":")
    if len(parts) == 3:
        domain, bus, rest = parts
        try:
            return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{rest}"
        except ValueError:
            return text
    if len(parts) == 2:
        return f"0000:{text}"
    return text


# Made and read within one discovery on one thread: not frozen, so a start compiles no __setattr__ or
# __delattr__ for it; never compared.
@field_repr
@dataclass(eq=False, repr=False)
class TopoCard:
    """A card as topology needs it: id, NVML handle, normalised PCI address."""

    id: str
    handle: nvml.Device
    pci_address: str


@dataclass(eq=False, repr=False)  # never compared or logged: less to compile at start
class _NvLinks:
    """What one card's NVLinks reach: links per peer card, links to NVSwitches, one link's speed."""

    peers: Counter[str] = field(default_factory=Counter)
    switch_links: int = 0
    gbps_per_link: float = 0.0


def _walk_nvlinks(card: TopoCard, by_address: dict[str, str], far_types: dict[str, int]) -> _NvLinks | None:
    """Active NVLinks of one card; None when the card (or library) has no NVLink support.

    ``far_types`` (remote PCI address → NVLink device type) is shared by the walks of one
    discovery: the type belongs to the device at that address, and on an NVSwitch node every link
    of every card ends on one of a few switches (8 cards × 18 links, 4 switches on a DGX H100).
    """
    found = _NvLinks()
    for link in range(nvml.NVLINK_MAX_LINKS):
        try:
            if not nvml.nvlink_active(card.handle, link):
                continue
            remote = normalise_bus_id(nvml.nvlink_remote_pci(card.handle, link).bus_id)
        except nvml.NvmlError as err:
            if err.unsupported and link == 0:
                return None
            if err.code in (nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_FUNCTION_NOT_FOUND):
                break  # past the card's last link, or the library has no per-link calls
            continue
        if not found.gbps_per_link:
            try:
                found.gbps_per_link = NVLINK_GBPS.get(nvml.nvlink_version(card.handle, link), 0.0)
            except nvml.NvmlError:
                found.gbps_per_link = 0.0
        peer = by_address.get(remote)
        if peer is not None and peer != card.id:
            found.peers[peer] += 1
            continue
        far_type = far_types.get(remote) if names_a_device(remote) else None
        if far_type is None:
            try:
                far_type = nvml.nvlink_remote_type(card.handle, link)
            except nvml.NvmlError:
                continue  # unknown far end: not a card of ours, so no card-to-card link
            if names_a_device(remote):
                far_types[remote] = far_type
        if far_type == nvml.NVLINK_DEVICE_TYPE_SWITCH:
            found.switch_links += 1
    return found


def nvlink_links(cards: Sequence[TopoCard]) -> list[tuple[str, str, Link]]:
    """NVLink between each pair: direct links, plus the NVSwitch fabric when both cards are on it."""
    by_address = {c.pci_address: c.id for c in cards}
    far_types: dict[str, int] = {}
    walked = {c.id: _walk_nvlinks(c, by_address, far_types) for c in cards}
    pairs: list[tuple[str, str, Link]] = []
    for i, a in enumerate(cards):
        for b in cards[i + 1 :]:
            la, lb = walked[a.id], walked[b.id]
            if la is None or lb is None:
                continue
            count = la.peers[b.id] or lb.peers[a.id]
            if la.switch_links and lb.switch_links:
                count += min(la.switch_links, lb.switch_links)
            if count:
                gbps = la.gbps_per_link or lb.gbps_per_link
                pairs.append((a.id, b.id, Link(LinkKind.NVLINK, count=count, bandwidth_gbps=count * gbps)))
    return pairs


def pcie_links(cards: Sequence[TopoCard]) -> list[tuple[str, str, Link]]:
    """One PCIe-path link per pair, from the common ancestor; none where NVML cannot say."""
    pairs: list[tuple[str, str, Link]] = []
    for i, a in enumerate(cards):
        for b in cards[i + 1 :]:
            try:
                level = nvml.common_ancestor(a.handle, b.handle)
            except nvml.NvmlError as err:
                if err.unsupported:
                    log.info("no PCIe topology from NVML (%s)", err)
                    return []
                log.warning("topology of %s and %s unknown: %s", a.id, b.id, err)
                continue
            kind = LEVEL_KINDS.get(level)
            if kind is not None:
                pairs.append((a.id, b.id, Link(kind)))
    return pairs


def link_matrix(cards: Sequence[TopoCard]) -> LinkMatrix:
    """Every card pair's links: NVLink first (best kind), then the PCIe path."""
    return LinkMatrix.from_pairs([*nvlink_links(cards), *pcie_links(cards)])
