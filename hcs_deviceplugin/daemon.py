"""The daemon: owns the node's state and keeps one PluginServer per pool in line with it.

One control thread owns all mutable state (inventory, health, pools, running servers). Everything
else — pool sources, backend health streams, the kubelet watcher — only posts events to its queue.
The control thread drains the queue, updates state, computes the desired pools with the pure
reconciler and applies the diff. Batching a burst of events into one apply keeps kubelet from
seeing intermediate lists.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

import grpc

from hcs_deviceplugin.allocation.topology import Topology
from hcs_deviceplugin.backend import PARTITION_FILL, Backend
from hcs_deviceplugin.holds import ProvisionalHold, held_cards, settle_provisional
from hcs_deviceplugin.kubelet.podresources import PodResourcesUnavailable, list_held_devices
from hcs_deviceplugin.kubelet.watch import KubeletWatcher
from hcs_deviceplugin.layouts import layout_requests
from hcs_deviceplugin.model import (
    Card,
    ContainerEdits,
    Health,
    HealthEvent,
    Inventory,
    InventoryChanged,
    LinkMatrix,
    Pool,
    PoolSet,
    Unit,
)
from hcs_deviceplugin.plugin.server import Backoff, PluginServer, RegistrationStatus, ServerStatus
from hcs_deviceplugin.reconciler import (
    Desired,
    DesiredPool,
    HeldCard,
    Plan,
    desired_state,
    plan_changes,
)

log = logging.getLogger(__name__)


class PoolSource(Protocol):
    """Something that delivers PoolSets (mounted directory, API watch); started and stopped by us."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class DaemonObserver(Protocol):
    """Receives the events metrics count; keeps this module free of any metrics library."""

    def health_transition(self, card: str, to: str) -> None: ...

    def reregistration(self, pool: str) -> None: ...


InterceptorsFor = Callable[[str], Sequence["grpc.ServerInterceptor[Any, Any]"]]

PoolSourceFactory = Callable[[Callable[[PoolSet, Sequence[object]], None]], PoolSource]


STREAM_END_GRACE_SECONDS = 1.0
"""How long before the daemon stops a backend's health stream may end without counting as a failure."""


@dataclass(frozen=True)
class DaemonConfig:
    """Where the daemon talks to kubelet and what node it is on."""

    plugin_dir: Path
    node_name: str
    kubelet_socket_name: str = "kubelet.sock"
    pod_resources_socket: Path | None = None
    pod_resources_interval: float = 5.0
    provisional_hold_seconds: float = 30.0
    allocation_settle_seconds: float = 2.0
    delivery_wait: float = 1.0
    backend_retry: Backoff = field(default_factory=lambda: Backoff(initial=0.5, maximum=30.0))
    registration_backoff: Backoff = field(default_factory=Backoff)


@dataclass(frozen=True)
class PoolView:
    """One served pool as the report, the live view and tests see it."""

    pool: Pool
    units: tuple[Unit, ...]
    server: ServerStatus


@dataclass(frozen=True)
class DaemonView:
    """A consistent snapshot of the whole daemon."""

    cards: tuple[Card, ...]
    pools: Mapping[str, PoolView]
    conflicts: Mapping[str, tuple[str, ...]]
    draining: Mapping[str, tuple[str, str]]
    held: Mapping[str, HeldCard]
    layout_errors: tuple[str, ...]
    config_errors: tuple[str, ...]
    absent_backends: Mapping[str, str]
    failed_backends: Mapping[str, str]
    applied_changes: int

    def all_registered(self) -> bool:
        return all(p.server.status is RegistrationStatus.REGISTERED for p in self.pools.values())


@dataclass(frozen=True)
class _PoolsChanged:
    poolset: PoolSet
    errors: tuple[str, ...]


@dataclass(frozen=True)
class _HealthChanged:
    backend: str
    event: HealthEvent


@dataclass(frozen=True)
class _BackendFailed:
    backend: str
    reason: str


@dataclass(frozen=True)
class _Rediscovered:
    backend: str
    inventory: Inventory


