"""The units a pool advertises, versioned, shared by every ListAndWatch stream of that pool.

One :class:`PoolState` lives as long as the pool does, across gRPC server restarts (kubelet restarts),
so a stream opened after a restart starts from the current units. Updates that do not change the
advertised list bump nothing: kubelet writes its checkpoint on every message it receives, so resending
an identical list is an update storm (KUBELET.md §3).

Each snapshot also carries the Allocate answers computed for it, so kubelet asking again for ids it
asked for before costs a dict lookup: the answers depend only on the pool, its units (health included)
and what the backends discovered, so a new snapshot starts with none and :meth:`PoolState.forget_answers`
drops them when a backend's discovery changes under an unchanged list. The book is keyed by the
request's bytes as they came off the wire and holds the response's bytes, so a repeated request is
neither parsed nor encoded; the same ids encoded another way (field order, unknown fields) are just
another key.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.model import Health, Pool, Unit
from hcs_deviceplugin.plugin.topology import PoolTopology
from hcs_deviceplugin.rpc.calls import Encoded

if TYPE_CHECKING:
    from hcs_deviceplugin.allocation.units import PoolUnits

MAX_ANSWERS = 256
"""Answers one snapshot keeps; past this the book starts over. Kubelet asks again for few id sets
within one advertised list, and an 8-unit answer is about 1.6 kB, so a pool keeps at most ~0.5 MB."""
MAX_KEY_BYTES = 16 * 1024
"""The longest request that is remembered (kubelet's 8-unit request is ~0.4 kB); a longer one is
answered but not kept, so the book stays within ~4.5 MB whatever a client sends."""


@field_repr
@dataclass(frozen=True, eq=False, slots=True, repr=False)  # kept in a dict by request, never compared
class Answer:
    """One Allocate answer: the device ids of each container asked for, in kubelet's order (for the
    holds and the second look), and the ``AllocateResponse``, encoded once and sent as it is."""

    containers: tuple[tuple[str, ...], ...]
    response: Encoded


@field_repr
@dataclass(frozen=True, eq=False, repr=False)  # never compared: no __eq__/__hash__ to compile at start
class Snapshot:
    """The pool definition and units at one version, with the topology for them (see
    :mod:`.topology`: built once something asks)."""

    version: int
    pool: Pool
    units: tuple[Unit, ...]
    topology: PoolTopology | None = None
    by_id: Mapping[str, Unit] = field(init=False, compare=False, repr=False)
    """The units by id (the first of a repeated id), for Allocate's lookups; never written."""
    answers: dict[bytes, Answer] = field(default_factory=dict, init=False, compare=False, repr=False)
    """Allocate answers given for this snapshot by request bytes; written by gRPC threads (a dict
    store is atomic)."""
    allocator_view: PoolUnits | None = field(default=None, init=False, compare=False, repr=False)
    """:meth:`allocator_units` once made."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_id", {u.id: u for u in reversed(self.units)})

    def unit(self, unit_id: str) -> Unit | None:
        return self.by_id.get(unit_id)

    def allocator_units(self) -> PoolUnits:
        """The units as the allocator reads them, made on first use (GetPreferredAllocation, or the
        daemon preparing for it) and kept for as long as the snapshot lives, so the allocator keeps
        what it derives from them; two threads that race both make an equal one, and either is kept."""
        view = self.allocator_view
        if view is None:
            from hcs_deviceplugin.allocation.units import PoolUnits

            view = PoolUnits(self.by_id)
            object.__setattr__(self, "allocator_view", view)
        return view

    def prepare_allocation(self) -> None:
        """Build what GetPreferredAllocation reads of this snapshot now rather than on its first call."""
        if self.topology is not None:
            self.topology.get()
        self.allocator_units()

    def remember(self, request: bytes, answer: Answer) -> None:
        """Keep ``answer`` for the request bytes ``request`` (bounded: a full book is emptied first;
        a request longer than :data:`MAX_KEY_BYTES` is not kept)."""
        if len(request) > MAX_KEY_BYTES:
            return
        if len(self.answers) >= MAX_ANSWERS:
            self.answers.clear()
        self.answers[request] = answer

    def healthy_ids(self) -> list[str]:
        return [u.id for u in self.units if u.health is Health.HEALTHY]


class PoolState:
    """Current snapshot of one pool plus a condition that wakes its streams on change."""

    def __init__(self, pool: Pool, units: Sequence[Unit]) -> None:
        self._cond = threading.Condition()
        self._snapshot = Snapshot(0, pool, tuple(units))
        self._delivered_version = -1

    @property
    def snapshot(self) -> Snapshot:
        """The current snapshot, without taking the lock: snapshots are immutable and replaced whole
        under it, and reading one reference is atomic, so Allocate never queues behind a writer."""
        return self._snapshot

    def update(self, pool: Pool, units: Sequence[Unit], topology: PoolTopology | None = None) -> bool:
        """Replace pool and units; returns True (and wakes streams) only if the units changed.

        ``topology`` None keeps the current one (a withdrawal of cards keeps scoring correct: the
        allocator only ever sees units kubelet offers).
        """
        new_units = tuple(units)
        with self._cond:
            old = self._snapshot
            keep = topology if topology is not None else old.topology
            if old.units == new_units:
                if old.pool != pool or keep is not old.topology:
                    self._snapshot = Snapshot(old.version, pool, old.units, keep)
                return False
            self._snapshot = Snapshot(old.version + 1, pool, new_units, keep)
            self._cond.notify_all()
            return True

    def forget_answers(self) -> None:
        """Drop the Allocate answers of the current snapshot (a backend rediscovered its devices).

        The snapshot is replaced by an equal one with an empty book, so an Allocate still holding the
        old snapshot stores its answer where nobody looks any more.
        """
        with self._cond:
            self._snapshot = replace(self._snapshot)

    def wait_for_change(
        self, seen_version: int, should_stop: Callable[[], bool], timeout: float = 1.0
    ) -> Snapshot | None:
        """Block until the version differs from ``seen_version`` (returns it) or ``should_stop()``.

        Returns None on stop. Wakes at least every ``timeout`` seconds to re-check ``should_stop``.
        """
        with self._cond:
            while True:
                if should_stop():
                    return None
                if self._snapshot.version != seen_version:
                    return self._snapshot
                self._cond.wait(timeout)

    def note_delivered(self, version: int) -> None:
        """A stream handed the snapshot of ``version`` to gRPC (it asked for the next message)."""
        with self._cond:
            self._delivered_version = max(self._delivered_version, version)
            self._cond.notify_all()

    def wait_delivered(self, version: int, timeout: float) -> bool:
        """Wait until some stream has delivered ``version`` or later; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._delivered_version >= version, timeout)

    def wake_all(self) -> None:
        """Wake every waiting stream so it re-checks whether it should stop."""
        with self._cond:
            self._cond.notify_all()
