"""Discovery from sysfs only: which PCI functions are DCUs, and every fact a pool or Allocate needs.

Sources, all under the host root (hygon.md §2): the PCI function (ids, class, NUMA node, driver
binding), its DRM minors (:mod:`.drm`), its KFD topology node (:mod:`.kfd`: CUs, gfx target, gpu_id,
memory banks, hive, links), the driver module (``/sys/module/<driver>/{initstate,version}``) and the
amdgpu-style attributes in the function's directory (``serial_number``, ``unique_id``,
``mem_info_vram_total``).

What sysfs does not give and only ``libhydmi``/``librocm_smi64`` (or ``hy-smi``) would: the product
name as the vendor prints it (we use the device-id table instead), ECC/RAS counters, link types
beyond KFD's (HYSWITCH/XHCL), vDCU and MIG state. Those facts are simply absent here.

Vendor 0x1d94 is also the PCI vendor of Hygon CPUs' own functions (root complex, IOMMU, ...), so a
function is a DCU only when its device id is in the model table, its class is display, processing
accelerator or co-processor, or it is bound to a DCU driver.

Identity (hygon.md §2.5): ``DCU-<serial_number>`` if non-empty, else ``DCU-<unique_id>`` (the DRM
file, ``%016x`` of the driver's id; KFD's decimal ``unique_id`` of the same value is printed the same
way so both sources give one id), else ``DCU-pci-<address>``. Once an address has an id it keeps it
for the life of the process (the serial and unique_id files are driver attributes that vanish with
an unbind, and a card must not change id while it is away), unless the same file later names
another card: a different card was put in the slot.

``Card.index`` is the DRM card-minor order among Hygon cards: it is the numbering ``hy-smi``/rocm_smi
print (``HCU[i]``, from ``/sys/class/drm/card*``) and the order HAMi's plugin lists, so an operator
reads the same slot numbers; KFD node order is not used because KFD renumbers nodes when a GPU
goes. Cards without minors at discovery (driver unbound) follow by PCI address, and an index once
given is kept for the life of the process (a card that comes back, or one found later, never
shifts another's index; new cards take the next free numbers).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from hcs_deviceplugin.model import Card, Health, Inventory, LinkMatrix
from vendors.hygon import attributes as attr
from vendors.hygon import drm, edits, health, kfd, links
from vendors.hygon.driver import DCU_DRIVERS, driver_version
from vendors.hygon.facts import CardFacts
from vendors.hygon.models import HYGON_PCI_VENDOR, ModelTable
from vendors.pcisysfs.files import SysfsFileError, read_int, read_optional_text
from vendors.pcisysfs.pci import PciFunction, function_dir, scan_pci

log = logging.getLogger(__name__)

BACKEND = "hygon"
VENDOR = "hygon"
_DCU_CLASS_PREFIXES = (0x03, 0x12)  # display controller, processing accelerator
_COPROCESSOR_CLASS = 0x0B40
PCI_SOURCE = "pci-address"


def is_dcu_class(class_code: int) -> bool:
    return (class_code >> 16) in _DCU_CLASS_PREFIXES or (class_code >> 8) == _COPROCESSOR_CLASS


def is_dcu(function: PciFunction, table: ModelTable) -> bool:
    """A Hygon function that is an accelerator, not one of a Hygon CPU's own functions."""
    return (
        table.knows(function.device_id) or is_dcu_class(function.class_code) or function.driver in DCU_DRIVERS
    )


def errored_is_dcu(host_root: Path, address: str, table: ModelTable) -> bool:
    """The same test for a function some of whose files are malformed: whatever still reads decides."""
    directory = function_dir(host_root, address)
    for name, test in (("device", table.knows), ("class", is_dcu_class)):
        try:
            if test(read_int(directory / name, 16)):
                return True
        except SysfsFileError:
            continue
    return (directory / "drm").is_dir()


@dataclass(frozen=True)
class Discovery:
    """One discovery pass: the inventory, per-card facts (by card id) and the node-wide device nodes."""

    inventory: Inventory
    facts: Mapping[str, CardFacts]
    shared: edits.SharedNodes

    @property
    def by_address(self) -> dict[str, CardFacts]:
        return {f.address: f for f in self.facts.values()}


@dataclass
class Memory:
    """What one backend remembers across passes: ids, indices, and every card it has ever seen."""

    ids: dict[str, tuple[str, str]] = field(default_factory=dict)  # address → (card id, identity source)
    indices: dict[str, int] = field(default_factory=dict)  # card id → index
    last: Discovery | None = None


