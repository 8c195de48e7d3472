"""The NVIDIA backend: NVML discovery, health, MIG layouts and ContainerEdits behind the Backend protocol.

It owns one NVML reference for its lifetime (taken in :func:`create_backend`, released by
:meth:`NvidiaBackend.close`), the last discovered inventory (so Allocate never calls NVML) and the
health state the monitor reports (so ``discover()`` and the health stream agree).

Options (``BackendConfig.options``; unknown keys are errors):
- ``library``: libnvidia-ml path; default env ``HCS_NVML_LIB``, else the loader's search, then the
  driver folders under ``host_root``.
- ``deviceListStrategy``, ``deviceIDStrategy``, ``passDeviceSpecs``, ``devRoot``, ``cdiAnnotationPrefix``,
  ``cdiKind``, ``migStrategy``: Allocate defaults (:mod:`vendors.nvidia.edits`); pool options override.
- ``ignoredXids``: Xids that never make a card Unhealthy; replaces the default 13,31,43,45,68,109.
- ``disableHealthChecks`` / ``enableHealthChecks``: default env ``DP_DISABLE_HEALTHCHECKS`` /
  ``DP_ENABLE_HEALTHCHECKS``, with upstream's meaning.
- ``recoverySeconds`` (60): quiet time before a device is probed and reported Healthy; negative: never.
- ``healthWaitMs`` (1000): the longest event wait, so the bound on noticing ``stop``.
- ``retryBackoffSeconds`` / ``retryBackoffMaxSeconds`` (1 / 30): back-off while NVML fails.
- ``mpsControl``, ``mpsRoot`` (``/run/nvidia/mps``), ``mpsCheckSeconds`` (1), ``mpsRetrySeconds`` (5): the
  MPS control daemons of cards in pools with ``sharing: mps`` (:mod:`vendors.nvidia.mps`).

Sharing: ``mps`` (``sharing_modes``). ``configure_sharing`` hands the cards to the MPS supervisor; a
card whose control daemon is starting, dead or failing is Unhealthy through the same health stream as
NVML's events, and Allocate on an MPS pool adds what an MPS client needs.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING

from hcs_deviceplugin.backend import BackendAbsent, BackendConfig, BackendOptionError
from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import (
    SHARING_OPTION,
    Card,
    ContainerEdits,
    Health,
    HealthEvent,
    Inventory,
    LinkMatrix,
    NotSupportedError,
    Partition,
    SharingRequest,
    Unit,
)
from vendors.nvidia import discovery, edits, nvml
from vendors.nvidia.health import HealthMonitor, HealthSettings, XidPolicy
from vendors.nvidia.mpssettings import DEFAULT_ROOT as MPS_DEFAULT_ROOT
from vendors.nvidia.mpssettings import MODE as MPS_MODE
from vendors.nvidia.mpssettings import MpsSettings

if TYPE_CHECKING:
    from vendors.nvidia.mps import MpsSupervisor

log = logging.getLogger(__name__)

LIBRARY_ENV = "HCS_NVML_LIB"
_EDIT_KEYS = frozenset(
    {
        "deviceListStrategy",
        "deviceIDStrategy",
        "passDeviceSpecs",
        "devRoot",
        "cdiAnnotationPrefix",
        "cdiKind",
        "migStrategy",
    }
)
_HEALTH_KEYS = frozenset(
    {
        "ignoredXids",
        "disableHealthChecks",
        "enableHealthChecks",
        "recoverySeconds",
        "healthWaitMs",
        "retryBackoffSeconds",
        "retryBackoffMaxSeconds",
    }
)
_MPS_KEYS = frozenset({"mpsControl", "mpsRoot", "mpsCheckSeconds", "mpsRetrySeconds"})
OPTION_KEYS = frozenset({"library"}) | _EDIT_KEYS | _HEALTH_KEYS | _MPS_KEYS


def _number(options: Mapping[str, str], key: str, default: float) -> float:
    if key not in options:
        return default
    try:
        return float(options[key])
    except ValueError:
        raise ValueError(f"nvidia option {key} must be a number, not {options[key]!r}") from None


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class NvidiaSettings:
    """The backend's options (``--backend-option nvidia.<key>=<value>``), parsed and checked."""

    library: str | None = None
    edit_defaults: edits.EditOptions = field(default_factory=edits.EditOptions)
    health: HealthSettings = field(default_factory=HealthSettings)
    mps: MpsSettings = field(default_factory=MpsSettings)

    @staticmethod
    def parse(options: Mapping[str, str], environ: Mapping[str, str]) -> NvidiaSettings:
        """Unknown keys and bad values are errors: a misspelt option must not silently do nothing."""
        unknown = sorted(set(options) - OPTION_KEYS)
        if unknown:
            raise ValueError(
                f"unknown nvidia option(s) {', '.join(unknown)}; known: {', '.join(sorted(OPTION_KEYS))}"
            )
        policy = XidPolicy.parse(
            ignored=options.get("ignoredXids"),
            disable=options.get("disableHealthChecks", environ.get("DP_DISABLE_HEALTHCHECKS")),
            enable=options.get("enableHealthChecks", environ.get("DP_ENABLE_HEALTHCHECKS")),
        )
        health = HealthSettings(
            policy=policy,
            recovery_seconds=_number(options, "recoverySeconds", 60.0),
            wait_ms=int(_number(options, "healthWaitMs", 1000)),
            backoff_seconds=_number(options, "retryBackoffSeconds", 1.0),
            backoff_max_seconds=_number(options, "retryBackoffMaxSeconds", 30.0),
        )
        return NvidiaSettings(
            library=options.get("library") or environ.get(LIBRARY_ENV) or None,
            edit_defaults=edits.parse_edit_options({k: v for k, v in options.items() if k in _EDIT_KEYS}),
            health=health,
            mps=MpsSettings(
                control=options.get("mpsControl") or None,
                root=options.get("mpsRoot") or MPS_DEFAULT_ROOT,
                check_seconds=_number(options, "mpsCheckSeconds", 1.0),
                retry_seconds=_number(options, "mpsRetrySeconds", 5.0),
            ),
        )


