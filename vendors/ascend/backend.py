"""The Ascend backend: DCMI discovery, health polling, vNPU layouts and ContainerEdits behind Backend.

It owns the loaded ``libdcmi`` (resolved symbol by symbol, :mod:`.library`), the per-chip workers that
bound every DCMI call in time (:mod:`.timeouts`), the last discovered inventory (so Allocate never calls
DCMI) and the health state the monitor reports (so ``discover()`` and the health stream agree).

Options (``BackendConfig.options``, ``--backend-option ascend.<key>=<value>``; unknown keys are errors):
- ``libraryPath``: libdcmi.so to load; default env ``HCS_DCMI_LIB``, then the driver's install paths.
- ``checkOwnership`` (false): refuse a library not owned by root or writable by group/others (MindX).
- ``callTimeoutSeconds`` (5): the bound on any single DCMI call.
- ``healthIntervalSeconds`` (5, MindX's ``listWatchPeriod`` default), ``recoverySeconds`` (0: the first
  good poll), ``ignoredFaultCodes`` (comma list; faults that never make a chip Unhealthy).
- ``useAscendDocker`` (false): env-only Allocate for nodes with Ascend Docker Runtime (pools may override).
- ``driverMounts``: comma list of host paths to bind read-only (default the driver tree, /usr/local/dcmi
  and npu-smi; empty for none); only those present on the host at discovery are mounted.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

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
from vendors.ascend import attributes as attr
from vendors.ascend import calls, discovery, edits, library, vnpu
from vendors.ascend.families import Family
from vendors.ascend.health import HealthMonitor, HealthSettings, parse_codes
from vendors.ascend.library import DcmiError, DcmiLibrary
from vendors.ascend.timeouts import NODE_KEY, CallBounds

log = logging.getLogger(__name__)

OPTION_KEYS = frozenset(
    {
        "libraryPath",
        "checkOwnership",
        "callTimeoutSeconds",
        "healthIntervalSeconds",
        "recoverySeconds",
        "ignoredFaultCodes",
        "useAscendDocker",
        "driverMounts",
    }
)


def _number(options: Mapping[str, str], key: str, default: float, minimum: float, strict: bool) -> float:
    if key not in options:
        return default
    try:
        value = float(options[key])
    except ValueError:
        raise ValueError(f"ascend option {key} must be a number, not {options[key]!r}") from None
    if value < minimum or (strict and value == minimum):
        raise ValueError(f"ascend option {key} must be {'above' if strict else 'at least'} {minimum:g}")
    return value


def _paths(key: str, text: str) -> tuple[str, ...]:
    items = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    relative = [p for p in items if not p.startswith("/")]
    if relative:
        raise ValueError(f"ascend option {key}: paths must be absolute, not {', '.join(relative)}")
    return items


@dataclass(frozen=True)
class AscendSettings:
    """The backend's options, parsed and checked."""

    library_path: str | None = None
    check_ownership: bool = False
    call_timeout: float = 5.0
    health: HealthSettings = field(default_factory=HealthSettings)
    edit_defaults: edits.EditOptions = field(default_factory=edits.EditOptions)
    driver_mounts: tuple[str, ...] = edits.DEFAULT_DRIVER_MOUNTS

    @staticmethod
    def parse(options: Mapping[str, str], environ: Mapping[str, str]) -> AscendSettings:
        """Unknown keys and bad values are errors: a misspelt option must not silently do nothing."""
        unknown = sorted(set(options) - OPTION_KEYS)
        if unknown:
            raise ValueError(
                f"unknown ascend option(s) {', '.join(unknown)}; known: {', '.join(sorted(OPTION_KEYS))}"
            )
        health = HealthSettings(
            interval=_number(options, "healthIntervalSeconds", 5.0, 0.0, strict=True),
            recovery_seconds=_number(options, "recoverySeconds", 0.0, 0.0, strict=False),
            ignored_codes=parse_codes(options.get("ignoredFaultCodes", "")),
        )
        return AscendSettings(
            library_path=options.get("libraryPath") or environ.get(library.LIBRARY_ENV) or None,
            check_ownership=edits.parse_bool("checkOwnership", options.get("checkOwnership", "false")),
            call_timeout=_number(options, "callTimeoutSeconds", 5.0, 0.0, strict=True),
            health=health,
            edit_defaults=edits.parse_edit_options(options),
            driver_mounts=_paths("driverMounts", options["driverMounts"])
            if "driverMounts" in options
            else edits.DEFAULT_DRIVER_MOUNTS,
        )


