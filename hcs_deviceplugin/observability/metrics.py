"""Prometheus metrics of the daemon, on a registry of our own.

Two kinds of metric, because they come from two places:

* **State** (units, health, registration, conflicts, backends) is read from ``Daemon.view()`` when
  Prometheus scrapes, by :class:`ViewCollector`. Nothing is copied ahead of time and no thread polls,
  so a scrape always shows one consistent snapshot and a metric can never go stale between scrapes.
* **Events** (Allocate latency, health transitions, config errors and reloads, re-registrations) happen
  between scrapes and would be lost by a snapshot, so they are kept as Counters and Histograms in
  :class:`Metrics`, whose methods the daemon, the pool sources and the gRPC layer call.

The registry is our own (:mod:`.instruments`, written out by :mod:`.exposition`; prometheus-client is
not imported at run time), so tests can build as many daemons as they like in one process and a
library we import can never add series to our ``/metrics``.
Names follow Prometheus conventions: ``hcs_`` prefix, base units (seconds, bytes), ``_total`` for
counters. The table of every metric is in the observability section of the README.

Every counter is exposed at 0 before its first event, for every label set known by then (each pool,
card and partition the daemon serves, each configured pool source), because ``increase()`` and
``rate()`` cannot see the first event of a series that appears with it. There are no ``_created``
series: Prometheus would ingest them as gauges of their own and nothing here needs them.
Identity labels stay stable: a card's health series is keyed by card and vendor only, so moving the
card to another pool does not start a new series; its model and pool are in ``hcs_card_info``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from hcs_deviceplugin import __version__
from hcs_deviceplugin.daemon import DaemonView
from hcs_deviceplugin.holds import hardware_id_of
from hcs_deviceplugin.model import Health
from hcs_deviceplugin.observability.exposition import Family
from hcs_deviceplugin.observability.instruments import Constant, Counter, Histogram, Registry
from hcs_deviceplugin.observability.process import ProcessCollector
from hcs_deviceplugin.plugin.server import RegistrationStatus

LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)
"""Seconds. Allocate is in-memory (invariant 7) and answers in well under a millisecond; kubelet gives
it a few seconds at most. Buckets from 100 µs to 1 s resolve both the normal case and a regression."""

ViewFunction = Callable[[], DaemonView]

CONFIG_SOURCES = ("file",)
"""Pool sources every daemon has (the mounted directory); the runner adds ``api`` when it watches."""


def backend_states(view: DaemonView) -> dict[str, tuple[str, str]]:
    """Backend name → (state, reason), state one of ``running``, ``absent``, ``failed``.

    The view names absent and failed backends; a running one is known only by owning a card, so a
    running backend that found no card does not appear (see the daemon hook in the README).
    """
    states = {card.backend: ("running", "") for card in view.cards}
    states.update({name: ("absent", reason) for name, reason in view.absent_backends.items()})
    states.update({name: ("failed", reason) for name, reason in view.failed_backends.items()})
    return dict(sorted(states.items()))


def held_units_by_resource(view: DaemonView) -> dict[str, frozenset[str]]:
    """Resource name → unit ids that running containers hold under it (pod-resources + provisional)."""
    out: dict[str, set[str]] = {}
    for held in view.held.values():
        out.setdefault(held.resource, set()).update(held.unit_ids)
    return {resource: frozenset(ids) for resource, ids in out.items()}


def pool_of_cards(view: DaemonView) -> dict[str, str]:
    """Card id → the pool that advertises it now (draining and unassigned cards are absent)."""
    owner: dict[str, str] = {}
    for name, pool_view in sorted(view.pools.items()):
        for unit in pool_view.units:
            owner.setdefault(unit.card_id, name)
    return owner


def _gauge(name: str, help: str, label_names: Sequence[str] = ()) -> Family:
    return Family(name, help, "gauge", label_names)


def _counter(name: str, help: str, label_names: Sequence[str] = ()) -> Family:
    return Family(name, help, "counter", label_names)


def _info(name: str, help: str, label_names: Sequence[str] = ()) -> Family:
    return Family(name, help, "info", label_names)


class ViewCollector:
    """Reads one :class:`DaemonView` per scrape and turns it into gauge and counter families."""

    def __init__(self, view: ViewFunction) -> None:
        self._view = view

    def describe(self) -> Iterable[Family]:
        """The families without samples, so the registry can refuse a clashing name at registration."""
        return self._families(None)

    def collect(self) -> Iterable[Family]:
        return self._families(self._view())

    def _families(self, view: DaemonView | None) -> Iterator[Family]:
        pool_labels = ["pool", "resource"]
        units = _gauge("hcs_pool_units", "Units the pool advertises to kubelet.", pool_labels)
        healthy = _gauge("hcs_pool_units_healthy", "Advertised units that are Healthy.", pool_labels)
        allocated = _gauge(
            "hcs_pool_units_allocated",
            "Advertised units that running containers hold (pod-resources, or just allocated).",
            pool_labels,
        )
        registered = _gauge(
            "hcs_pool_registered", "1 while the pool is registered with kubelet, else 0.", pool_labels
        )
        registrations = _counter(
            "hcs_pool_registrations",
            "Successful Register calls of the pool's current server (resets when the server is replaced).",
            pool_labels,
        )
        card_healthy = _gauge("hcs_card_healthy", "1 if the card is Healthy, else 0.", ["card", "vendor"])
        card_info = _info(
            "hcs_card",
            "The card's model and the pool advertising it (empty for none), always 1: join on card.",
            ["card", "vendor"],
        )
        draining = _gauge(
            "hcs_cards_draining", "Cards waiting for a container to release them before they change pool."
        )
        draining_seconds = _gauge(
            "hcs_card_draining_seconds",
            "Seconds since the card started draining (held, but wanted by another pool); absent when not.",
            ["card"],
        )
        allocation_info = _info(
            "hcs_device_allocation",
            "1 per unit a container holds, as pod-resources lists it: who holds which device.",
            ["namespace", "pod", "container", "resource", "device"],
        )
        awaiting = _gauge(
            "hcs_cards_awaiting_pod_resources",
            "Cards held back after a restart until pod-resources says what running containers hold.",
        )
        conflicts = _gauge(
            "hcs_card_conflicts", "Cards claimed by more than one pool (no new claimant gets them)."
        )
        backend_up = _gauge(
            "hcs_backend_up", "1 if the vendor backend is running, 0 if absent or failed.", ["backend"]
        )
        backend_info = _info(
            "hcs_backend", "Vendor backend state (running, absent, failed) and why.", ["backend"]
        )
        applied = _counter("hcs_config_applied_changes", "Reconciles that changed at least one pool server.")
        active_errors = _gauge(
            "hcs_config_active_errors", "Pool config errors in effect now (the last good pools are served)."
        )
        layout_errors = _gauge(
            "hcs_partition_layout_errors", "Cards a Partition pool could not lay out with its profile."
        )
        if view is not None:
            held = held_units_by_resource(view)
            for name, pool_view in sorted(view.pools.items()):
                labels = [name, pool_view.pool.resource_name]
                held_here = held.get(pool_view.pool.resource_name, frozenset())
                units.add(labels, len(pool_view.units))
                healthy.add(labels, sum(1 for u in pool_view.units if u.health is Health.HEALTHY))
                allocated.add(labels, sum(1 for u in pool_view.units if u.id in held_here))
                is_registered = pool_view.server.status is RegistrationStatus.REGISTERED
                registered.add(labels, 1 if is_registered else 0)
                registrations.add(labels, pool_view.server.registrations)
            owner = pool_of_cards(view)
            for card in view.cards:
                card_healthy.add([card.id, card.vendor], 1 if card.health is Health.HEALTHY else 0)
                card_info.add_info(
                    [card.id, card.vendor], {"model": card.model, "pool": owner.get(card.id, "")}
                )
            draining.add([], len(view.draining))
            now = time.monotonic()
            for card_id, since in sorted(view.draining_since.items()):
                draining_seconds.add([card_id], max(0.0, now - since))
            for a in view.allocations:
                allocation_info.add_info([a.namespace, a.pod, a.container, a.resource, a.device], {})
            awaiting.add([], len(view.awaiting))
            conflicts.add([], len(view.conflicts))
            for backend, (state, reason) in backend_states(view).items():
                backend_up.add([backend], 1 if state == "running" else 0)
                backend_info.add_info([backend], {"state": state, "reason": reason})
            applied.add([], view.applied_changes)
            active_errors.add([], len(view.config_errors))
            layout_errors.add([], len(view.layout_errors))
        yield from (
            units,
            healthy,
            allocated,
            registered,
            awaiting,
            registrations,
            card_healthy,
            card_info,
            draining,
            draining_seconds,
            allocation_info,
            conflicts,
            backend_up,
            backend_info,
            applied,
            active_errors,
            layout_errors,
        )


def known_devices(view: DaemonView) -> list[str]:
    """Every card and partition id of the view: the ``card`` values a health transition can carry."""
    ids = {card.id for card in view.cards}
    ids.update(hardware_id_of(unit.id) for pool_view in view.pools.values() for unit in pool_view.units)
    return sorted(ids)


class _EventCollector:
    """The event counters and histograms, with every label set known by the scrape created at 0 first.

    They are kept off the registry and collected through this one collector, so the label sets are
    filled in before the samples are read whatever order the registry collects in.
    """

    def __init__(self, metrics: Sequence[Counter | Histogram], prime: Callable[[], None]) -> None:
        self._metrics = metrics
        self._prime = prime

    def describe(self) -> Iterable[Family]:
        for metric in self._metrics:
            yield from metric.describe()

    def collect(self) -> Iterable[Family]:
        self._prime()
        for metric in self._metrics:
            yield from metric.collect()


class Metrics:
    """The daemon's registry: event counters and histograms, plus the view collector once bound.

    Create it first, hand its methods to whatever observes events, then :meth:`bind` it to the
    daemon's ``view`` (``ObservabilityServer`` does that if nobody has). All methods are thread-safe:
    gRPC threads, the control thread and source threads call them concurrently.

    ``config_sources`` are the pool sources whose reload counter starts at 0 (the directory always;
    the API when it is watched).
    """

    def __init__(
        self,
        view: ViewFunction | None = None,
        process_metrics: bool = True,
        config_sources: Sequence[str] = CONFIG_SOURCES,
    ) -> None:
        self.registry = Registry()
        self._lock = threading.Lock()
        self._view: ViewFunction | None = None
        self._last_errors: dict[tuple[str, str], tuple[str, ...]] = {}
        if process_metrics:
            self.registry.register(ProcessCollector())
        build = _info("hcs_build", "The running daemon: version and Python, always 1.")
        # sys.version's first word is what platform.python_version() parses out of it, without the
        # import (about 2 ms of every start).
        build.add_info((), {"version": __version__, "python": sys.version.split()[0]})
        self.registry.register(Constant(build))
        self._allocate_seconds = Histogram(
            "hcs_allocate_seconds",
            "Time to answer kubelet's Allocate, per pool.",
            ["pool"],
            buckets=LATENCY_BUCKETS,
        )
        self._allocate_requests = Counter(
            "hcs_allocate_requests",
            "Allocate calls by result (ok, or rejected: unknown or unhealthy ids, edits failed).",
            ["pool", "result"],
        )
        self._preferred_seconds = Histogram(
            "hcs_preferred_allocation_seconds",
            "Time to answer kubelet's GetPreferredAllocation, per pool.",
            ["pool"],
            buckets=LATENCY_BUCKETS,
        )
        self._health_transitions = Counter(
            "hcs_health_transitions",
            "Card or partition health changes, by device and the health it changed to.",
            ["card", "to"],
        )
        self._config_errors = Counter(
            "hcs_config_errors",
            "Pool config errors reported, by source (file, api) and object (namespace/name or path).",
            ["source", "object"],
        )
        self._config_reloads = Counter(
            "hcs_config_reloads",
            "Pool config deliveries from a source (a changed mounted directory re-read, an API change).",
            ["source"],
        )
        self._reregistrations = Counter(
            "hcs_pool_reregistrations",
            "Registrations repeated after kubelet restarted or the pool's socket was removed.",
            ["pool"],
        )
        for source in config_sources:
            self._config_reloads.labels(source)
        events: list[Counter | Histogram] = [
            self._allocate_seconds,
            self._allocate_requests,
            self._preferred_seconds,
            self._health_transitions,
            self._config_errors,
            self._config_reloads,
            self._reregistrations,
        ]
        self.registry.register(_EventCollector(events, self._prime_from_view))
        if view is not None:
            self.bind(view)

    @property
    def bound(self) -> bool:
        with self._lock:
            return self._view is not None

    def bind(self, view: ViewFunction) -> None:
        """Serve the daemon's state metrics from ``view`` (called per scrape). Only once per registry."""
        with self._lock:
            if self._view is not None:
                raise RuntimeError("Metrics is already bound to a daemon view")
            self.registry.register(ViewCollector(view))
            self._view = view

    def pool_seen(self, pool: str) -> None:
        """Create the pool's counters and histograms at 0 (done per scrape for every served pool)."""
        self._allocate_seconds.labels(pool)
        self._preferred_seconds.labels(pool)
        for result in ("ok", "rejected"):
            self._allocate_requests.labels(pool, result)
        self._reregistrations.labels(pool)

    def device_seen(self, device: str) -> None:
        """Create the device's health-transition counters at 0, one per health it can change to."""
        for health in Health:
            self._health_transitions.labels(device, health.value)

    def _prime_from_view(self) -> None:
        with self._lock:
            view_function = self._view
        if view_function is None:
            return
        view = view_function()
        for pool in view.pools:
            self.pool_seen(pool)
        for device in known_devices(view):
            self.device_seen(device)

    def allocate_observer(self, pool: str) -> Callable[[float, bool], None]:
        """Observes one pool's Allocate calls (seconds, and whether it answered), its series looked up once.

        A label lookup takes the family's lock and hashes the labels; done per call it was a third
        of Allocate's cost above the gRPC floor. Series are never removed, so bound ones stay live.
        """
        seconds = self._allocate_seconds.labels(pool)
        ok, rejected = (
            self._allocate_requests.labels(pool, "ok"),
            self._allocate_requests.labels(pool, "rejected"),
        )

        def observe(duration: float, succeeded: bool) -> None:
            seconds.observe(duration)
            (ok if succeeded else rejected).inc()

        return observe

    def preferred_observer(self, pool: str) -> Callable[[float, bool], None]:
        """Observes one pool's GetPreferredAllocation seconds, its series looked up once."""
        seconds = self._preferred_seconds.labels(pool)
        return lambda duration, _succeeded: seconds.observe(duration)

    def health_transition(self, card: str, to: str) -> None:
        """A card or partition changed health; ``to`` is ``Healthy`` or ``Unhealthy``."""
        self._health_transitions.labels(card, str(to)).inc()

    def config_error(self, source: str, object: str) -> None:
        """A pool source reported a (new) error for ``object``; counted once per report."""
        self._config_errors.labels(source, object).inc()

    def config_objects_seen(self, objects: Iterable[tuple[str, str]]) -> None:
        """Create the error counter at 0 for each (source, object) read, e.g.
        ``PoolAggregator.known_objects()``, so its first error is an increase from 0."""
        for source, obj in objects:
            self._config_errors.labels(source, obj)

    def config_errors_changed(self, by_object: Mapping[tuple[str, str], Sequence[object]]) -> None:
        """Count what is new in a (source, object) → errors map, e.g. ``PoolAggregator.errors_by_object()``.

        Sources report their whole current state on every change, so the same broken object shows up
        again and again; counting only objects whose errors are new or different keeps the counter
        at "times an object went bad", which is what an alert on its rate wants.
        """
        current = {key: tuple(str(e) for e in errors) for key, errors in by_object.items() if errors}
        with self._lock:
            new = [key for key, errors in current.items() if self._last_errors.get(key) != errors]
            self._last_errors = current
        for source, obj in new:
            self.config_error(source, obj)

    def config_reload(self, source: str) -> None:
        self._config_reloads.labels(source).inc()

    def reregistration(self, pool: str) -> None:
        self._reregistrations.labels(pool).inc()
