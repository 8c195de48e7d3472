"""The simulated backend: a node description served through the same Backend interface as real hardware.

``simulate`` runs the real daemon on it, and the core's tests use it as the hardware they do not have,
so it must behave like a hardware backend in the ways the core can observe: discovery is a snapshot
that includes current health, health changes arrive on a blocking stream, partitioning is idempotent
and later visible to discovery, and ContainerEdits are computed without I/O.

All mutable state (partitions, health, pending scripted events, open streams) lives here behind one
lock. Scripted events are applied lazily, by whoever next looks (``discover``, ``inject`` or a stream
waiting for its next event), so discovery agrees with the stream even when nobody is consuming it.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator, Mapping, Sequence

from hcs_deviceplugin.backend import PARTITION_FILL
from hcs_deviceplugin.model import (
    Card,
    ContainerEdits,
    Health,
    HealthEvent,
    Inventory,
    LinkMatrix,
    NotSupportedError,
    Partition,
    Unit,
)
from vendors.simulated.description import MIB, CardSpec, NodeDescription, PartitionSpec, ScriptedEvent
from vendors.simulated.edits import simulated_container_edits

STOP_POLL_SECONDS = 0.1
"""How often a waiting stream re-checks ``stop``: a threading.Event cannot wake our condition."""


class _Subscriber:
    """The events one open stream has not yet taken. Weakly held, so an abandoned stream costs nothing."""

    __slots__ = ("__weakref__", "pending")

    def __init__(self) -> None:
        self.pending: deque[HealthEvent] = deque()


class SimulatedBackend:
    """A Backend over a :class:`NodeDescription`; thread-safe.

    Scripted events fire at ``after`` seconds from construction. A stream opened by
    :meth:`health_events` delivers every event that happens after it was opened; earlier ones are
    already reflected by :meth:`discover`, as with a hardware event subscription.
    """

    name = "simulated"

    def __init__(self, description: NodeDescription, stop: threading.Event | None = None) -> None:
        self.description = description
        self._stop = stop if stop is not None else threading.Event()
        self._cards: Mapping[str, CardSpec] = {c.id: c for c in description.cards}
        self._card_index = {c.id: c.index for c in description.cards}
        self._links = LinkMatrix.from_pairs((s.a, s.b, s.link) for s in description.links)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._partitions: dict[str, list[PartitionSpec]] = {
            c.id: list(c.partitions) for c in description.cards
        }
        self._health: dict[str, Health] = {}
        self._scripted: deque[ScriptedEvent] = deque(sorted(description.events, key=lambda e: e.after))
        self._subscribers: weakref.WeakSet[_Subscriber] = weakref.WeakSet()
        self._started = time.monotonic()

    @property
    def node_name(self) -> str | None:
        """The description's node name hint, for ``simulate`` to use when none is given."""
        return self.description.node

    # ------------------------------------------------------------------------------------ Backend

    def discover(self) -> Inventory:
        """Cards, partitions (described and created) and links, with health as of now."""
        with self._lock:
            self._advance_locked()
            cards = tuple(self._card_locked(spec) for spec in self.description.cards)
            partitions = tuple(
                self._partition_locked(spec.id, p)
                for spec in self.description.cards
                for p in self._partitions[spec.id]
            )
        return Inventory(cards=cards, partitions=partitions, links=self._links)

    def links(self) -> LinkMatrix:
        return self._links

    def health_events(self) -> Iterator[HealthEvent]:
        """A blocking stream of health events from now on; it ends within ~0.1 s of ``stop`` being set.

        The subscription is taken here, not at the first ``next()``, so no event falls between a call
        to ``discover()`` and the start of iteration.
        """
        subscriber = _Subscriber()
        with self._lock:
            self._subscribers.add(subscriber)
        return self._stream(subscriber)

    def container_edits(
        self, units: Sequence[Unit], options: Mapping[str, str] | None = None
    ) -> ContainerEdits:
        """Pure: device nodes, env, mount, annotation and CDI names for ``units``; ``options`` are unused."""
        del options  # no pool option changes what the simulated hardware needs
        return simulated_container_edits(units, self._card_index, self.name)

    def partition(self, card: Card, profile: str, count: int) -> list[Partition]:
        """Make ``card`` hold exactly ``count`` partitions of ``profile``, keeping the ones it has.

        New partitions are named ``<card id>-<profile>-<n>`` with the lowest free ``n``, so the same
        call always yields the same partitions. Asking for fewer removes the newest of that profile.
        Partitions of other profiles are untouched; mixing limits beyond the per-profile maximum are not
        simulated.
        """
        spec = self._cards.get(card.id)
        if spec is None:
            raise NotSupportedError(f"card {card.id!r} is not a card of the simulated backend")
        if not spec.profiles:
            raise NotSupportedError(f"card {card.id!r} ({spec.model}) has no partition profiles")
        offered = spec.profiles.get(profile)
        if offered is None:
            known = ", ".join(spec.profiles)
            raise NotSupportedError(
                f"card {card.id!r} ({spec.model}) has no profile {profile!r} (offers: {known})"
            )
        if count == PARTITION_FILL:
            count = offered.max_count
        if count < 0:
            raise ValueError(f"count must not be negative (or PARTITION_FILL), got {count}")
        if count > offered.max_count:
            raise NotSupportedError(
                f"card {card.id!r} ({spec.model}) holds at most {offered.max_count} of {profile!r}, "
                f"asked for {count}"
            )
        with self._lock:
            current = self._partitions[card.id]
            kept = [p for p in current if p.profile == profile][:count]
            taken = self._device_ids_locked()
            n = 0
            while len(kept) < count:
                candidate = f"{card.id}-{profile}-{n}"
                n += 1
                if candidate not in taken:
                    kept.append(PartitionSpec(candidate, profile, offered.memory_mib))
            kept_ids = {p.id for p in kept}
            removed = [p.id for p in current if p.profile == profile and p.id not in kept_ids]
            others = [p for p in current if p.profile != profile or p.id in kept_ids]
            self._partitions[card.id] = others + [p for p in kept if p not in others]
            for partition_id in removed:
                self._health.pop(partition_id, None)
            return [self._partition_locked(card.id, p) for p in kept]

    # ------------------------------------------------------------------------------------ injection

    def inject(self, event: HealthEvent) -> None:
        """Apply ``event`` now and deliver it to every open stream (tests and ``simulate`` use this).

        The event must name a current card or partition: a typo would otherwise vanish silently.
        """
        with self._lock:
            self._advance_locked()
            if event.device_id not in self._device_ids_locked():
                raise ValueError(f"no simulated card or partition with id {event.device_id!r}")
            self._record_locked(event)

    # ------------------------------------------------------------------------------------ internals

    def _stream(self, subscriber: _Subscriber) -> Iterator[HealthEvent]:
        try:
            while not self._stop.is_set():
                with self._changed:
                    self._advance_locked()
                    if not subscriber.pending:
                        self._changed.wait(self._wait_seconds_locked())
                        continue
                    event = subscriber.pending.popleft()
                yield event
        finally:
            with self._lock:
                self._subscribers.discard(subscriber)

    def _wait_seconds_locked(self) -> float:
        """Until the next scripted event is due, but never longer than the stop poll interval."""
        if not self._scripted:
            return STOP_POLL_SECONDS
        due_in = self._scripted[0].after - (time.monotonic() - self._started)
        return max(0.0, min(STOP_POLL_SECONDS, due_in))

    def _advance_locked(self) -> None:
        elapsed = time.monotonic() - self._started
        while self._scripted and self._scripted[0].after <= elapsed:
            self._record_locked(self._scripted.popleft().event)

    def _record_locked(self, event: HealthEvent) -> None:
        self._health[event.device_id] = event.health
        for subscriber in self._subscribers:
            subscriber.pending.append(event)
        self._changed.notify_all()

    def _device_ids_locked(self) -> set[str]:
        ids = set(self._cards)
        ids.update(p.id for parts in self._partitions.values() for p in parts)
        return ids

    def _card_locked(self, spec: CardSpec) -> Card:
        return Card(
            id=spec.id,
            backend=self.name,
            vendor=spec.vendor,
            model=spec.model,
            index=spec.index,
            pci_address=spec.pci_address,
            pci_vendor_id=spec.pci_vendor_id,
            pci_device_id=spec.pci_device_id,
            numa_node=spec.numa_node,
            memory_bytes=spec.memory_mib * MIB,
            health=self._health.get(spec.id, Health.HEALTHY),
            attributes=spec.attributes,
        )

    def _partition_locked(self, card_id: str, spec: PartitionSpec) -> Partition:
        """A card event applies to its partitions, so a partition is as unhealthy as the worse of both."""
        own = self._health.get(spec.id, Health.HEALTHY)
        parent = self._health.get(card_id, Health.HEALTHY)
        unhealthy = Health.UNHEALTHY in (own, parent)
        return Partition(
            id=spec.id,
            card_id=card_id,
            profile=spec.profile,
            memory_bytes=spec.memory_mib * MIB,
            health=Health.UNHEALTHY if unhealthy else Health.HEALTHY,
        )
