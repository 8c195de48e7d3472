"""Health: polling every chip with the real DCMI calls, turned into two-way HealthEvents (§5.3).

Each chip is polled on its own worker every ``interval`` seconds with ``dcmi_get_device_health``, and,
when that is not 0, ``dcmi_get_device_errorcode_v2`` for the fault codes (diagnostics, and the
allow-list). The policy, as §5.3 recommends:

- health 0 → Healthy; 1 (minor alarm) → Healthy, logged; 2/3 (major/critical), 0xFFFFFFFF (absent) or
  any other value (HAMi#9 saw 4) → Unhealthy - unless every active fault code is on the
  ``ignoredFaultCodes`` allow-list (MindX's NotHandleFault);
- the call itself failing → Unhealthy for that chip only; -8012 means the card dropped (MindX adds the
  synthetic fault 0x40F84E00, and so does the reason here);
- a call past ``callTimeoutSeconds`` → Unhealthy "DCMI call X timed out after Ys", until the chip's
  worker comes back: other chips keep being polled on their own workers meanwhile;
- every reading is recomputed from live state, so a chip comes back Healthy on the first good poll
  (or after ``recoverySeconds`` of good polls), with no latch (HAMi's bug, §7);
- when every chip fails with -8005/-8012 the library is re-initialised (``dcmi_init``), at most once
  per ten intervals;
- a card id the last discovery did not know appearing in the card list yields ``InventoryChanged``.

Events are yielded on change only, as soon as the chip's reading arrives (not at the end of a round).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from hcs_deviceplugin.model import Card, Health, HealthEvent, InventoryChanged
from vendors.ascend import abi, calls
from vendors.ascend import attributes as attr
from vendors.ascend.library import DcmiError, DcmiLibrary
from vendors.ascend.timeouts import NODE_KEY, CallBounds, CallTimedOut, Job, chip_key

log = logging.getLogger(__name__)

STOP_POLL_SECONDS = 0.1
REINIT_CODES = frozenset({abi.ERR_INNER_ERR, abi.ERR_NOT_READY})
REINIT_EVERY_INTERVALS = 10


def parse_codes(text: str) -> frozenset[int]:
    """Comma list of fault codes, hex (``0x80C98000``) or decimal; a bad entry is an error."""
    found: set[int] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        try:
            found.add(int(item, 0))
        except ValueError:
            raise ValueError(f"ignoredFaultCodes: {item!r} is not a number (hex 0x... or decimal)") from None
    return frozenset(found)


@dataclass(frozen=True)
class HealthSettings:
    interval: float = 5.0
    recovery_seconds: float = 0.0
    ignored_codes: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Reading:
    """One poll of one chip: the health value or the error, and the active fault codes."""

    value: int | None = None
    error: DcmiError | None = None
    codes: tuple[int, ...] = ()


def _hex(codes: Sequence[int]) -> str:
    return ",".join(f"0x{c:08X}" for c in codes)


def classify(reading: Reading, ignored: frozenset[int] = frozenset()) -> str | None:
    """Why the chip is Unhealthy, or None when it is Healthy (the policy of the module docstring)."""
    if reading.error is not None:
        err = reading.error
        if isinstance(err, CallTimedOut):
            return str(err)
        if err.code == abi.ERR_NOT_READY:
            return f"card dropped (fault 0x{abi.CARD_DROP_FAULT_CODE:08X}): {err}"
        return f"DCMI failing: {err}"
    value = reading.value
    if value in (abi.HEALTH_OK, abi.HEALTH_MINOR):
        return None
    if value == abi.HEALTH_MAJOR:
        what = "major alarm (health 2)"
    elif value == abi.HEALTH_CRITICAL:
        what = "critical alarm (health 3)"
    elif value == abi.HEALTH_ABSENT:
        what = "device absent (health 0xFFFFFFFF)"
    else:
        what = f"unknown health value {value}"
    if reading.codes and set(reading.codes) <= ignored:
        return None
    return f"{what}, fault codes {_hex(reading.codes)}" if reading.codes else what


def poll_chip(lib: DcmiLibrary, card_id: int, device_id: int) -> Reading:
    """The DCMI calls of one poll (runs on the chip's worker)."""
    try:
        value = calls.health(lib, card_id, device_id)
    except DcmiError as err:
        return Reading(error=err)
    if value == abi.HEALTH_OK:
        return Reading(value=value)
    try:
        codes = tuple(calls.error_codes(lib, card_id, device_id))
    except DcmiError as err:
        if not err.unsupported:
            log.info("chip card %d device %d: fault codes unreadable: %s", card_id, device_id, err)
        codes = ()
    return Reading(value=value, codes=codes)


@dataclass
class _ChipState:
    health: Health
    reason: str = ""
    good_since: float | None = None
    last_error: int | None = None
    timed_out: bool = False


@dataclass
class _Result:
    card: Card | None  # None: the node's card-list check
    job: Job[Any]


@dataclass
class HealthMonitor:
    """Polls the chips ``chips()`` returns; :meth:`events` is the blocking stream.

    ``on_change(chip_id, reason or None)`` is told every transition so ``discover()`` agrees with the
    stream. ``known_cards()`` are the DCMI card ids of the last discovery.
    """

    lib: DcmiLibrary
    bounds: CallBounds
    chips: Callable[[], Sequence[Card]]
    known_cards: Callable[[], frozenset[int]]
    settings: HealthSettings
    stop: threading.Event
    on_change: Callable[[str, str | None], None] = lambda _c, _r: None
    clock: Callable[[], float] = time.monotonic
    _states: dict[str, _ChipState] = field(default_factory=dict)
    _results: queue.SimpleQueue[_Result] = field(default_factory=queue.SimpleQueue)
    _pending: dict[str, Job[Any]] = field(default_factory=dict)
    _due: dict[str, float] = field(default_factory=dict)
    _reinit_after: float = 0.0
    _announced: frozenset[int] = frozenset()

    def events(self) -> Iterator[HealthEvent | InventoryChanged]:
        while not self.stop.is_set():
            now = self.clock()
            chips = list(self.chips())
            self._submit_due(chips, now)
            yield from self._timeouts(chips)
            try:
                results = [self._results.get(timeout=self._wait_seconds(now))]
            except queue.Empty:
                continue
            while True:
                try:
                    results.append(self._results.get_nowait())
                except queue.Empty:
                    break
            for result in results:
                if result.card is None:
                    yield from self._card_list(result.job)
                else:
                    yield from self._reading(result.card, result.job)
            self._maybe_reinit(chips)

    # -- scheduling ----------------------------------------------------------------------------

    def _submit_due(self, chips: Sequence[Card], now: float) -> None:
        for card in chips:
            if card.id in self._pending or now < self._due.get(card.id, 0.0):
                continue
            a = card.attributes
            card_id, device_id = int(a[attr.CARD_ID]), int(a[attr.DEVICE_ID])
            self._due[card.id] = now + self.settings.interval
            self._pending[card.id] = self.bounds.submit(
                chip_key(card_id, device_id),
                partial(poll_chip, self.lib, card_id, device_id),
                partial(self._deliver, card),
            )
        if NODE_KEY not in self._pending and now >= self._due.get(NODE_KEY, 0.0):
            self._due[NODE_KEY] = now + self.settings.interval
            self._pending[NODE_KEY] = self.bounds.submit(
                NODE_KEY, partial(calls.card_list, self.lib), partial(self._deliver, None)
            )

    def _deliver(self, card: Card | None, job: Job[Any]) -> None:
        """Called on the worker when a poll is done: hand it to the stream's thread."""
        self._results.put(_Result(card, job))

    def _wait_seconds(self, now: float) -> float:
        idle = [due for key, due in self._due.items() if key not in self._pending]
        until_due = min(idle, default=now + STOP_POLL_SECONDS) - now
        return max(0.001, min(until_due, STOP_POLL_SECONDS))

    # -- transitions ---------------------------------------------------------------------------

    def _state(self, card: Card) -> _ChipState:
        state = self._states.get(card.id)
        if state is None:
            # A chip discovery already reports Unhealthy (stale) must be able to come back.
            state = self._states[card.id] = _ChipState(card.health, "reported Unhealthy by discovery")
        return state

    def _set(self, card: Card, reason: str | None) -> Iterator[HealthEvent]:
        state = self._state(card)
        now = self.clock()
        if reason is not None:
            state.good_since = None
            if state.health is Health.UNHEALTHY and state.reason == reason:
                return
            changed = state.health is Health.HEALTHY
            state.health, state.reason = Health.UNHEALTHY, reason
            self.on_change(card.id, reason)
            if changed:
                log.warning("Ascend chip %s Unhealthy: %s", card.id, reason)
                yield HealthEvent(card.id, Health.UNHEALTHY, reason)
            return
        if state.health is Health.HEALTHY:
            return
        if state.good_since is None:
            state.good_since = now
        if now - state.good_since < self.settings.recovery_seconds:
            return
        was = state.reason
        state.health, state.reason, state.good_since = Health.HEALTHY, "", None
        self.on_change(card.id, None)
        message = f"DCMI reports the chip healthy again (was: {was})"
        log.info("Ascend chip %s Healthy: %s", card.id, message)
        yield HealthEvent(card.id, Health.HEALTHY, message)

    def _timeouts(self, chips: Sequence[Card]) -> Iterator[HealthEvent]:
        """Chips whose poll is stuck in a DCMI call past the bound: Unhealthy now, not when it returns."""
        for card in chips:
            if card.id not in self._pending:
                continue
            a = card.attributes
            stuck = self.bounds.stuck(chip_key(int(a[attr.CARD_ID]), int(a[attr.DEVICE_ID])))
            state = self._state(card)
            if stuck is None or state.timed_out:
                continue
            state.timed_out = True
            yield from self._set(card, str(CallTimedOut(stuck.call, self.bounds.call_timeout)))

    def _reading(self, card: Card, job: Job[object]) -> Iterator[HealthEvent]:
        self._pending.pop(card.id, None)
        state = self._state(card)
        state.timed_out = False
        try:
            reading = job.outcome()
        except DcmiError as err:
            reading = Reading(error=err)
        if not isinstance(reading, Reading):
            raise TypeError(f"health poll returned {reading!r}")
        state.last_error = reading.error.code if reading.error is not None else None
        if reading.value == abi.HEALTH_MINOR:
            log.info("Ascend chip %s minor alarm, fault codes %s", card.id, _hex(reading.codes) or "none")
        yield from self._set(card, classify(reading, self.settings.ignored_codes))

    def _card_list(self, job: Job[object]) -> Iterator[InventoryChanged]:
        self._pending.pop(NODE_KEY, None)
        try:
            listed = job.outcome()
        except DcmiError as err:
            log.debug("card list check failed: %s", err)
            return
        if not isinstance(listed, list):
            raise TypeError(f"card list check returned {listed!r}")
        new = frozenset(listed) - self.known_cards()
        if new and new != self._announced:
            self._announced = new
            yield InventoryChanged(f"DCMI lists new card(s) {sorted(new)}")
        elif not new:
            self._announced = frozenset()

    def _maybe_reinit(self, chips: Sequence[Card]) -> None:
        if not chips:
            return
        states = [self._states.get(c.id) for c in chips]
        if not all(s is not None and s.last_error in REINIT_CODES for s in states):
            return
        now = self.clock()
        if now < self._reinit_after or NODE_KEY in self._pending:
            return
        self._reinit_after = now + REINIT_EVERY_INTERVALS * self.settings.interval
        log.warning("every Ascend chip fails with %s; re-initialising DCMI", sorted(REINIT_CODES))

        def reinit() -> None:
            try:
                calls.init(self.lib)
            except DcmiError as err:
                log.warning("dcmi_init failed: %s", err)

        self.bounds.submit(NODE_KEY, reinit)
