"""A pool server for :func:`bench.allocator_bench.socket_latency`, in a process of its own.

Kubelet is another process, so the bench's client must not share the server's interpreter lock:
in one process every send of the server waits for the client's thread to let go of it, which is
no cost kubelet causes. Usage: ``python -m bench.allocator_server CARDS SLICES DIR``; serves the
island node of ``CARDS`` cards (``SLICES`` replicas each) on a socket in ``DIR``, prints the socket
path once it answers, and stops when its standard input closes.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from hcs_deviceplugin.heap import settle
from hcs_deviceplugin.model import ContainerEdits, Pool
from hcs_deviceplugin.plugin.server import PluginServer
from hcs_deviceplugin.plugin.sockets import socket_answers
from hcs_deviceplugin.plugin.topology import PoolTopology
from tests.allocator.islands import island_node


def main(cards: int, slices: int, root: Path) -> None:
    logging.basicConfig(level=logging.CRITICAL)  # no kubelet here: registration retries quietly
    node = island_node(cards)
    units = node.whole() if slices == 1 else node.replicas(slices)
    server = PluginServer(
        Pool("bench", "gpu.deckhouse.io/bench", slices_per_unit=slices),
        list(units.values()),
        root,
        lambda _pool, _units: ContainerEdits(),
        topology=PoolTopology(node.cards, node.links, list(units.values())),
    )
    server.start()
    try:
        deadline = time.monotonic() + 10.0
        while not socket_answers(server.socket_path, timeout=1.0):  # the lifecycle thread binds it
            if time.monotonic() > deadline:
                raise SystemExit(f"{server.socket_path} does not answer")
            time.sleep(0.01)
        server.prepare_allocation()  # as ``run`` does once its pools stream, then settles
        settle()
        print(server.socket_path, flush=True)
        sys.stdin.read()
    finally:
        server.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
