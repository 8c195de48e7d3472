"""Event counters and histograms, the registry, and the ``process_*`` metrics from a /proc tree."""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path

import prometheus_client
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hcs_deviceplugin.observability.exposition import Family, render
from hcs_deviceplugin.observability.instruments import Constant, Counter, Histogram, Registry
from hcs_deviceplugin.observability.process import ProcessCollector

BUCKETS = (0.001, 0.01, 0.1, 1.0)


def _text(*collectors: Counter | Histogram | Constant) -> str:
    return render(f for c in collectors for f in c.collect()).decode()


def test_counter_series_start_at_zero_and_count_up() -> None:
    counter = Counter("x_events", "Events.", ["pool", "result"])
    ok = counter.labels("a", "ok")
    counter.labels("a", "rejected")
    ok.inc()
    ok.inc(2.5)
    assert counter.labels("a", "ok") is ok, "one series per label values"
    assert _text(counter) == (
        "# HELP x_events_total Events.\n"
        "# TYPE x_events_total counter\n"
        'x_events_total{pool="a",result="ok"} 3.5\n'
        'x_events_total{pool="a",result="rejected"} 0.0\n'
    )


@pytest.mark.parametrize("amount", [-1.0, -1e-9, math.nan])
def test_a_counter_refuses_to_go_down_and_keeps_its_value(amount: float) -> None:
    series = Counter("x", "X.", []).labels()
    series.inc(3)
    with pytest.raises(ValueError, match="only goes up"):
        series.inc(amount)
    assert series.value == 3


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ((), r"x: 0 label value\(s\) for label\(s\) \(pool, result\)"),
        (("a",), "1 label value"),
        (("a", "ok", "extra"), "3 label value"),
    ],
)
def test_labels_must_match_the_declared_names(values: tuple[str, ...], message: str) -> None:
    counter = Counter("x", "X.", ["pool", "result"])
    with pytest.raises(ValueError, match=message):
        counter.labels(*values)
    assert _text(counter).count("\n") == 2, "no series created"


@pytest.mark.parametrize(
    ("observed", "buckets"),
    [
        ([], [0, 0, 0, 0, 0]),
        ([0.001], [1, 1, 1, 1, 1]),  # on a bound: counted in it (le)
        ([0.0011], [0, 1, 1, 1, 1]),
        ([0.0], [1, 1, 1, 1, 1]),
        ([-5.0], [1, 1, 1, 1, 1]),
        ([1.0, 1.0000001], [0, 0, 0, 1, 2]),
        ([math.inf], [0, 0, 0, 0, 1]),
        ([0.005, 0.05, 0.5, 5.0], [0, 1, 2, 3, 4]),
    ],
)
def test_histogram_buckets_are_cumulative_up_to_inf(observed: list[float], buckets: list[int]) -> None:
    histogram = Histogram("x_seconds", "X.", ["pool"], BUCKETS)
    series = histogram.labels("a")
    for value in observed:
        series.observe(value)
    (family,) = histogram.collect()
    les = ["0.001", "0.01", "0.1", "1.0", "+Inf"]
    expected_buckets = [
        ("x_seconds_bucket", (("pool", "a"), ("le", le)), float(n))
        for le, n in zip(les, buckets, strict=True)
    ]
    assert family.samples == [
        *expected_buckets,
        ("x_seconds_count", (("pool", "a"),), float(len(observed))),
        ("x_seconds_sum", (("pool", "a"),), sum(observed)),
    ]


