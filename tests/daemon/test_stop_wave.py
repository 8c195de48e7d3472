"""A daemon's stop begins its watchers' stops beside the plugin servers', not after them.

A watcher's stop closes an inotify instance, and the kernel's close waits out a grace period
(fsnotify's SRCU, up to some 20 ms) doing nothing; the exit would wait it out anyway. Begun after
every socket was gone, that wait came on top of the servers' stops; begun first, it passes while
they work. A pool source sees which: whether the plugin sockets are still in place when its stop
begins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from hcs_deviceplugin.daemon import Daemon, DaemonConfig
from hcs_deviceplugin.model import PoolSet
from hcs_deviceplugin.plugin.server import Backoff
from hcs_deviceplugin.pools.directory import DirectoryPoolSource
from tests.integration.conftest import H100, Node, card_pool, pool_doc

POOLS = ("a", "b", "c", "d")


class SocketsAtStop:
    """A pool source that delivers nothing and notes the plugin sockets in place as its stop begins."""

    def __init__(self, plugin_dir: Path) -> None:
        self.plugin_dir = plugin_dir
        self.seen: list[str] | None = None

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.seen = sorted(p.name for p in self.plugin_dir.glob("hcs-*.sock"))


def test_the_sources_stop_begins_while_the_plugin_sockets_are_still_in_place(node: Node) -> None:
    node.write_pools(pool_doc(*(card_pool(name, card) for name, card in zip(POOLS, H100, strict=False))))
    daemon = Daemon(
        DaemonConfig(
            plugin_dir=node.plugin_dir,
            node_name="node-1",
            backend_retry=Backoff(initial=0.05, maximum=0.2),
            registration_backoff=Backoff(initial=0.02, maximum=0.2),
        ),
        {node.backend.name: node.backend},
    )
    watcher = SocketsAtStop(node.plugin_dir)

    def directory(on_change: Callable[[PoolSet, Sequence[object]], None]) -> DirectoryPoolSource:
        return DirectoryPoolSource(node.pools_dir, on_change)

    daemon.add_source(directory)
    daemon.add_source(lambda _on_change: watcher)
    daemon.start()
    try:
        node.wait_registered(*POOLS)
    finally:
        daemon.stop()
    assert watcher.seen, "the source's stop began only once every plugin socket was gone"
    assert not list(node.plugin_dir.glob("hcs-*.sock")), "and the stop still removed every socket"