def _identity(directory: Path, node: kfd.KfdNode | None, address: str) -> tuple[str, str]:
    """(card id, source) from the first of serial_number, unique_id (DRM, then KFD), the address."""
    for name in ("serial_number", "unique_id"):
        try:
            value = read_optional_text(directory / name)
        except SysfsFileError as err:
            log.debug("identity file unreadable, trying the next source: %s", err)
            continue
        if value:
            return f"DCU-{value}", name
    if node is not None and node.properties.get("unique_id"):
        return f"DCU-{node.properties['unique_id']:016x}", "kfd-unique_id"
    return f"DCU-pci-{address}", PCI_SOURCE


def _sticky_identity(memory: Memory, address: str, card_id: str, source: str) -> str:
    """The id the address had before, unless the same file (serial or unique_id) now names another
    card: then a different card sits in the slot."""
    remembered = memory.ids.get(address)
    if remembered is None:
        return card_id
    old_id, old_source = remembered
    if source == old_source != PCI_SOURCE and old_id != card_id:
        log.warning("%s now holds DCU %s (was %s): a different card", address, card_id, old_id)
        return card_id
    return old_id


def _unique_ids(found: list[_Found], memory: Memory) -> list[_Found]:
    """Remember each address's id; a duplicate id (two cards with one serial) falls back to the address."""
    seen: set[str] = set()
    result = []
    for original in found:
        item, card_id = original, original.card.id
        if card_id in seen:
            card_id = f"DCU-pci-{item.facts.address}"
            log.warning("%s: DCU id %s already taken; using %s", item.facts.address, item.card.id, card_id)
            item = replace(
                item, card=replace(item.card, id=card_id), facts=replace(item.facts, card_id=card_id)
            )
        seen.add(card_id)
        source = item.card.attributes.get(attr.IDENTITY_SOURCE, PCI_SOURCE)
        memory.ids[item.facts.address] = (card_id, source)
        result.append(item)
    return result


def _memory(directory: Path, node: kfd.KfdNode | None) -> int:
    """VRAM: KFD memory banks, else DRM ``mem_info_vram_total``, else KFD ``local_mem_size``; 0 unknown."""
    if node is not None and node.vram_bytes:
        return node.vram_bytes
    try:
        total = read_optional_text(directory / "mem_info_vram_total")
        if total:
            return int(total, 10)
    except (SysfsFileError, ValueError) as err:
        log.debug("%s: mem_info_vram_total unusable: %s", directory, err)
    if node is not None and node.properties.get("local_mem_size", 0) > 0:
        return node.properties["local_mem_size"]
    return 0


def _attributes(
    node: kfd.KfdNode | None, minors: drm.DrmMinors, driver: str | None, version: str, source: str
) -> dict[str, str]:
    values: dict[str, str] = {attr.IDENTITY_SOURCE: source}
    if minors.card is not None:
        values[attr.DRM_CARD_MINOR] = str(minors.card)
    if minors.render is not None:
        values[attr.DRM_RENDER_MINOR] = str(minors.render)
    if driver is not None:
        values[attr.DRIVER] = driver
    if version:
        values[attr.DRIVER_VERSION] = version
    if node is not None:
        if node.compute_units is not None:
            values[attr.CU_COUNT] = str(node.compute_units)
        if node.gfx_target is not None:
            values[attr.GFX_TARGET] = node.gfx_target
        if node.gpu_id:
            values[attr.KFD_GPU_ID] = str(node.gpu_id)
        if node.properties.get("hive_id"):
            values[attr.HIVE_ID] = str(node.properties["hive_id"])
    return values


@dataclass(frozen=True)
class _Found:
    """A DCU function seen in this pass, before indices are assigned."""

    card: Card
    facts: CardFacts
    function: PciFunction | None


def _read_function(
    host_root: Path,
    function: PciFunction,
    topology: kfd.KfdTopology,
    by_class: dict[str, drm.DrmMinors],
    table: ModelTable,
    memory: Memory,
) -> _Found:
    directory = function_dir(host_root, function.address)
    minors = drm.minors_for(directory, function.address, by_class)
    previous = memory.last.by_address.get(function.address) if memory.last else None
    previous_card = memory.last.inventory.card(previous.card_id) if memory.last and previous else None
    node = topology.gpu_for(function.address, minors.render)
    if previous is not None and previous_card is not None and (not minors.complete or node is None):
        # Unbound (or its KFD node gone) now: keep what it was, to recognise its return unchanged.
        return _Found(replace(previous_card, numa_node=function.numa_node), previous, function)
    card_id, source = _identity(directory, node, function.address)
    card_id = _sticky_identity(memory, function.address, card_id, source)
    card = Card(
        id=card_id,
        backend=BACKEND,
        vendor=VENDOR,
        model=table.name(function.device_id),
        index=-1,
        pci_address=function.address,
        pci_vendor_id=function.vendor_id,
        pci_device_id=function.device_id,
        numa_node=function.numa_node,
        memory_bytes=_memory(directory, node),
        attributes=_attributes(
            node, minors, function.driver, driver_version(host_root, function.driver), source
        ),
    )
    return _Found(card, CardFacts(card_id, function.address, function.device_id, minors), function)


