"""Which device ids running containers hold, from kubelet's pod-resources API (``v1.List``).

This is the only trustworthy source of "in use": kubelet does not call Allocate again for running
pods after it restarts, so counting Allocate calls would forget holders (KUBELET.md §3). The API is
eventually consistent and rate limited (100 QPS), so the daemon polls it at a bounded interval and
once right after each Allocate, never in a tight loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import grpc

from hcs_deviceplugin.api.podresources.v1 import api_pb2 as pr
from hcs_deviceplugin.api.podresources.v1 import api_pb2_grpc as pr_grpc

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
LIST_DEADLINE_S = 5.0


class PodResourcesUnavailable(RuntimeError):
    """The pod-resources socket is missing or the List call failed."""


HeldDevices = Mapping[str, frozenset[str]]


def list_held_devices(socket_path: Path, deadline: float = LIST_DEADLINE_S) -> dict[str, frozenset[str]]:
    """resource name → device ids held by any container of any pod kubelet reports."""
    if not socket_path.exists():
        raise PodResourcesUnavailable(f"{socket_path} does not exist")
    with grpc.insecure_channel(f"unix:{socket_path}") as channel:
        try:
            response = pr_grpc.PodResourcesListerStub(channel).List(
                pr.ListPodResourcesRequest(), timeout=deadline
            )
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            raise PodResourcesUnavailable(f"pod-resources List failed: {code}: {exc}") from exc
    held: dict[str, set[str]] = {}
    for pod in response.pod_resources:
        for container in pod.containers:
            for devices in container.devices:
                held.setdefault(devices.resource_name, set()).update(devices.device_ids)
    return {name: frozenset(ids) for name, ids in held.items()}
