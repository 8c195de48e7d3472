"""``/metrics``: state read from the daemon's view at scrape time, events counted by ``Metrics``."""

from __future__ import annotations

import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hcs_deviceplugin import __version__
from hcs_deviceplugin.daemon import DaemonView
from hcs_deviceplugin.observability.metrics import LATENCY_BUCKETS, Metrics
from tests.integration.conftest import H100, WAIT, card_pool, pool_doc, resource
from tests.observability.conftest import (
    ABSENT,
    BUSY_POOLS,
    Busy,
    Start,
    make_busy,
    scrape,
    value,
)


def test_pool_card_and_backend_state_on_a_busy_node(busy: Busy) -> None:
    samples = busy.obs.samples()
    a = {"pool": "a", "resource": resource("a")}
    b = {"pool": "b", "resource": resource("b")}

    assert value(samples, "hcs_pool_units", **a) == 2
    assert value(samples, "hcs_pool_units", **b) == 2  # one card, two time-slices
    assert value(samples, "hcs_pool_units_healthy", **a) == 2
    assert value(samples, "hcs_pool_units_healthy", **b) == 0
    assert value(samples, "hcs_pool_units_allocated", **a) == 1
    assert value(samples, "hcs_pool_units_allocated", **b) == 0
    assert value(samples, "hcs_pool_registered", **a) == 1
    assert value(samples, "hcs_pool_registered", **b) == 1
    assert value(samples, "hcs_pool_registrations_total", **a) == 1

    nvidia = {"vendor": "nvidia"}
    model = {"model": "NVIDIA H100 80GB HBM3"}
    assert value(samples, "hcs_card_healthy", card=busy.held_card, **nvidia) == 1
    assert value(samples, "hcs_card_healthy", card=busy.sick_card, **nvidia) == 0
    assert value(samples, "hcs_card_healthy", card=H100[3], **nvidia) == 1
    assert {tuple(sorted(ls)) for n, ls, _ in samples if n == "hcs_card_healthy"} == {("card", "vendor")}
    assert len([s for s in samples if s[0] == "hcs_card_healthy"]) == 10
    assert value(samples, "hcs_card_info", card=busy.held_card, pool="a", **nvidia, **model) == 1
    assert value(samples, "hcs_card_info", card=busy.sick_card, pool="b", **nvidia, **model) == 1
    assert value(samples, "hcs_card_info", card=H100[3], pool="", **nvidia, **model) == 1
    assert len([s for s in samples if s[0] == "hcs_card_info"]) == 10
    assert value(samples, "hcs_build_info", version=__version__) == 1

    assert value(samples, "hcs_cards_draining") == 0
    assert value(samples, "hcs_card_conflicts") == 0
    assert value(samples, "hcs_backend_up", backend="simulated") == 1
    assert value(samples, "hcs_backend_up", backend="ascend") == 0
    assert value(samples, "hcs_backend_info", backend="ascend", state="absent", reason=ABSENT["ascend"]) == 1
    assert value(samples, "hcs_backend_info", backend="simulated", state="running", reason="") == 1
    assert value(samples, "hcs_config_applied_changes_total") >= 1
    assert value(samples, "hcs_config_active_errors") == 0
    assert value(samples, "hcs_partition_layout_errors") == 0


def test_config_errors_total_has_source_and_object_labels(busy: Busy) -> None:
    metrics = busy.obs.metrics
    metrics.config_error("file", "pools.yaml")
    metrics.config_error("api", "d8-gpu/gpu-pools")
    metrics.config_error("api", "d8-gpu/gpu-pools")
    samples = busy.obs.samples()
    assert value(samples, "hcs_config_errors_total", source="file", object="pools.yaml") >= 1
    assert value(samples, "hcs_config_errors_total", source="api", object="d8-gpu/gpu-pools") >= 2


def test_each_scrape_reads_the_view_afresh(observed: Start) -> None:
    obs = observed(BUSY_POOLS)
    busy = make_busy(obs)
    assert value(obs.samples(), "hcs_pool_units_allocated", pool="a") == 1
    obs.node.kubelet.free_pod("trainer")
    obs.daemon.wait_for(lambda v: busy.held_card not in v.held, WAIT, "released")
    assert value(obs.samples(), "hcs_pool_units_allocated", pool="a") == 0


