"""This node's DRA devices, computed from the desired DRA pools: what the ResourceSlice publishes and
what NodePrepareResources checks a claim's devices against.

Pure: one :class:`DraDevice` per unit of every ``api: dra`` pool (a card, or a partition for a
Partition pool; DRA pools have one replica per unit). The device name is a DNS label derived from the
card or partition id alone, so it is stable across restarts and pool moves, and it is what the
scheduler writes into a claim's allocation result. Attributes are the vendor-neutral facts of
:class:`~hcs_deviceplugin.model.Card` plus the allocator's own topology keys, so a DeviceClass's CEL
selector can pick by pool, vendor, model or link group without knowing any backend.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hcs_deviceplugin.allocation.topology import GROUP_ATTRIBUTE, MODULE_ATTRIBUTE
from hcs_deviceplugin.cdi.names import device_name as cdi_device_name
from hcs_deviceplugin.cdi.names import qualified_name
from hcs_deviceplugin.model import Card, Health, Inventory, Partition
from hcs_deviceplugin.reconciler import DesiredPool

AttributeValue = str | int | bool

MAX_DEVICE_NAME = 63
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_NOT_LABEL = re.compile(r"[^a-z0-9-]+")


def dra_device_name(hardware_id: str) -> str:
    """A DNS label for a card or partition id: as it is when already one, else cleaned, cut and given
    a short hash of the original so two ids never share a name."""
    if _LABEL.fullmatch(hardware_id):
        return hardware_id
    digest = hashlib.sha256(hardware_id.encode()).hexdigest()[:8]
    cleaned = _NOT_LABEL.sub("-", hardware_id.lower()).strip("-")
    cleaned = cleaned[: MAX_DEVICE_NAME - len(digest) - 1].rstrip("-")
    return f"{cleaned}-{digest}" if cleaned else f"dev-{digest}"


@dataclass(frozen=True)
class DraDevice:
    """One device of this node's slice, and what Prepare needs to know about it."""

    name: str
    pool: str
    """Our pool (the DRA pool of the slice is the node; this is published as the ``pool`` attribute)."""
    card_id: str
    unit_id: str
    backend: str
    holder_key: str
    health: Health
    cdi_name: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=lambda: MappingProxyType({}))
    memory_bytes: int = 0


def card_attributes(card: Card) -> dict[str, AttributeValue]:
    """The facts of a card every backend fills, under names valid as DRA attribute identifiers."""
    attributes: dict[str, AttributeValue] = {
        "vendor": card.vendor,
        "model": card.model,
        "uuid": card.id,
        "index": card.index,
        "backend": card.backend,
    }
    if card.pci_address:
        attributes["pciAddress"] = card.pci_address
    if card.numa_node is not None:
        attributes["numaNode"] = card.numa_node
    for name in (GROUP_ATTRIBUTE, MODULE_ATTRIBUTE):
        value = card.attributes.get(name)
        if value:
            attributes[name] = value
    return attributes


def partition_attributes(card: Card, partition: Partition) -> dict[str, AttributeValue]:
    """A partition inherits its card's facts; its id, profile and parent say what it is."""
    attributes = card_attributes(card)
    attributes["uuid"] = partition.id
    attributes["profile"] = partition.profile
    attributes["parent"] = card.id
    return attributes


def slice_devices(
    pools: Mapping[str, DesiredPool],
    inventory: Inventory,
    health: Mapping[str, Health],
    kinds: Mapping[str, str],
) -> tuple[DraDevice, ...]:
    """The devices of ``pools`` (the DRA ones), sorted by name; ``kinds``: backend → CDI kind.

    A unit's health is the desired state's (card and partition health folded in). A unit whose
    backend has no CDI kind cannot be prepared and is left out.
    """
    cards = {c.id: c for c in inventory.cards}
    partitions = {p.id: p for p in inventory.partitions}
    devices: list[DraDevice] = []
    for name in sorted(pools):
        want = pools[name]
        for unit in want.units:
            card = cards.get(unit.card_id)
            kind = kinds.get(unit.backend)
            if card is None or kind is None:
                continue
            partition = partitions.get(unit.partition_id) if unit.partition_id else None
            if partition is not None:
                attributes = partition_attributes(card, partition)
                memory = partition.memory_bytes
            else:
                attributes = card_attributes(card)
                memory = card.memory_bytes
            attributes["pool"] = name
            hardware = unit.hardware_id
            devices.append(
                DraDevice(
                    name=dra_device_name(hardware),
                    pool=name,
                    card_id=card.id,
                    unit_id=unit.id,
                    backend=unit.backend,
                    holder_key=want.pool.holder_key(),
                    health=health.get(unit.id, unit.health),
                    cdi_name=qualified_name(kind, cdi_device_name(hardware)),
                    attributes=MappingProxyType(attributes),
                    memory_bytes=memory,
                )
            )
    return tuple(sorted(devices, key=lambda d: d.name))
