"""ListAndWatch consumption: full snapshots, stream end, grace period, re-registration."""

from __future__ import annotations

import threading
import time

import pytest

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from tests.kubeletsim.conftest import RESOURCE, PluginFactory, SimFactory, registered
from tests.kubeletsim.fakeplugin import device, devices


def test_each_snapshot_rebuilds_the_device_sets(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    plugin = make_plugin(initial=[device("d0"), device("d1", healthy=False), device("d2", numa=[0, 1])])
    registered(sim, plugin)
    view = sim.resource(RESOURCE)
    assert view.healthy == {"d0", "d2"} and view.unhealthy == {"d1"}
    assert view.numa == {"d0": [], "d1": [], "d2": [0, 1]}
    assert (view.capacity, view.allocatable) == (3, 2)

    plugin.set_devices([device("d1"), device("d3", healthy=False)])  # d0, d2 vanish; d1 recovers
    sim.wait_for(lambda s: s.resource(RESOURCE).snapshots == 2, what="second snapshot")
    view = sim.resource(RESOURCE)
    assert view.healthy == {"d1"} and view.unhealthy == {"d3"}
    assert set(view.numa) == {"d1", "d3"}

    plugin.set_devices([])  # legal: the resource stays registered with capacity 0
    sim.wait_for(lambda s: s.resource(RESOURCE).snapshots == 3, what="empty snapshot")
    view = sim.resource(RESOURCE)
    assert view.capacity == 0 and view.connected


def test_snapshot_listener_sees_every_message_with_receive_time(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    seen: list[tuple[str, list[str], float]] = []
    lock = threading.Lock()

    def listener(resource: str, devs: list[dp.Device], received: float) -> None:
        with lock:
            seen.append((resource, [d.ID for d in devs], received))

    sim.add_snapshot_listener(listener)
    plugin = make_plugin(initial=devices("d0"))
    before = time.monotonic()
    registered(sim, plugin)
    plugin.set_devices(devices("d0", "d1"))
    sim.wait_for(lambda s: s.resource(RESOURCE).snapshots == 2, what="second snapshot")

    with lock:
        assert [(r, ids) for r, ids, _ in seen] == [(RESOURCE, ["d0"]), (RESOURCE, ["d0", "d1"])]
        assert before <= seen[0][2] <= seen[1][2] <= time.monotonic()


def test_stream_end_marks_everything_unhealthy(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    plugin = make_plugin(initial=[device("d0"), device("d1"), device("d2", healthy=False)])
    registered(sim, plugin)
    before = time.monotonic()
    plugin.end_streams()
    sim.wait_for(lambda s: not s.resource(RESOURCE).connected, what="stream end")

    view = sim.resource(RESOURCE)
    assert view.healthy == set() and view.unhealthy == {"d0", "d1", "d2"}
    assert (view.capacity, view.allocatable) == (3, 0)
    assert view.stopped_at is not None and view.stopped_at >= before
    assert view.stream_ends == 1


def test_plugin_server_crash_is_a_stream_end(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    plugin = make_plugin(initial=devices("d0"))
    registered(sim, plugin)
    plugin.stop()
    sim.wait_for(lambda s: not s.resource(RESOURCE).connected, what="stream end")
    assert sim.resource(RESOURCE).unhealthy == {"d0"}


def test_stopped_resource_is_dropped_after_the_grace_period(
    sim_factory: SimFactory, make_plugin: PluginFactory
) -> None:
    sim = sim_factory(grace_period=0.5)
    plugin = make_plugin(initial=devices("d0"))
    registered(sim, plugin)
    plugin.end_streams()
    sim.wait_for(lambda s: not s.resource(RESOURCE).connected, what="stream end")
    stopped_at = sim.resource(RESOURCE).stopped_at  # still known within the grace period
    assert stopped_at is not None

    sim.wait_for(lambda s: RESOURCE not in s.resources(), timeout=5.0, what="grace expiry")
    assert time.monotonic() >= stopped_at + 0.5
    with pytest.raises(KeyError):
        sim.resource(RESOURCE)


def test_reregistration_within_grace_restores_the_resource(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = make_plugin(initial=devices("d0", "d1"))
    registered(sim, plugin)
    plugin.rebind()
    sim.wait_for(lambda s: not s.resource(RESOURCE).connected, what="stream end")
    registered(sim, plugin)

    view = sim.resource(RESOURCE)
    assert view.connected and view.stopped_at is None
    assert view.healthy == {"d0", "d1"} and view.unhealthy == set()
    assert view.registrations == 2


def test_wait_for_treats_an_unknown_resource_as_not_yet(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    with pytest.raises(TimeoutError, match=r"timed out after 0.05s waiting for never registered"):
        sim.wait_for(lambda s: bool(s.resource(RESOURCE).healthy), timeout=0.05, what="never registered")
    registered(sim, make_plugin(initial=devices("d0")))
    sim.wait_for(lambda s: s.resource(RESOURCE).healthy == {"d0"}, what="d0")
