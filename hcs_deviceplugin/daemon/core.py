"""The daemon: wires the control loop to the backend supervisor, the poller and the server applier.

Threads and what each may block on:

* **control loop** (``daemon-control``) — the only writer of :class:`NodeState`. It folds batches of
  events (pure), computes the desired pools (pure), hands layouts to the supervisor and the desired
  state to the applier, and publishes an immutable view. It never calls a backend, stops a server or
  waits for a delivery, so a slow vendor cannot delay health events, probes or another pool.
* **backend supervisor** (``health-*``, ``layout-*``) — every vendor call (see supervisor.py).
* **pod-resources poller** (``pod-resources``) — kubelet's List, coalesced (kubelet/poller.py).
* **server applier** (``server-applier``) — server starts, stops and delivery waits (applier.py).
* **kubelet watcher** — kubelet.sock re-created or our sockets removed: tells the servers directly.

Probes, metrics, the report and tests read :meth:`Daemon.view`, built from published immutable values
without any lock that the control loop holds while working.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING

from hcs_deviceplugin.backend import Backend, close_backend, configure_sharing, sharing_modes
from hcs_deviceplugin.cdi.delivery import deliver
from hcs_deviceplugin.cdi.names import kinds_of, unit_names
from hcs_deviceplugin.daemon.applier import ApplyJob, ServerApplier
from hcs_deviceplugin.daemon.events import Event, HeldListed, PoolsChanged, Recompute, Stop
from hcs_deviceplugin.daemon.state import NodeState, Transition, fold, start_layouts
from hcs_deviceplugin.daemon.supervisor import BackendSupervisor
from hcs_deviceplugin.daemon.types import (
    DaemonConfig,
    DaemonObserver,
    DaemonView,
    InterceptorsFor,
    PoolSource,
    PoolSourceFactory,
    PoolView,
)
from hcs_deviceplugin.holds import HoldBook, hardware_id_of, held_cards
from hcs_deviceplugin.kubelet.dirlock import PluginDirLock
from hcs_deviceplugin.kubelet.poller import PodResourcesPoller
from hcs_deviceplugin.kubelet.watch import KubeletWatcher, file_identity
from hcs_deviceplugin.model import (
    Card,
    ContainerEdits,
    Health,
    Inventory,
    LinkMatrix,
    Pool,
    PoolSet,
    SharingRequest,
    Unit,
    UnitKind,
)
from hcs_deviceplugin.plugin.server import PluginServer
from hcs_deviceplugin.plugin.servicer import load_preferred_allocation
from hcs_deviceplugin.plugin.topology import PoolTopology
from hcs_deviceplugin.reconciler import (
    Desired,
    DesiredPool,
    HeldCard,
    desired_state,
    device_plugin_pools,
    dra_pools,
    shared_as_now,
    sharing_requests,
)
from hcs_deviceplugin.restartstate import RestartStateStore, restart_holds

if TYPE_CHECKING:
    from hcs_deviceplugin.cdi.publisher import CdiPublisher
    from hcs_deviceplugin.dra.devices import DraDevice
    from hcs_deviceplugin.dra.frontend import DraFrontEnd, DraSetup
    from hcs_deviceplugin.layouts import LayoutRequest

log = logging.getLogger(__name__)

STALL_SECONDS = 30.0
"""An event waiting this long for the control loop means it is wedged (a liveness failure)."""
SHUTDOWN_WAIT = 1.0
CDI_RETRY_SECONDS = 5.0
"""After a failed CDI spec write, how long until the daemon tries again (the view says why meanwhile)."""


@dataclass(
    frozen=True, eq=False, repr=False
)  # never compared or logged: no __eq__/__hash__/__repr__ to compile at start
class _Published:
    """What the control loop last published, for views."""

    state: NodeState = field(default_factory=NodeState)
    desired: Desired = field(default_factory=Desired)
    held: Mapping[str, HeldCard] = field(default_factory=lambda: MappingProxyType({}))
    waiting_for: str = "starting"
    draining_since: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


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
        dra: DraSetup | None = None,
    ) -> None:
        self.config = config
        self._observer = observer
        self._interceptors_for = interceptors_for
        self._backends = dict(backends)
        self._absent = MappingProxyType(dict(absent_backends or {}))
        self._events: queue.Queue[tuple[float, Event]] = queue.Queue()
        self._changed = threading.Condition(threading.Lock())
        self._generation = 0
        self._state = NodeState(poolset=initial_pools or PoolSet())
        self._desired = Desired()
        self._published = _Published(self._state)
        self._holds = HoldBook(config.provisional_hold_seconds)
        self._holds_seen = -1
        self._store = RestartStateStore(config.state_dir)
        self._records: Mapping[str, HeldCard] = {}
        self._draining_since: Mapping[str, float] = MappingProxyType({})
        self._stop = threading.Event()
        self._first_apply = threading.Event()
        self._first_listing = threading.Event()
        self._oldest_pending = 0.0
        self._threads: list[threading.Thread] = []
        self._sources: list[PoolSource] = []
        self._lock = PluginDirLock(config.plugin_dir)
        self._sharing_support = {name: sharing_modes(b) for name, b in self._backends.items()}
        self._sharing: dict[str, SharingRequest] = {}
        self._sharing_told = False
        self._shared_as: dict[str, str] = {}
        """Card → the sharing mode it is served under, for cards served since this process started."""
        self._supervisor = BackendSupervisor(self._backends, self._post, config.backend_retry)
        self._cdi_kinds = kinds_of(self._backends)
        self.cdi: CdiPublisher | None = None
        if config.cdi_dir is not None:
            # Imported here: a daemon without --cdi-dir never loads the spec writer.
            from hcs_deviceplugin.cdi.publisher import CdiPublisher

            self.cdi = CdiPublisher(config.cdi_dir, self._backends, config.host_root_of)
        self.dra: DraFrontEnd | None = None
        """The DRA front end (``api: dra`` pools), when the daemon runs one."""
        if dra is not None:
            # Imported here: a daemon without DRA (most) never loads the DRA gRPC servers and protos.
            from hcs_deviceplugin.dra.frontend import DraFrontEnd

            self.dra = DraFrontEnd(
                dra,
                config.node_name,
                self._cdi_kinds,
                self._dra_cdi_ready,
                lambda: self._post(Recompute("DRA claims prepared or released")),
            )
        self.applier = ServerApplier(
            self._new_server,
            self._holds,
            self._store,
            config.delivery_wait,
            on_change=self._notify,
            on_skipped=lambda reason: self._post(Recompute(reason)),
            before_apply=self._publish_cdi,
        )
        self._poller = (
            PodResourcesPoller(config.pod_resources_socket, config.pod_resources_interval, self._listed)
            if config.pod_resources_socket is not None
            else None
        )
        self._watcher = KubeletWatcher(
            config.plugin_dir,
            on_restart=self._kubelet_restarted,
            on_tick=self._check_sockets,
            kubelet_socket_name=config.kubelet_socket_name,
        )

    # -- public API ------------------------------------------------------------------------------

    def add_source(self, factory: PoolSourceFactory) -> None:
        """Attach a pool source; it reports through :meth:`set_pools`. Call before :meth:`start`."""
        self._sources.append(factory(self.set_pools))

    def set_pools(self, poolset: PoolSet, errors: Sequence[object] = ()) -> None:
        """A source's new PoolSet (already validated; ``errors`` are what it rejected)."""
        self._post(PoolsChanged(poolset, tuple(str(e) for e in errors)))

    def start(self, first_apply_wait: float = 10.0, cancel: threading.Event | None = None) -> None:
        """Take the plugin-dir lock, discover, read what is held, serve; returns after the first apply.

        Setting ``cancel`` (or calling :meth:`stop`) while another instance holds the lock makes
        this return without serving anything.
        """
        self.config.plugin_dir.mkdir(parents=True, exist_ok=True)
        if self.config.lock_plugin_dir:
            self._publish(waiting_for=f"waiting for the lock {self._lock.path} (another instance serves)")
            if not self._lock.acquire(cancel or self._stop, also=self._stop):
                return
        restored = self._store.load()
        self._records = restored.cards
        self._holds.restore(list(restored.holds))
        self._publish(waiting_for="discovering")
        for source in self._sources:
            source.start()
        # The first pod-resources read and discovery run side by side: the first apply needs both.
        if self._poller is not None:
            self._poller.start()
            self._threads.append(self._poller.thread)
        self._supervisor.start()
        self._threads.extend(self._supervisor.threads)
        pending = self._supervisor.wait_discovered(self.config.initial_discovery_wait)
        if pending:
            log.warning("backends %s still discovering; their pools fill in when they answer", pending)
        listed = self._poller is None or self._first_listing.wait(self.config.initial_pod_resources_wait)
        if not listed:
            log.warning(
                "pod-resources has not answered yet: each card stays in the pool it was last in "
                "(or unserved) until it does"
            )
        if self.dra is not None:
            self.dra.start()
        self.applier.start()
        self._threads.append(self.applier.thread)
        control = threading.Thread(target=self._control_loop, name="daemon-control", daemon=True)
        self._threads.append(control)
        self._post(Recompute("start"))
        control.start()
        self._watcher.start()
        if self._first_apply.wait(first_apply_wait):
            self.applier.wait_idle(first_apply_wait)

    def stop(self) -> None:
        """Remove every socket at once, then stop the rest; registrations are left for kubelet to expire.

        A daemon shutdown does not drain: a restarting daemon must not make kubelet forget devices
        that pods hold. Sockets go in parallel, so SIGTERM is served in milliseconds even while
        kubelet hangs.

        The watchers (kubelet's directory, the pool sources) stop in the same wave, their threads
        started a fraction of a millisecond before the servers': each closes an inotify instance,
        and the kernel's close of one with a watch waits out a grace period (fsnotify's SRCU: up to
        20 ms here) doing nothing. Begun after the servers had stopped, that wait came on top of
        theirs; begun first, it passes while they work. It cannot be skipped: the process's exit
        closes the instance and waits just the same.
        """
        if self._stop.is_set():
            return
        self._stop.set()
        self._events.put((time.monotonic(), Stop()))
        servers = self.applier.shutdown()
        stops: list[Callable[[], None]] = [self._watcher.stop, *(source.stop for source in self._sources)]
        stops += [partial(server.stop, drain=False) for server in servers]
        if self.dra is not None:
            stops.append(self.dra.stop)
        _run_side_by_side(stops, SHUTDOWN_WAIT)
        if self._poller is not None:
            self._poller.stop()
        self._supervisor.stop()
        for name, backend in self._backends.items():
            close_backend(name, backend)
        self._lock.release()
        self._notify()

    def view(self) -> DaemonView:
        """A snapshot from published values; never waits for the control loop."""
        published = self._published
        state = published.state
        applied = self.applier.applied_desired
        pools = {}
        for name, server in self.applier.servers.items():
            snapshot = server.state.snapshot
            pools[name] = PoolView(snapshot.pool, snapshot.units, server.status())
        inventory = state.inventory()
        cards = tuple(_with_health(card, state.health) for card in sorted(inventory.cards, key=_card_id))
        ours = {c.id for c in inventory.cards} | {p.id for p in inventory.partitions}
        listed = self._poller.allocations if self._poller is not None else ()
        return DaemonView(
            cards=cards,
            pools=MappingProxyType(pools),
            conflicts=applied.conflicts,
            draining=applied.draining,
            held=published.held,
            layout_errors=tuple(m for m in state.layout_attempts.values() if m),
            config_errors=state.config_errors + tuple(sorted(published.desired.unsupported.values())),
            absent_backends=self._absent,
            failed_backends=state.failed,
            applied_changes=self.applier.applied_changes,
            awaiting=applied.awaiting,
            pod_resources_error=self._poller.last_error if self._poller is not None else "",
            waiting_for=published.waiting_for,
            wanted_pools=tuple(sorted(device_plugin_pools(published.desired.pools))),
            dra_problem=self.dra.problem() if self.dra is not None else "",
            cdi_dir=str(self.config.cdi_dir or ""),
            cdi_error=self.cdi.last_error if self.cdi is not None else "",
            allocations=tuple(a for a in listed if hardware_id_of(a.device) in ours),
            draining_since=MappingProxyType(
                {c: published.draining_since[c] for c in applied.draining if c in published.draining_since}
            ),
            running_backends=tuple(sorted(self._backends)),
        )

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
                self._changed.wait_for(lambda seen=seen: self._generation != seen, min(remaining, 0.5))  # type: ignore[misc]

    def wait_streaming(self, timeout: float) -> bool:
        """Block until every pool served now has registered with kubelet and handed it the first
        list on its ListAndWatch stream: True; False once the daemon stops or ``timeout`` passes (a
        pool that cannot register waits it out).

        For work that should come after "registered and streaming" without delaying it (``run``
        builds its HTTP server, loads the allocator's search and collects then). An open stream is
        not enough: work woken by the last stream's opening would hold the interpreter while that
        stream's first list waits to go out. Servers report registrations, streams and first lists
        through :meth:`_notify`, so this sleeps on the generation like :meth:`wait_for`, without views.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                seen = self._generation
            if self._stop.is_set():
                return False
            servers = list(self.applier.servers.values())
            if all(s.streaming for s in servers):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._changed:
                self._changed.wait_for(lambda seen=seen: self._generation != seen, remaining)  # type: ignore[misc]

    def prepare_allocation(self) -> None:
        """Load the allocator and build every pool's topology, which a start leaves for later: the
        pools stream without them, and ``run`` calls this once they do, so that kubelet's first
        GetPreferredAllocation pays for neither on a pod's admission. From then on each pool's
        topology is built as soon as an apply has served it."""
        load_preferred_allocation()
        self.applier.prepare_allocation()

    def thread_liveness(self) -> dict[str, bool]:
        """Thread name → alive, for every long-lived thread the daemon started (read by /healthz)."""
        return {thread.name: thread.is_alive() for thread in self._threads}

    def stalled(self) -> list[str]:
        """Why the control loop looks wedged (an event waiting over STALL_SECONDS), for /healthz."""
        oldest = self._oldest_pending
        if oldest and time.monotonic() - oldest > STALL_SECONDS:
            return [f"control loop has not taken an event for {time.monotonic() - oldest:.0f}s"]
        return []

    def links(self) -> LinkMatrix:
        """Card-to-card links of every backend, merged (for the node report and the allocator)."""
        return self._published.state.inventory().links

    def server(self, pool_name: str) -> PluginServer:
        return self.applier.servers[pool_name]

    def edits_for(self, pool: Pool, units: Sequence[Unit]) -> ContainerEdits:
        """ContainerEdits for units of one pool, asking each owning backend for its own units, shaped
        for the pool's ``deviceDelivery``. In memory only: the CDI names are computed, not looked up."""
        by_backend: dict[str, list[Unit]] = {}
        for unit in units:
            by_backend.setdefault(unit.backend, []).append(unit)
        edits = ContainerEdits()
        for name, group in by_backend.items():
            edits = edits.merged(self._backends[name].container_edits(group, pool.edit_options()))
        names: tuple[str, ...] = ()
        if pool.device_delivery.uses_cdi:
            if self.cdi is None:
                raise ValueError(
                    f"pool {pool.name} asks for deviceDelivery {pool.device_delivery.value}, "
                    "but this daemon writes no CDI specs (--cdi-dir is empty)"
                )
            names = unit_names(units, self._cdi_kinds)
        return deliver(edits, pool.device_delivery, names, pool.name)

    # -- inputs from other threads -------------------------------------------------------------------

    def _post(self, event: Event) -> None:
        self._events.put((time.monotonic(), event))

    def _listed(self, held: Mapping[str, frozenset[str]], started_at: float) -> None:
        self._post(HeldListed(held, started_at))
        self._first_listing.set()

    def _on_allocate(self, resource: str, unit_ids: Sequence[str]) -> Callable[[], None] | None:
        """On a gRPC thread, before an Allocate answer: hold the ids, ask for a pod-resources read.

        Nothing here waits for or wakes the control loop: the hold is an append under the hold book's
        own lock and the poke a flag the poller acts on after the answer is out (kubelet/poller.py);
        the poller's List then brings the control loop in. Without a poller only a hold on new ids
        wakes it (a repeated Allocate just extends a hold it already counts). Returns how to undo a
        new hold if the servicer refuses the answer after all.
        """
        ids = frozenset(unit_ids)
        new = self._holds.add(resource, ids)
        if self._poller is not None:
            self._poller.poke()
        elif new:
            self._post(Recompute("allocated"))
        return (lambda: self._holds.remove(resource, ids)) if new else None

    def _kubelet_restarted(self) -> None:
        identity = file_identity(self.config.plugin_dir / self.config.kubelet_socket_name)
        for server in self.applier.servers.values():
            server.request_restart("kubelet.sock re-created", kubelet_identity=identity)

    def _check_sockets(self) -> None:
        """Once a second and on directory events: our sockets, and our lock file, still in place."""
        self._lock.ensure()
        for server in self.applier.servers.values():
            server.check_socket()

    # -- control loop --------------------------------------------------------------------------------

    def _control_loop(self) -> None:
        while True:
            posted, first = self._events.get()
            self._oldest_pending = posted
            batch = [first]
            while True:
                try:
                    batch.append(self._events.get_nowait()[1])
                except queue.Empty:
                    break
            if any(isinstance(e, Stop) for e in batch):
                return
            try:
                self._handle(batch)
            except Exception:
                log.exception("control loop failed to apply %d event(s); state kept", len(batch))
            finally:
                self._oldest_pending = 0.0

    def _handle(self, batch: list[Event]) -> None:
        state = self._state
        changed = False
        transitions: list[Transition] = []
        for event in batch:
            folded = fold(state, event)
            state = folded.state
            changed |= folded.changed
            transitions += folded.transitions
            if folded.listed_at is not None:
                changed |= self._holds.settle(
                    state.listed_held, folded.listed_at, self.config.allocation_settle_seconds
                )
        holds_version = self._holds.version
        changed |= holds_version != self._holds_seen
        if state.inventories is not self._state.inventories:
            # A backend rediscovered: an unchanged unit list may now need other edits.
            for server in self.applier.servers.values():
                server.state.forget_answers()
        self._state = state
        if changed:
            self._holds_seen = holds_version
            self._recompute()
        # Observers hear of a transition only once views show it: the node labeler, poked here,
        # reads the view at once and would otherwise count the card's old health.
        for transition in transitions:
            self._report(transition)
        self._first_apply.set()

    def _report(self, transition: Transition) -> None:
        if self._observer is not None:
            self._observer.health_transition(transition.device_id, transition.health.value)
        level = logging.WARNING if transition.health is Health.UNHEALTHY else logging.INFO
        log.log(
            level,
            "%s %s is %s: %s",
            transition.backend,
            transition.device_id,
            transition.health.value,
            transition.reason,
            extra={
                "backend": transition.backend,
                "card": transition.device_id,
                "health": transition.health.value,
                "reason": transition.reason,
            },
        )

    def _recompute(self) -> None:
        state = self._state
        inventory = state.inventory()
        now = time.monotonic()
        provisional = self._holds.active(now)
        # Cards prepared for ResourceClaims are held like cards pod-resources lists (keys "dra:…").
        listed = {**state.listed_held, **(self.dra.holds() if self.dra is not None else {})}
        held = held_cards(inventory, listed, provisional, now)
        blocked: frozenset[str] = frozenset()
        if self._poller is not None and not state.held_known:
            held, blocked = restart_holds(self._records, [c.id for c in inventory.cards], held)
        requests = self._layout_requests(state, inventory, held, blocked)
        cards = {c.id: c for c in inventory.cards}
        for request in requests:
            self._supervisor.lay_out(request, cards[request.card_id])
        if requests:
            state = start_layouts(state, frozenset((r.card_id, r.profile) for r in requests))
            self._state = state
        desired = desired_state(
            state.poolset,
            inventory,
            self.config.node_name,
            health=state.health,
            previous_assignment=self._desired.assignment,
            held=held,
            blocked=blocked,
            sharing_support=self._sharing_support,
            shared_as=self._shared_as,
        )
        _log_changes(self._desired, desired)
        self._desired = desired
        since = self._published.draining_since
        self._draining_since = MappingProxyType({c: since.get(c, now) for c in desired.draining})
        self._shared_as = shared_as_now(desired, held, self._shared_as)
        self._share(sharing_requests(desired, held, self._sharing), cards)
        if self.dra is not None:
            self.dra.apply(dra_pools(desired.pools), inventory, state.health)
        self.applier.submit(ApplyJob(desired, inventory, listed, frozenset(state.inventories)))
        self._store.save_holds(provisional)
        self._publish(held=held, waiting_for="")

    def _layout_requests(
        self, state: NodeState, inventory: Inventory, held: Mapping[str, HeldCard], blocked: frozenset[str]
    ) -> list[LayoutRequest]:
        """The partition layouts to make now (see layouts.py); none, and the planner not even loaded,
        while no pool hands out partitions, as on most nodes."""
        if not any(pool.unit is UnitKind.PARTITION for pool in state.poolset.pools):
            return []
        from hcs_deviceplugin.layouts import layout_requests

        attempted = set(state.layout_attempts) | set(state.layouts_running)
        return layout_requests(
            state.poolset, inventory, self.config.node_name, held, state.held_known, attempted, blocked
        )

    def _share(self, requests: dict[str, SharingRequest], cards: Mapping[str, Card]) -> None:
        """Tell each sharing backend which of its cards to share now, when that changed (the call only
        records: see backend.py)."""
        if requests == self._sharing and self._sharing_told:
            return
        self._sharing, self._sharing_told = requests, True
        for name, backend in self._backends.items():
            if not self._sharing_support.get(name):
                continue
            mine = {c: r for c, r in requests.items() if c in cards and cards[c].backend == name}
            configure_sharing(name, backend, mine)

    def _publish(self, held: Mapping[str, HeldCard] | None = None, waiting_for: str | None = None) -> None:
        old = self._published
        self._published = _Published(
            self._state,
            self._desired,
            MappingProxyType(dict(held)) if held is not None else old.held,
            old.waiting_for if waiting_for is None else waiting_for,
            self._draining_since,
        )
        self._notify()

    # -- servers ---------------------------------------------------------------------------------

    def _new_server(self, want: DesiredPool, topology: PoolTopology) -> PluginServer:
        resource = want.pool.resource_name
        pool_name = want.pool.name

        def on_allocate(_pool: str, ids: Sequence[str]) -> Callable[[], None] | None:
            return self._on_allocate(resource, ids)

        def on_registered(count: int) -> None:
            if count > 1 and self._observer is not None:
                self._observer.reregistration(pool_name)

        server = PluginServer(
            want.pool,
            want.units,
            self.config.plugin_dir,
            self.edits_for,
            kubelet_socket=self.config.plugin_dir / self.config.kubelet_socket_name,
            on_allocate=on_allocate,
            on_status=self._notify,
            backoff=self.config.registration_backoff,
            interceptors=self._interceptors_for(pool_name) if self._interceptors_for else (),
            topology=topology,
            on_registered=on_registered,
        )
        server.start()
        return server

    def _dra_cdi_ready(self, devices: Sequence[DraDevice]) -> str:
        """For the DRA preparer: "" when the written specs name every device, else why not."""
        if self.cdi is None:
            return "CDI specs are off (no --cdi-dir): a DRA claim cannot be delivered"
        missing = sorted(d.cdi_name for d in devices if d.cdi_name not in self.cdi.names)
        return f"the CDI specs do not name {missing} yet" if missing else ""

    def _publish_cdi(self, job: ApplyJob) -> None:
        """On the applier thread: the CDI specs follow the inventory (see cdi/publisher.py)."""
        if self.cdi is None:
            return
        try:
            written = self.cdi.publish(job.inventory, job.discovered)
        except Exception:  # a spec that cannot be built must not keep the pools from being served
            log.exception("CDI specs not refreshed; the pools are applied regardless")
            written = False
        if not written and not self._stop.is_set():
            # Nothing else may change for hours: ask for another apply, which retries the write.
            retry = threading.Timer(CDI_RETRY_SECONDS, self._post, args=(Recompute("retry the CDI specs"),))
            retry.daemon = True
            retry.start()

    def _notify(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()


def _log_changes(before: Desired, after: Desired) -> None:
    for card_id, claimants in after.conflicts.items():
        if card_id not in before.conflicts:
            log.error(
                "card %s is claimed by pools %s: neither new claimant gets it",
                card_id,
                list(claimants),
                extra={"card": card_id, "pools": list(claimants)},
            )
    for card_id, (holder, wanted) in after.draining.items():
        if before.draining.get(card_id) != (holder, wanted):
            log.warning(
                "card %s draining: held under %s, goes to pool %s once released",
                card_id,
                holder,
                wanted,
                extra={"card": card_id, "resource": holder, "pool": wanted},
            )
    for card_id in set(before.draining) - set(after.draining):
        log.info("card %s released: draining over", card_id, extra={"card": card_id})
    for card_id, why in after.unsupported.items():
        if before.unsupported.get(card_id) != why:
            log.error("card %s is not served: %s", card_id, why, extra={"card": card_id})
    for card_id, wanted in after.awaiting.items():
        if card_id not in before.awaiting:
            log.warning(
                "card %s waits for pod-resources before pool %s may advertise it",
                card_id,
                wanted,
                extra={"card": card_id, "pool": wanted},
            )


def _run_side_by_side(calls: Sequence[Callable[[], None]], timeout: float) -> None:
    """Run ``calls`` on their own threads and wait for all of them, at most ``timeout`` in total."""
    threads = [threading.Thread(target=call, daemon=True) for call in calls]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


def _card_id(card: Card) -> str:
    return card.id


def _with_health(card: Card, health: Mapping[str, Health]) -> Card:
    wanted = health.get(card.id, card.health)
    return card if wanted is card.health else replace(card, health=wanted)
