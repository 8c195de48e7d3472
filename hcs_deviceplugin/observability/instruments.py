"""Labelled counters and histograms that live between scrapes, and the registry a scrape reads.

The event side of our metrics (Allocate latency, health transitions, config errors): each call site
binds its series once with :meth:`Counter.labels` / :meth:`Histogram.labels` and then only adds to
it, so an observation is a bisect and a few additions under the series' own lock, a few
microseconds at most, and two pools never wait for each other. Series are never removed, so a
bound one stays live. ``labels()`` creates a series at 0, which is how every counter is exposed
before its first event (``increase()`` cannot see the first event of a series born with it).

:class:`Registry` is the list of collectors one ``/metrics`` answers from, refusing two that expose
the same name.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from itertools import pairwise
from typing import Generic, Protocol, TypeVar

from hcs_deviceplugin.observability.exposition import Family, format_value, render


class Collector(Protocol):
    """Anything that yields metric families per scrape, and describes them (samples not needed)."""

    def collect(self) -> Iterable[Family]: ...

    def describe(self) -> Iterable[Family]: ...


class CounterSeries:
    """One counter series: only goes up."""

    __slots__ = ("_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if not amount >= 0:
            raise ValueError(f"a counter only goes up: cannot add {amount!r}")
        with self._lock:
            self._value += amount

    @property
    def value(self) -> float:
        with self._lock:
            return self._value


class HistogramSeries:
    """One histogram series: a count per bucket (not cumulative until exposed) and the sum."""

    __slots__ = ("_bounds", "_counts", "_lock", "_sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._lock = threading.Lock()
        self._bounds = bounds
        self._counts = [0] * len(bounds)
        self._sum = 0.0

    def observe(self, amount: float) -> None:
        """Count ``amount`` in the first bucket whose upper bound is at least it (``le``)."""
        index = bisect_left(self._bounds, amount)
        with self._lock:
            self._counts[index] += 1
            self._sum += amount

    def snapshot(self) -> tuple[list[int], float]:
        """Per-bucket counts and sum, read together."""
        with self._lock:
            return list(self._counts), self._sum


S = TypeVar("S", CounterSeries, HistogramSeries)


class _Labelled(Generic[S]):
    """The series of one family by label values, created on first use."""

    def __init__(self, name: str, help: str, label_names: Sequence[str], kind: str) -> None:
        # A Family checks the names now, so a bad one fails where it is declared.
        Family(name, help, "counter" if kind == "counter" else "histogram", label_names)
        self.name = name
        self.help = help
        self.label_names = tuple(label_names)
        self._lock = threading.Lock()
        self._series: dict[tuple[str, ...], S] = {}

    def labels(self, *values: object) -> S:
        """The series of these label values (in declaration order), created at 0 if new."""
        key = tuple(str(v) for v in values)
        series = self._series.get(key)
        if series is not None:
            return series
        if len(key) != len(self.label_names):
            raise ValueError(
                f"{self.name}: {len(key)} label value(s) for label(s) ({', '.join(self.label_names)})"
            )
        with self._lock:
            return self._series.setdefault(key, self._new())

    def _new(self) -> S:
        raise NotImplementedError

    def _all(self) -> list[tuple[tuple[str, ...], S]]:
        with self._lock:
            return list(self._series.items())


class Counter(_Labelled[CounterSeries]):
    """A counter family with labels; exposed as ``<name>_total``."""

    def __init__(self, name: str, help: str, label_names: Sequence[str]) -> None:
        super().__init__(name, help, label_names, "counter")

    def _new(self) -> CounterSeries:
        return CounterSeries()

    def describe(self) -> Iterator[Family]:
        yield Family(self.name, self.help, "counter", self.label_names)

    def collect(self) -> Iterator[Family]:
        family = Family(self.name, self.help, "counter", self.label_names)
        for values, series in self._all():
            family.add(values, series.value)
        yield family


class Histogram(_Labelled[HistogramSeries]):
    """A histogram family with labels; ``buckets`` are the finite upper bounds, ``+Inf`` is added."""

    def __init__(self, name: str, help: str, label_names: Sequence[str], buckets: Sequence[float]) -> None:
        super().__init__(name, help, label_names, "histogram")
        if "le" in self.label_names:
            raise ValueError(f"{name}: 'le' is the bucket label of a histogram, not one of its own")
        bounds = [float(b) for b in buckets]
        if bounds and bounds[-1] == math.inf:
            bounds.pop()
        if not bounds or any(math.isnan(b) or math.isinf(b) for b in bounds):
            raise ValueError(f"{name}: buckets must be finite numbers, at least one: {list(buckets)}")
        if any(a >= b for a, b in pairwise(bounds)):
            raise ValueError(f"{name}: buckets must increase strictly: {list(buckets)}")
        self.bounds = (*bounds, math.inf)
        self._le = tuple(format_value(b) for b in self.bounds)

    def _new(self) -> HistogramSeries:
        return HistogramSeries(self.bounds)

    def describe(self) -> Iterator[Family]:
        yield Family(self.name, self.help, "histogram", self.label_names)

    def collect(self) -> Iterator[Family]:
        family = Family(self.name, self.help, "histogram", self.label_names)
        bucket, count, total = self.name + "_bucket", self.name + "_count", self.name + "_sum"
        for values, series in self._all():
            labels = family.labels_of(values)
            counts, sum_ = series.snapshot()
            cumulative = 0
            for le, n in zip(self._le, counts, strict=True):
                cumulative += n
                family.samples.append((bucket, (*labels, ("le", le)), float(cumulative)))
            family.samples.append((count, labels, float(cumulative)))
            family.samples.append((total, labels, sum_))
        yield family


class Constant:
    """Families that never change (the build info), collected as they are."""

    def __init__(self, *families: Family) -> None:
        self._families = families

    def describe(self) -> Iterable[Family]:
        return self._families

    def collect(self) -> Iterable[Family]:
        return self._families


def exposed_names(family: Family) -> set[str]:
    """Every sample name the family can expose: what must be unique across one registry."""
    if family.kind == "histogram":
        return {family.name + suffix for suffix in ("_bucket", "_count", "_sum")}
    return {family.exposed_name}


class Registry:
    """The collectors one ``/metrics`` answers from, in registration order.

    Our own per daemon rather than a process-wide default, so tests can build as many as they like
    and no library we import can add series to our ``/metrics``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._collectors: list[Collector] = []
        self._names: set[str] = set()

    def register(self, collector: Collector) -> None:
        """Add ``collector``; ValueError (and nothing added) if it exposes a name already exposed."""
        names: set[str] = set()
        for family in collector.describe():
            names |= exposed_names(family)
        with self._lock:
            clash = names & self._names
            if clash:
                raise ValueError(f"metric name(s) already registered: {', '.join(sorted(clash))}")
            self._names |= names
            self._collectors.append(collector)

    def collect(self) -> Iterator[Family]:
        with self._lock:
            collectors = list(self._collectors)
        for collector in collectors:
            yield from collector.collect()

    def exposition(self, names: Iterable[str] | None = None) -> bytes:
        """The text exposition of every family; with ``names``, only the samples so named."""
        if names is None:
            return render(self.collect())
        wanted = frozenset(names)
        kept = (family.restricted(wanted) for family in self.collect())
        return render(family for family in kept if family is not None)
