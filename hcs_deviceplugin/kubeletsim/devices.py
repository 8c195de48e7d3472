"""Kubelet devicemanager's per-resource tables: endpoints, healthy/unhealthy sets and the grace period.

Not thread-safe on its own: the simulator calls it under its one lock. Kept apart from the facade so
the rules (newest registration wins, full-snapshot rebuild, stop → all unhealthy, lazy deletion after
the grace period) read in one place and can be unit-tested without sockets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.kubeletsim.endpoint import PluginClient
from hcs_deviceplugin.kubeletsim.records import ResourceView

HEALTHY = "Healthy"


@dataclass
class _Counters:
    registrations: int = 0
    stream_opens: int = 0
    snapshots: int = 0
    stream_ends: int = 0


@dataclass
class _Resource:
    """One entry of kubelet's ``endpoints`` map plus the device sets for that name.

    ``client`` is None once the endpoint is stopped; ``endpoint`` (the socket path) is kept for
    reporting and is empty for a stopped endpoint restored from the checkpoint after a restart.
    """

    client: PluginClient | None
    options: dp.DevicePluginOptions | None
    stopped_at: float | None
    endpoint: str = ""
    streaming: bool = False
    healthy: set[str] = field(default_factory=set)
    unhealthy: set[str] = field(default_factory=set)
    numa: dict[str, list[int]] = field(default_factory=dict)


class ResourceTable:
    """All resources kubelet knows, keyed by extended resource name."""

    def __init__(self, grace_period: float) -> None:
        self._grace_period = grace_period
        self._resources: dict[str, _Resource] = {}
        self._counters: dict[str, _Counters] = {}

    def _count(self, name: str) -> _Counters:
        return self._counters.setdefault(name, _Counters())

    def install(self, client: PluginClient, options: dp.DevicePluginOptions) -> None:
        """A registration succeeded: its client replaces whatever endpoint the name had (newest wins).

        The device sets stay as they were until the new stream's first snapshot, as in kubelet.
        """
        entry = self._resources.get(client.resource)
        if entry is None:
            entry = self._resources[client.resource] = _Resource(client=None, options=None, stopped_at=None)
        entry.client, entry.options, entry.stopped_at, entry.streaming = client, options, None, False
        entry.endpoint = client.socket_path
        self._count(client.resource).registrations += 1

    def has(self, name: str) -> bool:
        return name in self._resources

    def is_current(self, client: PluginClient) -> bool:
        entry = self._resources.get(client.resource)
        return entry is not None and entry.client is client

    def current_client(self, name: str) -> PluginClient | None:
        entry = self._resources.get(name)
        return None if entry is None else entry.client

    def options(self, name: str) -> dp.DevicePluginOptions | None:
        entry = self._resources.get(name)
        return None if entry is None else entry.options

    def stream_opened(self, name: str) -> None:
        self._count(name).stream_opens += 1

    def stream_ended(self, name: str) -> None:
        self._count(name).stream_ends += 1

    def apply_snapshot(self, client: PluginClient, devices: Sequence[dp.Device]) -> None:
        """Rebuild the sets from one full ListAndWatch snapshot.

        Applied whichever client of the name sent it, like kubelet's receiver (it does not check the
        sender); only the current endpoint's first snapshot makes the resource count as streaming. A
        duplicated ID reported both Healthy and Unhealthy lands in both sets, as in kubelet.
        """
        name = client.resource
        entry = self._resources.get(name)
        if entry is None:
            return
        if entry.client is client:
            entry.streaming = True
        entry.healthy, entry.unhealthy, entry.numa = set(), set(), {}
        for device in devices:
            (entry.healthy if device.health == HEALTHY else entry.unhealthy).add(device.ID)
            entry.numa[device.ID] = [node.ID for node in device.topology.nodes]
        self._count(name).snapshots += 1

    def disconnect(self, client: PluginClient, now: float) -> bool:
        """The stream of ``client`` ended: if it is the current endpoint, stop it and mark all unhealthy.

        Returns False (and changes nothing) for a client that was already replaced, so a late end of
        an old instance cannot take down the new one.
        """
        if not self.is_current(client):
            return False
        entry = self._resources[client.resource]
        entry.client = None
        entry.streaming = False
        entry.stopped_at = now
        entry.unhealthy |= entry.healthy
        entry.healthy = set()
        return True

    def stop_all(self, now: float) -> list[PluginClient]:
        """Kubelet is going down: drop every endpoint's client and return them for closing."""
        clients = []
        for entry in self._resources.values():
            if entry.client is not None:
                clients.append(entry.client)
                entry.client = None
                entry.streaming = False
            if entry.stopped_at is None:
                entry.stopped_at = now
        return clients

    def restore(self, names: Iterable[str], now: float) -> None:
        """A fresh kubelet: every checkpointed resource is a stopped endpoint with capacity 0."""
        self._resources = {
            name: _Resource(client=None, options=None, stopped_at=now) for name in sorted(set(names))
        }

    def expire(self, now: float) -> list[str]:
        """Delete stopped resources whose grace period is over (kubelet does this lazily in GetCapacity)."""
        gone = [
            name
            for name, entry in self._resources.items()
            if entry.stopped_at is not None and now - entry.stopped_at >= self._grace_period
        ]
        for name in gone:
            del self._resources[name]
        return gone

    def next_expiry(self) -> float | None:
        """Monotonic time at which the next stopped resource will be deleted, if any."""
        times = [
            e.stopped_at + self._grace_period for e in self._resources.values() if e.stopped_at is not None
        ]
        return min(times, default=None)

    def healthy(self, name: str) -> set[str] | None:
        entry = self._resources.get(name)
        return None if entry is None else set(entry.healthy)

    def numa_of(self, name: str, device_id: str) -> list[int]:
        entry = self._resources.get(name)
        return [] if entry is None else list(entry.numa.get(device_id, []))

    def registered_devices(self) -> dict[str, list[str]]:
        """Checkpoint's RegisteredDevices: healthy IDs of every known resource."""
        return {name: sorted(entry.healthy) for name, entry in sorted(self._resources.items())}

    def allocatable(self) -> dict[str, dict[str, list[int]]]:
        """Healthy devices per resource with their NUMA nodes (pod-resources GetAllocatableResources)."""
        return {
            name: {dev: list(entry.numa.get(dev, [])) for dev in sorted(entry.healthy)}
            for name, entry in sorted(self._resources.items())
        }

    def names(self) -> list[str]:
        return sorted(self._resources)

    def view(self, name: str) -> ResourceView | None:
        entry = self._resources.get(name)
        if entry is None:
            return None
        counters = self._count(name)
        options = None
        if entry.options is not None:
            options = dp.DevicePluginOptions()
            options.CopyFrom(entry.options)
        return ResourceView(
            name=name,
            healthy=frozenset(entry.healthy),
            unhealthy=frozenset(entry.unhealthy),
            numa={dev: list(nodes) for dev, nodes in entry.numa.items()},
            connected=entry.client is not None and entry.streaming,
            stopped_at=entry.stopped_at,
            registrations=counters.registrations,
            stream_opens=counters.stream_opens,
            snapshots=counters.snapshots,
            stream_ends=counters.stream_ends,
            options=options,
            endpoint=entry.endpoint,
        )
