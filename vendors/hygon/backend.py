"""The Hygon DCU backend: sysfs discovery, sysfs health with udev wake-ups, ContainerEdits.

No vendor library is loaded: everything comes from ``/sys`` and ``/dev`` under
``BackendConfig.host_root``, so ``simulate`` and the tests run it unchanged on a built tree
(:mod:`vendors.hygon.fake`). What only ``libhydmi`` offers (vDCU slicing, Hygon MIG, ECC counters,
HYSWITCH/XHCL link types) is not available: :meth:`HygonBackend.partition` says so; pools share a DCU
by time-slicing (``slicesPerUnit``), which the core does.

Options (``--backend-option hygon.<key>=<value>``; unknown keys are errors):
- ``rescanSeconds`` (5): the health re-scan interval; with udev it is the fallback bound, without it
  the bound on noticing a change.
- ``udev`` (``auto``): ``on``, ``off`` or ``auto`` (use udev when the host root is ``/`` and udevd runs).
- ``hyhalPath`` (``/opt/hyhal``): host directory bound read-only into containers at the same path when
  it exists; empty disables.
- ``updateIds`` (``<hyhalPath>/bin/update_ids``): the vendor's device-id → model override file
  (:mod:`vendors.hygon.models`); empty disables.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from hcs_deviceplugin.backend import BackendAbsent, BackendConfig, BackendOptionError
from hcs_deviceplugin.model import (
    Card,
    ContainerEdits,
    HealthEvent,
    Inventory,
    InventoryChanged,
    LinkMatrix,
    NotSupportedError,
    Partition,
    Unit,
)
from vendors.hygon import discovery, edits, health, kfd
from vendors.hygon.driver import hygon_modules_present
from vendors.hygon.health import Verdict
from vendors.hygon.models import HYGON_PCI_VENDOR, ModelTable, load_update_ids
from vendors.pcisysfs.health import health_stream
from vendors.pcisysfs.hotplug import HotplugWatcher
from vendors.pcisysfs.options import RESCAN_KEYS, parse_rescan, reject_unknown
from vendors.pcisysfs.pci import PCI_DEVICES, scan_pci

log = logging.getLogger(__name__)

OPTION_KEYS = RESCAN_KEYS | {"hyhalPath", "updateIds"}
HOTPLUG_SUBSYSTEMS = ("pci", "drm")


@dataclass(frozen=True)
class HygonSettings:
    """The backend's options, parsed and checked."""

    rescan_seconds: float = 5.0
    use_udev: bool | None = None
    hyhal_path: str = edits.DEFAULT_HYHAL
    update_ids: str = f"{edits.DEFAULT_HYHAL}/bin/update_ids"

    @staticmethod
    def parse(options: Mapping[str, str]) -> HygonSettings:
        """Unknown keys and bad values are errors: a misspelt option must not silently do nothing."""
        reject_unknown("hygon", options, OPTION_KEYS)
        rescan = parse_rescan("hygon", options)
        hyhal = options.get("hyhalPath", edits.DEFAULT_HYHAL).strip()
        default_ids = f"{hyhal.rstrip('/')}/bin/update_ids" if hyhal else ""
        return HygonSettings(
            rescan.seconds, rescan.use_udev, hyhal, options.get("updateIds", default_ids).strip()
        )