@pytest.mark.parametrize(
    ("buckets", "labels", "message"),
    [
        ((), [], "at least one"),
        ((math.inf,), [], "at least one"),
        ((0.1, math.nan), [], "finite"),
        ((0.1, 0.1), [], "increase strictly"),
        ((1.0, 0.5), [], "increase strictly"),
        ((1.0,), ["le"], "'le' is the bucket label"),
    ],
)
def test_bad_histograms_are_refused(buckets: tuple[float, ...], labels: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Histogram("x", "X.", labels, buckets)


def test_a_trailing_inf_bucket_is_the_one_always_added() -> None:
    assert Histogram("x", "X.", [], (1.0, math.inf)).bounds == (1.0, math.inf)


@pytest.mark.parametrize(
    ("name", "labels", "message"),
    [("bad-name", [], "invalid metric name"), ("x", ["bad label"], "invalid label name")],
)
def test_bad_names_fail_where_they_are_declared(name: str, labels: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Counter(name, "X.", labels)
    with pytest.raises(ValueError, match=message):
        Histogram(name, "X.", labels, BUCKETS)


def _reference_text(registry: prometheus_client.CollectorRegistry) -> str:
    """prometheus-client's exposition without its ``_created`` series, which we never export."""
    return "".join(
        line + "\n"
        for line in prometheus_client.generate_latest(registry).decode().splitlines()
        if "_created" not in line
    )


EVENTS = st.lists(
    st.tuples(st.sampled_from(["a", "b", 'c"\\\n']), st.floats(0, 10, allow_nan=False)), max_size=20
)


@given(EVENTS)
def test_counters_and_histograms_expose_what_prometheus_client_does(events: list[tuple[str, float]]) -> None:
    reference = prometheus_client.CollectorRegistry()
    ref_counter = prometheus_client.Counter("x_events", "Events.", ["pool"], registry=reference)
    ref_histogram = prometheus_client.Histogram(
        "x_seconds", "X.", ["pool"], buckets=BUCKETS, registry=reference
    )
    counter = Counter("x_events", "Events.", ["pool"])
    histogram = Histogram("x_seconds", "X.", ["pool"], BUCKETS)
    for pool, value in events:
        ref_counter.labels(pool).inc(value)
        ref_histogram.labels(pool).observe(value)
        counter.labels(pool).inc(value)
        histogram.labels(pool).observe(value)
    assert _text(counter, histogram) == _reference_text(reference)


def test_concurrent_events_are_all_counted() -> None:
    """Threads binding and bumping the same series at once lose no event and make no second series."""
    counter = Counter("x", "X.", ["pool"])
    histogram = Histogram("x_seconds", "X.", ["pool"], BUCKETS)
    threads, per_thread = 8, 2000
    start = threading.Barrier(threads)

    def work() -> None:
        start.wait()
        for _ in range(per_thread):
            counter.labels("a").inc()
            histogram.labels("a").observe(0.5)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert counter.labels("a").value == threads * per_thread
    (family,) = histogram.collect()
    assert ("x_seconds_count", (("pool", "a"),), float(threads * per_thread)) in family.samples
    assert ("x_seconds_sum", (("pool", "a"),), 0.5 * threads * per_thread) in family.samples
    assert len(family.samples) == len(BUCKETS) + 3, "one series"


def _build() -> Constant:
    family = Family("x_build", "Build.", "info")
    family.add_info((), {"version": "1"})
    return Constant(family)


def test_registry_collects_in_registration_order_and_filters_by_sample_name() -> None:
    registry = Registry()
    counter = Counter("x_events", "Events.", ["pool"])
    counter.labels("a").inc()
    registry.register(_build())
    registry.register(counter)
    assert [f.exposed_name for f in registry.collect()] == ["x_build_info", "x_events_total"]
    assert registry.exposition(["x_events_total"]) == _text(counter).encode()
    assert registry.exposition(["nothing"]) == b""
    assert registry.exposition() == _text(_build(), counter).encode()


@pytest.mark.parametrize(
    "clashing",
    [
        Counter("x_events", "Again.", []),  # x_events_total twice
        Constant(Family("x_events_total", "A gauge of that name.", "gauge")),
        Constant(Family("x_seconds_count", "A histogram's sample name.", "gauge")),
    ],
)
def test_registry_refuses_a_second_collector_of_a_name_and_keeps_the_first(
    clashing: Counter | Constant,
) -> None:
    registry = Registry()
    registry.register(Counter("x_events", "Events.", []))
    registry.register(Histogram("x_seconds", "X.", [], BUCKETS))
    before = registry.exposition()
    with pytest.raises(ValueError, match="already registered"):
        registry.register(clashing)
    assert registry.exposition() == before


# --- process metrics ------------------------------------------------------------------------------

# pid 42, command "(my) daemon" (spaces and a parenthesis), utime 250, stime 50 ticks, starttime 1000
# ticks after boot, vsize 123456789 bytes, rss 2048 pages.
STAT = (
    "42 ((my) daemon) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 5 0 1000 123456789 2048 "
    "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n"
)
LIMITS = (
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max cpu time              unlimited            unlimited            seconds   \n"
    "Max open files            1024                 4096                 files     \n"
)


def _proc(root: Path, limits: str | None = LIMITS, btime: bool = True) -> Path:
    (root / "42" / "fd").mkdir(parents=True)
    (root / "stat").write_text("cpu  1 2 3\n" + ("btime 1700000000\n" if btime else "") + "processes 9\n")
    (root / "42" / "stat").write_text(STAT)
    if limits is not None:
        (root / "42" / "limits").write_text(limits)
    for fd in range(3):
        (root / "42" / "fd" / str(fd)).touch()
    return root


def _values(collector: ProcessCollector) -> dict[str, float]:
    return {s[0]: s[2] for f in collector.collect() for s in f.samples}


def test_process_metrics_from_a_proc_tree(tmp_path: Path) -> None:
    collector = ProcessCollector(_proc(tmp_path), pid=42)
    ticks = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    assert _values(collector) == {
        "process_virtual_memory_bytes": 123456789.0,
        "process_resident_memory_bytes": 2048.0 * page,
        "process_start_time_seconds": 1000 / ticks + 1700000000,
        "process_cpu_seconds_total": 250 / ticks + 50 / ticks,
        "process_open_fds": 3.0,
        "process_max_fds": 1024.0,
    }


def test_process_metrics_agree_with_prometheus_client_on_the_same_tree(tmp_path: Path) -> None:
    from prometheus_client.process_collector import ProcessCollector as Reference

    root = _proc(tmp_path)
    reference = prometheus_client.CollectorRegistry()
    Reference(pid=lambda: 42, proc=str(root), registry=reference)
    assert render(ProcessCollector(root, pid=42).collect()) == prometheus_client.generate_latest(reference)


def test_process_metrics_leave_out_only_what_cannot_be_read(tmp_path: Path) -> None:
    assert _values(ProcessCollector(_proc(tmp_path / "no-boot-time", btime=False), pid=42)) == {}
    partial = _values(ProcessCollector(_proc(tmp_path / "no-limits", limits=None), pid=42))
    assert "process_resident_memory_bytes" in partial and "process_open_fds" not in partial
    assert _values(ProcessCollector(tmp_path / "no-proc-at-all", pid=42)) == {}


def test_process_metrics_of_this_process_from_the_real_proc() -> None:
    values = _values(ProcessCollector())
    assert sorted(values) == sorted(
        "process_" + n
        for n in (
            "virtual_memory_bytes",
            "resident_memory_bytes",
            "start_time_seconds",
            "cpu_seconds_total",
            "open_fds",
            "max_fds",
        )
    )
    assert values["process_resident_memory_bytes"] > 1024 * 1024
    assert values["process_open_fds"] >= 3