def test_event_metrics_count_what_their_methods_report() -> None:
    metrics = Metrics(process_metrics=False)
    allocate, preferred = metrics.allocate_observer("a"), metrics.preferred_observer("a")
    allocate(0.0003, True)
    allocate(0.004, True)
    allocate(0.02, False)
    preferred(0.0002, True)
    metrics.health_transition(H100[0], "Unhealthy")
    metrics.health_transition(H100[0], "Healthy")
    metrics.health_transition(H100[0], "Unhealthy")
    metrics.config_error("file", "pools.yaml")
    metrics.config_reload("file")
    metrics.reregistration("a")
    samples = scrape(metrics)

    assert value(samples, "hcs_allocate_seconds_count", pool="a") == 3
    assert value(samples, "hcs_allocate_seconds_bucket", pool="a", le="0.0005") == 1
    assert value(samples, "hcs_allocate_seconds_bucket", pool="a", le="0.005") == 2
    assert value(samples, "hcs_allocate_seconds_bucket", pool="a", le="+Inf") == 3
    assert value(samples, "hcs_allocate_requests_total", pool="a", result="ok") == 2
    assert value(samples, "hcs_allocate_requests_total", pool="a", result="rejected") == 1
    assert value(samples, "hcs_preferred_allocation_seconds_count", pool="a") == 1
    assert value(samples, "hcs_health_transitions_total", card=H100[0], to="Unhealthy") == 2
    assert value(samples, "hcs_health_transitions_total", card=H100[0], to="Healthy") == 1
    assert value(samples, "hcs_config_errors_total", source="file", object="pools.yaml") == 1
    assert value(samples, "hcs_config_reloads_total", source="file") == 1
    assert value(samples, "hcs_pool_reregistrations_total", pool="a") == 1


def test_latency_buckets_span_sub_millisecond_to_one_second() -> None:
    assert LATENCY_BUCKETS[0] <= 0.0001
    assert LATENCY_BUCKETS[-1] == 1.0
    assert list(LATENCY_BUCKETS) == sorted(LATENCY_BUCKETS)


def test_unbound_metrics_have_no_state_families_and_bind_only_once() -> None:
    metrics = Metrics(process_metrics=False)
    assert not any(name.startswith("hcs_pool_units") for name, _, _ in scrape(metrics))
    assert any(name.startswith("process_") for name, _, _ in scrape(Metrics()))

    def never() -> DaemonView:
        raise AssertionError("the view is read only when scraped")

    metrics.bind(never)
    with pytest.raises(RuntimeError, match="already bound"):
        metrics.bind(never)


def test_config_errors_changed_counts_objects_that_went_bad() -> None:
    metrics = Metrics(process_metrics=False)
    broken = {("file", "pools.yaml"): ["pools[0].slicesPerUnit: must be 1..64"]}
    metrics.config_errors_changed(broken)
    metrics.config_errors_changed(broken)  # reported again, unchanged: not new
    metrics.config_errors_changed({**broken, ("api", "d8-gpu/a"): ["line 3: bad indent"]})
    metrics.config_errors_changed({("file", "pools.yaml"): ["pools[0].unit: unknown"]})  # a different error
    metrics.config_errors_changed({})  # all fixed
    metrics.config_errors_changed({("api", "d8-gpu/a"): ["line 3: bad indent"]})  # broken again
    samples = scrape(metrics)
    assert value(samples, "hcs_config_errors_total", source="file", object="pools.yaml") == 2
    assert value(samples, "hcs_config_errors_total", source="api", object="d8-gpu/a") == 2


COUNTERS_AT_START = [
    ("hcs_allocate_requests_total", {"pool": "a", "result": "ok"}),
    ("hcs_allocate_requests_total", {"pool": "a", "result": "rejected"}),
    ("hcs_allocate_seconds_count", {"pool": "a"}),
    ("hcs_preferred_allocation_seconds_count", {"pool": "a"}),
    ("hcs_pool_reregistrations_total", {"pool": "a"}),
    ("hcs_health_transitions_total", {"card": H100[0], "to": "Healthy"}),
    ("hcs_health_transitions_total", {"card": H100[0], "to": "Unhealthy"}),
    ("hcs_health_transitions_total", {"card": H100[3], "to": "Unhealthy"}),  # in no pool: still known
    ("hcs_config_reloads_total", {"source": "file"}),
]


