"""This node's DRA devices as ``resource.k8s.io/v1`` ResourceSlice objects (pure).

One DRA pool per node, named after the node (the name the scheduler writes into a claim's allocation
result), split into slices of at most :data:`MAX_DEVICES_PER_SLICE` devices (the API's limit when a
device carries taints). Slice names are derived from node and driver, not generated, so the publisher
can replace and delete its own slices without a list. Every change of content bumps the pool's
``generation``, which tells the scheduler to ignore slices of an older generation.

Each slice names this node's Node object as its controlling owner (as upstream's kubelet-plugin
helper does), so the garbage collector deletes the slices when the Node is deleted, whatever state
the daemon is in.

An unhealthy device stays in the slice with a ``NoSchedule`` device taint ``<driver>/unhealthy``:
the scheduler allocates it to no new claim, a claim that already has it keeps it, and it comes back
by itself when the taint goes (health is state, not a latch).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from hcs_deviceplugin.dra.devices import AttributeValue, DraDevice
from hcs_deviceplugin.model import Health

JsonObject = dict[str, Any]

API_VERSION = "resource.k8s.io/v1"
MAX_DEVICES_PER_SLICE = 64
PCI_BUS_ID_ATTRIBUTE = "resource.kubernetes.io/pciBusID"
"""The standard attribute name for a device's PCI address."""
_NOT_NAME = re.compile(r"[^a-z0-9-]+")


def unhealthy_taint_key(driver: str) -> str:
    return f"{driver}/unhealthy"


def slice_name(node: str, driver: str, index: int) -> str:
    """``<node>-<driver, dots as dashes>-<index>``; long names keep a hash so they stay unique."""
    base = _NOT_NAME.sub("-", f"{node}-{driver}".lower()).strip("-")
    if len(base) > 200:
        base = f"{base[:190]}-{hashlib.sha256(base.encode()).hexdigest()[:8]}"
    return f"{base}-{index}"


def node_owner(node: str, uid: str) -> JsonObject:
    """The ``ownerReferences`` entry for this node's Node (a cluster-scoped owner of a cluster-scoped
    slice; ``controller`` as upstream sets it, no ``blockOwnerDeletion``)."""
    return {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid, "controller": True}


def attribute(value: AttributeValue) -> JsonObject:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


def device_entry(device: DraDevice, driver: str) -> JsonObject:
    attributes = {name: attribute(value) for name, value in sorted(device.attributes.items())}
    pci = device.attributes.get("pciAddress")
    if isinstance(pci, str) and pci:
        attributes[PCI_BUS_ID_ATTRIBUTE] = {"string": pci}
    entry: JsonObject = {"name": device.name, "attributes": attributes}
    if device.memory_bytes > 0:
        entry["capacity"] = {"memory": {"value": str(device.memory_bytes)}}
    if device.health is Health.UNHEALTHY:
        entry["taints"] = [{"key": unhealthy_taint_key(driver), "value": "true", "effect": "NoSchedule"}]
    return entry


def build_slices(
    driver: str, node: str, devices: Sequence[DraDevice], generation: int, node_uid: str = ""
) -> list[JsonObject]:
    """The slices of this node's pool (at least one, possibly empty: an empty pool says "no devices").
    ``node_uid`` "" (the Node could not be found): no owner reference."""
    chunks = [devices[i : i + MAX_DEVICES_PER_SLICE] for i in range(0, len(devices), MAX_DEVICES_PER_SLICE)]
    chunks = chunks or [[]]
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {
                "name": slice_name(node, driver, index),
                "labels": {"app.kubernetes.io/managed-by": "hcs-deviceplugin"},
                **({"ownerReferences": [node_owner(node, node_uid)]} if node_uid else {}),
            },
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": len(chunks)},
                "devices": [device_entry(d, driver) for d in chunk],
            },
        }
        for index, chunk in enumerate(chunks)
    ]