class HygonBackend:
    """Hygon DCUs from sysfs; see the module docstring."""

    name = "hygon"
    cdi_class = "dcu"
    """Our CDI specs name DCUs ``hcs.deckhouse.io/dcu=<card id>`` (see hcs_deviceplugin/cdi)."""

    def __init__(self, config: BackendConfig, settings: HygonSettings, table: ModelTable) -> None:
        self._config = config
        self._settings = settings
        self._table = table
        self._discovery_lock = threading.Lock()
        self._memory = discovery.Memory()
        self._snapshot: discovery.Discovery | None = None

    # -- Backend protocol -------------------------------------------------------------------------

    def discover(self) -> Inventory:
        """Every DCU now (and every DCU seen before that is gone, Unhealthy); never raises for one card."""
        with self._discovery_lock:
            self._snapshot = discovery.discover(
                self._config.host_root, self._table, self._settings.hyhal_path, self._memory
            )
            return self._snapshot.inventory

    def health_events(self) -> Iterator[HealthEvent | InventoryChanged]:
        """Health changes after each udev event or re-scan; InventoryChanged when a DCU appears."""
        initial = {c.id: c.health for c in self._current().inventory.cards}
        confirm = health.Confirm()

        def check() -> Mapping[str, Verdict]:
            return confirm(health.check_cards(self._config.host_root, self._current().facts.values()))

        watcher = HotplugWatcher(
            self._config.host_root,
            HOTPLUG_SUBSYSTEMS,
            self._settings.rescan_seconds,
            self._config.stop,
            use_udev=self._settings.use_udev,
        )
        return health_stream(check, watcher, self._config.stop, initial, self._stale)

    def container_edits(
        self, units: Sequence[Unit], options: Mapping[str, str] | None = None
    ) -> ContainerEdits:
        """Pure: from the last discovery only (no sysfs read on the Allocate path)."""
        snapshot = self._snapshot
        if snapshot is None:
            raise ValueError("container_edits before discover(): no Hygon DCUs are known yet")
        minors = {card_id: facts.minors for card_id, facts in snapshot.facts.items()}
        return edits.container_edits(units, minors, snapshot.shared, self.name)

    def links(self) -> LinkMatrix:
        return self._current().inventory.links

    def partition(self, card: Card, profile: str, count: int) -> list[Partition]:
        raise NotSupportedError(
            "Hygon vDCU and MIG partitions are made through libhydmi (dmiCreateVDevices, dmi_mig.h), "
            "which this sysfs backend does not load; share a DCU with a time-sliced pool instead"
        )

    def health_now(self) -> Mapping[str, Verdict]:
        """One health check pass over the last discovered cards, unconfirmed (for reports and benches)."""
        states = health.check_cards(self._config.host_root, self._current().facts.values())
        return {card_id: state.verdict for card_id, state in states.items()}

    # -- internals --------------------------------------------------------------------------------

    def _current(self) -> discovery.Discovery:
        snapshot = self._snapshot
        if snapshot is None:
            self.discover()
            snapshot = self._snapshot
        assert snapshot is not None
        return snapshot

    def _dcu_addresses(self) -> list[str]:
        root = self._config.host_root
        scan = scan_pci(root, HYGON_PCI_VENDOR)
        found = [fn.address for fn in scan.functions if discovery.is_dcu(fn, self._table)]
        found += [a for a in scan.errors if discovery.errored_is_dcu(root, a, self._table)]
        return found

    def _stale(self) -> frozenset[str]:
        snapshot = self._current()
        return health.stale_facts(
            self._config.host_root, snapshot.by_address, snapshot.shared, self._dcu_addresses
        )


def create_backend(config: BackendConfig) -> HygonBackend:
    """The backend, or BackendAbsent when the node has neither a DCU function nor a Hygon driver module."""
    try:
        settings = HygonSettings.parse(config.options)
    except ValueError as err:  # a misspelt option is the operator's mistake, not missing hardware
        raise BackendOptionError(str(err)) from None
    root = config.host_root
    table = ModelTable(load_update_ids(root / settings.update_ids.lstrip("/")) if settings.update_ids else {})
    scan = scan_pci(root, HYGON_PCI_VENDOR)
    dcus = [fn for fn in scan.functions if discovery.is_dcu(fn, table)]
    dcus_errored = [a for a in scan.errors if discovery.errored_is_dcu(root, a, table)]
    modules = hygon_modules_present(root)
    if not dcus and not dcus_errored and not modules:
        raise BackendAbsent(
            f"no Hygon DCU (PCI vendor 0x{HYGON_PCI_VENDOR:04x}, accelerator class or known device id) "
            f"under {root / PCI_DEVICES} and no hydcu/hycu module under {root / 'sys/module'}"
        )
    if not (root / kfd.KFD_CLASS).is_dir():
        log.warning(
            "Hygon: %s missing: the KFD driver is not loaded, DCUs will be Unhealthy", root / kfd.KFD_CLASS
        )
    log.info(
        "Hygon backend: %d DCU function(s), module(s) %s", len(dcus) + len(dcus_errored), modules or "none"
    )
    return HygonBackend(config, settings, table)
