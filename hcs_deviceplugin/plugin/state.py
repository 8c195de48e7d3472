"""The units a pool advertises, versioned, shared by every ListAndWatch stream of that pool.

One :class:`PoolState` lives as long as the pool does, across gRPC server restarts (kubelet restarts),
so a stream opened after a restart starts from the current units. Updates that do not change the
advertised list bump nothing: kubelet writes its checkpoint on every message it receives, so resending
an identical list is an update storm (KUBELET.md §3).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hcs_deviceplugin.allocation.topology import Topology
from hcs_deviceplugin.model import Health, Pool, Unit


@dataclass(frozen=True)
class Snapshot:
    """The pool definition and units at one version, with the topology precomputed for them."""

    version: int
    pool: Pool
    units: tuple[Unit, ...]
    topology: Topology | None = None

    def unit(self, unit_id: str) -> Unit | None:
        for u in self.units:
            if u.id == unit_id:
                return u
        return None

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
        with self._cond:
            return self._snapshot

    def update(self, pool: Pool, units: Sequence[Unit], topology: Topology | None = None) -> bool:
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
