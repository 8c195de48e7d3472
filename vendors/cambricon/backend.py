"""The Cambricon backend: MLUs from sysfs, procfs and /dev, with no Cambricon library loaded.

The official plugin dlopens the host's ``libcndev.so`` and breaks when it is older than its build
(cambricon-k8s-device-plugin #17); this backend reads only what the MLU driver exposes in files, under
``BackendConfig.host_root`` (``/`` on a node, a temp tree in tests and ``simulate``). What exists only
through cndev/cntopo - UUIDs, memory size, MLU-Link port state, MIM/sMLU instances, health state and
compute mode - is read from nowhere and documented where it would be used (:mod:`.discovery`,
:mod:`.links`, :mod:`.probe`).

Options (``--backend-option cambricon.<key>=<value>``; unknown keys are errors):
- ``rescanSeconds`` (5): the bounded re-scan interval of the health loop, udev or not.
- ``udev`` (``auto``): ``on`` / ``off`` / ``auto`` (only when the host root is ``/`` and udevd runs).
- ``mluLinkFile``: an operator topology file of MLU-Link bridges between boards (:mod:`.links`).
- ``cnmonPath`` (``/usr/bin/cnmon``): host ``cnmon`` binary to mount read-only; empty disables.

State: the last discovery (inventory, precomputed edits) and the known-card table that keeps ids and
slots stable, swapped whole under one lock; Allocate reads the snapshot and does no I/O.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from hcs_deviceplugin.backend import BackendAbsent, BackendConfig, BackendOptionError
from hcs_deviceplugin.model import (
    Card,
    ContainerEdits,
    Health,
    HealthEvent,
    Inventory,
    InventoryChanged,
    LinkMatrix,
    NotSupportedError,
    Partition,
    Unit,
)
from vendors.cambricon import discovery, edits, links, models
from vendors.cambricon.discovery import KnownCard
from vendors.cambricon.health import CardChecker
from vendors.pcisysfs.health import health_stream
from vendors.pcisysfs.hotplug import HotplugWatcher
from vendors.pcisysfs.options import RESCAN_KEYS, parse_rescan, reject_unknown
from vendors.pcisysfs.pci import PCI_DEVICES, scan_pci

log = logging.getLogger(__name__)

HOTPLUG_SUBSYSTEMS = ("pci", "cambricon")
OPTION_KEYS = RESCAN_KEYS | {"mluLinkFile", "cnmonPath"}


@dataclass(frozen=True)
class CambriconSettings:
    """The backend's options, parsed and checked; see the module docstring."""

    rescan_seconds: float = 5.0
    use_udev: bool | None = None
    mlu_link_file: Path | None = None
    cnmon_path: str = edits.DEFAULT_CNMON

    @staticmethod
    def parse(options: Mapping[str, str]) -> CambriconSettings:
        """Unknown keys and bad values are errors: a misspelt option must not silently do nothing."""
        reject_unknown("cambricon", options, OPTION_KEYS)
        rescan = parse_rescan("cambricon", options)
        link_file = options.get("mluLinkFile", "").strip()
        return CambriconSettings(
            rescan_seconds=rescan.seconds,
            use_udev=rescan.use_udev,
            mlu_link_file=Path(link_file) if link_file else None,
            cnmon_path=options.get("cnmonPath", edits.DEFAULT_CNMON).strip(),
        )


@dataclass(frozen=True)
class _Snapshot:
    inventory: Inventory
    known: Mapping[str, KnownCard]
    card_edits: Mapping[str, edits.CardEdits]
    shared: edits.SharedEdits
    unhealthy_at_discovery: frozenset[str] = field(default_factory=frozenset)


