"""What a restarted daemon must remember: which pool last advertised each card, and fresh holds.

Kubelet's pod-resources API is the only authority on what running containers hold, and right after
a daemon restart it may be slow or down. Until one List has answered, a card that moved between
pools in the ConfigMap while we were gone might still be held under its old resource; advertising it
in its new pool would double-book it (invariant 1). So the daemon persists, before it advertises a
card anywhere, the resource and unit ids it will advertise it under, plus the provisional holds from
recent Allocate answers. At start, until pod-resources confirms, a card goes only where it last was,
with the same unit ids, and a card with no record goes nowhere.

The file is small JSON, replaced atomically (temp file, fsync, rename), and written by two threads
(the server applier for records, the control loop for holds) through one lock. A missing or unreadable
file is an empty memory: every card then waits for pod-resources, the safe side.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.holds import ProvisionalHold
from hcs_deviceplugin.reconciler import HeldCard

log = logging.getLogger(__name__)

STATE_FILE = "state.json"
FORMAT_VERSION = 1


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: the store compares its cards and holds
class RestartState:
    """Card id → where it was last advertised; provisional holds with wall-clock expiry."""

    cards: Mapping[str, HeldCard] = field(default_factory=dict)
    holds: tuple[ProvisionalHold, ...] = ()


def encode(state: RestartState, wall_now: float, mono_now: float) -> str:
    """JSON text of ``state``; hold times move from the monotonic clock to wall-clock seconds."""
    offset = wall_now - mono_now
    doc = {
        "version": FORMAT_VERSION,
        "cards": {
            card: {"resource": held.resource, "units": sorted(held.unit_ids)}
            for card, held in sorted(state.cards.items())
        },
        "holds": [
            {
                "resource": h.resource,
                "units": sorted(h.unit_ids),
                "since": h.since + offset,
                "expires": h.expires + offset,
            }
            for h in state.holds
        ],
    }
    return json.dumps(doc, sort_keys=True)


def decode(text: str, wall_now: float, mono_now: float) -> RestartState:
    """Parse :func:`encode`'s output back onto this process's monotonic clock; ValueError if bad."""
    doc: Any = json.loads(text)
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise ValueError("not a version 1 state file")
    offset = mono_now - wall_now
    cards: dict[str, HeldCard] = {}
    for card, entry in dict(doc.get("cards", {})).items():
        cards[str(card)] = HeldCard(str(entry["resource"]), frozenset(str(u) for u in entry["units"]))
    holds = tuple(
        ProvisionalHold(
            str(h["resource"]),
            frozenset(str(u) for u in h["units"]),
            float(h["since"]) + offset,
            float(h["expires"]) + offset,
        )
        for h in list(doc.get("holds", []))
    )
    return RestartState(cards, holds)


class RestartStateStore:
    """Reads the state at start and keeps the file current; ``directory`` None keeps it in memory."""

    def __init__(self, directory: Path | None) -> None:
        self.path = directory / STATE_FILE if directory is not None else None
        self._lock = threading.Lock()
        self._state = RestartState()

    def load(self) -> RestartState:
        """The previous run's state, or an empty one (logged) if there is none or it is unreadable."""
        if self.path is None:
            return RestartState()
        try:
            text = self.path.read_text(encoding="utf-8")
            state = decode(text, time.time(), time.monotonic())
        except FileNotFoundError:
            log.info("no restart state at %s: every card waits for a pod-resources read", self.path)
            return RestartState()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning(
                "restart state %s unreadable (%s): every card waits for pod-resources", self.path, exc
            )
            return RestartState()
        with self._lock:
            self._state = state
        log.info(
            "restart state: %d card record(s), %d provisional hold(s)", len(state.cards), len(state.holds)
        )
        return state

    def save_cards(self, cards: Mapping[str, HeldCard]) -> None:
        """Record where cards are about to be advertised (call before advertising them)."""
        with self._lock:
            if dict(self._state.cards) == dict(cards):
                return
            self._state = RestartState(dict(cards), self._state.holds)
            self._write_locked()

    def save_holds(self, holds: list[ProvisionalHold]) -> None:
        with self._lock:
            if self._state.holds == tuple(holds):
                return
            self._state = RestartState(self._state.cards, tuple(holds))
            self._write_locked()

    def _write_locked(self) -> None:
        if self.path is None:
            return
        text = encode(self._state, time.time(), time.monotonic())
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            log.error("cannot write restart state %s: %s", self.path, exc)


def restart_holds(
    records: Mapping[str, HeldCard], cards: list[str], provisional: Mapping[str, HeldCard]
) -> tuple[dict[str, HeldCard], frozenset[str]]:
    """Holds and blocked cards to use until pod-resources has answered once after a restart.

    Each card with a record is held where it was last advertised; a provisional hold under the same
    resource adds its ids. A card with no record, or whose provisional hold names another resource
    than its record, is blocked: not advertised anywhere until a List confirms what is held.
    """
    held: dict[str, HeldCard] = {}
    blocked: set[str] = set()
    for card in cards:
        record = records.get(card)
        extra = provisional.get(card)
        if record is None:
            if extra is not None:
                held[card] = extra
            else:
                blocked.add(card)
        elif extra is None:
            held[card] = record
        elif extra.resource == record.resource:
            held[card] = HeldCard(record.resource, record.unit_ids | extra.unit_ids)
        else:
            blocked.add(card)
    return held, frozenset(blocked)
