"""Kubelet's ``kubelet_internal_checkpoint``: allocations and registered devices as checksummed JSON.

The layout follows kubelet (``{"Data": {"PodDeviceEntries": [...], "RegisteredDevices": {...}},
"Checksum": N}``, AllocResp = base64 of the serialized ContainerAllocateResponse) so a test can read it
like an operator would. Two fields are ours: ``PodNamespace`` and ``PodName`` on each entry, because
kubelet gets those from its pod manager and the simulator has none. The checksum is CRC-32 of the
canonical Data JSON (kubelet hashes differently; nothing outside the simulator verifies it).
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hcs_deviceplugin.api.deviceplugin.v1beta1 import api_pb2 as dp
from hcs_deviceplugin.kubeletsim.allocations import pod_uid
from hcs_deviceplugin.kubeletsim.records import AllocationRecord

CHECKPOINT_NAME = "kubelet_internal_checkpoint"


class CheckpointError(Exception):
    """The file exists but cannot be trusted (bad JSON, wrong shape or checksum mismatch)."""


@dataclass(frozen=True)
class Checkpoint:
    allocations: tuple[AllocationRecord, ...]
    registered_devices: Mapping[str, tuple[str, ...]]


def _checksum(data: Mapping[str, Any]) -> int:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return zlib.crc32(canonical)


def _entry(record: AllocationRecord) -> dict[str, Any]:
    by_numa = record.devices_by_numa or {-1: record.device_ids}
    return {
        "PodUID": record.pod_uid or pod_uid(record.namespace, record.pod),
        "PodNamespace": record.namespace,
        "PodName": record.pod,
        "ContainerName": record.container,
        "ResourceName": record.resource,
        "DeviceIDs": {str(node): list(ids) for node, ids in by_numa.items()},
        "AllocResp": base64.b64encode(record.response.SerializeToString()).decode("ascii"),
    }


def encode(allocations: Iterable[AllocationRecord], registered_devices: Mapping[str, Iterable[str]]) -> bytes:
    """Serialize to kubelet's layout with our checksum."""
    data = {
        "PodDeviceEntries": [_entry(rec) for rec in allocations],
        "RegisteredDevices": {name: list(ids) for name, ids in registered_devices.items()},
    }
    return json.dumps({"Data": data, "Checksum": _checksum(data)}, indent=1).encode()


def _record(entry: Mapping[str, Any]) -> AllocationRecord:
    response = dp.ContainerAllocateResponse()
    response.ParseFromString(base64.b64decode(entry["AllocResp"]))
    by_numa = {int(node): tuple(ids) for node, ids in entry["DeviceIDs"].items()}
    device_ids = sorted({dev for ids in by_numa.values() for dev in ids})
    return AllocationRecord(
        namespace=entry["PodNamespace"],
        pod=entry["PodName"],
        container=entry["ContainerName"],
        resource=entry["ResourceName"],
        device_ids=tuple(device_ids),
        response=response,
        pod_uid=entry["PodUID"],
        devices_by_numa=dict(sorted(by_numa.items())),
    )


def decode(raw: bytes) -> Checkpoint:
    """Parse and verify; raises CheckpointError on anything kubelet would call corrupt."""
    try:
        document = json.loads(raw)
        data = document["Data"]
        if document["Checksum"] != _checksum(data):
            raise CheckpointError("checkpoint is corrupted: checksum mismatch")
        allocations = tuple(_record(entry) for entry in data.get("PodDeviceEntries") or [])
        registered = {name: tuple(ids) for name, ids in (data.get("RegisteredDevices") or {}).items()}
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"checkpoint is corrupted: {exc!r}") from exc
    return Checkpoint(allocations=allocations, registered_devices=registered)


def read(path: Path) -> Checkpoint | None:
    """The checkpoint at ``path``, or None when there is none (kubelet then assumes a new node)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    return decode(raw)


def write(
    path: Path, allocations: Iterable[AllocationRecord], registered: Mapping[str, Iterable[str]]
) -> None:
    """Replace the file atomically (temp file in the same dir + rename) so a reader never sees half."""
    raw = encode(allocations, registered)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
