"""Choosing which units to hand out when kubelet asks for a preferred allocation.

A pure function of its inputs so it can be tested in tables. This first version honours
``must_include`` and ``size`` exactly, never returns a unit that is not available, spreads time-slice
replicas over distinct cards (two replicas of one card give a container no more hardware), and
among equally spread choices keeps the request on one NUMA node, then picks the least-loaded card
(fewest replicas already held). Topology scores
(NVLink/HCCS/xGMI/...) come later; the signature stays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hcs_deviceplugin.model import Unit


def preferred_allocation(
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    units: Mapping[str, Unit],
) -> list[str]:
    """Up to ``size`` unit ids: all of ``must_include`` first, then the best of ``available``.

    Ids unknown to ``units`` are still eligible (kubelet decides availability) but rank last, since
    nothing is known of their card or NUMA node.
    """
    chosen: list[str] = list(dict.fromkeys(must_include))[: max(size, 0)]
    if len(chosen) >= size:
        return chosen
    candidates = [uid for uid in dict.fromkeys(available) if uid not in chosen]
    load = hardware_load(units, set(available) | set(chosen))
    while len(chosen) < size and candidates:
        best = min(candidates, key=lambda uid: _rank(uid, chosen, units, load))
        chosen.append(best)
        candidates.remove(best)
    return chosen


def hardware_load(units: Mapping[str, Unit], free: set[str]) -> dict[str, int]:
    """Replicas in use per card or partition: the pool's units of it that kubelet did not offer.

    Kubelet offers every healthy unit that no container holds, so what is missing from its offer
    is (to within unhealthy units) what is allocated; no extra state is needed to balance load.
    """
    load: dict[str, int] = {}
    for uid, unit in units.items():
        if uid not in free:
            load[unit.hardware_id] = load.get(unit.hardware_id, 0) + 1
    return load


def _rank(
    uid: str, chosen: Sequence[str], units: Mapping[str, Unit], load: Mapping[str, int]
) -> tuple[int, int, int, int, str]:
    unit = units.get(uid)
    if unit is None:
        return (2, 0, 0, 0, uid)
    chosen_units = [units[c] for c in chosen if c in units]
    used_cards = {u.hardware_id for u in chosen_units}
    numa_nodes = {u.numa_node for u in chosen_units if u.numa_node is not None}
    other_numa = int(bool(numa_nodes) and unit.numa_node not in numa_nodes)
    same_card = int(unit.hardware_id in used_cards)
    return (0, same_card, other_numa, load.get(unit.hardware_id, 0), uid)