@dataclass(frozen=True)
class _Snapshot:
    inventory: Inventory
    cards: Mapping[str, Card]
    partitions: Mapping[str, Partition]
    host: edits.HostFacts
    card_ids: frozenset[int]

    @staticmethod
    def of(inventory: Inventory, host: edits.HostFacts) -> _Snapshot:
        return _Snapshot(
            inventory,
            {c.id: c for c in inventory.cards},
            {p.id: p for p in inventory.partitions},
            host,
            frozenset(int(c.attributes[attr.CARD_ID]) for c in inventory.cards),
        )


def host_facts(host_root: Path, inventory: Inventory, mounts: Sequence[str]) -> edits.HostFacts:
    """Control device nodes and driver mounts that exist under ``host_root`` (read at discovery)."""

    def present(path: str) -> bool:
        return (host_root / path.lstrip("/")).exists()

    families = {c.attributes.get(attr.FAMILY) for c in inventory.cards}
    nodes: list[tuple[str, str]] = []
    soc = Family.ASCEND310B.value in families
    for path in edits.REQUIRED_CONTROL_DEVICES:
        if soc and path == "/dev/davinci_manager" and present("/dev/davinci_manager_docker"):
            continue  # 310B: the docker variant stands in for it
        if present(path):
            nodes.append((path, path))
        elif inventory.cards:
            log.warning("host has no %s: Ascend containers will fail to open their chips", path)
    nodes += [(p, p) for p in edits.OPTIONAL_CONTROL_DEVICES if present(p)]
    if soc:
        nodes += [(h, c) for h, c in edits.SOC_310B_DEVICES if present(h)]
    return edits.HostFacts(tuple(nodes), tuple(p for p in mounts if present(p)))


