"""The node report: what this node has, how healthy it is, and what is handed out, as one JSON value.

``/report`` serves it and ``hcs-deviceplugin inspect`` prints it. Devices use the device shape of the
HCS ``ComputeNode`` API so the control plane can read a report without translating it; the fields
after ``healthScore`` are ours (pool membership, held units).

Shape (every key always present; ``null`` where the node does not know)::

    {
      "node": "worker-1",
      "devices": [{
        "id": "GPU-fb79...",                # the card's stable id (NVIDIA UUID, Ascend chip id, PCI address)
        "vendor": "nvidia", "model": "NVIDIA H100 80GB HBM3", "backend": "nvidia", "index": 0,
        "vram": 85520809984,               # bytes of device memory
        "vramAllocatable": 85520809984,    # bytes a pool offers now: vram if Healthy and advertised, else 0
        "vramAllocated": 0,                # bytes containers hold (held share of units; all if draining)
        "topology": {
          "busId": "0000:17:00.0", "numaNode": 0,
          "links": [{"peer": "GPU-496c...", "type": "NVLink", "count": 6, "bandwidth": 1200.0}]
        },                                  # bandwidth: Gbit/s per direction, 0 = unknown
        "healthScore": 100,                 # 0-100, rule in health_score()
        "health": "Healthy",
        "pool": "team-a",                   # the pool advertising it, null if none (unassigned, draining)
        "units": ["GPU-fb79..."],           # unit ids it is advertised as
        "heldUnits": ["GPU-fb79..."],       # unit ids running containers hold
        "heldResource": "gpu.deckhouse.io/team-a",  # resource the held units were allocated under, or null
        "heldBy": ["default/trainer/main"]  # namespace/pod/container of each holder (pod-resources)
      }],
      "allocations": [{                     # one per unit a container holds, as pod-resources lists it
        "namespace": "default", "pod": "trainer", "container": "main",
        "resource": "gpu.deckhouse.io/team-a", "device": "GPU-fb79...", "card": "GPU-fb79..."
      }],
      "pools": [{
        "name": "team-a", "resource": "gpu.deckhouse.io/team-a",
        "mode": "Exclusive",                # Exclusive | Partition | TimeSlice
        "unit": "Card", "slicesPerUnit": 1, "profile": null,
        "sharing": null, "memoryPerReplica": null,   # a backend-enforced mode ("mps"), bytes per replica
        "units": 2, "healthy": 2, "allocated": 1,
        "registration": {"status": "registered", "registrations": 1, "lastError": "", "openStreams": 1}
      }],
      "conflicts": [{"card": "...", "pools": ["a", "b"]}],
      "draining": [{"card": "...", "heldResource": "gpu.deckhouse.io/a", "targetPool": "b",
                    "seconds": 12.5}],       # seconds since the card started draining
      "configErrors": ["..."], "layoutErrors": ["..."],
      "backends": [{"name": "nvidia", "state": "running", "reason": ""}]
    }

The report is built from one ``DaemonView`` (plus the link matrix, which the view does not carry), so
it is consistent: a card is never shown in a pool and draining at once.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from hcs_deviceplugin.daemon import DaemonView, PoolView
from hcs_deviceplugin.kubelet.podresources import DeviceAllocation
from hcs_deviceplugin.model import Card, Health, LinkMatrix, Pool, Unit, UnitKind
from hcs_deviceplugin.observability.metrics import backend_states, held_units_by_resource, pool_of_cards

JSON = dict[str, Any]

DRAINING_PENALTY = 25
CONFLICT_PENALTY = 50


def health_score(
    card: Card,
    units: Sequence[Unit] = (),
    backend_failed: bool = False,
    draining: bool = False,
    conflicted: bool = False,
) -> int:
    """How usable the card is, 0-100, for ranking and dashboards.

    * 0 when the card is Unhealthy or its backend has failed (nothing on it can be trusted).
    * Otherwise 100 scaled by the share of its advertised units that are Healthy, so a card with
      one bad MIG instance of two scores 50 (a card advertised as nothing counts as 100).
    * Minus 25 while draining: healthy and in use, but its new pool cannot schedule on it until the
      holding container ends.
    * Minus 50 while in a pool conflict: no new claimant gets it until the config is fixed.
    """
    if card.health is not Health.HEALTHY or backend_failed:
        return 0
    score = 100
    if units:
        score = round(100 * sum(1 for u in units if u.health is Health.HEALTHY) / len(units))
    if draining:
        score -= DRAINING_PENALTY
    if conflicted:
        score -= CONFLICT_PENALTY
    return max(score, 0)


def pool_mode(pool: Pool) -> str:
    """The allocation mode in the control plane's words (ARCHITECTURE.md, "Vocabulary")."""
    if pool.time_sliced:
        return "TimeSlice"
    return "Partition" if pool.unit is UnitKind.PARTITION else "Exclusive"


def card_links(card: Card, cards: Sequence[Card], links: LinkMatrix) -> list[JSON]:
    """Every link from ``card`` to another card of the node, best kind first per peer."""
    out: list[JSON] = []
    for peer in cards:
        if peer.id == card.id:
            continue
        for link in links.between(card.id, peer.id):
            out.append(
                {
                    "peer": peer.id,
                    "type": link.kind.value,
                    "count": link.count,
                    "bandwidth": link.bandwidth_gbps,
                }
            )
    return out


