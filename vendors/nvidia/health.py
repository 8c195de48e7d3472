"""Health: the NVML event loop, turned into two-way HealthEvents.

Follows NVIDIA's checker (nvidia.md §3.8) where it is right and departs where its issues show it is
wrong (§4):
- events are registered on parent handles (Xid | single/double-bit ECC, masked by what the card
  supports); only Xid events act, application Xids (13, 31, 43, 45, 68, 109) are ignored, and
  ``DP_DISABLE_HEALTHCHECKS`` / ``DP_ENABLE_HEALTHCHECKS`` keep their meaning;
- an Xid carrying a GPU- and compute-instance id marks only that MIG device; otherwise the card
  (and with it all its MIG devices);
- unlike upstream, a device recovers: after ``recovery_seconds`` without a critical event it is
  probed (its UUID read back through NVML) and reported Healthy again if it answers;
- unlike upstream, a failing wait is not retried at once: cards that no longer answer are marked
  Unhealthy, and if none answers the library is considered down - every card Unhealthy, the event
  set is rebuilt after an exponential back-off - so a sick driver cannot spin a core.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import Card, Health, HealthEvent, Inventory
from vendors.nvidia import attributes as attr
from vendors.nvidia import nvml

log = logging.getLogger(__name__)

DEFAULT_IGNORED_XIDS = frozenset({13, 31, 43, 45, 68, 109})
WATCHED_EVENTS = nvml.EVENT_XID_CRITICAL | nvml.EVENT_DOUBLE_BIT_ECC | nvml.EVENT_SINGLE_BIT_ECC


def _xid_list(text: str) -> frozenset[int]:
    """Comma list of Xids; malformed entries are ignored, as upstream does."""
    found = set()
    for item in text.split(","):
        try:
            found.add(int(item.strip()))
        except ValueError:
            continue
    return frozenset(found)


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: the monitor asks is_critical
class XidPolicy:
    """Which Xids make a device Unhealthy."""

    ignored: frozenset[int] = DEFAULT_IGNORED_XIDS
    forced: frozenset[int] = frozenset()
    all_disabled: bool = False

    def is_critical(self, xid: int) -> bool:
        if xid in self.forced:
            return True
        return not self.all_disabled and xid not in self.ignored

    @property
    def watches_nothing(self) -> bool:
        return self.all_disabled and not self.forced

    @staticmethod
    def parse(ignored: str | None = None, disable: str | None = None, enable: str | None = None) -> XidPolicy:
        """``ignored`` replaces the default list; ``disable``/``enable`` mean DP_DISABLE/ENABLE_HEALTHCHECKS.

        ``disable``: ``all`` or ``xids`` turns Xid checks off, otherwise its Xids are ignored too.
        ``enable``: Xids that always count, overriding both the ignore list and ``all``.
        """
        base = DEFAULT_IGNORED_XIDS if ignored is None else _xid_list(ignored)
        all_disabled = False
        extra: frozenset[int] = frozenset()
        if disable:
            words = {w.strip().lower() for w in disable.split(",")}
            all_disabled = bool(words & {"all", "xids"})
            extra = _xid_list(disable)
        return XidPolicy(ignored=base | extra, forced=_xid_list(enable or ""), all_disabled=all_disabled)


@dataclass(eq=False, repr=False)  # never compared or logged: less to compile at start
class _Bad:
    """One Unhealthy device: why, when it was last seen bad, and when to probe it next."""

    card_id: str
    reason: str
    last_bad: float
    probe_at: float


@dataclass(eq=False, repr=False)  # never compared or logged: less to compile at start
class RecoveryTracker:
    """Devices currently Unhealthy, when they were last seen bad, and when to probe them next."""

    recovery_seconds: float
    retry_seconds: float
    bad: dict[str, _Bad] = field(default_factory=dict)

    def mark(self, device_id: str, card_id: str, reason: str, now: float) -> bool:
        """Record a bad sighting; True when the device was Healthy until now."""
        entry = self.bad.get(device_id)
        probe_at = now + self.recovery_seconds
        if entry is None:
            self.bad[device_id] = _Bad(card_id, reason, now, probe_at)
            return True
        entry.last_bad, entry.probe_at, entry.reason = now, probe_at, reason
        return False

    def due(self, now: float) -> list[tuple[str, str]]:
        """(device, card) pairs whose quiet time is over and whose probe is due."""
        if self.recovery_seconds < 0:
            return []
        return [(d, e.card_id) for d, e in self.bad.items() if now >= e.probe_at]

    def probe_failed(self, device_id: str, now: float) -> None:
        self.bad[device_id].probe_at = now + self.retry_seconds

    def clear(self, device_id: str) -> None:
        self.bad.pop(device_id, None)

    def seconds_to_next_probe(self, now: float) -> float | None:
        if self.recovery_seconds < 0 or not self.bad:
            return None
        return max(0.0, min(e.probe_at for e in self.bad.values()) - now)


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class HealthSettings:
    """The health options of ``--backend-option nvidia.*`` (see the backend's module doc)."""

    policy: XidPolicy = field(default_factory=XidPolicy)
    recovery_seconds: float = 60.0  # negative: never recover (upstream behaviour)
    wait_ms: int = 1000  # longest single nvmlEventSetWait; bounds how late ``stop`` is noticed
    backoff_seconds: float = 1.0
    backoff_max_seconds: float = 30.0


@dataclass(eq=False, repr=False)  # never compared or logged: less to compile at start
class _Session:
    """One nvmlInit reference, its event set and the cards registered on it."""

    event_set: nvml.EventSet
    by_address: dict[int, Card] = field(default_factory=dict)
    registered: set[str] = field(default_factory=set)  # events registered, or none to register
    failing: set[str] = field(default_factory=set)  # registration failed; retried every loop


class HealthMonitor:
    """Runs the event loop for the cards ``inventory()`` returns; :meth:`events` is the blocking stream.

    ``on_change(device_id, reason or None)`` is told every transition so the backend can report the
    same health from ``discover()``.
    """

    def __init__(
        self,
        inventory: Callable[[], Inventory],
        settings: HealthSettings,
        stop: threading.Event,
        on_change: Callable[[str, str | None], None] = lambda _d, _r: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inventory = inventory
        self._settings = settings
        self._stop = stop
        self._on_change = on_change
        self._clock = clock
        retry = max(settings.wait_ms / 1000.0, 0.05)
        self._tracker = RecoveryTracker(settings.recovery_seconds, retry)
        self._backoff = settings.backoff_seconds

    def events(self) -> Iterator[HealthEvent]:
        if self._settings.policy.watches_nothing:
            log.info("NVIDIA Xid health checks disabled; health stream idle")
            self._stop.wait()
            return
        session: _Session | None = None
        try:
            while not self._stop.is_set():
                if session is None:
                    try:
                        session = self._open()
                    except nvml.NvmlError as err:
                        yield from self._library_down(f"NVML unavailable: {err}")
                        self._back_off()
                        continue
                yield from self._register(session)
                yield from self._recoveries()
                try:
                    data = nvml.event_set_wait(session.event_set, self._wait_ms())
                except nvml.NvmlError as err:
                    if err.code == nvml.ERROR_TIMEOUT:
                        self._backoff = self._settings.backoff_seconds
                        continue
                    alive = yield from self._after_wait_error(err)
                    if not alive:
                        self._close(session)
                        session = None
                    self._back_off()
                    continue
                self._backoff = self._settings.backoff_seconds
                yield from self._handle(session, data)
        finally:
            if session is not None:
                self._close(session)

    # -- session ----------------------------------------------------------------------------------

    def _open(self) -> _Session:
        nvml.init()
        try:
            return _Session(nvml.event_set_create())
        except nvml.NvmlError:
            nvml.shutdown()
            raise

    def _register(self, session: _Session) -> Iterator[HealthEvent]:
        """Register every card not yet registered: new cards, and cards that failed to register before."""
        for card in self._inventory().cards:
            if card.id in session.registered:
                continue
            try:
                handle = nvml.handle_by_uuid(card.id)
                session.by_address[nvml.address(handle)] = card
                mask = WATCHED_EVENTS & self._supported(handle)
                if mask:
                    nvml.register_events(handle, mask, session.event_set)
                else:
                    log.warning("card %s reports no health events; relying on probes only", card.id)
            except nvml.NvmlError as err:
                if not err.unsupported:
                    if card.id not in session.failing:
                        log.warning("card %s: event registration failed: %s", card.id, err)
                        session.failing.add(card.id)
                    event = self._mark(card.id, card.id, f"NVML event registration failed: {err}")
                    if event is not None:
                        yield event
                    continue
                # As upstream (PR #1562): a card too old for events is not unhealthy, just unwatched.
                log.warning("card %s: cannot register health events (%s); relying on probes", card.id, err)
            session.registered.add(card.id)
            session.failing.discard(card.id)

    @staticmethod
    def _supported(handle: nvml.Device) -> int:
        try:
            return nvml.supported_event_types(handle)
        except nvml.NvmlError as err:
            if err.unsupported:
                return WATCHED_EVENTS  # old library without the query: try to register anyway
            raise

    @staticmethod
    def _close(session: _Session) -> None:
        try:
            nvml.event_set_free(session.event_set)
        except nvml.NvmlError as err:
            log.debug("freeing the NVML event set: %s", err)
        try:
            nvml.shutdown()
        except nvml.NvmlError as err:
            log.debug("releasing the health session's NVML reference: %s", err)

    def _back_off(self) -> None:
        self._stop.wait(self._backoff)
        self._backoff = min(self._backoff * 2, self._settings.backoff_max_seconds)

    def _wait_ms(self) -> int:
        wait = self._settings.wait_ms
        next_probe = self._tracker.seconds_to_next_probe(self._clock())
        if next_probe is not None:
            wait = min(wait, int(next_probe * 1000) + 1)
        return max(wait, 1)

    # -- transitions ------------------------------------------------------------------------------

    def _mark(self, device_id: str, card_id: str, reason: str) -> HealthEvent | None:
        if not self._tracker.mark(device_id, card_id, reason, self._clock()):
            return None
        log.warning("NVIDIA device %s Unhealthy: %s", device_id, reason)
        self._on_change(device_id, reason)
        return HealthEvent(device_id, Health.UNHEALTHY, reason)

    def _library_down(self, reason: str) -> Iterator[HealthEvent]:
        for card in self._inventory().cards:
            event = self._mark(card.id, card.id, reason)
            if event is not None:
                yield event

    def _after_wait_error(self, err: nvml.NvmlError) -> Generator[HealthEvent, None, bool]:
        """Find out who is sick after a failed wait; returns whether any card still answers."""
        answering = 0
        for card in self._inventory().cards:
            try:
                self._probe(card.id)
                answering += 1
            except nvml.NvmlError as probe_err:
                event = self._mark(card.id, card.id, f"NVML: {probe_err}")
                if event is not None:
                    yield event
        if answering == 0:
            log.warning("NVML event wait failed (%s) and no card answers; treating NVML as down", err)
        return answering > 0

    @staticmethod
    def _probe(card_id: str) -> None:
        if nvml.uuid(nvml.handle_by_uuid(card_id)) != card_id:
            raise nvml.NvmlError(nvml.ERROR_UNKNOWN, "card answers with another UUID", "probe")

    def _recoveries(self) -> Iterator[HealthEvent]:
        now = self._clock()
        for device_id, card_id in self._tracker.due(now):
            try:
                self._probe(card_id)
                if device_id != card_id:
                    nvml.handle_by_uuid(device_id)  # the MIG device must still exist too
            except nvml.NvmlError as err:
                log.debug("device %s still not answering: %s", device_id, err)
                self._tracker.probe_failed(device_id, now)
                continue
            self._tracker.clear(device_id)
            reason = f"no critical event for {self._settings.recovery_seconds:g}s and NVML answers"
            log.info("NVIDIA device %s Healthy again: %s", device_id, reason)
            self._on_change(device_id, None)
            yield HealthEvent(device_id, Health.HEALTHY, reason)

    def _handle(self, session: _Session, data: nvml.EventData) -> Iterator[HealthEvent]:
        if not data.event_type & nvml.EVENT_XID_CRITICAL:
            log.info("skipping non-Xid NVML event 0x%x (data %d)", data.event_type, data.event_data)
            return
        card = session.by_address.get(data.device)
        if card is None:
            log.info("Xid %d on a device we do not serve; ignored", data.event_data)
            return
        xid = data.event_data
        if not self._settings.policy.is_critical(xid):
            log.info("Xid %d on %s is an application error; ignored", xid, card.id)
            return
        target = card.id
        if nvml.NO_INSTANCE not in (data.gpu_instance_id, data.compute_instance_id):
            target = self._mig_device(card.id, data.gpu_instance_id, data.compute_instance_id) or card.id
        event = self._mark(target, card.id, f"critical Xid {xid}")
        if event is not None:
            yield event

    def _mig_device(self, card_id: str, gi: int, ci: int) -> str | None:
        for part in self._inventory().partitions:
            a = part.attributes
            if (
                part.card_id == card_id
                and a.get(attr.GPU_INSTANCE_ID) == str(gi)
                and a.get(attr.COMPUTE_INSTANCE_ID) == str(ci)
            ):
                return part.id
        return None
