"""Which devices kubelet hands a container, and the table of who holds what.

``choose_devices`` is kubelet's ``devicesToAllocate`` without the Topology Manager: the plugin's
preference first (only IDs kubelet itself considers available), the shortfall filled in sorted order.
The table is kubelet's ``podDevices``; like the resource table it is guarded by the simulator's lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from hcs_deviceplugin.kubeletsim.records import AllocationRecord

AllocationKey = tuple[str, str, str, str]
"""(namespace, pod, container, resource)."""


def pod_uid(namespace: str, pod: str) -> str:
    """A stable stand-in for the pod UID, so checkpoints written by one simulator read back in another."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kubeletsim://pods/{namespace}/{pod}"))


def choose_devices(available: Iterable[str], count: int, preferred: Sequence[str] | None) -> tuple[str, ...]:
    """Pick ``count`` IDs: sorted(preferred ∩ available) first, then the rest of available, sorted.

    Kubelet trusts the plugin's answer only as far as its own candidate set, and takes from each set
    in sorted order (``sets.List``), so a plugin's ordering is not honoured, only its membership.
    """
    pool = set(available)
    if count > len(pool):
        raise ValueError(f"need {count} devices, only {len(pool)} available")
    chosen: list[str] = []
    if preferred:
        chosen = sorted(pool.intersection(preferred))[:count]
    rest = sorted(pool.difference(chosen))
    chosen.extend(rest[: count - len(chosen)])
    return tuple(sorted(chosen))


def group_by_numa(device_ids: Iterable[str], numa_of: dict[str, list[int]]) -> dict[int, tuple[str, ...]]:
    """Kubelet's DevicesPerNUMA: a device goes under each of its NUMA nodes, or -1 without topology."""
    groups: dict[int, list[str]] = {}
    for dev in device_ids:
        for node in numa_of.get(dev) or [-1]:
            groups.setdefault(node, []).append(dev)
    return {node: tuple(ids) for node, ids in sorted(groups.items())}


class AllocationTable:
    """Allocations in admission order; the source for checkpoint, pod-resources and availability."""

    def __init__(self) -> None:
        self._records: dict[AllocationKey, AllocationRecord] = {}

    def get(self, key: AllocationKey) -> AllocationRecord | None:
        return self._records.get(key)

    def add(self, record: AllocationRecord) -> None:
        self._records[record.key] = record

    def in_use(self, resource: str) -> set[str]:
        """Device IDs of ``resource`` held by any container (kubelet's allocatedDevices)."""
        return {dev for rec in self._records.values() if rec.resource == resource for dev in rec.device_ids}

    def free_pod(self, namespace: str, pod: str) -> int:
        """Release every allocation of one pod; returns how many records went."""
        keys = [key for key in self._records if key[0] == namespace and key[1] == pod]
        for key in keys:
            del self._records[key]
        return len(keys)

    def replace(self, records: Iterable[AllocationRecord]) -> None:
        self._records = {rec.key: rec for rec in records}

    def records(self) -> list[AllocationRecord]:
        return list(self._records.values())
