"""What the simulator writes to its timeline, in kubelet's terms, from a real plugin over real sockets."""

from __future__ import annotations

import grpc
import pytest

from hcs_deviceplugin.api.podresources.v1 import api_pb2 as pr
from hcs_deviceplugin.api.podresources.v1 import api_pb2_grpc as pr_grpc
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from hcs_deviceplugin.kubeletsim.timeline import Kind, check_timeline
from tests.kubeletsim.conftest import RESOURCE, PluginFactory, registered
from tests.kubeletsim.fakeplugin import device


def test_registration_stream_lists_allocations_and_stop_are_recorded_in_order(
    sim: KubeletSimulator, make_plugin: PluginFactory
) -> None:
    plugin = make_plugin(initial=[device("d0"), device("d1", healthy=False)])
    registered(sim, plugin)
    sim.allocate("pod", "main", RESOURCE, 1)
    sim.free_pod("pod")
    sim.stop()

    events = sim.timeline()
    assert [e.kind for e in events] == [Kind.REGISTER, Kind.OPEN, Kind.LIST, Kind.ALLOC, Kind.FREE, Kind.END]
    assert [e.time for e in events] == sorted(e.time for e in events)
    endpoint = str(plugin.socket_path)
    assert {e.endpoint for e in events if e.kind not in (Kind.ALLOC, Kind.FREE)} == {endpoint}
    listed = events[2]
    assert (listed.resource, listed.ids, listed.unhealthy) == (
        RESOURCE,
        frozenset({"d0", "d1"}),
        frozenset({"d1"}),
    )
    assert events[3].ids == events[4].ids == {"d0"}
    assert check_timeline(events) == []


def test_pod_resources_can_be_slowed_and_taken_down(sim: KubeletSimulator) -> None:
    assert sim.pod_resources_socket is not None
    with grpc.insecure_channel(f"unix:{sim.pod_resources_socket}") as channel:
        lister = pr_grpc.PodResourcesListerStub(channel)
        sim.pod_resources_delay = 0.5
        with pytest.raises(grpc.RpcError) as slow:
            lister.List(pr.ListPodResourcesRequest(), timeout=0.2)
        assert slow.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        sim.pod_resources_delay = 0.0
        sim.pod_resources_down = True
        with pytest.raises(grpc.RpcError) as down:
            lister.List(pr.ListPodResourcesRequest(), timeout=5)
        assert down.value.code() is grpc.StatusCode.UNAVAILABLE
        sim.pod_resources_down = False
        assert lister.List(pr.ListPodResourcesRequest(), timeout=5).pod_resources == []


def test_pod_resources_socket_can_be_removed_and_restored(sim: KubeletSimulator) -> None:
    path = sim.pod_resources_socket
    assert path is not None
    sim.remove_pod_resources_socket()
    assert not path.exists()
    with grpc.insecure_channel(f"unix:{path}") as channel:
        with pytest.raises(grpc.RpcError) as gone:
            pr_grpc.PodResourcesListerStub(channel).List(pr.ListPodResourcesRequest(), timeout=1)
        assert gone.value.code() is grpc.StatusCode.UNAVAILABLE
    sim.restore_pod_resources_socket()
    with grpc.insecure_channel(f"unix:{path}") as channel:
        answer = pr_grpc.PodResourcesListerStub(channel).List(pr.ListPodResourcesRequest(), timeout=5)
    assert answer.pod_resources == []
