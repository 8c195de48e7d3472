"""Discovery: every card and MIG device NVML reports, with the facts Allocate and pools need.

One bad card never fails the pass (Backend contract): a card that stops answering is logged and, if
an earlier pass knew it, reported again from that pass as Unhealthy, so pools do not silently lose
it while it is broken. Optional facts (NUMA node, compute capability, MIG, NVLink) degrade to
"unknown" when the card or the library does not support the call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from hcs_deviceplugin.model import Card, Health, Inventory, Partition
from vendors.nvidia import attributes as attr
from vendors.nvidia import hostfs, nvml, topology

log = logging.getLogger(__name__)

BACKEND = "nvidia"
VENDOR = "nvidia"


def _unsupported(call_name: str, err: nvml.NvmlError) -> None:
    """An optional fact the card or library cannot give: normal on many nodes, so debug level only."""
    log.debug("%s unsupported: %s", call_name, err)


def _numa_node(handle: nvml.Device, host_root: Path, pci_address: str) -> int | None:
    """NUMA node from sysfs (as NVIDIA's plugin reads it), else NVML; None when unknown."""
    found, node = hostfs.sysfs_numa_node(host_root, pci_address)
    if found:
        return node
    try:
        value = nvml.numa_node_id(handle)
        return value if value >= 0 else None
    except nvml.NvmlError as err:
        if not err.unsupported:
            raise
        _unsupported("nvmlDeviceGetNumaNodeId", err)
    try:
        nodes = nvml.memory_affinity_nodes(handle)
    except nvml.NvmlError as err:
        if not err.unsupported:
            raise
        _unsupported("nvmlDeviceGetMemoryAffinity", err)
        return None
    return nodes[0] if len(nodes) == 1 else None


def _mig_mode(handle: nvml.Device) -> str:
    try:
        current, _pending = nvml.mig_mode(handle)
    except nvml.NvmlError as err:
        if not err.unsupported:
            raise
        return "unsupported"
    return "enabled" if current == 1 else "disabled"


def read_card(
    handle: nvml.Device, position: int, host_root: Path, driver: str, control_devices: list[str]
) -> Card:
    """One whole card from NVML (raises NvmlError when the card does not answer its identity)."""
    pci = nvml.pci_info(handle)
    address = topology.normalise_bus_id(pci.bus_id)
    try:
        index = nvml.index(handle)
    except nvml.NvmlError as err:
        if not err.unsupported:
            raise
        index = position
    minor = nvml.minor_number(handle)
    attributes = {
        attr.MINOR: str(minor),
        attr.INDEX: str(index),
        attr.BUS_ID: pci.bus_id,
        attr.MIG_MODE: _mig_mode(handle),
        attr.CONTROL_DEVICES: ",".join(control_devices),
    }
    if driver:
        attributes[attr.DRIVER_VERSION] = driver
    try:
        major, minor_cc = nvml.compute_capability(handle)
        attributes[attr.COMPUTE_CAPABILITY] = f"{major}.{minor_cc}"
    except nvml.NvmlError as err:
        if not err.unsupported:
            raise
    return Card(
        id=nvml.uuid(handle),
        backend=BACKEND,
        vendor=VENDOR,
        model=nvml.name(handle),
        index=index,
        pci_address=address,
        pci_vendor_id=pci.vendor_id,
        pci_device_id=pci.device_id,
        numa_node=_numa_node(handle, host_root, address),
        memory_bytes=nvml.memory_total(handle),
        attributes=attributes,
    )


def read_partitions(
    card: Card, handle: nvml.Device, mig_minors: Callable[[], hostfs.MigMinors]
) -> list[Partition]:
    """The card's MIG devices (sparse slots skipped); a device that fails to read is logged and left out.

    ``mig_minors`` is called only for a card in MIG mode (see :func:`_mig_minors_once`)."""
    if card.attributes.get(attr.MIG_MODE) != "enabled":
        return []
    from vendors.nvidia import mig  # only a card in MIG mode needs its profile tables and readers

    minors = mig_minors()
    try:
        slots = nvml.max_mig_device_count(handle)
    except nvml.NvmlError as err:
        log.warning("card %s: cannot count MIG devices: %s", card.id, err)
        return []
    try:
        table: mig.ProfileTable | None = mig.profile_table(handle, card.memory_bytes)
    except nvml.NvmlError as err:
        log.info("card %s: no MIG profile table (%s); naming from attributes", card.id, err)
        table = None
    parent_minor = int(card.attributes[attr.MINOR])
    found: list[Partition] = []
    for slot in range(slots):
        try:
            device = mig.read_mig_device(handle, nvml.mig_device_by_index(handle, slot), table)
        except nvml.NvmlError as err:
            if err.code not in (nvml.ERROR_NOT_FOUND, nvml.ERROR_INVALID_ARGUMENT):
                log.warning("card %s: MIG slot %d unreadable: %s", card.id, slot, err)
            continue
        attributes = {
            attr.PARENT_MINOR: str(parent_minor),
            attr.PARENT_INDEX: str(card.index),
            attr.MIG_INDEX: str(slot),
            attr.GPU_INSTANCE_ID: str(device.gi_id),
            attr.COMPUTE_INSTANCE_ID: str(device.ci_id),
        }
        optional = {
            attr.GPU_INSTANCE_PROFILE_ID: device.gi_profile_id,
            attr.COMPUTE_INSTANCE_PROFILE_ID: device.ci_profile_id,
            attr.PLACEMENT_START: device.placement_start,
            attr.PLACEMENT_SIZE: device.placement_size,
        }
        attributes.update({k: str(v) for k, v in optional.items() if v is not None})
        caps = {
            attr.CAP_GPU_INSTANCE: hostfs.cap_path(minors, parent_minor, device.gi_id),
            attr.CAP_COMPUTE_INSTANCE: hostfs.cap_path(minors, parent_minor, device.gi_id, device.ci_id),
        }
        attributes.update({k: v for k, v in caps.items() if v is not None})
        found.append(
            Partition(
                id=device.uuid,
                card_id=card.id,
                profile=device.profile,
                memory_bytes=device.memory_bytes,
                attributes=attributes,
            )
        )
    return found


def _stale(previous: Inventory | None, position: int, reason: str) -> tuple[list[Card], list[Partition]]:
    """A card known from an earlier pass that does not answer now, reported as Unhealthy."""
    if previous is None:
        return [], []
    for card in previous.cards:
        if card.index == position:
            parts = [replace(p, health=Health.UNHEALTHY) for p in previous.partitions if p.card_id == card.id]
            log.warning(
                "card %s (index %d) does not answer (%s); reporting it Unhealthy", card.id, position, reason
            )
            return [replace(card, health=Health.UNHEALTHY)], parts
    return [], []


def _mig_minors_once(host_root: Path) -> Callable[[], hostfs.MigMinors]:
    """The driver's MIG capability minors, read on the first call only.

    Only a card in MIG mode needs them, and the driver lists every possible GPU and compute instance
    (about 1,100 lines on an 8-GPU node): parsing them took about half of a first discovery, which
    is on the way to registering with kubelet, on nodes that have no MIG at all.
    """
    read: list[hostfs.MigMinors] = []

    def minors() -> hostfs.MigMinors:
        if not read:
            read.append(hostfs.read_mig_minors(host_root))
        return read[0]

    return minors


def discover(host_root: Path, previous: Inventory | None = None) -> Inventory:
    """All cards, MIG devices and links NVML reports now. Raises NvmlError only if NVML itself fails."""
    try:
        driver = nvml.driver_version()
    except nvml.NvmlError as err:
        if not err.unsupported:
            raise
        driver = ""
    count = nvml.device_count()
    minors = _mig_minors_once(host_root)
    control = hostfs.present_control_devices(host_root)
    cards: list[Card] = []
    partitions: list[Partition] = []
    topo: list[topology.TopoCard] = []
    for position in range(count):
        try:
            handle = nvml.handle_by_index(position)
            card = read_card(handle, position, host_root, driver, control)
        except nvml.NvmlError as err:
            stale_cards, stale_parts = _stale(previous, position, str(err))
            if not stale_cards:
                log.warning("card at index %d skipped: %s", position, err)
            cards.extend(stale_cards)
            partitions.extend(stale_parts)
            continue
        cards.append(card)
        topo.append(topology.TopoCard(card.id, handle, card.pci_address))
        partitions.extend(read_partitions(card, handle, minors))
    return Inventory(cards=tuple(cards), partitions=tuple(partitions), links=topology.link_matrix(topo))


def with_health(inventory: Inventory, unhealthy: Mapping[str, str]) -> Inventory:
    """``inventory`` with the devices the health monitor holds Unhealthy marked so (a card: all its MIG)."""
    if not unhealthy:
        return inventory
    cards = tuple(replace(c, health=Health.UNHEALTHY) if c.id in unhealthy else c for c in inventory.cards)
    parts = tuple(
        replace(p, health=Health.UNHEALTHY) if p.id in unhealthy or p.card_id in unhealthy else p
        for p in inventory.partitions
    )
    return Inventory(cards=cards, partitions=parts, links=inventory.links)
