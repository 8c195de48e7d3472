"""Prometheus metrics of the daemon, on a registry of our own.

Two kinds of metric, because they come from two places:

* **State** (units, health, registration, conflicts, backends) is read from ``Daemon.view()`` when
  Prometheus scrapes, by :class:`ViewCollector`. Nothing is copied ahead of time and no thread polls,
  so a scrape always shows one consistent snapshot and a metric can never go stale between scrapes.
* **Events** (Allocate latency, health transitions, config errors and reloads, re-registrations) happen
  between scrapes and would be lost by a snapshot, so they are kept as Counters and Histograms in
  :class:`Metrics`, whose methods the daemon, the pool sources and the gRPC layer call.

The registry is our own, not prometheus-client's global default, so tests can build as many daemons
as they like in one process and a library we import can never add series to our ``/metrics``.
Names follow Prometheus conventions: ``hcs_`` prefix, base units (seconds, bytes), ``_total`` for
counters. The table of every metric is in the observability section of the README.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector

from hcs_deviceplugin.daemon import DaemonView
from hcs_deviceplugin.model import Health
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


class ViewCollector:
    """Reads one :class:`DaemonView` per scrape and turns it into gauge and counter families."""

    def __init__(self, view: ViewFunction) -> None:
        self._view = view

    def describe(self) -> Iterable[Metric]:
        """The families without samples, so the registry can refuse a clashing name at registration."""
        return self._families(None)

    def collect(self) -> Iterable[Metric]:
        return self._families(self._view())

    def _families(self, view: DaemonView | None) -> Iterator[Metric]:
        pool_labels = ["pool", "resource"]
        units = GaugeMetricFamily(
            "hcs_pool_units", "Units the pool advertises to kubelet.", labels=pool_labels
        )
        healthy = GaugeMetricFamily(
            "hcs_pool_units_healthy", "Advertised units that are Healthy.", labels=pool_labels
        )
        allocated = GaugeMetricFamily(
            "hcs_pool_units_allocated",
            "Advertised units that running containers hold (pod-resources, or just allocated).",
            labels=pool_labels,
        )
        registered = GaugeMetricFamily(
            "hcs_pool_registered", "1 while the pool is registered with kubelet, else 0.", labels=pool_labels
        )
        registrations = CounterMetricFamily(
            "hcs_pool_registrations",
            "Successful Register calls of the pool's current server (resets when the server is replaced).",
            labels=pool_labels,
        )
        card_healthy = GaugeMetricFamily(
            "hcs_card_healthy",
            "1 if the card is Healthy, else 0; pool is empty for a card no pool advertises.",
            labels=["card", "vendor", "model", "pool"],
        )
        draining = GaugeMetricFamily(
            "hcs_cards_draining", "Cards waiting for a container to release them before they change pool."
        )
        awaiting = GaugeMetricFamily(
            "hcs_cards_awaiting_pod_resources",
            "Cards held back after a restart until pod-resources says what running containers hold.",
        )
        conflicts = GaugeMetricFamily(
            "hcs_card_conflicts", "Cards claimed by more than one pool (no new claimant gets them)."
        )
        backend_up = GaugeMetricFamily(
            "hcs_backend_up", "1 if the vendor backend is running, 0 if absent or failed.", labels=["backend"]
        )
        backend_info = InfoMetricFamily(
            "hcs_backend", "Vendor backend state (running, absent, failed) and why.", labels=["backend"]
        )
        applied = CounterMetricFamily(
            "hcs_config_applied_changes", "Reconciles that changed at least one pool server."
        )
        active_errors = GaugeMetricFamily(
            "hcs_config_active_errors", "Pool config errors in effect now (the last good pools are served)."
        )
        layout_errors = GaugeMetricFamily(
            "hcs_partition_layout_errors", "Cards a Partition pool could not lay out with its profile."
        )
        if view is not None:
            held = held_units_by_resource(view)
            for name, pool_view in sorted(view.pools.items()):
                labels = [name, pool_view.pool.resource_name]
                held_here = held.get(pool_view.pool.resource_name, frozenset())
                units.add_metric(labels, len(pool_view.units))
                healthy.add_metric(labels, sum(1 for u in pool_view.units if u.health is Health.HEALTHY))
                allocated.add_metric(labels, sum(1 for u in pool_view.units if u.id in held_here))
                is_registered = pool_view.server.status is RegistrationStatus.REGISTERED
                registered.add_metric(labels, 1 if is_registered else 0)
                registrations.add_metric(labels, pool_view.server.registrations)
            owner = pool_of_cards(view)
            for card in view.cards:
                card_healthy.add_metric(
                    [card.id, card.vendor, card.model, owner.get(card.id, "")],
                    1 if card.health is Health.HEALTHY else 0,
                )
            draining.add_metric([], len(view.draining))
            awaiting.add_metric([], len(view.awaiting))
            conflicts.add_metric([], len(view.conflicts))
            for backend, (state, reason) in backend_states(view).items():
                backend_up.add_metric([backend], 1 if state == "running" else 0)
                backend_info.add_metric([backend], {"state": state, "reason": reason})
            applied.add_metric([], view.applied_changes)
            active_errors.add_metric([], len(view.config_errors))
            layout_errors.add_metric([], len(view.layout_errors))
        yield from (
            units,
            healthy,
            allocated,
            registered,
            awaiting,
            registrations,
            card_healthy,
            draining,
            conflicts,
            backend_up,
            backend_info,
            applied,
            active_errors,
            layout_errors,
        )


class Metrics:
    """The daemon's registry: event counters and histograms, plus the view collector once bound.

    Create it first, hand its methods to whatever observes events, then :meth:`bind` it to the
    daemon's ``view`` (``ObservabilityServer`` does that if nobody has). All methods are thread-safe:
    gRPC threads, the control thread and source threads call them concurrently.
    """

    def __init__(self, view: ViewFunction | None = None, process_metrics: bool = True) -> None:
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()
        self._bound = False
        self._last_errors: dict[tuple[str, str], tuple[str, ...]] = {}
        if process_metrics:
            ProcessCollector(registry=self.registry)
        self._allocate_seconds = Histogram(
            "hcs_allocate_seconds",
            "Time to answer kubelet's Allocate, per pool.",
            ["pool"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._allocate_requests = Counter(
            "hcs_allocate_requests",
            "Allocate calls by result (ok, or rejected: unknown or unhealthy ids, edits failed).",
            ["pool", "result"],
            registry=self.registry,
        )
        self._preferred_seconds = Histogram(
            "hcs_preferred_allocation_seconds",
            "Time to answer kubelet's GetPreferredAllocation, per pool.",
            ["pool"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._health_transitions = Counter(
            "hcs_health_transitions",
            "Card or partition health changes, by device and the health it changed to.",
            ["card", "to"],
            registry=self.registry,
        )
        self._config_errors = Counter(
            "hcs_config_errors",
            "Pool config errors reported, by source (file, api) and object (namespace/name or path).",
            ["source", "object"],
            registry=self.registry,
        )
        self._config_reloads = Counter(
            "hcs_config_reloads",
            "Pool config deliveries from a source (each re-read of the directory or API change).",
            ["source"],
            registry=self.registry,
        )
        self._reregistrations = Counter(
            "hcs_pool_reregistrations",
            "Registrations repeated after kubelet restarted or the pool's socket was removed.",
            ["pool"],
            registry=self.registry,
        )
        if view is not None:
            self.bind(view)

    @property
    def bound(self) -> bool:
        with self._lock:
            return self._bound

    def bind(self, view: ViewFunction) -> None:
        """Serve the daemon's state metrics from ``view`` (called per scrape). Only once per registry."""
        with self._lock:
            if self._bound:
                raise RuntimeError("Metrics is already bound to a daemon view")
            self.registry.register(ViewCollector(view))
            self._bound = True

    def observe_allocate(self, pool: str, seconds: float, ok: bool) -> None:
        self._allocate_seconds.labels(pool).observe(seconds)
        self._allocate_requests.labels(pool, "ok" if ok else "rejected").inc()

    def observe_preferred(self, pool: str, seconds: float) -> None:
        self._preferred_seconds.labels(pool).observe(seconds)

    def health_transition(self, card: str, to: str) -> None:
        """A card or partition changed health; ``to`` is ``Healthy`` or ``Unhealthy``."""
        self._health_transitions.labels(card, str(to)).inc()

    def config_error(self, source: str, object: str) -> None:
        """A pool source reported a (new) error for ``object``; counted once per report."""
        self._config_errors.labels(source, object).inc()

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