class AscendBackend:
    """Huawei Ascend NPUs (one Card per chip/die) and vNPUs through DCMI."""

    name = "ascend"
    cdi_class = "npu"
    """Our CDI specs name chips and vNPUs ``hcs.deckhouse.io/npu=<id>`` (see hcs_deviceplugin/cdi)."""

    def __init__(
        self, config: BackendConfig, settings: AscendSettings, lib: DcmiLibrary, bounds: CallBounds
    ) -> None:
        self._config = config
        self._settings = settings
        self.library = lib
        self._bounds = bounds
        self._discoverer = discovery.Discoverer(lib, bounds, config.host_root)
        self._dcmi_lock = threading.Lock()  # one discovery or layout at a time
        self._state_lock = threading.Lock()
        self._snapshot: _Snapshot | None = None
        self._unhealthy: dict[str, str] = {}
        self._closed = False

    @property
    def degraded(self) -> list[str]:
        """One "missing symbol X: feature Y unavailable" line per DCMI function the library lacks."""
        return self.library.missing_report()

    def blocked_calls(self) -> dict[str, str]:
        """Chip id → the DCMI call its worker is stuck in past the bound (for reports and tests)."""
        stuck: dict[str, str] = {}
        for card in self._inventory().cards:
            call = self._bounds.stuck(discovery.ChipAddress.of(card).key)
            if call is not None:
                stuck[card.id] = f"{call.call} blocked for {call.seconds:.1f}s"
        return stuck

    # -- Backend protocol -------------------------------------------------------------------------

    def discover(self) -> Inventory:
        """Chips, vNPUs and links now; health as the monitor last reported it.

        If the card list itself fails, the previous inventory is returned with every chip Unhealthy;
        with no previous inventory the error propagates.
        """
        with self._dcmi_lock:
            previous = self._snapshot.inventory if self._snapshot else None
            try:
                found = self._discoverer.discover()
            except DcmiError as err:
                if previous is None:
                    raise
                log.warning("DCMI discovery failed (%s); reporting every Ascend chip Unhealthy", err)
                return discovery.with_health(previous, {c.id: f"DCMI failing: {err}" for c in previous.cards})
            host = host_facts(self._config.host_root, found, self._settings.driver_mounts)
            with self._state_lock:
                self._snapshot = _Snapshot.of(found, host)
                unhealthy = dict(self._unhealthy)
        return discovery.with_health(found, unhealthy)

    def health_events(self) -> Iterator[HealthEvent | InventoryChanged]:
        monitor = HealthMonitor(
            lib=self.library,
            bounds=self._bounds,
            chips=self._chips_for_health,
            known_cards=self._known_cards,
            settings=self._settings.health,
            stop=self._config.stop,
            on_change=self._health_changed,
        )
        return monitor.events()

    def container_edits(
        self, units: Sequence[Unit], options: Mapping[str, str] | None = None
    ) -> ContainerEdits:
        """Pure: answers from the last discovery; never calls DCMI (Allocate must not do I/O)."""
        snapshot = self._snapshot
        if snapshot is None:
            raise ValueError("container_edits before discover(): no Ascend chips are known yet")
        edit_options = edits.parse_edit_options(options, self._settings.edit_defaults)
        return edits.container_edits(units, snapshot.cards, snapshot.partitions, snapshot.host, edit_options)

    def cdi_edits(self, units: Sequence[Unit]) -> ContainerEdits:
        """What our CDI spec entry holds: device nodes and driver mounts even where pools rely on
        Ascend Docker Runtime (``useAscendDocker``), since a CDI pool gets nothing from that runtime."""
        snapshot = self._snapshot
        if snapshot is None:
            raise ValueError("cdi_edits before discover(): no Ascend chips are known yet")
        spec_options = edits.EditOptions(use_ascend_docker=False)
        return edits.container_edits(units, snapshot.cards, snapshot.partitions, snapshot.host, spec_options)

    def links(self) -> LinkMatrix:
        return self._inventory().links

    def partition(self, card: Card, profile: str, count: int) -> list[Partition]:
        """Lay ``card`` out as ``count`` vNPUs of template ``profile`` (see :mod:`.vnpu`)."""
        if card.backend != self.name:
            raise NotSupportedError(f"card {card.id} belongs to backend {card.backend}, not ascend")
        template = vnpu.template_for(card, profile)
        with self._dcmi_lock:
            address = discovery.ChipAddress.of(card)
            self._bounds.run(address.key, lambda: vnpu.fill_chip(self.library, card, template, count))
        inventory = self.discover()
        return [p for p in inventory.partitions if p.card_id == card.id and p.profile == profile]

    # -- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the DCMI workers (DCMI has no shutdown call; the library stays loaded)."""
        if self._closed:
            return
        self._closed = True
        self._bounds.close()

    def __enter__(self) -> AscendBackend:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------------

    def _inventory(self) -> Inventory:
        """The last discovered inventory; discover now if there is none (empty if DCMI fails)."""
        snapshot = self._snapshot
        if snapshot is not None:
            return snapshot.inventory
        try:
            return self.discover()
        except DcmiError as err:
            log.warning("Ascend discovery failed: %s", err)
            return Inventory()

    def _chips_for_health(self) -> tuple[Card, ...]:
        """The chips to poll, with the health already reported, so a new stream starts where we are."""
        inventory = self._inventory()
        with self._state_lock:
            unhealthy = dict(self._unhealthy)
        return discovery.with_health(inventory, unhealthy).cards

    def _known_cards(self) -> frozenset[int]:
        snapshot = self._snapshot
        return snapshot.card_ids if snapshot is not None else frozenset()

    def _health_changed(self, chip_id: str, reason: str | None) -> None:
        with self._state_lock:
            if reason is None:
                self._unhealthy.pop(chip_id, None)
            else:
                self._unhealthy[chip_id] = reason


def create_backend(config: BackendConfig) -> AscendBackend:
    """Load libdcmi and run ``dcmi_init`` (bounded); BackendAbsent with the reason when either fails."""
    try:
        settings = AscendSettings.parse(config.options, os.environ)
    except ValueError as err:  # a misspelt option is the operator's mistake, not missing hardware
        raise BackendOptionError(str(err)) from None
    paths = library.candidates(settings.library_path, os.environ, config.host_root)
    try:
        lib = library.load(paths, settings.check_ownership)
    except library.LibraryUnavailable as err:
        raise BackendAbsent(str(err)) from None
    bounds = CallBounds(settings.call_timeout)
    try:
        bounds.run(NODE_KEY, lambda: calls.init(lib))
    except DcmiError as err:
        bounds.close()
        raise BackendAbsent(f"dcmi_init failed with {lib.path}: {err}") from None
    backend = AscendBackend(config, settings, lib, bounds)
    log.info("Ascend backend using %s", lib.path)
    for line in backend.degraded:
        log.warning("Ascend backend degraded: %s", line)
    return backend