def allocated_bytes(card: Card, units: Sequence[Unit], held: Sequence[str]) -> int:
    """Bytes containers hold: the held share of the card's units, or all of it when held but no longer
    advertised (draining). Partitions count equally whatever their profile: the view has no sizes."""
    if not held:
        return 0
    if not units:
        return card.memory_bytes
    return card.memory_bytes * min(len(held), len(units)) // len(units)


def card_of_units(view: DaemonView) -> dict[str, str]:
    """Unit id → card id for every unit the view knows: advertised ones and held ones (a draining
    card's units are advertised nowhere, but its holders are still on it)."""
    out = {card.id: card.id for card in view.cards}
    for card_id, held in view.held.items():
        out.update(dict.fromkeys(held.unit_ids, card_id))
    for pool_view in view.pools.values():
        out.update({unit.id: unit.card_id for unit in pool_view.units})
    return out


def holder(allocation: DeviceAllocation) -> str:
    """``namespace/pod/container``: how a report row and ``inspect`` name who holds a unit."""
    return f"{allocation.namespace}/{allocation.pod}/{allocation.container}"


def holders_by_card(view: DaemonView, card_of: Mapping[str, str]) -> dict[str, list[str]]:
    """Card id → sorted holders of any of its units."""
    out: dict[str, set[str]] = {}
    for allocation in view.allocations:
        card_id = card_of.get(allocation.device)
        if card_id is not None:
            out.setdefault(card_id, set()).add(holder(allocation))
    return {card_id: sorted(names) for card_id, names in out.items()}


def _device(
    card: Card,
    view: DaemonView,
    links: LinkMatrix,
    owner: dict[str, str],
    holders: Mapping[str, list[str]],
) -> JSON:
    pool_name = owner.get(card.id)
    units = [u for u in view.pools[pool_name].units if u.card_id == card.id] if pool_name else []
    held = view.held.get(card.id)
    held_ids = sorted(held.unit_ids) if held is not None else []
    advertised = bool(units) and card.health is Health.HEALTHY
    return {
        "id": card.id,
        "vendor": card.vendor,
        "model": card.model,
        "backend": card.backend,
        "index": card.index,
        "vram": card.memory_bytes,
        "vramAllocatable": card.memory_bytes if advertised else 0,
        "vramAllocated": allocated_bytes(card, units, held_ids),
        "topology": {
            "busId": card.pci_address or None,
            "numaNode": card.numa_node,
            "links": card_links(card, view.cards, links),
        },
        "healthScore": health_score(
            card,
            units,
            backend_failed=card.backend in view.failed_backends,
            draining=card.id in view.draining,
            conflicted=card.id in view.conflicts,
        ),
        "health": card.health.value,
        "pool": pool_name,
        "units": [u.id for u in units],
        "heldUnits": held_ids,
        "heldResource": held.resource if held is not None else None,
        "heldBy": list(holders.get(card.id, [])),
    }


def _pool(name: str, pool_view: PoolView, held: frozenset[str]) -> JSON:
    pool = pool_view.pool
    server = pool_view.server
    return {
        "name": name,
        "resource": pool.resource_name,
        "mode": pool_mode(pool),
        "unit": pool.unit.value,
        "slicesPerUnit": pool.slices_per_unit,
        "profile": pool.profile,
        "sharing": pool.sharing or None,
        "memoryPerReplica": pool.memory_per_replica,
        "units": len(pool_view.units),
        "healthy": sum(1 for u in pool_view.units if u.health is Health.HEALTHY),
        "allocated": sum(1 for u in pool_view.units if u.id in held),
        "registration": {
            "status": server.status.value,
            "registrations": server.registrations,
            "lastError": server.last_error,
            "openStreams": server.open_streams,
        },
    }


def build_report(view: DaemonView, node_name: str, links: LinkMatrix | None = None) -> JSON:
    """The node report (shape in the module docstring). Pure but for the draining ages, which are
    measured against the clock when it is built."""
    matrix = links if links is not None else LinkMatrix()
    owner = pool_of_cards(view)
    held = held_units_by_resource(view)
    card_of = card_of_units(view)
    holders = holders_by_card(view, card_of)
    now = time.monotonic()
    return {
        "node": node_name,
        "devices": [_device(card, view, matrix, owner, holders) for card in view.cards],
        "allocations": [
            {
                "namespace": a.namespace,
                "pod": a.pod,
                "container": a.container,
                "resource": a.resource,
                "device": a.device,
                "card": card_of.get(a.device),
            }
            for a in view.allocations
        ],
        "pools": [
            _pool(name, pool_view, held.get(pool_view.pool.resource_name, frozenset()))
            for name, pool_view in sorted(view.pools.items())
        ],
        "conflicts": [{"card": card, "pools": list(pools)} for card, pools in sorted(view.conflicts.items())],
        "draining": [
            {
                "card": card,
                "heldResource": resource,
                "targetPool": target,
                "seconds": _since(view.draining_since.get(card), now),
            }
            for card, (resource, target) in sorted(view.draining.items())
        ],
        "configErrors": list(view.config_errors),
        "layoutErrors": list(view.layout_errors),
        "backends": [
            {"name": name, "state": state, "reason": reason}
            for name, (state, reason) in backend_states(view).items()
        ],
    }


def _since(started: float | None, now: float) -> float | None:
    return None if started is None else round(max(0.0, now - started), 3)
