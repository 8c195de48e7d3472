"""Conversions between our model and the v1beta1 wire messages, in one place."""

from __future__ import annotations

from collections.abc import Sequence

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_wire as pb
from hcs_deviceplugin.model import ContainerEdits, Unit


def unit_to_device(unit: Unit) -> pb.Device:
    """A unit as kubelet's ``Device``: NUMA topology only where the backend knows the node."""
    topology = None
    if unit.numa_node is not None and unit.numa_node >= 0:
        topology = pb.TopologyInfo(nodes=[pb.NUMANode(ID=unit.numa_node)])
    return pb.Device(ID=unit.id, health=unit.health.value, topology=topology)


def list_and_watch_response(units: Sequence[Unit]) -> pb.ListAndWatchResponse:
    return pb.ListAndWatchResponse(devices=[unit_to_device(u) for u in units])


def edits_to_response(edits: ContainerEdits) -> pb.ContainerAllocateResponse:
    return pb.ContainerAllocateResponse(
        envs=dict(edits.env),
        mounts=[
            pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in edits.mounts
        ],
        devices=[
            pb.DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
            for d in edits.devices
        ],
        annotations=dict(edits.annotations),
        cdi_devices=[pb.CDIDevice(name=name) for name in edits.cdi_devices],
    )
