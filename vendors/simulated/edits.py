"""ContainerEdits of the simulated backend: what a container would get on a node with this hardware.

The edits have the same shape a hardware backend produces (device nodes, a visible-devices variable, a
driver mount, an annotation) so that Allocate, the CDI specs the core writes from them and the tests
of the core are exercised for real in ``simulate``; only the names are our own (``/dev/hcs-sim``).
CDI names are the core's (``hcs.deckhouse.io/simulated=<id>``, for pools that ask for CDI delivery).
This module is pure: it maps units and a card-index table to values, no I/O and no backend state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from hcs_deviceplugin.model import ContainerEdits, DeviceNode, Mount, Unit

DEVICE_DIR = "/dev/hcs-sim"
DRIVER_DIR = "/usr/local/hcs-sim"
VISIBLE_DEVICES_ENV = "HCS_SIM_VISIBLE_DEVICES"
UNITS_ANNOTATION = "hcs.io/simulated-units"

_NOT_PATH_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def card_device_path(index: int) -> str:
    """The device node of the card in slot ``index``, like ``/dev/nvidia<minor>`` on real hardware."""
    return f"{DEVICE_DIR}/card{index}"


def partition_device_path(partition_id: str) -> str:
    """The device node of a partition, like a MIG capability node; ids are made safe for a file name."""
    return f"{DEVICE_DIR}/part-{_NOT_PATH_SAFE.sub('-', partition_id)}"


def simulated_container_edits(
    units: Sequence[Unit], card_index: Mapping[str, int], backend_name: str
) -> ContainerEdits:
    """The edits for ``units``; replicas of one card or partition share its hardware, listed once.

    ``card_index`` maps card id to slot number (the device node name). A unit of another backend or of
    a card this backend does not have is a bug in the caller, so it raises ValueError rather than
    handing a container a device that does not exist.
    """
    if not units:
        return ContainerEdits()
    hardware: dict[str, None] = {}
    devices: dict[str, DeviceNode] = {}
    for unit in units:
        if unit.backend != backend_name:
            raise ValueError(f"unit {unit.id!r} belongs to backend {unit.backend!r}, not {backend_name!r}")
        if unit.card_id not in card_index:
            raise ValueError(f"unit {unit.id!r} names card {unit.card_id!r}, which this node does not have")
        hardware[unit.hardware_id] = None
        card_path = card_device_path(card_index[unit.card_id])
        devices.setdefault(card_path, DeviceNode(card_path, card_path, "rw"))
        if unit.partition_id is not None:
            part_path = partition_device_path(unit.partition_id)
            devices.setdefault(part_path, DeviceNode(part_path, part_path, "rw"))
    return ContainerEdits(
        env={VISIBLE_DEVICES_ENV: ",".join(hardware)},
        devices=tuple(devices.values()),
        mounts=(Mount(container_path=DRIVER_DIR, host_path=DRIVER_DIR, read_only=True),),
        annotations={UNITS_ANNOTATION: ",".join(dict.fromkeys(u.id for u in units))},
    )
