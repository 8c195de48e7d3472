"""Topology-aware choice of units for ``GetPreferredAllocation``, vendor-neutral and pure.

``links`` scores card pairs and sets, ``topology`` precomputes a node's scores and islands (and
documents what a backend may provide), ``hierarchy`` solves nodes built in levels exactly,
``select`` holds the objective and searches card sets, ``policy`` maps kubelet's unit ids to cards
and back. :mod:`hcs_deviceplugin.allocator` is the public entry. The search (``policy``, ``select``)
is imported from its modules, not from here. A ``run`` loads none of this package before its pools
stream: each pool's :class:`Topology` waits in ``plugin.topology.PoolTopology`` until the daemon
prepares for GetPreferredAllocation (``Daemon.prepare_allocation``) or the first call comes.
"""

from hcs_deviceplugin.allocation.links import SetScore, pair_score, set_score
from hcs_deviceplugin.allocation.topology import (
    GROUP_ATTRIBUTE,
    GROUP_SIZES_ATTRIBUTE,
    MODULE_ATTRIBUTE,
    Topology,
)

__all__ = [
    "GROUP_ATTRIBUTE",
    "GROUP_SIZES_ATTRIBUTE",
    "MODULE_ATTRIBUTE",
    "SetScore",
    "Topology",
    "pair_score",
    "set_score",
]