@dataclass(
    frozen=True, eq=False, repr=False
)  # never compared or logged: no __eq__/__hash__/__repr__ to compile at start
class _Snapshot:
    """The last discovery, indexed for Allocate (which reads it without a lock)."""

    inventory: Inventory
    cards: Mapping[str, Card]
    partitions: Mapping[str, Partition]

    @staticmethod
    def of(inventory: Inventory) -> _Snapshot:
        return _Snapshot(
            inventory, {c.id: c for c in inventory.cards}, {p.id: p for p in inventory.partitions}
        )


class NvidiaBackend:
    """NVIDIA GPUs and MIG devices through NVML (pynvml)."""

    name = "nvidia"
    cdi_class = "gpu"
    """Our CDI specs name these devices ``hcs.deckhouse.io/gpu=<UUID>`` (see hcs_deviceplugin/cdi)."""
    sharing_modes = frozenset({MPS_MODE})

    def __init__(self, config: BackendConfig, settings: NvidiaSettings, library: str) -> None:
        self._config = config
        self._settings = settings
        self.library = library
        self._nvml_lock = threading.Lock()  # one discovery or partition at a time
        self._state_lock = threading.Lock()
        self._snapshot: _Snapshot | None = None
        self._unhealthy: dict[str, str] = {}
        self._mps_unhealthy: dict[str, str] = {}
        self._sink: queue.Queue[HealthEvent | None] | None = None
        self._closed = False
        self._mps: MpsSupervisor | None = None  # started by the first card to share by MPS

    # -- Backend protocol -------------------------------------------------------------------------

    def discover(self) -> Inventory:
        """Cards, MIG devices and links now; health as the monitor last reported it.

        If NVML itself fails, the previous inventory is returned with every card Unhealthy; with no
        previous inventory the error propagates.
        """
        with self._nvml_lock:
            previous = self._snapshot.inventory if self._snapshot else None
            try:
                found = discovery.discover(self._config.host_root, previous)
            except nvml.NvmlError as err:
                if previous is None:
                    raise
                log.warning("NVML discovery failed (%s); reporting every NVIDIA card Unhealthy", err)
                everything = {c.id: f"NVML failing: {err}" for c in previous.cards}
                return discovery.with_health(previous, everything)
            with self._state_lock:
                self._snapshot = _Snapshot.of(found)
                unhealthy = {**self._mps_unhealthy, **self._unhealthy}
        return discovery.with_health(found, unhealthy)

    def health_events(self) -> Iterator[HealthEvent]:
        """NVML's events (:class:`HealthMonitor`, on a thread of its own) and the MPS supervisor's, as
        one stream; it ends when the monitor does (on ``stop``)."""
        monitor = HealthMonitor(
            self._inventory, self._settings.health, self._config.stop, self._health_changed
        )
        sink: queue.Queue[HealthEvent | None] = queue.Queue()

        def pump() -> None:
            try:
                for event in monitor.events():
                    with self._state_lock:
                        mps_down = self._mps_unhealthy.get(event.device_id)
                    if event.health is Health.HEALTHY and mps_down is not None:
                        log.info("card %s answers NVML again; still Unhealthy: %s", event.device_id, mps_down)
                        continue  # the MPS verdict stands until the supervisor lifts it
                    sink.put(event)
            finally:
                sink.put(None)

        with self._state_lock:
            self._sink = sink
            pending = [HealthEvent(card, Health.UNHEALTHY, why) for card, why in self._mps_unhealthy.items()]
        for event in pending:
            sink.put(event)
        threading.Thread(target=pump, name="nvidia-health", daemon=True).start()
        return self._drain(sink)

    @staticmethod
    def _drain(sink: queue.Queue[HealthEvent | None]) -> Iterator[HealthEvent]:
        while (event := sink.get()) is not None:
            yield event

    def configure_sharing(self, requests: Mapping[str, SharingRequest]) -> None:
        """Cards to share by MPS now (the core's :class:`SharingRequest`); returns at once.

        The supervisor (and :mod:`vendors.nvidia.mps`) is created for the first MPS request; until
        then there is no control daemon to start or quit. The core calls this from its one control
        thread only."""
        if self._mps is None:
            if not any(r.mode == MPS_MODE for r in requests.values()):
                return
            from vendors.nvidia.mps import MpsSupervisor

            self._mps = MpsSupervisor(
                self._settings.mps,
                self._config.host_root,
                lambda: self._snapshot.cards if self._snapshot else {},
                self._mps_health,
                self._config.stop,
            )
        self._mps.configure(requests)

    def container_edits(
        self, units: Sequence[Unit], options: Mapping[str, str] | None = None
    ) -> ContainerEdits:
        """Pure: answers from the last discovery; never calls NVML (Allocate must not do I/O)."""
        snapshot = self._snapshot
        if snapshot is None:
            raise ValueError("container_edits before discover(): no NVIDIA cards are known yet")
        edit_options = edits.parse_edit_options(options, self._settings.edit_defaults)
        result = edits.container_edits(units, snapshot.cards, snapshot.partitions, edit_options)
        if options is not None and options.get(SHARING_OPTION) == MPS_MODE:
            result = result.merged(self._mps_edits(units))
        return result

    def _mps_edits(self, units: Sequence[Unit]) -> ContainerEdits:
        """An MPS client's env and mounts (:class:`mps.MpsClient`); refused while a daemon is not up."""
        merged = ContainerEdits()
        supervisor = self._mps
        for card_id in dict.fromkeys(u.card_id for u in units):
            client = supervisor.client(card_id) if supervisor is not None else None
            if client is None:
                raise ValueError(f"card {card_id}: its MPS control daemon is not running")
            merged = merged.merged(ContainerEdits(env=client.env(), mounts=client.mounts()))
        return merged

    def cdi_edits(self, units: Sequence[Unit]) -> ContainerEdits:
        """What our CDI spec entry of a GPU or MIG device holds: its device nodes, whatever a pool's
        or the backend's delivery options say (the spec must be complete for any pool that names it)."""
        snapshot = self._snapshot
        if snapshot is None:
            raise ValueError("cdi_edits before discover(): no NVIDIA cards are known yet")
        spec_options = edits.spec_edit_options(self._settings.edit_defaults)
        return edits.container_edits(units, snapshot.cards, snapshot.partitions, spec_options)

    def links(self) -> LinkMatrix:
        return self._inventory().links

    def partition(self, card: Card, profile: str, count: int) -> list[Partition]:
        """Fill ``card`` with ``count`` MIG devices of ``profile`` (see :func:`mig.fill_card`)."""
        if card.backend != self.name:
            raise NotSupportedError(f"card {card.id} belongs to backend {card.backend}, not nvidia")
        from vendors.nvidia import mig  # loaded by the first layout, not by every start

        with self._nvml_lock:
            mig.fill_card(card, profile, count)
        inventory = self.discover()
        return [p for p in inventory.partitions if p.card_id == card.id and p.profile == profile]

    # -- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Release this backend's NVML reference (the library stays loaded, as pynvml does)."""
        if self._closed:
            return
        self._closed = True
        try:
            nvml.shutdown()
        except nvml.NvmlError as err:
            log.debug("nvmlShutdown: %s", err)

    def __enter__(self) -> NvidiaBackend:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------------

    def _inventory(self) -> Inventory:
        """The last discovered inventory; discover now if there is none (empty if NVML fails)."""
        snapshot = self._snapshot
        if snapshot is not None:
            return snapshot.inventory
        try:
            return self.discover()
        except nvml.NvmlError as err:
            log.warning("NVIDIA discovery failed: %s", err)
            return Inventory()

    def _mps_health(self, card_id: str, reason: str | None) -> None:
        """The MPS supervisor's verdict on a card: an event on the health stream when it changes."""
        with self._state_lock:
            if self._mps_unhealthy.get(card_id) == reason or (
                reason is None and card_id not in self._mps_unhealthy
            ):
                return
            if reason is None:
                del self._mps_unhealthy[card_id]
                health = Health.HEALTHY if card_id not in self._unhealthy else None
            else:
                self._mps_unhealthy[card_id] = reason
                health = Health.UNHEALTHY
            sink = self._sink
        if health is not None and sink is not None:
            sink.put(HealthEvent(card_id, health, reason or "MPS control daemon running"))

    def _health_changed(self, device_id: str, reason: str | None) -> None:
        with self._state_lock:
            if reason is None:
                self._unhealthy.pop(device_id, None)
            else:
                self._unhealthy[device_id] = reason


def create_backend(config: BackendConfig) -> NvidiaBackend:
    """Load and initialise NVML; BackendAbsent (with the reason) when the library or driver is missing."""
    try:
        settings = NvidiaSettings.parse(config.options, os.environ)
    except ValueError as err:  # a misspelt option is the operator's mistake, not missing hardware
        raise BackendOptionError(str(err)) from None
    try:
        library = nvml.open_library(settings.library, config.host_root)
    except nvml.LibraryUnavailable as err:
        raise BackendAbsent(str(err)) from None
    backend = NvidiaBackend(config, settings, library)
    log.info("NVIDIA backend using %s", library)
    return backend
