"""Metrics: what an Allocate observation costs the gRPC thread, and what writing ``/metrics`` costs.

* **observe**: one pool's bound Allocate observer (histogram + result counter), as the interceptor
  calls it once per Allocate; timed per batch of calls, interleaved with the same observation
  through prometheus-client's Histogram and Counter (the library it replaced, a dev dependency)
  and a no-op Python call, the floor.
* **exposition**: the text of a registry shaped like a 16-card, 8-pool node's event metrics (every
  series primed, some observed), against prometheus-client's ``generate_latest`` of the very same
  families in the same run.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable

import prometheus_client
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from bench.common import Result, headline, interleaved, short
from hcs_deviceplugin.observability.exposition import Family
from hcs_deviceplugin.observability.metrics import LATENCY_BUCKETS, Metrics

POOLS = 8
CARDS = 16
BATCH = 1000

Observe = Callable[[float, bool], None]


def _observers() -> tuple[Observe, Observe]:
    """Ours for pool-0, and the same two updates through prometheus-client."""
    ours = Metrics(process_metrics=False).allocate_observer("pool-0")
    registry = prometheus_client.CollectorRegistry()
    seconds = prometheus_client.Histogram(
        "x_seconds", "X.", ["pool"], buckets=LATENCY_BUCKETS, registry=registry
    ).labels("pool-0")
    ok = prometheus_client.Counter("x_requests", "X.", ["pool", "result"], registry=registry).labels(
        "pool-0", "ok"
    )

    def reference(duration: float, _succeeded: bool) -> None:
        seconds.observe(duration)
        ok.inc()

    return ours, reference


def _batch(observe: Observe) -> Callable[[], None]:
    def calls() -> None:
        for _ in range(BATCH):
            observe(0.0003, True)

    return calls


def bench_observe(rounds: int) -> list[Result]:
    ours, reference = _observers()

    def noop(_duration: float, _succeeded: bool) -> None:
        return None

    timings = interleaved([_batch(noop), _batch(reference), _batch(ours)], rounds)
    floor_s, ref_s, ours_s = ([s / BATCH for s in samples] for samples in timings)
    return [
        Result("observe: a no-op Python call (floor)", floor_s),
        Result("observe: prometheus-client Histogram+Counter", ref_s),
        Result("observe: ours (vs prometheus-client)", ours_s, statistics.median(ref_s)),
    ]


def _node_metrics() -> Metrics:
    metrics = Metrics(process_metrics=False)
    for pool in range(POOLS):
        metrics.pool_seen(f"pool-{pool}")
        observe = metrics.allocate_observer(f"pool-{pool}")
        for n in range(50):
            observe(0.0001 * n, n % 10 != 0)
    for card in range(CARDS):
        metrics.device_seen(f"GPU-{card:08x}-0000-4000-8000-{card:012x}")
    metrics.config_objects_seen([("file", "pools.yaml")])
    return metrics


class _Same(Collector):
    """Our families as prometheus-client Metric objects, for its ``generate_latest``."""

    def __init__(self, families: Iterable[Family]) -> None:
        self._metrics: list[Metric] = []
        for family in families:
            metric = Metric(family.name, family.help, family.kind)
            for name, labels, value in family.samples:
                metric.add_sample(name, dict(labels), value)
            self._metrics.append(metric)

    def collect(self) -> Iterable[Metric]:
        return self._metrics


def bench_exposition(rounds: int) -> list[Result]:
    metrics = _node_metrics()
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(_Same(metrics.registry.collect()))
    ours = metrics.registry.exposition()
    theirs = prometheus_client.generate_latest(registry)
    if ours != theirs:
        raise AssertionError("the two expositions differ: the comparison would be meaningless")
    ref_s, ours_s = interleaved(
        [lambda: prometheus_client.generate_latest(registry), metrics.registry.exposition], rounds
    )
    return [
        Result(f"exposition, {len(ours)} bytes: prometheus-client", ref_s),
        Result("exposition: ours (vs prometheus-client)", ours_s, statistics.median(ref_s)),
    ]


def run(rounds: int = 300) -> list[str]:
    observe = bench_observe(rounds)
    exposition = bench_exposition(rounds)
    headline(
        "metrics: one Allocate observation (median)",
        short(observe[2].median),
        f"prometheus-client {short(observe[1].median)}; no-op call {short(observe[0].median)}",
    )
    headline(
        "metrics: exposition of a 16-card / 8-pool node's event series (median)",
        short(exposition[1].median),
        f"prometheus-client's generate_latest of the same families {short(exposition[0].median)}",
    )
    return [r.line() for r in (*observe, *exposition)]