class CambriconBackend:
    """Cambricon MLUs from sysfs/procfs//dev; see the module docstring."""

    name = "cambricon"
    cdi_class = "mlu"
    """Our CDI specs name MLUs ``hcs.deckhouse.io/mlu=<card id>`` (see hcs_deviceplugin/cdi)."""

    def __init__(self, config: BackendConfig, settings: CambriconSettings) -> None:
        self._config = config
        self._settings = settings
        self._discover_lock = threading.Lock()
        self._snapshot: _Snapshot | None = None
        self.link_file_error: str | None = None
        """Why the ``mluLinkFile`` was not used at the last discovery; None when it was (or is unset)."""

    # -- Backend protocol -------------------------------------------------------------------------

    def discover(self) -> Inventory:
        """Every MLU now (cards seen before and gone stay, Unhealthy); never raises for one bad card."""
        root = self._config.host_root
        with self._discover_lock:
            previous = self._snapshot
            found = discovery.discover(root, previous.known if previous else {})
            inventory = Inventory(cards=found.cards, links=self._links(found))
            card_edits = {
                k.card.id: self._card_edits(k, previous) for k in found.known.values() if k.slot is not None
            }
            self._snapshot = _Snapshot(
                inventory=inventory,
                known=found.known,
                card_edits=MappingProxyType(card_edits),
                shared=edits.shared_edits(root, self._settings.cnmon_path),
                unhealthy_at_discovery=frozenset(c.id for c in found.cards if c.health != Health.HEALTHY),
            )
        for card in inventory.cards:
            if card.health != Health.HEALTHY:
                log.warning(
                    "MLU %s (%s) is Unhealthy: %s",
                    card.id,
                    card.pci_address,
                    card.attributes.get("healthReason"),
                )
        return inventory

    def health_events(self) -> Iterator[HealthEvent | InventoryChanged]:
        """Changes from the bounded re-scan (and udev where the host has it); ends when stop is set."""
        initial = {c.id: c.health for c in self._current().inventory.cards}
        watcher = HotplugWatcher(
            self._config.host_root,
            HOTPLUG_SUBSYSTEMS,
            self._settings.rescan_seconds,
            self._config.stop,
            use_udev=self._settings.use_udev,
        )
        checker = CardChecker(self._config.host_root, self._known_now)
        return health_stream(checker.check, watcher, self._config.stop, initial, checker.new_cards)

    def container_edits(
        self, units: Sequence[Unit], options: Mapping[str, str] | None = None
    ) -> ContainerEdits:
        """Pure: from the last discovery's precomputed nodes (no file access at Allocate)."""
        snapshot = self._snapshot
        if snapshot is None:
            raise ValueError("container_edits before discover(): no MLUs are known yet")
        return edits.container_edits(units, snapshot.card_edits, snapshot.shared, self.name)

    def links(self) -> LinkMatrix:
        return self._current().inventory.links

    def partition(self, card: Card, profile: str, count: int) -> list[Partition]:
        """Not offered: MIM instances and sMLU are created and listed only through cndev."""
        raise NotSupportedError(
            f"cannot partition MLU {card.id} into {profile!r}: MIM instances and sMLU are made and listed "
            "only through Cambricon's cndev library, which this sysfs backend does not load"
        )

    # -- internals --------------------------------------------------------------------------------

    def _current(self) -> _Snapshot:
        snapshot = self._snapshot
        if snapshot is None:
            self.discover()
            snapshot = self._snapshot
            assert snapshot is not None
        return snapshot

    def _card_edits(self, known: KnownCard, previous: _Snapshot | None) -> edits.CardEdits:
        """The card's nodes as they exist now; an Unhealthy card whose slot did not change keeps the
        nodes found while it was well (a removed card's companions are gone with it, and it comes back
        with them before a re-discovery could look again)."""
        assert known.slot is not None
        kept = previous.card_edits.get(known.card.id) if previous else None
        if known.card.health != Health.HEALTHY and kept is not None and kept.slot == known.slot:
            return kept
        return edits.card_edits(self._config.host_root, known.slot)

    def _known_now(self) -> tuple[Mapping[str, KnownCard], frozenset[str]]:
        snapshot = self._current()
        return snapshot.known, snapshot.unhealthy_at_discovery

    def _links(self, found: discovery.Discovered) -> LinkMatrix:
        entries: tuple[links.LinkEntry, ...] = ()
        path = self._settings.mlu_link_file
        self.link_file_error = None
        if path is not None:
            try:
                entries = links.read_link_file(path)
            except links.LinkFileError as err:
                self.link_file_error = str(err)
                log.error("MLU-Link topology file not used: %s", err)
        return links.link_matrix(found.cards, found.functions, entries, str(path))


def create_backend(config: BackendConfig) -> CambriconBackend:
    """The entry-point factory; BackendAbsent when the node has no MLU function and no MLU driver."""
    try:
        settings = CambriconSettings.parse(config.options)
    except ValueError as err:  # a misspelt option is the operator's mistake, not missing hardware
        raise BackendOptionError(str(err)) from None
    root = config.host_root
    scan = scan_pci(root, models.CAMBRICON_VENDOR_ID)
    if not scan.functions and not scan.errors and not discovery.driver_module_loaded(root):
        raise BackendAbsent(
            f"no Cambricon PCI function (vendor 0x{models.CAMBRICON_VENDOR_ID:04x}) under "
            f"{root / PCI_DEVICES} and no MLU driver ({root / 'sys/module/cambricon_drv'} missing)"
        )
    return CambriconBackend(config, settings)
