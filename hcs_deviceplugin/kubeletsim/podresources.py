"""Kubelet's pod-resources API v1 (List, GetAllocatableResources, Get) over the simulator's state.

This is how the daemon learns which device IDs running containers hold, so the answers are built the
way kubelet builds them: one ContainerDevices per (resource, NUMA node) for allocations and one per
(device, NUMA node) for allocatable devices; device IDs exactly as the plugin reported them. The
v1alpha1 service and the 100 QPS rate limit are not simulated.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import grpc

from hcs_deviceplugin.api.podresources.v1 import api_pb2 as pr
from hcs_deviceplugin.api.podresources.v1 import api_pb2_grpc as pr_grpc
from hcs_deviceplugin.kubeletsim.records import AllocationRecord

ListAllocations = Callable[[], list[AllocationRecord]]
ListAllocatable = Callable[[], Mapping[str, Mapping[str, Sequence[int]]]]
"""resource → device ID → NUMA nodes, healthy devices only."""
Fault = Callable[[], tuple[float, bool]]
"""(seconds to wait before answering, whether to fail UNAVAILABLE), read at each call."""


def _no_fault() -> tuple[float, bool]:
    return 0.0, False


def _topology(node: int) -> pr.TopologyInfo | None:
    return None if node < 0 else pr.TopologyInfo(nodes=[pr.NUMANode(ID=node)])


def _container_devices(record: AllocationRecord) -> list[pr.ContainerDevices]:
    by_numa = record.devices_by_numa or {-1: record.device_ids}
    return [
        pr.ContainerDevices(resource_name=record.resource, device_ids=list(ids), topology=_topology(node))
        for node, ids in by_numa.items()
    ]


def pod_resources(records: Sequence[AllocationRecord]) -> list[pr.PodResources]:
    """Group allocation records into PodResources, pods and containers in first-admitted order."""
    pods: dict[tuple[str, str], dict[str, list[pr.ContainerDevices]]] = {}
    for record in records:
        containers = pods.setdefault((record.namespace, record.pod), {})
        containers.setdefault(record.container, []).extend(_container_devices(record))
    return [
        pr.PodResources(
            name=name,
            namespace=namespace,
            containers=[pr.ContainerResources(name=c, devices=devs) for c, devs in containers.items()],
        )
        for (namespace, name), containers in pods.items()
    ]


def allocatable_devices(allocatable: Mapping[str, Mapping[str, Sequence[int]]]) -> list[pr.ContainerDevices]:
    """One ContainerDevices per healthy device and NUMA node, as kubelet reports allocatable devices."""
    out: list[pr.ContainerDevices] = []
    for resource, devices in allocatable.items():
        for dev, nodes in devices.items():
            for node in nodes or [-1]:
                out.append(
                    pr.ContainerDevices(resource_name=resource, device_ids=[dev], topology=_topology(node))
                )
    return out


class PodResourcesServicer(pr_grpc.PodResourcesListerServicer):
    """``v1.PodResourcesLister`` answering from callables that read the simulator under its lock."""

    def __init__(
        self, allocations: ListAllocations, allocatable: ListAllocatable, fault: Fault = _no_fault
    ) -> None:
        self._allocations = allocations
        self._allocatable = allocatable
        self._fault = fault

    def List(
        self, request: pr.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> pr.ListPodResourcesResponse:
        """The allocations as they are now, answered after the configured delay (so a slow kubelet
        hands back a listing that is already stale), or UNAVAILABLE while the fault says down."""
        delay, down = self._fault()
        if down:
            context.abort(grpc.StatusCode.UNAVAILABLE, "pod-resources unavailable (simulated)")
        answer = pr.ListPodResourcesResponse(pod_resources=pod_resources(self._allocations()))
        if delay > 0:
            time.sleep(delay)  # the simulated slowness itself, not a test waiting
        return answer

    def GetAllocatableResources(
        self, request: pr.AllocatableResourcesRequest, context: grpc.ServicerContext
    ) -> pr.AllocatableResourcesResponse:
        return pr.AllocatableResourcesResponse(devices=allocatable_devices(self._allocatable()))

    def Get(
        self, request: pr.GetPodResourcesRequest, context: grpc.ServicerContext
    ) -> pr.GetPodResourcesResponse:
        records = [
            rec
            for rec in self._allocations()
            if rec.pod == request.pod_name and rec.namespace == request.pod_namespace
        ]
        if not records:
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"pod {request.pod_name} in namespace {request.pod_namespace} not found",
            )
        return pr.GetPodResourcesResponse(pod_resources=pod_resources(records)[0])