def test_every_counter_is_at_zero_in_the_first_scrape(observed: Start) -> None:
    """``increase()`` over the first event needs the series at 0 before it: a real scrape, parsed."""
    obs = observed(pool_doc(card_pool("a", H100[0], H100[1])))
    obs.node.wait_registered("a")
    samples = obs.samples()
    for name, labels in COUNTERS_AT_START:
        assert value(samples, name, **labels) == 0, (name, labels)
    assert not [n for n, _, _ in samples if n.endswith("_created")], "no _created series"
    families = {
        f.name: f.type for f in text_string_to_metric_families(obs.get("/metrics")[1]) if f.type == "counter"
    }
    for family in families:
        # Error counters start at 0 per pool ConfigMap read: the runner names those (its own test).
        assert any(n == family + "_total" for n, _, _ in samples) or family == "hcs_config_errors", family


def test_a_card_moving_pools_keeps_its_health_series(observed: Start) -> None:
    obs = observed(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1])))
    obs.node.wait_registered("a", "b")
    before = obs.samples()
    health = [(n, ls) for n, ls, _ in before if n == "hcs_card_healthy" and ls["card"] == H100[0]]
    assert value(before, "hcs_card_info", card=H100[0], pool="a") == 1

    obs.node.write_pools(pool_doc(card_pool("a"), card_pool("b", H100[0], H100[1])))
    obs.daemon.wait_for(lambda v: len(v.pools["b"].units) == 2, WAIT, "card moved to b")
    after = obs.samples()
    assert [(n, ls) for n, ls, _ in after if n == "hcs_card_healthy" and ls["card"] == H100[0]] == health
    assert value(after, "hcs_card_info", card=H100[0], pool="b") == 1
    assert not [ls for n, ls, _ in after if n == "hcs_card_info" and ls.get("pool") == "a"]


def test_draining_seconds_grow_while_a_held_card_waits_and_vanish_when_released(observed: Start) -> None:
    obs = observed(pool_doc(card_pool("a", H100[0]), card_pool("b", H100[1])))
    obs.node.wait_registered("a", "b")
    assert not [n for n, _, _ in obs.samples() if n == "hcs_card_draining_seconds"]
    obs.node.kubelet.allocate("trainer", "main", resource("a"), 1)
    obs.daemon.wait_for(lambda v: H100[0] in v.held, WAIT, "held")

    obs.node.write_pools(pool_doc(card_pool("a"), card_pool("b", H100[0], H100[1])))
    obs.daemon.wait_for(lambda v: H100[0] in v.draining_since, WAIT, "draining")
    first = value(obs.samples(), "hcs_card_draining_seconds", card=H100[0])
    assert first >= 0
    obs.daemon.wait_for(
        lambda v: time.monotonic() - v.draining_since[H100[0]] > first, WAIT, "time passes while draining"
    )
    assert value(obs.samples(), "hcs_card_draining_seconds", card=H100[0]) > first
    status, body = obs.get("/report")
    assert status == 200
    report = json.loads(body)
    assert [(d["card"], d["targetPool"]) for d in report["draining"]] == [(H100[0], "b")]
    assert report["draining"][0]["seconds"] > first
    assert [d["heldBy"] for d in report["devices"] if d["id"] == H100[0]] == [["default/trainer/main"]]

    obs.node.kubelet.free_pod("trainer")
    obs.daemon.wait_for(lambda v: not v.draining, WAIT, "released")
    assert not [n for n, _, _ in obs.samples() if n == "hcs_card_draining_seconds"]


def test_allocation_info_names_the_pod_container_and_device(busy: Busy) -> None:
    samples = busy.obs.samples()
    held = [ls for n, ls, _ in samples if n == "hcs_device_allocation_info"]
    assert held == [
        {
            "namespace": "default",
            "pod": "trainer",
            "container": "main",
            "resource": resource("a"),
            "device": busy.held_card,
        }
    ]
