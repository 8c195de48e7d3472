"""Discovery: cards → chips → Cards (one per chip/die) and vNPU Partitions, with HCCS topology.

Enumeration is MindX's loop (§2.1): ``dcmi_get_card_list``, then per card ``dcmi_get_device_num_in_card``
and per chip ``dcmi_get_device_logic_id`` → ``dcmi_get_device_phyid_from_logicid``; devices that answer
``dcmi_get_device_type`` with MCU/CPU (the A3 module's device 2) are skipped. Each card's enumeration
runs on that card's worker and each chip's reading on the chip's worker, all at once, so discovery
takes as long as the slowest chip - and a hung one costs at most the call timeout.

A chip's identity (``Card.id``) is its VDIE id, five ``%08X`` words joined by ``-`` as MindX prints it
and HAMi uses it for the device UUID. Where the chip has no VDIE (NOT_SUPPORT, symbol missing, all
zero) it falls back to ``ascend-pci-<address>``, then ``ascend-phy-<phy id>``; the ``identity``
attribute says which, and a warning is logged, since such an id is only as stable as the slot.

Never raises for one bad chip (Backend contract): a chip that does not answer its identity is left out,
or, if an earlier pass knew it, reported again from that pass as Unhealthy (so pools keep it while it
is broken and it comes back under the same id). Only a failing card list fails the pass.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from hcs_deviceplugin.allocation.topology import GROUP_ATTRIBUTE, GROUP_SIZES_ATTRIBUTE, MODULE_ATTRIBUTE
from hcs_deviceplugin.model import Card, Health, Inventory, LinkMatrix, Partition
from vendors.ascend import abi, calls, topology
from vendors.ascend import attributes as attr
from vendors.ascend.families import HBM_FAMILIES, TOPOLOGY_QUERY_FAMILIES, Family, family_of, templates_for
from vendors.ascend.families import parse_template as _parse_template
from vendors.ascend.library import DcmiError, DcmiLibrary
from vendors.ascend.timeouts import NODE_KEY, TOPOLOGY_KEY, CallBounds, Job, card_key, chip_key

log = logging.getLogger(__name__)

BACKEND = "ascend"
VENDOR = "huawei"
MIB = 2**20


@dataclass(frozen=True, order=True)
class ChipAddress:
    """Where DCMI finds a chip: the V2 (card, device) address and the node-wide logic and phy ids."""

    card_id: int
    device_id: int
    logic_id: int = -1
    phy_id: int = -1

    @property
    def key(self) -> str:
        return chip_key(self.card_id, self.device_id)

    @staticmethod
    def of(card: Card) -> ChipAddress:
        a = card.attributes
        return ChipAddress(
            int(a[attr.CARD_ID]), int(a[attr.DEVICE_ID]), int(a[attr.LOGIC_ID]), int(a[attr.PHY_ID])
        )


def _optional(call: str, err: DcmiError, subject: str) -> None:
    """An optional fact the chip or library cannot give: normal on many chips, so debug level only."""
    if err.unsupported:
        log.debug("%s: %s unsupported (%s)", subject, call, err)
    else:
        log.warning("%s: %s failed: %s", subject, call, err)


def numa_node(host_root: Path, pci_address: str) -> int | None:
    """``/sys/bus/pci/devices/<addr>/numa_node``; negative or unreadable means unknown."""
    if not pci_address:
        return None
    try:
        value = int((host_root / "sys/bus/pci/devices" / pci_address / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return value if value >= 0 else None


def enumerate_card(lib: DcmiLibrary, card_id: int) -> list[ChipAddress]:
    """The NPU chips of one card with their logic and phy ids (runs on the card's worker)."""
    found: list[ChipAddress] = []
    for device_id in range(calls.device_num_in_card(lib, card_id)):
        try:
            kind = calls.device_type(lib, card_id, device_id)
        except DcmiError as err:
            _optional("dcmi_get_device_type", err, f"card {card_id} device {device_id}")
            kind = abi.NPU_TYPE
        if kind != abi.NPU_TYPE:
            log.debug("card %d device %d is not an NPU (type %d); skipped", card_id, device_id, kind)
            continue
        logic = calls.logic_id(lib, card_id, device_id)
        found.append(ChipAddress(card_id, device_id, logic, calls.phy_id(lib, logic)))
    return found


def _memory_mb(lib: DcmiLibrary, address: ChipAddress, family: Family, subject: str) -> tuple[int, str]:
    """HBM on the 910 line, DDR (``memory_info_v3``) on the 310 line; the other as fallback."""
    readers = [
        ("hbm", calls.hbm_mb, "dcmi_get_device_hbm_info"),
        ("ddr", calls.ddr_mb, "dcmi_get_device_memory_info_v3"),
    ]
    if family not in HBM_FAMILIES:
        readers.reverse()
    for kind, reader, name in readers:
        try:
            return reader(lib, address.card_id, address.device_id), kind
        except DcmiError as err:
            _optional(name, err, subject)
    return 0, ""


def _identity(lib: DcmiLibrary, address: ChipAddress, pci_address: str, subject: str) -> tuple[str, str, str]:
    """(Card.id, identity source, die id) - the VDIE id, else the PCI address, else the phy id."""
    try:
        die = calls.die_id(lib, address.card_id, address.device_id, abi.VDIE)
        return die, "vdie", die
    except DcmiError as err:
        if not err.unsupported:
            raise  # a transient failure must not change the chip's id: the chip is unreadable now
        log.warning(
            "%s: no VDIE id (%s); identifying the chip by %s",
            subject,
            err,
            "PCI address" if pci_address else "phy id",
        )
    if pci_address:
        return f"ascend-pci-{pci_address}", "pci", ""
    return f"ascend-phy-{address.phy_id}", "phy", ""


def read_chip(lib: DcmiLibrary, address: ChipAddress, host_root: Path, driver: str) -> Card:
    """One chip as a Card (runs on the chip's worker); DcmiError if it cannot say what it is."""
    subject = f"chip {address.phy_id} (card {address.card_id} device {address.device_id})"
    info = calls.chip_info(lib, address.card_id, address.device_id)
    board: int | None = None
    try:
        board = calls.board_id(lib, address.card_id, address.device_id)
    except DcmiError as err:
        _optional("dcmi_get_device_board_info", err, subject)
    family = family_of(info.chip_name, board)
    pci: calls.PciInfo | None = None
    try:
        pci = calls.pcie_info(lib, address.card_id, address.device_id)
    except DcmiError as err:
        _optional("dcmi_get_device_pcie_info_v2", err, subject)
    pci_address = pci.address if pci else ""
    card_id, identity, die = _identity(lib, address, pci_address, subject)
    memory_mb, memory_kind = _memory_mb(lib, address, family, subject)
    templates = templates_for(family, info.chip_name)
    attributes = {
        attr.CARD_ID: str(address.card_id),
        attr.DEVICE_ID: str(address.device_id),
        attr.LOGIC_ID: str(address.logic_id),
        attr.PHY_ID: str(address.phy_id),
        attr.FAMILY: family.value,
        attr.CHIP_TYPE: info.chip_type,
        attr.CHIP_NAME: info.chip_name,
        attr.CHIP_VERSION: info.chip_version,
        attr.AI_CORES: str(info.ai_cores),
        attr.IDENTITY: identity,
        attr.VNPU_TEMPLATES: ",".join(templates),
    }
    optional = {
        attr.NPU_NAME: info.npu_name,
        attr.BOARD_ID: f"0x{board:x}" if board is not None else "",
        attr.MEMORY_KIND: memory_kind,
        attr.DIE_ID: die,
        attr.DRIVER_VERSION: driver,
    }
    try:
        optional[attr.PRODUCT_TYPE] = calls.product_type(lib, address.card_id, address.device_id)
    except DcmiError as err:
        _optional("dcmi_get_product_type", err, subject)
    attributes.update({k: v for k, v in optional.items() if v})
    return Card(
        id=card_id,
        backend=BACKEND,
        vendor=VENDOR,
        model=_model(info, family),
        index=address.phy_id,
        pci_address=pci_address,
        pci_vendor_id=pci.vendor_id if pci else 0,
        pci_device_id=pci.device_id if pci else 0,
        numa_node=numa_node(host_root, pci_address),
        memory_bytes=memory_mb * MIB,
        attributes=attributes,
    )


def _model(info: calls.ChipInfo, family: Family) -> str:
    """``Ascend910B3``, ``Ascend310P3``...; A3 by its NPU name, since its chip name says only 910."""
    name = info.chip_name
    if family is Family.ASCEND910A3:
        name = info.npu_name or "Ascend910_93"
    return name if name.startswith("Ascend") else f"Ascend{name}"


def partition_id(card_id: str, vdev_id: int) -> str:
    """A vNPU's id: its chip's identity and its vdev id, so it is stable across restarts and unique."""
    return f"{card_id}-vnpu-{vdev_id}"


def read_vnpus(lib: DcmiLibrary, card: Card) -> list[Partition]:
    """The chip's vNPUs (VDEV_MNG), runs on the chip's worker; [] where the chip has no vNPU support."""
    address = ChipAddress.of(card)
    try:
        ids = calls.vnpu_ids(lib, address.card_id, address.device_id)
    except DcmiError as err:
        _optional("dcmi_get_device_info(VDEV_MNG)", err, f"chip {address.phy_id}")
        return []
    found: list[Partition] = []
    for vdev in ids:
        try:
            vnpu = calls.vnpu_info(lib, address.card_id, address.device_id, vdev)
        except DcmiError as err:
            log.warning("chip %d: vNPU %d unreadable: %s", address.phy_id, vdev, err)
            continue
        found.append(vnpu_partition(card, vnpu))
    return found


def vnpu_partition(card: Card, vnpu: calls.VnpuInfo) -> Partition:
    attributes = {
        attr.VDEV_ID: str(vnpu.vdev_id),
        attr.VFG_ID: str(vnpu.vfg_id),
        attr.TEMPLATE: vnpu.template,
        attr.IN_USE: "true" if vnpu.in_use else "false",
        attr.PHY_ID: card.attributes[attr.PHY_ID],
        attr.AI_CORES: f"{vnpu.ai_cores:g}",
    }
    try:
        attributes[attr.RESOURCE_SUFFIX] = _parse_template(vnpu.template).resource_suffix
    except ValueError:
        log.warning("chip %s: vNPU %d has an unknown template name %r", card.id, vnpu.vdev_id, vnpu.template)
    return Partition(
        id=partition_id(card.id, vnpu.vdev_id),
        card_id=card.id,
        profile=vnpu.template,
        memory_bytes=vnpu.memory_mb * MIB,
        attributes=attributes,
    )


@dataclass
class _ChipRead:
    address: ChipAddress
    job: Job[tuple[Card, list[Partition]]]


@dataclass
class Discoverer:
    """Runs discovery passes; remembers the last inventory (for stale chips) and the HCCS pair answers."""

    lib: DcmiLibrary
    bounds: CallBounds
    host_root: Path
    previous: Inventory | None = None
    _pair_types: dict[frozenset[str], int] = field(default_factory=dict)
    _topology_unsupported: bool = False

    def discover(self) -> Inventory:
        """All chips, vNPUs and links now. Raises DcmiError only when the card list itself fails."""
        cards_on_node = self.bounds.run(NODE_KEY, lambda: calls.card_list(self.lib))
        driver = self._driver_version()
        addresses = self._enumerate(cards_on_node)
        reads = [_ChipRead(a, self.bounds.submit(a.key, partial(self._read, a, driver))) for a in addresses]
        cards: list[Card] = []
        partitions: list[Partition] = []
        seen: set[tuple[int, int]] = set()
        for read in reads:
            try:
                card, parts = self.bounds.wait(read.job)
            except DcmiError as err:
                stale_card, stale_parts = self._stale(read.address, str(err))
                cards.extend(stale_card)
                partitions.extend(stale_parts)
                seen.add((read.address.card_id, read.address.device_id))
                continue
            seen.add((read.address.card_id, read.address.device_id))
            twin = next((c for c in cards if c.id == card.id), None)
            if twin is not None:
                log.error(
                    "chips %s and %d report the same identity %s; the second is left out",
                    twin.attributes.get(attr.PHY_ID),
                    read.address.phy_id,
                    card.id,
                )
                continue
            cards.append(card)
            partitions.extend(parts)
        for card in self._vanished(seen):
            cards.append(card)
            partitions.extend(replace(p, health=Health.UNHEALTHY) for p in self._old_partitions(card.id))
        cards.sort(key=lambda c: c.index)
        cards, links = self._with_topology(cards)
        inventory = Inventory(cards=tuple(cards), partitions=tuple(partitions), links=links)
        self.previous = inventory
        return inventory

    # -- steps --------------------------------------------------------------------------------

    def _driver_version(self) -> str:
        try:
            return self.bounds.run(NODE_KEY, lambda: calls.driver_version(self.lib))
        except DcmiError as err:
            _optional("dcmi_get_driver_version", err, "node")
            return ""

    def _enumerate(self, cards_on_node: Sequence[int]) -> list[ChipAddress]:
        jobs = [
            (c, self.bounds.submit(card_key(c), partial(enumerate_card, self.lib, c))) for c in cards_on_node
        ]
        found: list[ChipAddress] = []
        for card_id, job in jobs:
            try:
                chips: list[ChipAddress] = self.bounds.wait(job)
                found.extend(chips)
            except DcmiError as err:
                log.warning("card %d: cannot enumerate its chips: %s", card_id, err)
                found.extend(self._known_addresses(card_id))
        return sorted(found, key=lambda a: (a.phy_id, a.card_id, a.device_id))

    def _read(self, address: ChipAddress, driver: str) -> tuple[Card, list[Partition]]:
        card = read_chip(self.lib, address, self.host_root, driver)
        return card, read_vnpus(self.lib, card)

    def _known_addresses(self, card_id: int) -> list[ChipAddress]:
        """The chips an earlier pass found on ``card_id`` (their reads will fail or find them again)."""
        if self.previous is None:
            return []
        return [
            ChipAddress.of(c) for c in self.previous.cards if c.attributes.get(attr.CARD_ID) == str(card_id)
        ]

    def _stale(self, address: ChipAddress, reason: str) -> tuple[list[Card], list[Partition]]:
        for card in self.previous.cards if self.previous else ():
            known = ChipAddress.of(card)
            if (known.card_id, known.device_id) == (address.card_id, address.device_id):
                log.warning(
                    "chip %s (phy %d) does not answer (%s); reporting it Unhealthy",
                    card.id,
                    address.phy_id,
                    reason,
                )
                parts = [replace(p, health=Health.UNHEALTHY) for p in self._old_partitions(card.id)]
                return [replace(card, health=Health.UNHEALTHY)], parts
        log.warning("chip at card %d device %d skipped: %s", address.card_id, address.device_id, reason)
        return [], []

    def _old_partitions(self, card_id: str) -> list[Partition]:
        return [p for p in self.previous.partitions if p.card_id == card_id] if self.previous else []

    def _vanished(self, seen: set[tuple[int, int]]) -> list[Card]:
        """Chips an earlier pass knew whose card is gone from the card list: kept, Unhealthy."""
        gone = []
        for card in self.previous.cards if self.previous else ():
            address = ChipAddress.of(card)
            if (address.card_id, address.device_id) not in seen:
                log.warning(
                    "chip %s (phy %d) is no longer listed; reporting it Unhealthy", card.id, address.phy_id
                )
                gone.append(replace(card, health=Health.UNHEALTHY))
        return gone

    # -- topology -----------------------------------------------------------------------------

    def _query_pairs(self, cards: Sequence[Card]) -> dict[frozenset[str], int]:
        """``dcmi_get_topo_info_by_device_id`` for the pairs of 910B/A3 chips, each pair asked once.

        A pair's answer never changes, so answers are kept across passes and only new pairs are asked,
        and only between chips that answered this pass. The calls run on a worker of their own: a call
        naming a hung chip may hang as well, and must not take a healthy partner's worker with it.
        The answers returned cover every chip of ``cards``, Healthy or not.
        """
        query_families = {f.value for f in TOPOLOGY_QUERY_FAMILIES}
        eligible = [c for c in cards if c.attributes.get(attr.FAMILY) in query_families]
        if (
            self._topology_unsupported
            or len(eligible) < 2
            or not self.lib.has("dcmi_get_topo_info_by_device_id")
        ):
            return {}
        healthy = [c for c in eligible if c.health is Health.HEALTHY]
        rows = {
            a.id: [b for b in healthy[i + 1 :] if frozenset((a.id, b.id)) not in self._pair_types]
            for i, a in enumerate(healthy)
        }
        jobs = [
            self.bounds.submit(TOPOLOGY_KEY, partial(self._topology_row, a, rows[a.id]))
            for a in healthy
            if rows[a.id]
        ]
        for job in jobs:
            try:
                answered: dict[frozenset[str], int] = self.bounds.wait(job)
            except DcmiError as err:
                if err.unsupported:
                    log.info("no HCCS topology from DCMI (%s); using the family's rules", err)
                    self._topology_unsupported = True
                    return {}
                log.warning("HCCS topology query incomplete: %s", err)
                continue
            self._pair_types.update(answered)
        ids = {c.id for c in eligible}
        return {pair: topo for pair, topo in self._pair_types.items() if pair <= ids}

    def _topology_row(self, a: Card, others: Sequence[Card]) -> dict[frozenset[str], int]:
        """The topology answers between ``a`` and each of ``others`` (runs on the topology worker)."""
        first = ChipAddress.of(a)
        out: dict[frozenset[str], int] = {}
        for b in others:
            second = ChipAddress.of(b)
            try:
                out[frozenset((a.id, b.id))] = calls.topo_type(
                    self.lib, (first.card_id, first.device_id), (second.card_id, second.device_id)
                )
            except DcmiError as err:
                if err.unsupported:
                    raise
                log.warning("topology of %s and %s unknown: %s", a.id, b.id, err)
        return out

    def _with_topology(self, cards: list[Card]) -> tuple[list[Card], LinkMatrix]:
        """Cards with the allocator's group/module attributes, and the links between them."""
        answered = self._query_pairs(cards)
        found = topology.build([_topo_chip(c) for c in cards], answered)
        result = []
        for card in cards:
            extra = found.attributes.get(card.id, {})
            base = {k: v for k, v in card.attributes.items() if k not in _TOPOLOGY_KEYS}
            result.append(replace(card, attributes={**base, **extra}))
        return result, found.links


_TOPOLOGY_KEYS = frozenset({GROUP_ATTRIBUTE, GROUP_SIZES_ATTRIBUTE, MODULE_ATTRIBUTE})


def _topo_chip(card: Card) -> topology.TopoChip:
    a = card.attributes
    family = Family(a.get(attr.FAMILY, Family.UNKNOWN.value))
    return topology.TopoChip(card.id, int(a[attr.CARD_ID]), int(a[attr.PHY_ID]), family)


def with_health(inventory: Inventory, unhealthy: Mapping[str, str]) -> Inventory:
    """``inventory`` with the chips the health monitor holds Unhealthy marked so (with their vNPUs)."""
    if not unhealthy:
        return inventory
    cards = tuple(replace(c, health=Health.UNHEALTHY) if c.id in unhealthy else c for c in inventory.cards)
    parts = tuple(
        replace(p, health=Health.UNHEALTHY) if p.id in unhealthy or p.card_id in unhealthy else p
        for p in inventory.partitions
    )
    return Inventory(cards=cards, partitions=parts, links=inventory.links)
