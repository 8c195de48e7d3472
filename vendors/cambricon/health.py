"""Health and hotplug of MLUs: the per-card check the shared health stream calls, and what is new.

The MLU driver has no health event to subscribe to, and cndev's health calls are library-only, so
health is what sysfs, procfs and /dev say when we look (:func:`probe.probe_function`). The shared
:func:`vendors.pcisysfs.health.health_stream` looks whenever the :class:`HotplugWatcher` wakes: a udev
add/remove/change on the ``pci`` subsystem or the ``cambricon`` class where the host has udev, and a
re-scan every ``rescanSeconds`` always (``core_state`` lives in procfs, which udev never reports).

A card that disappears, unbinds or leaves ``CN_RUNNING`` goes Unhealthy with the reason and comes back
Healthy when it returns, with the same id. Discovery is asked again (``InventoryChanged``) when:
- an MLU function appears that no discovery has seen (hot-add);
- a card's ``cambricon_dev<N>`` now has another N than the one Allocate would hand out;
- a card with an id from its PCI address only has a readable board serial now;
- a card that was not Healthy at discovery is Healthy now: its companion device nodes, and the shared
  ones, were looked up while they may have been missing, and Allocate must hand out the real set.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from hcs_deviceplugin.model import Health
from vendors.cambricon import classdev, models, procfs
from vendors.cambricon.discovery import KnownCard
from vendors.cambricon.probe import probe_function
from vendors.pcisysfs.files import SysfsFileError, read_int
from vendors.pcisysfs.pci import PCI_DEVICES

log = logging.getLogger(__name__)


def _is_new_mlu(host_root: Path, bdf: str) -> bool:
    """Whether an unknown function is an MLU card by the discovery rules (vendor, class, no physfn)."""
    directory = host_root / PCI_DEVICES / bdf
    try:
        if read_int(directory / "vendor", 16) != models.CAMBRICON_VENDOR_ID:
            return False
        if (directory / "physfn").is_symlink():
            return False
        return (read_int(directory / "class", 16) >> 16) & 0xFF == models.PROCESSING_ACCELERATOR_CLASS
    except SysfsFileError:
        return False


class CardChecker:
    """Answers "how is every known card now" and "does discovery need to run again".

    ``known`` returns the backend's current known-card table (BDF -> :class:`KnownCard`) and the ids of
    cards that were not Healthy at the last discovery; it is called on every wake so that ids and
    slots from a rediscovery are used at once. :meth:`check` records what :meth:`new_cards` reports,
    so one wake reads every file once.
    """

    def __init__(
        self, host_root: Path, known: Callable[[], tuple[Mapping[str, KnownCard], frozenset[str]]]
    ) -> None:
        self._host_root = host_root
        self._known = known
        self._drift: tuple[str, ...] = ()
        self._logged: tuple[str, ...] = ()

    def check(self) -> dict[str, tuple[Health, str]]:
        table, unhealthy_at_discovery = self._known()
        slots = classdev.slot_map(self._host_root)
        result: dict[str, tuple[Health, str]] = {}
        drift: list[str] = []
        for bdf, known in table.items():
            state = probe_function(self._host_root, bdf, slots)
            card_id = known.card.id
            if state.healthy:
                result[card_id] = (Health.HEALTHY, f"PCI function {bdf} is {procfs.RUNNING}")
                if card_id in unhealthy_at_discovery:
                    drift.append(f"{card_id} is Healthy again; its device nodes are looked up anew")
            else:
                result[card_id] = (Health.UNHEALTHY, state.reason)
            if state.slot is not None and state.slot != known.slot:
                drift.append(f"{bdf} is {classdev.CARD_NODE_PREFIX}{state.slot} now, not {known.slot}")
            info = state.information
            if known.provisional and info is not None and info.board_serial is not None:
                drift.append(f"{bdf} has a board serial now")
        drift.extend(f"new MLU function {bdf}" for bdf in self._unknown_functions(table))
        self._drift = tuple(drift)
        return result

    def _unknown_functions(self, table: Mapping[str, KnownCard]) -> list[str]:
        try:
            entries = os.listdir(self._host_root / PCI_DEVICES)
        except OSError:
            return []
        return sorted(b for b in entries if b.lower() not in table and _is_new_mlu(self._host_root, b))

    def new_cards(self) -> frozenset[str]:
        """What the last :meth:`check` found that only a new discovery can take in, one line per fact."""
        if self._drift and self._drift != self._logged:
            log.info("MLU inventory changed: %s", "; ".join(self._drift))
        self._logged = self._drift
        return frozenset(self._drift)
