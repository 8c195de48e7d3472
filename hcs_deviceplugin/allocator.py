"""Choosing which units to hand out when kubelet asks for a preferred allocation.

The public entry of :mod:`hcs_deviceplugin.allocation`: pure functions of their inputs, tested in
tables over real topologies and by properties over random ones. The rules, in order: honour
``must_include`` and ``size`` exactly and never return an id kubelet did not offer; keep to the
groups and modules a backend declares (e.g. HCCS rings, two-die modules); spread time-slice replicas
over distinct, least-loaded cards (or pack them, by policy); pick the set whose weakest link is
strongest (fabric links, then the same PCIe switch, host bridge, NUMA node); among equals, leave the
free cards most useful for the next request. See the package modules for weights and the contract.

A pool that serves many requests builds a :class:`Topology` once per inventory change and calls
:meth:`Topology.preferred`; :func:`preferred_allocation` builds it per call, which is what the gRPC
servicer does until pools pass their topology.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hcs_deviceplugin.allocation import Topology
from hcs_deviceplugin.allocation.policy import ReplicaPolicy, hardware_load
from hcs_deviceplugin.model import Card, LinkMatrix, Unit

__all__ = ["ReplicaPolicy", "Topology", "hardware_load", "preferred_allocation"]


def preferred_allocation(
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    units: Mapping[str, Unit],
    *,
    links: LinkMatrix | None = None,
    cards: Mapping[str, Card] | None = None,
    policy: ReplicaPolicy = ReplicaPolicy.SPREAD,
) -> list[str]:
    """Up to ``size`` unit ids: all of ``must_include`` first, then the best of ``available``.

    ``units`` are the pool's units by id (held ones too: the load of a card is its units kubelet
    did not offer). ``links`` and ``cards`` come from the inventory; without them cards are known
    only through their units (NUMA node), which still spreads and balances. Ids unknown to ``units``
    are still eligible (kubelet decides availability) but rank last.
    """
    topology = Topology.build((cards or {}).values(), links, units, prepare=False)
    return topology.preferred(available, must_include, size, units, policy)
