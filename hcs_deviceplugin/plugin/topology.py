"""A pool's topology as its server keeps it: the cards, links and units it is built from, and the
:class:`~hcs_deviceplugin.allocation.topology.Topology` itself once something asks for it.

Only ``GetPreferredAllocation`` reads a topology; ListAndWatch and Allocate never do. Building one
(pair scores, islands, the tree of blocks and its tables) and loading the allocator's modules cost
milliseconds that a start would spend before its pools stream, so a pool is served with its
topology pending: ``run`` builds every pool's once they stream (``Daemon.prepare_allocation``,
before the heap is frozen), and from then on the applier builds each new one right after the pool
serves it. A ``GetPreferredAllocation`` that comes first builds it itself (the one answer it gives
is the same). This module is the only part of the plugin that knows the allocator's modules, and
it imports them only then.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hcs_deviceplugin.model import Card, LinkMatrix, Unit

if TYPE_CHECKING:
    from hcs_deviceplugin.allocation.topology import Topology


class PoolTopology:
    """One pool's topology, built once on first :meth:`get` (under a lock: a request and the
    daemon's preparation may ask at once) and immutable from then on, like the snapshot holding it."""

    __slots__ = ("_built", "_inputs", "_lock")

    def __init__(
        self, cards: Sequence[Card] = (), links: LinkMatrix | None = None, units: Sequence[Unit] = ()
    ) -> None:
        self._inputs: tuple[tuple[Card, ...], LinkMatrix | None, tuple[Unit, ...]] | None = (
            tuple(cards),
            links,
            tuple(units),
        )
        self._built: Topology | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._built is not None

    def get(self) -> Topology:
        """The topology, built now if nothing has asked before (O(cards²) once, see
        :meth:`Topology.build`)."""
        built = self._built
        if built is not None:
            return built
        with self._lock:
            if self._built is None:
                from hcs_deviceplugin.allocation.topology import Topology

                assert self._inputs is not None  # dropped only once built
                cards, links, units = self._inputs
                self._built = Topology.build(cards, links, units)
                self._inputs = None  # the topology keeps what it needs of them
            return self._built
