"""The simulator's public values: what tests read back after driving a plugin.

They are frozen snapshots taken under the simulator's lock, so a test can hold one while the
simulator keeps changing underneath without seeing torn state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import grpc

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp


@dataclass(frozen=True)
class RegisterRecord:
    """One Register call as kubelet saw it, accepted or not.

    ``pre_start_required`` and ``get_preferred_allocation_available`` come from the request's own
    ``options`` field, which kubelet ignores; recording them lets a test compare them with the
    GetDevicePluginOptions answer kubelet actually uses (``ResourceView.options``).
    """

    version: str
    endpoint: str
    resource_name: str
    pre_start_required: bool
    get_preferred_allocation_available: bool
    time: float
    accepted: bool
    error: str = ""


@dataclass(frozen=True)
class ResourceView:
    """Kubelet's view of one extended resource: the device tables plus counters for tests.

    ``registrations``, ``stream_opens``, ``snapshots`` and ``stream_ends`` are cumulative over the
    simulator object's life (across restarts), because tests ask "did the plugin re-register after the
    restart?". They count every client of the name, including replaced ones still streaming, so a test
    can wait for an old instance's stream end and then check it changed nothing. A simulated kubelet
    restart does not count as a stream end (that kubelet is gone).
    ``connected`` means the current endpoint's ListAndWatch has delivered its first snapshot and has
    not ended: the point from which the sets reflect that plugin, so tests can wait on it alone.
    ``endpoint`` is the plugin socket path of the latest accepted registration.
    ``options`` is None and ``endpoint`` empty for a resource restored from the checkpoint that has
    not re-registered yet (kubelet's "stopped endpoint").
    """

    name: str
    healthy: frozenset[str]
    unhealthy: frozenset[str]
    numa: Mapping[str, list[int]]
    connected: bool
    stopped_at: float | None
    registrations: int
    stream_opens: int
    snapshots: int
    stream_ends: int
    options: dp.DevicePluginOptions | None
    endpoint: str

    @property
    def capacity(self) -> int:
        """What the node status would show as capacity: healthy plus unhealthy."""
        return len(self.healthy) + len(self.unhealthy)

    @property
    def allocatable(self) -> int:
        """What the node status would show as allocatable: healthy only."""
        return len(self.healthy)


@dataclass(frozen=True)
class AllocationRecord:
    """Devices one container holds for one resource, with the plugin's Allocate answer.

    ``devices_by_numa`` mirrors the checkpoint's ``DeviceIDs`` map (key -1: device without topology);
    pod-resources reports one ContainerDevices per key, like kubelet.
    """

    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: tuple[str, ...]
    response: dp.ContainerAllocateResponse
    pod_uid: str = ""
    devices_by_numa: Mapping[int, tuple[str, ...]] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Identity kubelet keys allocations by (with namespace/name standing in for the pod UID)."""
        return (self.namespace, self.pod, self.container, self.resource)


class AllocationError(Exception):
    """Pod admission failed, as kubelet would reject it with UnexpectedAdmissionError.

    ``code`` and ``details`` carry the plugin's gRPC status when an RPC failed, so a test can assert
    the plugin refused for the right reason; both are None when kubelet itself refused.
    """

    def __init__(self, message: str, code: grpc.StatusCode | None = None, details: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = details
