"""Pod-resources v1 over its own real socket: what the daemon reads to learn which IDs are held."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from hcs_deviceplugin.api.podresources.v1 import api_pb2 as pr
from hcs_deviceplugin.api.podresources.v1 import api_pb2_grpc as pr_grpc
from hcs_deviceplugin.kubeletsim import KubeletSimulator
from tests.kubeletsim.conftest import RESOURCE, PluginFactory, registered
from tests.kubeletsim.fakeplugin import device


@pytest.fixture
def lister(sim: KubeletSimulator) -> Iterator[pr_grpc.PodResourcesListerStub]:
    assert sim.pod_resources_socket is not None
    with grpc.insecure_channel(f"unix:{sim.pod_resources_socket}") as channel:
        yield pr_grpc.PodResourcesListerStub(channel)


@pytest.fixture
def populated(sim: KubeletSimulator, make_plugin: PluginFactory) -> KubeletSimulator:
    plugin = make_plugin(
        initial=[device("d0", numa=[0]), device("d1", numa=[1]), device("d2"), device("d3", healthy=False)]
    )
    registered(sim, plugin)
    sim.allocate("pod-a", "main", RESOURCE, 2, namespace="team")  # d0 (NUMA 0) + d1 (NUMA 1)
    sim.allocate("pod-b", "side", RESOURCE, 1)  # d2, no topology
    return sim


def _devices(container: pr.ContainerResources) -> list[tuple[str, list[str], list[int]]]:
    return [
        (d.resource_name, list(d.device_ids), [n.ID for n in d.topology.nodes]) for d in container.devices
    ]


def test_list_reports_allocated_ids_per_container(
    populated: KubeletSimulator, lister: pr_grpc.PodResourcesListerStub
) -> None:
    response = lister.List(pr.ListPodResourcesRequest(), timeout=5)

    pods = {(p.namespace, p.name): p for p in response.pod_resources}
    assert set(pods) == {("team", "pod-a"), ("default", "pod-b")}
    [main] = pods["team", "pod-a"].containers
    assert main.name == "main"
    assert _devices(main) == [(RESOURCE, ["d0"], [0]), (RESOURCE, ["d1"], [1])]
    [side] = pods["default", "pod-b"].containers
    assert _devices(side) == [(RESOURCE, ["d2"], [])]


def test_allocatable_lists_healthy_devices_only(
    populated: KubeletSimulator, lister: pr_grpc.PodResourcesListerStub
) -> None:
    response = lister.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5)
    reported = sorted(
        (d.resource_name, tuple(d.device_ids), tuple(n.ID for n in d.topology.nodes))
        for d in response.devices
    )
    assert reported == [(RESOURCE, ("d0",), (0,)), (RESOURCE, ("d1",), (1,)), (RESOURCE, ("d2",), ())]


def test_get_finds_one_pod_or_says_not_found(
    populated: KubeletSimulator, lister: pr_grpc.PodResourcesListerStub
) -> None:
    found = lister.Get(pr.GetPodResourcesRequest(pod_name="pod-a", pod_namespace="team"), timeout=5)
    assert (found.pod_resources.name, found.pod_resources.namespace) == ("pod-a", "team")
    assert [c.name for c in found.pod_resources.containers] == ["main"]

    with pytest.raises(grpc.RpcError) as missing:
        lister.Get(pr.GetPodResourcesRequest(pod_name="pod-a", pod_namespace="default"), timeout=5)
    assert isinstance(missing.value, grpc.Call)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert missing.value.details() == "pod pod-a in namespace default not found"


def test_freed_pod_disappears_from_list(
    populated: KubeletSimulator, lister: pr_grpc.PodResourcesListerStub
) -> None:
    populated.free_pod("pod-a", namespace="team")
    response = lister.List(pr.ListPodResourcesRequest(), timeout=5)
    assert [(p.namespace, p.name) for p in response.pod_resources] == [("default", "pod-b")]


def test_pod_resources_socket_is_recreated_on_restart_with_checkpointed_state(
    populated: KubeletSimulator,
) -> None:
    socket_path = populated.pod_resources_socket
    assert socket_path is not None
    populated.restart()

    with grpc.insecure_channel(f"unix:{socket_path}") as channel:  # a client that reconnects, as it must
        stub = pr_grpc.PodResourcesListerStub(channel)
        listed = stub.List(pr.ListPodResourcesRequest(), timeout=5)
        allocatable = stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5)
    assert {p.name for p in listed.pod_resources} == {"pod-a", "pod-b"}
    assert list(allocatable.devices) == []  # capacity 0 until the plugin registers again
