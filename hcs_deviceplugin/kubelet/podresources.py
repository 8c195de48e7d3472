"""Which device ids running containers hold, and which pod and container holds each, from kubelet's
pod-resources API (``v1.List``).

This is the only trustworthy source of "in use": kubelet does not call Allocate again for running
pods after it restarts, so counting Allocate calls would forget holders (KUBELET.md §3). The API is
eventually consistent and rate limited (100 QPS), so the daemon polls it at a bounded interval and
once right after each Allocate, never in a tight loop.

The same answer also says *who* holds each device (namespace, pod, container). Allocate never learns
that (kubelet sends only device ids), so this is the one place it can come from; the daemon keeps it
for ``hcs_device_allocation_info``, ``/report`` and ``inspect``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hcs_deviceplugin.api.podresources.v1 import api_wire as pr
from hcs_deviceplugin.fieldrepr import field_repr
from hcs_deviceplugin.rpc.client import unary_call
from hcs_deviceplugin.rpc.status import RpcError

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
LIST_DEADLINE_S = 5.0
LIST_METHOD = "/v1.PodResourcesLister/List"


class PodResourcesUnavailable(RuntimeError):
    """The pod-resources socket is missing or the List call failed."""


HeldDevices = Mapping[str, frozenset[str]]


@field_repr
@dataclass(frozen=True, repr=False)  # not order=True: four comparisons compiled at start for one sort
class DeviceAllocation:
    """One device id that one container holds under one resource, as kubelet lists it."""

    namespace: str
    pod: str
    container: str
    resource: str
    device: str

    def sort_key(self) -> tuple[str, str, str, str, str]:
        """The order a List answer is kept in: by namespace, pod, container, resource, device."""
        return (self.namespace, self.pod, self.container, self.resource, self.device)


def allocations_of(response: pr.ListPodResourcesResponse) -> tuple[DeviceAllocation, ...]:
    """Every (pod, container, resource, device) of a List answer, sorted, each once."""
    found = {
        DeviceAllocation(pod.namespace, pod.name, container.name, devices.resource_name, device_id)
        for pod in response.pod_resources
        for container in pod.containers
        for devices in container.devices
        for device_id in devices.device_ids
    }
    return tuple(sorted(found, key=DeviceAllocation.sort_key))


def held_devices(allocations: Iterable[DeviceAllocation]) -> dict[str, frozenset[str]]:
    """resource name → device ids held by any container: what the daemon's holds are built from."""
    held: dict[str, set[str]] = {}
    for allocation in allocations:
        held.setdefault(allocation.resource, set()).add(allocation.device)
    return {name: frozenset(ids) for name, ids in held.items()}


def list_allocations(socket_path: Path, deadline: float = LIST_DEADLINE_S) -> tuple[DeviceAllocation, ...]:
    """Ask kubelet's List for every device any container of any pod holds, with its holder."""
    if not socket_path.exists():
        raise PodResourcesUnavailable(f"{socket_path} does not exist")
    try:
        raw = unary_call(socket_path, LIST_METHOD, pr.ListPodResourcesRequest().SerializeToString(), deadline)
        response = pr.ListPodResourcesResponse.FromString(raw)
    except RpcError as exc:
        raise PodResourcesUnavailable(f"pod-resources List failed: {exc}") from exc
    except ValueError as exc:  # the codec's DecodeError
        raise PodResourcesUnavailable(
            f"pod-resources List answered what is not a List response: {exc}"
        ) from exc
    return allocations_of(response)


def list_held_devices(socket_path: Path, deadline: float = LIST_DEADLINE_S) -> dict[str, frozenset[str]]:
    """resource name → device ids held by any container of any pod kubelet reports."""
    return held_devices(list_allocations(socket_path, deadline))