@dataclass(frozen=True)
class _KubeletRestarted:
    pass


@dataclass(frozen=True)
class _HeldListed:
    held: Mapping[str, frozenset[str]]
    started_at: float


@dataclass(frozen=True)
class _Allocated:
    resource: str
    unit_ids: frozenset[str]


@dataclass(frozen=True)
class _Tick:
    pass


@dataclass(frozen=True)
class _Stop:
    pass


_Event = (
    _PoolsChanged
    | _HealthChanged
    | _BackendFailed
    | _Rediscovered
    | _KubeletRestarted
    | _HeldListed
    | _Allocated
    | _Tick
    | _Stop
)


class Daemon:
    """Serve every pool of ``PoolSet`` × inventory of ``backends`` to kubelet, live."""

    def __init__(
        self,
        config: DaemonConfig,
        backends: Mapping[str, Backend],
        absent_backends: Mapping[str, str] | None = None,
        initial_pools: PoolSet | None = None,
        observer: DaemonObserver | None = None,
        interceptors_for: InterceptorsFor | None = None,
    ) -> None:
        self.config = config
        self._observer = observer
        self._interceptors_for = interceptors_for
        self._backends = dict(backends)
        self._absent = dict(absent_backends or {})
        self._events: queue.Queue[_Event] = queue.Queue()
        self._lock = threading.Lock()
        # Change notifications use their own lock: server threads notify while the control thread
        # may hold ``_lock`` and be joining them, so notifying must never wait for ``_lock``.
        self._changed = threading.Condition(threading.Lock())
        self._generation = 0
        self._inventories: dict[str, Inventory] = {}
        self._health: dict[str, Health] = {}
        self._failed: dict[str, str] = {}
        self._poolset = initial_pools or PoolSet()
        self._config_errors: tuple[str, ...] = ()
        self._desired = Desired()
        self._servers: dict[str, PluginServer] = {}
        self._applied = 0
        self._listed_held: dict[str, frozenset[str]] = {}
        self._provisional: list[ProvisionalHold] = []
        self._held: dict[str, HeldCard] = {}
        self._poll_now = threading.Event()
        self._pod_resources_error = ""
        self._held_known = False
        self._layout_attempts: dict[tuple[str, str], str] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sources: list[PoolSource] = []
        self._watcher = KubeletWatcher(
            config.plugin_dir,
            on_restart=lambda: self._events.put(_KubeletRestarted()),
            on_tick=lambda: self._events.put(_Tick()),
            kubelet_socket_name=config.kubelet_socket_name,
        )

    # -- public API ------------------------------------------------------------------------------

    def add_source(self, factory: PoolSourceFactory) -> None:
        """Attach a pool source; it reports through :meth:`set_pools`. Call before :meth:`start`."""
        self._sources.append(factory(self.set_pools))

    def set_pools(self, poolset: PoolSet, errors: Sequence[object] = ()) -> None:
        """A source's new PoolSet (already validated; ``errors`` are what it rejected)."""
        self._events.put(_PoolsChanged(poolset, tuple(str(e) for e in errors)))

    def start(self) -> None:
        """Discover, serve the initial pools, then follow changes. Returns once servers are started."""
        self.config.plugin_dir.mkdir(parents=True, exist_ok=True)
        for name, backend in self._backends.items():
            self._inventories[name] = self._discover(name, backend)
        for source in self._sources:
            source.start()
        with self._lock:
            self._drain_pending_pool_events()
            self._apply()
        control = threading.Thread(target=self._control_loop, name="daemon-control", daemon=True)
        self._threads.append(control)
        control.start()
        for name, backend in self._backends.items():
            thread = threading.Thread(
                target=self._health_loop, args=(name, backend), name=f"health-{name}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        if self.config.pod_resources_socket is not None:
            poller = threading.Thread(target=self._poll_loop, name="pod-resources", daemon=True)
            self._threads.append(poller)
            poller.start()
        self._watcher.start()

    def stop(self) -> None:
        """Close every stream, remove every socket; registrations are left for kubelet to expire."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._poll_now.set()
        self._events.put(_Stop())
        self._watcher.stop()
        for source in self._sources:
            source.stop()
        for thread in self._threads:
            if thread.name == "daemon-control":
                thread.join(timeout=10)
        with self._lock:
            servers = list(self._servers.values())
            self._servers.clear()
        for server in servers:
            server.stop(drain=False)
        for thread in self._threads:
            thread.join(timeout=5)
        for name, backend in self._backends.items():
            close_backend(name, backend)
        self._notify()

    def view(self) -> DaemonView:
        with self._lock:
            return self._view_locked()

    def wait_for(self, predicate: Callable[[DaemonView], bool], timeout: float, what: str = "") -> DaemonView:
        """Block until ``predicate(view)`` holds; TimeoutError naming ``what`` otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                seen = self._generation
            view = self.view()
            if predicate(view):
                return view
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what or predicate}")
            with self._changed:
                self._changed.wait_for(lambda seen=seen: self._generation != seen, remaining)  # type: ignore[misc]

    def thread_liveness(self) -> dict[str, bool]:
        """Thread name → alive, for every thread the daemon started (read by /healthz)."""
        return {thread.name: thread.is_alive() for thread in self._threads}

    def links(self) -> LinkMatrix:
        """Card-to-card links of every backend, merged (for the node report and the allocator)."""
        with self._lock:
            return self._inventory().links

    def server(self, pool_name: str) -> PluginServer:
        with self._lock:
            return self._servers[pool_name]

    def edits_for(self, pool: Pool, units: Sequence[Unit]) -> ContainerEdits:
        """ContainerEdits for units of one pool, asking each owning backend for its own units."""
        by_backend: dict[str, list[Unit]] = {}
        for unit in units:
            by_backend.setdefault(unit.backend, []).append(unit)
        edits = ContainerEdits()
        for name, group in by_backend.items():
            edits = edits.merged(self._backends[name].container_edits(group, pool.options))
        return edits

    # -- threads -----------------------------------------------------------------------------------

    def _control_loop(self) -> None:
        while True:
            batch = [self._events.get()]
            while True:
                try:
                    batch.append(self._events.get_nowait())
                except queue.Empty:
                    break
            if any(isinstance(e, _Stop) for e in batch):
                return
            try:
                self._handle(batch)
            except Exception:
                log.exception("control loop failed to apply %d event(s); state kept", len(batch))

    def _handle(self, batch: list[_Event]) -> None:
        restart = any(isinstance(e, _KubeletRestarted) for e in batch)
        needs_apply = False
        with self._lock:
            for event in batch:
                needs_apply |= self._record(event)
            if needs_apply:
                self._apply()
            servers = list(self._servers.values())
        if restart:
            for server in servers:
                if self._observer is not None:
                    self._observer.reregistration(server.state.snapshot.pool.name)
                server.request_restart("kubelet.sock re-created")
        elif any(isinstance(e, _Tick) for e in batch):
            for server in servers:
                server.check_socket()

    def _record(self, event: _Event) -> bool:
        """Fold one event into state; True if the desired pools may have changed."""
        if isinstance(event, _PoolsChanged):
            if event.poolset != self._poolset:
                self._layout_attempts.clear()
            self._poolset = event.poolset
            self._config_errors = event.errors
            return True
        if isinstance(event, _HealthChanged):
            previous = self._health.get(event.event.device_id)
            self._health[event.event.device_id] = event.event.health
            if previous != event.event.health:
                if self._observer is not None:
                    self._observer.health_transition(event.event.device_id, event.event.health.value)
                log.info(
                    "%s %s is %s: %s",
                    event.backend,
                    event.event.device_id,
                    event.event.health.value,
                    event.event.reason,
                )
            return previous != event.event.health
        if isinstance(event, _BackendFailed):
            self._failed[event.backend] = event.reason
            for card in self._inventories.get(event.backend, Inventory()).cards:
                was = self._health.get(card.id, card.health)
                if self._observer is not None and was is not Health.UNHEALTHY:
                    self._observer.health_transition(card.id, Health.UNHEALTHY.value)
                self._health[card.id] = Health.UNHEALTHY
            return True
        if isinstance(event, _HeldListed):
            changed = not self._held_known or dict(event.held) != self._listed_held
            self._held_known = True
            self._listed_held = dict(event.held)
            before = len(self._provisional)
            self._provisional = settle_provisional(
                self._provisional, event.held, event.started_at, self.config.allocation_settle_seconds
            )
            return changed or len(self._provisional) != before
        if isinstance(event, _Allocated):
            return self._hold_provisionally(event)
        if isinstance(event, _Rediscovered):
            self._failed.pop(event.backend, None)
            old = self._inventories.get(event.backend, Inventory())
            for device_id in [c.id for c in old.cards] + [p.id for p in old.partitions]:
                self._health.pop(device_id, None)
            self._inventories[event.backend] = event.inventory
            self._layout_attempts = {k: v for k, v in self._layout_attempts.items() if not v}
            return True
        return False

    def _hold_provisionally(self, event: _Allocated) -> bool:
        """Record ids just allocated; True only if that holds something not already held.

        Kubelet may call Allocate for the same ids again (init containers, retries): refreshing an
        existing hold needs no re-apply, which keeps Allocate bursts from costing a reconcile each.
        """
        now = time.monotonic()
        hold = ProvisionalHold(
            event.resource, event.unit_ids, now, now + self.config.provisional_hold_seconds
        )
        for i, existing in enumerate(self._provisional):
            if existing.resource == event.resource and existing.unit_ids == event.unit_ids:
                self._provisional[i] = hold
                return False
        self._provisional.append(hold)
        listed = self._listed_held.get(event.resource, frozenset())
        return not event.unit_ids <= listed

    def _drain_pending_pool_events(self) -> None:
        pending: list[_Event] = []
        while True:
            try:
                pending.append(self._events.get_nowait())
            except queue.Empty:
                break
        for event in pending:
            if isinstance(event, _PoolsChanged):
                self._record(event)
            else:
                self._events.put(event)

    def _health_loop(self, name: str, backend: Backend) -> None:
        """Run a backend's health stream; if it fails, mark its cards Unhealthy and retry."""
        delay = self.config.backend_retry.initial
        while not self._stop.is_set():
            try:
                for event in backend.health_events():
                    if isinstance(event, InventoryChanged):
                        self._rediscover(name, backend, event.reason)
                    else:
                        self._events.put(_HealthChanged(name, event))
                    delay = self.config.backend_retry.initial
                # A stream ends when its backend's stop event is set, which the runner does just
                # before stopping the daemon: give that shutdown a moment before calling it a failure.
                if self._stop.wait(STREAM_END_GRACE_SECONDS):
                    return
                raise RuntimeError("health stream ended unexpectedly")
            except Exception as exc:
                if self._stop.is_set():
                    return
                log.warning("backend %s health stream failed: %s; cards marked Unhealthy", name, exc)
                self._events.put(_BackendFailed(name, str(exc)))
            if self._stop.wait(delay):
                return
            delay = self.config.backend_retry.next(delay)
            try:
                self._events.put(_Rediscovered(name, backend.discover()))
            except Exception as exc:
                log.warning("backend %s rediscovery failed: %s", name, exc)

    def _rediscover(self, name: str, backend: Backend, reason: str) -> None:
        """Discover ``backend`` again because its hardware changed; a failure keeps the old inventory."""
        log.info("backend %s: %s; discovering again", name, reason)
        try:
            self._events.put(_Rediscovered(name, backend.discover()))
        except Exception as exc:
            log.warning("backend %s rediscovery after %r failed: %s", name, reason, exc)

    def _poll_loop(self) -> None:
        """Poll pod-resources every interval, and at once when an Allocate asks for it."""
        socket_path = self.config.pod_resources_socket
        assert socket_path is not None
        while not self._stop.is_set():
            self._poll_now.clear()
            started_at = time.monotonic()
            try:
                held = list_held_devices(socket_path)
            except PodResourcesUnavailable as exc:
                if str(exc) != self._pod_resources_error:
                    log.warning("cannot read held devices (keeping the last known): %s", exc)
                self._pod_resources_error = str(exc)
            else:
                if self._pod_resources_error:
                    log.info("pod-resources readable again")
                self._pod_resources_error = ""
                self._events.put(_HeldListed(held, started_at))
            self._poll_now.wait(self.config.pod_resources_interval)

    def _on_allocate(self, resource: str, unit_ids: Sequence[str]) -> None:
        """Called on a gRPC thread after an Allocate answer: hold the ids and re-read pod-resources."""
        log.info("allocated %s: %s", resource, ",".join(unit_ids))
        self._events.put(_Allocated(resource, frozenset(unit_ids)))
        self._poll_now.set()

    # -- state → servers -----------------------------------------------------------------------

    def _discover(self, name: str, backend: Backend) -> Inventory:
        try:
            inventory = backend.discover()
        except Exception as exc:
            log.exception("backend %s discovery failed", name)
            self._failed[name] = f"discovery failed: {exc}"
            return Inventory()
        log.info(
            "backend %s: %d card(s), %d partition(s)", name, len(inventory.cards), len(inventory.partitions)
        )
        return inventory

    def _inventory(self) -> Inventory:
        merged = Inventory()
        for name in sorted(self._inventories):
            merged = merged.merged(self._inventories[name])
        return merged

    def _apply(self) -> None:
        """Compute desired pools and apply the diff to the running servers. Holds the lock.

        Two phases: first every running pool stops advertising the cards it is losing (and removed
        or replaced pools go), and we wait until those lists are on the wire; only then do pools
        that gain cards advertise them. So kubelet never sees one card under two resources.
        """
        now = time.monotonic()
        self._provisional = [h for h in self._provisional if h.expires > now]
        self._held = held_cards(self._inventory(), self._listed_held, self._provisional, now)
        self._lay_out_partitions()
        inventory = self._inventory()
        desired = desired_state(
            self._poolset,
            inventory,
            self.config.node_name,
            health=self._health,
            previous_assignment=self._desired.assignment,
            held=self._held,
        )
        running: dict[str, DesiredPool] = {
            name: self._desired.pools[name] for name in self._servers if name in self._desired.pools
        }
        plan = plan_changes(running, desired.pools)
        self._shrink_first(running, desired, plan)
        for name in plan.stop:
            self._servers.pop(name).stop(drain=True)
            log.info("pool %s removed: socket closed", name)
        for name in plan.replace:
            self._servers.pop(name).stop(drain=True)
            self._servers[name] = self._new_server(desired.pools[name], inventory)
            log.info("pool %s changed how it serves: server replaced", name)
        for name in plan.start:
            self._servers[name] = self._new_server(desired.pools[name], inventory)
            log.info("pool %s added", name)
        for name in plan.update:
            want = desired.pools[name]
            if self._servers[name].update(want.pool, want.units, pool_topology(want, inventory)):
                log.info("pool %s now advertises %d unit(s)", name, len(want.units))
        for card_id, claimants in desired.conflicts.items():
            if card_id not in self._desired.conflicts:
                log.error(
                    "card %s is claimed by pools %s: neither new claimant gets it", card_id, list(claimants)
                )
        for card_id, (holder, wanted) in desired.draining.items():
            if self._desired.draining.get(card_id) != (holder, wanted):
                log.warning(
                    "card %s draining: held under %s, goes to pool %s once released", card_id, holder, wanted
                )
        for card_id in set(self._desired.draining) - set(desired.draining):
            log.info("card %s released: draining over", card_id)
        self._desired = desired
        if not plan.empty:
            self._applied += 1
        self._notify()

    def _lay_out_partitions(self) -> None:
        """Ask backends to fill free cards with the profile their Partition pool wants."""
        requests = layout_requests(
            self._poolset,
            self._inventory(),
            self.config.node_name,
            self._held,
            self._held_known,
            self._layout_attempts,
        )
        for request in requests:
            backend = self._backends.get(request.backend)
            card = self._inventory().card(request.card_id)
            if backend is None or card is None:
                continue
            try:
                made = backend.partition(card, request.profile, PARTITION_FILL)
                self._inventories[request.backend] = backend.discover()
            except Exception as exc:
                message = (
                    f"pool {request.pool}: card {request.card_id}: cannot lay out {request.profile}: {exc}"
                )
                log.error("%s", message)
                self._layout_attempts[(request.card_id, request.profile)] = message
                continue
            self._layout_attempts[(request.card_id, request.profile)] = ""
            log.info(
                "pool %s: card %s laid out as %d x %s",
                request.pool,
                request.card_id,
                len(made),
                request.profile,
            )

    def _shrink_first(self, running: Mapping[str, DesiredPool], desired: Desired, plan: Plan) -> None:
        """Phase one of :meth:`_apply`: withdraw leaving cards from pools that keep running."""
        waits: list[tuple[PluginServer, int]] = []
        for name in plan.update:
            keep = set(desired.pools[name].cards)
            old = running[name]
            if keep >= set(old.cards):
                continue
            server = self._servers[name]
            kept_units = tuple(u for u in server.state.snapshot.units if u.card_id in keep)
            if server.update(old.pool, kept_units):
                waits.append((server, server.state.snapshot.version))
        for server, version in waits:
            if server.status().open_streams:
                server.state.wait_delivered(version, self.config.delivery_wait)

    def _new_server(self, want: DesiredPool, inventory: Inventory) -> PluginServer:
        resource = want.pool.resource_name

        def on_allocate(_pool: str, ids: Sequence[str]) -> None:
            self._on_allocate(resource, ids)

        server = PluginServer(
            want.pool,
            want.units,
            self.config.plugin_dir,
            self.edits_for,
            kubelet_socket=self.config.plugin_dir / self.config.kubelet_socket_name,
            on_allocate=on_allocate,
            on_status=self._notify,
            backoff=self.config.registration_backoff,
            interceptors=self._interceptors_for(want.pool.name) if self._interceptors_for else (),
            topology=pool_topology(want, inventory),
        )
        server.start()
        return server

    def _notify(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def _view_locked(self) -> DaemonView:
        pools = {}
        for name, server in self._servers.items():
            snapshot = server.state.snapshot
            pools[name] = PoolView(snapshot.pool, snapshot.units, server.status())
        cards = tuple(
            _with_health(card, self._health) for card in sorted(self._inventory().cards, key=lambda c: c.id)
        )
        return DaemonView(
            cards=cards,
            pools=MappingProxyType(pools),
            conflicts=self._desired.conflicts,
            draining=self._desired.draining,
            held=MappingProxyType(dict(self._held)),
            layout_errors=tuple(m for m in self._layout_attempts.values() if m),
            config_errors=self._config_errors,
            absent_backends=MappingProxyType(dict(self._absent)),
            failed_backends=MappingProxyType(dict(self._failed)),
            applied_changes=self._applied,
        )


def pool_topology(want: DesiredPool, inventory: Inventory) -> Topology:
    """Precomputed link scores for a pool's cards, so GetPreferredAllocation does no O(n²) work."""
    cards = [c for c in inventory.cards if c.id in set(want.cards)]
    return Topology.build(cards, inventory.links, want.units)


def close_backend(name: str, backend: Backend) -> None:
    """Release a backend's library handles if it has an optional ``close()`` (see backend.py)."""
    close = getattr(backend, "close", None)
    if not callable(close):
        return
    try:
        close()
    except Exception:
        log.exception("backend %s failed to close", name)


def _with_health(card: Card, health: Mapping[str, Health]) -> Card:
    wanted = health.get(card.id, card.health)
    return card if wanted is card.health else replace(card, health=wanted)
