"""Admission through GetPreferredAllocation and Allocate, as kubelet drives a plugin."""

from __future__ import annotations

import grpc
import pytest

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.kubeletsim import AllocationError, KubeletSimulator
from tests.kubeletsim.conftest import RESOURCE, PluginFactory, SimFactory, registered
from tests.kubeletsim.fakeplugin import FakePlugin, device, devices

PREFERRING = dp.DevicePluginOptions(get_preferred_allocation_available=True)


def _ready(
    sim: KubeletSimulator, make_plugin: PluginFactory, options: dp.DevicePluginOptions | None = None
) -> FakePlugin:
    plugin = make_plugin(options=options, initial=devices("d0", "d1", "d2", "d3"))
    registered(sim, plugin)
    return plugin


def test_allocate_without_preference_takes_sorted_available(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = _ready(sim, make_plugin)
    record = sim.allocate("pod-a", "main", RESOURCE, 2)

    assert record.device_ids == ("d0", "d1")
    assert (record.namespace, record.pod, record.container, record.resource) == (
        "default",
        "pod-a",
        "main",
        RESOURCE,
    )
    [request] = plugin.allocate_requests
    assert len(request.container_requests) == 1
    assert sorted(request.container_requests[0].devices_ids) == ["d0", "d1"]
    assert record.response.envs["FAKE_DEVICES"] in {"d0,d1", "d1,d0"}
    assert [c.name for c in record.response.cdi_devices] == [
        f"fake.example.com/dev={d}" for d in request.container_requests[0].devices_ids
    ]
    assert plugin.preferred_requests == []
    assert sim.allocations() == [record]


def test_preferred_allocation_is_asked_and_honoured(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = _ready(sim, make_plugin, PREFERRING)
    plugin.preferred_answer = ["d3", "d1"]
    record = sim.allocate("pod-a", "main", RESOURCE, 2)

    [asked] = plugin.preferred_requests
    [container] = asked.container_requests
    assert list(container.available_deviceIDs) == ["d0", "d1", "d2", "d3"]
    assert list(container.must_include_deviceIDs) == []
    assert container.allocation_size == 2
    assert record.device_ids == ("d1", "d3")
    assert sorted(plugin.allocate_requests[0].container_requests[0].devices_ids) == ["d1", "d3"]


def test_bogus_preferred_ids_are_ignored_and_the_shortfall_filled(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = _ready(sim, make_plugin, PREFERRING)
    sim.allocate("holder", "main", RESOURCE, 1)  # d0 is now held
    plugin.preferred_answer = ["d0", "nope", "d2"]  # d0 is taken, "nope" does not exist
    record = sim.allocate("pod-b", "main", RESOURCE, 2)

    assert list(plugin.preferred_requests[-1].container_requests[0].available_deviceIDs) == ["d1", "d2", "d3"]
    assert record.device_ids == ("d1", "d2")


def test_preferred_allocation_can_be_switched_off(
    sim_factory: SimFactory, make_plugin: PluginFactory
) -> None:
    sim = sim_factory(use_preferred_allocation=False)
    plugin = _ready(sim, make_plugin, PREFERRING)
    plugin.preferred_answer = ["d3"]
    assert sim.allocate("pod-a", "main", RESOURCE, 1).device_ids == ("d0",)
    assert plugin.preferred_requests == []


def test_second_allocate_reuses_the_record_without_calling_the_plugin(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = _ready(sim, make_plugin)
    first = sim.allocate("pod-a", "main", RESOURCE, 2, namespace="team")
    again = sim.allocate("pod-a", "main", RESOURCE, 2, namespace="team")

    assert again == first
    assert len(plugin.allocate_requests) == 1
    with pytest.raises(AllocationError, match="changed request"):
        sim.allocate("pod-a", "main", RESOURCE, 3, namespace="team")


def test_insufficient_devices_are_refused_by_kubelet(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = make_plugin(initial=[device("d0"), device("d1"), device("d2", healthy=False)])
    registered(sim, plugin)
    sim.allocate("pod-a", "main", RESOURCE, 1)

    with pytest.raises(AllocationError) as refused:
        sim.allocate("pod-b", "main", RESOURCE, 2)
    assert (
        str(refused.value)
        == f"requested number of devices unavailable for {RESOURCE}. Requested: 2, Available: 1"
    )
    assert refused.value.code is None
    assert len(plugin.allocate_requests) == 1  # the plugin was never asked
    assert [r.pod for r in sim.allocations()] == ["pod-a"]


def test_unknown_and_stopped_resources_are_refused(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    with pytest.raises(AllocationError, match="cannot allocate unregistered device"):
        sim.allocate("pod-a", "main", "hcs.example.com/none", 1)

    plugin = _ready(sim, make_plugin)
    plugin.end_streams()
    sim.wait_for(lambda s: not s.resource(RESOURCE).connected, what="stream end")
    with pytest.raises(AllocationError, match="no healthy devices present"):
        sim.allocate("pod-a", "main", RESOURCE, 1)


def test_allocate_error_keeps_the_plugins_status(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    plugin = _ready(sim, make_plugin)
    plugin.allocate_error = (grpc.StatusCode.INVALID_ARGUMENT, "device d0 is not healthy")

    with pytest.raises(AllocationError) as refused:
        sim.allocate("pod-a", "main", RESOURCE, 1)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details == "device d0 is not healthy"
    assert sim.allocations() == []

    plugin.allocate_error = None  # the failed admission held nothing back
    assert sim.allocate("pod-a", "main", RESOURCE, 4).device_ids == ("d0", "d1", "d2", "d3")


def test_preferred_allocation_error_fails_admission(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = _ready(sim, make_plugin, PREFERRING)
    plugin.preferred_error = (grpc.StatusCode.RESOURCE_EXHAUSTED, "too big")

    with pytest.raises(AllocationError) as refused:
        sim.allocate("pod-a", "main", RESOURCE, 1)
    assert (refused.value.code, refused.value.details) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "too big")
    assert plugin.allocate_requests == []


def test_free_pod_releases_its_devices(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    _ready(sim, make_plugin)
    sim.allocate("pod-a", "init", RESOURCE, 1)
    sim.allocate("pod-a", "main", RESOURCE, 2)
    sim.allocate("pod-a", "main", RESOURCE, 1, namespace="other")
    with pytest.raises(AllocationError):
        sim.allocate("pod-b", "main", RESOURCE, 1)

    sim.free_pod("pod-a")
    assert [(r.namespace, r.pod) for r in sim.allocations()] == [("other", "pod-a")]
    assert sim.allocate("pod-b", "main", RESOURCE, 3).device_ids == ("d0", "d1", "d2")


def test_start_container_calls_pre_start_when_required(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = _ready(sim, make_plugin, dp.DevicePluginOptions(pre_start_required=True))
    record = sim.allocate("pod-a", "main", RESOURCE, 2)
    sim.start_container("pod-a", "main")
    sim.start_container("pod-a", "main")  # every start, restarts included

    assert [tuple(sorted(r.devices_ids)) for r in plugin.prestart_requests] == [record.device_ids] * 2


def test_numa_placement_is_recorded(sim: KubeletSimulator, make_plugin: PluginFactory) -> None:
    plugin = make_plugin(initial=[device("d0", numa=[0]), device("d1", numa=[1]), device("d2")])
    registered(sim, plugin)
    record = sim.allocate("pod-a", "main", RESOURCE, 3)
    assert record.devices_by_numa == {-1: ("d2",), 0: ("d0",), 1: ("d1",)}
