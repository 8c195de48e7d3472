"""Server applier: makes the running PluginServers match the desired pools, on its own thread.

The control loop hands it the latest desired state and goes on; bursts coalesce into one apply of
the newest. Only device plugin pools are its business (``api: dra`` pools are served by the DRA
front end, see hcs_deviceplugin/dra/). Each apply runs in two phases so kubelet never sees one
card under two resources:

1. pools that lose cards stop advertising them, removed and replaced pools drain and close, and we
   wait (in parallel, bounded by ``delivery_wait``) until those lists are on the wire;
2. only then do pools that gain cards advertise them.

Before either phase, ``before_apply`` sees the job (the daemon refreshes its CDI specs there), so a
spec names every card before a pool offers it, and the Allocate path never writes a file.

A pool is served before its topology is built (plugin/topology.py); once
:meth:`ServerApplier.prepare_allocation` has run, each apply builds the topologies of the pools it
started or changed, right after serving them.

Between the phases the holds are read once more: an Allocate answered by the losing pool before its
list shrank is a hold the control loop may not have seen yet, so that card is left out of phase two
(and the control loop recomputes, which makes it drain). Before phase two the restart state records
where each card is about to be advertised, so a daemon killed at any point restarts on the safe side.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from hcs_deviceplugin.holds import HoldBook, held_cards
from hcs_deviceplugin.model import Inventory
from hcs_deviceplugin.plugin.server import PluginServer
from hcs_deviceplugin.plugin.topology import PoolTopology
from hcs_deviceplugin.reconciler import Desired, DesiredPool, HeldCard, device_plugin_pools, plan_changes
from hcs_deviceplugin.restartstate import RestartStateStore

log = logging.getLogger(__name__)

ServerFactory = Callable[[DesiredPool, PoolTopology], PluginServer]

MOVE_GRACE_SECONDS = 0.01
"""Pause between a withdrawal written to its stream and the same card advertised by another pool."""


@dataclass(
    frozen=True, eq=False, repr=False
)  # never compared or logged: no __eq__/__hash__/__repr__ to compile at start
class ApplyJob:
    """One desired state and what it was computed from (the holds listed at that time)."""

    desired: Desired
    inventory: Inventory
    listed: Mapping[str, frozenset[str]]
    discovered: frozenset[str] | None = None
    """Backends whose inventory is known (None: all); only read by ``before_apply``."""


def pool_topology(want: DesiredPool, inventory: Inventory) -> PoolTopology:
    """Link scores for a pool's cards, precomputed (once built: see plugin/topology.py) so that
    GetPreferredAllocation does no O(n²) work."""
    cards = [c for c in inventory.cards if c.id in set(want.cards)]
    return PoolTopology(cards, inventory.links, want.units)


def without_cards(want: DesiredPool, excluded: frozenset[str]) -> DesiredPool:
    if not excluded & set(want.cards):
        return want
    return replace(
        want,
        cards=tuple(c for c in want.cards if c not in excluded),
        units=tuple(u for u in want.units if u.card_id not in excluded),
    )


def newly_held_elsewhere(gaining: Mapping[str, DesiredPool], fresh: Mapping[str, HeldCard]) -> frozenset[str]:
    """Cards about to be advertised by a pool that cannot serve what now holds them."""
    excluded: set[str] = set()
    for want in gaining.values():
        for card in want.cards:
            holder = fresh.get(card)
            if holder is None:
                continue
            offered = {u.id for u in want.units if u.card_id == card}
            if holder.resource != want.pool.holder_key() or not holder.unit_ids <= offered:
                excluded.add(card)
    return frozenset(excluded)


class ServerApplier:
    """Owns the PluginServers; ``submit`` a job, the applier thread applies the newest one."""

    def __init__(
        self,
        make_server: ServerFactory,
        holds: HoldBook,
        store: RestartStateStore,
        delivery_wait: float,
        on_change: Callable[[], None],
        on_skipped: Callable[[str], None],
        before_apply: Callable[[ApplyJob], object] | None = None,
    ) -> None:
        self._make_server = make_server
        self._before_apply = before_apply
        self._holds = holds
        self._store = store
        self._delivery_wait = delivery_wait
        self._on_change = on_change
        self._on_skipped = on_skipped
        self._cond = threading.Condition()
        self._job: ApplyJob | None = None
        self._busy = False
        self._stopped = False
        self._lock = threading.Lock()
        self._servers: dict[str, PluginServer] = {}
        self._closing: set[PluginServer] = set()
        self._applied: dict[str, DesiredPool] = {}
        self._applied_desired = Desired()
        self._published: Mapping[str, PluginServer] = MappingProxyType({})
        self._changes = 0
        self._prepare_allocation = False
        self.thread = threading.Thread(target=self._run, name="server-applier", daemon=True)

    # -- called from other threads -----------------------------------------------------------------

    def start(self) -> None:
        self.thread.start()

    def submit(self, job: ApplyJob) -> None:
        with self._cond:
            self._job = job
            self._cond.notify_all()

    @property
    def servers(self) -> Mapping[str, PluginServer]:
        """The running servers, as an immutable snapshot (safe to read from any thread)."""
        return self._published

    @property
    def applied_desired(self) -> Desired:
        """The desired state last applied: its draining, conflicts and awaiting match the servers."""
        return self._applied_desired

    @property
    def applied_changes(self) -> int:
        return self._changes

    def prepare_allocation(self) -> None:
        """Build what GetPreferredAllocation reads of every running pool (its topology) now, and
        from here on of each pool an apply starts or changes, right after it serves the change.

        ``run`` calls this once its pools stream: a start serves them with their topologies still
        to build (plugin/topology.py), and kubelet's first call should not be the one to pay.
        """
        self._prepare_allocation = True
        for server in self.servers.values():
            _prepare(server)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no job is pending or being applied (tests and shutdown)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._job is None and not self._busy, timeout)

    def shutdown(self) -> list[PluginServer]:
        """Stop taking jobs and hand back every server, running or closing, for the caller to stop."""
        with self._cond:
            self._stopped = True
            self._job = None
            self._cond.notify_all()
        with self._lock:
            servers = list(self._servers.values()) + list(self._closing)
            self._servers.clear()
            self._closing.clear()
            self._published = MappingProxyType({})
        return servers

    # -- applier thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._job is not None or self._stopped)
                if self._stopped:
                    return
                job, self._job = self._job, None
                self._busy = True
            try:
                assert job is not None
                self._apply(job)
            except Exception:
                log.exception("applying the desired pools failed; will apply the next change")
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _apply(self, job: ApplyJob) -> None:
        if self._before_apply is not None:
            # The CDI specs: written before any pool advertises a card they must name.
            self._before_apply(job)
        # DRA pools are the DRA front end's: no device plugin server ever advertises their cards.
        desired = replace(job.desired, pools=MappingProxyType(device_plugin_pools(job.desired.pools)))
        running = dict(self._applied)
        plan = plan_changes(running, desired.pools)
        if plan.empty:
            self._applied_desired = job.desired
            self._on_change()
            return
        self._withdraw(running, desired, plan.update, (*plan.stop, *plan.replace))
        gaining = {name: desired.pools[name] for name in (*plan.start, *plan.replace)}
        for name in plan.update:
            old = set(running[name].cards)
            want = desired.pools[name]
            added = frozenset(c for c in want.cards if c not in old)
            if added:
                gaining[name] = without_cards(want, frozenset(want.cards) - added)
        now = time.monotonic()
        fresh = held_cards(job.inventory, job.listed, self._holds.active(now), now)
        excluded = newly_held_elsewhere(gaining, fresh)
        if excluded:
            log.warning("cards %s were allocated while moving: kept back until released", sorted(excluded))
            self._on_skipped(f"held while moving: {sorted(excluded)}")
        final = {name: without_cards(want, excluded) for name, want in desired.pools.items()}
        self._store.save_cards(
            {
                card: HeldCard(
                    want.pool.holder_key(), frozenset(u.id for u in want.units if u.card_id == card)
                )
                for want in final.values()
                for card in want.cards
            }
        )
        self._advertise(final, plan.start, plan.replace, plan.update, job.inventory)
        self._applied = final
        self._applied_desired = job.desired
        self._changes += 1
        self._on_change()
        if self._prepare_allocation:
            for name in (*plan.start, *plan.replace, *plan.update):
                server = self._running_server(name)
                if server is not None:
                    _prepare(server)

    def _withdraw(
        self,
        running: Mapping[str, DesiredPool],
        desired: Desired,
        shrinking: tuple[str, ...],
        closing: tuple[str, ...],
    ) -> None:
        """Phase one: every card that leaves a pool is off the wire before anything else happens."""
        waits: list[tuple[PluginServer, int]] = []
        for name in shrinking:
            keep = set(desired.pools[name].cards)
            old = running[name]
            if keep >= set(old.cards):
                continue
            server = self._running_server(name)
            if server is None:
                return
            kept_units = tuple(u for u in server.state.snapshot.units if u.card_id in keep)
            if server.update(old.pool, kept_units):
                waits.append((server, server.state.snapshot.version))
        stoppers = []
        with self._lock:
            leaving = [self._servers.pop(name) for name in closing if name in self._servers]
            self._closing.update(leaving)
        for server in leaving:
            thread = threading.Thread(
                target=self._close, args=(server,), name=f"close-{server.socket_path.stem}", daemon=True
            )
            stoppers.append(thread)
            thread.start()
        deadline = time.monotonic() + self._delivery_wait
        waited = False
        for server, version in waits:
            if server.status().open_streams:
                server.state.wait_delivered(version, max(0.0, deadline - time.monotonic()))
                waited = True
        if waited:
            # "Delivered" means gRPC has written the shorter list to the socket; the device plugin API
            # has no acknowledgement. Kubelet reads each stream on its own goroutine, so give its reader
            # a moment to take that list before another stream advertises the same card.
            time.sleep(MOVE_GRACE_SECONDS)
        for thread in stoppers:
            thread.join()
        # Closing servers stay visible until their sockets are gone; a replaced pool keeps its old
        # server in views until the new one is up, so views never show it missing.
        with self._lock:
            self._published = MappingProxyType(
                {name: s for name, s in self._published.items() if name in desired.pools}
            )
        for name in closing:
            log.info(
                "pool %s: socket closed (%s)", name, "removed" if name not in desired.pools else "replaced"
            )

    def _running_server(self, name: str) -> PluginServer | None:
        """The server of a pool this applier runs; None once :meth:`stop` has taken every server
        (a daemon stopping in the middle of an apply: nothing is left to update)."""
        with self._lock:
            return None if self._stopped else self._servers.get(name)

    def _close(self, server: PluginServer) -> None:
        try:
            server.stop(drain=True)
        finally:
            with self._lock:
                self._closing.discard(server)

    def _advertise(
        self,
        final: Mapping[str, DesiredPool],
        start: tuple[str, ...],
        replaced: tuple[str, ...],
        update: tuple[str, ...],
        inventory: Inventory,
    ) -> None:
        """Phase two: new and replaced pools start, updated ones advertise their full lists."""
        for name in (*replaced, *start):
            want = final[name]
            with self._lock:
                if self._stopped:
                    return
                server = self._make_server(want, pool_topology(want, inventory))
                self._servers[name] = server
                self._published = MappingProxyType(dict(self._servers))
            log.info(
                "pool %s %s", name, "added" if name in start else "changed how it serves: server replaced"
            )
        for name in update:
            want = final[name]
            running = self._running_server(name)
            if running is None:
                return
            if running.update(want.pool, want.units, pool_topology(want, inventory)):
                log.info("pool %s now advertises %d unit(s)", name, len(want.units))


def _prepare(server: PluginServer) -> None:
    """Build what the pool's GetPreferredAllocation reads; a failure is logged and left to the call,
    which answers in kubelet's order if the allocator fails there too (plugin/servicer.py)."""
    try:
        server.prepare_allocation()
    except Exception:
        log.exception("pool %s: preparing for GetPreferredAllocation failed", server.state.snapshot.pool.name)
