"""What kubelet saw, in order, and the replay that finds every moment an invariant was broken.

The simulator appends an event under its lock for each accepted registration, each ListAndWatch
stream opened, each message of a resource's current endpoint, each endpoint that stops, each
allocation and each release. :func:`check_timeline` replays them in receive-time order and reports,
with durations, every interval in which

* one card was advertised under two resources at once (invariant 1), or
* a card held by a running container was advertised under another resource.

Checking the whole timeline, not only settled states, is what catches a card that was in two pools
for a few milliseconds while a move was applied.

Why receive time and not the order the events were appended: each stream has its own consumer
thread, which notes ``time.monotonic()`` as soon as gRPC hands it the message and only then waits for
the simulator's lock (and, in Python, for the GIL: up to its 5 ms switch interval). A withdrawal
received first can so be appended after the advertisement the plugin sent later; ordered by append,
that is an overlap with a negative duration that no kubelet would have seen. Kubelet's own consumers
apply a message as they receive it, so receive time is the closer stand-in for kubelet's order.
"""

from __future__ import annotations

import enum
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from hcs_deviceplugin.model import REPLICA_SEPARATOR


class Kind(enum.StrEnum):
    REGISTER = "register"
    """A Register call was accepted for ``resource`` (``endpoint``: the plugin's socket path)."""
    OPEN = "open"
    """Kubelet's ListAndWatch stream to ``endpoint`` opened (nothing is advertised until a LIST)."""
    LIST = "list"
    """A ListAndWatch message of the resource's current endpoint: ``ids`` is everything it lists,
    ``unhealthy`` the part of it marked Unhealthy."""
    END = "end"
    """The resource's endpoint stopped (stream ended, kubelet going down): it advertises nothing."""
    ALLOC = "alloc"
    """A container was given ``ids`` of the resource."""
    FREE = "free"
    """A container's ``ids`` of the resource were released."""


@dataclass(frozen=True)
class TimelineEvent:
    """One thing kubelet saw at ``time`` (``time.monotonic()``; for a LIST, when it was received)."""

    time: float
    kind: Kind
    resource: str
    ids: frozenset[str] = frozenset()
    endpoint: str = ""
    """The plugin socket the event came from or concerns; empty for allocations and releases."""
    unhealthy: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Violation:
    """One interval in which ``card`` broke ``rule`` (``end`` None: still broken at the last event)."""

    rule: str
    card: str
    resources: tuple[str, ...]
    start: float
    end: float | None

    def duration(self, last: float) -> float:
        return (self.end if self.end is not None else last) - self.start


DOUBLE_ADVERTISED = "advertised by two resources"
HELD_ELSEWHERE = "held under one resource, advertised by another"

CardOf = Callable[[str], str]


def strip_replica(unit_id: str) -> str:
    """The card a unit id stands for when ids are ``<card>`` or ``<card>::<n>`` (no partitions)."""
    base, sep, replica = unit_id.rpartition(REPLICA_SEPARATOR)
    return base if sep and replica.isdigit() else unit_id


def check_timeline(events: Sequence[TimelineEvent], card_of: CardOf = strip_replica) -> list[Violation]:
    """Every violation interval in ``events``, replayed in time order, in the order they began.

    Events with equal times keep their given order (the sort is stable). REGISTER and OPEN change
    nothing that is advertised: kubelet keeps a resource's last list until its new endpoint sends one.
    """
    advertised: dict[str, frozenset[str]] = {}
    held: dict[str, Counter[str]] = defaultdict(Counter)
    ad_by_card: dict[str, set[str]] = defaultdict(set)
    held_by_card: dict[str, set[str]] = defaultdict(set)
    open_: dict[tuple[str, str], tuple[float, tuple[str, ...]]] = {}
    found: list[Violation] = []

    def cards(ids: Iterable[str]) -> set[str]:
        return {card_of(i) for i in ids}

    def recheck(card: str, now: float) -> None:
        ads = ad_by_card.get(card, set())
        holders = held_by_card.get(card, set())
        broken = {
            DOUBLE_ADVERTISED: tuple(sorted(ads)) if len(ads) > 1 else (),
            HELD_ELSEWHERE: tuple(sorted(ads | holders)) if holders and ads - holders else (),
        }
        for rule, resources in broken.items():
            key = (rule, card)
            if resources and key not in open_:
                open_[key] = (now, resources)
            elif not resources and key in open_:
                start, was = open_.pop(key)
                found.append(Violation(rule, card, was, start, now))

    for event in sorted(events, key=lambda e: e.time):
        touched: set[str] = set()
        if event.kind in (Kind.REGISTER, Kind.OPEN):
            continue
        if event.kind in (Kind.LIST, Kind.END):
            before = cards(advertised.get(event.resource, frozenset()))
            after = cards(event.ids) if event.kind is Kind.LIST else set()
            advertised[event.resource] = event.ids if event.kind is Kind.LIST else frozenset()
            for card in before - after:
                ad_by_card[card].discard(event.resource)
            for card in after - before:
                ad_by_card[card].add(event.resource)
            touched = before ^ after
        else:
            counter = held[event.resource]
            for card in cards(event.ids):
                counter[card] += 1 if event.kind is Kind.ALLOC else -1
                if counter[card] > 0:
                    held_by_card[card].add(event.resource)
                else:
                    del counter[card]
                    held_by_card[card].discard(event.resource)
                touched.add(card)
        for card in touched:
            recheck(card, event.time)
    found += [Violation(rule, card, res, start, None) for (rule, card), (start, res) in open_.items()]
    found.sort(key=lambda v: v.start)
    return found


def describe(violations: Sequence[Violation], last: float) -> str:
    """Violations one per line (durations up to ``last`` for open ones), for assertion messages."""
    lines = [
        f"{v.rule}: {v.card} {list(v.resources)} for {v.duration(last) * 1000:.1f} ms" for v in violations
    ]
    return "\n".join(lines) or "none"
