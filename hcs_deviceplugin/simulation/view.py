"""Plain-text tables of the daemon's pools, cards and the kubelet's allocations."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hcs_deviceplugin.daemon import DaemonView
from hcs_deviceplugin.kubeletsim import AllocationRecord, KubeletSimulator
from hcs_deviceplugin.model import Health


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


def pools_table(view: DaemonView, kubelet: KubeletSimulator) -> str:
    allocated = _allocated_by_resource(kubelet.allocations())
    resources = kubelet.resources()
    rows = []
    for name, pool_view in sorted(view.pools.items()):
        units = pool_view.units
        healthy = sum(1 for u in units if u.health is Health.HEALTHY)
        resource = resources.get(pool_view.pool.resource_name)
        seen = (
            f"{len(resource.healthy)}/{len(resource.healthy) + len(resource.unhealthy)}" if resource else "-"
        )
        mode = pool_view.pool.unit.value + (
            f" x{pool_view.pool.slices_per_unit}" if pool_view.pool.time_sliced else ""
        )
        rows.append(
            [
                name,
                pool_view.pool.resource_name,
                mode,
                f"{healthy}/{len(units)}",
                seen,
                str(len(allocated.get(pool_view.pool.resource_name, set()))),
                pool_view.server.status.value,
            ]
        )
    return table(["POOL", "RESOURCE", "MODE", "HEALTHY", "KUBELET SEES", "ALLOCATED", "REGISTRATION"], rows)


def _value(attribute: Mapping[str, Any]) -> str:
    return str(next(iter(attribute.values()), ""))


def dra_owners(devices: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """card id → "<pool> (dra)" for the cards a ResourceSlice publishes."""
    owners: dict[str, str] = {}
    for device in devices.values():
        attributes = device.get("attributes", {})
        card = _value(attributes.get("parent") or attributes.get("uuid", {}))
        owners[card] = f"{_value(attributes.get('pool', {}))} (dra)"
    return owners


def dra_table(devices: Mapping[str, Mapping[str, Any]]) -> str:
    rows = [
        [
            name,
            _value(device["attributes"].get("pool", {})),
            _value(device["attributes"].get("vendor", {})),
            _value(device["attributes"].get("uuid", {}))[:40],
            ", ".join(t["key"] for t in device.get("taints", [])) or "-",
        ]
        for name, device in sorted(devices.items())
    ]
    return table(["DEVICE", "POOL", "VENDOR", "UUID", "TAINTS"], rows) if rows else "(no DRA devices)"


def cards_table(view: DaemonView, extra_owners: Mapping[str, str] | None = None) -> str:
    owner: dict[str, str] = dict(extra_owners or {})
    for name, pool_view in view.pools.items():
        for unit in pool_view.units:
            owner[unit.card_id] = name
    rows = [
        [
            card.id[:40],
            card.vendor,
            card.model,
            "-" if card.numa_node is None else str(card.numa_node),
            card.health.value,
            owner.get(card.id, "draining" if card.id in view.draining else "-"),
        ]
        for card in view.cards
    ]
    return table(["CARD", "VENDOR", "MODEL", "NUMA", "HEALTH", "POOL"], rows)


def allocations_table(records: Sequence[AllocationRecord]) -> str:
    rows = [
        [f"{r.namespace}/{r.pod}", r.container, r.resource, ", ".join(r.device_ids)]
        for r in sorted(records, key=lambda r: (r.resource, r.pod))
    ]
    return table(["POD", "CONTAINER", "RESOURCE", "DEVICES"], rows) if rows else "(no allocations)"


def cdi_table(directory: Path) -> str:
    """The spec files in the CDI directory: which kind, how many devices, the first device's name."""
    rows = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            spec = json.loads(path.read_text())
            devices = spec["devices"]
            rows.append([path.name, spec["kind"], str(len(devices)), devices[0]["name"] if devices else "-"])
        except (OSError, ValueError, KeyError, TypeError, IndexError) as err:
            rows.append([path.name, f"unreadable: {err}", "-", "-"])
    return table(["FILE", "KIND", "DEVICES", "FIRST"], rows) if rows else "(no spec files)"


def render(
    view: DaemonView,
    kubelet: KubeletSimulator,
    log_lines: Sequence[str],
    cdi_dir: Path | None = None,
    dra_devices: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """The whole view; ``dra_devices`` (name → ResourceSlice device) adds the DRA pool's devices."""
    parts = [
        "Pools",
        pools_table(view, kubelet),
        "",
        "Cards",
        cards_table(view, dra_owners(dra_devices or {})),
        "",
        "Allocations (kubelet simulator)",
        allocations_table(kubelet.allocations()),
    ]
    if dra_devices is not None:
        parts += ["", "DRA ResourceSlice (this node's pool)", dra_table(dra_devices)]
    if cdi_dir is not None:
        parts += ["", f"CDI specs ({cdi_dir})", cdi_table(cdi_dir)]
    if view.config_errors:
        parts += ["", "Config errors", *view.config_errors]
    if view.absent_backends:
        parts += ["", "Absent backends", *(f"{k}: {v}" for k, v in view.absent_backends.items())]
    if log_lines:
        parts += ["", "Scenario", *log_lines]
    return "\n".join(parts)


def _allocated_by_resource(records: Sequence[AllocationRecord]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for record in records:
        out.setdefault(record.resource, set()).update(record.device_ids)
    return out
