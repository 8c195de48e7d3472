"""Cambricon MLUs from sysfs, procfs and /dev only: which functions are cards, and what each one is.

A card is a PCI function with vendor ``0xcabc``, class base ``0x12`` and no ``physfn`` link: SR-IOV
VFs on the host are skipped, as the official plugin's sysfs count does (cambricon.md §2.1). Per card:

- identity: :func:`assign_ids` from the ``Board Serial Number`` in procfs ``information``. Whether it
  equals cndev's card SN/UUID is unverified, so ids are ours, not the official plugin's ``MLU-<uuid>``;
- slot N of ``/dev/cambricon_dev<N>`` from the class device (:mod:`.classdev`), never from BDF order;
- model: ``information``'s ``Device name`` else the device-id table (:mod:`.models`);
- NUMA node from the function's ``numa_node`` (``-1`` = unknown); memory from a per-model table only,
  since the size is cndev-only (``cndevGetMemoryUsageV2``) and 0 for boards the table lacks;
- health from :func:`probe.probe_function`.

Cards never vanish from a backend's inventory once seen: a hot-removed or unbound function stays, as
Unhealthy, with the id and slot it had, so it comes back as the same kubelet device.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from hcs_deviceplugin.model import Card, Health
from vendors.cambricon import classdev, models
from vendors.cambricon.probe import FunctionState, card_node, probe_function
from vendors.pcisysfs.files import SysfsFileError, read_int
from vendors.pcisysfs.pci import PCI_DEVICES, PciFunction, scan_pci

log = logging.getLogger(__name__)

BACKEND = "cambricon"
VENDOR = "cambricon"
PCI_ID_PREFIX = "MLU-pci-"
UNKNOWN_SLOT_BASE = 1000
"""``Card.index`` of a card whose /dev slot was never known (``1000 + its BDF position``): unique,
and never mistaken for a real ``cambricon_dev<N>``."""

LINK_MODULE = "linkModule"


@dataclass(frozen=True)
class Candidate:
    """A function that is an MLU card by its ids (its other files may still be unreadable)."""

    bdf: str
    function: PciFunction | None
    device_id: int


@dataclass(frozen=True)
class KnownCard:
    """What the backend remembers of a card across discoveries: identity, slot, last Card and the
    last PCI function read (so a card that is gone keeps its host-path links)."""

    card: Card
    slot: int | None
    function: PciFunction | None = None

    @property
    def provisional(self) -> bool:
        """An id from the PCI address because no serial could be read: replaced once one can be.

        A ``MLU-pci-`` id given because the serial was shared where it must not be is final.
        """
        return self.card.id.startswith(PCI_ID_PREFIX) and "boardSerial" not in self.card.attributes


@dataclass(frozen=True)
class Discovered:
    """One discovery: the cards (sorted by slot), their PCI functions by card id, the known-card table."""

    cards: tuple[Card, ...]
    functions: Mapping[str, PciFunction]
    known: Mapping[str, KnownCard]


def _is_virtual_function(host_root: Path, bdf: str) -> bool:
    return (host_root / PCI_DEVICES / bdf / "physfn").is_symlink()


def _class_base(host_root: Path, bdf: str) -> int | None:
    try:
        return (read_int(host_root / PCI_DEVICES / bdf / "class", 16) >> 16) & 0xFF
    except SysfsFileError:
        return None


def _device_id(host_root: Path, bdf: str) -> int:
    try:
        return read_int(host_root / PCI_DEVICES / bdf / "device", 16)
    except SysfsFileError:
        return 0


def find_candidates(host_root: Path) -> list[Candidate]:
    """MLU functions by vendor, class and SR-IOV parentage, sorted by BDF.

    A function whose files the PCI scan could not read is still a candidate unless what can be read
    rules it out (a ``physfn`` link, a readable class of another base): it becomes an Unhealthy card
    whose reason names the bad file, instead of silently disappearing.
    """
    scan = scan_pci(host_root, models.CAMBRICON_VENDOR_ID)
    found = [
        Candidate(f.address.lower(), f, f.device_id)
        for f in scan.functions
        if f.physfn is None and (f.class_code >> 16) & 0xFF == models.PROCESSING_ACCELERATOR_CLASS
    ]
    for bdf, err in scan.errors.items():
        if _is_virtual_function(host_root, bdf):
            continue
        base = _class_base(host_root, bdf)
        if base is not None and base != models.PROCESSING_ACCELERATOR_CLASS:
            continue
        log.warning("MLU function %s unreadable: %s", bdf, err)
        found.append(Candidate(bdf.lower(), None, _device_id(host_root, bdf)))
    return sorted(found, key=lambda c: c.bdf)


def _fresh_id(state: FunctionState, model: str, board_peers: Mapping[str, list[str]]) -> str:
    """The id a card would get if nothing were known about it (see :func:`assign_ids`)."""
    info = state.information
    serial = info.board_serial if info else None
    if serial is None:
        return f"{PCI_ID_PREFIX}{state.bdf}"
    peers = board_peers[serial]
    chips = models.chips_per_board(model)
    if chips == 1:
        if len(peers) > 1:
            log.warning("MLU functions %s share board serial %s on a one-chip board", peers, serial)
            return f"{PCI_ID_PREFIX}{state.bdf}"
        return f"MLU-{serial}"
    if len(peers) > chips:
        log.warning(
            "%d MLU functions share board serial %s; %s has %d chips", len(peers), serial, model, chips
        )
        return f"{PCI_ID_PREFIX}{state.bdf}"
    return f"MLU-{serial}-{peers.index(state.bdf)}"


def _next_free(candidate: str, taken: set[str], chips: int) -> str | None:
    """For a multi-chip id ``MLU-<serial>-<k>`` already taken, the lowest free ordinal of that board."""
    stem, _, _ = candidate.rpartition("-")
    for ordinal in range(chips):
        option = f"{stem}-{ordinal}"
        if option not in taken:
            return option
    return None


def assign_ids(
    states: Mapping[str, FunctionState], models_of: Mapping[str, str], known: Mapping[str, KnownCard]
) -> dict[str, str]:
    """BDF -> card id.

    ``MLU-<serial>`` for a one-chip board, ``MLU-<serial>-<ordinal>`` for each chip of a multi-chip
    board (ordinal by BDF order among the functions sharing the serial), ``MLU-pci-<bdf>`` when the
    serial is missing or unreadable or shared where it should not be. A card keeps the id it was
    first given for the backend's lifetime, except a ``MLU-pci-`` id, which gives way to the serial
    id once the serial can be read. A chip that was absent when its board-mate was numbered takes the
    board's next free ordinal rather than a clashing one.
    """
    board_peers: dict[str, list[str]] = {}
    for bdf in sorted(states):
        info = states[bdf].information
        if info is not None and info.board_serial is not None:
            board_peers.setdefault(info.board_serial, []).append(bdf)
    ids: dict[str, str] = {}
    taken = {k.card.id for k in known.values() if not k.provisional}
    for bdf in sorted(states):
        previous = known.get(bdf)
        if previous is not None and not previous.provisional:
            ids[bdf] = previous.card.id
            continue
        model = models_of[bdf]
        chosen = _fresh_id(states[bdf], model, board_peers)
        if chosen in taken:
            free = _next_free(chosen, taken, models.chips_per_board(model))
            chosen = (
                free if free is not None and models.chips_per_board(model) > 1 else f"{PCI_ID_PREFIX}{bdf}"
            )
        taken.add(chosen)
        ids[bdf] = chosen
    return ids


def _slot(state: FunctionState, previous: KnownCard | None) -> int | None:
    if state.slot is not None:
        return state.slot
    if previous is not None and previous.slot is not None:
        return previous.slot
    if state.information is not None:
        return state.information.node_slot
    return None


def _model(candidate: Candidate, state: FunctionState) -> str:
    info = state.information
    return models.model_name(info.device_name if info else None, candidate.device_id)


_LIVE_ATTRIBUTES = frozenset({"coreState", "driver", "healthReason"})


def _carry_over(previous: Card, card: Card, state: FunctionState) -> Card:
    """Keep what an unreadable file hides: a known card whose ``information`` or PCI files cannot be
    read now keeps its model, memory, serial and board module (so its links do not change) and its
    NUMA node; only health and the live attributes are new."""
    if state.information is None and card.id == previous.id:
        attributes = {k: v for k, v in previous.attributes.items() if k not in _LIVE_ATTRIBUTES}
        attributes.update({k: v for k, v in card.attributes.items() if k in _LIVE_ATTRIBUTES})
        card = replace(card, model=previous.model, memory_bytes=previous.memory_bytes, attributes=attributes)
    if state.function is None and card.numa_node is None:
        card = replace(card, numa_node=previous.numa_node)
    return card


def build_card(
    card_id: str, candidate: Candidate, state: FunctionState, slot: int | None, position: int
) -> Card:
    info = state.information
    model = _model(candidate, state)
    attributes: dict[str, str] = {"family": models.family_of(candidate.device_id) or ""}
    if slot is not None:
        attributes["devicePath"] = card_node(slot)
    if info is not None:
        if info.board_serial is not None:
            attributes["boardSerial"] = info.board_serial
            if models.chips_per_board(model) > 1 and not card_id.startswith(PCI_ID_PREFIX):
                attributes[LINK_MODULE] = info.board_serial
        if info.driver_version:
            attributes["driverVersion"] = info.driver_version
    if state.core_state is not None:
        attributes["coreState"] = state.core_state
    if state.function is not None and state.function.driver:
        attributes["driver"] = state.function.driver
    if state.problems:
        attributes["healthReason"] = state.reason
    return Card(
        id=card_id,
        backend=BACKEND,
        vendor=VENDOR,
        model=model,
        index=slot if slot is not None else UNKNOWN_SLOT_BASE + position,
        pci_address=candidate.bdf,
        pci_vendor_id=models.CAMBRICON_VENDOR_ID,
        pci_device_id=candidate.device_id,
        numa_node=state.function.numa_node if state.function else None,
        memory_bytes=models.memory_bytes(model),
        health=Health.HEALTHY if state.healthy else Health.UNHEALTHY,
        attributes=attributes,
    )


def _gone(known: KnownCard, state: FunctionState) -> Card:
    """A card seen before whose function is no longer an MLU candidate: kept, Unhealthy."""
    attributes = {k: v for k, v in known.card.attributes.items() if k != "coreState"}
    attributes["healthReason"] = state.reason
    return replace(known.card, health=Health.UNHEALTHY, attributes=attributes)


def discover(host_root: Path, known: Mapping[str, KnownCard]) -> Discovered:
    """Every MLU on the node now, plus every card seen before that is gone (Unhealthy).

    ``known`` is the previous :attr:`Discovered.known` (empty the first time), keyed by BDF.
    """
    candidates = find_candidates(host_root)
    slots = classdev.slot_map(host_root)
    states = {c.bdf: probe_function(host_root, c.bdf, slots, c.function) for c in candidates}
    models_of = {c.bdf: _model(c, states[c.bdf]) for c in candidates}
    ids = assign_ids(states, models_of, known)
    cards: list[Card] = []
    table: dict[str, KnownCard] = {}
    functions: dict[str, PciFunction] = {}
    for position, candidate in enumerate(candidates):
        state = states[candidate.bdf]
        previous = known.get(candidate.bdf)
        slot = _slot(state, previous)
        card = build_card(ids[candidate.bdf], candidate, state, slot, position)
        if previous is not None:
            card = _carry_over(previous.card, card, state)
        function = state.function or (previous.function if previous else None)
        cards.append(card)
        table[candidate.bdf] = KnownCard(card, slot, function)
        if function is not None:
            functions[card.id] = function
    for bdf, previous in known.items():
        if bdf in table:
            continue
        state = probe_function(host_root, bdf, slots)
        gone = _gone(previous, state if state.problems else _not_a_card(bdf))
        cards.append(gone)
        table[bdf] = previous if previous.card == gone else KnownCard(gone, previous.slot, previous.function)
        if previous.function is not None:
            functions[gone.id] = previous.function
    cards.sort(key=lambda c: (c.index, c.pci_address))
    return Discovered(
        cards=tuple(cards),
        functions=MappingProxyType(functions),
        known=MappingProxyType(table),
    )


def _not_a_card(bdf: str) -> FunctionState:
    return FunctionState(bdf, True, problems=(f"PCI function {bdf} is no longer an MLU",))


def driver_module_loaded(host_root: Path) -> bool:
    """``cambricon-drv`` is loaded (``/sys/module/cambricon_drv`` exists)."""
    return (host_root / "sys/module/cambricon_drv").is_dir()
