"""Read-only probe of a real NVIDIA node through the real backend: what it discovers, what Allocate
would return, what health events arrive, and which NVML calls the driver does not support.

Run from the repository root on a GPU node:

    PYTHONPATH=. python3 vendors/nvidia/tools/probe_real.py [--library PATH] [--health-seconds 5]

It imports only ``vendors.nvidia`` and the model/backend modules (no gRPC), and it NEVER changes
anything: no MIG mode change, no GPU/compute instance created or destroyed, no reset, no
``partition()``. Output is one JSON document on stdout; logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hcs_deviceplugin.backend import BackendAbsent, BackendConfig
from hcs_deviceplugin.model import Card, HealthEvent, Inventory, Partition, Unit, replica_unit_id
from vendors.nvidia import create_backend, nvml, nvml_mig

STRATEGIES: tuple[dict[str, str], ...] = (
    {"deviceListStrategy": "envvar"},
    {"deviceListStrategy": "envvar", "deviceIDStrategy": "index"},
    {"deviceListStrategy": "volume-mounts"},
    {"deviceListStrategy": "cdi-annotations"},
    {"deviceListStrategy": "cdi-cri"},
    {"deviceListStrategy": "envvar,cdi-cri", "passDeviceSpecs": "true"},
    {"deviceListStrategy": "envvar", "passDeviceSpecs": "true", "deviceIDStrategy": "index"},
)


def _card_json(card: Card) -> dict[str, object]:
    return {
        "id": card.id,
        "model": card.model,
        "index": card.index,
        "pci_address": card.pci_address,
        "pci_vendor_id": f"{card.pci_vendor_id:04x}",
        "pci_device_id": f"{card.pci_device_id:04x}",
        "numa_node": card.numa_node,
        "memory_bytes": card.memory_bytes,
        "health": str(card.health),
        "attributes": dict(card.attributes),
    }


def _partition_json(part: Partition) -> dict[str, object]:
    return {
        "id": part.id,
        "card_id": part.card_id,
        "profile": part.profile,
        "memory_bytes": part.memory_bytes,
        "health": str(part.health),
        "attributes": dict(part.attributes),
    }


def _inventory_json(inventory: Inventory) -> dict[str, object]:
    return {
        "cards": [_card_json(c) for c in inventory.cards],
        "partitions": [_partition_json(p) for p in inventory.partitions],
        "links": [
            {"between": sorted(pair), "links": [[str(k.kind), k.count, k.bandwidth_gbps] for k in links]}
            for pair, links in inventory.links.links.items()
        ],
    }


def _timed(call: Callable[[], object]) -> dict[str, object]:
    start = time.perf_counter()
    try:
        value: object = call()
        result: dict[str, object] = {"ok": repr(value)}
    except nvml.NvmlError as err:
        result = {"error": str(err), "code": err.code}
    except Exception as err:  # a probe reports everything it sees
        result = {"error": repr(err)}
    result["ms"] = round((time.perf_counter() - start) * 1000, 3)
    return result


def _raw_calls(card_id: str, peer_id: str | None) -> dict[str, object]:
    """Read-only NVML calls on one card, each with its answer or error (the degrade paths)."""
    handle = nvml.handle_by_uuid(card_id)
    peer = nvml.handle_by_uuid(peer_id) if peer_id else handle
    calls: dict[str, Callable[[], object]] = {
        "nvmlDeviceGetNumaNodeId": lambda: nvml.numa_node_id(handle),
        "nvmlDeviceGetMemoryAffinity": lambda: nvml.memory_affinity_nodes(handle),
        "nvmlDeviceGetCudaComputeCapability": lambda: nvml.compute_capability(handle),
        "nvmlDeviceGetTopologyCommonAncestor": lambda: nvml.common_ancestor(handle, peer),
        "nvmlDeviceGetNvLinkState(0)": lambda: nvml.nvlink_active(handle, 0),
        "nvmlDeviceGetNvLinkVersion(0)": lambda: nvml.nvlink_version(handle, 0),
        "nvmlDeviceGetNvLinkRemotePciInfo_v2(0)": lambda: nvml.nvlink_remote_pci(handle, 0),
        "nvmlDeviceGetNvLinkRemoteDeviceType(0)": lambda: nvml.nvlink_remote_type(handle, 0),
        "nvmlDeviceGetMigMode": lambda: nvml.mig_mode(handle),
        "nvmlDeviceGetMaxMigDeviceCount": lambda: nvml.max_mig_device_count(handle),
        "nvmlDeviceIsMigDeviceHandle": lambda: nvml.is_mig_device(handle),
        "nvmlDeviceGetAttributes_v2": lambda: nvml_mig.attributes(handle),
        "nvmlDeviceGetSupportedEventTypes": lambda: hex(nvml.supported_event_types(handle)),
        "nvmlDeviceGetIndex": lambda: nvml.index(handle),
        "nvmlDeviceGetMinorNumber": lambda: nvml.minor_number(handle),
    }
    for index in range(nvml.GPU_INSTANCE_PROFILE_COUNT):
        calls[f"nvmlDeviceGetGpuInstanceProfileInfoV({index})"] = partial(
            nvml_mig.gpu_instance_profile, handle, index
        )
    return {name: _timed(call) for name, call in calls.items()}


def _edits(backend_edits: Callable[..., object], units: list[Unit]) -> list[dict[str, object]]:
    results: list[dict[str, object]] = []
    for options in STRATEGIES:
        try:
            edits = backend_edits(units, options)
            results.append({"options": options, "edits": repr(edits)})
        except Exception as err:
            results.append({"options": options, "error": repr(err)})
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--library", help="path of libnvidia-ml.so.1 (default: the loader's search)")
    parser.add_argument("--host-root", default="/", type=Path)
    parser.add_argument("--health-seconds", default=5.0, type=float)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")

    options = {"library": args.library} if args.library else {}
    config = BackendConfig(host_root=args.host_root, options=options)
    report: dict[str, object] = {}
    start = time.perf_counter()
    try:
        backend = create_backend(config)
    except BackendAbsent as err:
        print(json.dumps({"absent": str(err)}, indent=2))
        return 1
    report["library"] = backend.library
    report["create_ms"] = round((time.perf_counter() - start) * 1000, 3)
    try:
        report["driver_version"] = nvml.driver_version()
        start = time.perf_counter()
        inventory = backend.discover()
        report["discover_ms"] = round((time.perf_counter() - start) * 1000, 3)
        report["inventory"] = _inventory_json(inventory)
        if inventory.cards:
            card = inventory.cards[0]
            peer = inventory.cards[1].id if len(inventory.cards) > 1 else None
            report["raw_calls"] = _raw_calls(card.id, peer)
            card_units = [
                Unit(id=replica_unit_id(card.id, r), card_id=card.id, backend="nvidia", replica=r)
                for r in (0, 1)
            ]
            report["container_edits_card"] = _edits(backend.container_edits, card_units)
        if inventory.partitions:
            part = inventory.partitions[0]
            part_units = [Unit(id=part.id, card_id=part.card_id, backend="nvidia", partition_id=part.id)]
            report["container_edits_mig"] = _edits(backend.container_edits, part_units)

        events: list[HealthEvent] = []

        def consume() -> None:
            for event in backend.health_events():
                events.append(event)

        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        thread.join(args.health_seconds)
        config.stop.set()
        thread.join(5.0)
        report["health_events"] = [[e.device_id, str(e.health), e.reason] for e in events]
        report["health_thread_stopped"] = not thread.is_alive()
    finally:
        backend.close()
    print(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
