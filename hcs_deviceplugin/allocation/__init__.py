"""Topology-aware choice of units for ``GetPreferredAllocation``, vendor-neutral and pure.

``links`` scores card pairs and sets, ``topology`` precomputes a node's scores and islands (and
documents what a backend may provide), ``hierarchy`` solves nodes built in levels exactly,
``select`` holds the objective and searches card sets, ``policy`` maps kubelet's unit ids to cards
and back. :mod:`hcs_deviceplugin.allocator` is the public entry.
"""

from typing import TYPE_CHECKING

from hcs_deviceplugin.allocation.links import SetScore, pair_score, set_score
from hcs_deviceplugin.allocation.topology import (
    GROUP_ATTRIBUTE,
    GROUP_SIZES_ATTRIBUTE,
    MODULE_ATTRIBUTE,
    Topology,
)

if TYPE_CHECKING:
    from hcs_deviceplugin.allocation.policy import ReplicaPolicy, choose_units, hardware_load

_FROM_POLICY = frozenset({"ReplicaPolicy", "choose_units", "hardware_load"})
"""Loaded on first use: a pool's :class:`Topology` is built before its devices stream, while the
search (``policy``, ``select``) runs only when kubelet first asks for a preferred allocation."""


def __getattr__(name: str) -> object:
    if name in _FROM_POLICY:
        from hcs_deviceplugin.allocation import policy

        return getattr(policy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GROUP_ATTRIBUTE",
    "GROUP_SIZES_ATTRIBUTE",
    "MODULE_ATTRIBUTE",
    "ReplicaPolicy",
    "SetScore",
    "Topology",
    "choose_units",
    "hardware_load",
    "pair_score",
    "set_score",
]