def _read_errored(host_root: Path, address: str, table: ModelTable, memory: Memory) -> _Found:
    """A DCU function with a malformed file: a card from what still reads (or from before)."""
    directory = function_dir(host_root, address)
    previous = memory.last.by_address.get(address) if memory.last else None
    if previous is not None and memory.last is not None:
        card = memory.last.inventory.card(previous.card_id)
        if card is not None:
            return _Found(card, previous, None)
    try:
        device_id = read_int(directory / "device", 16)
    except SysfsFileError:
        device_id = 0
    minors = drm.function_minors(directory)
    card_id, source = _identity(directory, None, address)
    card_id = _sticky_identity(memory, address, card_id, source)
    card = Card(
        id=card_id,
        backend=BACKEND,
        vendor=VENDOR,
        model=table.name(device_id),
        index=-1,
        pci_address=address,
        pci_vendor_id=HYGON_PCI_VENDOR,
        pci_device_id=device_id,
        attributes=_attributes(None, minors, None, "", source),
    )
    return _Found(card, CardFacts(card_id, address, device_id, minors), None)


def _assign_indices(found: list[_Found], memory: Memory) -> list[_Found]:
    """Sticky indices: known cards keep theirs; new ones take the next numbers in DRM card-minor order."""
    used = set(memory.indices.values())
    next_index = max(used, default=-1) + 1
    fresh = [f for f in found if f.card.id not in memory.indices]
    no_minor = 1 << 30
    for item in sorted(
        fresh,
        key=lambda f: (
            f.facts.minors.card if f.facts.minors.card is not None else no_minor,
            f.facts.address,
        ),
    ):
        memory.indices[item.card.id] = next_index
        next_index += 1
    return [replace(f, card=replace(f.card, index=memory.indices[f.card.id])) for f in found]


def discover(host_root: Path, table: ModelTable, hyhal_path: str, memory: Memory) -> Discovery:
    """Every DCU now, plus every DCU an earlier pass saw that is gone (kept, and checked Unhealthy).

    Never raises for one card: a function with a malformed file becomes an Unhealthy card whose
    ``fault`` attribute (and health reason) names the file.
    """
    scan = scan_pci(host_root, HYGON_PCI_VENDOR)
    shared = edits.shared_nodes(host_root, hyhal_path)
    topology = kfd.read_topology(host_root)
    by_class = drm.class_drm_minors(host_root)
    found: list[_Found] = [
        _read_function(host_root, fn, topology, by_class, table, memory)
        for fn in scan.functions
        if is_dcu(fn, table)
    ]
    for address, err in sorted(scan.errors.items()):
        if errored_is_dcu(host_root, address, table):
            log.warning("Hygon DCU %s: %s", address, err)
            found.append(_read_errored(host_root, address, table, memory))
    seen = {f.facts.address for f in found}
    ids = {f.card.id for f in found}
    if memory.last is not None:
        for facts in memory.last.facts.values():
            card = memory.last.inventory.card(facts.card_id)
            if card is not None and facts.address not in seen and card.id not in ids:
                found.append(_Found(card, facts, None))  # gone now: kept, and checked Unhealthy
    found = _assign_indices(_unique_ids(found, memory), memory)

    known = {f.card.id: f.facts for f in found}
    verdicts = health.check_cards(host_root, known.values(), topology)
    cards = []
    for item in sorted(found, key=lambda f: f.card.index):
        verdict, reason = verdicts[item.card.id].verdict
        attributes = {k: v for k, v in item.card.attributes.items() if k != attr.FAULT}
        if verdict is Health.UNHEALTHY:
            attributes[attr.FAULT] = reason
            log.warning("Hygon DCU %s (%s) Unhealthy: %s", item.card.id, item.facts.address, reason)
        cards.append(replace(item.card, health=verdict, attributes=attributes))

    functions = {f.card.id: f.function for f in found if f.function is not None}
    previous_links = memory.last.inventory.links if memory.last else LinkMatrix()
    matrix = links.link_matrix(topology, known, functions, previous_links)
    result = Discovery(Inventory(cards=tuple(cards), links=matrix), MappingProxyType(known), shared)
    memory.last = result
    return result
